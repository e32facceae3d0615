// benanza harness, the harness command line: --table, --jobs, --l2, the repetition policy, --list.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace bz {

// The state of L2 a benchmark measures a call in (--l2; benanza/library.py L2):
//   Warm         K calls back to back: inputs, weights and outputs stay in L2 (the lower bound);
//   Cold         L2 flushed before every timed call (K = 1);
//   ColdWeights  what a framework leaves at small batches: activations warm (the previous
//                layer just wrote them), weights cold (last read one inference ago), calls
//                back to back.  Each call reads its own copy of the weights (WeightRing).
enum class L2Mode { Warm, Cold, ColdWeights };
inline const char* const kL2Names[] = {"warm", "cold", "cold-weights"};  // in L2Mode order
inline const char* l2_name(L2Mode m) { return kL2Names[int(m)]; }
inline bool parse_l2(const char* text, L2Mode& out) {
  for (size_t m = 0; m < std::size(kL2Names); ++m) {
    if (std::strcmp(text, kL2Names[m]) == 0) {
      out = L2Mode(m);
      return true;
    }
  }
  return false;
}

struct Options {
  std::string table;       // --table FILE: the job table (empty: <the executable>.jobs beside it)
  std::string jobs_spec;   // --jobs as given ("": every job of the table)
  std::vector<int> jobs;   // the jobs to run, in order (resolve_jobs, once the table is read)
  L2Mode l2 = L2Mode::Warm;
  int min_reps = 5;
  int max_reps = 200;
  double target_rel_err = 0.01;  // stop once the median's 95% CI half-width / median is below this
  double max_ms = 2000.0;        // wall-clock budget of the timed repetitions of one benchmark
  double launch_ms = 0.5;        // aim for one timed launch (graph of K calls) to take this long
  int max_calls = 1000;          // cap on K
  int device = 0;
  bool list = false;
  bool serve = false;            // --serve: job lists from stdin, one per line, each followed by a "ready" line
  int max_engines = 0;           // --max-engines N: at most N engine configs per job (graph API); 0 = all
  // Racing (docs/GENERATOR.md; bench/race_check.py showed it keeps the fastest median within 3 %):
  double race = 1.3;             // --race R: refine no algorithm estimated >= R x the job's best so far; 0 = off
  double job_budget_ms = 4000;   // --job-budget-s S: past S s in a job, its algorithms are timed coarsely; 0 = off
  double slow_call_ms = 1;       // --slow-call-ms X: a call over X ms is judged from its second call alone
  int plan_threads = -1;         // --plan-threads N: graph-API plans built on N host threads and each job's host
                                 // work during the job before (0: all on the GPU thread, in order); -1: the
                                 // CPUs this process may run on - 1 (usable_cpus)
  int prefetch_jobs = 1;         // --prefetch-jobs D: with plan threads, jobs' host work (graph, heuristics, plan
                                 // builds) up to D jobs ahead of the GPU thread (1: the next job only)
};

// The CPUs this process may run on: its affinity mask (taskset, a cgroup's cpuset, dask-cuda pinning
// a worker to its GPU's NUMA-local cores), not the machine's count, so that several benchmark
// processes pinned to a part of a host do not each start a thread per core of the whole host.
// The machine's hardware threads where the mask cannot be read (another OS; over CPU_SETSIZE CPUs);
// at least 1.
inline int usable_cpus() {
#if defined(__linux__) && defined(CPU_COUNT)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(int(CPU_COUNT(&set)), 1);
#endif
  return std::max(int(std::thread::hardware_concurrency()), 1);
}

inline void usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s [--table FILE] [--jobs 0,3,5-9] [--l2 warm|cold|cold-weights] [--max-reps N] [--min-reps N]\n"
               "          [--target-rel-err X] [--max-ms X] [--launch-ms X] [--max-calls N] [--device N] [--list]\n"
               "          [--max-engines N] [--race R] [--job-budget-s S] [--slow-call-ms X] [--plan-threads N]\n"
               "          [--prefetch-jobs D] [--serve]\n",
               prog);
}

// "0,3,5-9" -> {0,3,5,6,7,8,9}; false on a malformed or out-of-range spec.
inline bool parse_jobs(const std::string& spec, int num_jobs, std::vector<int>& out) {
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string part = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = part.find('-');
    char* end = nullptr;
    long lo = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || end == part.c_str()) return false;
    long hi = lo;
    if (dash != std::string::npos) {
      const char* h = part.c_str() + dash + 1;
      hi = std::strtol(h, &end, 10);
      if (end == h) return false;
    }
    if (*end != '\0' || lo < 0 || hi < lo || hi >= num_jobs) return false;
    for (long j = lo; j <= hi; ++j) out.push_back(int(j));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return true;
}

// The command line into `o`; --jobs is checked against the table later (resolve_jobs).
inline bool parse_options(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    auto number = [&](double& dst) {
      const char* v = value();
      char* end = nullptr;
      if (!v) return false;
      dst = std::strtod(v, &end);
      return *end == '\0' && std::isfinite(dst) && dst >= 0;
    };
    double d = 0;
    if (a == "--list") {
      o.list = true;
    } else if (a == "--serve") {
      o.serve = true;
    } else if (a == "--jobs") {
      const char* v = value();
      if (!v || !*v) return false;
      o.jobs_spec = v;
    } else if (a == "--table") {
      const char* v = value();
      if (!v || !*v) return false;
      o.table = v;
    } else if (a == "--l2") {
      const char* v = value();
      if (!v || !parse_l2(v, o.l2)) return false;
    } else if (a == "--max-reps" && number(d) && d >= 1) {
      o.max_reps = int(d);
    } else if (a == "--min-reps" && number(d) && d >= 1) {
      o.min_reps = int(d);
    } else if (a == "--target-rel-err" && number(d)) {
      o.target_rel_err = d;
    } else if (a == "--max-ms" && number(d)) {
      o.max_ms = d;
    } else if (a == "--launch-ms" && number(d)) {
      o.launch_ms = d;
    } else if (a == "--max-calls" && number(d) && d >= 1) {
      o.max_calls = int(d);
    } else if (a == "--device" && number(d)) {
      o.device = int(d);
    } else if (a == "--max-engines" && number(d)) {
      o.max_engines = int(d);
    } else if (a == "--race" && number(d) && (d == 0 || d >= 1)) {
      o.race = d;
    } else if (a == "--job-budget-s" && number(d)) {
      o.job_budget_ms = 1e3 * d;
    } else if (a == "--slow-call-ms" && number(d)) {
      o.slow_call_ms = d;
    } else if (a == "--plan-threads" && number(d)) {
      o.plan_threads = int(d);
    } else if (a == "--prefetch-jobs" && number(d) && d >= 1 && d <= 64) {
      o.prefetch_jobs = int(d);
    } else {
      return false;
    }
  }
  if (o.serve && (o.list || !o.jobs_spec.empty())) return false;  // --serve's jobs come from stdin
  o.min_reps = std::min(o.min_reps, o.max_reps);
  if (o.plan_threads < 0) o.plan_threads = usable_cpus() - 1;
  return true;
}

// --jobs against the table's `num_jobs` (every job when not given); false when out of range or malformed.
inline bool resolve_jobs(int num_jobs, Options& o) {
  o.jobs.clear();
  if (!o.jobs_spec.empty()) return parse_jobs(o.jobs_spec, num_jobs, o.jobs);
  for (int j = 0; j < num_jobs; ++j) o.jobs.push_back(j);
  return true;
}

inline bool parse_options(int argc, char** argv, int num_jobs, Options& o) {
  return parse_options(argc, argv, o) && resolve_jobs(num_jobs, o);
}

}  // namespace bz
