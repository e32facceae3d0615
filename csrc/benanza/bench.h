// benanza harness: the one header every generated benchmark includes.
//
// A generated source defines a table of jobs (plain numbers) and two functions,
// `describe(job, json)` and `run(ctx, job)`, and hands them to bz::main.  The
// harness parses the command line, prints the system line, runs the selected
// jobs between start/end lines, times calls (bz::Context::measure) and prints
// one result line per benchmark (bz::Context::emit).  See docs/GENERATOR.md.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "benanza/common.h"
#include "benanza/json.h"
#include "benanza/kernels.h"

namespace bz {

constexpr int kSchema = 1;  // benanza.SCHEMA_VERSION

// ---------------------------------------------------------------- options

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
  std::vector<int> jobs;   // empty: all
  L2Mode l2 = L2Mode::Warm;
  int min_reps = 5;
  int max_reps = 200;
  double target_rel_err = 0.01;  // stop once the median's 95% CI half-width / median is below this
  double max_ms = 2000.0;        // wall-clock budget of the timed repetitions of one benchmark
  double launch_ms = 1.0;        // aim for one timed launch (graph of K calls) to take this long
  int max_calls = 1000;          // cap on K
  int device = 0;
  bool list = false;
  int max_engines = 0;           // --max-engines N: at most N engine configs per job (graph API); 0 = all
  double race = 0;               // --race R: refine no algorithm estimated >= R x the job's best so far; 0 = off
  double job_budget_ms = 0;      // --job-budget-s S: past S s in a job, its algorithms are timed coarsely; 0 = off
};

inline void usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s [--jobs 0,3,5-9] [--l2 warm|cold|cold-weights] [--max-reps N] [--min-reps N]\n"
               "          [--target-rel-err X] [--max-ms X] [--launch-ms X] [--max-calls N] [--device N] [--list]\n"
               "          [--max-engines N] [--race R] [--job-budget-s S]\n",
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

inline bool parse_options(int argc, char** argv, int num_jobs, Options& o) {
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
    } else if (a == "--jobs") {
      const char* v = value();
      if (!v || !parse_jobs(v, num_jobs, o.jobs)) return false;
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
    } else {
      return false;
    }
  }
  o.min_reps = std::min(o.min_reps, o.max_reps);
  if (o.jobs.empty())
    for (int j = 0; j < num_jobs; ++j) o.jobs.push_back(j);
  return true;
}

// ---------------------------------------------------------------- results

// The fields of benanza/records.py Result; the harness adds event, job, api, l2, schema.
struct Result {
  std::string layer_key, algorithm, dtype, math, fusion, layout;
  Status status = Status::Ok;
  std::string message, timing;
  std::optional<double> median_ms, min_ms, max_ms, stddev_ms, host_ms, max_rel_error, tolerance;
  std::optional<long long> workspace_bytes;
  std::optional<int> heuristic_rank, find_rank;
  int repetitions = 0;
  Json notes;

  void fail(const Error& e) {
    status = e.status();
    message = e.what();
  }
};

// ---------------------------------------------------------------- RAII helpers

// A device allocation; a failing cudaMalloc throws Error(OutOfMemory).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    if (bytes) BZ_CHECK_CUDA(cudaMalloc(&ptr_, bytes));
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~Buffer() {
    if (ptr_) cudaFree(ptr_);
  }
  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// The copies of a layer's weights a cold-weights benchmark cycles through (made by
// Context::weight_ring).  With n copies and K, a multiple of n, calls per timed launch,
// every call reads a copy that none of the last n - 1 calls touched; their copies, 3x the
// L2 size together, have evicted it, while the activations stay warm: the state a
// framework's layer finds its weights in, last read one inference ago.
// Copy 0 is the buffer itself, copies 1..n-1 device copies of it (same values, so the
// output check holds for any copy).  Outside cold-weights, and for an operand that is no
// weight, the ring is the buffer alone and every call reads it, as before.
class WeightRing {
 public:
  WeightRing() = default;  // a call without weights
  WeightRing(const Buffer& w, int copies, bool is_weight, cudaStream_t stream) : bytes_(is_weight ? w.bytes() : 0) {
    ptrs_.push_back(w.get());
    if (copies < 2) return;
    const size_t stride = (w.bytes() + 255) / 256 * 256;  // each copy aligned as a cudaMalloc is
    copies_ = Buffer(stride * size_t(copies - 1));
    for (int i = 1; i < copies; ++i) {
      char* dst = copies_.as<char>() + stride * size_t(i - 1);
      BZ_CHECK_CUDA(cudaMemcpyAsync(dst, w.get(), w.bytes(), cudaMemcpyDeviceToDevice, stream));
      ptrs_.push_back(dst);
    }
  }

  void* first() const { return ptrs_.empty() ? nullptr : ptrs_.front(); }  // copy 0: for the checked call
  void* next() {  // the copy the next timed call reads
    if (ptrs_.empty()) return nullptr;
    void* p = ptrs_[next_];
    next_ = (next_ + 1) % ptrs_.size();
    return p;
  }
  int copies() const { return std::max(1, int(ptrs_.size())); }
  size_t weight_bytes() const { return bytes_; }  // of one copy; 0 for an operand that is no weight

 private:
  std::vector<void*> ptrs_;  // copy i
  Buffer copies_;            // copies 1..n-1, one allocation
  size_t bytes_ = 0;
  size_t next_ = 0;
};

class Event {
 public:
  Event() { BZ_CHECK_CUDA(cudaEventCreate(&e_)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { cudaEventDestroy(e_); }
  operator cudaEvent_t() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

class GraphExec {
 public:
  GraphExec() = default;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() {
    if (exec_) cudaGraphExecDestroy(exec_);
  }
  cudaGraphExec_t* out() { return &exec_; }
  explicit operator bool() const { return exec_ != nullptr; }
  cudaGraphExec_t get() const { return exec_; }
  void reset() {
    if (exec_) cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
  }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

inline float elapsed_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  BZ_CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

// ---------------------------------------------------------------- statistics

struct Stats {
  double median = 0, min = 0, max = 0, stddev = 0;
};

inline Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  double mean = 0;
  for (double x : v) mean += x;
  mean /= double(n);
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  s.stddev = n > 1 ? std::sqrt(var / double(n - 1)) : 0.0;
  return s;
}

// Half-width of the distribution-free 95% confidence interval of the median
// (order statistics n/2 -+ 0.98 sqrt(n)), relative to the median.
inline double median_rel_halfwidth(std::vector<double> v) {
  size_t n = v.size();
  if (n < 3) return INFINITY;
  std::sort(v.begin(), v.end());
  double half = 0.98 * std::sqrt(double(n));
  long lo = std::max(0L, long(std::floor(n / 2.0 - half)));
  long hi = std::min(long(n) - 1, long(std::ceil(n / 2.0 + half)));
  double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return median > 0 ? 0.5 * (v[size_t(hi)] - v[size_t(lo)]) / median : INFINITY;
}

// ---------------------------------------------------------------- context

struct Timing {
  Stats ms;           // per call
  double host_ms = 0; // host time to enqueue one call
  int repetitions = 0;
  int calls_per_launch = 1;
  const char* mode = "stream";  // "graph" or "stream"
  std::optional<int> weight_copies;  // --l2 cold-weights: the ring's n
  long long weight_bytes_rotated = 0;  // n x the bytes of one copy
  const char* coarse = nullptr;  // why only kCoarseReps stream repetitions were timed (racing), else null
};

// Repetitions of a coarsely timed call (--race, --job-budget-s): enough for a median that
// shows it is far from the best, not for a precise one.
constexpr int kCoarseReps = 3;

// Why a call is timed coarsely, or null: with --race R its first estimate (ms per call,
// back to back on the stream) is >= R x the best estimate of the job so far; with
// --job-budget-s the job has run past its budget. `protect`: the heuristic's choice or an
// engine config a profile named, always timed in full.
inline const char* coarse_reason(const Options& o, bool protect, double estimate, double best_estimate,
                                 double job_ms) {
  if (protect) return nullptr;
  if (o.race > 0 && estimate >= o.race * best_estimate) return "raced";
  if (o.job_budget_ms > 0 && job_ms > o.job_budget_ms) return "job budget";
  return nullptr;
}

// Most copies a weight ring gets: tiny weights would otherwise need tens of thousands.
constexpr int kMaxWeightCopies = 8192;

// Copies in a cold-weights ring for weights of `weight_bytes`: n = max(2, ceil(3 x L2 / bytes)),
// at most kMaxWeightCopies, so that the n - 1 copies read between two reads of one copy (3x the
// L2 size together) have evicted it.
inline int weight_copies(size_t l2_bytes, size_t weight_bytes) {
  if (weight_bytes == 0) return 1;
  return int(std::clamp(std::ceil(3.0 * double(l2_bytes) / double(weight_bytes)), 2.0, double(kMaxWeightCopies)));
}

// Calls per timed launch when `want` are asked for (--launch-ms / time per call), capped by
// --max-calls: one with --l2 cold (a flush precedes each launch); with cold-weights a multiple
// of the ring's copies and at least as many, past the cap if need be, so that a captured graph
// reads every copy equally often, each n calls after its last read.
inline int calls_per_launch(const Options& o, double want, int copies) {
  if (o.l2 == L2Mode::Cold) return 1;
  const int k = int(std::clamp(std::ceil(want), 1.0, double(o.max_calls)));
  return o.l2 == L2Mode::ColdWeights ? (k + copies - 1) / copies * copies : k;
}

// Where one job's wall time went (bench/campaign.py): the runner reads these from the job's
// "end" line ("phases_ms"); what no phase claims (descriptors, allocations, the fp32
// reference, heuristics/find, graph-API plan builds) is the job's "setup".
enum class Phase { Handles, Warmup, Timed, TimedGpu, Check, kCount };
inline const char* const kPhaseNames[] = {"handles", "warmup", "timed", "timed_gpu", "check"};  // in Phase order

class PhaseClock {
 public:
  void reset() { std::fill(std::begin(ms_), std::end(ms_), 0.0); }
  void add(Phase p, double ms) { ms_[int(p)] += ms; }
  double get(Phase p) const { return ms_[int(p)]; }
  // Adds the phases and the job's wall time (and its setup: wall minus the host phases) to `j`.
  void to_json(Json& j, double wall_ms) const {
    Json phases;
    double claimed = 0;
    for (int p = 0; p < int(Phase::kCount); ++p) {
      phases.add(kPhaseNames[p], ms_[p]);
      if (Phase(p) != Phase::TimedGpu) claimed += ms_[p];
    }
    phases.add("setup", std::max(0.0, wall_ms - claimed)).add("wall", wall_ms);
    j.raw("phases_ms", phases.str());
  }

 private:
  double ms_[int(Phase::kCount)] = {};
};

// Milliseconds since `t0` on the host's steady clock.
inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

class Context {
 public:
  Options opt;
  cudaStream_t stream = nullptr;
  std::string api;
  PhaseClock phases;  // of the job being run (reset by start_job)

  // Called by bz::main before each job: phases and the racing state start afresh.
  void start_job() {
    phases.reset();
    job_start_ = std::chrono::steady_clock::now();
    best_estimate_ = INFINITY;
  }

  // The heuristic's (or cudnnFind's) first choice: never raced.
  static bool is_first_choice(const Result& r) { return r.heuristic_rank == 0 || r.find_rank == 0; }

  explicit Context(const Options& o, const char* api_name) : opt(o), api(api_name) {}
  ~Context() {
    if (cudnn_) cudnnDestroy(cudnn_);
    if (cublas_) cublasDestroy(cublas_);
    if (stream) cudaStreamDestroy(stream);
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  void init() { BZ_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }

  // Library handles, created on first use and bound to the benchmark stream.
  cudnnHandle_t cudnn() {
    if (!cudnn_) {
      const auto t0 = std::chrono::steady_clock::now();
      BZ_CHECK_CUDNN(cudnnCreate(&cudnn_));
      BZ_CHECK_CUDNN(cudnnSetStream(cudnn_, stream));
      phases.add(Phase::Handles, ms_since(t0));
    }
    return cudnn_;
  }
  cublasHandle_t cublas() {
    if (!cublas_) {
      const auto t0 = std::chrono::steady_clock::now();
      BZ_CHECK_CUBLAS(cublasCreate(&cublas_));
      BZ_CHECK_CUBLAS(cublasSetStream(cublas_, stream));
      phases.add(Phase::Handles, ms_since(t0));
    }
    return cublas_;
  }

  // Random inputs in [-1, 1): each buffer of a job gets its own seed.
  void fill(const Buffer& b, size_t count, DType dtype, uint64_t seed) {
    fill_uniform(b.get(), count, dtype, seed, stream);
  }

  // Compare an output with its fp32 reference; sets max_rel_error/tolerance and the
  // status check_failed (keeping the time) when it is off.
  void check(Result& r, const void* out, DType dtype, const float* ref, size_t count, double tolerance) {
    const auto t0 = std::chrono::steady_clock::now();
    double err = max_rel_error(out, dtype, ref, count, stream);
    phases.add(Phase::Check, ms_since(t0));
    r.max_rel_error = err;
    r.tolerance = tolerance;
    if (!(err <= tolerance)) {
      r.status = Status::CheckFailed;
      r.message = std::isfinite(err) ? "output differs from the fp32 reference beyond the tolerance"
                                     : "output holds NaN or Inf";
    }
  }

  // A ring of copies of the weight buffer `w` (WeightRing): weight_copies of them with
  // --l2 cold-weights when `is_weight`, else `w` alone.
  WeightRing weight_ring(const Buffer& w, bool is_weight = true) {
    const int n = is_weight && opt.l2 == L2Mode::ColdWeights ? weight_copies(l2_bytes(), w.bytes()) : 1;
    return WeightRing(w, n, is_weight, stream);
  }

  // Time `call(stream)`, which enqueues one library call (and throws bz::Error on failure).
  // Warm-up, K calls per timed launch (a captured CUDA graph, else back-to-back on the
  // stream), adaptive repetitions until the median is stable; host cost measured apart.
  // `ring`: the weight ring `call` takes its weights from (ring.next()), which sets K's policy.
  // With --race or --job-budget-s a call far slower than the job's best so far (coarse_reason)
  // gets kCoarseReps stream repetitions and Timing::coarse; `protect` exempts it.
  template <class F>
  Timing measure(F&& call, const WeightRing& ring = WeightRing(), bool protect = false) {
    Timing t;
    const auto warmup_start = std::chrono::steady_clock::now();
    const int copies = ring.copies();
    for (int i = 0; i < 2; ++i) call(stream);  // warm-up
    BZ_CHECK_CUDA(cudaStreamSynchronize(stream));
    Event e0, e1;
    BZ_CHECK_CUDA(cudaEventRecord(e0, stream));
    for (int i = 0; i < 3; ++i) call(stream);
    BZ_CHECK_CUDA(cudaEventRecord(e1, stream));
    BZ_CHECK_CUDA(cudaEventSynchronize(e1));
    double estimate = std::max(1e-4, double(elapsed_ms(e0, e1)) / 3.0);
    t.coarse = coarse_reason(opt, protect, estimate, best_estimate_, ms_since(job_start_));
    best_estimate_ = std::min(best_estimate_, estimate);
    int k = t.coarse ? copies : calls_per_launch(opt, opt.launch_ms / estimate, copies);

    const int host_calls = std::min(k, 64);  // few enough not to fill the launch queue
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < host_calls; ++i) call(stream);
    auto t1 = std::chrono::steady_clock::now();
    t.host_ms = std::chrono::duration<double, std::milli>(t1 - t0).count() / host_calls;
    BZ_CHECK_CUDA(cudaStreamSynchronize(stream));

    GraphExec graph;
    if (!t.coarse) capture(call, k, graph);
    if (graph && opt.l2 != L2Mode::Cold && k < opt.max_calls) {
      // The stream estimate includes host launch cost; re-size K from a timed graph launch.
      BZ_CHECK_CUDA(cudaGraphLaunch(graph.get(), stream));
      BZ_CHECK_CUDA(cudaEventRecord(e0, stream));
      BZ_CHECK_CUDA(cudaGraphLaunch(graph.get(), stream));
      BZ_CHECK_CUDA(cudaEventRecord(e1, stream));
      BZ_CHECK_CUDA(cudaEventSynchronize(e1));
      double launch = std::max(1e-4, double(elapsed_ms(e0, e1)));
      const int resized = calls_per_launch(opt, k * opt.launch_ms / launch, copies);
      if (launch < 0.5 * opt.launch_ms && resized != k) {
        k = resized;
        graph.reset();
        capture(call, k, graph);
      }
    }
    t.calls_per_launch = k;
    t.mode = graph ? "graph" : "stream";
    auto launch = [&] {
      if (graph)
        BZ_CHECK_CUDA(cudaGraphLaunch(graph.get(), stream));
      else
        for (int i = 0; i < k; ++i) call(stream);
    };
    launch();  // warm the graph
    BZ_CHECK_CUDA(cudaStreamSynchronize(stream));

    std::vector<double> samples;
    auto start = std::chrono::steady_clock::now();
    phases.add(Phase::Warmup, std::chrono::duration<double, std::milli>(start - warmup_start).count());
    for (;;) {
      if (opt.l2 == L2Mode::Cold) flush_l2();  // cold-weights flushes nothing: its activations stay warm
      BZ_CHECK_CUDA(cudaEventRecord(e0, stream));
      launch();
      BZ_CHECK_CUDA(cudaEventRecord(e1, stream));
      BZ_CHECK_CUDA(cudaEventSynchronize(e1));
      const double launch_ms = double(elapsed_ms(e0, e1));
      phases.add(Phase::TimedGpu, launch_ms);
      samples.push_back(launch_ms / k);
      int n = int(samples.size());
      double spent = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (n >= opt.max_reps || (t.coarse && n >= kCoarseReps)) break;
      if (n >= opt.min_reps && (spent > opt.max_ms || median_rel_halfwidth(samples) <= opt.target_rel_err)) break;
    }
    phases.add(Phase::Timed, ms_since(start));
    t.ms = stats_of(samples);
    t.repetitions = int(samples.size());
    if (opt.l2 == L2Mode::ColdWeights) {
      t.weight_copies = copies;
      t.weight_bytes_rotated = (long long)(size_t(copies) * ring.weight_bytes());
    }
    return t;
  }

  // Copy a timing into a result.
  static void record(Result& r, const Timing& t) {
    r.median_ms = t.ms.median;
    r.min_ms = t.ms.min;
    r.max_ms = t.ms.max;
    r.stddev_ms = t.ms.stddev;
    r.host_ms = t.host_ms;
    r.repetitions = t.repetitions;
    r.timing = t.mode;
    r.notes.add("calls_per_launch", t.calls_per_launch);
    if (t.coarse) r.notes.add("coarse", t.coarse);  // a coarse median: far from the best, not refined
    if (t.weight_copies)
      r.notes.add("weight_copies", *t.weight_copies).add("weight_bytes_rotated", t.weight_bytes_rotated);
  }

  // Print one result line for `job`.
  void emit(int job, const Result& r) const {
    Json j;
    j.add("event", "result").add("job", job).add("layer_key", r.layer_key).add("api", api);
    j.add("algorithm", r.algorithm).add("dtype", r.dtype).add("math", r.math).add("fusion", r.fusion);
    j.add("status", status_name(r.status)).add("l2", l2_name(opt.l2)).add("layout", r.layout);
    j.add("message", r.message).add("median_ms", r.median_ms).add("min_ms", r.min_ms).add("max_ms", r.max_ms);
    j.add("stddev_ms", r.stddev_ms).add("repetitions", r.repetitions).add("host_ms", r.host_ms);
    j.add("workspace_bytes", r.workspace_bytes).add("timing", r.timing).add("max_rel_error", r.max_rel_error);
    j.add("tolerance", r.tolerance).add("heuristic_rank", r.heuristic_rank).add("find_rank", r.find_rank);
    j.raw("notes", r.notes.str()).add("schema", kSchema);
    bz::emit(j);
  }

  // The device's L2 size in bytes (at least 1 MiB, should the attribute read 0).
  size_t l2_bytes() {
    if (!l2_bytes_) {
      int dev = 0, l2 = 0;
      BZ_CHECK_CUDA(cudaGetDevice(&dev));
      BZ_CHECK_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
      l2_bytes_ = size_t(std::max(l2, 1 << 20));
    }
    return l2_bytes_;
  }

  // Evict L2 by writing a buffer twice its size (used with --l2 cold).
  void flush_l2() {
    if (!l2_.get()) l2_ = Buffer(2 * l2_bytes());
    BZ_CHECK_CUDA(cudaMemsetAsync(l2_.get(), ++flushes_ & 0xff, l2_.bytes(), stream));
  }

 private:
  // Capture K calls into a graph; leaves `graph` empty when the library refuses capture.
  template <class F>
  void capture(F& call, int k, GraphExec& graph) {
    cudaGraph_t g = nullptr;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    bool ok = true;
    try {
      for (int i = 0; i < k; ++i) call(stream);
    } catch (const Error&) {
      ok = false;
    }
    cudaError_t end = cudaStreamEndCapture(stream, &g);
    if (ok && end == cudaSuccess && g) ok = cudaGraphInstantiate(graph.out(), g, 0) == cudaSuccess;
    if (g) cudaGraphDestroy(g);
    if (!ok || end != cudaSuccess) {
      graph.reset();
      cudaGetLastError();
    }
  }

  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  Buffer l2_;
  size_t l2_bytes_ = 0;
  unsigned flushes_ = 0;
  std::chrono::steady_clock::time_point job_start_ = std::chrono::steady_clock::now();
  double best_estimate_ = INFINITY;
};

// ---------------------------------------------------------------- driver

// What a generated source hands to bz::main.
struct Bench {
  const char* api;                               // benanza Api value, e.g. "cudnnConvolutionForward"
  int num_jobs;
  void (*describe)(int job, Json& out);          // --list: the job's fields (numbers, key)
  void (*run)(Context& ctx, int job);            // measure every algorithm of one job, emit its results
};

inline std::string version3(int v, int major_div, int minor_div) {  // 91900 -> "9.19.0"
  return std::to_string(v / major_div) + "." + std::to_string((v % major_div) / minor_div) + "." +
         std::to_string(v % minor_div);
}

inline void emit_system(const Context& ctx) {
  int dev = ctx.opt.device, rt = 0, drv = 0, l2 = 0, clock = 0, mem_clock = 0, bus = 0;
  cudaDeviceProp p{};
  BZ_CHECK_CUDA(cudaGetDeviceProperties(&p, dev));
  BZ_CHECK_CUDA(cudaRuntimeGetVersion(&rt));
  BZ_CHECK_CUDA(cudaDriverGetVersion(&drv));
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
  cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, dev);
  cudaDeviceGetAttribute(&mem_clock, cudaDevAttrMemoryClockRate, dev);
  cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, dev);
  int cb_major = 0, cb_minor = 0, cb_patch = 0;
  cublasGetProperty(MAJOR_VERSION, &cb_major);
  cublasGetProperty(MINOR_VERSION, &cb_minor);
  cublasGetProperty(PATCH_LEVEL, &cb_patch);
  auto cuda_version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  Json j;
  j.add("event", "system").add("gpu", p.name).add("sm_count", p.multiProcessorCount);
  j.add("cc", std::to_string(p.major) + "." + std::to_string(p.minor));
  j.add("cuda_runtime", cuda_version(rt)).add("cuda_driver", cuda_version(drv));
  j.add("cudnn_version", version3(int(cudnnGetVersion()), 10000, 100));
  j.add("cublas_version", std::to_string(cb_major) + "." + std::to_string(cb_minor) + "." + std::to_string(cb_patch));
  j.add("memory_bytes", (unsigned long long)p.totalGlobalMem).add("l2_bytes", l2).add("sm_clock_khz", clock);
  j.add("mem_clock_khz", mem_clock).add("mem_bus_bits", bus).add("api", ctx.api);
  j.add("l2", l2_name(ctx.opt.l2)).add("schema", kSchema);
  emit(j);
}

// A sticky CUDA error (illegal address, launch failure) poisons the context: report
// it and exit, so that the runner restarts the process after this job.
inline void exit_if_sticky(int job) {
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e == cudaSuccess) return;
  Json j;
  j.add("event", "error").add("job", job).add("message", std::string("CUDA context lost: ") + cudaGetErrorName(e) +
                                                             ": " + cudaGetErrorString(e));
  emit(j);
  std::exit(3);
}

inline int main(int argc, char** argv, const Bench& bench) {
  Options opt;
  if (!parse_options(argc, argv, bench.num_jobs, opt)) {
    usage(argv[0]);
    return 2;
  }
  if (opt.list) {
    for (int job : opt.jobs) {
      Json j;
      j.add("event", "job").add("job", job).add("api", bench.api);
      bench.describe(job, j);
      emit(j);
    }
    return 0;
  }
  Context ctx(opt, bench.api);
  try {
    BZ_CHECK_CUDA(cudaSetDevice(opt.device));
    ctx.init();
    emit_system(ctx);
  } catch (const Error& e) {
    Json j;
    j.add("event", "error").add("message", std::string("no usable CUDA device: ") + e.what());
    emit(j);
    return 2;
  }
  for (int job : opt.jobs) {
    emit(Json().add("event", "start").add("job", job));
    ctx.start_job();
    const auto t0 = std::chrono::steady_clock::now();
    try {
      bench.run(ctx, job);
    } catch (const std::exception& e) {  // a benchmark body should catch its own errors; this is the backstop
      emit(Json().add("event", "error").add("job", job).add("message", e.what()));
    }
    exit_if_sticky(job);
    Json end;
    end.add("event", "end").add("job", job);
    ctx.phases.to_json(end, ms_since(t0));
    emit(end);
  }
  return 0;
}

}  // namespace bz
