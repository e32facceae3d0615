"""Shared test helpers: the light zoo models, the CUDA toolchain, and building and listing a
generated benchmark project with CMake + Ninja.

The compile tests of several modules share ONE generated project, built once per test run
(``shared_build``): each module registers the plan of the jobs it wants compiled with
``@compiled_in_the_shared_build``; the session fixture merges the plans of the collected
modules and builds them together, so every template is compiled against the real headers
once instead of once per module (CI time, docs/RESULTS.md §16). Without a GPU (a check-only build) its
host-compiled sources are compiled as two translation units (``one_translation_unit``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import onnx
import pytest

from benanza.generate import codegen
from benanza.generate.plan import Plan

# The nine light ONNX zoo models that ship inside the onnx package (light_*.onnx).
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
GPU = shutil.which("nvidia-smi") is not None
CXX = shutil.which("g++") or shutil.which("c++")


@pytest.fixture(scope="session", autouse=True)
def private_build_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Builds under test never read or fill the user's build cache (benanza/measure/build_cache.py): a hit
    left by an earlier run would let a build pass without compiling. One empty cache per session."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BENANZA_BUILD_CACHE_DIR", str(tmp_path_factory.mktemp("build_cache")))
        yield


@pytest.fixture(autouse=True)
def run_every_suggestion(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each command an error or a note suggests in any test's CliRunner output is run as written
    (tests/suggestions.py); a suggestion that does not run fails the test that printed it."""
    from click.testing import CliRunner
    from suggestions import checking

    with checking(monkeypatch, CliRunner.invoke):
        yield


def with_parsed_bundles(xdg: Path, *bundles: Path) -> None:
    """The parse cache ``xdg`` will hold (``$XDG_CACHE_HOME/benanza/parsed``) filled with the session's
    entries, ``bundles`` parsed into it first where they are not yet. Called before a test points
    XDG_CACHE_HOME at ``xdg``: for a test whose claim is about an empty analysis cache, without the cost
    of parsing a shipped log again (ResNet-50 b1 ORT: 5.4 CPU s; CI time, docs/RESULTS.md §16)."""
    from benanza.profile import parse_cache
    from benanza.profile.bundle import PARTS, read_bundle

    for path in bundles:
        bundle = read_bundle(path)
        for part in PARTS:
            if hasattr(type(bundle), part):
                getattr(bundle, part)  # parsed into the session's cache, or read from it
    into = xdg / "benanza" / "parsed"
    into.mkdir(parents=True, exist_ok=True)
    for entry in parse_cache.user_cache_dir().glob("*.pickle.z"):
        shutil.copyfile(entry, into / entry.name)


def host_tool(tmp_path_factory: pytest.TempPathFactory, name: str, source: str) -> Path:
    """A test program over harness headers (csrc/), built by the host compiler, warnings as errors:
    the harness's host-only parts (threads, policies) tested without a GPU; skipped without a compiler."""
    if CXX is None:
        pytest.skip("needs a C++ compiler")
    from benanza import paths

    out = tmp_path_factory.mktemp(name)
    (out / "main.cpp").write_text(source)
    done = subprocess.run([CXX, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread",
                           f"-I{paths.csrc_dir()}", str(out / "main.cpp"), "-o", str(out / name)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out / name


def cuda_header_dirs() -> list[str] | None:
    """cuDNN's and cuBLAS's headers (the harness's common.h includes both): CUDNN_INCLUDE_DIR and
    CUBLAS_INCLUDE_DIR where set, else NVIDIA's wheels or the toolkit's; None when one is missing."""
    found = []
    for var, wheel, header in (("CUDNN_INCLUDE_DIR", "nvidia/cudnn/include", "cudnn.h"),
                               ("CUBLAS_INCLUDE_DIR", "nvidia/cu13/include", "cublas_v2.h")):
        where = [Path(os.environ[var])] if os.environ.get(var) else [Path(p) / wheel for p in sys.path if p]
        where.append(Path(str(NVCC)).parent.parent / "include")
        hit = next((d for d in where if (d / header).exists()), None)
        if hit is None:
            return None
        found.append(str(hit))
    return found


def runs_a_cuda_program(test: Callable[..., None]) -> Callable[..., None]:
    """Marks a test that builds a CUDA program over the harness headers (cuda_tool) and runs it:
    ``gpu`` and ``compile``, skipped without nvcc, the cuDNN/cuBLAS headers and an NVIDIA GPU."""
    for mark in (pytest.mark.skipif(NVCC is None or not GPU or cuda_header_dirs() is None,
                                    reason="needs nvcc, cuDNN and cuBLAS headers and a GPU"),
                 pytest.mark.compile, pytest.mark.gpu):
        test = mark(test)
    return test


def cuda_tool(out: Path, source: str, *sources: Path) -> list[str]:
    """Builds `source` (a .cu over the harness headers, plus `sources`) with nvcc in `out`, runs it,
    and returns its output lines (the build and the run must succeed)."""
    from benanza import paths

    (out / "main.cu").write_text(source)
    includes = [f"-I{d}" for d in [str(paths.csrc_dir()), *(cuda_header_dirs() or [])]]
    built = subprocess.run([str(NVCC), "-std=c++17", "-O1", *includes, str(out / "main.cu"), *map(str, sources),
                            "-o", str(out / "tool")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(out / "tool")], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.splitlines()


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


# Without a GPU nothing built here runs: the build only checks that every template compiles against
# the real headers without a warning, which -O0 checks in two thirds of the time (the shared project
# 70 s instead of 103 s on 2 cores), and without cudnn-frontend's bundled JSON library (nlohmann), which
# no template or harness header uses: it was half of each graph-API source's compile (53 -> 31 CPU s
# for bench_graph_pointwise). With a GPU the project is built as users build it (Release, with JSON).
CHECK_ONLY_BUILD = () if GPU else ("-DCMAKE_BUILD_TYPE=Debug", "-DCMAKE_CXX_FLAGS_DEBUG=-O0",
                                   "-DCMAKE_CUDA_FLAGS_DEBUG=-O0", "-DCMAKE_CXX_FLAGS=-DCUDNN_FRONTEND_SKIP_JSON_LIB")


@pytest.fixture(scope="session")
def cmake_build() -> Callable[[Path], Path]:
    """Configure and build a generated project (sm_90) against the real headers; no warnings allowed."""

    def build(out: Path) -> Path:
        if NVCC is None:
            pytest.skip("needs nvcc")
        target = out / "build"
        env = {**os.environ, "PATH": f"{Path(NVCC).parent}:{os.environ['PATH']}"}
        subprocess.run(["cmake", "-S", str(out), "-B", str(target), "-G", "Ninja", "-DCMAKE_CUDA_ARCHITECTURES=90",
                        f"-DCMAKE_CUDA_COMPILER={NVCC}", *CHECK_ONLY_BUILD],
                       check=True, capture_output=True, env=env, text=True)
        done = subprocess.run(["cmake", "--build", str(target)], capture_output=True, env=env, text=True)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        assert "warning" not in done.stdout.lower(), done.stdout[-4000:]
        return target

    return build


# ---------------------------------------------------------------- one build for the whole run

# The generated sources' first comment line: a backslash at its end must not splice the next line into it.
COMMAND_LINE = "benanza generate (the test run's shared build) --out bench\n// evil \\"
# name -> the plan a test module wants compiled (filled at import, i.e. when pytest collects the module)
SHARED_PLANS: dict[str, Callable[[], Plan]] = {}
# executable -> its source, for programs built beside the benchmarks (the replay; host-only, cudnn-frontend)
SHARED_PROGRAMS: dict[str, Callable[[], str]] = {}


def compiled_in_the_shared_build(name: str) -> Callable[[Callable[[], Plan]], Callable[[], Plan]]:
    """Registers a module's plan for ``shared_build`` (and memoizes it: the module's own fixtures
    and the shared build use the same Plan object)."""

    def register(make: Callable[[], Plan]) -> Callable[[], Plan]:
        once = functools.cache(make)
        SHARED_PLANS[name] = once
        return once

    return register


def program_in_the_shared_build(exe: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    """Registers a host-only program that includes cudnn-frontend (``make`` returns its source) for
    ``shared_build``: built with the benchmarks, so the check-only build compiles it in their unit."""

    def register(make: Callable[[], str]) -> Callable[[], str]:
        SHARED_PROGRAMS[exe] = make
        return make

    return register


def merged_plan(plans: list[Plan]) -> Plan:
    """The jobs of several plans in one project: each executable's jobs renumbered in plan order."""
    counters: Counter[str] = Counter()
    jobs = []
    for p in plans:
        for job in p.jobs:
            jobs.append(replace(job, index=counters[job.executable]))
            counters[job.executable] += 1
    models = list({id(m): m for p in plans for m in p.models}.values())
    return Plan(jobs, [d for p in plans for d in p.dropped], models)


@dataclass(frozen=True)
class SharedBuild:
    out: Path  # the generated project
    build: Path  # its CMake build directory
    manifest: codegen.Manifest
    executables: dict[str, set[str]]  # registered plan name -> its executables

    def jobs_of(self, exe: str) -> list[dict[str, Any]]:
        return [j for j in self.manifest.jobs if j["executable"] == exe]


# A unit's main runs the program its executable is named after (each unified executable is a hard link to it).
UNITY_MAIN = """
int main(int argc, char** argv) {
  char self[PATH_MAX] = {0};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  const std::string path = n > 0 ? std::string(self, size_t(n)) : std::string(argv[0]);
  const std::string name = path.substr(path.find_last_of('/') + 1);
%s  std::fprintf(stderr, "error: %%s is none of this unit's programs\\n", name.c_str());
  return 2;
}
"""


def one_translation_unit(src: Path, unit: str, exes: list[str]) -> None:
    """Writes ``src/<unit>.cu``: the sources of ``exes`` in one translation unit, each in a namespace of
    its own (its includes hoisted above them), and a main that runs the one its executable is named
    after. The cudnn-frontend sources cost about 30 CPU s each at -O0, nearly all of it the frontend's
    inline code, emitted once per unit: six of them in one unit take 36 s instead of 170."""
    includes: dict[str, None] = {"#include <climits>": None, "#include <cstdio>": None, "#include <string>": None,
                                 "#include <unistd.h>": None}
    bodies, dispatch = [], []
    for exe in exes:
        text = (src / f"{exe}.cu").read_text()
        includes.update(dict.fromkeys(m.strip() for m in re.findall(r"^[ \t]*#[ \t]*include[^\n]*", text, re.M)))
        bodies.append(f"namespace unit_{exe} {{\n#include \"{exe}.cu\"\n}}  // namespace unit_{exe}\n")
        dispatch.append(f'  if (name == "{exe}") return unit_{exe}::main(argc, argv);\n')
    (src / f"{unit}.cu").write_text("// the shared build's check-only unit (tests/conftest.py)\n" + "\n".join(includes)
                                    + "\n\n" + "".join(bodies) + UNITY_MAIN % "".join(dispatch))
    (src / f"{unit}.jobs").write_text("")  # CMakeLists copies each executable's table; the unit has none


def unified(out: Path) -> dict[str, list[str]]:
    """Without a GPU nothing built runs a benchmark, so the host-only sources are built as two units
    (the cudnn-frontend ones, the others: a plain source never sees the frontend's headers), the
    nvcc sources as they are. Rewrites benchmarks.cmake; returns unit -> its executables."""
    from benanza.measure import build_cache

    lists = build_cache.cmake_lists((out / "benchmarks.cmake").read_text())
    host, frontend = lists["BENANZA_HOST_ONLY"], lists["BENANZA_FRONTEND"]
    units = {name: exes for name, exes in (("unit_frontend", [e for e in host if e in frontend]),
                                           ("unit_host", [e for e in host if e not in frontend])) if exes}
    for unit, exes in units.items():
        one_translation_unit(out / "src", unit, exes)
    kept = [e for e in lists["BENANZA_EXECUTABLES"] if e not in host]  # units first: Ninja starts the longest first
    write_lists(out, [*units, *kept], list(units), [u for u in units if u == "unit_frontend"])
    return units


def write_lists(out: Path, executables: list[str], host_only: list[str], frontend: list[str]) -> None:
    """Rewrites the project's benchmarks.cmake with these lists (templates/benchmarks.cmake.j2)."""
    cmake = codegen.environment().get_template("benchmarks.cmake.j2").render(
        command="tests/conftest.py", executables=executables, host_only=host_only, frontend=frontend,
        site_dirs=codegen.site_dirs())
    (out / "benchmarks.cmake").write_text(cmake)


@pytest.fixture(scope="session")
def shared_build(cmake_build: Callable[[Path], Path], tmp_path_factory: pytest.TempPathFactory) -> SharedBuild:
    """One project holding the jobs of every registered plan and the registered programs, generated and
    built once per run."""
    if NVCC is None:
        pytest.skip("needs nvcc")
    from benanza.measure import build_cache

    names = sorted(SHARED_PLANS)
    plans = [SHARED_PLANS[n]() for n in names]
    out = tmp_path_factory.mktemp("shared")
    manifest = codegen.generate(merged_plan(plans), out, COMMAND_LINE)
    programs = sorted(SHARED_PROGRAMS)
    for exe in programs:
        (out / "src" / f"{exe}.cu").write_text(SHARED_PROGRAMS[exe]())
        (out / "src" / f"{exe}.jobs").write_text("")  # a program reads its tables from elsewhere (--plan)
    lists = build_cache.cmake_lists((out / "benchmarks.cmake").read_text())
    write_lists(out, [*lists["BENANZA_EXECUTABLES"], *programs], [*lists["BENANZA_HOST_ONLY"], *programs],
                [*lists.get("BENANZA_FRONTEND", []), *programs])
    units = {} if GPU else unified(out)
    build = cmake_build(out)
    for unit, exes in units.items():
        for exe in exes:  # each program under its own name, its job table beside it, as a project builds it
            os.link(build / unit, build / exe)
            shutil.copyfile(out / "src" / f"{exe}.jobs", build / f"{exe}.jobs")
    return SharedBuild(out, build, manifest,
                       {n: {j.executable for j in p.jobs} for n, p in zip(names, plans, strict=True)})
