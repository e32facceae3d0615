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

# What each kind of output starts with, as its writer makes it: an existing file that starts otherwise is
# someone else's, never replaced without --force (check_output). CSVs: analyze's and compare's per-layer
# tables, db export.
SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "json": (b'{\n "schema":',),
    "html": (b"<!DOCTYPE html>",),
    "csv": (b"model,batch,precisions,framework,system,gpu,#,layer,op,", b"#,layer,op,", b"gpu,op,shape,models,"),
    "trace": (b'{"traceEvents":',),
}
STDOUT = "-"


def check_output(path: str | Path, kind: str, inputs: tuple[str | Path | None, ...] = (), force: bool = False) -> None:
    """Refuse, before any work, an output path that would lose someone's data: one of the command's own
    inputs, or an existing regular file that is not an earlier benanza output of ``kind`` (a model, a
    database, a user's notes), unless ``force``. ``-`` (stdout) and special files (/dev/null, a FIFO)
    are written through, never replaced."""
    if str(path) == STDOUT:
        return
    target = Path(path)
    if not target.parent.is_dir():
        raise BenanzaError(f"{target}: cannot write (no directory {target.parent})")
    if force or not target.is_file():  # nothing there, a special file, or the user said so
        return
    for given in inputs:
        if given is not None and Path(given).exists() and os.path.samefile(target, given):
            raise BenanzaError(f"{target}: is an input of this command; write the {kind} elsewhere "
                               "(or pass --force to replace it)")
    try:
        with open(target, "rb") as handle:
            head = handle.read(64)
    except OSError as exc:
        raise BenanzaError(f"{target}: cannot read ({exc.strerror})") from None
    if head and not head.startswith(SIGNATURES[kind]):
        raise BenanzaError(f"{target}: exists and is not a benanza {kind} output; pass --force to replace it")


def _new_file_mode() -> int:
    """What open() would give a new file: 0666 less the umask (mkstemp's files are 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_file(path: str | Path, newline: str | None = None) -> Iterator[IO[str]]:
    """A text file written under a temporary name beside ``path``, renamed over it only when
    complete (flushed and fsynced); on any error the temporary file is removed and ``path``
    keeps what it had. OSError becomes one line naming the file. The file gets the mode a plain
    write would give (the old file's, else 0666 less the umask); ``-`` is stdout, and a special
    file (/dev/null, a FIFO) is written through, never replaced by a regular file."""
    if str(path) == STDOUT:
        yield sys.stdout
        write_stdout("")
        return
    target = Path(path)
    if target.exists() and not target.is_file():
        try:
            with open(target, "w", encoding="utf-8", newline=newline) as handle:
                yield handle
        except OSError as exc:
            raise BenanzaError(f"{target}: cannot write ({exc.strerror})") from None
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.chmod(tmp, target.stat().st_mode & 0o7777 if target.exists() else _new_file_mode())
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
