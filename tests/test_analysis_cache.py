"""The analyzer's prepared inputs are cached (benanza/workflows/analysis_cache.py): a later call on the same
files reads them back and reports the same; a changed bundle file, model or database misses."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
from conftest import LIGHT, with_parsed_bundles

from benanza.paths import perfdb_dir
from benanza.profile.parse_cache import CACHE_DIR
from benanza.report import to_json
from benanza.store.shipped import shipped_db
from benanza.workflows import analysis, analysis_cache
from benanza.workflows import prepare as preparation

BUNDLE = perfdb_dir() / "bundles" / "resnet50_b1_ort_fp32"
MODEL = LIGHT / "light_resnet50.onnx"


@pytest.fixture(scope="module")
def h100() -> Path:
    """The shipped database from the user's cache, resolved before a test empties XDG_CACHE_HOME (unpacking
    it again into each test's empty cache cost 15 CPU s: CI time, docs/RESULTS.md §16)."""
    return shipped_db()


PREPARED: list[Any] = []  # what each counted preparation returned, the latest last


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Path]:
    """Each call of the uncached preparation (model load, mapping, database reads), by bundle; what it
    returned goes to ``PREPARED``. An empty analysis cache; the parse cache holds BUNDLE's parts."""
    with_parsed_bundles(tmp_path / "xdg", BUNDLE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    calls: list[Path] = []
    prepare = preparation.prepare
    PREPARED.clear()

    def counting(model: Path, db: Path, bundle: Path | None, *args: object) -> object:
        calls.append(bundle)
        PREPARED.append(prepare(model, db, bundle, *args))
        return PREPARED[-1]

    monkeypatch.setattr(preparation, "prepare", counting)
    return calls


def test_a_later_call_reads_the_cache_and_a_changed_bundle_file_misses(tmp_path: Path, h100: Path,
                                                                         counted: list[Path]) -> None:
    bundle = Path(shutil.copytree(BUNDLE, tmp_path / BUNDLE.name, ignore=shutil.ignore_patterns(CACHE_DIR)))
    model = Path(shutil.copy(MODEL, tmp_path / MODEL.name))
    db = h100
    first, mapping = analysis.analyze_model(model, db, bundle)
    assert counted == [bundle]
    assert len(list(analysis_cache.user_cache_dir().glob(f"{analysis_cache.PREFIX}*"))) == 1
    assert not (bundle / CACHE_DIR).exists()  # never written into the bundle
    # the entry holds no database rows (97 % of its size): a hit reads them again, the same as prepare read
    stored = next(analysis_cache.user_cache_dir().glob(f"{analysis_cache.PREFIX}*"))
    key = stored.name.removeprefix(analysis_cache.PREFIX).removesuffix(".pickle.z")
    assert analysis_cache.load(key, bundle)[0].measurements == {}
    read_back = analysis_cache.load_prepared(key, bundle, db)[0].measurements
    assert read_back == PREPARED[0][0].measurements and len(read_back) > 50
    assert list(read_back) == list(PREPARED[0][0].measurements)
    again, mapping_again = analysis.analyze_model(model, db, bundle)
    assert counted == [bundle]  # read back: no model load, no mapping
    assert to_json(again) == to_json(first) and mapping_again == mapping
    assert to_json(first) == to_json(analysis.analyze_model(model, db, bundle, cache=False)[0])
    # the same meta.json, written again with other whitespace: another file content, parsed and mapped again
    meta = bundle / "meta.json"
    meta.write_text(json.dumps(json.loads(meta.read_text()), indent=4) + "\n")
    assert to_json(analysis.analyze_model(model, db, bundle)[0]) == to_json(first)
    assert len(counted) == 3
    # the model file written again with the same bytes: keyed by content, still a hit
    model.write_bytes(model.read_bytes())
    analysis.analyze_model(model, db, bundle)
    assert len(counted) == 3
    # a damaged entry does not load (and is then recomputed and rewritten)
    for stored in analysis_cache.user_cache_dir().glob(f"{analysis_cache.PREFIX}*"):
        stored.write_bytes(stored.read_bytes()[:100])
        key = stored.name.removeprefix(analysis_cache.PREFIX).removesuffix(".pickle.z")
        assert analysis_cache.load(key, bundle) is None


def test_the_key_follows_the_model_the_bundle_and_the_database(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "meta.json").write_text("{}")
    model = tmp_path / "m.onnx"
    model.write_bytes(b"model")
    db = tmp_path / "perf.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()

    def key() -> str:
        return analysis_cache.entry_key(model, bundle, db, {"apis": "both"})

    before = key()
    assert key() == before
    (bundle / CACHE_DIR).mkdir()
    (bundle / CACHE_DIR / "cudnn_log-0.pickle.z").write_bytes(b"x")  # the bundle's own caches do not count
    assert key() == before
    stat = db.stat()
    os.utime(db, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # touched: maybe rewritten
    touched = key()
    assert touched != before
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
    assert key() != touched
    written = key()
    (bundle / "cudnn_api.log").write_text("I! CuDNN")
    assert key() != written
    with_log = key()
    (tmp_path / "m.onnx.data").write_bytes(b"external weights")  # ONNX external data beside the model
    assert key() != with_log
    with_data = key()
    model.write_bytes(b"other model")
    assert key() != with_data
    assert analysis_cache.entry_key(model, bundle, db, {"apis": "legacy"}) != key()


def test_a_foreign_pickle_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    bundle = tmp_path / "bundle"
    cache = analysis_cache.user_cache_dir()
    cache.mkdir(parents=True)
    hostile = pickle.dumps(os.system)  # would resolve posix.system
    entry = cache / f"{analysis_cache.PREFIX}k.pickle.z"
    entry.write_bytes(analysis_cache.FORMAT + zlib.compress(hostile))
    assert analysis_cache.load("k", bundle) is None
    stored = analysis_cache.store("k2", bundle, {"value": (1, 2.5, "x")})
    assert stored is not None and stored.parent == cache
    assert analysis_cache.load("k2", bundle) == {"value": (1, 2.5, "x")}


def test_an_entry_planted_in_the_bundle_is_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: ``<bundle>/.parsed/analysis-<key>`` used to be read before the user cache, so a
    bundle could carry the answer it wanted; now only the user cache is read."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    bundle = tmp_path / "bundle"
    (bundle / CACHE_DIR).mkdir(parents=True)
    (bundle / CACHE_DIR / f"{analysis_cache.PREFIX}k.pickle.z").write_bytes(
        analysis_cache.FORMAT + zlib.compress(pickle.dumps({"planted": True})))
    assert analysis_cache.load("k", bundle) is None


def test_a_missing_model_or_bundle_is_still_one_line(tmp_path: Path) -> None:
    from benanza.errors import BenanzaError

    with pytest.raises(BenanzaError, match=r"nope\.onnx"):
        analysis.analyze_model(tmp_path / "nope.onnx", shipped_db())
    with pytest.raises(BenanzaError, match="no_bundle"):
        analysis.analyze_model(MODEL, shipped_db(), tmp_path / "no_bundle")
