// benanza harness, bz::BuildPool: the one process-wide pool of --plan-threads host threads that
// builds the graph API's execution plans of every live job (one bz::BuildQueue per job), the
// earliest job first.
//
// A free thread takes the next unstarted build of the earliest queue that may start one (its
// window: at most `window` builds built or building and not yet taken), falling through to later
// queues otherwise: the job the GPU thread measures always comes first, and threads it leaves idle
// build the coming jobs' plans (runtime-compiled engines: seconds of NVRTC each) meanwhile.
// Queues are opened in job order (one Prefetcher worker opens them, job after job).
//
// One mutex (the pool's) guards the list of queues and every queue's state, and nothing else is
// locked while it is held, so no lock order can deadlock. A build runs unlocked; a queue's
// destructor cancels its unstarted builds and waits for those under way before it returns, so
// what a build reads and writes (its owner's members, declared before the queue) outlives it.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace bz {

class BuildQueue;

class BuildPool {
 public:
  // The process's pool: created by the first call with `threads` threads, each running
  // `thread_init` first (later calls' arguments are ignored); never destroyed, its threads wait on
  // it until the process exits (every queue has gone by then: no build is under way).
  static BuildPool& instance(int threads, const std::function<void()>& thread_init) {
    static BuildPool* pool = new BuildPool(threads, thread_init);
    return *pool;
  }
  int threads() const { return threads_; }

  BuildPool(const BuildPool&) = delete;
  BuildPool& operator=(const BuildPool&) = delete;

 private:
  friend class BuildQueue;

  BuildPool(int threads, std::function<void()> thread_init) : threads_(std::max(threads, 1)), init_(std::move(thread_init)) {
    for (int t = 0; t < threads_; ++t) std::thread([this] { loop(); }).detach();
  }

  inline void loop();
  inline BuildQueue* pick();

  std::mutex m_;                  // guards queues_ and every queue's state
  std::condition_variable work_;  // pool threads: a build may have become startable
  std::condition_variable done_;  // a build finished (BuildQueue::next, ~BuildQueue)
  std::vector<BuildQueue*> queues_;  // live queues, in job order
  int threads_;
  std::function<void()> init_;
};

// One job's builds 0..count-1, started in index order by the pool's threads.
class BuildQueue {
 public:
  // build(i): build i, on a pool thread; it must not throw (a throw is dropped, the build counted
  // done). It may write its own slot of its owner's results, which next()'s caller then reads.
  using Build = std::function<void(size_t)>;

  BuildQueue(BuildPool& pool, size_t count, size_t window, Build build)
      : pool_(pool), build_(std::move(build)), done_(count, 0), taken_(count, 0), window_(std::max<size_t>(window, 1)) {
    {
      std::lock_guard<std::mutex> lock(pool_.m_);
      pool_.queues_.push_back(this);
    }
    pool_.work_.notify_all();
  }
  // Cancels the builds not started, waits for those under way, and leaves the pool.
  ~BuildQueue() {
    std::unique_lock<std::mutex> lock(pool_.m_);
    next_ = done_.size();  // nothing more starts
    pool_.done_.wait(lock, [&] { return building_ == 0; });
    pool_.queues_.erase(std::find(pool_.queues_.begin(), pool_.queues_.end(), this));
  }
  BuildQueue(const BuildQueue&) = delete;
  BuildQueue& operator=(const BuildQueue&) = delete;

  // The lowest-indexed build done and not taken yet, waiting while there is none; taking it moves
  // the window on. At most `count` calls.
  size_t next() {
    std::unique_lock<std::mutex> lock(pool_.m_);
    if (taken_count_ == done_.size()) throw std::logic_error("BuildQueue::next: every build taken");
    size_t i = 0;
    pool_.done_.wait(lock, [&] {
      for (i = 0; i < done_.size(); ++i)
        if (done_[i] && !taken_[i]) return true;
      return false;
    });
    taken_[i] = 1;
    ++taken_count_;
    lock.unlock();
    pool_.work_.notify_all();  // the window of builds moves on
    return i;
  }

 private:
  friend class BuildPool;
  bool startable() const { return next_ < done_.size() && next_ < taken_count_ + window_; }

  BuildPool& pool_;
  Build build_;
  std::vector<char> done_, taken_;  // per build: finished; handed out by next()
  size_t window_, next_ = 0, taken_count_ = 0, building_ = 0;  // next_: the first build not started
};

// The earliest queue with a startable build (under m_), or null.
inline BuildQueue* BuildPool::pick() {
  for (BuildQueue* q : queues_)
    if (q->startable()) return q;
  return nullptr;
}

inline void BuildPool::loop() {
  if (init_) init_();
  std::unique_lock<std::mutex> lock(m_);
  for (;;) {
    BuildQueue* q = nullptr;
    work_.wait(lock, [&] { return (q = pick()) != nullptr; });
    const size_t i = q->next_++;
    ++q->building_;  // q's destructor waits for this to drop back: q outlives the build
    lock.unlock();
    try {
      q->build_(i);
    } catch (...) {  // a build must not throw; the pool's threads outlive it if it does
    }
    lock.lock();
    q->done_[i] = 1;
    --q->building_;
    done_.notify_all();  // under m_: q's destructor cannot return before this thread lets go of m_
  }
}

}  // namespace bz
