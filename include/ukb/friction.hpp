/// @file friction.hpp
/// @brief Coulomb friction for a point mass on a surface or a curve (a model
///        with mass matrix m I and one contact row): the sliding and static
///        force, the static test, and stick detection in any dimension (a
///        stop event and the handler that finishes the stop in closed form).
///
/// For a model of n coordinates whose one constraint row A q'' = b holds
/// the mass on a surface (n = 3: a point on a surface in space; n = 2: on a
/// curve in the plane), the sliding velocity v_t is q' less its part along
/// the row's normal A, the normal force N the ideal constraint force, and
/// the friction force -mu |N| v_t / |v_t|:
///
/// | hook | call |
/// |---|---|
/// | `nonideal` | `ukb::friction::force<Model>(q, qd, t, p, Qc_ideal, mu, C)` |
/// | `event` | `return ukb::friction::stop_event<Model>(q, qd, t, p, mu, lookahead);` |
/// | `on_event(T* q, T* qd, T& t, p)` | `return ukb::friction::finish_stop<Model>(q, qd, t, p, mu);` |
///
/// The stop. In two or more dimensions the sliding velocity has no sign,
/// and near a stop its direction turns at a rate |F_t| / (m |v_t|) that
/// grows without bound (F_t the tangential part of the impressed force):
/// a fixed step cannot follow it (RK4 turns unstable and the mass creeps on
/// for ever) and an adaptive one approaches the stop in ever shorter steps.
/// The stop event therefore fires a little before the stop, where the speed
/// falls below what friction takes away in `lookahead` seconds, and its
/// handler finishes the motion in closed form: over so short an interval
/// the forces are constant, and a mass sliding under a constant pull F_t
/// and a constant friction mu |N| > |F_t| stops at a time and a place known
/// in closed form (docs/design.md, "Stick detection in any dimension"). The
/// handler moves q and the time there, sets q' to zero, and keeps the mass
/// at rest for good where static friction can hold it (`holds`). Set
/// `lookahead` to about the RK4 step (any positive value with Dormand–Prince);
/// the result is exact where the forces are constant over the last
/// `lookahead`-sized stretch (a plane) and otherwise in error by their change
/// over it.
#pragma once

#include <cmath>

#include "ukb/config.hpp"
#include "ukb/model.hpp"

namespace ukb::friction {

namespace detail {

/// The largest |x_i| where it is outside [1e-150, 1e150] ([1e-15, 1e15] in
/// float: squares of the components would underflow or overflow, as for a
/// bead of mass 1e-200), else 1:
/// the friction helpers divide by it before squaring, so that their
/// decisions and magnitudes hold at any scale and are bitwise unchanged at
/// ordinary ones.
template <int N, class T>
UKB_HD inline T square_safe_scale(const T* x) {
  using std::abs;
  T s = T(0);
  for (int i = 0; i < N; ++i) s = pick(abs(x[i]) > s, abs(x[i]), s);
  constexpr bool wide = sizeof(scalar_of<T>) >= 8;
  const T lo = lit<T>(wide ? 1e-150 : 1e-15), hi = lit<T>(wide ? 1e150 : 1e15);
  return pick(s > T(0) && (s < lo || s > hi) && s - s == T(0), s, T(1));
}

/// |x| without underflow or overflow of the squares (square_safe_scale).
template <int N, class T>
UKB_HD inline T safe_norm(const T* x) {
  using std::sqrt;
  const T s = square_safe_scale<N>(x);
  T r = T(0);
  if (all_lanes(s == T(1))) {  // x / 1 is x: the same bits without the divisions
    for (int i = 0; i < N; ++i) r += x[i] * x[i];
  } else {
    for (int i = 0; i < N; ++i) r += (x[i] / s) * (x[i] / s);
  }
  return s * sqrt(r);
}

}  // namespace detail

/// Coulomb sliding friction C = -mu |Qc_ideal| v/|v| (C = 0 when v = 0): the
/// friction force opposes the sliding velocity v and its magnitude is mu
/// times the normal force, here the ideal constraint force Qc_ideal (N).
template <int N, class T>
UKB_HD inline void sliding_force(const T* v, const T* Qc_ideal, T mu, T* C) {
  const T speed = detail::safe_norm<N>(v);
  const T k = pick(speed > T(0), -mu * detail::safe_norm<N>(Qc_ideal) / speed, T(0));
  for (int i = 0; i < N; ++i) C[i] = k * v[i];
}

/// Static Coulomb friction on a point mass momentarily at rest against one
/// constraint row with normal a (N) under the impressed force Q (N), when
/// the row's b vanishes at rest (so the normal force balances the normal
/// part of Q): with Q_n = (a.Q / |a|^2) a and Q_t = Q - Q_n, friction can
/// hold the mass exactly when |Q_t| <= mu |Q_n|.
template <int N, class T>
UKB_HD inline bool holds(const T* a_in, const T* Q_in, T mu) {
  // The test is homogeneous in a and in Q: both scaled to ordinary size.
  const T sa = detail::square_safe_scale<N>(a_in), sq = detail::square_safe_scale<N>(Q_in);
  T a[N], Q[N];
  for (int i = 0; i < N; ++i) a[i] = a_in[i] / sa, Q[i] = Q_in[i] / sq;
  T aa = T(0), aQ = T(0);
  for (int i = 0; i < N; ++i) {
    aa += a[i] * a[i];
    aQ += a[i] * Q[i];
  }
  const T k = aQ / aa;
  T t2 = T(0), n2 = T(0);
  for (int i = 0; i < N; ++i) {
    const T qn = k * a[i];
    n2 += qn * qn;
    t2 += (Q[i] - qn) * (Q[i] - qn);
  }
  return t2 <= mu * mu * n2;
}

/// Coulomb friction on a point-mass model with one contact row whose b
/// vanishes at rest (mass matrix m I), on the sliding velocity v_t: the
/// part of q' along the contact (q' less its component along the row's
/// normal a; drift leaves q' slightly off the contact, and friction along
/// the drifted q' would leave part of the tangential motion unopposed: an
/// adaptive method then followed a spurious slide at a speed of the
/// drift's size, for ever). Sliding (v_t != 0), the force of
/// sliding_force on v_t; momentarily at rest (v_t = 0), static friction
/// against the tangential part Q_t of the impressed force: -Q_t where that
/// is at most mu |N| (the mass stays at rest), else -mu |N| Q_t / |Q_t|
/// (kinetic friction opposing the impending motion), N = Qc_ideal the
/// normal force.
template <class Mo, class T>
UKB_HD inline void force(const T* q, const T* qd, T t, const typename Mo::Params& p,
                                    const T* Qc_ideal, T mu, T* C) {
  constexpr int n = Mo::n;
  static_assert(Mo::m == 1, "one contact row");
  T A[n], b[1];
  Mo::constraints(q, qd, t, p, A, b);
  const T sa = detail::square_safe_scale<n>(A);
  if (!all_lanes(sa == T(1)))  // A / 1 is A: the same bits without the divisions
    for (int i = 0; i < n; ++i) A[i] /= sa;  // the projections are homogeneous in A
  T aa = T(0), av = T(0);
  for (int i = 0; i < n; ++i) {
    aa += A[i] * A[i];
    av += A[i] * qd[i];
  }
  T vt[n];
  T v2 = T(0);
  for (int i = 0; i < n; ++i) {
    vt[i] = qd[i] - av / aa * A[i];
    v2 += vt[i] * vt[i];
  }
  // Sliding; then, where some lane is at rest, the law at rest, each lane
  // taking its own (pick: also on packs).
  T slide[n];
  sliding_force<n>(vt, Qc_ideal, mu, slide);
  const auto sliding = v2 > T(0);
  if (all_lanes(sliding)) {
    for (int i = 0; i < n; ++i) C[i] = slide[i];
    return;
  }
  T Q[n];
  Mo::force(q, qd, t, p, Q);
  T aQ = T(0);
  for (int i = 0; i < n; ++i) aQ += A[i] * Q[i];
  // Q_t in an array of its own: C written once on each path kept nvcc from
  // storing C to local memory at every evaluation.
  T Qt[n];
  for (int i = 0; i < n; ++i) Qt[i] = Q[i] - aQ / aa * A[i];
  const T limit = mu * detail::safe_norm<n>(Qc_ideal), qt = detail::safe_norm<n>(Qt);
  const T k = pick(qt <= limit, T(-1), -limit / qt);
  for (int i = 0; i < n; ++i) C[i] = pick(sliding, slide[i], Qt[i] * k);
}

/// The stick-or-slip handler of a Coulomb point-mass model with one
/// constraint row (mass matrix m I) at a located zero of its sliding
/// velocity (the state is the last one reached without crossing it, so the
/// velocity is zero to within the event tolerance): the velocity is set to
/// exactly zero; the system then stops for good if static friction can hold
/// it there (holds) and slides on otherwise (the friction of
/// force at rest then opposes the impending motion).
template <class Mo, class T>
UKB_HD inline EventAction stick_or_slip(T* q, T* qd, T t, const typename Mo::Params& p,
                                                T mu) {
  static_assert(Mo::m == 1, "one contact row");
  for (int i = 0; i < Mo::n; ++i) qd[i] = T(0);
  T A[Mo::n], b[1], Q[Mo::n];
  Mo::constraints(q, qd, t, p, A, b);
  Mo::force(q, qd, t, p, Q);
  return holds<Mo::n>(A, Q, mu) ? EventAction::stop : EventAction::resume;
}

namespace detail {

/// What the stop event and its handler need of a point-mass model with one
/// contact row at a state: the sliding velocity, the tangential part of the
/// impressed force, the speed, the normal force's magnitude and the mass.
template <class Mo, class T>
struct Contact {
  T vt[Mo::n];  ///< q' less its part along the row's normal
  T Ft[Mo::n];  ///< the impressed force Q less its part along the normal
  T speed{};    ///< |vt|
  T normal{};   ///< |N|: the ideal constraint force, |m b - A.Q| / |A|
  T mass{};     ///< m (M = m I)
};

template <class Mo, class T>
UKB_HD inline void contact(const T* q, const T* qd, T t, const typename Mo::Params& p, Contact<Mo, T>& c) {
  using std::abs;
  using std::sqrt;
  constexpr int n = Mo::n;
  static_assert(Mo::m == 1, "one contact row");
  T A[n], b[1], Q[n], M[n * n];
  Mo::constraints(q, qd, t, p, A, b);
  Mo::force(q, qd, t, p, Q);
  Mo::mass(q, t, p, M);
  const T sa = square_safe_scale<n>(A);
  if (!all_lanes(sa == T(1)))  // A / 1 is A: the same bits without the divisions
    for (int i = 0; i < n; ++i) A[i] /= sa;  // A q'' = b scaled as a whole
  T aa = T(0), av = T(0), aQ = T(0);
  for (int i = 0; i < n; ++i) {
    aa += A[i] * A[i];
    av += A[i] * qd[i];
    aQ += A[i] * Q[i];
  }
  for (int i = 0; i < n; ++i) {
    c.vt[i] = qd[i] - av / aa * A[i];
    c.Ft[i] = Q[i] - aQ / aa * A[i];
  }
  c.speed = safe_norm<n>(c.vt);
  c.mass = M[0];
  // m q'' = Q + lambda A with A q'' = b: lambda = (m b - A.Q) / A.A.
  c.normal = abs(c.mass * (b[0] / sa) - aQ) / sqrt(aa);
}

/// Where mu |N| exceeds the pull |F_t| by less than 1/stop_ramp of itself,
/// the stop event looks ahead less, down to not at all at the static limit
/// (there the mass cannot stop, and a handler could not finish a stop).
inline constexpr int stop_ramp = 64;

}  // namespace detail

/// The stop event of a sliding point mass (see the file's documentation):
/// g = |v_t| - lookahead * r, r = mu |N| / m the deceleration friction gives,
/// where static friction could hold the mass (mu |N| > |F_t|; less near the
/// limit, none below it), and exactly 0 where that is not positive: at rest
/// and within the look-ahead of a stop. While the mass slides towards a
/// stop g falls (|v_t| falls at least at r - |F_t| / m > 0) and reaches 0
/// a little before it, where the speed left is what friction takes away in
/// `lookahead` seconds: an event (docs/adding-a-model.md, "The event
/// contract": 0 is not on the start's side). A sample that starts at rest
/// or within the look-ahead has its handler consulted before its first
/// step, and a step from a state at 0 (the handler let the mass slide on
/// from rest) is taken unchecked. Written with `pick`, without branches on
/// values, for the SIMD packs of a model's `rebind` (the built-in
/// puck_incline's).
template <class Mo, class T>
UKB_HD inline T stop_event(const T* q, const T* qd, T t, const typename Mo::Params& p, T mu, T lookahead) {
  detail::Contact<Mo, T> c;
  detail::contact<Mo>(q, qd, t, p, c);
  const T r = mu * c.normal / c.mass, a = detail::safe_norm<Mo::n>(c.Ft) / c.mass, excess = r - a;
  const T rate = pick(excess * T(detail::stop_ramp) >= r, r, pick(excess > T(0), excess * T(detail::stop_ramp), T(0)));
  const T g = c.speed - lookahead * rate;
  return pick(g <= T(0), T(0), g);  // a NaN (of a NaN look-ahead, say) stays NaN: the engine fails it
}

/// The handler of stop_event: from the located state, the motion to the
/// stop under the pull F_t and the friction mu |N| held constant (a mass
/// launched at speed s at the angle phi from F_t, with f = |F_t| / m and
/// r = mu |N| / m > f, stops after (s r + s f cos phi) / (r^2 - f^2) having
/// moved s^2 (r cos phi + f (C^2 + S^2)) / (2 (r^2 - f^2)) along F_t and
/// s^2 sin phi (C / (2r - f) + S / (2r + f)) across it, C = cos^2(phi/2),
/// S = sin^2(phi/2); docs/design.md derives them): q moves there (in the
/// tangent plane), the time t moves to the stop, q' is set to zero, and the
/// mass stops for good where static friction holds it (stick_or_slip).
/// Where it cannot stop (mu |N| <= |F_t| at the located state) the velocity
/// is set to zero there and the mass slides on from rest. On a curved
/// surface q moves in the tangent plane, off the surface by about d^2 / (2
/// rho) for a move d on a radius of curvature rho (1e-10 of the radius in
/// tests/scipy_bowl.py's bowl).
///
/// Declare the handler with `T& t`: with `T t` this compiles, moves q to the
/// stop and loses the time's move (the stop is then early by up to the
/// look-ahead), and nothing can tell.
template <class Mo, class T>
UKB_HD inline EventAction finish_stop(T* q, T* qd, T& t, const typename Mo::Params& p, T mu) {
  constexpr int n = Mo::n;
  detail::Contact<Mo, T> c;
  detail::contact<Mo>(q, qd, t, p, c);
  const T s = c.speed, fn = detail::safe_norm<n>(c.Ft), r = mu * c.normal / c.mass, f = fn / c.mass;
  if (s > T(0) && r > f) {
    T e[n];  // the direction of the pull; any direction where there is none (f = 0)
    for (int i = 0; i < n; ++i) e[i] = f > T(0) ? c.Ft[i] / fn : c.vt[i] / s;
    T ue = T(0);
    for (int i = 0; i < n; ++i) ue += c.vt[i] * e[i];
    const T cphi = ue / s, C = T(0.5) * (T(1) + cphi), S = T(0.5) * (T(1) - cphi);
    const T D = (r - f) * (r + f);
    const T across = s * (C / (T(2) * r - f) + S / (T(2) * r + f));
    const T along = s * (r * ue + f * s * (C * C + S * S)) / (T(2) * D);
    for (int i = 0; i < n; ++i) q[i] += (c.vt[i] - ue * e[i]) * across + e[i] * along;
    t += (s * r + ue * f) / D;
  }
  return stick_or_slip<Mo>(q, qd, t, p, mu);
}

}  // namespace ukb::friction
