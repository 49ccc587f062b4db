// The throughput workloads of bench/README.md, shared by the benchmark
// executables, the baselines and the flop count:
//   W1  bead_on_ring,       mu ~ U[0.05, 0.5], theta ~ U[-pi, pi], omega ~ U[-3, 3]
//   W2  planar_chain_6,     c = 0.1, theta_k ~ U[-1, 1], omega_k ~ U[-1, 1]
//   W3  planar_chain_12,    c = 0.1, theta_k ~ U[-1, 1], omega_k ~ U[-1, 1]
//   W4  redundant_pendulum, c = 0.1, theta ~ U[-2, 2], omega ~ U[-2, 2] (rank(B) = 1 < m)
//   W5  planar_chain_24,    as W2 (examples/models/long_chains.hpp; UKB_BENCH_GPU_STUDY)
//   W6  planar_chain_48,    as W2 (the same file)
// Every state is consistent: it is the model's initial_state of the random
// natural quantities. RK4 with dt = 1e-3.
#pragma once

#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "ukb/batch.hpp"
#include "ukb/models/all.hpp"

namespace ukb::bench {

inline constexpr double workload_dt = 1e-3;

template <class Mo>
struct Workload;

template <class T>
struct Workload<models::BeadOnRing<T>> {
  static constexpr const char* id = "W1";
  static void params(std::mt19937_64& g, typename models::BeadOnRing<T>::Params& p) {
    p.mu = T(std::uniform_real_distribution<double>(0.05, 0.5)(g));
  }
  static constexpr double angle = std::numbers::pi, rate = 3.0;
};

template <class T, int K>
struct Workload<models::PlanarChain<T, K>> {
  static_assert(K == 6 || K == 12 || K == 24 || K == 48, "the chain workloads are planar_chain_6, 12, 24 and 48");
  static constexpr const char* id = K == 6 ? "W2" : K == 12 ? "W3" : K == 24 ? "W5" : "W6";
  static void params(std::mt19937_64&, typename models::PlanarChain<T, K>::Params& p) { p.c = T(0.1); }
  static constexpr double angle = 1.0, rate = 1.0;
};

template <class T>
struct Workload<models::RedundantPendulum<T>> {
  static constexpr const char* id = "W4";
  static void params(std::mt19937_64&, typename models::RedundantPendulum<T>::Params& p) { p.c = T(0.1); }
  static constexpr double angle = 2.0, rate = 2.0;
};

/// System i of the workload (seeded by seed and i alone, so that a batch of
/// any size holds the same first systems): parameters and consistent state.
template <class Mo>
void workload_system(std::uint64_t seed, int i, typename Mo::Params& p, typename Mo::Scalar* q,
                     typename Mo::Scalar* qd) {
  using T = typename Mo::Scalar;
  using W = Workload<Mo>;
  std::mt19937_64 g(seed * 0x9E3779B97F4A7C15ull + std::uint64_t(i));
  p = typename Mo::Params{};
  W::params(g, p);
  constexpr std::size_t k = Mo::initial_names.size();
  T ic[k];
  for (std::size_t j = 0; j < k; ++j) {
    const bool is_rate = j >= k / 2;  // the built-in models list angles, then rates
    const double a = is_rate ? W::rate : W::angle;
    ic[j] = T(std::uniform_real_distribution<double>(-a, a)(g));
  }
  Mo::initial_state(ic, p, q, qd);
}

/// Fills a batch with systems 0 .. N-1 of the workload.
template <class Mo>
void fill_workload(Batch<Mo>& b, std::uint64_t seed = 1) {
  for (int i = 0; i < b.size(); ++i) {
    typename Mo::Params p;
    typename Mo::Scalar q[Mo::n], qd[Mo::n];
    workload_system<Mo>(seed, i, p, q, qd);
    b.set_params(i, p);
    b.set_state(i, q, qd);
  }
}

}  // namespace ukb::bench
