// Throughput of the workloads W1-W4 (workloads.hpp) on every backend, in
// double and float, over a sweep of batch sizes N, and micro-benchmarks of
// the shared kernels (Cholesky, pseudo-inverse factor and apply, one
// Udwadia–Kalaba evaluation) per model size. items_per_second is RK4
// system-steps per second (workloads) or calls per second (micro).
//
//   build/bin/ukb_bench_workloads --benchmark_format=json
//   build/bin/ukb_bench_workloads --benchmark_filter='^W2/.*/cpu'
//
// Names: W<k>/<model>/<scalar>/<backend>/threads:<t>/N:<N>. The reference
// backend is a loop over systems, so its rate does not depend on N: it runs
// up to N = 10^4. CUDA timings include the copies to and from the device
// (ukb::step uploads, integrates and downloads), with enough steps per call
// (at least 100) that they are a small part; they are skipped with the
// reason where there is no GPU. Built with UKB_BENCH_GPU_STUDY=ON (as
// bench/gpu.sh does), also W5 and W6 (planar_chain_24 and _48) on cpu and
// cuda. UKB_BENCH_CUDA_BLOCK=K runs the cuda rows with blocks of K threads
// instead of each kernel's own choice (an A/B of the launch policy).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <string>

#include "ukb/cuda.hpp"
#include "ukb/engine.hpp"
#include "ukb/kernels/linalg.hpp"
#include "ukb/kernels/uk.hpp"
#include "workloads.hpp"

#if UKB_BENCH_LONG_CHAINS
// W5 and W6: the chains of the model file (their cpu backend compiled here;
// their cuda backend in the .cu files bench/CMakeLists.txt generates).
#include "long_chains.hpp"
#include "ukb/backends.hpp"
#if UKB_BENCH_LONG_CHAINS_CUDA
UKB_CUDA_MODEL(PlanarChain24<double>)
UKB_CUDA_MODEL(PlanarChain24<float>)
UKB_CUDA_MODEL(PlanarChain48<double>)
UKB_CUDA_MODEL(PlanarChain48<float>)
#endif
#endif

namespace {

using namespace ukb;

// RK4 steps per benchmark iteration: enough work per iteration to time it,
// and not so much that one iteration takes many seconds. On the CPU about
// 2e5 system-steps of the ring, scaled by n^2 / 4 (ring 1, chain_6 36,
// chain_12 144). On the GPU about 2e9 of the ring, scaled by n^3 / 8 (ring
// 1, chain_6 216, chain_12 1728, chain_24 13 824, chain_48 110 592): one
// thread per system runs the chains at rates that fall faster than their
// flops grow (an H100, 2026-11-26: 39.1 M, 3.09 M and 0.30 M system-steps/s
// for 6, 12 and 24 links at N = 10^5), and with n^2 / 4 one iteration of
// the 24-link chain at N = 10^4 took 30 s. At least 100 steps per call on the
// GPU to amortise the copies, 2 for the chains beyond 12 links, whose step
// costs 6.4 and 45 times the 12-link chain's flops (ukb_flops) while their
// copies per system grow only with n.
template <class Mo>
long steps_per_iteration(Backend be, long N) {
  const double n = Mo::n;
  const double cost = be == Backend::cuda ? n * n * n / 8.0 : n * n / 4.0;
  const double work = be == Backend::cuda ? 2e9 : 2e5;
  const long s = long(work / (cost * double(N)));
  const long floor = be != Backend::cuda ? 1L : Mo::n <= 24 ? 100L : 2L;
  return std::clamp(s, floor, 10000L);
}

template <class Mo>
void bm_workload(benchmark::State& state, Backend be, int N, int threads) {
  using T = typename Mo::Scalar;
  if (be == Backend::cuda) {
    std::string why;
    if (cuda::device_count(&why) == 0) {
      state.SkipWithError(("no GPU: " + why).c_str());
      return;
    }
  }
  Batch<Mo> b(N);
  bench::fill_workload(b);
  // UKB_BENCH_CUDA_BLOCK: threads per CUDA block (EngineOptions::cuda_block;
  // unset: 0, the block of each kernel's highest occupancy), for A/B runs.
  // UKB_BENCH_CUDA_TEAMS=0: one thread per system for every model
  // (EngineOptions::cuda_teams off), for the thread route's rows.
  const char* block = std::getenv("UKB_BENCH_CUDA_BLOCK");
  const char* teams = std::getenv("UKB_BENCH_CUDA_TEAMS");
  const EngineOptions o{.threads = threads,
                        .cuda_block = block ? std::atoi(block) : 0,
                        .cuda_teams = !(teams && std::string(teams) == "0")};
  const long steps = steps_per_iteration<Mo>(be, N);
  const T dt = T(bench::workload_dt);
  // `k` steps into `failed`; a backend's error (a launch the device
  // refuses: the longest chains' local memory) skips the row with its
  // message instead of ending the run.
  auto call = [&](long k, long& failed) {
    try {
      failed = step(b, be, dt, k, o).failed;
      return true;
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return false;
    }
  };
  long warm = 0;
  if (!call(1, warm)) return;  // warm-up (and the first touch of the memory)
  if (warm != 0) {
    state.SkipWithError("a system failed in the warm-up step");
    return;
  }
  for (auto _ : state) {
    long failed = 0;
    if (!call(steps, failed)) break;
    benchmark::DoNotOptimize(failed);
  }
  if (state.error_occurred()) return;
  long failed = 0;
  for (int i = 0; i < N; ++i) failed += b.status(i) != Status::ok;
  if (failed) state.SkipWithError((std::to_string(failed) + " systems failed").c_str());
  state.SetItemsProcessed(state.iterations() * N * steps);
  state.counters["N"] = N;
  state.counters["threads"] = threads;
  state.counters["steps_per_call"] = double(steps);
}

// --- micro-benchmarks of the shared kernels, one system, one thread ---

template <class Mo>
struct MicroInput {
  using T = typename Mo::Scalar;
  typename Mo::Params p;
  T q[Mo::n], qd[Mo::n];
  MicroInput() { bench::workload_system<Mo>(1, 0, p, q, qd); }
};

// The factor of M as uk_accel takes it (MassFactorOf: the diagonal alone
// where the model gives it).
template <class Mo>
void bm_cholesky(benchmark::State& state) {
  using T = typename Mo::Scalar;
  MicroInput<Mo> in;
  kernels::MassFactorOf<Mo> M0, M;
  kernels::mass_of<Mo>(in.q, T(0), in.p, M0.L);
  for (auto _ : state) {
    M = M0;
    benchmark::DoNotOptimize(M.L);
    benchmark::DoNotOptimize(M.factor(kernels::mass_pivot_rtol<Mo::n, T>()));
  }
  state.SetItemsProcessed(state.iterations());
}

// B = A L^{-T} at the workload's first state, as uk_accel forms it.
template <class Mo>
void constraint_matrix(const MicroInput<Mo>& in, typename Mo::Scalar* B) {
  using T = typename Mo::Scalar;
  kernels::MassFactorOf<Mo> L;
  T b[Mo::m];
  kernels::mass_of<Mo>(in.q, T(0), in.p, L.L);
  L.factor(kernels::mass_pivot_rtol<Mo::n, T>());
  Mo::constraints(in.q, in.qd, T(0), in.p, B, b);
  L.template solve_rows<Mo::m, kernels::ConstraintColumnsOf<Mo>>(B);
}

// The pseudo-inverse as uk_accel takes it (with the model's
// constraint_columns where it gives them).
template <class Mo>
using PinvOf = kernels::PseudoInverse<Mo::m, Mo::n, typename Mo::Scalar, kernels::ConstraintColumnsOf<Mo>>;

template <class Mo>
void bm_pinv_factor(benchmark::State& state) {
  using T = typename Mo::Scalar;
  MicroInput<Mo> in;
  T B[Mo::m * Mo::n];
  constraint_matrix(in, B);
  for (auto _ : state) {
    PinvOf<Mo> p;
    benchmark::DoNotOptimize(B);
    p.factor(B, policy::default_rank_rtol<T>());
    benchmark::DoNotOptimize(p.rank);
  }
  state.SetItemsProcessed(state.iterations());
}

template <class Mo>
void bm_pinv_apply(benchmark::State& state) {
  using T = typename Mo::Scalar;
  MicroInput<Mo> in;
  T B[Mo::m * Mo::n], y[Mo::m], x[Mo::n];
  constraint_matrix(in, B);
  for (int i = 0; i < Mo::m; ++i) y[i] = T(1 + i);
  PinvOf<Mo> p;
  p.factor(B, policy::default_rank_rtol<T>());
  for (auto _ : state) {
    benchmark::DoNotOptimize(y);
    p.apply(y, x);
    benchmark::DoNotOptimize(x);
  }
  state.SetItemsProcessed(state.iterations());
}

template <class Mo>
void bm_uk_accel(benchmark::State& state) {
  using T = typename Mo::Scalar;
  MicroInput<Mo> in;
  kernels::Accel<Mo> a;
  for (auto _ : state) {
    benchmark::DoNotOptimize(in.q);
    const Status s = kernels::uk_accel<Mo>(in.q, in.qd, T(0), in.p, policy::default_rank_rtol<T>(), a);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(a.qdd);
  }
  state.SetItemsProcessed(state.iterations());
}

template <class T>
const char* scalar_name() {
  return sizeof(T) == 8 ? "double" : "float";
}

/// Registers the workload of Mo at N = 10^2 .. 10^6: reference (double) up
/// to max_reference_N, cpu up to max_cpu_N, cuda at every N; with `micro`, also
/// the micro-benchmarks of its kernels.
template <class Mo>
void register_workload(int max_cpu_N, int max_reference_N = 10000, bool micro = true) {
  using T = typename Mo::Scalar;
  const std::string base = std::string(bench::Workload<Mo>::id) + "/" + Mo::name + "/" + scalar_name<T>();
  auto add = [&](Backend be, int threads, int N) {
    const std::string name = base + "/" + std::string(to_string(be)) + "/threads:" +
                             std::to_string(threads) + "/N:" + std::to_string(N);
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { bm_workload<Mo>(s, be, N, threads); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  };
  for (int N : {100, 1000, 10000, 100000, 1000000}) {
    if (std::is_same_v<T, double> && N <= max_reference_N) add(Backend::reference, 1, N);
    if (N <= max_cpu_N) {
      add(Backend::cpu, 1, N);
      add(Backend::cpu, 2, N);
    }
    add(Backend::cuda, 0, N);
  }
  if (!micro) return;
  const std::string m = std::string("micro/") + Mo::name + "/" + scalar_name<T>();
  benchmark::RegisterBenchmark((m + "/cholesky").c_str(), bm_cholesky<Mo>);
  benchmark::RegisterBenchmark((m + "/pinv_factor").c_str(), bm_pinv_factor<Mo>);
  benchmark::RegisterBenchmark((m + "/pinv_apply").c_str(), bm_pinv_apply<Mo>);
  benchmark::RegisterBenchmark((m + "/uk_accel").c_str(), bm_uk_accel<Mo>);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ukb::models;
  // The largest N on the CPU keeps one iteration of the chains under ~10 s.
  register_workload<BeadOnRing<double>>(1000000);
  register_workload<BeadOnRing<float>>(1000000);
  register_workload<PlanarChain6<double>>(100000);
  register_workload<PlanarChain6<float>>(100000);
  register_workload<PlanarChain12<double>>(10000);
  register_workload<PlanarChain12<float>>(10000);
  register_workload<RedundantPendulum<double>>(1000000);
  register_workload<RedundantPendulum<float>>(1000000);
#if UKB_BENCH_LONG_CHAINS
  // Without the reference's rows and the micro-benchmarks: this build is
  // for the throughput of the long chains alone (bench/gpu.sh).
  register_workload<PlanarChain24<double>>(1000, 0, false);
  register_workload<PlanarChain24<float>>(1000, 0, false);
  register_workload<PlanarChain48<double>>(100, 0, false);
  register_workload<PlanarChain48<float>>(100, 0, false);
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
