"""The per-system plan cache's files, seen from Python: where the harness keeps runtime-compiled cuDNN
execution plans (csrc/benanza/plan_store.h, which decides the directory the same way), how much it
holds, clearing it (``benanza plan-cache``) and bounding it (``prune``, before every run: least recently
used plans first; the harness marks a plan used when it loads it). The harness alone writes entries."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from benanza.errors import BenanzaError

DIR_ENV, MAX_ENV = "BENANZA_PLAN_CACHE_DIR", "BENANZA_PLAN_CACHE_MAX_MB"  # a directory, or "off"; a bound
OFF = "off"
DEFAULT_MAX_MB = 2048  # a runtime-compiled plan is about 85 KB: some 24 000 plans


def root() -> Path | None:
    """The directory (``BENANZA_PLAN_CACHE_DIR``, else ``plans`` in benanza's cache directory); None
    when it is turned off."""
    given = os.environ.get(DIR_ENV)
    if given:
        return None if given == OFF else Path(given)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "benanza" / "plans"
    home = os.environ.get("HOME")
    return Path(home) / ".cache" / "benanza" / "plans" if home else None


def entries() -> list[Path]:
    where = root()
    return sorted(where.glob("??/*.plan")) if where is not None and where.is_dir() else []


def usage() -> tuple[int, int]:
    """(plans, bytes) the cache holds."""
    sizes = []
    for path in entries():
        with contextlib.suppress(OSError):
            sizes.append(path.stat().st_size)
    return len(sizes), sum(sizes)


def clear() -> int:
    """Delete every plan; returns how many (the harness compiles them again when it next needs them)."""
    gone = 0
    for path in entries():
        with contextlib.suppress(OSError):
            path.unlink()
            gone += 1
    return gone


def prune(max_bytes: int | None = None) -> int:
    """Delete the least recently used plans until the cache holds at most ``max_bytes``
    (``BENANZA_PLAN_CACHE_MAX_MB``); returns how many went. Temporary files of writers that died (over
    an hour old) go too."""
    if max_bytes is None:
        given = os.environ.get(MAX_ENV, str(DEFAULT_MAX_MB))
        try:
            max_bytes = int(float(given) * 2**20)
        except ValueError:
            raise BenanzaError(f"{MAX_ENV}={given!r}: not a number of MB") from None
    stats = []
    for path in entries():
        with contextlib.suppress(OSError):
            st = path.stat()
            stats.append((st.st_mtime, st.st_size, path))
    where = root()
    for tmp in where.glob("??/*.plan.tmp.*") if where is not None and where.is_dir() else ():
        with contextlib.suppress(OSError):
            if tmp.stat().st_mtime < time.time() - 3600:
                tmp.unlink()
    total, gone = sum(size for _, size, _ in stats), 0
    for _, size, path in sorted(stats):
        if total <= max_bytes:
            break
        with contextlib.suppress(OSError):
            path.unlink()
            gone += 1
        total -= size
    return gone
