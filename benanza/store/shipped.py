"""The shipped performance databases (perfdb/) and compressed ones a user gives, unpacked once into
benanza's cache so that every reading command opens a plain SQLite file."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import lzma
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from benanza.errors import BenanzaError
from benanza.paths import cache_dir, perfdb_dir
from benanza.store.packed import PACKED_SUFFIX, unpack


def _stale(packed: Path, target: Path) -> bool:
    return not target.is_file() or target.stat().st_mtime < packed.stat().st_mtime


def _unpack(packed: Path, target: Path) -> Path:
    """Unpack ``packed`` (``*.columns.xz``, or an xz-compressed SQLite file) into ``target`` unless a
    copy at least as new is there already. Processes that need it at once (two test workers, two
    commands) take turns on a lock file beside it: the first unpacks, the others wait and open its copy
    instead of unpacking it again (the shipped database costs 15 CPU s)."""
    if _stale(packed, target):
        with _locked(target.with_name(f".{target.name}.lock")):
            if _stale(packed, target):  # not unpacked by the process that held the lock before
                print(f"unpacking {packed} into {target} (once, about ten seconds)", file=sys.stderr, flush=True)
                if packed.name.endswith(PACKED_SUFFIX):
                    unpack(packed, target)
                else:
                    _unpack_xz(packed, target)
    return target


@contextlib.contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """An exclusive lock on the file ``lock``, removed again by its holder: nothing is left beside the
    cache copy. A taker that locked a file its holder has since removed tries again on the new one.
    Without a writable directory, no lock: each process unpacks on its own, as before the lock."""
    while True:
        try:
            handle = open(lock, "a")
        except OSError:
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            if os.fstat(handle.fileno()).st_ino == os.stat(lock).st_ino:
                break  # the file at that path: this process holds the lock
        except FileNotFoundError:
            pass
        handle.close()
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()  # while held: a taker that locks the removed file next sees so and tries again
        handle.close()


SQLITE_HEADER = b"SQLite format 3\x00"


def _unpack_xz(packed: Path, target: Path) -> None:
    """An xz-compressed SQLite file into ``target``, whole or not at all: a damaged or foreign file is
    one line naming it, and neither a partial file nor a bad cache copy is left behind."""
    partial = target.with_suffix(f".db.{os.getpid()}.partial")  # two processes may unpack at once
    try:
        with lzma.open(packed, "rb") as src, open(partial, "wb") as dst:
            shutil.copyfileobj(src, dst)
        with open(partial, "rb") as check:
            if check.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                raise BenanzaError(f"{packed}: not an xz-compressed SQLite database")
        partial.replace(target)
    except (lzma.LZMAError, EOFError) as exc:
        raise BenanzaError(f"{packed}: not a readable xz file ({exc})") from None
    except OSError as exc:
        raise BenanzaError(f"{packed}: cannot unpack into {target.parent} ({exc.strerror})") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()


def shipped_db(name: str = "h100") -> Path:
    """The shipped performance database ``perfdb/<name>.columns.xz``, unpacked once into a cache.

    Shipped column by column and xz-compressed (benanza.store.packed) to keep the repository small
    (a fiftieth of the database's size);
    the cache copy is refreshed whenever the shipped file is newer, so an updated
    checkout never reads stale data.
    """
    packed = perfdb_dir() / f"{name}{PACKED_SUFFIX}"
    if not packed.is_file():
        raise FileNotFoundError(f"{packed}: no shipped performance database named '{name}'")
    return _unpack(packed, cache_dir() / f"{name}.db")


def readable_db(path: Path) -> Path:
    """A database path a reading command can open: ``*.columns.xz`` (the shipped form) or ``*.db.xz`` is
    unpacked into the cache (the shipped file itself maps to the same cache copy as :func:`shipped_db`)."""
    if path.suffix != ".xz":
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such performance database")
        return path
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such performance database")
    shipped = perfdb_dir() / path.name
    if shipped.is_file() and shipped.resolve() == path.resolve():
        return shipped_db(path.name.removesuffix(PACKED_SUFFIX))
    tag = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    stem = path.name.removesuffix(PACKED_SUFFIX).removesuffix(".xz").removesuffix(".db")
    return _unpack(path, cache_dir() / f"{stem}-{tag}.db")
