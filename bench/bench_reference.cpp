// Cost of one reference evaluation and one reference RK4 step per built-in
// model: the baseline every faster backend is compared with.
//   build/bin/ukb_bench_reference --benchmark_format=json
#include <benchmark/benchmark.h>

#include <string>

#include <Eigen/Dense>

#include "ukb/models/all.hpp"
#include "ukb/reference.hpp"

namespace {

// A state that is not special: every coordinate and rate nonzero.
void make_state(int n, Eigen::VectorXd& q, Eigen::VectorXd& qd) {
  q.resize(n);
  qd.resize(n);
  for (int i = 0; i < n; ++i) {
    q(i) = 0.3 + 0.1 * i;
    qd(i) = 0.2 - 0.05 * i;
  }
}

template <class Mo>
void bm_accel(benchmark::State& state) {
  const ukb::reference::AccelFn f = ukb::reference::accel_fn<Mo>(typename Mo::Params{});
  Eigen::VectorXd q, qd;
  make_state(Mo::n, q, qd);
  for (auto _ : state) benchmark::DoNotOptimize(f(q, qd, 0.0));
  state.SetItemsProcessed(state.iterations());
}

template <class Mo>
void bm_rk4(benchmark::State& state) {
  const ukb::reference::AccelFn f = ukb::reference::accel_fn<Mo>(typename Mo::Params{});
  ukb::reference::State s;
  make_state(Mo::n, s.q, s.qd);
  const ukb::reference::State start = s;
  for (auto _ : state) {
    if (ukb::reference::rk4_step(f, s, 1e-3) != ukb::Status::ok) s = start;
    benchmark::DoNotOptimize(s.q.data());
  }
  state.SetItemsProcessed(state.iterations());  // system-steps
}

int register_all() {
  ukb::models::Builtin::for_each<double>([]<class Mo>() {
    benchmark::RegisterBenchmark((std::string("reference_accel/") + Mo::name).c_str(), bm_accel<Mo>);
    benchmark::RegisterBenchmark((std::string("reference_rk4_step/") + Mo::name).c_str(), bm_rk4<Mo>);
  });
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
