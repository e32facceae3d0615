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
