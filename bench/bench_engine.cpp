// Throughput of the CPU backend: RK4 system-steps per second for each
// built-in model, double and float, and the cost of one pseudo-inverse
// factorisation per model size, and the cost of each stabilisation option.
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

// The cost of stabilisation: RK4 system-steps per second of ukb::advance on
// the CPU backend (one thread, N = 1000, events and monitors off) with
// Stabilization none (0), baumgarte (1) or projection (2). The systems start
// on their manifold (the model's natural initial state) so that projection
// does what it does in a long run: one correction per level per step.
template <class Mo>
void bm_cpu_stabilized(benchmark::State& state) {
  using T = typename Mo::Scalar;
  const int N = 1000;
  const long steps = 10;
  const auto st = static_cast<ukb::Stabilization>(state.range(0));
  ukb::Batch<Mo> b(N);
  auto reset = [&] {
    for (int i = 0; i < N; ++i) {
      T ic[Mo::initial_names.size()], q[Mo::n] = {}, qd[Mo::n] = {};
      for (std::size_t k = 0; k < Mo::initial_names.size(); ++k) ic[k] = T(0.3 + 0.01 * k + 1e-4 * i);
      if (!Mo::initial_state(ic, b.params(i), q, qd)) return false;
      b.set_state(i, q, qd);
    }
    return true;
  };
  const ukb::RunOptions r{.dt = 1e-3, .events = false, .monitor = false, .stabilization = st};
  if (!reset()) {
    state.SkipWithError("no consistent initial state");
    return;
  }
  ukb::advance(b, ukb::Backend::cpu, r, 1, {.threads = 1});  // warm-up
  for (auto _ : state) {
    state.PauseTiming();
    reset();
    state.ResumeTiming();
    ukb::advance(b, ukb::Backend::cpu, r, steps, {.threads = 1});
    benchmark::DoNotOptimize(b.view().q);
  }
  state.SetLabel(std::string(ukb::to_string(st)));
  state.SetItemsProcessed(state.iterations() * N * steps);
}

template <class Mo>
void bm_pinv(benchmark::State& state) {
  using T = typename Mo::Scalar;
  T B[Mo::m * Mo::n];
  for (int k = 0; k < Mo::m * Mo::n; ++k) B[k] = T(std::sin(1.0 + 0.7 * k));
  for (auto _ : state) {
    ukb::kernels::PseudoInverse<Mo::m, Mo::n, T> p;
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

#define UKB_BENCH_STABILIZED(Mo) \
  BENCHMARK_TEMPLATE(bm_cpu_stabilized, Mo)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
UKB_BENCH_STABILIZED(BeadOnRing<double>)
UKB_BENCH_STABILIZED(RedundantPendulum<double>)
UKB_BENCH_STABILIZED(TwoLinkArm<double>)
UKB_BENCH_STABILIZED(PlanarChain6<double>)
UKB_BENCH_STABILIZED(PlanarChain12<double>)

}  // namespace

BENCHMARK_MAIN();
