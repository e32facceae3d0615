"""Seeded hostile performance databases, for tests/test_fuzz_db.py (a fast subset) and
bench/fuzz_databases.py (the full run).

Each mutant is a real SQLite file made from one small real benanza database by one thing a
broken or hostile file can hold: a poison value in a row (negative, zero, NaN, infinite or text
median; wrong types; a 100 000-character string; broken JSON), a view, recursive view, virtual
table or generated column standing in for a table, a trigger (in an input or in the merge
output), a view or column benanza does not write, a missing table, damaged pages, or a harmless
change (including formula-looking text, which the CSV export must neutralize).

``check(mutant)`` runs what reads a database on it, each in a forked child with a time limit:
``db merge`` into a copy of a good database, the analyzer's read (``systems`` + ``results_for``),
``db export`` and ``db info``. Every outcome is ``ok``, ``refused`` (a one-line BenanzaError naming
the file), ``traceback``, ``hang`` or a broken promise (a refused merge that changed its output,
a CSV cell a spreadsheet would run). ``EXPECT`` says per class which outcome is right; ``any``
where the right answer cannot be known (a damaged page may hold a value that still reads).
"""

from __future__ import annotations

import csv
import hashlib
import importlib
import json
import multiprocessing
import os
import random
import shutil
import signal
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from benanza.cli import main
from benanza.errors import BenanzaError
from benanza.records import JobKey, Result
from benanza.store import db as perfdb

H100 = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "cc": "9.0", "cuda_driver": "13.0",
        "cuda_runtime": "13.0", "cudnn_version": "9.19.0", "cublas_version": "13.1.0", "bandwidth_gbs": 3014.0}
OPS = ("merge", "read", "export", "info")
# Leading characters a spreadsheet reads as a formula (OWASP), spelled here so that the oracle does
# not take them from the code it checks (benanza.csv_cells).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")
TIMEOUT_S = 20.0
HUGE = 100_000  # characters: more than records.TEXT_CAP
importlib.import_module("benanza.cli.db")  # imported once, not in every forked child


def base_db(path: Path, rows: int = 24) -> Path:
    """A small benanza database as the runner writes one: a system, layers, ok and not_supported
    benchmarks with notes, a model with layers and edges, completed jobs."""
    db = perfdb.open_db(path)
    sid = perfdb.upsert_system(db, H100)
    layers = [{"key": f"k{i:03d}", "op": "Conv", "shapes": {"inputs": [[1, 64, 56, 56]], "outputs": [[1, 64, 56, 56]]},
               "attrs": {"pads": [1, 1, 1, 1]}, "flops": 1000 + i, "macs": 500 + i, "bytes": 4096} for i in range(rows)]
    perfdb.store_manifest_layers(db, layers)
    perfdb.store_manifest_models(db, [{"name": "tiny", "batch": 1, "path": "/x/tiny.onnx",
                                       "layers": [{"index": i, "name": f"conv{i}", "key": f"k{i:03d}"}
                                                  for i in range(rows)],
                                       "edges": [[i, i + 1] for i in range(rows - 1)]}])
    for i in range(rows):
        ok = Result(f"k{i:03d}", "cudnnConvolutionForward", str(i % 8), "fp32", "fma", "none", "ok",
                    median_ms=0.05 + i / 1000, min_ms=0.04, max_ms=0.2, stddev_ms=0.001, repetitions=50,
                    workspace_bytes=1024, notes={"gbs": 10.0})
        bad = Result(f"k{i:03d}", "cudnnConvolutionForward", "7", "fp16", "fma", "none", "not_supported",
                     message="CUDNN_STATUS_NOT_SUPPORTED")
        key = JobKey(f"k{i:03d}", "cudnnConvolutionForward", "fp32", "none", "warm", '["*"]')
        perfdb.record_job(db, sid, key, "bench_conv", "ok", "", [ok] if i % 7 == 3 else [ok, bad])
    db.close()
    return path


# ---------------------------------------------------------------- mutations

@dataclass(frozen=True)
class Mutant:
    label: str  # class: what kind of hostile file this is
    detail: str  # the mutation itself, for a report
    expect: dict[str, str]  # op -> "ok" | "refused" | "any"


REFUSE_ALL = dict.fromkeys(OPS, "refused") | {"info": "any"}
ALL_OK = dict.fromkeys(OPS, "ok")

# (table, column, hostile value, where): values that no row benanza writes can hold.
_OK_ROW = "status = 'ok'"
POISON: tuple[tuple[str, str, Any, str], ...] = (
    ("benchmarks", "median_ms", -1.0, _OK_ROW), ("benchmarks", "median_ms", -999.999, _OK_ROW),
    ("benchmarks", "median_ms", 0.0, _OK_ROW), ("benchmarks", "median_ms", float("nan"), _OK_ROW),
    ("benchmarks", "median_ms", float("inf"), _OK_ROW), ("benchmarks", "median_ms", float("-inf"), _OK_ROW),
    ("benchmarks", "median_ms", "fast", _OK_ROW), ("benchmarks", "median_ms", "", _OK_ROW),
    ("benchmarks", "median_ms", b"\x00\x01", _OK_ROW), ("benchmarks", "min_ms", -0.5, "true"),
    ("benchmarks", "max_ms", float("inf"), "true"), ("benchmarks", "stddev_ms", "wide", "true"),
    ("benchmarks", "repetitions", -5, "true"), ("benchmarks", "repetitions", 1.5, "true"),
    ("benchmarks", "repetitions", "ten", "true"), ("benchmarks", "workspace_bytes", -1, "true"),
    ("benchmarks", "status", "[/bold]", "true"), ("benchmarks", "status", "OK", "true"),
    ("benchmarks", "status", "x" * HUGE, "true"), ("benchmarks", "notes", "{", "true"),
    ("benchmarks", "notes", "[1, 2]", "true"), ("benchmarks", "notes", "[" * 50_000, "true"),
    ("benchmarks", "algorithm", "a" * HUGE, "true"), ("benchmarks", "message", "m" * HUGE, "true"),
    ("benchmarks", "api", b"\x07", "true"), ("benchmarks", "dtype", b"fp32", "true"),
    ("benchmarks", "math", None, "true"), ("benchmarks", "schema", "one", "true"),
    ("systems", "gpu", "G" * HUGE, "true"), ("systems", "sm_count", "many", "true"),
    ("systems", "bandwidth_gbs", -3014.0, "true"), ("systems", "bandwidth_gbs", float("inf"), "true"),
    ("systems", "details", "{not json", "true"),
)  # fmt: skip
# Poison in tables the analyzer's read and the export do not use: merge refuses, they may pass.
POISON_ELSEWHERE: tuple[tuple[str, str, Any, str], ...] = (
    ("layers", "shapes", "{", "true"), ("layers", "flops", -1, "true"), ("layers", "flops", "many", "true"),
    ("layers", "op", "o" * HUGE, "true"), ("model_layers", "node_name", b"\x05", "true"),
    ("model_layers", "idx", -1, "true"), ("model_layers", "node_name", "n" * HUGE, "true"),
    ("model_edges", "src", -1, "true"), ("completed_jobs", "algorithms", "[", "true"),
    ("completed_jobs", "results", -1, "true"), ("models", "path", b"\x03", "true"),
)  # fmt: skip
# Harmless changes, some with text a spreadsheet would run: every command must succeed.
BENIGN: tuple[tuple[str, str, Any, str], ...] = (
    ("benchmarks", "median_ms", 0.3, _OK_ROW), ("benchmarks", "message", "=HYPERLINK(\"http://x\",\"y\")", "true"),
    ("benchmarks", "algorithm", "@SUM(1+1)", "true"), ("benchmarks", "message", "+1+2", "true"),
    ("benchmarks", "message", "-2+3", "true"), ("benchmarks", "message", "\t=1", "true"),
    ("benchmarks", "message", "\r=1", "true"), ("models", "name", "=cmd|' /C calc'!A0", "true"),
    ("model_layers", "model", "=cmd|' /C calc'!A0", "true"), ("systems", "gpu", "@NVIDIA H100", "true"),
    ("layers", "op", "=Conv", "true"), ("benchmarks", "median_ms", "0.25", _OK_ROW),  # REAL affinity: a number
)  # fmt: skip


def _set(table: str, column: str, value: Any, where: str) -> Callable[[sqlite3.Connection, random.Random], None]:
    def apply(conn: sqlite3.Connection, rng: random.Random) -> None:
        rowids = [r[0] for r in conn.execute(f"SELECT rowid FROM {table} WHERE {where}")]
        pick = rowids if table in ("models",) else rng.sample(rowids, max(1, len(rowids) // rng.choice((1, 4, 24))))
        conn.executemany(f"UPDATE OR IGNORE {table} SET {column} = ? WHERE rowid = ?", [(value, r) for r in pick])
    return apply


def _sql(script: str) -> Callable[[sqlite3.Connection, random.Random], None]:
    def apply(conn: sqlite3.Connection, rng: random.Random) -> None:
        conn.executescript(script)
    return apply


RENAME = "ALTER TABLE benchmarks RENAME TO b0; DROP VIEW IF EXISTS benchmark_details; " \
         "DROP VIEW IF EXISTS model_benchmarks; "
STRUCTURE: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("view as table", RENAME + "CREATE VIEW benchmarks AS SELECT b0.* FROM b0, b0 x, b0 y, b0 z;", REFUSE_ALL),
    ("recursive view as table", RENAME + "CREATE VIEW benchmarks AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL "
     "SELECT n + 1 FROM r) SELECT b0.* FROM b0, r;", REFUSE_ALL),
    ("trigger", "CREATE TRIGGER t AFTER INSERT ON layers BEGIN DELETE FROM benchmarks; END;", REFUSE_ALL),
    ("trigger on update", "CREATE TRIGGER t2 AFTER UPDATE ON systems BEGIN DELETE FROM layers; END;", REFUSE_ALL),
    ("foreign view", "CREATE VIEW evil AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
     "SELECT n FROM r;", REFUSE_ALL),
    ("generated column", "ALTER TABLE benchmarks RENAME TO b0; DROP VIEW benchmark_details; DROP VIEW "
     "model_benchmarks; CREATE TABLE benchmarks (system_id TEXT NOT NULL, layer_key TEXT NOT NULL, api TEXT NOT "
     "NULL, algorithm TEXT NOT NULL, dtype TEXT NOT NULL, fusion TEXT NOT NULL, l2 TEXT NOT NULL, layout TEXT NOT "
     "NULL DEFAULT '', math TEXT, status TEXT NOT NULL, message TEXT, min_ms REAL, median_ms REAL GENERATED "
     "ALWAYS AS (-min_ms) VIRTUAL); INSERT INTO benchmarks (system_id, layer_key, api, algorithm, dtype, fusion, "
     "l2, layout, math, status, message, min_ms) SELECT system_id, layer_key, api, algorithm, dtype, fusion, l2, "
     "layout, math, status, message, min_ms FROM b0; DROP TABLE b0;", REFUSE_ALL),
    ("unknown column", "ALTER TABLE benchmarks ADD COLUMN evil TEXT DEFAULT '=1+1';",
     {"merge": "refused", "read": "ok", "export": "ok", "info": "ok"}),
    ("missing table", "DROP TABLE model_edges;", REFUSE_ALL),
    ("text not UTF-8", "UPDATE benchmarks SET message = CAST(X'FFFE41E8' AS TEXT);",
     {"merge": "refused", "read": "refused", "export": "refused", "info": "any"}),
    ("gpu not UTF-8", "UPDATE systems SET gpu = CAST(X'9B5B33316D' AS TEXT);",
     {"merge": "refused", "read": "refused", "export": "refused", "info": "any"}),
    ("meta as view", "ALTER TABLE meta RENAME TO m0; CREATE VIEW meta AS SELECT * FROM m0;", REFUSE_ALL),
    ("schema version", "UPDATE meta SET value = '99' WHERE key = 'schema_version';", REFUSE_ALL),
)  # fmt: skip
try:
    sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE v USING fts5(x)")
    STRUCTURE += (("virtual table", RENAME + "CREATE VIRTUAL TABLE benchmarks USING fts5(system_id, layer_key);",
                   REFUSE_ALL),)
except sqlite3.Error:
    pass

CLASSES = ("poison", "poison elsewhere", "benign", "structure", "trigger in output", "damaged pages", "truncated")


def make(base: Path, where: Path, seed: int, index: int) -> tuple[Path, Path, Mutant]:
    """Mutant ``index`` of ``seed``: (input file, merge output file, what it is and what is right).
    Classes take turns, so any run of ``len(CLASSES)`` mutants holds one of each."""
    rng = random.Random(seed * 1_000_003 + index)
    label = CLASSES[index % len(CLASSES)]
    path, out = where / f"in{index}.db", where / f"out{index}.db"
    shutil.copyfile(base, path)
    shutil.copyfile(base, out)
    if label in ("poison", "poison elsewhere", "benign"):
        table, column, value, cond = rng.choice({"poison": POISON, "poison elsewhere": POISON_ELSEWHERE,
                                                 "benign": BENIGN}[label])
        _edit(path, _set(table, column, value, cond), rng)
        if label == "benign":
            expect = ALL_OK
        elif label == "poison elsewhere":
            expect = {"merge": "refused", "read": "any", "export": "any", "info": "any"}
        else:
            read = "refused" if table in ("benchmarks", "systems") else "any"
            expect = {"merge": "refused", "read": read, "export": "refused", "info": "any"}
        detail = f"{table}.{column} = {repr(value)[:30]}"
    elif label == "structure":
        name, script, expect = rng.choice(STRUCTURE)
        _edit(path, _sql(script), rng)
        detail = name
    elif label == "trigger in output":
        _edit(out, _sql("CREATE TRIGGER t AFTER INSERT ON benchmarks BEGIN DELETE FROM layers; END;"), rng)
        _edit(path, _set("benchmarks", "algorithm", "new", "status = 'ok'"), rng)  # rows to merge
        expect, detail = {"merge": "refused", "read": "ok", "export": "ok", "info": "ok"}, "trigger in OUT"
    elif label == "damaged pages":
        data = bytearray(path.read_bytes())
        pages = len(data) // 4096
        for _ in range(rng.randint(1, 4)):
            page = rng.randrange(1, pages)
            start = page * 4096 + rng.randrange(0, 4096 - 64)
            length = rng.choice((1, 8, 64))
            data[start:start + length] = rng.randbytes(length)
        path.write_bytes(bytes(data))
        expect, detail = dict.fromkeys(OPS, "any"), "random bytes in pages"
    else:
        size = path.stat().st_size
        with open(path, "r+b") as handle:
            handle.truncate(rng.randrange(100, size))
        expect, detail = dict.fromkeys(OPS, "any"), "truncated"
    return path, out, Mutant(label, detail, expect)


def _edit(path: Path, change: Callable[[sqlite3.Connection, random.Random], None], rng: random.Random) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = DELETE")  # one file, as a copied database is
        conn.execute("PRAGMA synchronous = OFF")  # a scratch file: no fsync per edit (none reaches what is checked)
        change(conn, rng)
    finally:
        conn.close()


# ---------------------------------------------------------------- running one mutant

def _digest(path: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())).hexdigest()


def _op(name: str, path: Path, out: Path, where: Path) -> tuple[str, str]:
    """One command on the mutant, in this process: (outcome, detail)."""
    if name == "merge":
        before, count = _digest(out), _counts(out)
        try:
            perfdb.merge(out, [path])
        except BenanzaError as exc:
            if _digest(out) != before:
                return "broken", f"refused merge changed its output: {exc}"
            return "refused", str(exc)
        after = _counts(out)
        if any(after[t] < count[t] for t in count) or after["layers"] == 0:
            return "broken", "a merge lost rows the output held (a trigger fired?)"
        return "ok", ""
    if name == "read":
        try:
            db = perfdb.open_db(path, readonly=True)
            rows = 0
            for system in perfdb.systems(db):
                keys = [str(r[0]) for r in db.execute("SELECT DISTINCT layer_key FROM benchmarks")]  # a model's
                found = perfdb.results_for(db, system["id"], keys)
                rows += sum(len(v) for v in found.values())
                bad = [r for v in found.values() for r in v if r.ok and not (r.median_ms or 0) > 0]
                if bad:
                    return "broken", f"an ok result with median {bad[0].median_ms!r} was read"
        except BenanzaError as exc:
            return "refused", str(exc)
        return "ok", f"{rows} rows"
    if name == "export":
        csv_path = where / f"{path.stem}.csv"
        try:
            db = perfdb.open_db(path, readonly=True)
            n = perfdb.export_csv(db, csv_path)
        except BenanzaError as exc:
            if csv_path.exists():
                return "broken", "a refused export left a CSV"
            return "refused", str(exc)
        with open(csv_path, newline="") as handle:
            cells = [c for row in list(csv.reader(handle))[1:] for c in row]
        risky = [c for c in cells if c.startswith(FORMULA_STARTS) and not _number(c)]
        if risky:
            return "broken", f"formula cell {risky[0][:30]!r}"
        return "ok", f"{n} rows"
    result = CliRunner().invoke(main, ["db", "info", str(path)])
    if result.exception and not isinstance(result.exception, SystemExit):
        return "traceback", f"{type(result.exception).__name__}: {str(result.exception)[:80]}"
    if result.exit_code == 0:
        return "ok", ""
    return "refused", result.output.strip()


def _counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in perfdb.TABLES}
    finally:
        conn.close()


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def run_op(name: str, path: Path, out: Path, where: Path, timeout_s: float = TIMEOUT_S) -> tuple[str, str]:
    """``_op`` in a forked child, killed after ``timeout_s``: (outcome, detail), outcome one of
    ok, refused, traceback, hang, broken. A refusal that is not one line naming the file is broken.

    The child is forked by a small helper process (``_forker``), not by the caller: forking a test worker
    of about 1 GB cost a copy of its page tables and copy-on-write faults each time, most of
    test_fuzzed_databases' CPU (280 forks; CI time, docs/RESULTS.md §16)."""
    helper = _forker()
    helper.send((name, path, out, where, timeout_s))
    return helper.recv()


_FORKER: list[Any] = []  # the helper's end of the pipe, once started


def _forker() -> Any:
    """The pipe to the helper that runs ``_forked`` per request: a fresh interpreter (spawned, so it holds only
    this module and what it imports), started on first use and ended with this process."""
    if not _FORKER:
        spawn = multiprocessing.get_context("spawn")
        ours, theirs = spawn.Pipe()
        spawn.Process(target=_serve, args=(theirs,), daemon=True, name="hostile-databases-forker").start()
        theirs.close()
        _FORKER.append(ours)
    return _FORKER[0]


def _serve(conn: Any) -> None:
    while True:
        try:
            request = conn.recv()
        except EOFError:  # the caller has ended
            return
        conn.send(_forked(*request))


def _forked(name: str, path: Path, out: Path, where: Path, timeout_s: float) -> tuple[str, str]:
    """``run_op`` itself, in the helper: fork, poll, kill past the time limit."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        try:
            outcome = _op(name, path, out, where)
            if outcome[0] == "refused" and ("\n" in outcome[1].strip() or (path.name not in outcome[1]
                                            and out.name not in outcome[1])):
                outcome = ("broken", f"refusal not one line naming the file: {outcome[1][:200]!r}")
        except BaseException as exc:
            outcome = ("traceback", f"{type(exc).__name__}: {str(exc)[:120]}")
        os.write(write_end, json.dumps(outcome).encode()[:60_000])
        os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.005)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_end)
        return "hang", f"past {timeout_s:g} s"
    with os.fdopen(read_end, "rb") as handle:
        data = handle.read()
    return tuple(json.loads(data)) if data else ("traceback", "the child died")  # type: ignore[return-value]


def check(base: Path, where: Path, seed: int, index: int) -> list[tuple[Mutant, str, str, str]]:
    """Every op on mutant ``index``: (mutant, op, outcome, detail), outcome as ``run_op`` says,
    or ``silent`` where it ran although the file must be refused, ``false refusal`` the reverse."""
    path, out, mutant = make(base, where, seed, index)
    found = []
    for op in OPS:
        outcome, detail = run_op(op, path, out, where)
        expected = mutant.expect[op]
        if outcome == "ok" and expected == "refused":
            outcome = "silent"
        elif outcome == "refused" and expected == "ok":
            outcome = "false refusal"
        found.append((mutant, op, outcome, detail))
    for name in (path.name, out.name):
        for suffix in ("", "-wal", "-shm", "-journal"):
            (where / f"{name}{suffix}").unlink(missing_ok=True)
    (where / f"{path.stem}.csv").unlink(missing_ok=True)
    return found


BAD = ("traceback", "hang", "broken", "silent", "false refusal")
