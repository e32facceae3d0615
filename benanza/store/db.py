"""The performance database: keyed, immutable measurements in SQLite (via sqlite-utils).

Every measurement belongs to one system and is keyed by ``Result.key()``, so the
databases of many machines merge by plain keyed union. Writes are one
``BEGIN IMMEDIATE`` transaction per batch (WAL + busy timeout), so concurrent
runners serialize instead of corrupting the file. docs/DATABASE.md is the
user-facing description of this schema.
"""

# Over ~450 lines on purpose (issue 14 left it whole):
# db.py is reworked in parallel (robustness): split schema / writes / queries once that lands.

from __future__ import annotations

import contextlib
import csv
import functools
import json
import math
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from benanza import SCHEMA_VERSION
from benanza.atomic import atomic_file
from benanza.csv_cells import cell
from benanza.errors import BenanzaError
from benanza.library import Status
from benanza.measure.system import system_id
from benanza.records import FIELD_NAMES, TEXT_CAP, JobKey, Result, result_from_fields, result_problem

BUSY_TIMEOUT_S = 30.0

# Result.key() fields, in order: with the system id they are the benchmarks' primary key.
# The layout is part of it: a convolution measured in NHWC and in NCHW is two rows.
RESULT_KEY = ("layer_key", "api", "algorithm", "dtype", "fusion", "l2", "layout")
# What identifies a manifest job across regenerations of a project (job indices do not).
JOB_KEY = tuple(f.name for f in fields(JobKey))
# What identifies a replay (``benanza replay``, store/replays.py): the system it ran on, the model (name,
# batch and a hash of its layer keys and edges), the precisions and API families its plan allowed,
# and the plan (a hash of its steps' calls). Its warm and cold L2 figures are two columns of one run.
REPLAY_KEY = ("system_id", "model", "batch", "model_key", "precisions", "apis", "plan_key")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS systems (
    id TEXT PRIMARY KEY,
    gpu TEXT, sm_count INTEGER, cc TEXT,
    sm_clock_khz INTEGER, mem_clock_khz INTEGER, memory_bytes INTEGER, bus_width_bits INTEGER,
    l2_bytes INTEGER, bandwidth_gbs REAL, theoretical_bandwidth_gbs REAL,
    cuda_driver TEXT, cuda_runtime TEXT, cudnn_version TEXT, cublas_version TEXT,
    details TEXT, first_seen TEXT
);
CREATE TABLE IF NOT EXISTS layers (
    key TEXT PRIMARY KEY,
    op TEXT, shapes TEXT, attrs TEXT,
    flops INTEGER, macs INTEGER, bytes INTEGER
);
CREATE TABLE IF NOT EXISTS benchmarks (
    system_id TEXT NOT NULL REFERENCES systems(id),
    layer_key TEXT NOT NULL, api TEXT NOT NULL, algorithm TEXT NOT NULL,
    dtype TEXT NOT NULL, fusion TEXT NOT NULL, l2 TEXT NOT NULL, layout TEXT NOT NULL DEFAULT '',
    math TEXT, status TEXT NOT NULL, message TEXT,
    median_ms REAL, min_ms REAL, max_ms REAL, stddev_ms REAL, repetitions INTEGER,
    host_ms REAL, workspace_bytes INTEGER, timing TEXT,
    max_rel_error REAL, tolerance REAL, heuristic_rank INTEGER, find_rank INTEGER,
    notes TEXT, schema INTEGER, measured_at TEXT,
    PRIMARY KEY (system_id, layer_key, api, algorithm, dtype, fusion, l2, layout)
);
CREATE INDEX IF NOT EXISTS benchmarks_by_layer ON benchmarks (system_id, layer_key, status, median_ms);
CREATE TABLE IF NOT EXISTS models (
    name TEXT NOT NULL, batch INTEGER NOT NULL, path TEXT,
    PRIMARY KEY (name, batch)
);
CREATE TABLE IF NOT EXISTS model_layers (
    model TEXT NOT NULL, batch INTEGER NOT NULL, idx INTEGER NOT NULL,
    node_name TEXT, layer_key TEXT NOT NULL,
    PRIMARY KEY (model, batch, idx)
);
CREATE TABLE IF NOT EXISTS model_edges (
    model TEXT NOT NULL, batch INTEGER NOT NULL, src INTEGER NOT NULL, dst INTEGER NOT NULL,
    PRIMARY KEY (model, batch, src, dst)
);
CREATE TABLE IF NOT EXISTS completed_jobs (
    system_id TEXT NOT NULL,
    layer_key TEXT NOT NULL, api TEXT NOT NULL, dtype TEXT NOT NULL, fusion TEXT NOT NULL,
    l2 TEXT NOT NULL, algorithms TEXT NOT NULL, layout TEXT NOT NULL DEFAULT '',
    executable TEXT, status TEXT NOT NULL, message TEXT, results INTEGER, finished_at TEXT,
    PRIMARY KEY (system_id, layer_key, api, dtype, fusion, l2, algorithms, layout)
);
CREATE TABLE IF NOT EXISTS replays (
    system_id TEXT NOT NULL, model TEXT NOT NULL, batch INTEGER NOT NULL, model_key TEXT NOT NULL,
    precisions TEXT NOT NULL, apis TEXT NOT NULL, plan_key TEXT NOT NULL,
    storage TEXT, steps INTEGER, lbl_seq_ms REAL, lbl_par_ms REAL, warm_ms REAL, cold_ms REAL,
    warm_timing TEXT, cold_timing TEXT, status TEXT NOT NULL, message TEXT,
    checked_steps INTEGER, failed_steps INTEGER, plan_system_id TEXT, schema INTEGER, measured_at TEXT,
    PRIMARY KEY (system_id, model, batch, model_key, precisions, apis, plan_key)
);
CREATE TABLE IF NOT EXISTS replay_steps (
    system_id TEXT NOT NULL, model TEXT NOT NULL, batch INTEGER NOT NULL, model_key TEXT NOT NULL,
    precisions TEXT NOT NULL, apis TEXT NOT NULL, plan_key TEXT NOT NULL, step INTEGER NOT NULL,
    kind TEXT, api TEXT, algorithm TEXT, dtype TEXT, layout TEXT, fusion TEXT, layers TEXT,
    charged_ms REAL, measured_ms REAL, replay_ms REAL, workspace_bytes INTEGER,
    max_rel_error REAL, tolerance REAL, checked TEXT, note TEXT,
    PRIMARY KEY (system_id, model, batch, model_key, precisions, apis, plan_key, step)
);
"""

# For browsing (datasette, sqlite3): indexes on the columns people facet on, and views that
# join the opaque layer key to its model, batch, op and shapes. Created on open, so a database
# written by an older benanza gets them too.
_DIMS = "(SELECT group_concat(d.value, 'x') FROM json_each(t.value) d)"
READABLE_SHAPE = (f"(SELECT group_concat({_DIMS}, ', ') FROM json_each(l.shapes, '$.inputs') t) || ' -> ' || "
                  f"(SELECT group_concat({_DIMS}, ', ') FROM json_each(l.shapes, '$.outputs') t)")
BROWSING = f"""
CREATE INDEX IF NOT EXISTS benchmarks_by_api ON benchmarks (api);
CREATE INDEX IF NOT EXISTS benchmarks_by_dtype ON benchmarks (dtype);
CREATE INDEX IF NOT EXISTS benchmarks_by_status ON benchmarks (status);
CREATE INDEX IF NOT EXISTS benchmarks_by_key ON benchmarks (layer_key);
CREATE INDEX IF NOT EXISTS model_layers_by_key ON model_layers (layer_key);
CREATE INDEX IF NOT EXISTS layers_by_op ON layers (op);
CREATE VIEW IF NOT EXISTS benchmark_details AS
SELECT s.gpu, l.op, {READABLE_SHAPE} AS shape, b.api, b.algorithm, b.dtype, b.fusion, b.l2, b.status,
       b.median_ms, b.min_ms, b.max_ms, b.workspace_bytes, b.message, b.layer_key, b.system_id
FROM benchmarks b LEFT JOIN layers l ON l.key = b.layer_key LEFT JOIN systems s ON s.id = b.system_id;
CREATE VIEW IF NOT EXISTS model_benchmarks AS
SELECT ml.model, ml.batch, ml.idx AS layer, ml.node_name AS node, l.op, {READABLE_SHAPE} AS shape, b.api,
       b.algorithm, b.dtype, b.fusion, b.l2, b.status, b.median_ms, s.gpu, b.layer_key, b.system_id
FROM model_layers ml JOIN layers l ON l.key = ml.layer_key JOIN benchmarks b ON b.layer_key = ml.layer_key
LEFT JOIN systems s ON s.id = b.system_id;
"""
VIEWS = ("benchmark_details", "model_benchmarks")
BROWSING_INDEXES = ("benchmarks_by_api", "benchmarks_by_dtype", "benchmarks_by_status", "benchmarks_by_key",
                    "model_layers_by_key", "layers_by_op")

# Every table with its primary key, in the order a merge copies them (parents first).
TABLES: dict[str, tuple[str, ...]] = {
    "systems": ("id",),
    "layers": ("key",),
    "benchmarks": ("system_id", *RESULT_KEY),
    "models": ("name", "batch"),
    "model_layers": ("model", "batch", "idx"),
    "model_edges": ("model", "batch", "src", "dst"),
    "completed_jobs": ("system_id", *JOB_KEY),
    "replays": REPLAY_KEY,
    "replay_steps": (*REPLAY_KEY, "step"),
}
# Tables added after schema version 1: a database written before them gets them when it is opened for
# writing, and reads (read-only opens, merge inputs, pack) as holding no rows of them.
LATER_TABLES = frozenset({"replays", "replay_steps"})

BENCHMARK_COLUMNS = (
    "system_id", *RESULT_KEY, "math", "status", "message", "median_ms", "min_ms", "max_ms",
    "stddev_ms", "repetitions", "host_ms", "workspace_bytes", "timing", "max_rel_error", "tolerance",
    "heuristic_rank", "find_rank", "notes", "schema", "measured_at",
)  # fmt: skip


def open_db(path: str | Path, readonly: bool = False) -> Database:
    """Open a performance database, ready for concurrent writers; or, ``readonly``, for reading only.

    ``":memory:"`` gives a private in-memory database (tests, scratch work). A missing (or
    empty) file is created atomically (``_create``); an existing file that is not a
    benanza database of this schema is refused without being written to (``_check_benanza``).
    Read-only opens use SQLite's ``mode=ro``: they never create, convert or lock out a writer.
    """
    name = str(path)
    if name == ":memory:":
        conn = sqlite3.connect(name, isolation_level=None)
        conn.executescript(_SCHEMA_SCRIPT)
        conn.isolation_level = ""
        return _wrap(conn, name)
    file = Path(name)
    if not file.parent.is_dir():
        raise BenanzaError(f"{name}: directory {file.parent} does not exist")
    if readonly:
        if not file.is_file():
            raise BenanzaError(f"{name}: no such database file")
        conn = _connect(name, readonly=True)
        missing = [t for t in _check_benanza(conn, name) if t not in LATER_TABLES]
        if missing:
            raise BenanzaError(f"{name}: not a complete benanza database (no table {', '.join(missing)})")
        return _wrap(conn, name)
    if not file.exists() or (file.is_file() and file.stat().st_size == 0):
        _create(file)
    missing = _check_benanza(_connect(name, readonly=True), name, close=True)
    db = _wrap(_connect(name, readonly=False), name)
    with reading(db):
        have = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type IN ('view', 'index')")}
    if missing or not {*VIEWS, *BROWSING_INDEXES} <= have:  # written before a table, view or index was added,
        # or shipped without the browsing indexes (perfdb/ packs a database without them: smaller)
        with transaction(db):
            _create_missing(db)
    if "layout" not in db["benchmarks"].pks:  # keyed before the layout was part of the key
        _key_by_layout(db)
    return db


def _create_missing(db: Database) -> None:
    for statement in (SCHEMA + BROWSING).split(";\n"):
        if statement.strip():
            db.execute(statement)


# The layout of a completed job recorded before the layout was part of JOB_KEY: that of its rows
# (one at most, since the layout was not part of RESULT_KEY either); "" for a job without rows.
_JOB_LAYOUT_OF_ROWS = ("COALESCE((SELECT MIN(b.layout) FROM benchmarks b WHERE b.system_id = j.system_id "
                       "AND b.layer_key = j.layer_key AND b.api = j.api AND b.dtype = j.dtype "
                       "AND b.fusion = j.fusion AND b.l2 = j.l2), '')")


# A merge source written before the layout was a key column: its completed jobs' layout comes
# from its own rows (``_JOB_LAYOUT_OF_ROWS`` over the source's benchmarks, read on its own connection).
_LAYOUT_OF_OLD = {("completed_jobs", "layout"): _JOB_LAYOUT_OF_ROWS}


def _key_by_layout(db: Database) -> None:
    """Rebuild the benchmarks and completed_jobs tables of a database written before the layout
    was part of their primary keys; every row keeps its values (its key gains its own layout)."""
    old = {t: f"_{t}_without_layout_key" for t in ("benchmarks", "completed_jobs")}
    with transaction(db):
        for view in VIEWS:  # a rename would point them at the old table
            db.execute(f"DROP VIEW IF EXISTS {view}")
        for table, renamed in old.items():
            db.execute(f"ALTER TABLE {table} RENAME TO {renamed}")
        _create_missing(db)
        cols = [c for c in BENCHMARK_COLUMNS if c != "layout"]
        db.execute(f"INSERT INTO benchmarks ({', '.join(cols)}, layout) "
                   f"SELECT {', '.join(cols)}, COALESCE(layout, '') FROM {old['benchmarks']}")
        cols = [c for c in _columns(db, "main", old["completed_jobs"]) if c != "layout"]
        db.execute(f"INSERT INTO completed_jobs ({', '.join(cols)}, layout) "
                   f"SELECT {', '.join(cols)}, {_JOB_LAYOUT_OF_ROWS} FROM {old['completed_jobs']} j")
        for renamed in old.values():
            db.execute(f"DROP TABLE {renamed}")
        _create_missing(db)  # the indexes, which stayed with the old tables until now


_SCHEMA_SCRIPT = (SCHEMA + BROWSING
                  + f"\nINSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}');")


def _connect(name: str, readonly: bool) -> sqlite3.Connection:
    try:
        if readonly:
            conn = sqlite3.connect(f"{Path(name).resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
                                   isolation_level=None)
        else:
            conn = sqlite3.connect(f"{Path(name).resolve().as_uri()}?mode=rw", uri=True, timeout=BUSY_TIMEOUT_S,
                                   isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        conn.execute("PRAGMA trusted_schema = OFF")  # a file's views and triggers call no function with effects
        if not readonly:
            conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error as exc:
        raise BenanzaError(f"{name}: cannot open the database ({_sqlite_problem(exc)})") from None
    return conn


def _wrap(conn: sqlite3.Connection, name: str) -> Database:
    conn.isolation_level = ""  # sqlite-utils wants legacy transaction control
    db = Database(conn)
    db.benanza_path = name  # type: ignore[attr-defined]  # for one-line errors (``transaction``)
    return db


# What reading a damaged file can raise: SQLite's errors, and a text value that is not UTF-8 (Python's
# sqlite3 decodes every TEXT value; a damaged page can hold any bytes).
READ_ERRORS = (sqlite3.Error, UnicodeDecodeError)


def _sqlite_problem(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"a text value is not UTF-8: byte {exc.object[exc.start:exc.start + 1]!r} at {exc.start}"
    text = str(exc).strip() or type(exc).__name__
    if "locked" in text or "busy" in text:
        return f"{text}: another process held it for more than {BUSY_TIMEOUT_S:g} s"
    return text


def _check_benanza(conn: sqlite3.Connection, name: str, close: bool = False) -> list[str]:
    """Refuse (reading only) a file that is not a benanza database of this schema version;
    returns the tables it lacks."""
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" not in tables:
            raise BenanzaError(f"{name}: not a benanza performance database (no meta table); left unchanged")
        _check_objects(conn, name)
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        missing = [t for t in TABLES if t not in tables]
    except READ_ERRORS as exc:
        raise BenanzaError(f"{name}: not a usable SQLite database ({_sqlite_problem(exc)})") from None
    finally:
        if close:
            conn.close()
    version = _version(row[0] if row else None, name)
    if version != SCHEMA_VERSION:
        raise BenanzaError(f"{name}: database schema version {version}, this benanza reads {SCHEMA_VERSION}")
    return missing


def _check_objects(conn: sqlite3.Connection, name: str) -> None:
    """Refuse a file whose schema would run code of its own when benanza reads or writes it: a
    trigger (fires on benanza's inserts), a view or virtual table standing in for one of benanza's
    tables (a query of it runs the file's SQL: a recursive view hangs), a generated column, or a
    view benanza does not create. Its tables then hold data only, which the row schema checks."""
    ours = {"meta", *TABLES}
    for kind, obj, sql in conn.execute("SELECT type, name, sql FROM sqlite_master WHERE type != 'index'"):
        shown = str(obj)[:40]
        if kind == "trigger":
            raise BenanzaError(f"{name}: has a trigger ({shown}); a benanza database holds tables only")
        if kind == "view" and obj in ours:
            raise BenanzaError(f"{name}: {shown} is a view, not a table; a benanza database holds tables only")
        if kind == "view" and obj not in VIEWS:
            raise BenanzaError(f"{name}: has a view {shown!r} that benanza does not create; "
                               "a benanza database holds tables only")
        if kind == "table" and obj in ours:
            if not str(sql or "").lstrip().upper().startswith("CREATE TABLE"):
                raise BenanzaError(f"{name}: {shown} is not a plain table; a benanza database holds tables only")
            if any(col[-1] for col in conn.execute(f"PRAGMA table_xinfo({obj})")):
                raise BenanzaError(f"{name}: {shown} has a generated or hidden column; "
                                   "a benanza database holds stored values only")


def _version(value: Any, name: str) -> int:
    if value is None:
        raise BenanzaError(f"{name}: not a benanza performance database (no schema_version); left unchanged")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BenanzaError(f"{name}: schema_version {str(value)[:40]!r} is not a number") from None


def _create(path: Path) -> None:
    """A new database, complete before anyone can see it: built under a temporary name, then linked
    into place (``os.link`` never replaces: when two processes create at once, one wins, both use it)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".creating", dir=path.parent)
    os.close(fd)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.executescript(f"BEGIN; {_SCHEMA_SCRIPT} COMMIT;")
        finally:
            conn.close()
        if path.exists() and path.stat().st_size == 0:
            os.replace(tmp, path)  # an empty file (e.g. from touch) is no database yet
            return
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process created it first: use that one
    except sqlite3.Error as exc:
        raise BenanzaError(f"{path}: cannot create the database ({_sqlite_problem(exc)}); nothing was written") \
            from None
    except OSError as exc:
        raise BenanzaError(f"{path}: cannot create the database ({exc.strerror}); nothing was written") from None
    finally:
        for leftover in (tmp, f"{tmp}-wal", f"{tmp}-shm", f"{tmp}-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def table_names(db: Database) -> set[str]:
    """The tables the file holds (a read-only open of a database written before a ``LATER_TABLES`` table
    lacks it)."""
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def schema_version(db: Database) -> int:
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return _version(row[0], getattr(db, "benanza_path", "database")) if row else 0


@contextlib.contextmanager
def transaction(db: Database) -> Iterator[Database]:
    """One write transaction that takes the write lock up front (``BEGIN IMMEDIATE``).

    Taking it at BEGIN means the busy timeout applies and no snapshot upgrade can
    fail half-way, which is what lets two runners share one database file.
    Nested use joins the outer transaction.
    """
    conn = db.conn
    if conn.in_transaction:
        yield db
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except sqlite3.Error as exc:  # full disk, I/O error, damaged file, lock held too long
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise BenanzaError(f"{getattr(db, 'benanza_path', 'database')}: write failed, nothing of it was stored "
                           f"({_sqlite_problem(exc)})") from None


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# ---------------------------------------------------------------- the row schema (what every read and merge checks)

# Columns that hold JSON text (the export's shape column and the browsing views parse them).
_JSON_COLUMNS = frozenset({("layers", "shapes"), ("layers", "attrs"), ("systems", "details"),
                           ("completed_jobs", "algorithms"), ("benchmarks", "notes"), ("replay_steps", "layers")})


@functools.cache
def _column_types() -> dict[str, dict[str, str]]:
    """Each table's columns with their declared type (TEXT, INTEGER, REAL), read from ``SCHEMA``
    itself so that the checks and the tables cannot disagree."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA)
        return {t: {row[1]: row[2].upper() for row in conn.execute(f"PRAGMA table_info({t})")}
                for t in ("meta", *TABLES)}
    finally:
        conn.close()


def schema_columns(table: str) -> list[str]:
    """The columns ``SCHEMA`` gives a table, in order (a packed table the file lacks is written with them)."""
    return list(_column_types()[table])


def _value_problem(table: str, column: str, kind: str, value: Any) -> str:
    """What is wrong with one stored value for its declared type ("" when nothing): text at most
    ``TEXT_CAP`` characters (JSON where the column holds JSON), numbers finite and >= 0."""
    if value is None:
        return f"no {column}" if column in TABLES.get(table, ()) else ""
    if kind == "TEXT":
        if type(value) is not str:
            return f"{column} is {type(value).__name__}, not text"
        if len(value) > TEXT_CAP:
            return f"{column} is {len(value)} characters long (at most {TEXT_CAP})"
        if (table, column) in _JSON_COLUMNS:
            try:
                json.loads(value)
            except (ValueError, RecursionError):
                return f"{column} is not JSON"
        return ""
    if kind == "INTEGER":  # counts, sizes, clocks, indices, batches: none is negative
        return "" if type(value) is int and value >= 0 else f"{column} = {repr(value)[:40]} is not an integer >= 0"
    if kind == "REAL":
        return "" if type(value) in (int, float) and 0 <= value < math.inf else \
            f"{column} = {repr(value)[:40]} is not a finite number >= 0"
    return ""


_SCAN = json.JSONDecoder().scan_once  # what json.loads decodes with (its default decoder's settings)


def _notes(value: Any) -> Any:
    """A benchmarks row's ``notes`` column as the record holds it: {} for none, the parsed JSON
    object, or the value as it is where it is no JSON text (``result_problem`` then names it)."""
    if value is None or value == "":
        return {}
    if type(value) is not str or len(value) > TEXT_CAP:
        return value
    if value[0] == "{" and value[-1] == "}":  # json.loads' own scanner without its wrapper (a quarter of its time)
        try:
            decoded, end = _SCAN(value, 0)
            if end == len(value):
                return decoded
        except (ValueError, RecursionError, StopIteration):
            pass  # not one object alone (trailing white space, a second value, an error): json.loads decides
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


def row_problem(table: str, row: Mapping[str, Any]) -> str:
    """What makes a stored row no row benanza wrote ("" when nothing): a benchmarks row must be a
    measurement (``records.result_problem``, the runner's check of harness lines), every other
    value its column's declared type, text at most ``TEXT_CAP`` characters, keys present."""
    types = _column_types()[table]
    if table == "benchmarks":
        record = {k: v for k, v in row.items() if k in _RESULT_FIELDS}
        record["notes"] = _notes(row.get("notes"))
        problem = result_problem(record)
        if problem:
            return problem
        columns: Iterable[str] = ("system_id", "measured_at")
    else:
        columns = row.keys()
    for column in columns:
        if column in types:
            problem = _value_problem(table, column, types[column], row[column])
            if problem:
                return problem
    return ""


def _row_name(table: str, row: Mapping[str, Any]) -> str:
    key = "/".join(str(row.get(c))[:40] for c in TABLES.get(table, ())[:4] if c in row)
    return f"{table} row {key}" if key else f"{table} row"


def _refused(name: str, table: str, row: Mapping[str, Any], problem: str,
             outcome: str = "the database is refused") -> BenanzaError:
    return BenanzaError(f"{name}: {_row_name(table, row)}: {problem}; {outcome} (docs/DATABASE.md, Guarantees)")


@contextlib.contextmanager
def reading(db: Database | sqlite3.Connection, name: str | None = None) -> Iterator[None]:
    """Turn a damaged file's SQLite error (a corrupt page, a malformed JSON value) into one line
    naming the database, whenever in a read it shows."""
    try:
        yield
    except READ_ERRORS as exc:
        where = name or getattr(db, "benanza_path", "database")
        raise BenanzaError(f"{where}: cannot read the database ({_sqlite_problem(exc)})") from None


# ---------------------------------------------------------------- systems


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


_SYSTEM_COLUMNS = ("gpu", "sm_count", "cc", "sm_clock_khz", "mem_clock_khz", "memory_bytes", "bus_width_bits",
                   "l2_bytes", "bandwidth_gbs", "theoretical_bandwidth_gbs", "cuda_driver", "cuda_runtime",
                   "cudnn_version", "cublas_version")
_SYSTEM_TEXT = frozenset({"cc", "cuda_driver", "cuda_runtime", "cudnn_version", "cublas_version"})
# A system row is immutable except that the fields it still lacks are filled in (a later run that
# measured the bandwidth; a merged database that has it), by ``upsert_system`` and ``merge`` alike.
# The WHERE leaves a row with nothing to fill untouched, so such an insert changes nothing.
_FILL_SYSTEM = (" ON CONFLICT(id) DO UPDATE SET "
                + ", ".join(f"{c} = COALESCE(systems.{c}, excluded.{c})" for c in _SYSTEM_COLUMNS)
                + " WHERE " + " OR ".join(f"(systems.{c} IS NULL AND excluded.{c} IS NOT NULL)"
                                          for c in _SYSTEM_COLUMNS))


def upsert_system(db: Database, system: Mapping[str, Any]) -> str:
    """Store a system (normalized fields, see ``benanza.measure.system.normalize``) and return its id.

    The row is immutable except that fields still null are filled in (e.g. a later
    run that measured the bandwidth).
    """
    sid = system_id(system)
    row = {c: (_text(system.get(c)) if c in _SYSTEM_TEXT else system.get(c)) for c in _SYSTEM_COLUMNS}
    extra = {k: v for k, v in system.items() if k not in _SYSTEM_COLUMNS}
    cols = ("id", *_SYSTEM_COLUMNS, "details", "first_seen")
    values = (sid, *row.values(), json.dumps(extra, sort_keys=True, default=str), now())
    with transaction(db):
        db.execute(f"INSERT INTO systems ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}){_FILL_SYSTEM}",
                   values)
    return sid


def systems(db: Database) -> list[dict[str, Any]]:
    """Every system, checked against the row schema (analyze picks one by its fields)."""
    with reading(db):
        _check_systems(db, getattr(db, "benanza_path", "database"))
        return list(db.query("SELECT * FROM systems ORDER BY first_seen, id"))


# ---------------------------------------------------------------- benchmarks


# Result fields copied as they are: everything between system_id and (notes, schema, measured_at).
_RESULT_COLUMNS = BENCHMARK_COLUMNS[1:-3]
assert BENCHMARK_COLUMNS[-3:] == ("notes", "schema", "measured_at")
_RESULT_FIELDS = frozenset((*_RESULT_COLUMNS, "schema"))


def _benchmark_row(system: str, result: Result, measured_at: str) -> tuple[Any, ...]:
    notes = json.dumps(result.notes, sort_keys=True, default=str) if result.notes else None
    return (system, *(getattr(result, c) for c in _RESULT_COLUMNS), notes, result.schema, measured_at)


def insert_results(db: Database, system: str, results: Iterable[Result], force: bool = False) -> int:
    """Insert results in one transaction; returns how many rows were written.

    Measurements are immutable: a result whose key is already stored is ignored,
    unless ``force`` (then it replaces the stored one).
    """
    stamp = now()
    rows = [_benchmark_row(system, r, stamp) for r in results]
    verb = "INSERT OR REPLACE" if force else "INSERT OR IGNORE"
    sql = f"{verb} INTO benchmarks ({', '.join(BENCHMARK_COLUMNS)}) VALUES ({', '.join('?' * len(BENCHMARK_COLUMNS))})"
    with transaction(db):
        before = db.conn.total_changes
        db.conn.executemany(sql, rows)
        return db.conn.total_changes - before


def record_job(db: Database, system: str, job: JobKey, executable: str, status: str, message: str,
               results: list[Result], force: bool = False) -> int:
    """Store one job's results and mark the job done, in ONE transaction (what makes resume exact)."""
    cols = ("system_id", *JOB_KEY, "executable", "status", "message", "results", "finished_at")
    verb = "INSERT OR REPLACE" if force else "INSERT OR IGNORE"
    with transaction(db):
        written = insert_results(db, system, results, force=force)
        db.execute(
            f"{verb} INTO completed_jobs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            (system, *asdict(job).values(), executable, status, message, len(results), now()),
        )
    return written


def completed_jobs(db: Database, system: str) -> set[JobKey]:
    layout = "layout" if "layout" in _columns(db, "main", "completed_jobs") else _JOB_LAYOUT_OF_ROWS
    cols = ", ".join(layout if c == "layout" else c for c in JOB_KEY)
    rows = db.execute(f"SELECT {cols} FROM completed_jobs j WHERE system_id = ?", (system,))
    return {JobKey(*row) for row in rows}


def _field(item: Any, name: str, default: Any = None) -> Any:
    if isinstance(item, Mapping):
        return item.get(name, default)
    return getattr(item, name, default)


def measured(db: Database, system: str) -> Callable[[Any], bool]:
    """Predicate for the planner: is this benchmark already in the database for ``system``?

    Matching is exact on the full ``Result.key()`` (a missing ``l2`` means warm, the
    only default); a benchmark with algorithm ``"*"`` (enumerated at run time) is
    measured when a job with exactly that identity completed. Any recorded status
    counts as measured: a crash is not retried unless the user forces it.
    """
    keys = {tuple(row) for row in db.execute(f"SELECT {', '.join(RESULT_KEY)} FROM benchmarks WHERE system_id = ?",
                                             (system,))}
    jobs = completed_jobs(db, system)

    def is_measured(bench: Any) -> bool:
        l2 = str(_field(bench, "l2") or "warm")
        if _field(bench, "algorithm") == "*" or _field(bench, "algorithms") is not None:
            job = {f: _field(bench, f) for f in ("layer_key", "api", "dtype", "fusion", "layout")}
            job["algorithms"] = _field(bench, "algorithms") or ["*"]
            return JobKey.of(job, l2) in jobs
        key = (*(str(_field(bench, f)) for f in RESULT_KEY[:5]), l2, str(_field(bench, "layout") or ""))
        return key in keys

    return is_measured


def best_latency_per_layer(db: Database, system: str, model: str, batch: int, dtype: str | None = None,
                           l2: str = "warm", fusion: str | None = "none") -> dict[str, dict[str, Any]]:
    """Fastest ``ok`` benchmark of every layer key of one model, keyed by layer key.

    Layers with no ok benchmark are absent (the analyzer reports them, never as zero).
    ``dtype``/``fusion`` of None mean "any" for those two columns only; keys are exact.
    """
    where = ["b.system_id = :system", "b.status = :ok", "b.l2 = :l2", "b.median_ms IS NOT NULL"]
    params: dict[str, Any] = {"system": system, "ok": Status.OK.value, "l2": l2, "model": model, "batch": batch}
    if dtype is not None:
        where.append("b.dtype = :dtype")
        params["dtype"] = dtype
    if fusion is not None:
        where.append("b.fusion = :fusion")
        params["fusion"] = fusion
    # SQLite takes the bare columns of a MIN() aggregate from the row holding the minimum.
    sql = f"""
        SELECT b.*, MIN(b.median_ms) AS best_ms FROM benchmarks b
        WHERE b.layer_key IN (SELECT layer_key FROM model_layers WHERE model = :model AND batch = :batch)
          AND {" AND ".join(where)}
        GROUP BY b.layer_key
    """
    best = {}
    for row in db.query(sql, params):
        row.pop("best_ms")
        best[row["layer_key"]] = row
    return best


def measured_keys(db: Database, system_id: str, keys: Iterable[str], precisions: Iterable[Any]) -> set[str]:
    """The keys among ``keys`` with at least one ok benchmark on the system in one of ``precisions``."""
    keys, dtypes = sorted(set(keys)), sorted(str(p) for p in precisions)
    found: set[str] = set()
    for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
        chunk = keys[start:start + 500]
        sql = (f"SELECT DISTINCT layer_key FROM benchmarks WHERE system_id = ? AND status = 'ok' "
               f"AND layer_key IN ({','.join('?' * len(chunk))}) AND dtype IN ({','.join('?' * len(dtypes))})")
        found |= {row[0] for row in db.execute(sql, [system_id, *chunk, *dtypes]).fetchall()}
    return found


# The columns results_for reads, in Result's field order: a row is then a Result's attributes as they are
# (``records.result_from_fields``); ``job`` is no column (NULL: Result's default).
_READ_FIELDS = ", ".join("NULL" if name == "job" else name for name in FIELD_NAMES)
assert set(FIELD_NAMES) - {"job"} == _RESULT_FIELDS | {"notes"}


def results_for(db: Database, system: str, keys: Iterable[str]) -> dict[str, list[Result]]:
    """Every stored row (any status) of these layer or fusion keys on one system, as Results.

    The analyzer's input: it decides which rows count; keys without rows are absent. Each row is
    checked (``result_problem``) and becomes a Result as ``Result(**row)`` would; read as tuples in
    field order, not through sqlite-utils' dict per row (DenseNet-121 b64: 30 888 rows, 1.7 -> 0.9 CPU s).
    """
    wanted = sorted(set(keys))
    found: dict[str, list[Result]] = {}
    for start in range(0, len(wanted), 500):  # SQLite's bound-parameter limit
        chunk = wanted[start:start + 500]
        sql = (f"SELECT {_READ_FIELDS} FROM benchmarks "
               f"WHERE system_id = ? AND layer_key IN ({', '.join('?' * len(chunk))})")
        with reading(db):
            rows = db.conn.execute(sql, [system, *chunk]).fetchall()
        for values in rows:
            row = dict(zip(FIELD_NAMES, values, strict=True))
            row["notes"] = _notes(row["notes"])
            problem = result_problem(row)
            if problem:
                raise _refused(getattr(db, "benanza_path", "database"), "benchmarks", row, problem)
            found.setdefault(row["layer_key"], []).append(result_from_fields(row))
    return found


# ---------------------------------------------------------------- layers and models (from manifest.json)


def store_manifest_layers(db: Database, layers: Iterable[Mapping[str, Any]]) -> int:
    """Store the manifest's ``layers`` entries (immutable by key); returns rows added."""
    rows = []
    for layer in layers:
        shapes = layer.get("shapes", {k: layer[k] for k in ("inputs", "outputs") if k in layer})
        nbytes = layer.get("bytes")
        if nbytes is None and ("bytes_read" in layer or "bytes_written" in layer):
            nbytes = int(layer.get("bytes_read") or 0) + int(layer.get("bytes_written") or 0)
        rows.append((str(layer["key"]), layer.get("op"), json.dumps(shapes, sort_keys=True),
                     json.dumps(layer.get("attrs", {}), sort_keys=True, default=str),
                     layer.get("flops"), layer.get("macs"), nbytes))
    with transaction(db):
        before = db.conn.total_changes
        db.conn.executemany("INSERT OR IGNORE INTO layers (key, op, shapes, attrs, flops, macs, bytes) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        return db.conn.total_changes - before


def store_manifest_models(db: Database, models: Iterable[Mapping[str, Any]]) -> int:
    """Store the manifest's ``models`` entries: model, its layers by node index, DAG edges."""
    added = 0
    with transaction(db):
        for model in models:
            name, batch = str(model["name"]), int(model["batch"])
            before = db.conn.total_changes
            path = model.get("path")  # the file name only: a measuring machine's directories mean nothing elsewhere
            db.execute("INSERT OR IGNORE INTO models (name, batch, path) VALUES (?, ?, ?)",
                       (name, batch, Path(str(path)).name if path else None))
            added += db.conn.total_changes - before
            db.conn.executemany(
                "INSERT OR IGNORE INTO model_layers (model, batch, idx, node_name, layer_key) VALUES (?, ?, ?, ?, ?)",
                [(name, batch, int(layer["index"]), layer.get("name"), str(layer["key"]))
                 for layer in model.get("layers", [])])
            db.conn.executemany("INSERT OR IGNORE INTO model_edges (model, batch, src, dst) VALUES (?, ?, ?, ?)",
                                [(name, batch, int(i), int(j)) for i, j in model.get("edges", [])])
    return added


@dataclass(frozen=True)
class DatabaseSink:
    """A database as the place the runner and the cluster put measurements (``measure.runner.Sink``)."""

    db: Database

    def store_manifest(self, manifest: Mapping[str, Any]) -> None:
        if manifest.get("layers"):
            store_manifest_layers(self.db, manifest["layers"])
        if manifest.get("models"):
            store_manifest_models(self.db, manifest["models"])

    def upsert_system(self, system: Mapping[str, Any]) -> str:
        return upsert_system(self.db, system)

    def completed_jobs(self, system: str) -> set[JobKey]:
        return completed_jobs(self.db, system)

    def record_job(self, system: str, job: JobKey, executable: str, status: str, message: str,
                   results: list[Result], force: bool = False) -> int:
        return record_job(self.db, system, job, executable, status, message, results, force)


# ---------------------------------------------------------------- whole-database operations


def _columns(db: Database, schema: str, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA {schema}.table_info({table})")]


def _source_columns(conn: sqlite3.Connection, path: Path) -> dict[str, list[str]]:
    """A merge input's tables and their columns, after checking that it is a benanza database of this
    schema whose tables are data only (``_check_objects``); columns benanza does not know are refused."""
    name = str(path)
    try:
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except READ_ERRORS as exc:
        raise BenanzaError(f"{name}: not a benanza performance database ({_sqlite_problem(exc)})") from None
    missing = _check_benanza(conn, name)
    if [t for t in missing if t not in LATER_TABLES]:
        raise BenanzaError(f"{name}: not a complete benanza database (no table {', '.join(missing)})")
    types = _column_types()
    columns = {}
    for table in TABLES:
        if table in missing:  # written before the table was added: no rows of it
            continue
        have = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        unknown = [c for c in have if c not in types[table]]
        if unknown:
            raise BenanzaError(f"{name}: table {table} has a column {str(unknown[0])[:40]!r} that benanza "
                               "does not write")
        lacking = [c for c in TABLES[table] if c not in have and c != "layout"]
        if lacking:
            raise BenanzaError(f"{name}: table {table} has no column {lacking[0]}")
        columns[table] = have
    return columns


def merge(out: str | Path, inputs: Iterable[str | Path]) -> dict[str, int]:
    """Keyed union of databases into ``out`` (created if needed); returns rows added (or, for a
    system, completed) per table.

    Rows whose key ``out`` already holds are kept as they are (measurements are
    immutable; a system's null fields are filled), so merging a database into itself, or
    twice, adds nothing. Inputs are read as data on connections of their own: only their tables,
    each row checked against the row schema (``row_problem``) before it is written. All inputs
    go in one transaction: a refused input leaves ``out`` as it was (and no ``out`` where there
    was none).
    """
    paths = [Path(source) for source in inputs]
    for path in paths:
        if not path.is_file():
            raise BenanzaError(f"{path}: no such database file")
    created = not Path(out).exists()
    db = open_db(out)
    added = dict.fromkeys(TABLES, 0)
    try:
        with transaction(db):
            for path in paths:
                if not (Path(out).exists() and os.path.samefile(path, out)):  # into itself: nothing to add
                    _merge_one(db, path, added)
    except BaseException:
        db.close()
        if created:
            for leftover in (Path(out), Path(f"{out}-wal"), Path(f"{out}-shm")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()
        raise
    db.close()
    return added


MERGE_BATCH = 5000  # rows read, checked and written at a time


def _merge_one(db: Database, path: Path, added: dict[str, int]) -> None:
    name = str(path)
    src = _connect(name, readonly=True)
    try:
        with reading(src, name):
            columns = _source_columns(src, path)
        for table in TABLES:
            if table not in columns:  # a later table the input was written without
                continue
            have = columns[table]
            cols = [c for c in _columns(db, "main", table) if c in have or (table, c) in _LAYOUT_OF_OLD]
            values = ", ".join(c if c in have and c != "layout" else
                               "COALESCE(layout, '')" if c in have else _LAYOUT_OF_OLD[(table, c)]
                               for c in cols)
            verb, tail = ("INSERT", _FILL_SYSTEM) if table == "systems" else ("INSERT OR IGNORE", "")
            sql = f"{verb} INTO main.{table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}){tail}"
            for rows in _source_rows(src, name, f"SELECT {values} FROM {table} j"):
                for row in rows:
                    record = dict(zip(cols, row, strict=True))
                    problem = row_problem(table, record)
                    if problem:
                        raise _refused(name, table, record, problem, "nothing was merged, "
                                       f"{getattr(db, 'benanza_path', 'the output')} is unchanged")
                before = db.conn.total_changes
                db.conn.executemany(sql, rows)
                added[table] += db.conn.total_changes - before
    finally:
        src.close()


def _source_rows(src: sqlite3.Connection, name: str, sql: str) -> Iterator[list[tuple[Any, ...]]]:
    """A merge input's rows, ``MERGE_BATCH`` at a time; its SQLite errors name it (not the output)."""
    with reading(src, name):
        cursor = src.execute(sql)
        while rows := cursor.fetchmany(MERGE_BATCH):
            yield rows


def export_csv(db: Database, out: str | Path) -> int:
    """Write every benchmark, with its GPU and layer op, as one CSV table; returns rows written.

    Every row is checked (``row_problem``) before it is written: a database that fails is refused
    with no CSV left; text cells that a spreadsheet would run as a formula get a leading ``'``
    (``csv_cells``)."""
    sql = f"""SELECT s.gpu, l.op, {READABLE_SHAPE} AS shape,
                    (SELECT group_concat(DISTINCT ml.model || '@' || ml.batch) FROM model_layers ml
                     WHERE ml.layer_key = b.layer_key) AS models, b.*
             FROM benchmarks b LEFT JOIN systems s ON s.id = b.system_id LEFT JOIN layers l ON l.key = b.layer_key
             ORDER BY b.system_id, b.layer_key, b.api, b.algorithm, b.dtype, b.fusion, b.l2"""
    name = getattr(db, "benanza_path", "database")
    count = 0
    with reading(db), atomic_file(out, newline="") as handle:  # a failed export leaves no partial CSV
        _check_systems(db, name)
        cursor = db.execute(sql)
        header = [d[0] for d in cursor.description]
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in cursor:
            record = dict(zip(header[4:], row[4:], strict=True))
            problem = row_problem("benchmarks", record) or next(
                (p for c, v in zip(header[:4], row[:4], strict=True) if (p := _value_problem("", c, "TEXT", v))), "")
            if problem:
                raise _refused(name, "benchmarks", record, problem, "nothing was exported")
            writer.writerow([cell(v) for v in row])
            count += 1
    return count


def _check_systems(db: Database, name: str) -> None:
    """The systems table against the row schema (a few rows: checked whole before a read uses one)."""
    for row in db.query("SELECT * FROM systems"):
        problem = row_problem("systems", row)
        if problem:
            raise _refused(name, "systems", row, problem)


def info(db: Database) -> dict[str, Any]:
    """Counts per table, benchmarks per status, and benchmarks per system (with its GPU): an
    inspection, so it reads a database that fails the row schema too (it counts, it uses no value)."""
    with reading(db):
        return _info(db)


def _shown(column: str, width: int = 120) -> str:
    """SQL for a stored text as an inspection shows it: at most ``width`` characters, and its length
    where it is longer (a 10 MB GPU name is not held, nor printed)."""
    return (f"CASE WHEN length({column}) > {width} THEN substr({column}, 1, {width}) || '... ('"
            f" || length({column}) || ' characters)' ELSE {column} END")


def _info(db: Database) -> dict[str, Any]:
    have = table_names(db)
    tables = {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] if t in have else 0 for t in TABLES}
    status = dict(db.execute(f"SELECT {_shown('status')}, COUNT(*) FROM benchmarks GROUP BY status "
                             "ORDER BY status").fetchall())
    jobs = dict(db.execute(f"SELECT {_shown('status')}, COUNT(*) FROM completed_jobs GROUP BY status "
                           "ORDER BY status").fetchall())
    per_system = list(db.query(
        f"""SELECT {_shown('s.id')} AS system_id, {_shown('s.gpu')} AS gpu,
                  {_shown('s.cudnn_version')} AS cudnn_version, {_shown('s.cublas_version')} AS cublas_version,
                  COUNT(b.layer_key) AS benchmarks, SUM(b.status = 'ok') AS ok
           FROM systems s LEFT JOIN benchmarks b ON b.system_id = s.id GROUP BY s.id ORDER BY s.id"""))
    return {"schema_version": schema_version(db), "tables": tables, "benchmarks_by_status": status,
            "jobs_by_status": jobs, "systems": per_system}
