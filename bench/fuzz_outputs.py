"""The output-path fuzzer's full run (tests/hostile_outputs.py): counts of each verdict.

    python bench/fuzz_outputs.py [--n 1000] [--seed 38]

Every writing command against hostile targets (device nodes, a full disk, places that refuse
writes, the command's own input, a user's file, symlinks, hostile names, stdout); prints the
counts, a failure line per broken promise, and exits 1 if there is any.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import hostile_databases  # noqa: E402 (tests/: the small database builder)
import hostile_outputs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=38)
    args = ap.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        small = hostile_databases.base_db(Path(tmp) / "small.db")
        counts = hostile_outputs.run(args.n, args.seed, small)
    bad = {k: v for k, v in counts.items() if k not in ("ok", "refused") and ":" not in k}
    print(f"{args.n} mutants, seed {args.seed}, {time.perf_counter() - t0:.0f} s")
    for key in ("ok", "refused", *sorted(bad)):
        print(f"  {key}: {counts.get(key, 0)}")
    for key in sorted(k for k in counts if ":" in k):
        print(f"  {key}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
