"""Shared test helpers: the light zoo models, the CUDA toolchain, and building and listing a
generated benchmark project with CMake + Ninja."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import onnx
import pytest

# The nine light ONNX zoo models that ship inside the onnx package (light_*.onnx).
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
GPU = shutil.which("nvidia-smi") is not None


def builds_and_runs_on_a_gpu(test: Callable[..., None]) -> Callable[..., None]:
    """Marks a test that builds a generated project and runs it: ``gpu`` and ``compile``, skipped
    without nvcc and an NVIDIA GPU (CI has neither GPU; ``pytest -m gpu`` runs them on one)."""
    for mark in (pytest.mark.skipif(NVCC is None or not GPU, reason="needs nvcc and an NVIDIA GPU"),
                 pytest.mark.compile, pytest.mark.gpu):
        test = mark(test)
    return test


def listed_jobs(build: Path, exe: str, manifest_jobs: list[Mapping[str, Any]]
                ) -> tuple[list[dict[str, Any]], list[Mapping[str, Any]]]:
    """A built executable's ``--list`` (one JSON object per job) and the manifest's jobs of it."""
    listed = subprocess.run([str(build / exe), "--list"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    return ([json.loads(line) for line in listed.stdout.splitlines()],
            [j for j in manifest_jobs if j["executable"] == exe])


@pytest.fixture(scope="session")
def cmake_build() -> Callable[[Path], Path]:
    """Configure and build a generated project (sm_90) against the real headers; no warnings allowed."""

    def build(out: Path) -> Path:
        if NVCC is None:
            pytest.skip("needs nvcc")
        target = out / "build"
        env = {**os.environ, "PATH": f"{Path(NVCC).parent}:{os.environ['PATH']}"}
        subprocess.run(["cmake", "-S", str(out), "-B", str(target), "-G", "Ninja", "-DCMAKE_CUDA_ARCHITECTURES=90",
                        f"-DCMAKE_CUDA_COMPILER={NVCC}"], check=True, capture_output=True, env=env, text=True)
        done = subprocess.run(["cmake", "--build", str(target)], capture_output=True, env=env, text=True)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        assert "warning" not in done.stdout.lower(), done.stdout[-4000:]
        return target

    return build
