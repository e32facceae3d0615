// benanza harness, the driver: bz::Bench and bz::main (options, system line, the job loop).
#pragma once

#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "benanza/context.h"
#include "benanza/job_table.h"
#include "benanza/options.h"
#include "benanza/prefetch.h"
#include "benanza/result.h"

namespace bz {

// What a generated source hands to bz::main.  Its jobs are not compiled in: bz::main reads the
// job table (job_table.h) and hands each row to `load`, which appends the job to the source's own
// list, so that one executable serves every project (benanza/measure/build_cache.py).
struct Bench {
  const char* api;                               // benanza Api value, e.g. "cudnnConvolutionForward"
  const Column* columns;                         // the job table's columns (benanza/apis ApiDef.columns)
  size_t num_columns;
  void (*load)(const JobRow& row);               // one job of the table, in job order (may call row.fail)
  void (*describe)(int job, Json& out);          // --list: the job's fields (numbers, key)
  void (*run)(Context& ctx, int job);            // measure every algorithm of one job, emit its results
  // Optional: the job's host-only work (no device memory, nothing enqueued), which bz::main runs on
  // a host thread of its own while the job before it is measured (with --plan-threads > 0); run
  // takes the result with Context::prepared, or, when that is null, calls prepare itself.
  Prepared (*prepare)(const HostContext& host, int job) = nullptr;
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

// A sticky CUDA error (illegal address, launch failure) poisons the context: report it (the
// caller exits, so that the runner restarts the process after this job).
inline bool report_sticky(int job) {
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e == cudaSuccess) return false;
  Json j;
  j.add("event", "error").add("job", job).add("message", std::string("CUDA context lost: ") + cudaGetErrorName(e) +
                                                             ": " + cudaGetErrorString(e));
  emit(j);
  return true;
}

// The job table's default place: beside the executable, its name plus ".jobs" (the build puts it there).
inline std::string default_table(const char* argv0) {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) return std::string(self, size_t(n)) + ".jobs";
  return std::string(argv0) + ".jobs";
}

// Read the job table into the source's jobs (Bench::load); returns how many, or -1 after printing why not.
inline int load_jobs(const Bench& bench, const std::string& path) {
  int count = 0;
  try {
    read_job_table(path, bench.api, bench.columns, bench.num_columns, [&](const JobRow& row) {
      bench.load(row);
      ++count;
    });
  } catch (const TableError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return -1;
  }
  return count;
}

// Runs `jobs` in turn between start and end lines; false after a sticky CUDA error (the process
// must exit: the runner restarts it with the jobs it did not reach).
inline bool run_jobs(Context& ctx, const Bench& bench, const std::vector<int>& jobs) {
  // Jobs' host work up to --prefetch-jobs jobs ahead of the GPU thread (Bench::prepare), each job
  // with a handle no other live job uses; --plan-threads 0: none, every job whole on this thread,
  // in turn.
  const bool ahead = bench.prepare && ctx.opt.plan_threads > 0;
  std::optional<Prefetcher> prefetch;  // after ctx: stopped, and its jobs' builds done, before ctx's handles go
  for (size_t k = 0; k < jobs.size(); ++k) {
    const int job = jobs[k];
    emit(Json().add("event", "start").add("job", job));
    ctx.start_job();
    take_alloc_ms();  // the job's "alloc" phase starts afresh
    const auto t0 = std::chrono::steady_clock::now();
    try {
      if (ahead && !prefetch) {  // the first job: its handles, then the worker
        const size_t depth = size_t(ctx.opt.prefetch_jobs);
        ctx.create_job_handles(std::min(depth + 1, jobs.size()));  // the live jobs: this one and depth ahead
        prefetch.emplace(
            jobs,
            [&ctx, &bench](int j, size_t at) {
              cudaSetDevice(ctx.opt.device);  // the worker's own calls go to the benchmark's device too
              ignore_other_threads_captures();
              return bench.prepare(HostContext{ctx.opt, ctx.job_cudnn(at)}, j);
            },
            depth);
        ctx.prefetcher = &*prefetch;
      }
      if (prefetch) prefetch->begin(k);
      bench.run(ctx, job);
    } catch (const std::exception& e) {  // a benchmark body should catch its own errors; this is the backstop
      emit(Json().add("event", "error").add("job", job).add("message", e.what()));
    }
    if (prefetch) {
      ctx.unbind_from_benchmark_stream(ctx.job_cudnn(k));  // the next job to use it is prepared by the worker
      prefetch->finish(k);
    }
    if (report_sticky(job)) {
      ctx.prefetcher = nullptr;
      prefetch.reset();  // its worker joined before the process goes
      return false;
    }
    BufferCache::instance().settle();  // the job's buffers reusable by the next job
    ctx.phases.add(Phase::Alloc, take_alloc_ms());
    Json end;
    end.add("event", "end").add("job", job);
    ctx.phases.to_json(end, ms_since(t0));
    emit(end);
  }
  ctx.prefetcher = nullptr;  // the prefetcher goes with this call
  return true;
}

inline int main(int argc, char** argv, const Bench& bench) {
  Options opt;
  if (!parse_options(argc, argv, opt)) {
    usage(argv[0]);
    return 2;
  }
  const int num_jobs = load_jobs(bench, opt.table.empty() ? default_table(argv[0]) : opt.table);
  if (num_jobs < 0) return 2;
  if (!resolve_jobs(num_jobs, opt)) {
    std::fprintf(stderr, "error: --jobs %s: not job ranges within the table's %d jobs (0-%d)\n", opt.jobs_spec.c_str(),
                 num_jobs, num_jobs - 1);
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
    ignore_other_threads_captures();
    BufferCache::instance().enable_from_env();
    ctx.init();
    emit_system(ctx);
  } catch (const Error& e) {
    Json j;
    j.add("event", "error").add("message", std::string("no usable CUDA device: ") + e.what());
    emit(j);
    return 2;
  }
  // After a sticky error the process exits at once: nothing of a lost context is torn down.
  if (!opt.serve) {
    if (!run_jobs(ctx, bench, opt.jobs)) std::exit(3);
    return 0;
  }
  // --serve (benanza/measure/runner.py ChildPool): one process runs many job lists, so that its
  // start, library handles, lazily loaded kernels and runtime-compiled engines are paid once.
  // Each stdin line is a job list in --jobs' form; its jobs run as a --jobs run would, then a
  // "ready" line says the process waits for the next. It exits at the end of its input.
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<int> jobs;
    if (!parse_jobs(line, num_jobs, jobs)) {
      emit(Json().add("event", "error").add("message", "--serve: not job ranges within the table's " +
                                                         std::to_string(num_jobs) + " jobs: " + line.substr(0, 80)));
    } else if (!run_jobs(ctx, bench, jobs)) {
      std::exit(3);
    }
    ctx.release_workspace();  // an idle process keeps no scratch the other processes on its GPU may need
    BufferCache::instance().release();  // nor buffers kept for its next job
    emit(Json().add("event", "ready"));
  }
  return 0;
}

}  // namespace bz
