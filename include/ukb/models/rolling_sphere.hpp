/// @file rolling_sphere.hpp
/// @brief A homogeneous sphere rolling without slipping on a horizontal
///        plane, in Euler angles (the seed text on Lagrange equations with
///        multipliers, section 13.6).
#pragma once

#include <array>
#include <cmath>

#include "ukb/config.hpp"
#include "ukb/models/common.hpp"

namespace ukb::models {

/// A homogeneous sphere of mass `m` and radius `r` rolling without slipping
/// on a horizontal plane, a horizontal force (Fx, Fy) at its centre.
///
/// - q = (x, y, psi, theta, phi): the centre, and the Z-X-Z Euler angles of
///   the body (precession, nutation, spin).
/// - T = m (x'^2 + y'^2)/2 + (m r^2/5)(psi'^2 + theta'^2 + phi'^2 +
///   2 psi' phi' cos theta), so M = diag(m, m, K) with
///   K = (2 m r^2/5) [[1, 0, cos theta], [0, 1, 0], [cos theta, 0, 1]].
/// - M depends on theta: the Lagrange equations M q'' = Q carry its
///   gyroscopic terms, k = 2 m r^2/5:
///   Q = (Fx, Fy, k theta' phi' sin theta, -k psi' phi' sin theta,
///   k psi' theta' sin theta) (no impressed torque).
/// - Constraints (nonholonomic: the contact point does not slip)
///   r phi' sin theta + x' cos psi + y' sin psi = 0 and
///   r theta' - x' sin psi + y' cos psi = 0, differentiated once:
///   A = [[cos psi, sin psi, 0, 0, r sin theta], [-sin psi, cos psi, 0, r, 0]],
///   b = (psi' (x' sin psi - y' cos psi) - r phi' theta' cos theta,
///        psi' (x' cos psi + y' sin psi)).
/// - No non-ideal force (C = 0): rolling without slipping does no work.
///
/// The centre then accelerates at 5 F / (7 m) at every admissible state,
/// psi' + phi' cos theta (the spin about the vertical) stays constant, and
/// with F = 0 the energy and the centre's velocity stay.
///
/// **Gimbal lock.** det K = (2 m r^2/5)^3 sin^2 theta: M is singular where
/// sin theta = 0 (theta = 0 or pi, the Euler angles' singularity, not the
/// sphere's). Such a state ends with status `failed_mass_matrix` (the
/// Cholesky factorisation finds no positive pivot), with no NaN passed on;
/// near it the angle rates grow like 1/sin theta. The natural initial
/// quantities refuse theta outside (0, pi).
///
/// Monitoring and `ukb run`: no holonomic row (position residual 0), the
/// velocity residual the norm of the two rows' slip speeds;
/// V = -(Fx x + Fy y); natural quantities x, y, psi, theta, phi, vx, vy
/// (the centre's velocity) and wz (the spin about the vertical): the
/// angular velocity is (-vy/r, vx/r, wz) (rolling), mapped to Euler-angle
/// rates.
template <class T>
struct RollingSphere {
  using Scalar = T;
  /// The same model on another arithmetic type: its physics functions are
  /// branch-free and take sines and cosines through ukb::math, so the CPU
  /// backend calls them on SIMD packs (model.hpp).
  template <class U>
  using rebind = RollingSphere<U>;
  static constexpr bool rebind_float = true;  ///< literals through lit<T>: float packs too
  static constexpr const char* name = "rolling_sphere";
  static constexpr const char* summary =
      "homogeneous sphere rolling without slipping on a plane (Z-X-Z Euler angles; M singular at "
      "sin theta = 0), horizontal force at the centre";
  static constexpr int n = 5;  // q = (x, y, psi, theta, phi)
  static constexpr int m = 2;  // no slip at the contact point
  static constexpr std::array<const char*, n> coords{"x", "y", "psi", "theta", "phi"};
  static constexpr std::array<const char*, 8> initial_names{"x", "y", "psi", "theta", "phi", "vx", "vy", "wz"};
  static constexpr std::array<const char*, 8> initial_docs{
      "centre, x",
      "centre, y",
      "precession angle (rad)",
      "nutation angle (rad), strictly between 0 and pi: at 0 and pi the Euler angles lock (> 0)",
      "spin angle (rad)",
      "velocity of the centre, x",
      "velocity of the centre, y",
      "angular velocity about the vertical"};

  struct Params {
    T m = T(1);    // mass
    T r = lit<T>(0.1);  // radius
    T Fx = T(0);   // horizontal force at the centre, x
    T Fy = T(0);   // horizontal force at the centre, y
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "mass (> 0)");
    f("r", p.r, "radius (> 0)");
    f("Fx", p.Fx, "constant horizontal force at the centre, x component");
    f("Fy", p.Fy, "constant horizontal force at the centre, y component");
  }

  UKB_HD static void mass(const T* q, T /*t*/, const Params& p, T* M) {
    const T k = T(2) * p.m * p.r * p.r / T(5), kc = k * math::cos(q[3]);
    for (int i = 0; i < n * n; ++i) M[i] = T(0);
    M[0] = p.m;
    M[6] = p.m;
    M[12] = k;          // (psi, psi)
    M[14] = kc;         // (psi, phi)
    M[18] = k;          // (theta, theta)
    M[22] = kc;         // (phi, psi)
    M[24] = k;          // (phi, phi)
  }

  UKB_HD static void force(const T* q, const T* qd, T /*t*/, const Params& p, T* Q) {
    const T ks = T(2) * p.m * p.r * p.r / T(5) * math::sin(q[3]);
    Q[0] = p.Fx;
    Q[1] = p.Fy;
    Q[2] = ks * qd[3] * qd[4];
    Q[3] = -ks * qd[2] * qd[4];
    Q[4] = ks * qd[2] * qd[3];
  }

  UKB_HD static void constraints(const T* q, const T* qd, T /*t*/, const Params& p, T* A, T* b) {
    const T cp = math::cos(q[2]), sp = math::sin(q[2]), ct = math::cos(q[3]), st = math::sin(q[3]);
    A[0] = cp;
    A[1] = sp;
    A[2] = T(0);
    A[3] = T(0);
    A[4] = p.r * st;
    A[5] = -sp;
    A[6] = cp;
    A[7] = T(0);
    A[8] = p.r;
    A[9] = T(0);
    b[0] = qd[2] * (qd[0] * sp - qd[1] * cp) - p.r * qd[4] * qd[3] * ct;
    b[1] = qd[2] * (qd[0] * cp + qd[1] * sp);
  }

  UKB_HD static void nonideal(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& /*p*/,
                              const T* /*Qc_ideal*/, const T* /*lambda*/, T* C) {
    for (int i = 0; i < n; ++i) C[i] = T(0);
  }

  UKB_HD static void residual(const T* q, const T* qd, T t, const Params& p, T& pos, T& vel) {
    detail::nonholonomic_residual<RollingSphere>(q, qd, t, p, pos, vel);
  }

  static constexpr std::array<RowKind, m> row_kinds{RowKind::nonholonomic, RowKind::nonholonomic};

  /// The two rows' slip speeds (A = d psi / dq').
  UKB_HD static void constraint_rows(const T* q, const T* qd, T /*t*/, const Params& p, T* phi, T* phid) {
    const T cp = math::cos(q[2]), sp = math::sin(q[2]);
    phi[0] = T(0);
    phi[1] = T(0);
    phid[0] = p.r * qd[4] * math::sin(q[3]) + qd[0] * cp + qd[1] * sp;
    phid[1] = p.r * qd[3] - qd[0] * sp + qd[1] * cp;
  }

  UKB_HD static T potential(const T* q, T /*t*/, const Params& p) { return -(p.Fx * q[0] + p.Fy * q[1]); }

  /// Rolling: the angular velocity is w = (-vy/r, vx/r, wz); with the line
  /// of nodes (cos psi, sin psi, 0) and the body axis (sin theta sin psi,
  /// -sin theta cos psi, cos theta): theta' = wx cos psi + wy sin psi,
  /// phi' = (wx sin psi - wy cos psi) / sin theta, psi' = wz - phi' cos theta.
  UKB_HD static bool initial_state(const T* ic, const Params& p, T* q, T* qd) {
    const T th = ic[3];
    if (!(th > T(0) && th < lit<T>(3.14159265358979323846))) return false;
    const T st = math::sin(th);
    if (!(st > T(0))) return false;
    const T cp = math::cos(ic[2]), sp = math::sin(ic[2]);
    const T wx = -ic[6] / p.r, wy = ic[5] / p.r;
    for (int i = 0; i < n; ++i) q[i] = ic[i];
    qd[0] = ic[5];
    qd[1] = ic[6];
    qd[3] = wx * cp + wy * sp;
    qd[4] = (wx * sp - wy * cp) / st;
    qd[2] = ic[7] - qd[4] * math::cos(th);
    return true;
  }

  UKB_HD static void natural_state(const T* q, const T* qd, const Params& /*p*/, T* ic) {
    for (int i = 0; i < n; ++i) ic[i] = q[i];
    ic[5] = qd[0];
    ic[6] = qd[1];
    ic[7] = qd[2] + qd[4] * math::cos(q[3]);
  }
};

}  // namespace ukb::models
