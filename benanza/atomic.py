"""Outputs that are whole or absent: a failed write leaves no partial file and a non-zero exit."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from benanza.errors import BenanzaError


@contextlib.contextmanager
def atomic_file(path: str | Path, newline: str | None = None) -> Iterator[IO[str]]:
    """A text file written under a temporary name beside ``path``, renamed over it only when
    complete (flushed and fsynced); on any error the temporary file is removed and ``path``
    keeps what it had. OSError becomes one line naming the file."""
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise BenanzaError(f"{target}: cannot write ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        raise BenanzaError(f"{target}: cannot write ({exc.strerror}); nothing was written") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_text(path: str | Path, text: str) -> Path:
    with atomic_file(path) as handle:
        handle.write(text)
    return Path(path)


def write_stdout(text: str) -> None:
    """``text`` on stdout, flushed; a write error (full disk, closed pipe) is one line and exit 1."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        raise BenanzaError(f"stdout: cannot write ({exc.strerror}); the output is incomplete") from None
