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
/// the model rebound to a dual number of one tangent. Where g' is zero or
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

namespace detail {

/// The values of a model's parameters on another scalar type: the fields
/// that visit_params gives, in its order, value by value.
template <Model Mo, class To>
UKB_HD void param_values(const typename Mo::Params& p, typename To::Params& out) {
  using U = typename To::Scalar;
  static_assert(param_count<Mo>() <= 64, "ukb: a model on dual numbers with events has at most 64 parameters");
  U* into[64] = {};
  int k = 0;
  To::visit_params(out, [&](const char*, U& x, const char*) {
    if (k < 64) into[k] = &x;
    ++k;
  });
  k = 0;
  Mo::visit_params(p, [&](const char*, const typename Mo::Scalar& x, const char*) {
    if (k < 64 && into[k]) *into[k] = U(x.v);
    ++k;
  });
}

}  // namespace detail

/// The rate dg/dt of the event function g of a model on dual numbers at
/// (q, q', t) moving with q'' (values only).
template <Model Mo>
UKB_HD typename Mo::Scalar::value_type event_rate(const typename Mo::Scalar* q, const typename Mo::Scalar* qd,
                                                 const typename Mo::Scalar* qdd, typename Mo::Scalar t,
                                                 const typename Mo::Params& p) {
  using S = typename Mo::Scalar::value_type;
  using D1 = Dual<S, 1>;
  using M1 = typename Mo::template rebind<D1>;
  typename M1::Params p1;
  detail::param_values<Mo, M1>(p, p1);
  D1 q1[Mo::n], qd1[Mo::n];
  for (int j = 0; j < Mo::n; ++j) {
    q1[j] = D1(q[j].v), qd1[j] = D1(qd[j].v);
    q1[j].d[0] = qd[j].v;
    qd1[j].d[0] = qdd[j].v;
  }
  return M1::event(q1, qd1, D1::variable(t.v, 0), p1).d[0];
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
    static_assert(requires { typename Mo::template rebind<Dual<typename T::value_type, 1>>; },
                  "ukb: a model with events run on dual numbers needs `template <class U> using rebind` "
                  "(the rate of its event function is taken on another dual number)");
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
