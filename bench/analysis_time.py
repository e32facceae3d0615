"""How long `benanza analyze` (first and later calls) and `benanza generate` take, in wall and CPU seconds.

    .venv/bin/python bench/analysis_time.py [--bundle perfdb/bundles/resnet50_b64_ort_fp32] [--zoo models/zoo]

Targets (issue 17, a CPU-only 2-core machine): `analyze` of a shipped batch-64 bundle < 10 s on
the first call and < 1 s after it (the parsed bundle parts are cached, benanza/profile/parse_cache.py);
`generate` of the zoo at batches 1,8 in fp32, tf32, fp16 < 5 s. Each command runs as its own
process, as a user would run it, so interpreter start and imports count. The first call copies the
bundle to a temporary directory and points XDG_CACHE_HOME at an empty one: nothing is cached. On a
shared machine compare the CPU column (user + sys of the process; these commands use one core).
Results: docs/RESULTS.md §Speed.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benanza.paths import perfdb_dir, shipped_db
from benanza.pipeline import bundle_model
from benanza.profile.bundle import read_bundle
from benanza.profile.parse_cache import CACHE_DIR

BENANZA = Path(sys.executable).parent / "benanza"


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=perfdb_dir() / "bundles" / "resnet50_b64_ort_fp32")
    parser.add_argument("--zoo", type=Path, default=Path("models/zoo"), help="`benanza models zoo` directory")
    parser.add_argument("--repeat", type=int, default=3, help="later (cached) analyze calls to time")
    args = parser.parse_args()
    db = shipped_db()  # unpacked once before timing: the database cache is not what is measured
    model = bundle_model(args.zoo, read_bundle(args.bundle))
    rows: list[tuple[str, float, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / args.bundle.name
        shutil.copytree(args.bundle, bundle, ignore=shutil.ignore_patterns(CACHE_DIR))
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        analyze = [str(BENANZA), "analyze", str(model), "--db", str(db), "--profile", str(bundle)]
        rows.append(("analyze, first call", *timed(analyze, env)))
        for i in range(args.repeat):
            rows.append((f"analyze, call {i + 2}", *timed(analyze, env)))
        out = Path(tmp) / "generated"
        generate = [str(BENANZA), "generate", str(args.zoo), "--batch", "1,8", "--dtype", "fp32,tf32,fp16",
                    "--out", str(out)]
        rows.append(("generate zoo b1,8 x3", *timed(generate, env)))
        rows.append(("generate again (same)", *timed(generate, env)))
    print(f"bundle {args.bundle.name}, model {model.name}")
    print(f"{'command':<24} {'wall s':>7} {'cpu s':>7}  last line")
    for name, wall, cpu, tail in rows:
        print(f"{name:<24} {wall:7.2f} {cpu:7.2f}  {tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
