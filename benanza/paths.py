"""Where the data files that ship with benanza live (a source checkout or an installed wheel)."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    for candidate in (_PKG.parent / name, _PKG / "_data" / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"benanza data directory '{name}' not found next to {_PKG}")


def templates_dir() -> Path:
    return _data_dir("templates")


def csrc_dir() -> Path:
    return _data_dir("csrc")


def perfdb_dir() -> Path:
    return _data_dir("perfdb")


def shipped_db(name: str = "h100") -> Path:
    """The shipped performance database ``perfdb/<name>.db.xz``, unpacked once into a cache.

    Shipped xz-compressed to keep the repository small (a tenth of the database's size);
    the cache copy is refreshed whenever the shipped file is newer, so an updated
    checkout never reads stale data.
    """
    import lzma
    import os
    import shutil

    packed = perfdb_dir() / f"{name}.db.xz"
    if not packed.is_file():
        raise FileNotFoundError(f"{packed}: no shipped performance database named '{name}'")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "benanza"
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f"{name}.db"
    if not target.is_file() or target.stat().st_mtime < packed.stat().st_mtime:
        import sys

        print(f"unpacking {packed} into {target} (once, a few seconds)", file=sys.stderr, flush=True)
        partial = target.with_suffix(".db.partial")
        with lzma.open(packed, "rb") as src, open(partial, "wb") as dst:
            shutil.copyfileobj(src, dst)
        partial.replace(target)
    return target
