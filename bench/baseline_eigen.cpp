// The C++ baseline: what a careful C++ user would write by hand instead of
// ukb. A loop over systems (OpenMP across them), each system's state in
// Eigen fixed-size vectors, the Udwadia–Kalaba equation with Eigen's LLT
// and CompleteOrthogonalDecomposition (relative threshold = the rank
// tolerance 1e-10), classical RK4. The models' terms are ukb's (a user of
// either writes the model once).
//
//   build/bin/ukb_bench_baseline_eigen --check        # against the reference backend
//   build/bin/ukb_bench_baseline_eigen --export DIR   # states for bench/baseline_numpy.py
//   build/bin/ukb_bench_baseline_eigen --benchmark_format=json
//
// Benchmark names follow ukb_bench_workloads with the backend "eigen_loop".
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ukb/engine.hpp"
#include "workloads.hpp"

namespace {

template <class Mo>
struct EigenUK {
  static constexpr int n = Mo::n, m = Mo::m;
  using Vn = Eigen::Matrix<double, n, 1>;
  using Vm = Eigen::Matrix<double, m, 1>;
  using Mnn = Eigen::Matrix<double, n, n>;
  using Amn = Eigen::Matrix<double, m, n>;
  using RowA = Eigen::Matrix<double, m, n, Eigen::RowMajor>;  // the models write A row by row

  static Vn accel(const Vn& q, const Vn& qd, double t, const typename Mo::Params& p) {
    Mnn M;
    Mo::mass(q.data(), t, p, M.data());  // symmetric: storage order does not matter
    Vn Q;
    Mo::force(q.data(), qd.data(), t, p, Q.data());
    RowA Ar;
    Vm b;
    Mo::constraints(q.data(), qd.data(), t, p, Ar.data(), b.data());
    const Amn A = Ar;
    const Eigen::LLT<Mnn> llt(M);
    const Vn a = llt.solve(Q);
    const Vm r = b - A * a;
    const Amn B = llt.matrixL().solve(A.transpose()).transpose();  // A L^{-T}
    Eigen::CompleteOrthogonalDecomposition<Amn> cod;
    cod.setThreshold(1e-10);
    cod.compute(B);
    const Eigen::Matrix<double, n, m> Bp = cod.pseudoInverse();
    const Vn z = Bp * r;
    const Vn Qc = llt.matrixL() * z;
    const Vm lambda = Bp.transpose() * z;  // (B B^T)^+ r
    Vn C;
    Mo::nonideal(q.data(), qd.data(), t, p, Qc.data(), lambda.data(), C.data());
    const Vn c = llt.matrixL().solve(C);
    return a + llt.matrixU().solve(c + Bp * (r - B * c));
  }

  struct Ensemble {
    std::vector<Vn> q, qd;
    std::vector<double> t;
    std::vector<typename Mo::Params> p;
  };

  static Ensemble make(int N) {
    Ensemble e;
    e.q.resize(N);
    e.qd.resize(N);
    e.t.assign(N, 0.0);
    e.p.resize(N);
    for (int i = 0; i < N; ++i) ukb::bench::workload_system<Mo>(1, i, e.p[i], e.q[i].data(), e.qd[i].data());
    return e;
  }

  static void rk4(Ensemble& e, double h, long steps, int threads) {
    const int N = int(e.q.size());
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int i = 0; i < N; ++i) {
      Vn q = e.q[i], v = e.qd[i];
      double t = e.t[i];
      for (long s = 0; s < steps; ++s) {
        const Vn k1 = accel(q, v, t, e.p[i]);
        const Vn q2 = q + 0.5 * h * v, v2 = v + 0.5 * h * k1;
        const Vn k2 = accel(q2, v2, t + 0.5 * h, e.p[i]);
        const Vn q3 = q + 0.5 * h * v2, v3 = v + 0.5 * h * k2;
        const Vn k3 = accel(q3, v3, t + 0.5 * h, e.p[i]);
        const Vn q4 = q + h * v3, v4 = v + h * k3;
        const Vn k4 = accel(q4, v4, t + h, e.p[i]);
        q += h / 6 * (v + 2 * v2 + 2 * v3 + v4);
        v += h / 6 * (k1 + 2 * k2 + 2 * k3 + k4);
        t += h;
      }
      e.q[i] = q;
      e.qd[i] = v;
      e.t[i] = t;
    }
  }
};

constexpr int check_N = 200;
constexpr long check_steps = 100;

// The reference backend's ensemble after check_steps steps.
template <class Mo>
ukb::Batch<Mo> reference_run() {
  ukb::Batch<Mo> b(check_N);
  ukb::bench::fill_workload(b);
  if (ukb::step(b, ukb::Backend::reference, ukb::bench::workload_dt, check_steps).failed != 0)
    throw std::runtime_error(std::string(Mo::name) + ": the reference run failed");
  return b;
}

// Largest relative difference of (q, q') per system, against the reference.
template <class Mo>
bool check() {
  using E = EigenUK<Mo>;
  const ukb::Batch<Mo> ref = reference_run<Mo>();
  auto e = E::make(check_N);
  E::rk4(e, ukb::bench::workload_dt, check_steps, 1);
  double worst = 0;
  for (int i = 0; i < check_N; ++i) {
    double d = 0, s = 0;
    for (int j = 0; j < Mo::n; ++j) {
      d += std::pow(e.q[i](j) - ref.q(i, j), 2) + std::pow(e.qd[i](j) - ref.qd(i, j), 2);
      s += std::pow(ref.q(i, j), 2) + std::pow(ref.qd(i, j), 2);
    }
    worst = std::max(worst, std::sqrt(d / s));
  }
  const bool ok = worst < 1e-9;
  std::printf("%s %-20s eigen_loop vs reference after %ld steps, %d systems: max rel. diff %.2e (%s)\n",
              ukb::bench::Workload<Mo>::id, Mo::name, check_steps, check_N, worst, ok ? "ok" : "TOO LARGE");
  return ok;
}

// Writes DIR/<W>.txt: a header "n m np", then per system its parameters,
// q, q' at the start and q, q' of the reference after check_steps steps.
template <class Mo>
void export_workload(const std::filesystem::path& dir) {
  const ukb::Batch<Mo> ref = reference_run<Mo>();
  ukb::Batch<Mo> start(check_N);
  ukb::bench::fill_workload(start);
  const std::filesystem::path f = dir / (std::string(ukb::bench::Workload<Mo>::id) + ".txt");
  std::ofstream out(f);
  out.precision(17);
  out << Mo::n << ' ' << Mo::m << ' ' << ukb::param_count<Mo>() << ' ' << check_steps << ' '
      << ukb::bench::workload_dt << '\n';
  for (int i = 0; i < check_N; ++i) {
    const typename Mo::Params p = start.params(i);
    Mo::visit_params(p, [&](const char*, const double& v, const char*) { out << v << ' '; });
    for (int j = 0; j < Mo::n; ++j) out << start.q(i, j) << ' ';
    for (int j = 0; j < Mo::n; ++j) out << start.qd(i, j) << ' ';
    for (int j = 0; j < Mo::n; ++j) out << ref.q(i, j) << ' ';
    for (int j = 0; j < Mo::n; ++j) out << ref.qd(i, j) << (j + 1 < Mo::n ? ' ' : '\n');
  }
  if (!out) throw std::runtime_error("cannot write " + f.string());
  std::printf("wrote %s\n", f.c_str());
}

template <class Mo>
void bm_eigen_loop(benchmark::State& state, int N, int threads) {
  using E = EigenUK<Mo>;
  auto e = E::make(N);
  const long steps = std::clamp(long(2e5 / (double(Mo::n) * Mo::n / 4.0 * N)), 1L, 10000L);
  E::rk4(e, ukb::bench::workload_dt, 1, threads);  // warm-up
  for (auto _ : state) {
    E::rk4(e, ukb::bench::workload_dt, steps, threads);
    benchmark::DoNotOptimize(e.q.data());
  }
  state.SetItemsProcessed(state.iterations() * N * steps);
  state.counters["N"] = N;
  state.counters["threads"] = threads;
  state.counters["steps_per_call"] = double(steps);
}

template <class Mo>
void register_eigen(int max_N) {
  for (int N : {100, 1000, 10000, 100000, 1000000}) {
    if (N > max_N) continue;
    for (int threads : {1, 2}) {
      const std::string name = std::string(ukb::bench::Workload<Mo>::id) + "/" + Mo::name +
                               "/double/eigen_loop/threads:" + std::to_string(threads) +
                               "/N:" + std::to_string(N);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { bm_eigen_loop<Mo>(s, N, threads); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ukb::models;
  if (argc > 1 && std::strcmp(argv[1], "--check") == 0) {
    const bool ok = check<BeadOnRing<double>>() & check<PlanarChain6<double>>() &
                    check<PlanarChain12<double>>() & check<RedundantPendulum<double>>();
    return ok ? 0 : 1;
  }
  if (argc > 2 && std::strcmp(argv[1], "--export") == 0) {
    const std::filesystem::path dir = argv[2];
    std::filesystem::create_directories(dir);
    export_workload<BeadOnRing<double>>(dir);
    export_workload<PlanarChain6<double>>(dir);
    export_workload<PlanarChain12<double>>(dir);
    export_workload<RedundantPendulum<double>>(dir);
    return 0;
  }
  register_eigen<BeadOnRing<double>>(1000000);
  register_eigen<PlanarChain6<double>>(100000);
  register_eigen<PlanarChain12<double>>(10000);
  register_eigen<RedundantPendulum<double>>(1000000);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
