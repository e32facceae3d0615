"""bz::Prefetcher (csrc/benanza/prefetch.h), compiled by the host compiler and run without a GPU: a
job's host work runs on a thread of its own one job ahead of the GPU thread, every job gets its own
prepared object in order, and a prepare that throws fails on the GPU thread as if called there."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import host_tool

# The GPU thread's loop of bz::main, with each prepare and "measurement" logging what it sees. argv:
# the jobs; a job given as -J is prepared with a throw, as +J is finished without being taken.
# Before "measuring" jobs[k], the GPU thread waits (up to 10 s) for the worker to start
# jobs[k + DEPTH]'s prepare (environment DEPTH, default 1): that it starts while job k runs is the overlap.
TOOL = r"""
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>
#include "benanza/prefetch.h"

std::mutex m;
std::condition_variable cv;
size_t started = 0;  // prepares started
long begun = -1;     // the job index the GPU thread has begun

int main(int argc, char** argv) {
  std::vector<int> jobs, throws, skips;
  for (int a = 1; a < argc; ++a) {
    const int j = std::abs(std::atoi(argv[a]));
    jobs.push_back(j);
    if (argv[a][0] == '-') throws.push_back(j);
    if (argv[a][0] == '+') skips.push_back(j);
  }
  auto has = [](const std::vector<int>& v, int j) { for (int x : v) if (x == j) return true; return false; };
  const size_t depth = std::getenv("DEPTH") ? size_t(std::atoi(std::getenv("DEPTH"))) : 1;
  {
    bz::Prefetcher pre(jobs, [&](int job, size_t k) -> bz::Prepared {
      {
        std::lock_guard<std::mutex> lock(m);
        std::printf("prep %d at %zu while %ld\n", job, k, begun);
        ++started;
      }
      cv.notify_all();
      if (has(throws, job)) throw std::runtime_error("boom " + std::to_string(job));
      return std::make_shared<int>(job * 10);
    }, depth);
    for (size_t k = 0; k < jobs.size(); ++k) {
      {
        std::lock_guard<std::mutex> lock(m);
        begun = long(k);
      }
      pre.begin(k);
      {
        std::unique_lock<std::mutex> lock(m);
        const bool ahead = cv.wait_for(lock, std::chrono::seconds(10),
                                       [&] { return started >= std::min(k + 1 + depth, jobs.size()); });
        std::printf("job %d overlap %d\n", jobs[k], int(ahead));
      }
      if (!has(skips, jobs[k])) {
        if (pre.take(jobs[k] + 1000)) std::printf("wrong job taken\n");
        try {
          bz::Prepared p = pre.take(jobs[k]);
          std::printf("took %d: %d\n", jobs[k], p ? *static_cast<int*>(p.get()) : -1);
          if (pre.take(jobs[k])) std::printf("taken twice\n");
        } catch (const std::exception& e) {
          std::printf("took %d: error %s\n", jobs[k], e.what());
        }
      }
      {
        std::lock_guard<std::mutex> lock(m);
        std::printf("finish %zu\n", k);  // before finish(k): a prepare it lets go comes after
      }
      pre.finish(k);
    }
  }
  std::printf("done\n");
  return 0;
}
"""


@pytest.fixture(scope="module")
def prefetch_tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return host_tool(tmp_path_factory, "prefetch", TOOL)


def run(tool: Path, *jobs: str) -> list[str]:
    done = subprocess.run([str(tool), *jobs], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_each_job_is_prepared_one_ahead_of_the_gpu_thread(prefetch_tool: Path) -> None:
    lines = run(prefetch_tool, "5", "2", "9", "4")
    preps = [line for line in lines if line.startswith("prep")]
    # jobs[0] at once, jobs[k + 1] only once the GPU thread has begun jobs[k] (and, as the GPU thread
    # waits for that before going on, while it is on jobs[k]: never two ahead)
    assert preps[0] in ("prep 5 at 0 while -1", "prep 5 at 0 while 0")
    assert preps[1:] == ["prep 2 at 1 while 0", "prep 9 at 2 while 1", "prep 4 at 3 while 2"]
    assert [line for line in lines if "overlap" in line] == [f"job {j} overlap 1" for j in (5, 2, 9, 4)]
    assert [line for line in lines if line.startswith("took")] == \
        ["took 5: 50", "took 2: 20", "took 9: 90", "took 4: 40"]
    assert "wrong job taken" not in lines and "taken twice" not in lines and lines[-1] == "done"


def test_a_throwing_prepare_fails_its_own_job_on_the_gpu_thread(prefetch_tool: Path) -> None:
    lines = run(prefetch_tool, "1", "-2", "3")
    assert [line for line in lines if line.startswith("took")] == ["took 1: 10", "took 2: error boom 2", "took 3: 30"]


def test_a_job_finished_without_its_object_leaves_the_next_ones_alone(prefetch_tool: Path) -> None:
    lines = run(prefetch_tool, "1", "+2", "3", "+4")  # the last one dropped by the destructor's join
    assert [line for line in lines if line.startswith("took")] == ["took 1: 10", "took 3: 30"]
    assert lines[-1] == "done"


def test_jobs_are_prepared_up_to_depth_ahead_and_never_past_an_unfinished_job(prefetch_tool: Path) -> None:
    """--prefetch-jobs D: jobs[k + 1 .. k + D] prepared while the GPU thread is on jobs[k] (each of
    the D + 1 live jobs has a handle of its own), jobs[k + D + 1] only once jobs[k] is finished."""
    depth, jobs = 3, ["7", "3", "+8", "1", "-6", "2", "4"]
    done = subprocess.run([str(prefetch_tool), *jobs], capture_output=True, text=True, timeout=60,
                          env={"DEPTH": str(depth)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line for line in lines if "overlap" in line] == \
        [f"job {j.lstrip('+-')} overlap 1" for j in jobs]  # D ahead, each time
    finished = 0
    for line in lines:
        if line.startswith("finish"):
            finished += 1
        elif line.startswith("prep"):
            _, _, _, k, _, begun = line.split()
            assert int(k) <= int(begun) + depth, line
            assert int(k) <= finished + depth, line  # jobs[k - D - 1] finished first
    assert [line for line in lines if line.startswith("took")] == \
        ["took 7: 70", "took 3: 30", "took 1: 10", "took 6: error boom 6", "took 2: 20", "took 4: 40"]
    assert lines[-1] == "done"
