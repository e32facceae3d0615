"""What the parse cache (``profile/parse_cache.py``) and the analysis cache (``analysis_cache.py``)
share: a file's SHA-256, the user cache directory, entries written as a format line plus a zlib'd
pickle, atomically and at best effort, and read back with an unpickler that builds only trusted
classes (so a foreign file in a cache directory can at worst fail to load)."""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import sys
import zlib
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any


def hash_file(digest: Any, path: Path) -> Any:
    """``digest`` (a hashlib object) updated with the bytes of ``path``, read in 1 MiB blocks."""
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest


def user_cache_dir(name: str) -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "benanza" / name


def encode(fmt: bytes, value: Any) -> bytes:
    return fmt + zlib.compress(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), 1)


def restricted_unpickler(classes: Collection[tuple[str, str]], modules: Collection[str],
                         accepts: Callable[[type], bool], what: str) -> type[pickle.Unpickler]:
    """An unpickler that resolves ``classes`` (module, name), and classes of ``modules`` that are
    dataclasses or pass ``accepts``; anything else is an UnpicklingError naming ``what``."""

    class Restricted(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            if (module, name) in classes:
                return super().find_class(module, name)
            if module in modules:
                found = getattr(sys.modules.get(module) or __import__(module, fromlist=[name]), name, None)
                if isinstance(found, type) and (dataclasses.is_dataclass(found) or accepts(found)):
                    return found
            raise pickle.UnpicklingError(f"{module}.{name} is not {what}")

    return Restricted


def decode(fmt: bytes, raw: bytes, unpickler: type[pickle.Unpickler]) -> Any:
    """The value of an entry ``encode`` wrote; UnpicklingError for a file of another format."""
    if not raw.startswith(fmt):
        raise pickle.UnpicklingError("not a benanza cache entry of this format")
    return unpickler(io.BytesIO(zlib.decompress(raw[len(fmt):]))).load()


def write_atomic(directory: Path, name: str, data: bytes) -> bool:
    """``data`` as ``directory/name``, written under a temporary name and renamed over it; False
    where the directory cannot be written (an installed, read-only copy: the caller tries the next)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        partial = directory / f".{name}.{os.getpid()}.partial"
        partial.write_bytes(data)
        partial.replace(directory / name)
        return True
    except OSError:
        return False
