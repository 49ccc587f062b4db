/// @file common.hpp
/// @brief Small building blocks shared by the built-in models.
#pragma once

#include <cmath>

#include "ukb/config.hpp"
#include "ukb/model.hpp"

namespace ukb::models::detail {

/// M = m I (n x n, row-major).
template <int N, class T>
UKB_HD inline void scalar_mass(T mass, T* M) {
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) M[i * N + j] = i == j ? mass : T(0);
}

/// The diagonal of M = m I (N values; a model's mass_diagonal, model.hpp).
template <int N, class T>
UKB_HD inline void scalar_mass_diagonal(T mass, T* d) {
  for (int i = 0; i < N; ++i) d[i] = mass;
}

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

/// Coulomb sliding friction C = -mu |Qc_ideal| v/|v| (C = 0 when v = 0): the
/// friction force opposes the sliding velocity v and its magnitude is mu
/// times the normal force, here the ideal constraint force Qc_ideal (N).
template <int N, class T>
UKB_HD inline void coulomb_sliding(const T* v, const T* Qc_ideal, T mu, T* C) {
  const T speed = safe_norm<N>(v);
  const T k = pick(speed > T(0), -mu * safe_norm<N>(Qc_ideal) / speed, T(0));
  for (int i = 0; i < N; ++i) C[i] = k * v[i];
}

/// Static Coulomb friction on a point mass momentarily at rest against one
/// constraint row with normal a (N) under the impressed force Q (N), when
/// the row's b vanishes at rest (so the normal force balances the normal
/// part of Q): with Q_n = (a.Q / |a|^2) a and Q_t = Q - Q_n, friction can
/// hold the mass exactly when |Q_t| <= mu |Q_n|.
template <int N, class T>
UKB_HD inline bool coulomb_holds(const T* a_in, const T* Q_in, T mu) {
  // The test is homogeneous in a and in Q: both scaled to ordinary size.
  const T sa = square_safe_scale<N>(a_in), sq = square_safe_scale<N>(Q_in);
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
/// coulomb_sliding on v_t; momentarily at rest (v_t = 0), static friction
/// against the tangential part Q_t of the impressed force: -Q_t where that
/// is at most mu |N| (the mass stays at rest), else -mu |N| Q_t / |Q_t|
/// (kinetic friction opposing the impending motion), N = Qc_ideal the
/// normal force.
template <class Mo, class T>
UKB_HD inline void coulomb_friction(const T* q, const T* qd, T t, const typename Mo::Params& p,
                                    const T* Qc_ideal, T mu, T* C) {
  constexpr int n = Mo::n;
  static_assert(Mo::m == 1, "one contact row");
  T A[n], b[1];
  Mo::constraints(q, qd, t, p, A, b);
  const T sa = square_safe_scale<n>(A);
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
  coulomb_sliding<n>(vt, Qc_ideal, mu, slide);
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
  const T limit = mu * safe_norm<n>(Qc_ideal), qt = safe_norm<n>(Qt);
  const T k = pick(qt <= limit, T(-1), -limit / qt);
  for (int i = 0; i < n; ++i) C[i] = pick(sliding, slide[i], Qt[i] * k);
}

/// The stick-or-slip handler of a Coulomb point-mass model with one
/// constraint row (mass matrix m I) at a located zero of its sliding
/// velocity (the state is the last one reached without crossing it, so the
/// velocity is zero to within the event tolerance): the velocity is set to
/// exactly zero; the system then stops for good if static friction can hold
/// it there (coulomb_holds) and slides on otherwise (the friction of
/// coulomb_friction at rest then opposes the impending motion).
template <class Mo, class T>
UKB_HD inline EventAction coulomb_stick_or_slip(T* q, T* qd, T t, const typename Mo::Params& p,
                                                T mu) {
  static_assert(Mo::m == 1, "one contact row");
  for (int i = 0; i < Mo::n; ++i) qd[i] = T(0);
  T A[Mo::n], b[1], Q[Mo::n];
  Mo::constraints(q, qd, t, p, A, b);
  Mo::force(q, qd, t, p, Q);
  return coulomb_holds<Mo::n>(A, Q, mu) ? EventAction::stop : EventAction::resume;
}

/// A point q in the plane held at distance r from the origin: residuals
/// pos = | |q| - r | and vel = |q . q'| / |q| (the radial speed).
template <class T>
UKB_HD inline void circle_residual(const T* q, const T* qd, T r, T& pos, T& vel) {
  using std::abs;
  using std::sqrt;
  const T d = sqrt(q[0] * q[0] + q[1] * q[1]);
  pos = abs(d - r);
  vel = abs(q[0] * qd[0] + q[1] * qd[1]) / d;
}

/// The circle |q| = r (q in the plane) as the row A = [x, y],
/// b = -(x'^2 + y'^2): phi = (|q|^2 - r^2) / 2 and phi' = q . q'.
template <class T>
UKB_HD inline void circle_row(const T* q, const T* qd, T r, T& phi, T& phid) {
  phi = lit<T>(0.5) * ((q[0] * q[0] + q[1] * q[1]) - r * r);
  phid = q[0] * qd[0] + q[1] * qd[1];
}

/// The state on the circle of radius r at the point r (c, s), (c, s) a unit
/// vector, moving counter-clockwise at angular rate omega: q = r (c, s),
/// q' = r omega (-s, c).
template <class T>
UKB_HD inline void circle_state(T r, T c, T s, T omega, T* q, T* qd) {
  q[0] = r * c;
  q[1] = r * s;
  qd[0] = -r * omega * s;
  qd[1] = r * omega * c;
}

/// The angular rate of a point moving on a circle about the origin:
/// (x y' - y x') / |q|^2.
template <class T>
UKB_HD inline T circle_rate(const T* q, const T* qd) {
  return (q[0] * qd[1] - q[1] * qd[0]) / (q[0] * q[0] + q[1] * q[1]);
}

/// The residuals of a model whose rows are all nonholonomic: no position
/// residual, and the norm of the rows' psi (Mo::constraint_rows) as the
/// velocity residual.
template <class Mo, class T>
UKB_HD inline void nonholonomic_residual(const T* q, const T* qd, T t, const typename Mo::Params& p, T& pos,
                                         T& vel) {
  using std::sqrt;
  T phi[Mo::m], psi[Mo::m];
  Mo::constraint_rows(q, qd, t, p, phi, psi);
  T s = T(0);
  for (int i = 0; i < Mo::m; ++i) s += psi[i] * psi[i];
  pos = T(0);
  vel = sqrt(s);
}
/// Kinetic energy 1/2 v^T M v (M n x n, row-major).
template <int N, class T>
UKB_HD inline T kinetic_energy(const T* M, const T* v) {
  T e = T(0);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) e += v[i] * M[i * N + j] * v[j];
  return T(0.5) * e;
}

/// Velocity-proportional damping C = -c v (N).
template <int N, class T>
UKB_HD inline void linear_damping(const T* v, T c, T* C) {
  for (int i = 0; i < N; ++i) C[i] = -c * v[i];
}

}  // namespace ukb::models::detail
