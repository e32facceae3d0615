"""The system fingerprint: which GPU, clocks, memory and library versions a measurement belongs to.

The facts come from the native extension ``benanza._native`` (CUDA runtime
attributes, a timed device copy, cuDNN/cuBLAS found by dlopen) and from the
"system" line every benchmark executable prints; ``normalize`` turns either into
the columns of the database's ``systems`` table. Without the extension or without
a usable GPU, ``fingerprint()`` says so (``usable`` False plus a ``reason``)
instead of raising.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import json
import site
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

# Where pip's NVIDIA wheels put the shared libraries, relative to a site-packages dir.
WHEEL_LIBRARY_DIRS = ("nvidia/cudnn/lib", "nvidia/cu13/lib", "nvidia/cublas/lib", "nvidia/cuda_runtime/lib")

# The sonames the generated benchmarks load, and how to ask each for its version.
LIBRARIES = {"cudnn": "libcudnn.so.9", "cublas": "libcublas.so.13"}


def _cuda_version(value: int) -> str:  # 13000 -> "13.0"
    return f"{value // 1000}.{value % 1000 // 10}"


def _library_version(value: int) -> str:  # 91901 -> "9.19.1", 130102 -> "13.1.2"
    return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"


def _cc(value: Any) -> str:
    """Compute capability as "major.minor" from 90, 9.0, "9.0" or "sm_90"."""
    text = str(value).removeprefix("sm_")
    if "." in text:
        major, minor = text.split(".", 1)
        return f"{int(major)}.{int(minor)}"
    number = int(text)
    return f"{number // 10}.{number % 10}"


def _version_of(formatter: Callable[[int], str]) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            return formatter(value) if value > 0 else "0"
        return str(value)

    return convert


# systems column -> (names the sources use for it, converter).  Data, not if-chains.
NORMALIZE: dict[str, tuple[tuple[str, ...], Callable[[Any], Any]]] = {
    "gpu": (("gpu", "name", "device_name"), str),
    "sm_count": (("sm_count", "multiprocessor_count"), int),
    "cc": (("cc", "compute_capability"), _cc),
    "sm_clock_khz": (("sm_clock_khz", "clock_khz"), int),
    "mem_clock_khz": (("mem_clock_khz", "memory_clock_khz"), int),
    "memory_bytes": (("memory_bytes", "total_memory_bytes", "total_global_mem"), int),
    "bus_width_bits": (("bus_width_bits", "mem_bus_bits", "memory_bus_width"), int),
    "l2_bytes": (("l2_bytes", "l2_cache_bytes"), int),
    "bandwidth_gbs": (("bandwidth_gbs",), float),
    "theoretical_bandwidth_gbs": (("theoretical_bandwidth_gbs",), float),
    "cuda_driver": (("cuda_driver", "driver_version"), _version_of(_cuda_version)),
    "cuda_runtime": (("cuda_runtime", "runtime_version"), _version_of(_cuda_version)),
    "cudnn_version": (("cudnn_version", "cudnn"), _version_of(_library_version)),
    "cublas_version": (("cublas_version", "cublas"), _version_of(_library_version)),
}
# Source keys that normalize() consumes or drops (the rest land in the details column).
_CONSUMED = {name for names, _ in NORMALIZE.values() for name in names} | {
    "cc_major", "cc_minor", "event", "usable", "reason"}


def normalize(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Map a fingerprint or an executable's "system" line onto the systems columns.

    Keys it does not know are kept as they are (they land in the ``details`` column).
    """
    out: dict[str, Any] = {}
    if raw.get("cc") is None and raw.get("cc_major") is not None:
        out["cc"] = f"{int(raw['cc_major'])}.{int(raw.get('cc_minor') or 0)}"
    for column, (names, convert) in NORMALIZE.items():
        for name in names:
            if raw.get(name) is not None:
                out[column] = convert(raw[name])
                break
    if out.get("theoretical_bandwidth_gbs") is None and out.get("mem_clock_khz") and out.get("bus_width_bits"):
        # double data rate: two transfers per memory clock
        out["theoretical_bandwidth_gbs"] = 2 * out["mem_clock_khz"] * 1e3 * out["bus_width_bits"] / 8 / 1e9
    out.update({k: v for k, v in raw.items() if k not in _CONSUMED})
    return out


def merge_system(*sources: Mapping[str, Any] | None) -> dict[str, Any]:
    """Normalized union of several descriptions of one machine; later sources win per field."""
    merged: dict[str, Any] = {}
    for source in sources:
        if source:
            merged.update({k: v for k, v in normalize(source).items() if v is not None})
    return merged


def native() -> tuple[ModuleType | None, str]:
    """The native extension, or None and why it could not be imported."""
    try:
        return importlib.import_module("benanza._native"), ""
    except ImportError as exc:
        return None, f"benanza._native is not built ({exc}); install benanza where a CUDA toolkit is found"


def wheel_library_dirs() -> list[str]:
    """The NVIDIA wheel library directories of the running Python that exist."""
    roots = [*sys.path, *site.getsitepackages(), site.getusersitepackages()]
    dirs: list[str] = []
    for root in roots:
        for sub in WHEEL_LIBRARY_DIRS:
            path = Path(root) / sub
            if root and path.is_dir() and str(path) not in dirs:
                dirs.append(str(path))
    return dirs


def device_info(device: int = 0) -> dict[str, Any]:
    """CUDA device attributes (raw, as the extension returns them); usable=False with a reason otherwise."""
    module, why = native()
    if module is None:
        return _driver_probe(device, why)
    return dict(module.device_info(device))


def _driver_probe(device: int, why: str) -> dict[str, Any]:
    """Without the extension: ask the driver (libcuda via ctypes) only whether a device exists."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return {"usable": False, "reason": f"no NVIDIA driver ({exc})"}
    count = ctypes.c_int(0)
    err = cuda.cuInit(0) or cuda.cuDeviceGetCount(ctypes.byref(count))
    if err:
        text = ctypes.c_char_p()
        cuda.cuGetErrorString(err, ctypes.byref(text))
        return {"usable": False, "reason": f"CUDA driver error {err}: {(text.value or b'').decode()}"}
    if device >= count.value:
        return {"usable": False, "reason": f"device {device} does not exist ({count.value} CUDA devices)"}
    return {"usable": True, "device_count": count.value, "native": why}


def library_versions() -> dict[str, Any]:
    """cuDNN and cuBLAS versions as loaded by dlopen (default path, then the NVIDIA wheels)."""
    module, _ = native()
    if module is not None:
        return dict(module.library_versions(wheel_library_dirs()))
    return _library_versions_ctypes()


def _library_versions_ctypes() -> dict[str, Any]:
    """The same lookup without the extension (cudnnGetVersion / cublasGetProperty via ctypes)."""
    out: dict[str, Any] = {}
    for lib, soname in LIBRARIES.items():
        handle = None
        for candidate in [soname, *(str(Path(d) / soname) for d in wheel_library_dirs())]:
            try:
                handle = ctypes.CDLL(candidate)
                break
            except OSError as exc:
                out[f"{lib}_error"] = str(exc)
        if handle is None:
            continue
        out.pop(f"{lib}_error", None)
        if lib == "cudnn":
            handle.cudnnGetVersion.restype = ctypes.c_size_t
            out["cudnn_version"] = int(handle.cudnnGetVersion())
        else:
            parts = []
            for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
                value = ctypes.c_int()
                handle.cublasGetProperty(prop, ctypes.byref(value))
                parts.append(value.value)
            out["cublas_version"] = parts[0] * 10000 + parts[1] * 100 + parts[2]
    return out


def measure_bandwidth(nbytes: int = 1 << 30, reps: int = 20, device: int = 0) -> float:
    """Measured device memory bandwidth in GB/s (a large device-to-device copy)."""
    module, why = native()
    if module is None:
        raise RuntimeError(why)
    return float(module.measure_bandwidth(nbytes, reps, device)["bandwidth_gbs"])


def fingerprint(device: int = 0, bandwidth: bool = False) -> dict[str, Any]:
    """Normalized description of this machine (``usable`` says whether a GPU can be measured on).

    ``bandwidth=True`` also measures the copy bandwidth (about a second on a GPU; needs the extension).
    """
    info = device_info(device)
    usable = bool(info.get("usable"))
    out = normalize({k: v for k, v in info.items() if k != "usable"})
    out.update(normalize(library_versions()))
    if not usable:
        # a driver-less machine reports 0 for versions it cannot know: drop them
        out = {k: v for k, v in out.items() if v != "0"}
    if usable and bandwidth and native()[0] is not None:
        out["bandwidth_gbs"] = measure_bandwidth(device=device)
    out["usable"] = usable
    if not usable:
        out["reason"] = str(info.get("reason", "no usable GPU"))
    return out

# The fields that make up a system's id (the systems table's key): exactly the fields that every
# benchmark executable's "system" line carries, so a run with or without the native extension
# names the same machine the same way.
SYSTEM_ID_FIELDS = ("gpu", "sm_count", "cc", "cuda_driver", "cuda_runtime", "cudnn_version", "cublas_version")


def system_id(system: Mapping[str, Any]) -> str:
    """Stable id of a system: a hash of ``SYSTEM_ID_FIELDS`` (missing ones count as null)."""
    canon = json.dumps([_text(system.get(f)) for f in SYSTEM_ID_FIELDS], separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
