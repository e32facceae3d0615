"""Which of a database's systems a command reads or writes: the one asked for (``--system``: id, id
prefix or GPU name) or the only one, what a new database starts from, and the planner's "already
measured" predicate on it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from benanza.apis import has_weights
from benanza.errors import BenanzaError
from benanza.library import L2
from benanza.store import db as perfdb
from benanza.store.shipped import readable_db, shipped_db


def pick_system(db: Database, wanted: str | None, where: str) -> dict[str, Any]:
    """The system to analyze against: ``wanted`` (id, id prefix or GPU name) or the only one."""
    rows = perfdb.systems(db)
    if wanted:
        rows = [s for s in rows if s["id"].startswith(wanted) or wanted.lower() in str(s.get("gpu", "")).lower()]
    if not rows:
        known = ", ".join(f"{s['id'][:12]} ({s.get('gpu')})" for s in perfdb.systems(db)) or "none"
        raise BenanzaError(f"{where}: no system matching '{wanted or '*'}' in the database (it holds: {known})")
    if len(rows) > 1:
        names = ", ".join(f"{s['id'][:12]} ({s.get('gpu')})" for s in rows)
        raise BenanzaError(f"{where}: several systems match, choose one with --system: {names}")
    return rows[0]


def skip_predicate(db_path: Path | None, system: str | None) -> Callable[[Any], bool] | None:
    """The database's "already measured" predicate for one system (None: skip nothing): the
    system ``pick_system`` picks, or nothing to skip in a database that holds no system yet."""
    if db_path is None:
        return None
    if not db_path.is_file():
        raise BenanzaError(f"{db_path}: no such database")
    try:
        database = perfdb.open_db(readable_db(db_path), readonly=True)
    except FileNotFoundError as exc:
        raise BenanzaError(str(exc)) from None
    if system is None and not perfdb.systems(database):
        return None
    return perfdb.measured(database, pick_system(database, system, str(db_path))["id"])


def seed_database(db_path: Path, here: dict) -> bool:
    """Start a new database as a copy of the shipped one when that was measured on this very
    system (same ``system_id``: GPU, driver, CUDA, cuDNN, cuBLAS): its results hold here,
    so the GPU run measures only what it lacks instead of hours of benchmarks again."""
    if db_path.exists():
        return False
    shipped = shipped_db()
    if perfdb.system_id(here) not in {s["id"] for s in perfdb.systems(perfdb.open_db(shipped, readonly=True))}:
        return False
    partial = db_path.with_suffix(".partial")
    shutil.copyfile(shipped, partial)
    partial.replace(db_path)
    return True


def held_in_states(db_path: Path, states: tuple[L2, ...]) -> Callable[[Any], bool] | None:
    """What ``plan_executed`` may drop: the calls whose rows the database holds in every L2 state of
    ``states`` (warm among them); cold-weights rows only for calls with weights (``--l2 cold-weights``
    runs no others). None: the database holds no system yet, so nothing to drop."""
    held_row = skip_predicate(db_path, None)
    if held_row is None:
        return None

    def held(bench: Any) -> bool:
        return all(held_row({**asdict(bench), "l2": l2.value}) for l2 in states
                   if l2 is not L2.COLD_WEIGHTS or has_weights(bench.api))

    return held
