/// @file parallel.hpp
/// @brief The CPU backend's launcher: OpenMP over systems in chunks.
#pragma once

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ukb::cpu {

/// Calls body(i) for i in [0, N) on `threads` OpenMP threads (0: the OpenMP
/// default, i.e. OMP_NUM_THREADS or the number of cores), handing out
/// chunks of `chunk` consecutive systems. Systems are independent, so the
/// result does not depend on threads or chunk.
template <class Body>
void parallel_for(int N, int threads, int chunk, const Body& body) {
  if (chunk < 1) chunk = 1;
#ifdef _OPENMP
  const int nt = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, chunk) num_threads(nt) if (nt > 1)
  for (int i = 0; i < N; ++i) body(i);
#else
  (void)threads;
  for (int i = 0; i < N; ++i) body(i);
#endif
}

}  // namespace ukb::cpu
