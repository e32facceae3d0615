"""Seeded fuzzing of the bundle readers and guards through ``analyze`` and ``bundles`` (CI subset).

A few mutants of the shipped bundles (tests/hostile_bundles.py), one of each class (meta.json,
trace, API log, hostile name): each must end as one clean ``error:`` line naming the bundle or
as an analysis whose figures are sound; no traceback, no hang, no wrong answer, no escape
sequence in the output. The full run (1000 mutants, compare and map-only too) is
``python bench/fuzz_bundles.py``.
"""

from __future__ import annotations

from pathlib import Path

from hostile_bundles import BAD, mutants, run_commands

from benanza.store.shipped import shipped_db

SEED = 38
CLASSES = ("meta", "trace", "log", "name")


def ci_mutants() -> list:
    """The first mutant of each class."""
    picked, seen = [], {c: 0 for c in CLASSES}
    for mutant in mutants(SEED, 200):
        kind = mutant.label.split(": ", 1)[1].split(" ", 1)[0]
        if not seen[kind]:
            seen[kind] += 1
            picked.append(mutant)
        if len(picked) == len(CLASSES):
            break
    return picked


def test_mutated_bundles_are_refused_cleanly_or_analyzed_soundly(tmp_path: Path) -> None:
    db = shipped_db()
    failures = []
    for i, mutant in enumerate(ci_mutants()):
        bundle = mutant.make(tmp_path / f"bundles{i}")  # alone in its directory: `bundles` lists it alone
        for outcome in run_commands(mutant, bundle, tmp_path, db, full=False):
            if outcome.verdict in BAD:
                failures.append((mutant.label, outcome))
    assert not failures, failures
