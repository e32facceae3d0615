// benanza harness, bz::Context: one device, its handles and streams, timing (measure) and result lines (emit).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "benanza/common.h"
#include "benanza/json.h"
#include "benanza/kernel_clock.h"
#include "benanza/kernels.h"
#include "benanza/options.h"
#include "benanza/prefetch.h"
#include "benanza/result.h"
#include "benanza/buffers.h"
#include "benanza/stats.h"

namespace bz {

struct Timing {
  Stats ms;           // per call
  double host_ms = 0; // host time to enqueue one call
  int repetitions = 0;
  int calls_per_launch = 1;
  const char* mode = "stream";  // "graph" or "stream"; "cupti": kernel durations (--l2 cold, KernelClock)
  int kernels_per_call = 0;     // with "cupti": the kernels one call ran
  std::string kernel;           // with "cupti": the longest of them (KernelClock::longest)
  std::optional<int> weight_copies;  // --l2 cold-weights: the ring's n
  long long weight_bytes_rotated = 0;  // n x the bytes of one copy
  const char* coarse = nullptr;  // why only kCoarseReps stream repetitions were timed (racing), else null
};

// What a call's warm-up tells of it (Context::estimate): ms per call, the host's enqueue cost,
// whether it was judged from one slow call, and whether a raced estimate was confirmed already.
struct Estimate {
  double ms = INFINITY;
  double host_ms = 0;
  bool one_call = false;
  bool confirmed = false;
};

// Repetitions of a coarsely timed call (--race, --job-budget-s) under --l2 cold or cold-weights:
// enough for a median that shows it is far from the best, not for a precise one. Under warm L2 a
// coarse median is the call's estimate itself (Context::time_estimated).
constexpr int kCoarseReps = 3;

// Why a call is timed coarsely (Timing::coarse), or null.
inline constexpr const char* kRaced = "raced";
inline constexpr const char* kJobBudget = "job budget";
inline constexpr const char* kSlowCall = "slow call";  // raced or past the budget, from one call (--slow-call-ms)

// With --race R: its estimate (ms per call; Context::measure confirms a first estimate on the
// stream with a second and with a captured graph's before it races) is >= R x the best
// estimate of the job so far; with --job-budget-s: the job has run past its budget and the
// call is slower than the job's best estimate. `protect`: the heuristic's choice or an engine config a profile named,
// always timed in full (so is whatever may be the job's fastest).
inline const char* coarse_reason(const Options& o, bool protect, double estimate, double best_estimate,
                                 double job_ms) {
  if (protect) return nullptr;
  if (o.race > 0 && estimate >= o.race * best_estimate) return kRaced;
  if (o.job_budget_ms > 0 && job_ms > o.job_budget_ms && estimate > best_estimate) return kJobBudget;
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
// "end" line ("phases_ms"); what no phase claims (descriptors, the fp32 reference,
// heuristics/find) is the job's "setup". Alloc: the GPU thread's device allocations and frees
// (Buffer, BufferCache; the job's buffers made reusable at its end). PlanWait: the graph API's GPU thread waiting
// for an execution plan (built on host threads ahead of it, PlanBuilder in cudnn_graph.h).
// PrepWait: the GPU thread's time on the job's host-only work (Bench::prepare): waiting for it
// when a host thread did it during the job before (Prefetcher), doing it itself otherwise.
// HostPrep: that work's own host time, wherever it ran; like TimedGpu it claims none of the job's
// wall time (HostPrep less PrepWait is what ran hidden behind the job before). InputsGpu: the GPU
// time of the job's input fills and fp32 reference (GpuSpan), beside the wall time too.
enum class Phase { Handles, Warmup, Timed, TimedGpu, Check, PlanWait, PrepWait, HostPrep, InputsGpu, Alloc, kCount };
inline const char* const kPhaseNames[] = {"handles", "warmup",    "timed",     "timed_gpu",  "check",
                                          "plan_wait", "prep_wait", "host_prep", "inputs_gpu", "alloc"};  // in Phase order

// Whether a phase is a part of the job's wall time on the GPU thread (the others are measured beside it).
inline bool claims_wall(Phase p) { return p != Phase::TimedGpu && p != Phase::HostPrep && p != Phase::InputsGpu; }

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
      if (claims_wall(Phase(p))) claimed += ms_[p];
    }
    phases.add("setup", std::max(0.0, wall_ms - claimed)).add("wall", wall_ms);
    j.raw("phases_ms", phases.str());
  }

 private:
  double ms_[int(Phase::kCount)] = {};
};

// What a job's host-only work (Bench::prepare) may use, on whichever thread it runs: the options
// and a cuDNN handle, bound to the benchmark stream, that no other thread uses meanwhile.
struct HostContext {
  const Options& opt;
  cudnnHandle_t cudnn;
};

class Context {
 public:
  Options opt;
  cudaStream_t stream = nullptr;
  std::string api;
  PhaseClock phases;  // of the job being run (reset by start_job)
  Prefetcher* prefetcher = nullptr;  // set by bz::main while jobs' host work runs ahead of them

  // The job's host work prepared ahead of it (Prefetcher::take), waiting for it (PrepWait); null
  // when nothing runs ahead: the benchmark then does it itself.
  Prepared prepared(int job) {
    if (!prefetcher) return nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    Prepared p = prefetcher->take(job);
    phases.add(Phase::PrepWait, ms_since(t0));
    if (!p) throw Error(Status::Failed, "job " + std::to_string(job) + ": no host work prepared ahead (taken twice?)");
    return p;
  }

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
    for (cudnnHandle_t h : job_cudnn_)
      if (h) cudnnDestroy(h);
    if (cudnn_) cudnnDestroy(cudnn_);
    if (cublas_) cublasDestroy(cublas_);
    if (stream) cudaStreamDestroy(stream);
    if (prep_stream_) cudaStreamDestroy(prep_stream_);
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
  // Handles for jobs whose host work runs ahead (HostContext): `count` of them (--prefetch-jobs + 1,
  // or fewer for a shorter run), job k of the run gets the (k mod count)-th. The Prefetcher keeps at
  // most count consecutive jobs alive (the GPU thread's and those prepared ahead of it: jobs[k +
  // count] is never prepared before jobs[k] is finished), so no two live jobs share a handle and
  // the worker building a job's graph never shares one with the GPU thread executing another's. All
  // are created here, on the GPU thread, one after the other (cuDNN: a first handle created
  // synchronously before threads use handles of their own). While a worker prepares a job its
  // handle is bound to a stream of its own (prep_stream_): whatever cuDNN enqueues while building a
  // graph must not land in the benchmark stream while the GPU thread captures a CUDA graph on it
  // (other threads' own captures: ignore_other_threads_captures); the GPU thread binds the
  // handle to the benchmark stream when it takes the job (bind_to_benchmark_stream).
  void create_job_handles(size_t count) {
    if (!prep_stream_) BZ_CHECK_CUDA(cudaStreamCreateWithFlags(&prep_stream_, cudaStreamNonBlocking));
    while (job_cudnn_.size() < std::max<size_t>(count, 1)) {  // a failed call leaves the rest to the next
      const auto t0 = std::chrono::steady_clock::now();
      cudnnHandle_t h = nullptr;
      BZ_CHECK_CUDNN(cudnnCreate(&h));
      job_cudnn_.push_back(h);
      BZ_CHECK_CUDNN(cudnnSetStream(h, prep_stream_));
      phases.add(Phase::Handles, ms_since(t0));
    }
  }
  cudnnHandle_t job_cudnn(size_t k) const { return job_cudnn_[k % job_cudnn_.size()]; }
  // On the GPU thread, for a job it took from the worker: the job's handle executes on the benchmark
  // stream from now on; before the next time a worker prepares with it, back to the worker's stream.
  void bind_to_benchmark_stream(cudnnHandle_t h) { BZ_CHECK_CUDNN(cudnnSetStream(h, stream)); }
  void unbind_from_benchmark_stream(cudnnHandle_t h) {
    if (prep_stream_) cudnnSetStream(h, prep_stream_);
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

  // Device scratch of `bytes` for one algorithm's workspace, valid until the next call: one
  // buffer reused by the whole process (a cudaMalloc and a synchronizing cudaFree per
  // algorithm cost more than many of the calls they serve); above kKeptWorkspaceBytes a
  // buffer of its own, freed when the returned Workspace goes.
  Workspace workspace(size_t bytes) {
    if (bytes > kKeptWorkspaceBytes) return Workspace(Buffer(bytes));
    if (work_.bytes() < bytes) {
      const size_t grown = std::max(bytes, std::min(2 * work_.bytes(), kKeptWorkspaceBytes));
      work_ = Buffer();  // free the smaller one first
      work_ = Buffer(grown);
    }
    return Workspace(work_.get());
  }

  // Frees the kept workspace (a --serve process between job lists: other processes share its GPU).
  void release_workspace() { work_ = Buffer(); }

  // Random inputs in [-1, 1): each buffer of a job gets its own seed.
  void fill(const Buffer& b, size_t count, DType dtype, uint64_t seed) {
    fill_uniform(b.get(), count, dtype, seed, stream);
  }

  // Compare an output with its fp32 reference (the whole output, or the spans a reference
  // covers: ConvReference); sets max_rel_error/tolerance and the status check_failed (keeping
  // the time) when it is off.
  void check(Result& r, const void* out, DType dtype, const float* ref, size_t count, double tolerance) {
    check(r, out, dtype, whole_output(ref, count), tolerance);
  }
  void check(Result& r, const void* out, DType dtype, const std::vector<CheckedSpan>& spans, double tolerance) {
    const auto t0 = std::chrono::steady_clock::now();
    double err = max_rel_error(out, dtype, spans, stream);
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

  // ms of what `call()` enqueues, on its own (synchronized before and after): the checked call a
  // benchmark makes before measure() is timed with this and handed to it as its first call;
  // measure times its single calls and graph launches with it too.
  template <class F>
  double time_call(F&& call) {
    Event e0, e1;
    BZ_CHECK_CUDA(cudaEventRecord(e0, stream));
    call();
    BZ_CHECK_CUDA(cudaEventRecord(e1, stream));
    BZ_CHECK_CUDA(cudaEventSynchronize(e1));
    return double(elapsed_ms(e0, e1));
  }

  // Time `call(stream)`, which enqueues one library call (and throws bz::Error on failure).
  // Warm-up, K calls per timed launch (a captured CUDA graph, else back-to-back on the
  // stream), adaptive repetitions until the median is stable; host cost from the estimate's enqueue.
  // `ring`: the weight ring `call` takes its weights from (ring.next()), which sets K's policy.
  // With --race or --job-budget-s a call far slower than the job's best so far (coarse_reason)
  // gets kCoarseReps stream repetitions and Timing::coarse; `protect` exempts it.
  // `first_ms`: the time of a call the benchmark already made (its checked call, time_call),
  // which then stands for measure's own first warm-up call. One pass: estimate, then time.
  template <class F>
  Timing measure(F&& call, const WeightRing& ring = WeightRing(), bool protect = false,
                 std::optional<double> first_ms = std::nullopt) {
    return time_estimated(call, ring, protect, estimate(call, protect, first_ms));
  }

  // Whether a call of estimate `e` would be timed coarsely now (raced or past the job budget):
  // a job that races in two passes (run_engine_configs) times such a call at once and keeps the
  // others, which may still be its best, for when every estimate of the job is in.
  bool would_be_coarse(const Estimate& e, bool protect) const {
    return coarse_reason(opt, protect, e.ms, best_estimate_, ms_since(job_start_)) != nullptr;
  }

  // The warm-up half of measure: the call's first calls and its estimate (ms per call); the job's
  // best estimate is left to time_estimated (or note_estimate). A call the job's best so far already
  // races is confirmed here (Estimate::confirmed).
  template <class F>
  Estimate estimate(F&& call, bool protect = false, std::optional<double> first_ms = std::nullopt) {
    Estimate e;
    const auto warmup_start = std::chrono::steady_clock::now();
    // The first warm-up call, timed. It may pay one-off costs (lazy module loading, a first
    // touch of the workspace: on the H100 a 0.42 ms graph-API conv's once took 79 ms and became
    // its "median" while a first call over 20 ms could decide alone), so it never decides alone.
    // A call over --slow-call-ms whose second call is slow too is judged from that second call
    // (a synchronized single call times a slow call well, not a fast one: then the usual
    // estimate follows).
    const double first = first_ms ? *first_ms : timed_call(call);
    if (first > opt.slow_call_ms) {
      const auto t0 = std::chrono::steady_clock::now();
      e.ms = timed_call(call);
      e.one_call = e.ms > opt.slow_call_ms;
      if (e.one_call) e.host_ms = std::max(0.0, ms_since(t0) - e.ms);  // what the synchronized call's wall time adds
    } else {
      call(stream);  // the second warm-up call
      BZ_CHECK_CUDA(cudaStreamSynchronize(stream));
    }
    if (!e.one_call) {
      e.ms = stream_estimate(call, &e.host_ms);  // its enqueue time is the host cost
      confirm_if_raced(call, protect, e);
    }
    phases.add(Phase::Warmup, ms_since(warmup_start));
    return e;
  }

  // A kept estimate joins the job's best (two passes: the calls after it race against it).
  void note_estimate(const Estimate& e) { best_estimate_ = std::min(best_estimate_, e.ms); }

  // Everything after the estimate: a raced or budget-bound call coarsely (confirmed first if it
  // was not: its job's best came after it), the others K calls per launch until the median is stable.
  template <class F>
  Timing time_estimated(F&& call, const WeightRing& ring, bool protect, Estimate e) {
    Timing t;
    const auto warmup_start = std::chrono::steady_clock::now();
    const int copies = ring.copies();
    if (opt.l2 == L2Mode::ColdWeights) {
      t.weight_copies = copies;
      t.weight_bytes_rotated = (long long)(size_t(copies) * ring.weight_bytes());
    }
    t.host_ms = e.host_ms;
    const double job_ms = ms_since(job_start_);
    // A coarse median that is the estimate itself, which `calls` calls timed.
    auto estimate_as_median = [&](const char* why, int calls) {
      best_estimate_ = std::min(best_estimate_, e.ms);
      phases.add(Phase::TimedGpu, e.ms * calls);
      t.coarse = why;
      t.ms = stats_of({e.ms});
      t.repetitions = 1;
      t.calls_per_launch = calls;
      return t;
    };
    if (e.one_call) {
      if (coarse_reason(opt, protect, e.ms, best_estimate_, job_ms)) return estimate_as_median(kSlowCall, 1);
    } else {
      confirm_if_raced(call, protect, e);
      t.coarse = coarse_reason(opt, protect, e.ms, best_estimate_, job_ms);
      // Under warm L2 its estimate (kEstimateCalls calls back to back on the stream) is what kCoarseReps
      // stream repetitions would time again; with --l2 cold and cold-weights they run in that state.
      if (t.coarse && opt.l2 == L2Mode::Warm) return estimate_as_median(t.coarse, kEstimateCalls);
    }
    GraphExec graph;
    best_estimate_ = std::min(best_estimate_, e.ms);
    int k = t.coarse ? copies : calls_per_launch(opt, opt.launch_ms / e.ms, copies);

    if (!t.coarse) capture(call, k, graph);
    bool warmed = false;
    if (graph && opt.l2 != L2Mode::Cold && k < opt.max_calls) {
      // The stream estimate includes host launch cost; re-size K from a timed graph launch,
      // which also warms the graph when K stays.
      BZ_CHECK_CUDA(cudaGraphUpload(graph.get(), stream));
      const double launch = std::max(1e-4, time_call([&] { BZ_CHECK_CUDA(cudaGraphLaunch(graph.get(), stream)); }));
      const int resized = calls_per_launch(opt, k * opt.launch_ms / launch, copies);
      warmed = true;
      if (launch < 0.5 * opt.launch_ms && resized != k) {
        k = resized;
        graph.reset();
        capture(call, k, graph);
        warmed = false;
      }
    }
    t.calls_per_launch = k;
    t.mode = graph ? "graph" : "stream";
    Event e0, e1;
    auto launch = [&] {
      if (graph)
        BZ_CHECK_CUDA(cudaGraphLaunch(graph.get(), stream));
      else
        for (int i = 0; i < k; ++i) call(stream);
    };
    if (!warmed) {
      launch();  // warm the graph
      BZ_CHECK_CUDA(cudaStreamSynchronize(stream));
    }

    // --l2 cold times its single call by the kernels' own durations where CUPTI is there (what a
    // framework's profile measures); events otherwise, or from a repetition CUPTI recorded nothing for.
    KernelClock* kernel_clock = opt.l2 == L2Mode::Cold && KernelClock::get().available() ? &KernelClock::get() : nullptr;
    std::vector<double> kernel_samples, event_samples;
    auto start = std::chrono::steady_clock::now();
    phases.add(Phase::Warmup, std::chrono::duration<double, std::milli>(start - warmup_start).count());
    if (kernel_clock) kernel_clock->start();
    for (;;) {
      if (opt.l2 == L2Mode::Cold) flush_l2();  // cold-weights flushes nothing: its activations stay warm
      BZ_CHECK_CUDA(cudaEventRecord(e0, stream));
      launch();
      BZ_CHECK_CUDA(cudaEventRecord(e1, stream));
      BZ_CHECK_CUDA(cudaEventSynchronize(e1));
      const double launch_ms = double(elapsed_ms(e0, e1));
      phases.add(Phase::TimedGpu, launch_ms);
      event_samples.push_back(launch_ms / k);
      int kernels = 0;
      const double kernel_ms = kernel_clock ? kernel_clock->lap(&kernels) : 0.0;
      if (kernel_clock && kernels == 0) kernel_clock = nullptr;  // no record: events for all repetitions
      if (kernel_clock) {
        kernel_samples.push_back(kernel_ms / k);
        t.kernels_per_call = kernels / k;
        t.kernel = kernel_clock->longest();
      }
      const std::vector<double>& samples = kernel_clock ? kernel_samples : event_samples;
      int n = int(samples.size());
      double spent = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (n >= opt.max_reps || (t.coarse && n >= kCoarseReps)) break;
      if (n >= opt.min_reps && (spent > opt.max_ms || median_rel_halfwidth(samples) <= opt.target_rel_err)) break;
    }
    phases.add(Phase::Timed, ms_since(start));
    const std::vector<double>& samples = kernel_clock ? kernel_samples : event_samples;
    t.ms = stats_of(samples);
    t.repetitions = int(samples.size());
    if (kernel_clock) {
      t.mode = "cupti";
    } else {
      t.kernels_per_call = 0;
      t.kernel.clear();
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
    if (t.kernels_per_call) r.notes.add("kernels_per_call", t.kernels_per_call).add("kernel", t.kernel);
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
  // ms of one call on its own (synchronized before and after).
  template <class F>
  double timed_call(F& call) {
    return time_call([&] { call(stream); });
  }

  // Confirm an estimate the job's best races, once, before it is dropped: a second estimate on the
  // stream (the first may pay a first launch's costs), then, for a launch-bound call, one from a
  // captured graph (no host cost). Its time is its caller's warm-up.
  template <class F>
  void confirm_if_raced(F& call, bool protect, Estimate& e) {
    if (e.confirmed || coarse_reason(opt, protect, e.ms, best_estimate_, 0) != kRaced) return;
    e.ms = std::min(e.ms, stream_estimate(call, nullptr));
    if (coarse_reason(opt, protect, e.ms, best_estimate_, 0) == kRaced && e.host_ms >= 0.5 * e.ms)
      e.ms = std::min(e.ms, graph_estimate(call));
    e.confirmed = true;
  }

  // Calls an estimate times: few, enough to see an algorithm's cost (back to back on the stream).
  static constexpr int kEstimateCalls = 3;

  // ms per call of kEstimateCalls calls back to back on the stream; `host_ms`, when given,
  // gets the host time to enqueue one of them.
  template <class F>
  double stream_estimate(F& call, double* host_ms) {
    Event e0, e1;
    BZ_CHECK_CUDA(cudaEventRecord(e0, stream));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kEstimateCalls; ++i) call(stream);
    if (host_ms) *host_ms = ms_since(t0) / kEstimateCalls;
    BZ_CHECK_CUDA(cudaEventRecord(e1, stream));
    BZ_CHECK_CUDA(cudaEventSynchronize(e1));
    return std::max(1e-4, double(elapsed_ms(e0, e1)) / kEstimateCalls);
  }

  // ms per call from a graph of kEstimateCalls calls, launched once to warm it and once timed:
  // the GPU's time without the host's launch cost (INFINITY when the library refuses capture).
  template <class F>
  double graph_estimate(F& call) {
    GraphExec graph;
    capture(call, kEstimateCalls, graph);
    if (!graph) return INFINITY;
    BZ_CHECK_CUDA(cudaGraphLaunch(graph.get(), stream));  // warms it; the next launch is timed
    return std::max(1e-4, time_call([&] { BZ_CHECK_CUDA(cudaGraphLaunch(graph.get(), stream)); }) / kEstimateCalls);
  }

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
  std::vector<cudnnHandle_t> job_cudnn_;  // create_job_handles
  cudaStream_t prep_stream_ = nullptr;    // the job handles' stream while a worker prepares with them
  cublasHandle_t cublas_ = nullptr;
  Buffer l2_;
  Buffer work_;  // workspace()
  size_t l2_bytes_ = 0;
  unsigned flushes_ = 0;
  std::chrono::steady_clock::time_point job_start_ = std::chrono::steady_clock::now();
  double best_estimate_ = INFINITY;
};

// The GPU time of what the job enqueues from construction to end() (a graph benchmark's inputs and
// fp32 reference), added to phase `p` when the span goes at the job's end, when the stream is long
// past it: nothing waits for it earlier, and a failed event call only leaves the phase out.
class GpuSpan {
 public:
  GpuSpan(Context& ctx, Phase p) : ctx_(ctx), p_(p) {
    ok_ = cudaEventCreate(&e0_) == cudaSuccess && cudaEventCreate(&e1_) == cudaSuccess &&
          cudaEventRecord(e0_, ctx.stream) == cudaSuccess;
  }
  void end() { ended_ = ok_ && cudaEventRecord(e1_, ctx_.stream) == cudaSuccess; }
  ~GpuSpan() {
    float ms = 0;
    if (ended_ && cudaEventSynchronize(e1_) == cudaSuccess && cudaEventElapsedTime(&ms, e0_, e1_) == cudaSuccess)
      ctx_.phases.add(p_, double(ms));
    if (e0_) cudaEventDestroy(e0_);
    if (e1_) cudaEventDestroy(e1_);
  }
  GpuSpan(const GpuSpan&) = delete;
  GpuSpan& operator=(const GpuSpan&) = delete;

 private:
  Context& ctx_;
  Phase p_;
  cudaEvent_t e0_ = nullptr, e1_ = nullptr;
  bool ok_ = false, ended_ = false;
};

}  // namespace bz
