/// @file system.hpp
/// @brief What one thread (or one loop iteration) does for system i: gather
///        its state into local arrays, evaluate or integrate, scatter back.
///        The bodies are shared by the CPU backend, the CUDA kernel and the
///        CPU emulation of the CUDA launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "ukb/batch.hpp"
#include "ukb/kernels/uk.hpp"

namespace ukb::kernels {

/// Evaluates system i at its current state and stores the outputs.
template <Model Mo>
struct EvaluateBody {
  using T = typename Mo::Scalar;
  BatchView<Mo> v;
  T rank_rtol;

  UKB_HD void operator()(int i) const {
    constexpr int n = Mo::n, m = Mo::m;
    const int N = v.N;
    T q[n], qd[n];
    for (int j = 0; j < n; ++j) {
      q[j] = v.q[std::size_t(j) * N + i];
      qd[j] = v.qd[std::size_t(j) * N + i];
    }
    const typename Mo::Params p = load_params<Mo>(v, i);
    Accel<Mo> a;
    const Status st = uk_accel<Mo>(q, qd, v.t[i], p, rank_rtol, a);
    const T nan = std::numeric_limits<T>::quiet_NaN();
    const bool ok = st == Status::ok;
    for (int j = 0; j < n; ++j) {
      v.qdd[std::size_t(j) * N + i] = ok ? a.qdd[j] : nan;
      v.Qc_ideal[std::size_t(j) * N + i] = ok ? a.Qc_ideal[j] : nan;
      v.Qc_nonideal[std::size_t(j) * N + i] = ok ? a.Qc_nonideal[j] : nan;
    }
    for (int j = 0; j < m; ++j) v.lambda[std::size_t(j) * N + i] = ok ? a.lambda[j] : nan;
    v.rank[i] = ok ? a.rank : 0;
    v.status[i] = static_cast<std::int32_t>(st);
  }
};

/// Integrates system i with RK4: at most `max_steps` steps of `dt`, the last
/// one shortened to end exactly at `t_end` (pass +infinity for a plain step
/// count). The state stays in local arrays for the whole run; global memory
/// is read once and written once. A system whose status is not ok is left
/// alone; one whose step fails keeps its last good state and the status.
template <Model Mo>
struct IntegrateBody {
  using T = typename Mo::Scalar;
  BatchView<Mo> v;
  T dt;
  long max_steps;
  T t_end;
  T rank_rtol;

  UKB_HD void operator()(int i) const {
    constexpr int n = Mo::n;
    const int N = v.N;
    if (v.status[i] != static_cast<std::int32_t>(Status::ok)) return;
    T q[n], qd[n];
    for (int j = 0; j < n; ++j) {
      q[j] = v.q[std::size_t(j) * N + i];
      qd[j] = v.qd[std::size_t(j) * N + i];
    }
    T t = v.t[i];
    const typename Mo::Params p = load_params<Mo>(v, i);
    Status st = Status::ok;
    for (long k = 0; k < max_steps; ++k) {
      T h = dt;
      const T remaining = t_end - t;
      if (!(remaining > dt * T(1e-9))) break;     // reached t_end
      if (remaining < dt * T(1 + 1e-9)) h = remaining;  // last, shortened step
      if (!(t + h > t)) break;  // t too large for dt to advance it: stop, never loop
      st = rk4_step<Mo>(q, qd, t, h, p, rank_rtol);
      if (st != Status::ok) break;
    }
    for (int j = 0; j < n; ++j) {
      v.q[std::size_t(j) * N + i] = q[j];
      v.qd[std::size_t(j) * N + i] = qd[j];
    }
    v.t[i] = t;
    v.status[i] = static_cast<std::int32_t>(st);
  }
};

}  // namespace ukb::kernels
