"""The analyzer's prepared inputs cached on disk, keyed by every file they come from and benanza's source.

Why: before the analysis itself, ``analyze`` loads and shape-infers the ONNX model (onnx import
included), maps the bundle onto its layers and reads the database: about two thirds of a later
call's time, and the same answer each time the same files are given. The entry holds exactly what
``workflows.analysis.analyze_model`` computed (the ``Inputs`` and the bundle ``Mapping``), stored only after
every guard passed, so a hit skips that work and nothing else changes; the database rows alone are not
stored but read again on a hit (``store_prepared``: cheaper than pickling them).

Key (nothing can go stale, there is no version to bump): the SHA-256 of the model file and of every
file of the bundle (dot files aside); the size and modification time of the other files
beside the model (ONNX external data); the database file's identity (resolved path,
device, inode, size, modification time in ns; the same for its ``-wal`` file); the paths and
options as given; the SHA-256 of every ``.py`` file of the benanza package and the onnx version.
Touching the database, editing a bundle file or the model, or changing any benanza source misses.

Where: ``$XDG_CACHE_HOME/benanza/analysis`` only, never the bundle directory (an entry planted in a
bundle would override what its files say; see ``profile/parse_cache.py``); it keeps the ``KEEP``
newest entries. Files are read with an unpickler that builds only benanza's own record
classes and networkx's graph, so a foreign file can at worst fail to load (then all is recomputed).
"""

from __future__ import annotations

import dataclasses
import enum
import gc
import hashlib
import json
import pickle
import zlib
from importlib import metadata
from pathlib import Path
from typing import Any

from benanza import pickled_cache
from benanza.pickled_cache import hash_file

FORMAT = b"benanza-analysis-2\n"  # 2: without the database rows (store_prepared)
PREFIX = "analysis-"
KEEP = 8  # entries per directory (one per database/options combination a user analyzes with)
_PACKAGE = Path(__file__).resolve().parent.parent  # the benanza package: every source file is in the key
# Globals the unpickler may resolve: dataclasses and enums of these modules, and these classes.
TRUSTED_MODULES = frozenset({"benanza.analyze.inputs", "benanza.apis.base", "benanza.library",
                             "benanza.model.layer", "benanza.profile.mapping", "benanza.records"})
TRUSTED_CLASSES = frozenset({("networkx.classes.digraph", "DiGraph"),
                             ("networkx.classes.coreviews", "AdjacencyView"),
                             ("networkx.classes.reportviews", "OutEdgeView"),
                             ("networkx.classes.reportviews", "NodeView"),
                             ("pathlib", "PosixPath"), ("pathlib", "Path")})

_code_key: str | None = None


def code_key() -> str:
    """Hash of every benanza source file and the onnx version (shape inference decides the model's shapes)."""
    global _code_key
    if _code_key is None:
        digest = hashlib.sha256()
        for path in sorted(_PACKAGE.rglob("*.py")):
            digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
        try:
            digest.update(metadata.version("onnx").encode())
        except metadata.PackageNotFoundError:
            pass
        _code_key = digest.hexdigest()
    return _code_key


def file_digest(path: Path) -> str:
    return hash_file(hashlib.sha256(), path).hexdigest()


def bundle_digest(bundle: Path) -> list[tuple[str, str]]:
    """(name, SHA-256) of every file of a bundle directory, its caches (dot files) aside."""
    return [(p.name, file_digest(p)) for p in sorted(Path(bundle).iterdir())
            if p.is_file() and not p.name.startswith(".")]


def db_identity(path: Path) -> list[Any]:
    """Who the database file is now: a rewrite, an append or a copy over it changes one of these."""
    out: list[Any] = [str(Path(path).resolve())]
    for file in (Path(path), Path(f"{path}-wal")):
        try:
            st = file.stat()
        except OSError:
            out.append(None)
            continue
        out.append([st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns])
    return out


def beside(model: Path) -> list[Any]:
    """(name, size, mtime in ns) of the other files in the model's directory: its external data
    (ONNX weights stored beside the model) decides constant folding, so a change there misses."""
    out = []
    for p in sorted(Path(model).parent.iterdir()):
        try:
            if p.is_file() and p.name != Path(model).name:
                st = p.stat()
                out.append([p.name, st.st_size, st.st_mtime_ns])
        except OSError:
            continue
    return out


def entry_key(model: Path, bundle: Path | None, db: Path, options: dict[str, Any]) -> str:
    """The cache key of one ``analyze_model`` call (see the module doc)."""
    parts = {"code": code_key(), "model": [str(model), file_digest(model), beside(model)],
             "bundle": [str(bundle), bundle_digest(bundle)] if bundle is not None else None,
             "db": db_identity(db), "options": options}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def user_cache_dir() -> Path:
    return pickled_cache.user_cache_dir("analysis")


def _places(bundle: Path | None) -> tuple[Path, ...]:
    """Where entries live: the user cache alone, whatever the bundle (kept as a function: one place to say it)."""
    return (user_cache_dir(),)


# Resolves only benanza's record dataclasses and enums, networkx's graph and paths.
_Unpickler = pickled_cache.restricted_unpickler(TRUSTED_CLASSES, TRUSTED_MODULES, lambda c: issubclass(c, enum.Enum),
                                                "an analysis record class")


def load(key: str, bundle: Path | None) -> Any | None:
    """The stored value of ``key``, or None (absent, damaged or foreign)."""
    for directory in _places(bundle):
        file = directory / f"{PREFIX}{key}.pickle.z"
        if not file.is_file():
            continue
        enabled = gc.isenabled()
        gc.disable()  # tens of thousands of small objects: collections mid-load only cost time
        try:
            return pickled_cache.decode(FORMAT, file.read_bytes(), _Unpickler)
        except (OSError, EOFError, ValueError, zlib.error, pickle.UnpicklingError, AttributeError, TypeError,
                ImportError):
            pass  # recompute, and overwrite it
        finally:
            if enabled:
                gc.enable()
    return None


def store(key: str, bundle: Path | None, value: Any) -> Path | None:
    """Write atomically into the first writable place, keeping its ``KEEP`` newest entries."""
    data = pickled_cache.encode(FORMAT, value)
    for directory in _places(bundle):
        target = directory / f"{PREFIX}{key}.pickle.z"
        if not pickled_cache.write_atomic(directory, target.name, data):
            continue
        old = sorted(directory.glob(f"{PREFIX}*.pickle.z"), key=_mtime, reverse=True)
        for stale in old[KEEP:]:
            stale.unlink(missing_ok=True)
        return target
    return None


def store_prepared(key: str, bundle: Path | None, prepared: tuple[Any, Any]) -> Path | None:
    """``store`` of ``prepare``'s (Inputs, Mapping) without the database rows: they were 97 % of an entry
    (DenseNet-121 b64: 17 of 17.7 MB pickled), and reading them again from the database (whose identity
    is in the key) costs less than pickling and unpickling them; ``load_prepared`` reads them back."""
    inputs, mapping = prepared
    return store(key, bundle, (dataclasses.replace(inputs, measurements={}), mapping))


def load_prepared(key: str, bundle: Path | None, db_path: Path) -> tuple[Any, Any] | None:
    """What ``store_prepared`` stored under ``key``, its database rows read again (the same query
    ``prepare`` ran, ``measurement_keys``); None where there is no entry or the database cannot be read."""
    from benanza.analyze.inputs import measurement_keys
    from benanza.errors import BenanzaError
    from benanza.store import db as perfdb

    entry = load(key, bundle)
    if entry is None:
        return None
    inputs, mapping = entry
    try:
        db = perfdb.open_db(db_path, readonly=True)
        rows = perfdb.results_for(db, inputs.system["id"], measurement_keys(inputs.model, inputs.profile))
    except (BenanzaError, OSError):  # recomputed: prepare says what is wrong with it, in one line
        return None
    return dataclasses.replace(inputs, measurements=rows), mapping


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:  # removed meanwhile by another process pruning the same directory
        return 0
