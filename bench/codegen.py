"""How long generating and cold-building a benchmark project takes.

    PYTHONPATH=. python bench/codegen.py [--models DIR] [--batch 1] [--dtype fp32] [--api LIST] [--no-build]

Loads every model of the directory (default: the nine ONNX light zoo models that
ship with the onnx package), plans, generates, then configures and builds the
project from scratch with CMake + Ninja, and prints the slowest compile steps.
Targets: generate < 5 s, cold build < 120 s on 2 cores.  ``--api`` restricts the
plan (e.g. the legacy cuDNN + cuBLAS set without the cudnn-frontend graph API,
whose two sources dominate the build).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

from benanza.cli.generate import parse_apis
from benanza.generate import codegen
from benanza.generate.plan import plan
from benanza.model.onnx_import import load_models

ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=ZOO)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--api", default=None, help="comma-separated Api values or executable slugs (default: all)")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--keep", type=Path, help="generate here instead of a temporary directory")
    args = ap.parse_args()

    out = args.keep or Path(tempfile.mkdtemp(prefix="benanza-bench-"))
    t0 = time.perf_counter()
    models, errors = load_models(args.models, batch=args.batch)
    t1 = time.perf_counter()
    p = plan(models, args.dtype.split(","), apis=parse_apis(args.api), ceilings=args.api is None)
    t2 = time.perf_counter()
    manifest = codegen.generate(p, out, f"bench/codegen.py --models {args.models.name}")
    t3 = time.perf_counter()
    print(f"models: {len(models)} ({len(errors)} failed), layers: {sum(len(m.layers) for m in models)}")
    print(f"jobs: {len(manifest.jobs)}, benchmarks: {len(manifest.benchmarks)}, executables: "
          + ", ".join(f"{exe} ({spec['num_jobs']})" for exe, spec in manifest.executables.items()))
    print(f"load {t1 - t0:.2f} s, plan {t2 - t1:.2f} s, generate {t3 - t2:.2f} s "
          f"(generate total {t3 - t0:.2f} s, target < 5 s)")
    if args.no_build:
        return 0
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    env = {**os.environ, "PATH": f"{Path(nvcc).parent}:{os.environ['PATH']}"}
    build = out / "build"
    shutil.rmtree(build, ignore_errors=True)
    t4 = time.perf_counter()
    subprocess.run(["cmake", "-S", str(out), "-B", str(build), "-G", "Ninja", f"-DCMAKE_CUDA_COMPILER={nvcc}"],
                   check=True, capture_output=True, env=env)
    t5 = time.perf_counter()
    done = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True, env=env)
    t6 = time.perf_counter()
    if done.returncode:
        print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
        return 1
    print(f"configure {t5 - t4:.1f} s, build {t6 - t5:.1f} s on {os.cpu_count()} cores "
          f"(cold total {t6 - t4:.1f} s, target < 120 s)")
    steps = [line.split("\t") for line in (build / ".ninja_log").read_text().splitlines()[1:]]
    slowest = sorted(steps, key=lambda f: int(f[0]) - int(f[1]))[:3]
    print("slowest steps: " + ", ".join(f"{Path(f[3]).name} {(int(f[1]) - int(f[0])) / 1000:.1f} s" for f in slowest))
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
