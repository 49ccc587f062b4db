// The cost of forward sensitivities (issue 52): the demo's ring, N = 1e4
// beads released at rest level with the centre (mu spread over [0.05, 0.5]),
// RK4 dt = 1e-3 with events to rest, on the cpu backend, one thread: in
// double on SIMD packs (the default), in double one system at a time
// (EngineOptions::simd = false), and on Dual<double, K> for K = 1, 2, 4 (one
// system at a time: packs hold numbers). Median wall time of 5 alternating
// rounds each. Built by hand (see NOTES.md), not by CMake.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "ukb/backends.hpp"
#include "ukb/dual.hpp"
#include "ukb/engine.hpp"
#include "ukb/models/bead_on_ring.hpp"

using Clock = std::chrono::steady_clock;

template <class T>
T seeded(double x) {
  if constexpr (ukb::is_dual<T>) return T::variable(x, 0);
  else return T(x);
}

template <class T>
double run(int N, bool simd) {
  using Mo = ukb::models::BeadOnRing<T>;
  ukb::Batch<Mo> b(N);
  for (int i = 0; i < N; ++i) {
    typename Mo::Params p;
    p.mu = seeded<T>(0.05 + 0.45 * i / (N - 1.0));
    b.set_params(i, p);
    const T ic[2] = {T(0.0), T(0.0)};
    T q[2], qd[2];
    Mo::initial_state(ic, p, q, qd);
    b.set_state(i, q, qd);
  }
  ukb::RunOptions r;
  r.event_tol = 1e-10;
  ukb::EngineOptions o;
  o.threads = 1;
  o.simd = simd;
  const auto t0 = Clock::now();
  while (ukb::integrate(b, ukb::Backend::cpu, r, 1000000, o).active > 0) {
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int main() {
  const int N = 10000, rounds = 5;
  std::vector<double> t[5];
  for (int k = 0; k < rounds; ++k) {
    t[0].push_back(run<double>(N, true));
    t[1].push_back(run<double>(N, false));
    t[2].push_back(run<ukb::Dual<double, 1>>(N, true));
    t[3].push_back(run<ukb::Dual<double, 2>>(N, true));
    t[4].push_back(run<ukb::Dual<double, 4>>(N, true));
  }
  const char* names[5] = {"double, packs", "double, one at a time", "Dual<double, 1>", "Dual<double, 2>",
                          "Dual<double, 4>"};
  double med[5];
  for (int i = 0; i < 5; ++i) {
    std::sort(t[i].begin(), t[i].end());
    med[i] = t[i][rounds / 2];
  }
  std::printf("| run | median s | / double packs | / double one at a time |\n|---|---|---|---|\n");
  for (int i = 0; i < 5; ++i) std::printf("| %s | %.3f | %.2f | %.2f |\n", names[i], med[i], med[i] / med[0], med[i] / med[1]);
}
