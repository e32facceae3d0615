"""The C++ harness's measurement policies (csrc/benanza/bench.h), compiled by the host compiler
against the real CUDA, cuDNN and cuBLAS headers and run without a GPU: the --l2 option, the
copies of a cold-weights weight ring and the calls per timed launch (docs/GENERATOR.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import onnx
import pytest

from benanza import paths
from benanza.library import L2
from benanza.measure import runner
from benanza.measure.campaign import harness_options

SITE = Path(onnx.__file__).parent.parent / "nvidia"
INCLUDES = (SITE / "cudnn" / "include", SITE / "cu13" / "include", Path("/usr/local/cuda/include"))
CXX = shutil.which("g++") or shutil.which("c++")
MIB = 1 << 20
H100_L2 = 50 * MIB

# Reads its harness options from argv, then "k WANT COPIES" (calls per launch), "n L2 BYTES"
# (ring copies), "p PHASE MS" (adds to a job's phase clock), "e WALL 0" (prints the job's end
# line), "r ESTIMATE BEST" / "f ESTIMATE BEST" (why an unprotected / a protected call is timed
# coarsely, "-" for not) and "j JOB_MS ESTIMATE" (the same for a call estimated at ESTIMATE x the
# job's best in a job that ran JOB_MS) and "c BYTES 0" (the block BufferCache keeps BYTES in) lines
# from stdin; prints the parsed --l2 and one number, end line or reason per line.
POLICY_MAIN = r"""
#include <cstdio>
#include "benanza/bench.h"
int main(int argc, char** argv) {
  bz::Options o;
  if (!bz::parse_options(argc, argv, 1, o)) return 2;
  std::printf("%s\n", bz::l2_name(o.l2));
  char what;
  double a, b;
  bz::PhaseClock clock;
  while (std::scanf(" %c %lf %lf", &what, &a, &b) == 3) {
    if (what == 'r' || what == 'f' || what == 'j') {
      const char* why = what == 'j' ? bz::coarse_reason(o, false, b, 1.0, a)
                                    : bz::coarse_reason(o, what == 'f', a, b, 0.0);
      std::printf("%s\n", why ? why : "-");
    } else if (what == 'c') {
      std::printf("%zu\n", bz::BufferCache::size_class(size_t(a)));
    } else if (what == 'p') {
      clock.add(bz::Phase(int(a)), b);
    } else if (what == 'e') {
      bz::Json end;
      end.add("event", "end").add("job", 0);
      clock.to_json(end, a);
      bz::emit(end);
    } else {
      std::printf("%d\n", what == 'k' ? bz::calls_per_launch(o, a, int(b)) : bz::weight_copies(size_t(a), size_t(b)));
    }
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def policy_tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CXX is None or not all(d.is_dir() for d in INCLUDES):
        pytest.skip("needs a C++ compiler and the CUDA, cuDNN and cuBLAS headers")
    out = tmp_path_factory.mktemp("policy")
    (out / "main.cpp").write_text(POLICY_MAIN)
    done = subprocess.run([CXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{paths.csrc_dir()}",
                           *(f"-I{d}" for d in INCLUDES), str(out / "main.cpp"), "-o", str(out / "policy")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out / "policy"


def ask(tool: Path, args: list[str], lines: list[str]) -> list[str]:
    done = subprocess.run([str(tool), *args], input="\n".join(lines) + "\n", capture_output=True, text=True)
    assert done.returncode == 0, (args, done.returncode)
    return done.stdout.split()


def test_l2_option_takes_the_three_modes(policy_tool: Path) -> None:
    assert ask(policy_tool, [], []) == ["warm"]
    for mode in L2:
        assert ask(policy_tool, ["--l2", mode.value], []) == [mode.value]
    for bad in (["--l2", "lukewarm"], ["--l2", "cold-weight"], ["--l2"]):
        assert subprocess.run([str(policy_tool), *bad], capture_output=True).returncode == 2, bad


def test_weight_ring_copies_cover_three_times_the_l2(policy_tool: Path) -> None:
    weights = {
        "3x3 512->512 fp32 (9.4 MB)": (9 * 512 * 512 * 4, 17),  # ceil(150 MiB / 9 MiB = 16.7)
        "1x1 64->64 fp32 (16 KB)": (64 * 64 * 4, 8192),  # would be 9600: capped
        "VGG-19 fc6 fp32 (411 MB)": (25088 * 4096 * 4, 2),  # larger than the L2: one other copy evicts it
        "exactly 3x the L2": (3 * H100_L2, 2),
        "no weights": (0, 1),
    }
    got = ask(policy_tool, [], [f"n {H100_L2} {size}" for size, _ in weights.values()])[1:]
    assert dict(zip(weights, map(int, got), strict=True)) == {name: n for name, (_, n) in weights.items()}


def test_calls_per_launch_per_mode(policy_tool: Path) -> None:
    cases = [(117.2, 16), (5000, 16), (3, 8192), (117.2, 1), (0.2, 16)]
    lines = [f"k {want} {copies}" for want, copies in cases]

    def k(mode: str) -> list[int]:
        return [int(x) for x in ask(policy_tool, ["--l2", mode, "--max-calls", "1000"], lines)[1:]]

    assert k("warm") == [118, 1000, 3, 118, 1]  # the ring does not matter warm
    assert k("cold") == [1, 1, 1, 1, 1]  # one call after each flush
    # a multiple of the copies and at least as many, past --max-calls if need be
    assert k("cold-weights") == [128, 1008, 8192, 118, 16]


def test_a_jobs_end_line_gives_the_runner_its_phases(policy_tool: Path) -> None:
    """The phase times the harness prints on a job's end line (bench/campaign.py) are what the runner
    reads: setup is the wall time no host phase claims; the GPU time of the timed launches and the host
    time of the job's host work (done ahead of it on another thread: only its wait claims wall) and the GPU
    time of its inputs and reference are apart; its device allocations (alloc) are no longer setup."""
    handles, warmup, timed, timed_gpu, check, _plan_wait, prep_wait, host_prep, inputs_gpu, alloc = range(10)
    lines = [f"p {handles} 40", f"p {warmup} 2.5", f"p {timed} 100", f"p {timed_gpu} 90", f"p {check} 1.5",
             f"p {timed} 20", f"p {prep_wait} 6", f"p {host_prep} 45", f"p {inputs_gpu} 0", f"p {alloc} 4",
             "e 200 0"]
    done = subprocess.run([str(policy_tool)], input="\n".join(lines) + "\n", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    end = json.loads(done.stdout.splitlines()[1])
    assert end["event"] == "end" and end["job"] == 0
    assert runner._phases(end) == {"handles": 40.0, "warmup": 2.5, "timed": 120.0, "timed_gpu": 90.0, "check": 1.5,
                                   "plan_wait": 0.0, "prep_wait": 6.0, "host_prep": 45.0, "inputs_gpu": 0.0,
                                   "alloc": 4.0, "setup": 26.0, "wall": 200.0}
    assert runner._phases({"event": "end", "job": 0}) == {}  # an older harness: no phases


def test_kept_device_blocks_are_at_most_a_quarter_larger_than_asked(policy_tool: Path) -> None:
    """BufferCache keeps a job's buffers for the next jobs in blocks of a few sizes (a block is reused for
    any buffer of its size class): sizes rounded up to a step of a quarter of their power of two, and of
    256 bytes at least, so a block is less than a quarter (or 256 bytes) larger than asked."""
    sizes = [1, 256, 257, 1000, 4096, 4097, 5000, 6 * MIB + 1, 100 * MIB]
    got = [int(x) for x in ask(policy_tool, [], [f"c {n} 0" for n in sizes])[1:]]
    assert got == [256, 256, 512, 1024, 4096, 5120, 5120, 7 * MIB, 112 * MIB]
    assert all(n <= c < n + max(256, n / 4) for n, c in zip(sizes, got, strict=True))


def test_racing_refines_only_what_can_still_win(policy_tool: Path) -> None:
    """--race R: an algorithm estimated at R x the job's best so far or more gets a coarse median; the
    heuristic's choice never. --job-budget-s bounds a job, but never coarsens what may be a new best.
    Both are on by default (1.3 and 4 s, what the campaign runs); 0 turns each off (exhaustive). The
    job's best estimate itself ("j 11000 1.0": a graph job's two passes race against the best of all,
    itself included) is never coarsened by the budget."""
    lines = ["r 1.29 1.0", "r 1.49 1.0", "r 1.5 1.0", "r 30 1.0", "f 30 1.0", "r 5 inf", "j 9000 1.2",
             "j 11000 1.2", "j 11000 0.9", "j 11000 1.0"]

    def reasons(args: list[str], lines: list[str]) -> list[str]:
        done = subprocess.run([str(policy_tool), *args], capture_output=True, text=True,
                              input="\n".join(lines) + "\n")
        return done.stdout.splitlines()[1:]

    assert reasons(["--race", "1.5", "--job-budget-s", "10"], lines) == \
        ["-", "-", "raced", "raced", "-", "-", "-", "job budget", "-", "-"]
    assert reasons(["--race", "0", "--job-budget-s", "0"], lines) == ["-"] * len(lines)  # both off: all in full
    assert reasons([], [*lines, "j 4001 1.2"]) == \
        ["-", "raced", "raced", "raced", "-", "-", "job budget", "job budget", "-", "-", "job budget"]  # 1.3, 4 s
    assert reasons(["--prefetch-jobs", "3"], lines) == reasons([], lines)  # known, and no policy of its own
    # a campaign's --race / --job-budget-s / --plan-threads reach the harness as it parses them
    # (it once passed "--race=1.5", which every executable refused with its usage line)
    assert reasons(harness_options(race=1.5, job_budget_s=10.0, plan_threads=2), lines) == \
        reasons(["--race", "1.5", "--job-budget-s", "10"], lines)
    for bad in (["--race", "0.5"], ["--race", "x"], ["--job-budget-s", "-1"], ["--plan-threads", "x"],
                ["--prefetch-jobs", "0"], ["--prefetch-jobs", "x"]):
        assert subprocess.run([str(policy_tool), *bad], capture_output=True).returncode == 2, bad


PLAN_THREADS_MAIN = r"""
#include <cstdio>
#include "benanza/options.h"
int main(int argc, char** argv) {
  bz::Options o;
  if (!bz::parse_options(argc, argv, o)) return 2;
  std::printf("%d %d\n", bz::usable_cpus(), o.plan_threads);
  return 0;
}
"""


@pytest.mark.skipif(CXX is None or not hasattr(os, "sched_setaffinity"), reason="needs a C++ compiler and Linux")
def test_default_plan_threads_follow_the_cpu_affinity(tmp_path: Path) -> None:
    """Issue 35: dask-cuda pins each worker to its GPU's cores; the harness's default plan threads are
    the CPUs its process may run on, minus one, not the machine's cores (4 workers started 63 each
    on a 64-core host); an explicit --plan-threads holds."""
    (tmp_path / "main.cpp").write_text(PLAN_THREADS_MAIN)
    done = subprocess.run([CXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{paths.csrc_dir()}",
                           str(tmp_path / "main.cpp"), "-o", str(tmp_path / "tool")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    mine = sorted(os.sched_getaffinity(0))

    def under(cpus: set[int], *args: str) -> tuple[int, int]:
        out = subprocess.run([str(tmp_path / "tool"), *args], capture_output=True, text=True, check=True,
                             preexec_fn=lambda: os.sched_setaffinity(0, cpus)).stdout
        usable, threads = out.split()
        return int(usable), int(threads)

    assert under(set(mine)) == (len(mine), len(mine) - 1)
    assert under({mine[0]}) == (1, 0)  # one CPU: every plan on the GPU thread, as --plan-threads 0
    assert under({mine[0]}, "--plan-threads", "5") == (1, 5)
    if len(mine) > 2:
        assert under(set(mine[:2])) == (2, 1)
