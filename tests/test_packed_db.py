"""The shipped database form (benanza/store/packed.py): a packed database unpacks to the same rows,
value for value; a file that is not one is refused in one line naming it; the shipped file is one."""

from __future__ import annotations

import json
import lzma
import math
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_db import H100, conv_key, result

from benanza import SCHEMA_VERSION
from benanza.cli import main
from benanza.errors import BenanzaError
from benanza.paths import perfdb_dir
from benanza.records import JobKey
from benanza.store import db as perfdb
from benanza.store import packed as packed_db
from benanza.store.packed import PACKED_SUFFIX
from benanza.store.shipped import readable_db


def rows(path: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(path)
    try:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in packed_db.packed_tables()}
    finally:
        conn.close()


@pytest.fixture
def measured(tmp_path: Path) -> Path:
    """A small real database with the values a shortest-repr float or a careless encoder would lose."""
    path = tmp_path / "perf.db"
    db = perfdb.open_db(path)
    system = perfdb.upsert_system(db, H100)
    key = conv_key([1, 1, 1, 1])
    job = JobKey(key, "cudnnConvolutionForward", "fp32", "none", "warm", '["*"]', "NCHW")
    perfdb.record_job(db, system, job, "bench_conv_fwd", "ok", "", [
        result(key, "IMPLICIT_GEMM", median=0.1 + 0.2, notes={"named": "conv «ü» \u2028 1", "tflops": 1e-300}),
        result(key, "FFT", median=math.ulp(0.0)),  # the smallest double
        result(key, "WINOGRAD", median=123456789.12345679, max_rel_error=2.0 ** -52),
        result(key, "GEMM", median=None, status="not_supported", message="CUDNN_STATUS_NOT_SUPPORTED 'x'"),
    ])
    db.close()
    return path


def test_a_packed_database_unpacks_to_the_same_rows(measured: Path, tmp_path: Path) -> None:
    packed = tmp_path / f"perf{PACKED_SUFFIX}"
    counts = packed_db.pack(measured, packed)
    assert counts["benchmarks"] == 4 and counts["completed_jobs"] == 1 and counts["meta"] == 1
    back = tmp_path / "back.db"
    assert packed_db.unpack(packed, back) == counts
    assert rows(back) == rows(measured)  # exact: floats compare as doubles, text as text
    reopened = perfdb.open_db(back, readonly=True)  # a complete benanza database of this schema
    assert perfdb.schema_version(reopened) == SCHEMA_VERSION
    assert reopened.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one plain file
    reopened.close()
    packed_db.pack(measured, tmp_path / f"again{PACKED_SUFFIX}")
    assert (tmp_path / f"again{PACKED_SUFFIX}").read_bytes() == packed.read_bytes()  # same file, same bytes


def test_the_cli_packs_and_unpacks_and_a_reading_command_opens_the_packed_file(
        measured: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # where a reading command unpacks it
    packed = tmp_path / f"perf{PACKED_SUFFIX}"
    done = CliRunner().invoke(main, ["db", "pack", str(measured), str(packed)])
    assert done.exit_code == 0 and "4 benchmarks" in done.output, done.output
    done = CliRunner().invoke(main, ["db", "unpack", str(packed), str(tmp_path / "back.db")])
    assert done.exit_code == 0 and rows(tmp_path / "back.db") == rows(measured), done.output
    done = CliRunner().invoke(main, ["db", "unpack", str(packed), str(tmp_path / "back.db")])
    assert done.exit_code == 1 and "already exists" in done.output  # never over a database
    assert rows(readable_db(packed)) == rows(measured)
    done = CliRunner().invoke(main, ["db", "pack", str(measured), str(tmp_path / "perf.db.xz")])
    assert done.exit_code == 1 and f"ends in {PACKED_SUFFIX}" in done.output


def test_an_xz_compressed_sqlite_file_still_opens(measured: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The form perfdb/ shipped until session 13 (and `xz perf.db` gives): unpacked as it is."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    packed = tmp_path / "old.db.xz"
    with lzma.open(packed, "wb") as handle:
        handle.write(measured.read_bytes())
    assert rows(readable_db(packed)) == rows(measured)


def write(path: Path, data: bytes | str | dict) -> Path:
    text = data if isinstance(data, bytes | str) else json.dumps(data)
    with lzma.open(path, "wb") as handle:
        handle.write(text.encode() if isinstance(text, str) else text)
    return path


def packed_doc(measured: Path, tmp_path: Path) -> dict:
    packed_db.pack(measured, tmp_path / f"ok{PACKED_SUFFIX}")
    with lzma.open(tmp_path / f"ok{PACKED_SUFFIX}", "rt") as handle:
        return json.load(handle)


@pytest.mark.parametrize("damage, says", [
    ("not xz", "not a packed benanza database"),
    ("not json", "not a packed benanza database"),
    ("other format", "format is not benanza-columns/1"),
    ("old schema", "database schema version 0, this benanza reads"),
    ("unknown column", "unknown table or column 'dropped'"),
    ("unknown table", "unknown table or column 'attack; DROP TABLE meta'"),
    ("short column", "bad table data"),
])
def test_a_damaged_or_foreign_packed_file_is_refused_in_one_line(measured: Path, tmp_path: Path, damage: str,
                                                                  says: str) -> None:
    doc = packed_doc(measured, tmp_path)
    bench = doc["tables"]["benchmarks"]
    bad = tmp_path / f"bad{PACKED_SUFFIX}"
    if damage == "not xz":
        bad.write_bytes(b"SQLite format 3\0")
    elif damage == "not json":
        write(bad, "{\"format\": ")
    else:
        if damage == "other format":
            doc["format"] = "something/2"
        elif damage == "old schema":
            doc["schema_version"] = 0
        elif damage == "unknown column":
            bench["columns"][3] = "dropped"
        elif damage == "unknown table":
            doc["tables"]["attack; DROP TABLE meta"] = doc["tables"]["models"]
        elif damage == "short column":
            bench["values"][5].pop()
        write(bad, doc)
    target = tmp_path / "target.db"
    with pytest.raises(BenanzaError) as caught:
        packed_db.unpack(bad, target)
    message = str(caught.value)
    assert says in message and message.startswith(str(bad)) and "\n" not in message
    assert not target.exists() and [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []


def test_the_shipped_database_is_a_packed_one() -> None:
    shipped = perfdb_dir() / f"h100{PACKED_SUFFIX}"
    with lzma.open(shipped, "rt") as handle:
        head = handle.read(64)
    assert head.startswith('{"format":"benanza-columns/1"')
    assert list(perfdb_dir().glob("*.db.xz")) == []  # replaced, not accumulated
