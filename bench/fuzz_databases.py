"""Seeded hostile performance databases against every command that reads one (issue 38).

    .venv/bin/python bench/fuzz_databases.py [--mutants 1000] [--seed 38] [--timeout 20]

Each mutant (tests/hostile_databases.py) is a real SQLite file: poison rows (negative, zero, NaN,
infinite, text medians; wrong types; 100 000-character strings; broken JSON), views, recursive
views, virtual tables, generated columns, triggers (in an input and in the merge output), unknown
columns, missing tables, damaged pages, truncated files, and harmless changes with formula-looking
text. ``db merge``, the analyzer's read, ``db export`` and ``db info`` run on each in a forked child
with a time limit. Prints counts per class and outcome; exits 1 unless there are 0 tracebacks,
0 hangs past the limit, 0 silent wrong answers, 0 false refusals and 0 broken promises (a refused
merge that changed its output, a refused export that left a CSV, a formula cell, a refusal that is
not one line naming the file). The fast subset runs in tests/test_fuzz_db.py::test_fuzzed_databases.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import hostile_databases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--timeout", type=float, default=hostile_databases.TIMEOUT_S, help="seconds per command")
    args = parser.parse_args()
    hostile_databases.TIMEOUT_S = args.timeout
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    bad = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fuzz-db-") as tmp:
        where = Path(tmp)
        base = hostile_databases.base_db(where / "base.db")
        for index in range(args.mutants):
            for mutant, op, outcome, detail in hostile_databases.check(base, where, args.seed, index):
                counts[(mutant.label, outcome)] += 1
                if outcome in hostile_databases.BAD:
                    bad.append((index, mutant.label, mutant.detail, op, outcome, detail[:200]))
    outcomes = ("ok", "refused", *hostile_databases.BAD)
    print(f"{args.mutants} mutants (seed {args.seed}), {len(hostile_databases.OPS)} commands each "
          f"({', '.join(hostile_databases.OPS)}), {time.monotonic() - started:.0f} s")
    print(f"{'class':<20}" + "".join(f"{o:>15}" for o in outcomes))
    for label in hostile_databases.CLASSES:
        print(f"{label:<20}" + "".join(f"{counts[(label, o)]:>15}" for o in outcomes))
    totals = collections.Counter()
    for (_, outcome), n in counts.items():
        totals[outcome] += n
    print(f"{'all':<20}" + "".join(f"{totals[o]:>15}" for o in outcomes))
    for row in bad[:40]:
        print("BAD", *row)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
