// Throughput of the CPU backend: RK4 system-steps per second for each
// built-in model, double and float, and the cost of one pseudo-inverse
// factorisation per model size.
//   build/bin/ukb_bench_engine --benchmark_format=json
#include <benchmark/benchmark.h>

#include <cmath>

#include "ukb/engine.hpp"

namespace {

// A generic consistent-looking state: every coordinate and rate nonzero.
template <class Mo>
void fill(ukb::Batch<Mo>& b) {
  using T = typename Mo::Scalar;
  for (int i = 0; i < b.size(); ++i) {
    T q[Mo::n], qd[Mo::n];
    for (int j = 0; j < Mo::n; ++j) {
      q[j] = T(0.3 + 0.1 * j + 1e-4 * i);
      qd[j] = T(0.2 - 0.05 * j);
    }
    b.set_state(i, q, qd);
  }
}

template <class Mo>
void bm_cpu_step(benchmark::State& state) {
  const int N = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const long steps = 10;
  ukb::Batch<Mo> b(N);
  fill(b);
  ukb::step(b, ukb::Backend::cpu, typename Mo::Scalar(1e-4), 1, {.threads = threads});  // warm-up
  for (auto _ : state) {
    fill(b);
    ukb::step(b, ukb::Backend::cpu, typename Mo::Scalar(1e-4), steps, {.threads = threads});
    benchmark::DoNotOptimize(b.view().q);
  }
  state.SetItemsProcessed(state.iterations() * N * steps);
}

template <class Mo>
void bm_pinv(benchmark::State& state) {
  using T = typename Mo::Scalar;
  T B[Mo::m * Mo::n];
  for (int k = 0; k < Mo::m * Mo::n; ++k) B[k] = T(std::sin(1.0 + 0.7 * k));
  for (auto _ : state) {
    ukb::kernels::JacobiPinv<Mo::m, Mo::n, T> p;
    benchmark::DoNotOptimize(B);
    p.factor(B, ukb::kernels::default_rank_rtol<T>());
    benchmark::DoNotOptimize(p.rank);
  }
  state.SetItemsProcessed(state.iterations());
}

using namespace ukb::models;
#define UKB_BENCH_MODEL(Mo)                                                                    \
  BENCHMARK_TEMPLATE(bm_cpu_step, Mo)->Args({1000, 1})->Args({100000, 1})->Args({100000, 2}) \
      ->Unit(benchmark::kMillisecond);                                                         \
  BENCHMARK_TEMPLATE(bm_pinv, Mo);
UKB_BENCH_MODEL(BeadOnRing<double>)
UKB_BENCH_MODEL(BeadOnRing<float>)
UKB_BENCH_MODEL(PlanarChain6<double>)
UKB_BENCH_MODEL(PlanarChain6<float>)
UKB_BENCH_MODEL(PlanarChain12<double>)
UKB_BENCH_MODEL(RedundantPendulum<double>)
UKB_BENCH_MODEL(TwoLinkArm<double>)

}  // namespace

BENCHMARK_MAIN();
