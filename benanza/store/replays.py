"""Replays in the performance database: what ``benanza replay`` measured, keyed like every measurement.

Why a table: ``benanza analyze`` shows the replay figure beside LBL (issue 37) for the model, batch and
precisions it analyzes on this system, and databases of several machines merge by keyed union like
the benchmarks do. One ``replays`` row per run of one plan (warm and cold L2 are two columns of it),
its steps in ``replay_steps`` (a child table: a 435-step plan is more text than one column may hold).
Rows are written in one transaction through ``db.transaction``, checked against the row schema first,
and never replaced unless asked (``force``): measurements are immutable. docs/DATABASE.md.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlite_utils import Database

from benanza.errors import BenanzaError
from benanza.library import Precision
from benanza.store.db import REPLAY_KEY, now, reading, row_problem, table_names, transaction, upsert_system

REPLAY_SCHEMA = 1  # the rows' own version (the ``schema`` column)
REPLAY_COLUMNS = (*REPLAY_KEY, "storage", "steps", "lbl_seq_ms", "lbl_par_ms", "warm_ms", "cold_ms", "warm_timing",
                  "cold_timing", "status", "message", "checked_steps", "failed_steps", "plan_system_id", "schema",
                  "measured_at")
STEP_COLUMNS = (*REPLAY_KEY, "step", "kind", "api", "algorithm", "dtype", "layout", "fusion", "layers", "charged_ms",
                "measured_ms", "replay_ms", "workspace_bytes", "max_rel_error", "tolerance", "checked", "note")
API_FAMILIES = ("both", "legacy", "graph")  # ``--api`` of analyze: the families the bound chose from


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, separators=(",", ":"), sort_keys=True).encode()).hexdigest()[:16]


def model_key(layer_keys: Iterable[str], edges: Iterable[tuple[int, int]]) -> str:
    """The model as the database knows it (``model_layers``' keys in index order, ``model_edges``): a
    model renamed or re-exported with other layers is another model, whatever its file is called."""
    return _digest([list(layer_keys), sorted([int(a), int(b)] for a, b in edges)])


def plan_key(steps: Iterable[Mapping[str, Any]]) -> str:
    """The plan a replay ran: each step's call (kind, API, algorithm, precision, layout, fusion, layers).
    A database that gained rows since may give another plan for the same model: another replay."""
    fields = ("kind", "api", "algorithm", "dtype", "layout", "fusion", "layers")
    return _digest([[s.get(f) for f in fields] for s in steps])


def precisions_key(precisions: Iterable[Precision | str]) -> str:
    """The precisions a plan allowed, in ``Precision`` order, joined by ``+`` (``fp32+tf32``)."""
    values = {Precision(p).value for p in precisions}
    return "+".join(p.value for p in Precision if p.value in values)


def _number(value: Any) -> Any:
    """A value as a REAL or INTEGER column takes it: NaN, infinity and negative numbers (a failed check's
    error) are no measurement, stored as null."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return value if math.isfinite(value) and value >= 0 else None


def _checked(table: str, row: dict[str, Any], where: str) -> dict[str, Any]:
    problem = row_problem(table, row)
    if problem:
        raise BenanzaError(f"{where}: replay {row.get('model')} b{row.get('batch')}: {problem}; nothing was stored")
    return row


def store_replay(db: Database, system: Mapping[str, Any], record: Mapping[str, Any],
                 steps: Sequence[Mapping[str, Any]], force: bool = False) -> tuple[str, bool]:
    """Store one replay (``record``: ``REPLAY_COLUMNS`` but the system id, schema and time) and its per-step
    results, with the system it ran on (``measure.system.normalize``d), in one transaction.

    Returns (system id, whether it was written): a replay whose key is stored already is kept unless
    ``force``. A database that cannot be written (read-only, not benanza's, full) raises one line and
    holds nothing of it."""
    where = getattr(db, "benanza_path", "database")
    stamp = now()
    with transaction(db):
        sid = upsert_system(db, system)
        row = {c: _number(record.get(c)) for c in REPLAY_COLUMNS}
        row.update(system_id=sid, schema=REPLAY_SCHEMA, measured_at=stamp)
        key = tuple(row[c] for c in REPLAY_KEY)
        step_rows = []
        for s in steps:
            values = {c: _number(s.get(c)) for c in STEP_COLUMNS[len(REPLAY_KEY):]}
            values["layers"] = json.dumps(list(s.get("layers") or ()))
            step_rows.append(_checked("replay_steps", {**dict(zip(REPLAY_KEY, key, strict=True)), **values}, where))
        _checked("replays", row, where)
        held = db.execute(f"SELECT 1 FROM replays WHERE {' AND '.join(f'{c} = ?' for c in REPLAY_KEY)}",
                          key).fetchone()
        if held and not force:
            return sid, False
        if held:
            db.execute(f"DELETE FROM replay_steps WHERE {' AND '.join(f'{c} = ?' for c in REPLAY_KEY)}", key)
        db.execute(f"INSERT OR REPLACE INTO replays ({', '.join(REPLAY_COLUMNS)}) "
                   f"VALUES ({', '.join('?' * len(REPLAY_COLUMNS))})", [row[c] for c in REPLAY_COLUMNS])
        db.conn.executemany(f"INSERT INTO replay_steps ({', '.join(STEP_COLUMNS)}) "
                            f"VALUES ({', '.join('?' * len(STEP_COLUMNS))})",
                            [[r[c] for c in STEP_COLUMNS] for r in step_rows])
    return sid, True


def stored_replays(db: Database, system_id: str, model: str, batch: int, key_of_model: str,
                   precisions: Iterable[Precision | str], apis: str) -> list[dict[str, Any]]:
    """The replays stored for this model (name, batch and ``model_key``), precisions and API families on
    one system, newest first, each with its ``step_results`` (step order, ``layers`` as a list).
    A database written before the table was added holds none."""
    where = getattr(db, "benanza_path", "database")
    if "replays" not in table_names(db):
        return []
    key = (system_id, model, batch, key_of_model, precisions_key(precisions), apis)
    match = " AND ".join(f"{c} = ?" for c in REPLAY_KEY[:-1])
    out = []
    with reading(db):
        for row in db.query(f"SELECT * FROM replays WHERE {match} ORDER BY measured_at DESC, plan_key", key):
            _checked("replays", row, where)
            steps = []
            for s in db.query(f"SELECT * FROM replay_steps WHERE {match} AND plan_key = ? ORDER BY step",
                              (*key, row["plan_key"])):
                _checked("replay_steps", s, where)
                steps.append({**s, "layers": json.loads(s["layers"]) if s["layers"] else []})
            out.append({**row, "step_results": steps})
    return out
