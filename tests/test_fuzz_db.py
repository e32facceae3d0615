"""Damaged, foreign, shared and full databases: one-line errors, nothing written where it must not be,
nothing lost (docs/DATABASE.md, "Guarantees")."""

from __future__ import annotations

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

import pytest
from click.testing import CliRunner

from benanza import db as perfdb
from benanza.cli import main
from benanza.errors import BenanzaError
from benanza.records import Result

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
    from benanza import db
    from benanza.records import Result
    path, tag, start, n = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    while time.time() < start:
        pass
    d = db.open_db(path)
    sid = db.upsert_system(d, {"gpu": "G", "sm_count": 1})
    for i in range(n):
        key = db.JobKey(f"{tag}-{i}", "cudnnConvolutionForward", "fp32", "none", "warm", '["*"]')
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


MERGE = "import sys; from benanza import db; db.merge(sys.argv[1], sys.argv[2:])"


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
    from benanza import db
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
