// The host work of `ukb run` on the run's threads (internal to the ukb_run
// library): initial states, rows, statistics, results.csv.
#pragma once

#include <exception>

#include "ukb/cpu/parallel.hpp"

namespace ukb::run {

/// The threads of a run's host work: `threads`, or all cores for 0 (the
/// cpu backend's rule).
using cpu::thread_count;

/// Calls body(i, scratch) for every i in [0, n) on thread_count(threads)
/// OpenMP threads, each thread with a Scratch of its own (default-
/// constructed, which must not throw; reused for all its i). Each thread
/// takes a consecutive range of i; with `Uneven`, the next i whenever it is
/// free instead (a few tasks of unequal cost, such as the summary's
/// columns: some constant and cheap, some not). An exception from body is
/// rethrown here once every thread is done: the one of the smallest i, as
/// a single thread going in order would have thrown it.
template <class Scratch, bool Uneven = false, class Body>
void for_each_index(long n, int threads, const Body& body) {
  long first_bad = n;
  std::exception_ptr why;
#pragma omp parallel num_threads(thread_count(threads))
  {
    Scratch scratch;
    auto one = [&](long i) {
      try {
        body(i, scratch);
      } catch (...) {
#pragma omp critical(ukb_run_for_each_index)
        if (i < first_bad) first_bad = i, why = std::current_exception();
      }
    };
    if constexpr (Uneven) {
#pragma omp for schedule(dynamic, 1)
      for (long i = 0; i < n; ++i) one(i);
    } else {
#pragma omp for schedule(static)
      for (long i = 0; i < n; ++i) one(i);
    }
  }
  if (why) std::rethrow_exception(why);
}

}  // namespace ukb::run
