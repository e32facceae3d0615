"""How long `benanza analyze` (first and later calls) and `benanza generate` take, in wall and CPU seconds.

    .venv/bin/python bench/analysis_time.py [--bundle perfdb/bundles/resnet50_b64_ort_fp32] [--zoo models/zoo]
                                            [--repeat 3] [--pyc both|with|without]

Targets (issue 17, a CPU-only 2-core machine): `analyze` of a shipped batch-64 bundle < 10 s on
the first call and < 1 s after it (the parsed bundle parts and the analysis's prepared inputs are
cached: benanza/profile/parse_cache.py, benanza/workflows/analysis_cache.py); `generate` of the zoo at batches
1,8 in fp32, tf32, fp16 < 5 s. Each command runs as its own process, as a user would run it, so
interpreter start and imports count ("import" rows: `python -c 'import benanza.cli.analyze'`, and
a bare interpreter). The first call copies the bundle to a temporary directory and points
XDG_CACHE_HOME at an empty one: nothing is cached. "other --api" is a later call with options not
seen before: the bundle's logs come from the parse cache, the model, mapping and database reads are
redone. With ``--pyc with`` benanza's modules are byte-compiled first; ``without`` deletes
benanza's own ``__pycache__`` and runs with PYTHONDONTWRITEBYTECODE=1 (a fresh checkout; the
venv's packages keep the .pyc files pip wrote). On a shared machine compare the CPU column (user +
sys of the process; these commands use one core) and mind the load average printed with it.
Results: docs/RESULTS.md at 83e8fcb, §9.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benanza.paths import perfdb_dir
from benanza.profile.bundle import read_bundle
from benanza.profile.catalog import bundle_model
from benanza.profile.parse_cache import CACHE_DIR
from benanza.store.shipped import shipped_db

BENANZA = Path(sys.executable).parent / "benanza"
PACKAGE = Path(__file__).resolve().parent.parent / "benanza"


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, CPU s, last output line) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return wall, cpu, lines[-1][:80] if lines else ""


def bytecode(mode: str) -> dict[str, str]:
    """The environment for ``mode`` ("with": benanza byte-compiled; "without": its .pyc files deleted)."""
    env = dict(os.environ)
    if mode == "with":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        compileall.compile_dir(PACKAGE, quiet=1)
    else:
        for cache in PACKAGE.rglob("__pycache__"):
            shutil.rmtree(cache)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def measure(args: argparse.Namespace, model: Path, db: Path, mode: str) -> list[tuple[str, float, float, str]]:
    rows: list[tuple[str, float, float, str]] = []
    base = bytecode(mode)
    rows.append(("python -c pass", *timed([sys.executable, "-c", "pass"], base)))
    rows.append(("import cli.analyze", *timed([sys.executable, "-c", "import benanza.cli.analyze"], base)))
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / args.bundle.name
        shutil.copytree(args.bundle, bundle, ignore=shutil.ignore_patterns(CACHE_DIR))
        env = {**base, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        analyze = [str(BENANZA), "analyze", str(model), "--db", str(db), "--profile", str(bundle)]
        rows.append(("analyze, first call", *timed(analyze, env)))
        for i in range(args.repeat):
            rows.append((f"analyze, call {i + 2}", *timed(analyze, env)))
        rows.append(("analyze, other --api", *timed([*analyze, "--api", "legacy"], env)))
        out = Path(tmp) / "generated"
        generate = [str(BENANZA), "generate", str(args.zoo), "--batch", "1,8", "--dtype", "fp32,tf32,fp16",
                    "--out", str(out)]
        rows.append(("generate zoo b1,8 x3", *timed(generate, env)))
        rows.append(("generate again (same)", *timed(generate, env)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=perfdb_dir() / "bundles" / "resnet50_b64_ort_fp32")
    parser.add_argument("--zoo", type=Path, default=Path("models/zoo"), help="`benanza models zoo` directory")
    parser.add_argument("--repeat", type=int, default=3, help="later (cached) analyze calls to time")
    parser.add_argument("--pyc", choices=("both", "with", "without"), default="both",
                        help="with benanza's .pyc files, without them, or both")
    args = parser.parse_args()
    db = shipped_db()  # unpacked once before timing: the database cache is not what is measured
    model = bundle_model(args.zoo, read_bundle(args.bundle))
    print(f"bundle {args.bundle.name}, model {model.name}, {os.cpu_count()} CPUs")
    for mode in (("with", "without") if args.pyc == "both" else (args.pyc,)):
        load = os.getloadavg()
        rows = measure(args, model, db, mode)
        after = os.getloadavg()
        print(f"\n{mode} .pyc (load average {load[0]:.1f} before, {after[0]:.1f} after)")
        print(f"{'command':<24} {'wall s':>7} {'cpu s':>7}  last line")
        for name, wall, cpu, tail in rows:
            print(f"{name:<24} {wall:7.2f} {cpu:7.2f}  {tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
