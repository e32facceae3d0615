"""The system fingerprint: normalization of its two sources, the native extension built from
the project's own CMakeLists.txt, and the real cuDNN/cuBLAS libraries found by dlopen."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from benanza.measure import system
from benanza.measure.system import system_id

ROOT = Path(__file__).resolve().parent.parent
GPU = bool(system._driver_probe(0, "")["usable"])
CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))

# What an H100 executable prints, and what the extension reports, for one machine.
EXECUTABLE_LINE = {"event": "system", "gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "cc": 90,
                   "cuda_runtime": 13000, "cuda_driver": 13000, "cudnn_version": 91900, "cublas_version": 130100}
NATIVE_INFO = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "cc_major": 9, "cc_minor": 0,
               "cuda_runtime": 13000, "cuda_driver": 13000, "sm_clock_khz": 1980000, "mem_clock_khz": 2619000,
               "bus_width_bits": 5120, "memory_bytes": 85029158912, "l2_bytes": 52428800, "uuid": "GPU-x"}


def test_normalize_spellings() -> None:
    line = system.normalize(EXECUTABLE_LINE)
    assert line["cc"] == "9.0" and line["cuda_runtime"] == "13.0" and line["cudnn_version"] == "9.19.0"
    assert line["cublas_version"] == "13.1.0" and "event" not in line
    native = system.normalize({**NATIVE_INFO, **{"cudnn_version": 91900, "cublas_version": 130100}})
    assert native["cc"] == "9.0" and native["uuid"] == "GPU-x"
    assert native["theoretical_bandwidth_gbs"] == pytest.approx(3352.3, rel=1e-3)  # H100 SXM HBM3 spec
    assert system_id(line) == system_id(native)  # same machine, same id, with or without extension
    assert system.normalize({"cc": "sm_80"})["cc"] == "8.0" and system.normalize({"cc": 8.6})["cc"] == "8.6"
    assert system.normalize({"cudnn_version": "9.19.0"})["cudnn_version"] == "9.19.0"


def test_merge_system_prefers_later_sources() -> None:
    merged = system.merge_system(NATIVE_INFO, {**EXECUTABLE_LINE, "cudnn_version": 91901}, None)
    assert merged["cudnn_version"] == "9.19.1" and merged["sm_clock_khz"] == 1980000


@pytest.mark.skipif(GPU, reason="this machine has a GPU")
def test_fingerprint_without_gpu_says_why() -> None:
    fp = system.fingerprint(bandwidth=True)
    assert fp["usable"] is False and fp["reason"]
    assert "bandwidth_gbs" not in fp


@pytest.mark.skipif(not system.wheel_library_dirs(), reason="no NVIDIA library wheels in this Python")
def test_library_versions_without_extension_find_the_wheels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system, "native", lambda: (None, "not built"))
    versions = system.normalize(system.library_versions())
    assert versions["cudnn_version"].startswith("9.") and versions["cublas_version"].startswith("13.")


@pytest.fixture(scope="module")
def native_module(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """benanza._native: the installed one, or built here from the project's CMakeLists.txt."""
    spec = importlib.util.find_spec("benanza._native")
    if spec is None:
        if not (CUDA_HOME / "include" / "cuda_runtime.h").is_file() or not shutil.which("cmake"):
            pytest.skip("no CUDA toolkit or cmake to build benanza._native")
        pybind11 = pytest.importorskip("pybind11")
        out = tmp_path_factory.mktemp("native")
        configure = [shutil.which("cmake"), "-S", str(ROOT), "-B", str(out), "-G", "Ninja",
                     f"-Dpybind11_DIR={pybind11.get_cmake_dir()}", f"-DPython_EXECUTABLE={sys.executable}",
                     "-DPYBIND11_FINDPYTHON=ON", f"-DCUDAToolkit_ROOT={CUDA_HOME}"]
        for argv in (configure, [shutil.which("cmake"), "--build", str(out), "--target", "_native"]):
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            assert done.returncode == 0, done.stdout + done.stderr
        (path,) = out.glob("_native*.so")
        spec = importlib.util.spec_from_file_location("benanza._native", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def with_native(native_module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setitem(sys.modules, "benanza._native", native_module)
    return native_module


@pytest.mark.compile
def test_native_library_versions_are_real(with_native: ModuleType) -> None:
    if not system.wheel_library_dirs():
        pytest.skip("no NVIDIA library wheels in this Python")
    raw = system.library_versions()
    assert Path(raw["cudnn_path"]).name == "libcudnn.so.9" and Path(raw["cublas_path"]).name == "libcublas.so.13"
    versions = system.normalize(raw)
    assert versions["cudnn_version"].startswith("9.") and versions["cublas_version"].startswith("13.")
    assert with_native.CUDART_VERSION >= 12000


@pytest.mark.compile
@pytest.mark.skipif(GPU, reason="this machine has a GPU")
def test_native_without_gpu_reports_the_cuda_error(with_native: ModuleType) -> None:
    info = system.device_info()
    assert info["usable"] is False and info["reason"].startswith("cudaGetDeviceCount: cudaError")
    assert info["cuda_runtime"] >= 12000
    with pytest.raises(RuntimeError, match="failed: cudaError"):
        with_native.measure_bandwidth(1 << 20, 2, 0)
    fp = system.fingerprint(bandwidth=True)
    assert fp["usable"] is False and fp["cuda_runtime"].startswith(("12.", "13."))
    assert "gpu" not in fp and "bandwidth_gbs" not in fp


@pytest.mark.gpu
@pytest.mark.compile
@pytest.mark.skipif(not GPU, reason="needs an NVIDIA GPU")
def test_native_on_a_gpu_measures_real_values(with_native: ModuleType) -> None:
    fp = system.fingerprint(bandwidth=True)
    assert fp["usable"] is True, fp
    assert fp["sm_count"] > 0 and fp["sm_clock_khz"] > 0 and fp["mem_clock_khz"] > 0
    assert fp["memory_bytes"] > 1 << 30 and fp["bus_width_bits"] >= 64 and fp["l2_bytes"] > 0
    assert fp["cuda_driver"] != "0" and fp["gpu"]
    # a device copy reaches a real fraction of the DRAM peak and never exceeds it by much
    assert 0.2 * fp["theoretical_bandwidth_gbs"] < fp["bandwidth_gbs"] < 1.15 * fp["theoretical_bandwidth_gbs"]
