/// @file engine.hpp
/// @brief The batched engine: evaluate or integrate every system of a Batch
///        on the reference, CPU or CUDA backend.
///
/// ```cpp
/// ukb::Batch<ukb::models::BeadOnRing<double>> batch(1000);
/// batch.set_params(i, p);  batch.set_state(i, q, qd);       // for each i
/// ukb::step(batch, ukb::Backend::cpu, 1e-3, 5000);          // 5000 RK4 steps
/// double x = batch.q(i, 0);  ukb::Status s = batch.status(i);
/// ```
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ukb/cpu/parallel.hpp"
#include "ukb/batch.hpp"
#include "ukb/cuda_engine.hpp"
#include "ukb/kernels/system.hpp"
#include "ukb/models/all.hpp"
#include "ukb/reference.hpp"

namespace ukb {

/// Where a batch is computed.
enum class Backend {
  reference,  ///< the Eigen oracle, one system after the other (double only)
  cpu,        ///< the shared kernels, OpenMP over systems
  cuda,       ///< the shared kernels, one GPU thread per system
};

constexpr std::string_view to_string(Backend b) {
  return b == Backend::reference ? "reference" : b == Backend::cpu ? "cpu" : "cuda";
}

/// Parses "reference", "cpu" or "cuda".
inline std::optional<Backend> parse_backend(std::string_view s) {
  for (Backend b : {Backend::reference, Backend::cpu, Backend::cuda})
    if (s == to_string(b)) return b;
  return std::nullopt;
}

/// Engine options.
struct EngineOptions {
  int threads = 0;        ///< CPU threads; 0: OMP_NUM_THREADS or all cores
  int chunk = 64;         ///< systems handed to a CPU thread at a time
  double rank_rtol = -1;  ///< relative rank tolerance; < 0: 1e-10 (double), 1e-5 (float)
  int cuda_block = 128;   ///< threads per CUDA block
};

namespace detail {

template <Model Mo>
typename Mo::Scalar rtol_of(const EngineOptions& o) {
  using T = typename Mo::Scalar;
  return o.rank_rtol < 0 ? kernels::default_rank_rtol<T>() : static_cast<T>(o.rank_rtol);
}

template <Model Mo>
constexpr bool on_cuda = models::Builtin::contains<Mo>;

template <Model Mo>
long count_failed(Batch<Mo>& b) {
  long failed = 0;
  for (int i = 0; i < b.size(); ++i) failed += b.status(i) != Status::ok;
  return failed;
}

// The reference backend on a batch: the oracle, system by system.
template <Model Mo>
void reference_evaluate(Batch<Mo>& b, double rtol) {
  if constexpr (std::is_same_v<typename Mo::Scalar, double>) {
    BatchView<Mo> v = b.view();
    for (int i = 0; i < v.N; ++i) {
      Eigen::VectorXd q(Mo::n), qd(Mo::n);
      for (int j = 0; j < Mo::n; ++j) q(j) = b.q(i, j), qd(j) = b.qd(i, j);
      const reference::Result r = reference::evaluate<Mo>(b.params(i), q, qd, b.t(i), {rtol});
      for (int j = 0; j < Mo::n; ++j) {
        v.qdd[j * v.N + i] = r.qdd(j);
        v.Qc_ideal[j * v.N + i] = r.Qc_ideal(j);
        v.Qc_nonideal[j * v.N + i] = r.Qc_nonideal(j);
      }
      for (int j = 0; j < Mo::m; ++j) v.lambda[j * v.N + i] = r.lambda(j);
      v.rank[i] = r.rank;
      v.status[i] = static_cast<std::int32_t>(r.status);
    }
  } else {
    (void)b, (void)rtol;
    throw BackendUnavailable("the reference backend computes in double only");
  }
}

template <Model Mo>
void reference_integrate(Batch<Mo>& b, double dt, long max_steps, double t_end, double rtol) {
  if constexpr (std::is_same_v<typename Mo::Scalar, double>) {
    BatchView<Mo> v = b.view();
    for (int i = 0; i < v.N; ++i) {
      if (b.status(i) != Status::ok) continue;
      reference::State s{Eigen::VectorXd(Mo::n), Eigen::VectorXd(Mo::n), b.t(i)};
      for (int j = 0; j < Mo::n; ++j) s.q(j) = b.q(i, j), s.qd(j) = b.qd(i, j);
      const reference::AccelFn f = reference::accel_fn<Mo>(b.params(i), {rtol});
      Status st = Status::ok;
      for (long k = 0; k < max_steps && st == Status::ok; ++k) {
        const double remaining = t_end - s.t;
        if (!(remaining > dt * 1e-9)) break;
        st = reference::rk4_step(f, s, remaining < dt * (1 + 1e-9) ? remaining : dt);
      }
      for (int j = 0; j < Mo::n; ++j) v.q[j * v.N + i] = s.q(j), v.qd[j * v.N + i] = s.qd(j);
      v.t[i] = s.t;
      v.status[i] = static_cast<std::int32_t>(st);
    }
  } else {
    (void)b, (void)dt, (void)max_steps, (void)t_end, (void)rtol;
    throw BackendUnavailable("the reference backend computes in double only");
  }
}

inline void check_options(const EngineOptions& o) {
  if (o.threads < 0) throw std::invalid_argument("ukb: threads must be >= 0 (0: OpenMP default)");
  if (o.chunk < 1) throw std::invalid_argument("ukb: chunk must be >= 1");
  if (o.cuda_block < 1 || o.cuda_block > 1024)
    throw std::invalid_argument("ukb: cuda_block must be in [1, 1024]");
  if (!(o.rank_rtol < 1)) throw std::invalid_argument("ukb: rank_rtol must be < 1 (< 0: default)");
}

template <Model Mo>
long integrate(Batch<Mo>& b, Backend be, typename Mo::Scalar dt, long max_steps,
               typename Mo::Scalar t_end, const EngineOptions& o) {
  using T = typename Mo::Scalar;
  if (!(dt > T(0)) || !std::isfinite(static_cast<double>(dt)))
    throw std::invalid_argument("ukb: the time step must be finite and > 0");
  if (max_steps < 0) throw std::invalid_argument("ukb: the step count must be >= 0");
  if (std::isnan(static_cast<double>(t_end)))
    throw std::invalid_argument("ukb: the end time must not be NaN");
  check_options(o);
  const T rtol = rtol_of<Mo>(o);
  switch (be) {
    case Backend::reference:
      reference_integrate(b, dt, max_steps, t_end, rtol);
      return count_failed(b);
    case Backend::cpu: {
      const kernels::IntegrateBody<Mo> body{b.view(), dt, max_steps, t_end, rtol};
      cpu::parallel_for(b.size(), o.threads, o.chunk, body);
      return count_failed(b);
    }
    case Backend::cuda:
      if constexpr (on_cuda<Mo>) {
        return cuda::integrate_batch<Mo>(b.view(), dt, max_steps, t_end, rtol, o.cuda_block);
      } else {
        throw BackendUnavailable(std::string("the cuda backend runs the built-in models only; for '") +
                                 Mo::name + "' use the cpu backend");
      }
  }
  return 0;
}

}  // namespace detail

/// Evaluates every system at its current state (outputs qdd, Qc_ideal,
/// Qc_nonideal, lambda, rank and status). Returns the number of failed systems.
template <Model Mo>
long evaluate(Batch<Mo>& b, Backend be, const EngineOptions& o = {}) {
  detail::check_options(o);
  const auto rtol = detail::rtol_of<Mo>(o);
  switch (be) {
    case Backend::reference:
      detail::reference_evaluate(b, rtol);
      return detail::count_failed(b);
    case Backend::cpu: {
      const kernels::EvaluateBody<Mo> body{b.view(), rtol};
      cpu::parallel_for(b.size(), o.threads, o.chunk, body);
      return detail::count_failed(b);
    }
    case Backend::cuda:
      if constexpr (detail::on_cuda<Mo>) {
        return cuda::evaluate_batch<Mo>(b.view(), rtol, o.cuda_block);
      } else {
        throw BackendUnavailable(std::string("the cuda backend runs the built-in models only; for '") +
                                 Mo::name + "' use the cpu backend");
      }
  }
  return 0;
}

/// `steps` RK4 steps of size dt for every system whose status is ok. A
/// system whose step fails keeps its last good state and gets the status.
/// Returns the number of systems whose status is not ok afterwards.
template <Model Mo>
long step(Batch<Mo>& b, Backend be, typename Mo::Scalar dt, long steps,
          const EngineOptions& o = {}) {
  return detail::integrate(b, be, dt, steps,
                           std::numeric_limits<typename Mo::Scalar>::infinity(), o);
}

/// RK4 steps of size dt until every system reaches t_end (its last step
/// shortened to land on t_end exactly). t_end must be finite. A system whose
/// time is so large that dt no longer advances it stops there.
template <Model Mo>
long run_until(Batch<Mo>& b, Backend be, typename Mo::Scalar dt, typename Mo::Scalar t_end,
               const EngineOptions& o = {}) {
  if (!std::isfinite(static_cast<double>(t_end)))
    throw std::invalid_argument("ukb: the end time must be finite");
  return detail::integrate(b, be, dt, std::numeric_limits<long>::max(), t_end, o);
}

}  // namespace ukb
