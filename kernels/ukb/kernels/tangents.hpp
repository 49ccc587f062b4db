/// @file tangents.hpp
/// @brief Forward sensitivities through events (issue 52): the derivative
///        of a located event's time, and of the state there, for a model
///        run on dual numbers (ukb/dual.hpp). Nothing for other scalars.
///
/// An event is located by values (a bisection, a root of the dense output),
/// so the located time carries no derivative of its own: the state there
/// has the tangents of the state at that time held fixed. The event time
/// t_e(p) is where the event function g keeps its located value, g(x(t_e;
/// p), t_e; p) = const: by the implicit function theorem
///     dt_e/dp = -g_p / g',  g_p the tangent of g at the located state
///                           (time held), g' = dg/dt along the motion,
/// and the state there moves with it: dx_e/dp = dx/dp + x' dt_e/dp
/// (docs/design.md, "Forward sensitivities"). g' is the directional
/// derivative of the model's event function along (q', q'', 1), taken on
/// the model's own dual numbers, the direction in their first tangent and
/// the parameters' tangents dropped (so a model file needs no `rebind`
/// for it). Where g' is zero or
/// not finite (an event that grazes zero) no derivative exists: the
/// tangents become NaN, so that a result without a derivative is not
/// silently wrong.
#pragma once

#include <type_traits>

#include "ukb/dual.hpp"
#include "ukb/kernels/uk.hpp"
#include "ukb/model.hpp"
#include "ukb/settings.hpp"

namespace ukb::kernels {

/// The rate dg/dt of the event function g of a model on dual numbers at
/// (q, q', t) moving with q'' (values only): g on (q, q', t) whose first
/// tangent is (q', q'', 1), the others and the parameters' zero.
template <Model Mo>
UKB_HD typename Mo::Scalar::value_type event_rate(const typename Mo::Scalar* q, const typename Mo::Scalar* qd,
                                                 const typename Mo::Scalar* qdd, typename Mo::Scalar t,
                                                 const typename Mo::Params& p) {
  using T = typename Mo::Scalar;
  typename Mo::Params values = p;
  Mo::visit_params(values, [](const char*, T& x, const char*) { x = T(x.v); });
  T q1[Mo::n], qd1[Mo::n];
  for (int j = 0; j < Mo::n; ++j) {
    q1[j] = T(q[j].v), qd1[j] = T(qd[j].v);
    q1[j].d[0] = qd[j].v;
    qd1[j].d[0] = qdd[j].v;
  }
  return Mo::event(q1, qd1, T::variable(t.v, 0), values).d[0];
}

/// At a located event of a model on dual numbers: moves the tangents of
/// (q, q', t) to those of the event's time and state (this file's
/// documentation); NaN tangents where the event's rate is zero or not
/// finite, or where the acceleration cannot be evaluated. Nothing for
/// other scalars.
template <Model Mo>
UKB_HD void event_tangents(typename Mo::Scalar* q, typename Mo::Scalar* qd, typename Mo::Scalar& t,
                           const typename Mo::Params& p, const RunSettings<typename Mo::Scalar>& s) {
  using T = typename Mo::Scalar;
  if constexpr (is_dual<T> && HasEvents<Mo>) {
    using S = typename T::value_type;
    constexpr int K = T::tangents;
    Accel<Mo> a;
    const Status st = uk_eval_rare<Mo, true>(q, qd, t, p, s.rank_rtol, a, s.baumgarte);
    const T g = Mo::event(q, qd, t, p);
    const S rate = st == Status::ok ? event_rate<Mo>(q, qd, a.qdd, t, p) : S(0);
    const bool defined = rate != S(0) && rate - rate == S(0);
    const S nan = std::numeric_limits<S>::quiet_NaN();
    for (int k = 0; k < K; ++k) {
      const S dt = defined ? -g.d[k] / rate : nan;
      t.d[k] += dt;
      for (int j = 0; j < Mo::n; ++j) {
        q[j].d[k] += qd[j].v * dt;
        qd[j].d[k] += (st == Status::ok ? a.qdd[j].v : nan) * dt;
      }
    }
  } else {
    (void)q, (void)qd, (void)t, (void)p, (void)s;
  }
}

}  // namespace ukb::kernels
