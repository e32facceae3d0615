"""benanza.build_cache through runner.build_project: an executable built once is copied into the next
project that would build it byte for byte, without CMake; a corrupt entry is rebuilt, never run; the
key moves with everything that goes into the compile and not with where the project lies."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import LIGHT, NVCC

from benanza import build_cache, codegen, runner
from benanza.cli import main
from benanza.library import Api
from benanza.model.onnx_import import load_model
from benanza.plan import plan

# -O0: nothing built here runs on a GPU; only the cache's behaviour is under test (conftest.CHECK_ONLY_BUILD)
QUICK = "-DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DCMAKE_CUDA_FLAGS_DEBUG=-O0"


@pytest.fixture
def cache_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache and the test run's nvcc, sm_90."""
    monkeypatch.setenv(build_cache.DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(build_cache.OFF_ENV, raising=False)
    if NVCC is not None:
        monkeypatch.setenv("PATH", f"{Path(NVCC).parent}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("CMAKE_CUDA_COMPILER", NVCC)
    monkeypatch.setenv("CMAKE_CUDA_ARCHITECTURES", "90")
    monkeypatch.setenv("BENANZA_CMAKE_ARGS", QUICK)
    return tmp_path / "cache"


def project(out: Path) -> Path:
    """The cudnnActivationForward benchmarks of ResNet-50 (one host-compiled executable: a quick build),
    generated as ``benanza generate`` does, its command line (so its first line) naming ``out``."""
    model = load_model(LIGHT / "light_resnet50.onnx", 1)
    codegen.generate(plan([model], ("fp32",), apis=[Api.ACTIVATION]), out,
                     f"benanza generate light_resnet50.onnx --api activation --out {out}")
    return out


def listing(exe: Path) -> str:
    done = subprocess.run([str(exe), "--list"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('"event":"job"') > 0
    return done.stdout


def entry_of(cache: Path) -> Path:
    entries = sorted(cache.glob("??/*.exe"))
    assert len(entries) == 1, entries
    return entries[0]


# ---------------------------------------------------------------- the key (no compiler needed)


def chain(digest: str = "toolchain") -> build_cache.Toolchain:
    return build_cache.Toolchain(digest, "/usr/bin/nvcc", "/usr/bin/c++")


def test_the_key_ignores_the_output_directory_and_follows_the_sources(tmp_path: Path) -> None:
    a, b = project(tmp_path / "a"), project(tmp_path / "b")
    assert (a / "src" / "bench_activation.cu").read_bytes() != (b / "src" / "bench_activation.cu").read_bytes()
    keys = build_cache.executable_keys(a, chain())
    assert list(keys) == ["bench_activation"] and keys == build_cache.executable_keys(b, chain())
    assert build_cache.executable_keys(a, chain("other flags")) != keys
    (b / "csrc" / "benanza" / "stats.h").write_text((b / "csrc" / "benanza" / "stats.h").read_text() + "\n")
    assert build_cache.executable_keys(b, chain()) != keys  # a harness edit rebuilds
    source = a / "src" / "bench_activation.cu"
    source.write_text(source.read_text().replace("CUDNN_ACTIVATION_RELU", "CUDNN_ACTIVATION_TANH", 1))
    assert build_cache.executable_keys(a, chain()) != keys


def test_a_cmake_define_from_the_environment_changes_the_toolchain(tmp_path: Path, cache_env: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if NVCC is None:
        pytest.skip("needs nvcc")
    a = project(tmp_path / "a")
    first = build_cache.toolchain(a, runner.cmake_defines())
    assert first is not None and first == build_cache.toolchain(a, runner.cmake_defines())
    monkeypatch.setenv("CMAKE_CUDA_ARCHITECTURES", "80")
    assert build_cache.toolchain(a, runner.cmake_defines()) != first


def test_a_corrupt_or_truncated_entry_is_a_miss_and_is_deleted(tmp_path: Path, cache_env: Path) -> None:
    payload = tmp_path / "tool"
    payload.write_bytes(b"\x7fELF" + os.urandom(4096))
    build_cache.store("ab" * 32, payload)
    entry = entry_of(cache_env)
    assert build_cache.fetch("ab" * 32, tmp_path / "out" / "tool")
    assert (tmp_path / "out" / "tool").read_bytes() == payload.read_bytes()
    assert os.access(tmp_path / "out" / "tool", os.X_OK)
    for damage in (lambda data: data[:-100], lambda data: data[:-10] + bytes(10)):
        build_cache.store("ab" * 32, payload)
        entry.write_bytes(damage(entry.read_bytes()))
        assert not build_cache.fetch("ab" * 32, tmp_path / "never" / "tool")
        assert not entry.exists() and not (tmp_path / "never" / "tool").exists()


def test_a_cache_that_cannot_be_made_is_a_reason_not_an_error(tmp_path: Path, cache_env: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    assert build_cache.unusable() == ""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(build_cache.DIR_ENV, str(tmp_path / "file" / "cache"))
    assert build_cache.unusable().startswith(f"{tmp_path / 'file' / 'cache'}: cannot create the build cache")


def test_a_build_storing_while_another_fetches_never_hands_out_half_an_entry(tmp_path: Path,
                                                                             cache_env: Path) -> None:
    """Two builds share the cache: one (re)stores a key while the other fetches it; every fetch is a
    miss or a whole executable (the entry is renamed into place), never a part of one."""
    import threading

    payloads = [bytes([n]) * 3_000_000 for n in (1, 2)]
    sources = []
    for n, data in enumerate(payloads):
        sources.append(tmp_path / f"tool{n}")
        sources[-1].write_bytes(data)
    build_cache.store("cd" * 32, sources[0])
    done = threading.Event()

    def writer() -> None:
        for i in range(30):
            build_cache.store("cd" * 32, sources[i % 2])
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    fetched = 0
    while not done.is_set():
        target = tmp_path / "out" / "tool"
        if build_cache.fetch("cd" * 32, target):
            fetched += 1
            assert target.read_bytes() in payloads
    thread.join()
    assert fetched and len(list(cache_env.glob("??/*"))) == 1  # no temporary file left behind


def test_prune_keeps_the_most_recently_used_within_the_bound(tmp_path: Path, cache_env: Path) -> None:
    payload = tmp_path / "tool"
    payload.write_bytes(bytes(100_000))
    for i, key in enumerate(("aa" * 32, "bb" * 32, "cc" * 32)):
        build_cache.store(key, payload)
        os.utime(build_cache._entry(key), (1000 + i, 1000 + i))
    assert build_cache.fetch("aa" * 32, tmp_path / "used")  # used now: the newest
    assert build_cache.prune(max_bytes=250_000) == 1
    assert [p.stem[:2] for p in sorted(cache_env.glob("??/*.exe"))] == ["aa", "cc"]


def test_the_build_cache_command_shows_and_clears(tmp_path: Path, cache_env: Path) -> None:
    payload = tmp_path / "tool"
    payload.write_bytes(bytes(2**20))
    build_cache.store("ab" * 32, payload)
    shown = CliRunner().invoke(main, ["build-cache"])
    assert shown.exit_code == 0 and f"{cache_env}: 1 executable(s), 1.0 MiB; cache on" in shown.output
    cleared = CliRunner().invoke(main, ["build-cache", "--clear"])
    assert cleared.exit_code == 0 and "deleted 1 cached executable(s)" in cleared.output
    assert build_cache.usage() == (0, 0)
    for command in ("run", "pipeline"):
        assert "--no-build-cache" in CliRunner().invoke(main, [command, "--help"]).output


# ---------------------------------------------------------------- real builds


@pytest.mark.compile
def test_a_second_project_with_the_same_executables_compiles_nothing(tmp_path: Path, cache_env: Path) -> None:
    if NVCC is None:
        pytest.skip("needs nvcc")
    cold = runner.build_project(project(tmp_path / "a"))
    assert cold.compiled == ["bench_activation"] and not cold.cached and cold.cmake_ran and not cold.note
    entry = entry_of(cache_env)
    warm = runner.build_project(project(tmp_path / "b"))
    assert warm.cached == ["bench_activation"] and not warm.compiled and not warm.cmake_ran
    # no CMake ran in b: no configure, no Ninja, no compiler; the executable is the cached one, byte for byte
    assert sorted(p.name for p in (tmp_path / "b" / "build").iterdir()) == ["bench_activation"]
    built = (tmp_path / "a" / "build" / "bench_activation").read_bytes()
    assert (tmp_path / "b" / "build" / "bench_activation").read_bytes() == built
    assert entry.read_bytes().endswith(built)
    assert listing(tmp_path / "b" / "build" / "bench_activation") == listing(tmp_path / "a" / "build" /
                                                                             "bench_activation")
    # the same project built again: nothing to do, and --no-build-cache is CMake as before the cache
    assert runner.build_project(tmp_path / "b").cached == ["bench_activation"]
    bypass = runner.build_project(tmp_path / "a", cache=False)
    assert bypass.cmake_ran and not bypass.cache_used and not bypass.cached

    # a corrupted entry is never run: it is deleted, the executable rebuilt (Ninja relinks it in a's
    # build directory) and stored again whole
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    again = runner.build_project(tmp_path / "a")
    assert again.compiled == ["bench_activation"] and again.cmake_ran and not again.cached
    assert entry.read_bytes().endswith((tmp_path / "a" / "build" / "bench_activation").read_bytes())
    listing(tmp_path / "a" / "build" / "bench_activation")
    assert build_cache.fetch(entry.stem, tmp_path / "c" / "bench_activation")

    # a build directory configured under other settings (CMake keeps them, whatever the environment
    # says now) builds, but what it built is not stored under this toolchain's keys
    entry.unlink()
    (tmp_path / "a" / "build" / build_cache.STAMP).write_text("another toolchain\n")
    other = runner.build_project(tmp_path / "a")
    assert other.compiled == ["bench_activation"] and "configured with other settings" in other.note
    assert not list(cache_env.glob("??/*.exe"))
