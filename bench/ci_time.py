"""How long CI (`.ci/run` = `make test`) takes: wall and CPU seconds of each step.

Why: the target is `make test` < 8 min on 2 cores. The machine this is measured on may be
shared, so wall time alone says little: the CPU seconds (user + sys of every child process,
nvcc and ninja included) are what a quiet 2-core runner spends, and CPU / 2 is the wall
time a quiet 2-core machine needs at best.

    .venv/bin/python bench/ci_time.py            # the steps of `make test`
    .venv/bin/python bench/ci_time.py --durations 20   # and pytest's slowest tests per step (stderr)

It starts cold, as CI on a clean checkout does: the parsed-bundle caches (perfdb/bundles/*/.parsed)
are deleted and XDG_CACHE_HOME points at an empty directory (--warm keeps both).

Prints one row per step and the total (docs/RESULTS.md §16, CI).
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

from benanza.profile.parse_cache import CACHE_DIR

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# The steps of `make test` (Makefile), in order.
STEPS: list[tuple[str, list[str]]] = [
    ("ruff", [str(BIN / "ruff"), "check", "."]),
    ("pytest, not compile", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not compile",
                             "-n", "2", "--dist", "loadfile"]),
    ("pytest, compile", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "compile"]),
    ("close_loop self-check", [sys.executable, "bench/close_loop.py", "--self-check"]),
    ("validate self-check", [sys.executable, "bench/validate.py", "self-check"]),
]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durations", type=int, default=0, help="also print pytest's N slowest tests per step")
    parser.add_argument("--cores", type=int, default=2, help="cores of the CI runner (for the best-case wall)")
    parser.add_argument("--warm", action="store_true",
                        help="keep the parsed-bundle caches and the user cache (default: start cold, as CI does)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    scratch = tempfile.TemporaryDirectory()
    if not args.warm:  # a clean checkout: no parsed bundles, no unpacked database, no .pyc of its own
        for cached in (ROOT / "perfdb" / "bundles").glob(f"*/{CACHE_DIR}"):
            shutil.rmtree(cached)
        for pycache in [*(ROOT / "benanza").rglob("__pycache__"), *(ROOT / "tests").rglob("__pycache__")]:
            shutil.rmtree(pycache, ignore_errors=True)
        env["XDG_CACHE_HOME"] = scratch.name
    rows: list[tuple[str, float, float, int, str]] = []
    failed = False
    for name, command in STEPS:
        if args.durations and command[0] == sys.executable:
            command = [*command, f"--durations={args.durations}"]
        cpu0, wall0 = children_cpu_s(), time.perf_counter()
        # the Makefile runs pytest with .pyc writing on (its first process writes them, the others read them)
        step_env = {**env, "PYTHONDONTWRITEBYTECODE": ""} if "pytest" in command else env
        done = subprocess.run(command, cwd=ROOT, env=step_env, capture_output=True, text=True)
        wall, cpu = time.perf_counter() - wall0, children_cpu_s() - cpu0
        tail = [line for line in done.stdout.splitlines() if line.strip()][-1:] if done.stdout else []
        rows.append((name, wall, cpu, done.returncode, tail[0] if tail else ""))
        if args.durations and "slowest" in done.stdout:
            print(done.stdout[done.stdout.index("slowest") - 20:].split("\n=")[0], file=sys.stderr, flush=True)
        failed |= done.returncode != 0
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-2000:], file=sys.stderr)
        if len(rows) == 1:
            print(f"{'step':<22} {'wall s':>8} {'cpu s':>8} {'cpu/' + str(args.cores):>8}  rc  result")
        print(f"{name:<22} {wall:8.1f} {cpu:8.1f} {cpu / args.cores:8.1f}  {done.returncode:>2}  {rows[-1][4][:70]}",
              flush=True)
    wall, cpu = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'total':<22} {wall:8.1f} {cpu:8.1f} {cpu / args.cores:8.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
