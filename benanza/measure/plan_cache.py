"""The per-system plan cache's files, seen from Python: where the harness keeps runtime-compiled cuDNN
execution plans (csrc/benanza/plan_store.h, which decides the directory the same way), how much it
holds, and clearing it (``benanza plan-cache``). The harness alone reads and writes the entries."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

DIR_ENV = "BENANZA_PLAN_CACHE_DIR"  # a directory, or "off"
OFF = "off"


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
