"""Damaged, foreign, shared and full databases: one-line errors, nothing written where it must not be,
nothing lost (docs/DATABASE.md, "Guarantees")."""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import hostile_databases
import onnx
import pytest
from click.testing import CliRunner
from conftest import LIGHT

from benanza.apis.ceilings import CEILING_KEY
from benanza.cli import main
from benanza.errors import BenanzaError
from benanza.model.layer import bias_add, separate_bias
from benanza.model.onnx_import import load_model
from benanza.records import Result
from benanza.store import db as perfdb
from benanza.store.shipped import shipped_db

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
H100 = {"gpu": "NVIDIA H100", "sm_count": 132, "cc": "9.0", "cuda_driver": "13.0", "cuda_runtime": "13.0",
        "cudnn_version": "9.19.0", "cublas_version": "13.1.0"}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_line_error(result, needle: str) -> None:
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], result.output


def _results(n: int, tag: str) -> list[Result]:
    return [Result(f"layer-{tag}-{i}", "cudnnConvolutionForward", "0", "fp32", "fma", "none", "ok", median_ms=0.1,
                   repetitions=10) for i in range(n)]


def _benanza_db(path: Path, rows: int = 3) -> Path:
    db = perfdb.open_db(path)
    sid = perfdb.upsert_system(db, H100)
    perfdb.insert_results(db, sid, _results(rows, "x"))
    db.close()
    return path


READ_COMMANDS = (["db", "info"], ["db", "systems"], ["db", "info", "--json"])


def test_foreign_and_empty_files_are_refused_untouched(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO photos VALUES (1, 'cat')")
    conn.commit()
    conn.close()
    empty = tmp_path / "empty.db"
    empty.touch()
    before = {p: _digest(p) for p in (foreign, empty)}
    for path in (foreign, empty):
        for argv in (*READ_COMMANDS, ["db", "export", "--csv", str(tmp_path / "x.csv")]):
            _one_line_error(CliRunner().invoke(main, [*argv[:2], str(path), *argv[2:]]), "not a benanza")
    with pytest.raises(BenanzaError, match="not a benanza performance database"):
        perfdb.open_db(foreign)  # a writer refuses it too
    assert {p: _digest(p) for p in (foreign, empty)} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "foreign.db"]  # no -wal, -shm, csv


def test_read_only_file_and_a_busy_writer(tmp_path: Path) -> None:
    path = _benanza_db(tmp_path / "perf.db")
    os.chmod(path, 0o444)
    before = _digest(path)
    writer = sqlite3.connect(path, isolation_level=None)  # holds the write lock the whole time
    writer.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        for argv in READ_COMMANDS:
            result = CliRunner().invoke(main, [*argv[:2], str(path), *argv[2:]])
            assert result.exit_code == 0, result.output
        assert time.monotonic() - started < 10  # readers do not wait behind a writer
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert _digest(path) == before


def test_damaged_files_and_bad_versions_are_one_line_errors(tmp_path: Path) -> None:
    path = _benanza_db(tmp_path / "perf.db", rows=2000)
    data = bytearray(path.read_bytes())
    data[4096:4096 * 4] = b"\xa5" * (4096 * 3)  # pages of the tables, header intact
    path.write_bytes(bytes(data))
    _one_line_error(CliRunner().invoke(main, ["db", "info", str(path)]), str(path))
    word = _benanza_db(tmp_path / "word.db")
    conn = sqlite3.connect(word)
    conn.execute("UPDATE meta SET value = 'two' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    _one_line_error(CliRunner().invoke(main, ["db", "info", str(word)]), "schema_version 'two' is not a number")
    with pytest.raises(BenanzaError, match="is not a number"):
        perfdb.open_db(word)


WRITER = textwrap.dedent("""
    import sys, time
    from benanza.store import db
    from benanza.records import JobKey, Result
    path, tag, start, n = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    while time.time() < start:
        pass
    d = db.open_db(path)
    sid = db.upsert_system(d, {"gpu": "G", "sm_count": 1})
    for i in range(n):
        key = JobKey(f"{tag}-{i}", "cudnnConvolutionForward", "fp32", "none", "warm", '["*"]')
        r = Result(f"{tag}-{i}", "cudnnConvolutionForward", "0", "fp32", "fma", "none", "ok", median_ms=0.1)
        db.record_job(d, sid, key, "bench", "ok", "", [r])
""")


def test_two_processes_create_and_write_one_database(tmp_path: Path) -> None:
    n = 40
    for attempt in range(3):  # both create the file at the same instant
        path = tmp_path / f"shared{attempt}.db"
        start = time.time() + 0.8
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"p{k}", str(start), str(n)], env=ENV,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(2)]
        outputs = [p.communicate(timeout=60) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outputs
        db = perfdb.open_db(path, readonly=True)
        assert db["benchmarks"].count == 2 * n and db["completed_jobs"].count == 2 * n
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert not [p for p in tmp_path.iterdir() if ".creating" in p.name]


MERGE = "import sys; from benanza.store import db; db.merge(sys.argv[1], sys.argv[2:])"


def test_kill_9_mid_merge_is_all_or_nothing(tmp_path: Path) -> None:
    source = tmp_path / "big.db"
    db = perfdb.open_db(source)
    sid = perfdb.upsert_system(db, H100)
    perfdb.insert_results(db, sid, _results(60_000, "big"))
    db.close()
    outcomes = set()
    for delay in (0.0, 0.02, 10.0):
        out = tmp_path / f"out{delay}.db"
        _benanza_db(out, rows=5)
        proc = subprocess.Popen([sys.executable, "-c", MERGE, str(out), str(source)], env=ENV)
        wal = Path(f"{out}-wal")
        deadline = time.monotonic() + 30
        while delay < 10 and time.monotonic() < deadline and not (wal.exists() and wal.stat().st_size > 4096 * 4):
            time.sleep(0.005)
        time.sleep(min(delay, 0.05))
        if delay < 10:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        count = perfdb.open_db(out, readonly=True)["benchmarks"].count
        assert count in (5, 60_005), (delay, count)
        outcomes.add(count)
    assert 60_005 in outcomes and 5 in outcomes, outcomes  # the uninterrupted merge


FULL_DISK = textwrap.dedent("""
    import sys
    from benanza.store import db
    from benanza.records import Result
    d = db.open_db(sys.argv[1])
    sid = db.upsert_system(d, {"gpu": "G", "sm_count": 1})
    rows = [Result(f"layer-{i}" + "x" * 200, "cudnnConvolutionForward", "0", "fp32", "fma", "none", "ok",
                   median_ms=0.1, message="m" * 500) for i in range(20000)]
    db.insert_results(d, sid, rows)
""")


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    """A 1 MiB tmpfs (needs root, as on the lead's machine; skipped elsewhere)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount") or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk_is_a_one_line_error_and_keeps_what_was_there(small_tmpfs: Path) -> None:
    path = _benanza_db(small_tmpfs / "perf.db", rows=10)
    done = subprocess.run([sys.executable, "-c", FULL_DISK.replace("db.open_db", "db.open_db"), str(path)], env=ENV,
                          capture_output=True, text=True)
    assert done.returncode != 0
    result = CliRunner().invoke(main, ["db", "info", str(path)])
    assert result.exit_code == 0, result.output
    db = perfdb.open_db(path, readonly=True)
    assert db["benchmarks"].count == 10 and db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with pytest.raises(BenanzaError) as info:
        sid = perfdb.upsert_system(perfdb.open_db(path), H100)
        perfdb.insert_results(perfdb.open_db(path), sid, [r for r in _results(20000, "y" * 300)])
    assert "\n" not in str(info.value) and "write failed, nothing of it was stored" in str(info.value)
    assert "full" in str(info.value)
    assert perfdb.open_db(path, readonly=True)["benchmarks"].count == 10


# ---------------------------------------------------------------- issue 38: hostile databases (items 2, 3, 4, 8, 9)

SQUEEZENET = LIGHT / "light_squeezenet.onnx"


@pytest.fixture(scope="module")
def squeezenet_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped H100 rows that ``analyze`` reads for SqueezeNet at batch 1 (its layers, fusion
    candidates, conv bias adds and the ceilings), as a database of their own: real data, small."""
    model = load_model(SQUEEZENET, 1)
    keys = {layer.key for layer in model.layers} | {f.key for f in model.fusions} | {CEILING_KEY}
    keys |= {bias_add(layer).key for layer in model.layers if separate_bias(layer)}
    path = tmp_path_factory.mktemp("squeezenet") / "squeezenet.db"
    perfdb.open_db(path).close()
    conn = sqlite3.connect(path)
    conn.execute("ATTACH DATABASE ? AS h", (f"{shipped_db().resolve().as_uri()}?mode=ro",))
    conn.execute("INSERT INTO systems SELECT * FROM h.systems")
    conn.execute(f"INSERT INTO benchmarks SELECT * FROM h.benchmarks WHERE layer_key IN "
                 f"({', '.join('?' * len(keys))})", sorted(keys))
    conn.commit()
    conn.close()
    return path


def _poisoned(source: Path, where: Path, sql: str, *params: object) -> Path:
    """A copy of ``source`` changed by one raw SQL statement (as a broken tool or a hostile user would)."""
    path = where / f"poisoned{_poisoned.count}.db"  # type: ignore[attr-defined]
    _poisoned.count += 1  # type: ignore[attr-defined]
    shutil.copyfile(source, path)
    conn = sqlite3.connect(path)
    conn.execute(sql, params)
    conn.commit()
    conn.close()
    return path


_poisoned.count = 0  # type: ignore[attr-defined]

NEGATIVE = "not a finite non-negative"
POISON_MEDIANS = [(-999.999, NEGATIVE), (-1.0, NEGATIVE), (0.0, "not > 0"), (float("nan"), "without a median_ms"),
                  (float("inf"), "not a finite"), ("fast", "not a finite")]


@pytest.mark.parametrize("median, says", POISON_MEDIANS)
def test_analyze_refuses_a_database_with_poison_medians(median: object, says: str, squeezenet_db: Path,
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 2: negative medians gave LBL_seq -65 ms, all-zero 0.0017 ms, NaN a quietly wrong 0.088 ms,
    each with exit code 0; now one line naming the file and the row."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no analysis cache from another test
    good = CliRunner().invoke(main, ["analyze", str(SQUEEZENET), "--db", str(squeezenet_db), "--batch", "1"])
    assert good.exit_code == 0, good.output
    path = _poisoned(squeezenet_db, tmp_path, "UPDATE benchmarks SET median_ms = ? WHERE status = 'ok'", median)
    out = CliRunner().invoke(main, ["analyze", str(SQUEEZENET), "--db", str(path), "--batch", "1"])
    _one_line_error(out, says)
    assert str(path) in out.output


@pytest.mark.parametrize("sql, params, says", [
    ("UPDATE benchmarks SET median_ms = ? WHERE status = 'ok'", (-1.0,), "not a finite non-negative"),
    ("UPDATE benchmarks SET median_ms = ? WHERE status = 'ok'", (float("nan"),), "without a median_ms"),
    ("UPDATE benchmarks SET median_ms = ? WHERE status = 'ok'", ("fast",), "not a finite"),
    ("UPDATE benchmarks SET repetitions = ?", (-5,), "not an integer"),
    ("UPDATE benchmarks SET status = ?", ("[/bold]",), "unknown status"),
    ("UPDATE systems SET gpu = ?", ("G" * 10_000_000,), "characters long"),
    ("UPDATE layers SET flops = ?", (-1,), "not an integer >= 0"),
])
def test_merge_refuses_poison_rows_and_keeps_out(sql: str, params: tuple, says: str, tmp_path: Path) -> None:
    """Item 2: an input with negative medians went in (5 553 -> 10 440 rows) and poisoned every later
    analysis. Every row of every input is checked first; a refusal leaves OUT as it was."""
    out = _benanza_db(tmp_path / "out.db", rows=5)
    source = _benanza_db(tmp_path / "in.db", rows=5)
    db = perfdb.open_db(source)
    perfdb.store_manifest_layers(db, [{"key": "layer-x-0", "op": "Conv", "flops": 10}])
    db.close()
    path = _poisoned(source, tmp_path, sql, *params)
    conn = sqlite3.connect(path)  # new keys, so that a merge would add them
    conn.execute("UPDATE benchmarks SET algorithm = 'new'")
    conn.commit()
    conn.close()
    before = _digest(out)
    result = CliRunner().invoke(main, ["db", "merge", str(out), str(path)])
    _one_line_error(result, says)
    assert str(path) in result.output and "nothing was merged" in result.output
    assert _digest(out) == before
    fresh = tmp_path / "fresh.db"
    _one_line_error(CliRunner().invoke(main, ["db", "merge", str(fresh), str(source), str(path)]), says)
    assert not fresh.exists()  # no OUT where there was none, not even the first input's rows


VIEW = ("ALTER TABLE benchmarks RENAME TO b0; DROP VIEW benchmark_details; DROP VIEW model_benchmarks; "
        "CREATE VIEW benchmarks AS SELECT b0.* FROM b0, b0 x, b0 y, b0 z;")
RECURSIVE = ("ALTER TABLE benchmarks RENAME TO b0; DROP VIEW benchmark_details; DROP VIEW model_benchmarks; "
             "CREATE VIEW benchmarks AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
             "SELECT b0.* FROM b0, r;")


@pytest.mark.parametrize("script, in_out, says", [
    (VIEW, False, "benchmarks is a view, not a table"),  # grew OUT from 4.7 MB to 1.29 GB in 15 s
    (RECURSIVE, False, "benchmarks is a view, not a table"),  # hung the merge
    ("CREATE TRIGGER t AFTER INSERT ON layers BEGIN DELETE FROM benchmarks; END;", False, "has a trigger"),
    ("CREATE TRIGGER t AFTER INSERT ON benchmarks BEGIN DELETE FROM layers; END;", True, "has a trigger"),
    ("CREATE VIEW evil AS SELECT 1;", False, "has a view 'evil'"),
    ("ALTER TABLE benchmarks ADD COLUMN evil TEXT;", False, "column 'evil' that benanza does not write"),
])
def test_merge_reads_inputs_as_data(script: str, in_out: bool, says: str, tmp_path: Path) -> None:
    """Item 3: SQL of the input (a view standing in for a table, a recursive view) ran during the
    merge and triggers in OUT fired; now only tables are read, and the rest is refused in one line."""
    out = _benanza_db(tmp_path / "out.db", rows=48)
    path = _benanza_db(tmp_path / "in.db", rows=48)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE benchmarks SET algorithm = 'new'")
    conn.commit()
    conn.close()
    hostile = out if in_out else path
    conn = sqlite3.connect(hostile)
    conn.executescript(script)
    conn.close()
    before = _digest(out)
    started = time.monotonic()
    result = CliRunner().invoke(main, ["db", "merge", str(out), str(path)])
    assert time.monotonic() - started < 10
    _one_line_error(result, says)
    assert str(hostile) in result.output
    assert _digest(out) == before and out.stat().st_size < 1_000_000


def _cells(path: Path) -> list[str]:
    with open(path, newline="") as handle:
        return [cell for row in list(csv.reader(handle))[1:] for cell in row]


FORMULAS = ("=HYPERLINK(\"http://x\",\"y\")", "+1+2", "-2+3", "@SUM(1)", "\t=1", "\r=1")


def _risky(cells: list[str]) -> list[str]:
    return [c for c in cells if c.startswith(("=", "+", "-", "@", "\t", "\r"))]


def test_db_export_neutralizes_formula_cells(tmp_path: Path) -> None:
    """Item 4: names starting with = + - @ landed as formula cells (296/296 in db export)."""
    path = _benanza_db(tmp_path / "perf.db", rows=len(FORMULAS))
    db = perfdb.open_db(path)
    perfdb.store_manifest_layers(db, [{"key": f"layer-x-{i}", "op": f} for i, f in enumerate(FORMULAS)])
    perfdb.store_manifest_models(db, [{"name": f, "batch": 1, "layers": [{"index": 0, "key": f"layer-x-{i}"}]}
                                      for i, f in enumerate(FORMULAS)])
    db.close()
    conn = sqlite3.connect(path)
    conn.executemany("UPDATE benchmarks SET message = ?, algorithm = ? WHERE layer_key = ?",
                     [(f, f, f"layer-x-{i}") for i, f in enumerate(FORMULAS)])
    conn.execute("UPDATE systems SET gpu = '@NVIDIA H100'")
    conn.commit()
    conn.close()
    out = tmp_path / "perf.csv"
    assert CliRunner().invoke(main, ["db", "export", str(path), "--csv", str(out)]).exit_code == 0
    cells = _cells(out)
    assert not _risky(cells)
    assert {f"'{f}" for f in FORMULAS} <= set(cells) and "'@NVIDIA H100" in cells  # kept, shown as text


def test_analyze_csv_neutralizes_formula_node_names(squeezenet_db: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 4: node names starting with = + - @ landed as formula cells in analyze --csv (24/24 rows)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = onnx.load(SQUEEZENET)
    for i, node in enumerate(model.graph.node):
        node.name = f"{FORMULAS[i % len(FORMULAS)]}{i}"
    path = tmp_path / "=cmd.onnx"
    onnx.save(model, path)
    out = tmp_path / "layers.csv"
    result = CliRunner().invoke(main, ["analyze", str(path), "--db", str(squeezenet_db), "--batch", "1",
                                       "--csv", str(out)])
    assert result.exit_code == 0, result.output
    cells = _cells(out)
    assert not _risky(cells)
    assert "'\r=141" in cells and sum(c.startswith("'") for c in cells) >= 40  # names kept, as text


def test_db_export_of_a_damaged_page_or_text_median_is_one_line(tmp_path: Path) -> None:
    """Items 8/9: db export on a corrupt page and on text medians ended in a traceback; so did every
    command on a text value that is not UTF-8 (UnicodeDecodeError)."""
    damaged = _benanza_db(tmp_path / "damaged.db", rows=2000)
    data = bytearray(damaged.read_bytes())
    data[4096 * 3:4096 * 6] = b"\xa5" * (4096 * 3)
    damaged.write_bytes(bytes(data))
    text = _poisoned(_benanza_db(tmp_path / "text.db"), tmp_path, "UPDATE benchmarks SET median_ms = 'fast'")
    bytes_ = _poisoned(_benanza_db(tmp_path / "bytes.db"), tmp_path,
                       "UPDATE benchmarks SET message = CAST(X'FFFE41E8' AS TEXT)")  # found by the fuzzer
    for path, says in ((damaged, str(damaged)), (text, "'median_ms' = fast is not a finite"),
                       (bytes_, "Could not decode to UTF-8")):
        out = tmp_path / f"{path.stem}.csv"
        _one_line_error(CliRunner().invoke(main, ["db", "export", str(path), "--csv", str(out)]), says)
        assert not out.exists()


def test_db_info_shows_stored_strings_as_text_and_caps_them(tmp_path: Path) -> None:
    """Items 8/9: a status with rich markup made db info fail (MarkupError); a 10 MB GPU name was
    held and printed whole by db info and written into every row by db export."""
    path = _poisoned(_benanza_db(tmp_path / "perf.db"), tmp_path, "UPDATE benchmarks SET status = '[/bold]'")
    result = CliRunner().invoke(main, ["db", "info", str(path)])
    assert result.exit_code == 0, result.output
    assert "[/bold]" in result.output
    huge = _poisoned(_benanza_db(tmp_path / "huge.db"), tmp_path, "UPDATE systems SET gpu = ?", "G" * 10_000_000)
    result = CliRunner().invoke(main, ["db", "info", str(huge)])
    assert result.exit_code == 0 and len(result.output) < 20_000 and "10000000 characters" in result.output
    out = tmp_path / "huge.csv"
    _one_line_error(CliRunner().invoke(main, ["db", "export", str(huge), "--csv", str(out)]),
                    "gpu is 10000000 characters long")
    assert not out.exists()


def test_fuzzed_databases(tmp_path: Path) -> None:
    """A seeded subset of bench/fuzz_databases.py (every mutation class, 70 mutants): no traceback, no
    hang, no silent wrong answer, no false refusal; a refused merge leaves its output as it was."""
    base = hostile_databases.base_db(tmp_path / "base.db")
    bad = [(m.label, m.detail, op, outcome, detail)
           for i in range(70) for m, op, outcome, detail in hostile_databases.check(base, tmp_path, 1, i)
           if outcome in hostile_databases.BAD]
    assert bad == []
