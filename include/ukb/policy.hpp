/// @file policy.hpp
/// @brief The numerical policy of ukb: every tolerance, default and cap that
///        decides a result, in one place, shared by the per-system kernels,
///        the reference backend (the oracle) and the host side.
///
/// The oracle reads its rules from here rather than from the kernels it
/// checks: the two implementations share the *rules* (when a rank counts,
/// when constraints count as inconsistent, when a run has reached its end
/// time), not the code that applies them.
#pragma once

#include "ukb/config.hpp"

namespace ukb::policy {

/// Default relative rank tolerance of the pseudo-inverse of B: singular
/// values at or below this times the largest count as zero. 1e-10 in
/// double (round-off in redundant rows leaves ~1e-16; constraint sets
/// conditioned better than 1e10 keep their rank), 1e-5 in float (where the
/// round-off of dependent rows reaches ~1e-7).
template <class T>
UKB_HD constexpr T default_rank_rtol() {
  return sizeof(T) >= 8 ? T(1e-10) : T(1e-5);
}

/// Relative tolerance of the consistency check of the constraints:
/// sqrt(epsilon) of T (1.5e-8 in double, 3.5e-4 in float). An evaluation is
/// *inconsistent* where max_i |(A q'' - b)_i| exceeds this times the scale
/// max_i (|b_i| + sum_k |A_ik a_k|) of the right-hand side r = b - A a, a =
/// M^{-1} Q (and that scale is not 0: then r = 0, which every A meets): no
/// acceleration meets every row, and q'' is the least-squares compromise.
/// Round-off, even with cond(B) ~ 1e7, stays well below it.
template <class T>
UKB_HD constexpr T consistency_rtol() {
  return sizeof(T) >= 8 ? T(1.4901161193847656e-8) : T(3.4526698e-4);
}

/// Slack of the end time, relative to dt: a system whose time is within
/// dt * end_slack of t_end has reached it (no step of that size is taken),
/// and a remaining interval below dt * (1 + end_slack) is covered by one
/// shortened step that lands on t_end exactly.
inline constexpr double end_slack = 1e-9;

/// Most bisections of an event location (the bracket halves each time, so
/// 200 reach the resolution of any floating-point type long before).
inline constexpr int max_bisections = 200;

/// Default width (time units) to which an event instant is bracketed.
inline constexpr double default_event_tol = 1e-10;

/// Default Baumgarte rate alpha = beta = gamma, in 1/time units (a drift is
/// critically damped in about 0.1 time units: 0.1 s for the built-in
/// models, which are in SI units). A fixed rate keeps RK4's fourth order: a
/// rate tied to dt would make the stabilised equation change with dt.
inline constexpr double default_baumgarte_rate = 10.0;

/// Default relative tolerance of the projection onto the constraint
/// manifold: 1e-10 in double, 1e-5 in float.
template <class T>
constexpr double default_projection_tol() {
  return sizeof(T) >= 8 ? 1e-10 : 1e-5;
}

/// Default number of Gauss–Newton corrections per level of the projection.
inline constexpr int default_projection_iters = 4;

/// A rank decision is marginal (counted in rank_marginal) where a singular
/// value of B lies within this factor of the cut rtol * s_max, either side:
/// a perturbation of that relative size could change the rank. The Gram
/// route of the pseudo-inverse is taken only with this margin.
inline constexpr double rank_margin = 100.0;

/// Adaptive steps (Dormand–Prince 5(4), integrator.method = "dopri5"):
/// default tolerances of the error control. A step is accepted when the
/// root mean square over the 2n components of q and q' of
/// err_i / (atol_i + rtol max(|y_i| at the start, |y_i| at the end)) is
/// at most 1.
inline constexpr double default_rtol = 1e-6;
inline constexpr double default_atol = 1e-9;

/// Components that can have an absolute tolerance of their own (atol per
/// coordinate: n values, or 2n for q then q'); larger models take one.
inline constexpr int max_atol = 128;

/// The PI step-size controller of Hairer's DOPRI5 (Hairer, Norsett and
/// Wanner, Solving ODEs I, section II.4; Gustafsson's PI control): with the
/// error norm err of the step and err_prev that of the last accepted one,
///     h_new = h / clamp(err^(0.2 - 0.75 beta) / err_prev^beta / safety,
///                       1 / step_grow_max, 1 / step_shrink_min),
/// err_prev starting at, and floored to, err_floor. A rejected step
/// (err > 1) is tried again with h / min(1 / step_shrink_min,
/// err^(0.2 - 0.75 beta) / safety), and the step after a rejection does not
/// grow.
inline constexpr double pi_beta = 0.04;
inline constexpr double step_safety = 0.9;
inline constexpr double step_shrink_min = 0.2;  ///< h_new >= 0.2 h
inline constexpr double step_grow_max = 10.0;   ///< h_new <= 10 h
inline constexpr double err_floor = 1e-4;

/// Adaptive steps: a step below this many units in the last place of the
/// time cannot advance it; the error control asking for one ends the
/// system with failed_step_size (as one below dt_min does).
inline constexpr double min_step_ulps = 10.0;

/// Whether steps of `dt` advance the time everywhere on [t0, t_last] (the
/// largest |t| gains at least dt/1000 from a step, and t_last is finite): a
/// smaller step is refused by `ukb run` and `ukb trajectory` alike (the time
/// would stand still).
inline bool step_advances_time(double t0, double t_last, double dt) {
  const double a = t0 < 0 ? -t0 : t0, b = t_last < 0 ? -t_last : t_last, big = a > b ? a : b;
  return t_last - t_last == 0 && big + dt * 1e-3 > big;
}

}  // namespace ukb::policy
