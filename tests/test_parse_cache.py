"""Parsed bundle parts are cached (benanza/profile/parse_cache.py): the same records back, a
changed file parsed again, the cache in the user cache dir only (never the bundle), a foreign
pickle refused."""

from __future__ import annotations

import pickle
import shutil
import zlib
from pathlib import Path

import pytest

from benanza.profile import parse_cache
from benanza.profile.cudnn_log import read_cudnn_log
from benanza.profile.kineto import read_kineto_trace

SAMPLES = Path(__file__).parent / "data" / "samples"


@pytest.fixture
def user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "benanza" / "parsed"


def copy_sample(name: str, to: Path) -> Path:
    to.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(SAMPLES / name, to / name))


def test_the_cache_gives_back_what_the_reader_gave(tmp_path: Path, user_cache: Path) -> None:
    log = copy_sample("ort1.31_zfnet512_cudnn_api.log.gz", tmp_path / "bundle")
    parsed = parse_cache.cached_read(log, read_cudnn_log, "cudnn_log", progress=lambda _: None)
    (stored,) = user_cache.iterdir()
    assert stored.name.startswith("cudnn_log-")
    again = parse_cache.cached_read(log, read_cudnn_log, "cudnn_log")
    assert again == parsed == read_cudnn_log(log) and again is not parsed
    assert len(again.calls) > 10 and not (tmp_path / "bundle" / parse_cache.CACHE_DIR).exists()
    # the bundle moved: the records name the file they are read from now
    moved = tmp_path / "elsewhere" / "bundle"
    shutil.copytree(tmp_path / "bundle", moved)
    assert parse_cache.cached_read(moved / log.name, read_cudnn_log, "cudnn_log").path == moved / log.name
    trace = copy_sample("torch2.11_smallcnn_b1_trace.json.gz", tmp_path / "bundle")
    assert parse_cache.cached_read(trace, read_kineto_trace, "torch_trace") == read_kineto_trace(trace)
    assert parse_cache.cached_read(trace, read_kineto_trace, "torch_trace") == read_kineto_trace(trace)


def test_a_changed_file_is_parsed_again(tmp_path: Path, user_cache: Path) -> None:
    log = copy_sample("torch2.11_conv3x3_cudnn_api.log.gz", tmp_path / "bundle")
    first = parse_cache.cached_read(log, read_cudnn_log, "cudnn_log")
    shutil.copy(SAMPLES / "ort1.31_zfnet512_cudnn_api.log.gz", log)  # same name, other content
    second = parse_cache.cached_read(log, read_cudnn_log, "cudnn_log")
    assert second == read_cudnn_log(log) != first
    assert len(list(user_cache.iterdir())) == 2


def test_an_entry_planted_in_the_bundle_is_never_read(tmp_path: Path, user_cache: Path) -> None:
    """Issue 38: a ``.parsed/`` entry planted in a bundle (the name is the hash of the part, easy to
    compute) made GPU busy read another trace's time; the bundle directory is no cache now."""
    trace = copy_sample("torch2.11_smallcnn_b1_trace.json.gz", tmp_path / "bundle")
    real = read_kineto_trace(trace)
    planted = tmp_path / "bundle" / parse_cache.CACHE_DIR
    planted.mkdir()
    name = f"torch_trace-{parse_cache.file_key(trace, read_kineto_trace)}.pickle.z"
    lie = type(real)(**{**{f: getattr(real, f) for f in real.__dataclass_fields__}, "kernels": real.kernels[:1]})
    (planted / name).write_bytes(parse_cache.pickled_cache.encode(parse_cache.FORMAT, lie))
    assert parse_cache.cached_read(trace, read_kineto_trace, "torch_trace") == real
    assert [p.name for p in planted.iterdir()] == [name]  # nothing else written into the bundle


def test_a_read_only_bundle_is_fine(tmp_path: Path, user_cache: Path) -> None:
    log = copy_sample("torch2.11_conv3x3_cudnn_api.log.gz", tmp_path / "bundle")
    (tmp_path / "bundle" / parse_cache.CACHE_DIR).write_text("not a directory")  # mkdir there would fail
    said: list[str] = []
    parsed = parse_cache.cached_read(log, read_cudnn_log, "cudnn_log", progress=said.append)
    assert [p.name.split("-")[0] for p in user_cache.iterdir()] == ["cudnn_log"]
    assert parse_cache.cached_read(log, read_cudnn_log, "cudnn_log") == parsed
    assert said == []  # a small file parses in well under a second: no progress line


class Boom:
    def __reduce__(self) -> tuple:
        return (shutil.rmtree, ("/nonexistent-benanza-test",))


def test_a_foreign_pickle_is_refused_and_the_log_parsed(tmp_path: Path, user_cache: Path) -> None:
    log = copy_sample("torch2.11_conv3x3_cudnn_api.log.gz", tmp_path / "bundle")
    parse_cache.cached_read(log, read_cudnn_log, "cudnn_log")
    (stored,) = user_cache.iterdir()
    stored.write_bytes(parse_cache.FORMAT + zlib.compress(pickle.dumps(Boom())))
    with pytest.raises(pickle.UnpicklingError, match="not a profile record class"):
        parse_cache._load(stored)
    assert parse_cache.cached_read(log, read_cudnn_log, "cudnn_log") == read_cudnn_log(log)
    assert parse_cache._load(stored) == read_cudnn_log(log)  # rewritten with the real records


def test_large_parts_say_that_they_are_parsed(tmp_path: Path, user_cache: Path, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    log = copy_sample("ort1.31_zfnet512_cudnn_api.log.gz", tmp_path / "bundle")
    monkeypatch.setattr(parse_cache, "SLOW_BYTES", 1)
    said: list[str] = []
    parse_cache.cached_read(log, read_cudnn_log, "cudnn_log", progress=said.append)
    assert len(said) == 2 and said[0].startswith(f"parsing {log}") and said[1].startswith("parsed ")
    said.clear()
    parse_cache.cached_read(log, read_cudnn_log, "cudnn_log", progress=said.append)
    assert said == []  # read from the cache: nothing to wait for


def test_unpacking_the_shipped_database_says_so_once(user_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A shipped database is unpacked into the user's cache once, saying so once. Shown on a small packed
    database shipped from a directory of its own (the real one costs 15 CPU s to unpack: CI time)."""
    from benanza import SCHEMA_VERSION
    from benanza.store import db as perfdb
    from benanza.store import shipped
    from benanza.store.packed import PACKED_SUFFIX, pack

    shelf = tmp_path / "perfdb"
    shelf.mkdir()
    perfdb.open_db(tmp_path / "small.db").close()  # a complete benanza database, no rows
    pack(tmp_path / "small.db", shelf / f"small{PACKED_SUFFIX}")
    monkeypatch.setattr(shipped, "perfdb_dir", lambda: shelf)
    db = shipped.shipped_db("small")
    assert db.is_relative_to(user_cache.parent) and "unpacking" in capsys.readouterr().err
    assert perfdb.schema_version(perfdb.open_db(db, readonly=True)) == SCHEMA_VERSION
    assert shipped.shipped_db("small") == db and capsys.readouterr().err == ""


def test_processes_that_need_the_shipped_database_at_once_unpack_it_once(
        user_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two takers at once (two test workers, two commands) take turns on the lock beside the cache copy:
    one unpacks, the other opens its copy (the real database costs 15 CPU s per unpack: CI time). Threads
    stand for the processes (flock locks an open file, so two opens in one process contend as two
    processes do); the unpack is slowed so that the second arrives while the first still unpacks."""
    import threading
    import time

    from benanza.store import db as perfdb
    from benanza.store import shipped
    from benanza.store.packed import PACKED_SUFFIX, pack

    shelf = tmp_path / "perfdb"
    shelf.mkdir()
    perfdb.open_db(tmp_path / "small.db").close()
    pack(tmp_path / "small.db", shelf / f"small{PACKED_SUFFIX}")
    monkeypatch.setattr(shipped, "perfdb_dir", lambda: shelf)
    calls: list[Path] = []

    def slow_unpack(packed: Path, target: Path) -> dict[str, int]:
        calls.append(target)
        time.sleep(0.5)
        return shipped_unpack(packed, target)

    shipped_unpack = shipped.unpack
    monkeypatch.setattr(shipped, "unpack", slow_unpack)
    both = threading.Barrier(2)
    got: list[Path] = []

    def take() -> None:
        both.wait()
        got.append(shipped.shipped_db("small"))

    takers = [threading.Thread(target=take) for _ in range(2)]
    for t in takers:
        t.start()
    for t in takers:
        t.join()
    assert len(calls) == 1 and got == [calls[0], calls[0]] and calls[0].is_file()
    assert [p.name for p in calls[0].parent.iterdir()] == [calls[0].name]  # no lock file left beside it


def test_the_key_covers_every_module_whose_code_decides_a_cudnn_parse() -> None:
    """Since each API's definition carries its log side (how a call is recognised, its signature read),
    and the record reader lives apart from the parser, their source must be in the key: with only the
    parser modules hashed, an edited recogniser or record reader read the old cache."""
    import ast
    import importlib.util

    keyed = set(parse_cache.key_modules())
    assert {"benanza.apis.conv", "benanza.apis.graph", "benanza.apis.log_side",
            "benanza.profile.cudnn_records"} <= keyed
    source = Path(importlib.util.find_spec("benanza.profile.cudnn_log").origin).read_text()
    imported = {n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)
                and n.module and n.module.startswith("benanza")}
    assert imported <= keyed | {"benanza.errors"}  # errors: messages only, never what is returned
