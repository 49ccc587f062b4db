/// @file parallel.hpp
/// @brief The CPU backend's launchers: OpenMP over systems in chunks, and
///        threads that share the systems of a batch.
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ukb::cpu {

/// The OpenMP threads that `threads` asks for: itself if positive, else
/// the OpenMP default (OMP_NUM_THREADS or the number of cores); 1 without
/// OpenMP.
inline int thread_count(int threads) {
#ifdef _OPENMP
  return std::max(1, threads > 0 ? threads : omp_get_max_threads());
#else
  (void)threads;
  return 1;
#endif
}

/// Calls body(i) for i in [0, N) on `threads` OpenMP threads (0: the OpenMP
/// default, i.e. OMP_NUM_THREADS or the number of cores), handing out
/// chunks of `chunk` consecutive systems. Systems are independent, so the
/// result does not depend on threads or chunk. An exception from body (a
/// model function that throws) never leaves the OpenMP region: the systems
/// after the first failing one are skipped, and the exception of the
/// smallest failing i is rethrown once every thread is done, as a single
/// thread going in order would have thrown it.
template <class Body>
void parallel_for(int N, int threads, int chunk, const Body& body) {
  if (chunk < 1) chunk = 1;
#ifdef _OPENMP
  const int nt = thread_count(threads);
  std::atomic<int> first_bad{N};
  std::exception_ptr why;
#pragma omp parallel for schedule(dynamic, chunk) num_threads(nt) if (nt > 1)
  for (int i = 0; i < N; ++i) {
    if (i > first_bad.load(std::memory_order_relaxed)) continue;
    try {
      body(i);
    } catch (...) {
#pragma omp critical(ukb_cpu_parallel_for)
      if (i < first_bad.load(std::memory_order_relaxed)) {
        first_bad.store(i, std::memory_order_relaxed);
        why = std::current_exception();
      }
    }
  }
  if (why) std::rethrow_exception(why);
#else
  (void)threads;
  for (int i = 0; i < N; ++i) body(i);
#endif
}

/// Calls body() once on each of `threads` OpenMP threads (0: the OpenMP
/// default), at once. An exception from body is rethrown once every thread
/// is done (one of them, where several threw).
template <class Body>
void parallel_workers(int threads, const Body& body) {
#ifdef _OPENMP
  const int nt = thread_count(threads);
  std::exception_ptr why;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    try {
      body();
    } catch (...) {
#pragma omp critical(ukb_cpu_parallel_workers)
      if (!why) why = std::current_exception();
    }
  }
  if (why) std::rethrow_exception(why);
#else
  (void)threads;
  body();
#endif
}

/// The systems [0, N) shared by the threads of one call, handed out in
/// blocks of `chunk` consecutive systems (one atomic operation per block).
class SharedSystems {
 public:
  SharedSystems(int N, int chunk) : N_(N), chunk_(chunk < 1 ? 1 : chunk) {}

  /// One thread's source of systems (kernels::SystemRange's interface):
  /// its current block, then the next block nobody has taken.
  class Source {
   public:
    explicit Source(SharedSystems& s) : s_(s) {}
    int next() {
      if (cur_ >= end_ && !take()) return -1;
      return cur_++;
    }
    bool done() const { return cur_ >= end_ && s_.next_.load(std::memory_order_relaxed) >= s_.N_; }

   private:
    bool take() {
      const long first = s_.next_.fetch_add(s_.chunk_, std::memory_order_relaxed);
      if (first >= s_.N_) return false;
      cur_ = int(first);
      end_ = int(std::min<long>(first + s_.chunk_, s_.N_));
      return true;
    }
    SharedSystems& s_;
    int cur_ = 0, end_ = 0;
  };

 private:
  int N_;
  long chunk_;
  std::atomic<long> next_{0};  // the first system no thread has taken
};

}  // namespace ukb::cpu
