"""Fuzz the profile-bundle readers and guards: seeded mutants of the shipped bundles through
analyze, bundles, compare and profile --map-only (tests/hostile_bundles.py), counts printed.

Usage: python bench/fuzz_bundles.py [--n 1000] [--seed 38] [--every 5]

Every mutant must end as a clean one-line refusal naming the bundle, or an analysis whose
figures are sound (0 < BR <= 1, finite, non-negative, some layer mapped); tracebacks, hangs
past TIMEOUT_S, wrong answers and escape sequences in the output are counted and listed. The
parse and analysis caches go to a temporary $XDG_CACHE_HOME (the mutants' parses would fill
the user's); the shipped database is read where the user cache holds it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from hostile_bundles import BAD, TIMEOUT_S, mutants, run_commands

from benanza.store.shipped import shipped_db


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="mutants (default 1000)")
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--every", type=int, default=5,
                        help="compare and profile --map-only every this many mutants (0: never; default 5)")
    args = parser.parse_args()
    db = shipped_db()  # before the cache moves: the user's unpacked copy
    counts: Counter[str] = Counter()
    by_command: Counter[tuple[str, str]] = Counter()
    failures: list[str] = []
    slowest = (0.0, "")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="benanza-fuzz-") as tmp:
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        work = Path(tmp) / "work"
        for n, mutant in enumerate(mutants(args.seed, args.n), start=1):
            root = work / "bundles"
            root.mkdir(parents=True, exist_ok=True)
            bundle = mutant.make(root)
            outcomes = run_commands(mutant, bundle, work, db, full=bool(args.every) and n % args.every == 0)
            verdicts = {o.verdict for o in outcomes}
            counts["mutants"] += 1
            counts["refused" if "refused" in verdicts and not verdicts & set(BAD) else
                   "analyzed" if "analyzed" in verdicts and not verdicts & set(BAD) else "failed"] += 1
            for o in outcomes:
                by_command[(o.command, o.verdict)] += 1
                if o.seconds > slowest[0]:
                    slowest = (o.seconds, f"{o.command} {mutant.label!r}")
                if o.verdict in BAD:
                    failures.append(f"{o.verdict}: {o.command} {mutant.label!r}: {o.detail}")
                    print(f"  {failures[-1]}", flush=True)
            shutil.rmtree(root)
            if n % 50 == 0:
                print(f"{n} mutants, {time.perf_counter() - started:.0f} s, {len(failures)} failures", flush=True)
    print(f"\n{counts['mutants']} mutants (seed {args.seed}) in {time.perf_counter() - started:.0f} s: "
          f"{counts['refused']} refused in one line, {counts['analyzed']} analyzed soundly, {counts['failed']} failed")
    for verdict in ("refused", "analyzed", "ok", *BAD):
        line = ", ".join(f"{c} {k[0]}" for k, c in sorted(by_command.items()) if k[1] == verdict)
        print(f"  {verdict:9} {line or '0'}")
    print(f"  slowest command: {slowest[0]:.1f} s ({slowest[1]}); hang timeout {TIMEOUT_S:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
