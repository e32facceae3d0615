"""Shared test helpers: building a generated benchmark project with CMake + Ninja."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)


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
