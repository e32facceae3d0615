"""Where the data files that ship with benanza live (a source checkout or an installed wheel)."""

from __future__ import annotations

import os
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


def onnx_light_zoo() -> Path:
    """The directory of the light zoo models inside the installed onnx package (the files
    ``benanza models zoo`` copies, byte for byte)."""
    import onnx  # the zoo ships with onnx; only its users need it

    return Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"


def cache_location() -> Path:
    """benanza's cache directory (``$XDG_CACHE_HOME/benanza``, else ``~/.cache/benanza``), not created."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "benanza"


def cache_dir() -> Path:
    cache = cache_location()
    cache.mkdir(parents=True, exist_ok=True)
    return cache
