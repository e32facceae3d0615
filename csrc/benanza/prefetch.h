// benanza harness, bz::Prefetcher: a job's host-only work (Bench::prepare) done on a host thread
// of its own while the GPU thread measures the job before it.
//
// The worker prepares the jobs in their order, up to `depth` (--prefetch-jobs) ahead: jobs[k + 1 ..
// k + depth] once the GPU thread has begun jobs[k] (begin), and jobs[k + depth + 1] never before the
// GPU thread has finished jobs[k] (finish, which releases its object), so at most depth + 1 jobs'
// host work is alive at once (Context's depth + 1 job handles, used in turn). The GPU thread takes each job's
// prepared object (take), waiting for it if need be; what a prepare throws is rethrown there, as if
// the GPU thread had called it itself. Results, their order and the job lines stay the GPU thread's.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace bz {

// A job's prepared host work, opaque to the harness (the benchmark casts it back).
using Prepared = std::shared_ptr<void>;

class Prefetcher {
 public:
  // work(job, k): jobs[k]'s host work, on the worker thread.
  using Work = std::function<Prepared(int job, size_t k)>;

  Prefetcher(std::vector<int> jobs, Work work, size_t depth = 1)
      : jobs_(std::move(jobs)), work_(std::move(work)), slots_(jobs_.size()), depth_(depth < 1 ? 1 : depth) {
    worker_ = std::thread([this] { loop(); });
  }
  // Lets the worker finish the prepare under way, joins it and drops what was never taken.
  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The GPU thread begins jobs[k]: the worker may go on up to jobs[k + depth].
  void begin(size_t k) {
    {
      std::lock_guard<std::mutex> lock(m_);
      current_ = k;
      begun_ = k + 1;
    }
    cv_.notify_all();
  }

  // The current job's prepared object, waiting for it; null when `job` is not the current job or
  // its object was taken already (the benchmark then does the work itself).
  Prepared take(int job) {
    std::unique_lock<std::mutex> lock(m_);
    if (begun_ == 0 || jobs_[current_] != job) return nullptr;
    Slot& s = slots_[current_];
    cv_.wait(lock, [&] { return s.ready; });
    if (s.taken) return nullptr;
    s.taken = true;
    if (s.error) std::rethrow_exception(std::exchange(s.error, nullptr));
    return std::move(s.value);
  }

  // The GPU thread is done with jobs[k]: its object, taken or not, is released here, on this thread.
  // The object goes once the lock is let go: its destructor may wait (PlanBuilder, for its builds).
  void finish(size_t k) {
    Prepared dropped;
    {
      std::lock_guard<std::mutex> lock(m_);
      dropped = std::move(slots_[k].value);
      slots_[k].taken = true;
      finished_ = std::max(finished_, k + 1);
    }
    cv_.notify_all();
  }

 private:
  struct Slot {
    bool ready = false, taken = false;
    Prepared value;
    std::exception_ptr error;
  };

  void loop() {
    for (size_t k = 0; k < jobs_.size(); ++k) {
      {
        std::unique_lock<std::mutex> lock(m_);
        // begun: within depth of the job begun; finished: jobs[k - depth - 1] released (its handle free)
        cv_.wait(lock, [&] { return stop_ || (k < begun_ + depth_ && k <= finished_ + depth_); });
        if (stop_) return;
      }
      Slot s;  // dropped at the end of this iteration, unlocked
      try {
        s.value = work_(jobs_[k], k);
      } catch (...) {
        s.error = std::current_exception();
      }
      s.ready = true;
      {
        std::lock_guard<std::mutex> lock(m_);
        if (!slots_[k].taken) std::swap(slots_[k], s);  // else its job finished without it: s is dropped below
        slots_[k].ready = true;
      }
      cv_.notify_all();
    }
  }

  std::vector<int> jobs_;
  Work work_;
  std::vector<Slot> slots_;
  size_t depth_;
  size_t current_ = 0, begun_ = 0, finished_ = 0;  // begun_ / finished_: jobs[0 .. n - 1] begun / finished
  bool stop_ = false;
  std::mutex m_;
  std::condition_variable cv_;
  std::thread worker_;
};

}  // namespace bz
