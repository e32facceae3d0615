// benanza harness, the driver: bz::Bench and bz::main (options, system line, the job loop).
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "benanza/context.h"
#include "benanza/options.h"
#include "benanza/result.h"

namespace bz {

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
