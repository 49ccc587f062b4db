/// @file events.hpp
/// @brief Events inside a step: whether a step crosses the model's event
///        (the sign of its event function g at the stages and at the end),
///        the bisection on the step size that locates the crossing (RK4),
///        and its location on a step's dense output (Dormand–Prince).
///
/// For Coulomb friction g is the sliding velocity: where it reaches zero the
/// friction force jumps, and a Runge–Kutta step must not be trusted across
/// it. A step that keeps the sign of g at every stage state and at its end
/// is *clean*; one that is not is replaced by the longest clean step from
/// the same start, found by bisection on the step size.
#pragma once

#include "ukb/config.hpp"
#include "ukb/dual.hpp"
#include "ukb/kernels/lanes.hpp"
#include "ukb/kernels/uk.hpp"
#include "ukb/model.hpp"
#include "ukb/policy.hpp"

namespace ukb::kernels {

/// True (per lane) when the event function g is on the side of g0 (> 0 or
/// < 0) and not zero: a stage or an end state that does not cross the event.
template <class V>
UKB_HD inline MaskOf<V> same_side(const V& g, const V& g0) {
  return g != V(0) && (g > V(0)) == (g0 > V(0));
}

/// The stage observer of a step that is checked for the event: `clean`
/// (per lane) stays true while g keeps the sign of g0 at every state it
/// sees, on the lanes where `checks` holds.
template <Model Mo, class V>
struct EventCheck {
  using Lane = Lanes<V>;
  const ParamsOf<Mo, V>* p;
  V g0;
  MaskOf<V> checks;
  MaskOf<V>* clean;

  UKB_HD void operator()(const V* q, const V* qd, const V& t) const {
    if constexpr (HasEvents<Mo>) {
      if (!Lane::any(checks)) return;
      const V g = ModelLanes<Mo, V>::event(q, qd, t, *p);
      *clean = *clean && (!checks || same_side(g, g0));
    } else {
      (void)q, (void)qd, (void)t;
    }
  }
};

/// The bisection on the step size that locates an event inside a step of
/// size h that is not clean: between the longest clean trial step `lo`
/// (initially 0) and the shortest unclean one `hi` (initially h), each trial
/// a step of size lo + (hi - lo) / 2 from the step's start, until
/// hi - lo <= tol (or the bracket is at the resolution of T, or
/// policy::max_bisections trials were taken). The state at start + lo is
/// the last instant reached without crossing the event, within tol of the
/// first that crosses it.
template <class T>
struct Bisection {
  T lo{}, hi{};  ///< the bracket (step sizes from the step's start)
  int trials = 0;

  /// A bracket [0, h).
  UKB_HD static Bisection over(T h) { return {T(0), h, 0}; }

  /// The next trial step size x; false when the location is done.
  UKB_HD bool next(T tol, T& x) const {
    if (!(trials < policy::max_bisections && hi - lo > tol)) return false;
    x = lo + T(0.5) * (hi - lo);
    return x > lo && x < hi;  // else the bracket is at the resolution of T
  }

  /// The outcome of the trial of size x.
  UKB_HD void record(T x, bool clean) {
    ++trials;
    (clean ? lo : hi) = x;
  }
};

/// The first crossing of an event along a step of size h, on the step's
/// dense output: `event_at(theta)` is the event function at t0 + theta h
/// (theta in [0, 1]), g0 its value at the start. The first of theta = 1/8,
/// 2/8, ..., 1 whose value is not on g0's side brackets the crossing, and
/// the Illinois method narrows the bracket to event_tol / h (or
/// policy::max_bisections trials, or the resolution of T); theta is then
/// the bracket's lower end, the last instant on the start's side. False
/// where no sampled point crosses.
template <class T, class EventAt>
UKB_HD bool locate_on_dense(const EventAt& event_at, T g0, T h, T event_tol, T& theta) {
  T lo = T(0), glo = g0, hi = T(-1), ghi = T(0);
  for (int j = 1; j <= 8; ++j) {
    const T th = T(j) / T(8), gt = event_at(th);
    if (!same_side(gt, g0)) {
      hi = th, ghi = gt;
      break;
    }
    lo = th, glo = gt;
  }
  if (hi < T(0)) return false;
  // Illinois: regula falsi whose retained end has its value halved when
  // it is retained twice; a bisection where the secant leaves the bracket.
  int side = 0;
  for (int it = 0; it < policy::max_bisections && (hi - lo) * h > event_tol; ++it) {
    T th = (lo * ghi - hi * glo) / (ghi - glo);
    if (!(th > lo && th < hi)) th = lo + T(0.5) * (hi - lo);
    if (!(th > lo && th < hi)) break;  // the bracket is at the resolution of T
    const T gt = event_at(th);
    if (same_side(gt, g0)) {
      lo = th, glo = gt;
      if (side == -1) ghi *= T(0.5);
      side = -1;
    } else {
      hi = th, ghi = gt;
      if (side == 1) glo *= T(0.5);
      side = 1;
    }
  }
  theta = without_tangents(lo);  // dual numbers: located by values (tangents.hpp moves the tangents)
  return true;
}

}  // namespace ukb::kernels
