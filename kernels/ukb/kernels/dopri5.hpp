/// @file dopri5.hpp
/// @brief The Dormand–Prince 5(4) pair on (q, q'), for one system or for
///        the systems in a pack's lanes: the step with its error estimate,
///        the continuous extension (dense output), the PI step-size
///        controller and the initial step.
///
/// The tableau is that of Dormand and Prince (1980), as in Hairer, Norsett
/// and Wanner, Solving Ordinary Differential Equations I, Table II.5.2 (and
/// SciPy's RK45); the dense output is Hairer's (contd5 of DOPRI5), of order
/// 4. The seventh stage is evaluated at the fifth-order solution, so its
/// derivative is the first stage of the next step (FSAL). As rk4.hpp, a
/// stepper knows its tableau and its stages only; run.hpp decides which
/// steps to take and what happens around them.
#pragma once

#include <cmath>

#include "ukb/config.hpp"
#include "ukb/kernels/lanes.hpp"
#include "ukb/kernels/stage.hpp"
#include "ukb/kernels/team.hpp"
#include "ukb/kernels/uk.hpp"
#include "ukb/model.hpp"
#include "ukb/policy.hpp"
#include "ukb/settings.hpp"

namespace ukb::kernels {

/// The coefficients of the pair (c: nodes, a: stages, e: b - b^ of the
/// error estimate, d: the dense output's fifth polynomial), as functions of
/// their indices (device code cannot index a host array).
struct Dopri5Tableau {
  static constexpr int stages = 7;
  UKB_HD static constexpr double c(int s) {
    switch (s) {
      case 1: return 1.0 / 5;
      case 2: return 3.0 / 10;
      case 3: return 4.0 / 5;
      case 4: return 8.0 / 9;
      case 5: case 6: return 1.0;
      default: return 0.0;
    }
  }
  /// a(s, j), j < s; row 6 (stage 7) is b, the fifth-order weights.
  UKB_HD static constexpr double a(int s, int j) {
    switch (s * 8 + j) {
      case 8: return 1.0 / 5;
      case 16: return 3.0 / 40;
      case 17: return 9.0 / 40;
      case 24: return 44.0 / 45;
      case 25: return -56.0 / 15;
      case 26: return 32.0 / 9;
      case 32: return 19372.0 / 6561;
      case 33: return -25360.0 / 2187;
      case 34: return 64448.0 / 6561;
      case 35: return -212.0 / 729;
      case 40: return 9017.0 / 3168;
      case 41: return -355.0 / 33;
      case 42: return 46732.0 / 5247;
      case 43: return 49.0 / 176;
      case 44: return -5103.0 / 18656;
      case 48: return 35.0 / 384;
      case 50: return 500.0 / 1113;
      case 51: return 125.0 / 192;
      case 52: return -2187.0 / 6784;
      case 53: return 11.0 / 84;
      default: return 0.0;
    }
  }
  UKB_HD static constexpr double e(int s) {
    switch (s) {
      case 0: return 71.0 / 57600;
      case 2: return -71.0 / 16695;
      case 3: return 71.0 / 1920;
      case 4: return -17253.0 / 339200;
      case 5: return 22.0 / 525;
      case 6: return -1.0 / 40;
      default: return 0.0;
    }
  }
  UKB_HD static constexpr double d(int s) {
    switch (s) {
      case 0: return -12715105075.0 / 11282082432.0;
      case 2: return 87487479700.0 / 32700410799.0;
      case 3: return -10690763975.0 / 1880347072.0;
      case 4: return 701980252875.0 / 199316789632.0;
      case 5: return -1453857185.0 / 822651844.0;
      case 6: return 69997945.0 / 29380423.0;
      default: return 0.0;
    }
  }
};

/// The stages of one step: K_s = (stage velocity, stage acceleration), the
/// derivative of (q, q') at stage s. kq[0], kv[0] are given (q'0 and the
/// acceleration at the start); kv[6] is the acceleration at the end.
template <int n, class V>
struct Dopri5Stages {
  V kq[7][n];
  V kv[7][n];
};

/// The dense output of one accepted step, for one system: the state at
/// t0 + theta h, theta in [0, 1], is
///     r0 + theta (r1 + (1 - theta) (r2 + theta (r3 + (1 - theta) r4)))
/// with r_k (2n: q, then q') as below. Stored in a batch's `dense` field
/// (fields.hpp) as r0..r4, t0, h.
template <int n, class T>
struct DenseStep {
  T r[5][2 * n];
  T t0{}, h{};
  static constexpr int size = 10 * n + 2;  ///< values in the `dense` field
};

namespace detail {
/// The stages of one Dormand–Prince step (dopri5_step) on the caller's
/// arrays: qs, vs (n each) the stage state, `acc` the evaluation's result,
/// evaluated by eval(x, v, ts) (false when no lane is left), the status in
/// st. The members of `team` split the entries of every stage state and of
/// the outputs; they share the arrays, k and the outputs, and each holds
/// st itself.
template <Model Mo, class V, class Team, class Eval, class Observe>
UKB_HD UKB_INLINE void dopri5_stages(const Team& team, V* qs, V* vs, const Accel<Mo, V>& acc, const V* q0,
                                     const V* qd0, const V& t0, const V& t1, const V& h, const Eval& eval,
                                     const Observe& observe, Dopri5Stages<Mo::n, V>& k, V* q1, V* qd1, V* eq,
                                     V* ev) {
  using T = typename Mo::Scalar;
  using Tab = Dopri5Tableau;
  constexpr int n = Mo::n;
  const int first = team.rank(), stride = team.size();
  // One evaluation in the loop's body, not unrolled: six inlined copies of
  // the acceleration made device code (and nvcc's compile) six times larger.
#if defined(__CUDA_ARCH__)
#pragma unroll 1
#endif
  for (int s = 1; s < Tab::stages; ++s) {
    // The state of stage s: (q0, q'0) + h sum_{j < s} a_sj K_j.
    for (int i = first; i < n; i += stride) {
      V dq = V(T(0)), dv = V(T(0));
      for (int j = 0; j < s; ++j) {
        if (Tab::a(s, j) == 0.0) continue;
        const V a = V(T(Tab::a(s, j)));
        dq += a * k.kq[j][i];
        dv += a * k.kv[j][i];
      }
      qs[i] = q0[i] + h * dq;
      vs[i] = qd0[i] + h * dv;
    }
    team.sync();
    const V ts = s == Tab::stages - 1 ? t1 : V(t0 + V(T(Tab::c(s))) * h);
    if (s < Tab::stages - 1) observe(qs, vs, ts);
    if (!eval(qs, vs, ts)) return;
    for (int i = first; i < n; i += stride) {
      k.kq[s][i] = vs[i];
      k.kv[s][i] = acc.qdd[i];
    }
    team.sync();
  }
  for (int i = first; i < n; i += stride) {
    q1[i] = qs[i];  // stage 7's state is the fifth-order solution (a_7j = b_j)
    qd1[i] = vs[i];
    V sq = V(T(0)), sv = V(T(0));
    for (int j = 0; j < Tab::stages; ++j) {
      if (Tab::e(j) == 0.0) continue;
      const V e = V(T(Tab::e(j)));
      sq += e * k.kq[j][i];
      sv += e * k.kv[j][i];
    }
    eq[i] = h * sq;
    ev[i] = h * sv;
  }
  team.sync();
}
}  // namespace detail

/// One Dormand–Prince step of size h from (q0, q'0, t0) to the time t1 (t0 +
/// h, or the end time it is meant to land on), with k.kq[0] = q'0 and
/// k.kv[0] the acceleration at the start given: the stages into k, the
/// fifth-order solution at t1 into (q1, q'1),
/// and the error estimate err = h sum_s (b_s - b^_s) K_s into (eq, ev).
/// `observe` sees the states of stages 2 to 6 (q, q', t) before they are
/// evaluated; the end state (stage 7) is the caller's to check. A lane
/// whose stage fails gets that status and its outputs are meaningless.
template <Model Mo, class V = typename Mo::Scalar, class Observe = NoStageObserver>
UKB_HD typename Lanes<V>::LaneStatus dopri5_step(const V* q0, const V* qd0, const V& t0, const V& t1, const V& h,
                                                 const ParamsOf<Mo, V>& p,
                                                 const StageSettings<typename Mo::Scalar, V>& ss,
                                                 const Observe& observe, Dopri5Stages<Mo::n, V>& k, V* q1,
                                                 V* qd1, V* eq, V* ev) {
  constexpr int n = Mo::n;
  typename Lanes<V>::LaneStatus st{};
  Accel<Mo, V> acc;
  V qs[n], vs[n];
  auto eval = [&](const V* x, const V* v, const V& ts) { return stage_eval<Mo, V>(x, v, ts, p, ss, acc, st); };
  detail::dopri5_stages<Mo, V>(SerialTeam{}, qs, vs, acc, q0, qd0, t0, t1, h, eval, observe, k, q1, qd1, eq, ev);
  return st;
}

/// What a team's Dormand–Prince step shares besides its start, stages and
/// outputs: the stage state and the evaluation's arrays and result.
template <Model Mo, class T = typename Mo::Scalar>
struct Dopri5Workspace {
  UkWorkspace<Mo, T> uk;
  Accel<Mo, T> acc;
  T qs[Mo::n], vs[Mo::n];
};

/// dopri5_step by a team (team.hpp) that shares the workspace `ws`, the
/// start, k and the outputs; every member returns the same status. Every
/// member calls `observe` and writes the trackers of `ss` (the same
/// values): each member must have its own. The bits of one thread's
/// dopri5_step where the compiler contracts no multiply-adds.
template <Model Mo, class Team, class Observe = NoStageObserver>
UKB_HD Status dopri5_step(const Team& team, Dopri5Workspace<Mo>& ws, const typename Mo::Scalar* q0,
                          const typename Mo::Scalar* qd0, typename Mo::Scalar t0, typename Mo::Scalar t1,
                          typename Mo::Scalar h, const typename Mo::Params& p,
                          const StageSettings<typename Mo::Scalar>& ss, const Observe& observe,
                          Dopri5Stages<Mo::n, typename Mo::Scalar>& k, typename Mo::Scalar* q1,
                          typename Mo::Scalar* qd1, typename Mo::Scalar* eq, typename Mo::Scalar* ev) {
  using T = typename Mo::Scalar;
  Status st = Status::ok;
  const TeamStageEval<Mo, Team> eval{team, ws.uk.arrays(), p, ss, ws.acc, st};
  detail::dopri5_stages<Mo, T>(team, ws.qs, ws.vs, ws.acc, q0, qd0, t0, t1, h, eval, observe, k, q1, qd1, eq, ev);
  return st;
}

/// The error norm of a step: the root mean square over the 2n components
/// y of (q, q') of err_y / (atol_y + rtol max(|y0|, |y1|)) (policy.hpp).
template <int n, class V>
UKB_HD V dopri5_error(const V* q0, const V* qd0, const V* q1, const V* qd1, const V* eq, const V* ev,
                      const ErrorControl<typename Lanes<V>::Scalar>& c) {
  using T = typename Lanes<V>::Scalar;
  using std::abs;
  using std::sqrt;
  V sum = V(T(0));
  const V rtol = V(c.rtol);
  for (int k = 0; k < 2 * n; ++k) {
    const bool pos = k < n;
    const int i = pos ? k : k - n;
    const V y0 = abs(pos ? q0[i] : qd0[i]), y1 = abs(pos ? q1[i] : qd1[i]);
    const V scale = V(c.atol_of(k, n)) + rtol * Lanes<V>::select(y1 > y0, y1, y0);
    const V r = (pos ? eq[i] : ev[i]) / scale;
    sum += r * r;
  }
  return sqrt(sum / V(T(2 * n)));
}

/// The dense output of the step from (q0, q'0, t0) of size h to (q1, q'1)
/// with stages k, for lane l of V (a scalar: l = 0).
template <int n, class V>
UKB_HD void dopri5_dense(const V* q0, const V* qd0, const V* q1, const V* qd1, const Dopri5Stages<n, V>& k,
                         const V& h, int l, DenseStep<n, typename Lanes<V>::Scalar>& out) {
  using T = typename Lanes<V>::Scalar;
  using Tab = Dopri5Tableau;
  using Lane = Lanes<V>;
  const T hl = Lane::lane(h, l);
  // Row y of the output: component i of the positions (y = i) or of the
  // velocities (y = n + i), each half from its own arrays (a choice of
  // array per element let g++ 12 see reads past kq's end, after inlining,
  // and warn that it may drop loop iterations: -Waggressive-loop-optimizations).
  auto rows = [&](const V* a0, const V* a1, const V(*ks)[n], int y0_row) {
    for (int i = 0; i < n; ++i) {
      const int y = y0_row + i;
      const T y0 = Lane::lane(a0[i], l), y1 = Lane::lane(a1[i], l);
      const T r1 = y1 - y0;
      const T r2 = hl * Lane::lane(ks[0][i], l) - r1;
      const T r3 = r1 - hl * Lane::lane(ks[6][i], l) - r2;
      T s = T(0);
      for (int j = 0; j < Tab::stages; ++j)
        if (Tab::d(j) != 0.0) s += T(Tab::d(j)) * Lane::lane(ks[j][i], l);
      out.r[0][y] = y0;
      out.r[1][y] = r1;
      out.r[2][y] = r2;
      out.r[3][y] = r3;
      out.r[4][y] = hl * s;
    }
  };
  rows(q0, q1, k.kq, 0);
  rows(qd0, qd1, k.kv, n);
  out.h = hl;
}

/// The state (q, q': n values each) of a dense output at theta in [0, 1];
/// r is r0..r4 of DenseStep, 2n values each, one after the other.
template <class T>
UKB_HD void dense_state(const T* r, int n, T theta, T* q, T* qd) {
  const T u = T(1) - theta;
  const int k = 2 * n;
  for (int y = 0; y < k; ++y) {
    const T v = r[y] + theta * (r[k + y] + u * (r[2 * k + y] + theta * (r[3 * k + y] + u * r[4 * k + y])));
    (y < n ? q[y] : qd[y - n]) = v;
  }
}

/// The PI step-size controller (policy.hpp) with safety factor `safety`
/// (ErrorControl::safety). After a step of size h with error norm err: true
/// when the step is accepted (err <= 1); h_next is the next step's size;
/// err_prev (the last accepted step's norm, floored) and `rejected` (the
/// last step was rejected) are updated.
template <class T>
UKB_HD bool dopri5_control(T h, T err, T& err_prev, bool& rejected, T& h_next, T safety) {
  using std::pow;
  const T beta = T(policy::pi_beta);
  const T shrink = T(1 / policy::step_shrink_min), grow = T(1 / policy::step_grow_max);
  if (!(err <= T(1))) {  // rejected (NaN too): shorter, by the error alone
    const T f = err == err ? pow(err, T(0.2) - T(0.75) * beta) / safety : shrink;
    h_next = h / (f < shrink ? f : shrink);
    rejected = true;
    return false;
  }
  const T prev = err_prev > T(0) ? err_prev : T(policy::err_floor);
  T f = pow(err, T(0.2) - T(0.75) * beta) / pow(prev, beta) / safety;
  f = f < shrink ? f : shrink;
  f = f > grow ? f : grow;
  h_next = h / f;
  if (rejected && h_next > h) h_next = h;  // no growth right after a rejection
  err_prev = err > T(policy::err_floor) ? err : T(policy::err_floor);
  rejected = false;
  return true;
}

/// The initial step of Hairer's DOPRI5 (hinit): from the sizes of y, f(y)
/// and of f's change along an Euler step of size h0, the step whose local
/// error would be about the tolerance; at most dt_max. f0 (2n: q'0, then
/// the acceleration at the start); `accel` evaluates the acceleration at
/// (q, q', t) into its last argument and returns false where it fails
/// (then the step is h0).
template <int n, class T, class Accel>
UKB_HD T dopri5_initial_step(const T* q0, const T* qd0, T t0, const T* f0, const ErrorControl<T>& c,
                             const Accel& accel) {
  using std::abs;
  using std::pow;
  using std::sqrt;
  T dnf = T(0), dny = T(0);
  for (int k = 0; k < 2 * n; ++k) {
    const T y = k < n ? q0[k] : qd0[k - n];
    const T sk = c.atol_of(k, n) + c.rtol * abs(y);
    dnf += (f0[k] / sk) * (f0[k] / sk);
    dny += (y / sk) * (y / sk);
  }
  T h = dnf <= T(1e-10) || dny <= T(1e-10) ? T(1e-6) : sqrt(dny / dnf) * T(0.01);
  h = h < c.dt_max ? h : c.dt_max;
  T q1[n], qd1[n], a1[n];
  for (int i = 0; i < n; ++i) {
    q1[i] = q0[i] + h * f0[i];
    qd1[i] = qd0[i] + h * f0[n + i];
  }
  if (!accel(q1, qd1, t0 + h, a1)) return h;
  T der2 = T(0);
  for (int k = 0; k < 2 * n; ++k) {
    const T y = k < n ? q0[k] : qd0[k - n];
    const T sk = c.atol_of(k, n) + c.rtol * abs(y);
    const T f1 = k < n ? qd1[k] : a1[k - n];
    der2 += ((f1 - f0[k]) / sk) * ((f1 - f0[k]) / sk);
  }
  der2 = sqrt(der2) / h;
  const T d1 = sqrt(dnf), der12 = der2 > d1 ? der2 : d1;
  const T h1 = der12 <= T(1e-15) ? (h * T(1e-3) > T(1e-6) ? h * T(1e-3) : T(1e-6)) : pow(T(0.01) / der12, T(0.2));
  h = T(100) * h < h1 ? T(100) * h : h1;
  return h < c.dt_max ? h : c.dt_max;
}

}  // namespace ukb::kernels
