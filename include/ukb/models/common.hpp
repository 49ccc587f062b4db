/// @file common.hpp
/// @brief Small building blocks shared by the built-in models.
#pragma once

#include <cmath>

#include "ukb/config.hpp"
#include "ukb/friction.hpp"
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

/// The friction helpers' names before they became ukb/friction.hpp's public
/// API, kept for model files written for them (not marked deprecated: the
/// CUDA check of a model file turns every warning into an error); new code
/// calls ukb::friction::force and ukb::friction::stick_or_slip.
template <class Mo, class T>
UKB_HD inline void coulomb_friction(
    const T* q, const T* qd, T t, const typename Mo::Params& p, const T* Qc_ideal, T mu, T* C) {
  ukb::friction::force<Mo>(q, qd, t, p, Qc_ideal, mu, C);
}
template <class Mo, class T>
UKB_HD inline EventAction coulomb_stick_or_slip(
    T* q, T* qd, T t, const typename Mo::Params& p, T mu) {
  return ukb::friction::stick_or_slip<Mo>(q, qd, t, p, mu);
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
