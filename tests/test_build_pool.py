"""bz::BuildPool (csrc/benanza/build_pool.h), compiled by the host compiler and run without a GPU: one
pool of threads serves every live job's builds, the earliest job first and later ones with the
threads it leaves idle, each job within its window; a job's queue, when it goes, cancels its
unstarted builds and returns only once the build under way has finished."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import host_tool

# argv[1]: the scenario. Each build logs its start and end (sleeping in between); "ask" and "take"
# are the GPU thread's next() called and returned. Every line is printed under one mutex, so the
# log's order is the order things happened in.
TOOL = r"""
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "benanza/build_pool.h"

std::mutex m;
void say(const std::string& s) {
  std::lock_guard<std::mutex> lock(m);
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
}
void nap(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// A job's builds: each writes its own slot of `out` (as PlanBuilder's built_), the queue goes first.
struct Job {
  std::string name;
  int ms;
  std::vector<int> out;
  std::unique_ptr<bz::BuildQueue> queue;
  Job(bz::BuildPool& pool, std::string n, size_t count, size_t window, int build_ms)
      : name(std::move(n)), ms(build_ms), out(count, -1) {
    queue = std::make_unique<bz::BuildQueue>(pool, count, window, [this](size_t i) {
      say("start " + name + " " + std::to_string(i));
      nap(ms + 7 * int(i));  // staggered: no two builds start or end within a few ms of each other
      out[i] = int(i) * 10;
      say("end " + name + " " + std::to_string(i));
    });
  }
  void take_all() {
    for (size_t k = 0; k < out.size(); ++k) {
      say("ask " + name + " " + std::to_string(k));  // before next(): the take itself is not logged
      const size_t i = queue->next();
      say("take " + name + " " + std::to_string(i) + " " + std::to_string(out[i]));
    }
  }
};

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  bz::BuildPool& pool = bz::BuildPool::instance(2, [] { say("init"); });
  if (scenario == "order") {  // two jobs, room for all: the first job's builds all start first
    auto a = std::make_unique<Job>(pool, "A", 5, 10, 20);
    auto b = std::make_unique<Job>(pool, "B", 5, 10, 20);
    a->take_all();
    a.reset();
    b->take_all();
  } else if (scenario == "window") {  // the first job's window full: the idle threads build the next job
    auto a = std::make_unique<Job>(pool, "A", 4, 1, 20);
    auto b = std::make_unique<Job>(pool, "B", 4, 10, 20);
    nap(300);
    a->take_all();
    b->take_all();
  } else if (scenario == "cancel") {  // a job that goes with a build under way
    auto a = std::make_unique<Job>(pool, "A", 6, 10, 300);
    nap(100);
    a.reset();
    say("destroyed A");
    auto b = std::make_unique<Job>(pool, "B", 2, 10, 10);
    b->take_all();
  }
  say("done");
  return 0;
}
"""


@pytest.fixture(scope="module")
def pool_tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return host_tool(tmp_path_factory, "pool", TOOL)


def run(tool: Path, scenario: str) -> list[str]:
    done = subprocess.run([str(tool), scenario], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines.count("init") == 2 and lines[-1] == "done", lines  # each of the 2 threads ran its init
    return [line for line in lines if line != "init"]


def takes(lines: list[str], job: str) -> list[str]:
    return [line for line in lines if line.startswith(f"take {job} ")]


def test_the_earliest_job_is_built_first(pool_tool: Path) -> None:
    lines = run(pool_tool, "order")
    starts = [line for line in lines if line.startswith("start")]
    assert [s.split()[1] for s in starts] == ["A"] * 5 + ["B"] * 5
    # in index order; the 2 threads claim builds 0 and 1 in order but start them together, so those
    # two may log either way round (later starts are spaced by the staggered build times)
    index = [s.split()[2] for s in starts]
    assert sorted(index[:2]) == ["0", "1"] and index[2:] == ["2", "3", "4", "0", "1", "2", "3", "4"]
    for job in "AB":  # every build taken once, after it ended, with what it wrote
        assert sorted(takes(lines, job)) == [f"take {job} {i} {10 * i}" for i in range(5)]
        for t in takes(lines, job):
            assert lines.index("end " + " ".join(t.split()[1:3])) < lines.index(t)


def test_idle_threads_build_the_next_job_within_each_window(pool_tool: Path) -> None:
    lines = run(pool_tool, "window")
    # A's window is 1: its build i starts only once build i - 1 ended and was taken (the GPU thread's
    # i-th next() was under way); meanwhile B's are built
    for i in range(1, 4):
        assert lines.index(f"end A {i - 1}") < lines.index(f"start A {i}")
        assert lines.index(f"ask A {i - 1}") < lines.index(f"start A {i}")
    assert lines.index("start B 0") < lines.index("take A 0 0")
    assert lines.index("end B 3") < lines.index("start A 1")  # B all built while A waited for its take
    assert sorted(takes(lines, "A")) == [f"take A {i} {10 * i}" for i in range(4)]
    assert sorted(takes(lines, "B")) == [f"take B {i} {10 * i}" for i in range(4)]


def test_a_queue_goes_only_after_its_builds_under_way_and_cancels_the_rest(pool_tool: Path) -> None:
    lines = run(pool_tool, "cancel")
    started = [line for line in lines if line.startswith("start A")]
    assert sorted(started) == ["start A 0", "start A 1"]  # the 2 threads' builds; the other 4 cancelled
    gone = lines.index("destroyed A")
    assert lines.index("end A 0") < gone and lines.index("end A 1") < gone
    assert sorted(takes(lines, "B")) == ["take B 0 0", "take B 1 10"]  # the pool serves the next job
