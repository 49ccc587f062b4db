// Cost of one reference evaluation and one reference RK4 step per built-in
// model: the baseline every faster backend is compared with.
//   build/bin/ukb_bench_reference --benchmark_format=json
#include <benchmark/benchmark.h>

#include "ukb/registry.hpp"

namespace {

// A state that is not special: every coordinate and rate nonzero.
void make_state(const ukb::ModelInfo& m, Eigen::VectorXd& q, Eigen::VectorXd& qd) {
  q.resize(m.n);
  qd.resize(m.n);
  for (int i = 0; i < m.n; ++i) {
    q(i) = 0.3 + 0.1 * i;
    qd(i) = 0.2 - 0.05 * i;
  }
}

void bm_accel(benchmark::State& state, const ukb::ModelInfo* m) {
  const auto f = m->reference_accel(m->defaults(), {});
  Eigen::VectorXd q, qd;
  make_state(*m, q, qd);
  for (auto _ : state) benchmark::DoNotOptimize(f(q, qd, 0.0));
  state.SetItemsProcessed(state.iterations());
}

void bm_rk4(benchmark::State& state, const ukb::ModelInfo* m) {
  const auto f = m->reference_accel(m->defaults(), {});
  ukb::reference::State s;
  make_state(*m, s.q, s.qd);
  const ukb::reference::State start = s;
  for (auto _ : state) {
    if (ukb::reference::rk4_step(f, s, 1e-3) != ukb::Status::ok) s = start;
    benchmark::DoNotOptimize(s.q.data());
  }
  state.SetItemsProcessed(state.iterations());  // system-steps
}

int register_all() {
  for (const ukb::ModelInfo& m : ukb::all_models()) {
    benchmark::RegisterBenchmark(("reference_accel/" + m.name).c_str(), bm_accel, &m);
    benchmark::RegisterBenchmark(("reference_rk4_step/" + m.name).c_str(), bm_rk4, &m);
  }
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
