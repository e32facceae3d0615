"""Opening profile files: ``.gz`` and ``.xz`` transparently, and every I/O problem as a one-line BenanzaError."""

from __future__ import annotations

import gzip
import io
import json
import lzma
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from benanza.errors import BenanzaError

# Compressed suffix -> binary opener (bundles ship their large logs compressed).
OPENERS: dict[str, Any] = {".gz": gzip.open, ".xz": lzma.open}


def open_text(path: Path) -> IO[str]:
    """Open a text file for reading, decompressing it when its name ends in ``.gz`` or ``.xz``."""
    try:
        if path.suffix in OPENERS:
            return io.TextIOWrapper(OPENERS[path.suffix](path, "rb"), encoding="utf-8", errors="replace")
        return path.open("r", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise BenanzaError(f"{path}: cannot open: {exc.strerror or exc}") from exc


def iter_lines(path: Path) -> Iterator[str]:
    """Yield the lines of a (possibly gzipped) text file without their line ends.

    A gzip stream cut short (a log copied while it was written) ends the iteration
    quietly: the caller sees a truncated last record and reports it.
    """
    with open_text(path) as fh:
        try:
            for line in fh:
                yield line.rstrip("\r\n")
        except EOFError:
            return
        except (OSError, zlib.error, lzma.LZMAError) as exc:
            raise BenanzaError(f"{path}: cannot read: {exc}") from exc


def load_json(path: Path) -> Any:
    """Parse a whole JSON file (possibly gzipped); bad JSON names the file and the position."""
    with open_text(path) as fh:
        try:
            return json.load(fh)
        except json.JSONDecodeError as exc:
            raise BenanzaError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
        except (EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
            raise BenanzaError(f"{path}: cannot read: {exc}") from exc
