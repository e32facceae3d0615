// benanza harness, bz::KernelClock: the kernel-only GPU time of one call, from CUPTI's activity
// records. A framework's profile times its library calls this way (kernel durations); events
// around a single 10 us call add a launch and two timestamps of their own (1-2 us), so --l2 cold,
// which times one call after each flush, times it with this clock where CUPTI is there.
#pragma once

#include <cxxabi.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>

#ifdef BZ_HAVE_CUPTI
#include <cupti.h>
#endif

namespace bz {

class KernelClock {
 public:
  // The process's clock (CUPTI's activity callbacks are per process).
  static KernelClock& get() {
    static KernelClock clock;
    return clock;
  }

  // Whether kernel records can be had: registers the buffer callbacks and enables concurrent-kernel
  // records on the first call; false without CUPTI (not built with it, or it refuses: another
  // profiler holds it), and the caller times with events.
  bool available() {
#ifdef BZ_HAVE_CUPTI
    if (!tried_) {
      tried_ = true;
      ok_ = cuptiActivityRegisterCallbacks(&KernelClock::request, &KernelClock::complete) == CUPTI_SUCCESS &&
            cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
    }
    return ok_;
#else
    return false;
#endif
  }

  // Starts timing: the records of work done before (the caller has synchronized) are dropped.
  void start() {
    flush();
    reset();
  }

  // After the caller synchronized its stream: the summed durations (ms) of the kernels that ran
  // since start() or the last lap, and their count (0: no record came, so they cannot be timed
  // this way). One forced flush per lap.
  double lap(int* kernels) {
    flush();
    std::lock_guard<std::mutex> lock(mu_);
    *kernels = kernels_;
    const double ms = ms_;
    last_longest_ = longest_;
    clear();
    return ms;
  }

  // The name of the longest kernel of the last lap: which kernel the library chose, to set beside
  // the one a framework's profile shows for the same call.
  std::string longest() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_longest_;
  }

 private:
  KernelClock() = default;

  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    clear();
  }

  // The sums of a lap back to nothing (mu_ held).
  void clear() {
    ms_ = longest_ms_ = 0;
    kernels_ = 0;
    longest_.clear();
  }

  void flush() {
#ifdef BZ_HAVE_CUPTI
    if (ok_) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
#endif
  }

  // A C++ kernel's name as a profile shows it ("void ns::kernel<float>(...)"); a C name as it is.
  static std::string demangled(const char* name) {
    int status = 0;
    char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    std::string out = status == 0 && text ? text : name;
    std::free(text);
    return out;
  }

#ifdef BZ_HAVE_CUPTI
  static constexpr size_t kBufferBytes = 1 << 20;

  static void CUPTIAPI request(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;
  }

  static void CUPTIAPI complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    KernelClock& clock = get();
    CUpti_Activity* record = nullptr;
    {
      std::lock_guard<std::mutex> lock(clock.mu_);
      while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        if (k->end <= k->start) continue;
        const double ms = double(k->end - k->start) * 1e-6;
        clock.ms_ += ms;
        ++clock.kernels_;
        if (ms > clock.longest_ms_ && k->name) {
          clock.longest_ms_ = ms;
          clock.longest_ = demangled(k->name);
        }
      }
    }
    std::free(buffer);
  }
#endif

  std::mutex mu_;
  double ms_ = 0, longest_ms_ = 0;
  int kernels_ = 0;
  std::string longest_, last_longest_;
  bool tried_ = false, ok_ = false;
};

}  // namespace bz
