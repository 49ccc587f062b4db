/// @file rk4.hpp
/// @brief The classical fourth-order Runge–Kutta stepper on (q, q'), for one
///        system or for the systems in a pack's lanes. A stepper knows its
///        tableau and its stages only: which step to take, whether to keep
///        it and what happens around it is decided elsewhere (run.hpp).
#pragma once

#include <type_traits>

#include "ukb/config.hpp"
#include "ukb/kernels/lanes.hpp"
#include "ukb/kernels/uk.hpp"
#include "ukb/model.hpp"
#include "ukb/kernels/stage.hpp"
#include "ukb/kernels/team.hpp"
#include "ukb/settings.hpp"

namespace ukb::kernels {

namespace detail {
/// The stages of one RK4 step (rk4_step) on the arrays of the caller:
/// qs, vs, dq, dv (n each) and k, evaluated by eval(x, v, ts) (false when
/// no lane is left), the status in st. The members of `team` split the
/// entries of every update; they share q, qd and the arrays, and each
/// holds t and st itself.
template <Model Mo, class V, class Team, class Eval, class Observe>
UKB_HD UKB_INLINE void rk4_stages(const Team& team, V* qs, V* vs, V* dq, V* dv, const Accel<Mo, V>& k, V* q, V* qd,
                                  V& t, const V& h, const Eval& eval, const Observe& observe,
                                  typename Lanes<V>::LaneStatus& st) {
  using T = typename Mo::Scalar;
  using Lane = Lanes<V>;
  constexpr int n = Mo::n;
  const int first = team.rank(), stride = team.size();
  const V half = V(T(0.5)) * h;
  // Stage 1 at (q, q').
  if (!eval(q, qd, t)) return;
  for (int i = first; i < n; i += stride) {
    dq[i] = qd[i];
    dv[i] = k.qdd[i];
    qs[i] = q[i] + half * qd[i];
    vs[i] = qd[i] + half * k.qdd[i];
  }
  team.sync();
  // Stages 2 and 3 at the midpoint, weights 2.
  for (int stage = 2; stage <= 3; ++stage) {
    observe(qs, vs, V(t + half));
    if (!eval(qs, vs, t + half)) return;
    const V step = stage == 2 ? half : h;
    for (int i = first; i < n; i += stride) {
      dq[i] += V(T(2)) * vs[i];
      dv[i] += V(T(2)) * k.qdd[i];
      const V v = vs[i];
      qs[i] = q[i] + step * v;
      vs[i] = qd[i] + step * k.qdd[i];
    }
    team.sync();
  }
  // Stage 4 at the end point.
  observe(qs, vs, V(t + h));
  if (!eval(qs, vs, t + h)) return;
  const V sixth = h / V(T(6));
  const MaskOf<V> ok = Lane::ok(st);
  for (int i = first; i < n; i += stride) {
    q[i] = Lane::select(ok, q[i] + sixth * (dq[i] + vs[i]), q[i]);
    qd[i] = Lane::select(ok, qd[i] + sixth * (dv[i] + k.qdd[i]), qd[i]);
  }
  team.sync();
  t = Lane::select(ok, t + h, t);
}
}  // namespace detail

/// One classical RK4 step of size h on (q, q', t), for one system or for
/// the systems in V's lanes. On a failed stage the state is left unchanged
/// and that stage's status is returned. `observe` sees the states of stages
/// 2, 3 and 4 (q, q', t) before they are evaluated; it does not change the
/// arithmetic. In a pack, a lane that has failed goes on in lockstep but its
/// state is left unchanged.
template <Model Mo, class V = typename Mo::Scalar, class Observe = NoStageObserver>
UKB_HD typename Lanes<V>::LaneStatus rk4_step(V* q, V* qd, V& t, std::type_identity_t<V> h,
                                              const ParamsOf<Mo, V>& p,
                                              const StageSettings<typename Mo::Scalar, V>& ss,
                                              const Observe& observe = {}) {
  Accel<Mo, V> k;
  V qs[Mo::n], vs[Mo::n], dq[Mo::n], dv[Mo::n];
  typename Lanes<V>::LaneStatus st{};
  auto eval = [&](const V* x, const V* v, V ts) { return stage_eval<Mo, V>(x, v, ts, p, ss, k, st); };
  detail::rk4_stages<Mo, V>(SerialTeam{}, qs, vs, dq, dv, k, q, qd, t, V(h), eval, observe, st);
  return st;
}

/// What a team's RK4 step shares besides (q, q'): its stage values and
/// the evaluation's arrays and result; sizeof is the step's workspace.
template <Model Mo, class T = typename Mo::Scalar>
struct Rk4Workspace {
  UkWorkspace<Mo, T> uk;
  Accel<Mo, T> k;
  T qs[Mo::n], vs[Mo::n], dq[Mo::n], dv[Mo::n];
};

/// rk4_step by a team (team.hpp) that shares the workspace `ws` and (q,
/// q'); every member holds t (the same value) and returns the same status.
/// Every member calls `observe` and writes the trackers of `ss` (the same
/// values): each member must have its own. The bits of one thread's
/// rk4_step where the compiler contracts no multiply-adds (the CPU build).
template <Model Mo, class Team, class Observe = NoStageObserver>
UKB_HD Status rk4_step(const Team& team, Rk4Workspace<Mo>& ws, typename Mo::Scalar* q, typename Mo::Scalar* qd,
                       typename Mo::Scalar& t, typename Mo::Scalar h, const typename Mo::Params& p,
                       const StageSettings<typename Mo::Scalar>& ss, const Observe& observe = {}) {
  using T = typename Mo::Scalar;
  Status st = Status::ok;
  const TeamStageEval<Mo, Team> eval{team, ws.uk.arrays(), p, ss, ws.k, st};
  detail::rk4_stages<Mo, T>(team, ws.qs, ws.vs, ws.dq, ws.dv, ws.k, q, qd, t, h, eval, observe, st);
  return st;
}

/// The classical RK4 method as a stepper: nodes 0, 1/2, 1/2, 1, weights
/// 1/6, 1/3, 1/3, 1/6 (rk4_step).
struct Rk4 {
  static constexpr int order = 4;   ///< global order of accuracy
  static constexpr int stages = 4;  ///< evaluations per step

  /// One step of size h (rk4_step).
  template <Model Mo, class V, class Observe>
  UKB_HD static typename Lanes<V>::LaneStatus step(V* q, V* qd, V& t, const V& h, const ParamsOf<Mo, V>& p,
                                                   const StageSettings<typename Mo::Scalar, V>& ss,
                                                   const Observe& observe) {
    return rk4_step<Mo, V>(q, qd, t, h, p, ss, observe);
  }
};

}  // namespace ukb::kernels
