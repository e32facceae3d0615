"""Parsed bundle parts cached on disk, keyed by the source file's hash and the parsers' own source.

Why: a batch-64 bundle's cuDNN API log is over a million lines; parsing it costs 10-40 s on a
laptop core, and ``analyze``, the bench scripts and the tests read the same bundles again and
again. The cache holds exactly what the reader returned, so a changed log or a changed parser
misses and parses again: nothing can go stale and there is no version number to bump.

Where: the user cache ``$XDG_CACHE_HOME/benanza/parsed`` only, never the bundle directory: a
bundle is someone else's data (shipped in perfdb/bundles, or received), and an entry planted in
its old ``.parsed/`` made GPU busy read 23.8 ms where the visible trace says 2.43 ms. The name
of an entry is the hash of the bytes it was parsed from, so an edited part misses. The files are
pickles read with an unpickler that only builds benanza's own profile record classes, so a
damaged or foreign file can at worst fail to load (then the part is parsed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import pickle
import pkgutil
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from benanza import pickled_cache
from benanza.pickled_cache import hash_file

CACHE_DIR = ".parsed"  # where bundles held caches before: never read (nor written) now
FORMAT = b"benanza-parsed-1\n"
SLOW_S = 1.0  # parses that may take longer than this print a progress line
SLOW_BYTES = 1 << 18  # ... judged by the source file's size (a 256 KiB .xz log parses in about a second)
# The modules whose code decides what a reader returns: their source is part of the key.
PARSER_MODULES = ("benanza.profile._io", "benanza.profile.bundle", "benanza.profile.cudnn_log",
                  "benanza.profile.cublas_log", "benanza.profile.kineto", "benanza.profile.ort_profile",
                  "benanza.library")
# What else decides a parse, so its source is part of the key too: the cuDNN record reader and every
# API definition (the registry's log side: how a call is recognised and its signature read).
KEY_PACKAGES = ("benanza.apis",)
KEY_MODULES = ("benanza.profile.cudnn_records",)
# Globals the unpickler may resolve: the record classes of these modules, and paths.
TRUSTED_MODULES = frozenset(PARSER_MODULES)
TRUSTED_PATHS = frozenset({("pathlib", "PosixPath"), ("pathlib", "WindowsPath"), ("pathlib", "Path"),
                           ("pathlib._local", "PosixPath"), ("pathlib._local", "WindowsPath")})

T = TypeVar("T")
_parsers_key: str | None = None


def key_modules() -> list[str]:
    """The modules whose source is the key: the parsers, the record reader and every API module."""
    packaged = []
    for package in KEY_PACKAGES:
        path = importlib.import_module(package).__path__
        packaged += [package, *sorted(f"{package}.{info.name}" for info in pkgutil.iter_modules(path))]
    return [*PARSER_MODULES, *KEY_MODULES, *packaged]


def parsers_key() -> str:
    """Hash of the parsing code's source: a changed parser (or API log side) never reads an old cache."""
    global _parsers_key
    if _parsers_key is None:
        digest = hashlib.sha256()
        for name in key_modules():
            digest.update(Path(importlib.import_module(name).__file__ or "").read_bytes())
        _parsers_key = digest.hexdigest()[:16]
    return _parsers_key


def file_key(path: Path, reader: Callable[[Path], Any]) -> str:
    """The cache key of one parsed file: its content, its reader and the parsers' source."""
    digest = hash_file(hashlib.sha256(), path)
    digest.update(f"{reader.__module__}.{reader.__qualname__}:{parsers_key()}".encode())
    return digest.hexdigest()[:32]


def user_cache_dir() -> Path:
    return pickled_cache.user_cache_dir("parsed")


# Resolves only benanza's profile dataclasses (and str enums) and paths; anything else is refused.
_RecordUnpickler = pickled_cache.restricted_unpickler(TRUSTED_PATHS, TRUSTED_MODULES, lambda c: issubclass(c, str),
                                                      "a profile record class")


def _load(file: Path) -> Any:
    return pickled_cache.decode(FORMAT, file.read_bytes(), _RecordUnpickler)


def _with_path(value: Any, path: Path) -> Any:
    """A record that names its source file names the file it was read from now, not the cached one
    (its notes too: a copy of a cut log said the first copy's path was cut short)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and \
            any(f.name == "path" for f in dataclasses.fields(value)):
        changes: dict[str, Any] = {"path": path}
        old = str(value.path)
        if old != str(path) and isinstance(getattr(value, "notes", None), tuple):
            changes["notes"] = tuple(n.replace(old, str(path)) if isinstance(n, str) else n for n in value.notes)
        return dataclasses.replace(value, **changes)
    return value


def cached_read(path: Path, reader: Callable[[Path], T], part: str = "",
                progress: Callable[[str], None] | None = None) -> T:
    """``reader(path)``, parsed once: later calls load the stored result (a few ms to a few hundred)."""
    path = Path(path)
    name = f"{part or path.name}-{file_key(path, reader)}.pickle.z"
    places = (user_cache_dir(),)
    for directory in places:
        file = directory / name
        if file.is_file():
            try:
                return _with_path(_load(file), path)
            except (OSError, EOFError, ValueError, zlib.error, pickle.UnpicklingError, AttributeError, TypeError):
                pass  # a damaged or foreign cache file: parse again and overwrite it
    say = progress if progress is not None else _stderr
    slow = path.stat().st_size >= SLOW_BYTES
    started = time.perf_counter()
    if slow:
        say(f"parsing {path} (once; later reads use the cache in {places[0]})")
    value = reader(path)
    data = pickled_cache.encode(FORMAT, value)
    for directory in places:
        if pickled_cache.write_atomic(directory, name, data):
            break
    if slow:
        say(f"parsed {path.name} in {time.perf_counter() - started:.1f} s")
    return value


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
