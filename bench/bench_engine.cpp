// The cost of each stabilisation option on the CPU backend (the workload
// throughput and the kernels' micro-benchmarks are in bench_workloads.cpp).
//   build/bin/ukb_bench_engine --benchmark_format=json
#include <benchmark/benchmark.h>

#include <cmath>

#include "ukb/engine.hpp"

namespace {

// The cost of stabilisation: RK4 system-steps per second of ukb::integrate on
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
  ukb::integrate(b, ukb::Backend::cpu, r, 1, {.threads = 1});  // warm-up
  for (auto _ : state) {
    state.PauseTiming();
    reset();
    state.ResumeTiming();
    ukb::integrate(b, ukb::Backend::cpu, r, steps, {.threads = 1});
    benchmark::DoNotOptimize(b.view().q);
  }
  state.SetLabel(std::string(ukb::to_string(st)));
  state.SetItemsProcessed(state.iterations() * N * steps);
}

using namespace ukb::models;
#define UKB_BENCH_STABILIZED(Mo) \
  BENCHMARK_TEMPLATE(bm_cpu_stabilized, Mo)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
UKB_BENCH_STABILIZED(BeadOnRing<double>)
UKB_BENCH_STABILIZED(RedundantPendulum<double>)
UKB_BENCH_STABILIZED(TwoLinkArm<double>)
UKB_BENCH_STABILIZED(PlanarChain6<double>)
UKB_BENCH_STABILIZED(PlanarChain12<double>)

}  // namespace

BENCHMARK_MAIN();
