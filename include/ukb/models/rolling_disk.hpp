/// @file rolling_disk.hpp
/// @brief An upright disk rolling without slipping on a horizontal plane,
///        with rolling resistance.
#pragma once

#include <array>
#include <cmath>

#include "ukb/config.hpp"
#include "ukb/models/common.hpp"

namespace ukb::models {

/// An upright disk of mass `m` and radius `r` rolling without slipping on a
/// horizontal plane (kept upright: the classic nonholonomic "rolling
/// coin" of the textbooks).
///
/// - q = (x, y, theta, phi): the contact point (x, y), the heading theta of
///   the disk's plane from +x, the rolling angle phi;
///   M = diag(m, m, Ith, Jph) (Ith about the vertical diameter, Jph about the
///   axle).
/// - Q = (0, 0, tau_th cos(w_th t), tau_ph sin(w_ph t)): a steering torque
///   and a driving torque.
/// - Constraints (nonholonomic: no slip at the contact)
///   x' = r phi' cos theta, y' = r phi' sin theta, differentiated once:
///   A = [[1, 0, 0, -r cos theta], [0, 1, 0, -r sin theta]],
///   b = (-r phi' theta' sin theta, r phi' theta' cos theta).
/// - Non-ideal force: rolling resistance on the phi row, C = (0, 0, 0,
///   -c_r phi').
///
/// The motion: theta'' = tau_th / Ith, (Jph + m r^2) phi'' = tau_ph - c_r
/// phi', and (x', y') = r phi' (cos theta, sin theta).
///
/// Monitoring and `ukb run`: no holonomic row (position residual 0),
/// velocity residual |(x' - r phi' cos theta, y' - r phi' sin theta)|;
/// V = 0 (the torques are functions of time: energy_dissipated counts their
/// work with the rolling resistance's); natural quantities x, y, theta, phi,
/// theta_dot, phi_dot.
template <class T>
struct RollingDisk {
  using Scalar = T;
  /// The same model on another arithmetic type: its physics functions are
  /// branch-free and take sines and cosines through ukb::math, so the CPU
  /// backend calls them on SIMD packs (model.hpp).
  template <class U>
  using rebind = RollingDisk<U>;
  static constexpr bool rebind_float = true;  ///< literals through lit<T>: float packs too
  static constexpr const char* name = "rolling_disk";
  static constexpr const char* summary =
      "upright disk rolling without slipping on a plane, steering and driving torques, rolling resistance "
      "-c_r phi'";
  static constexpr int n = 4;  // q = (x, y, theta, phi)
  static constexpr int m = 2;  // no slip along x and y
  static constexpr std::array<const char*, n> coords{"x", "y", "theta", "phi"};
  static constexpr std::array<const char*, 6> initial_names{"x", "y", "theta", "phi", "theta_dot", "phi_dot"};
  static constexpr std::array<const char*, 6> initial_docs{
      "contact point, x", "contact point, y", "heading of the disk's plane from +x (rad)", "rolling angle (rad)",
      "turning rate theta'", "rolling rate phi' (the contact point moves at r phi')"};

  struct Params {
    T m = T(1);          // mass
    T r = lit<T>(0.3);        // radius
    T Ith = lit<T>(0.0225);   // moment of inertia about the vertical diameter (m r^2 / 4)
    T Jph = lit<T>(0.045);    // moment of inertia about the axle (m r^2 / 2)
    T tau_th = T(0);     // amplitude of the steering torque tau_th cos(w_th t)
    T w_th = T(0);       // its angular frequency
    T tau_ph = T(0);     // amplitude of the driving torque tau_ph sin(w_ph t)
    T w_ph = T(0);       // its angular frequency
    T c_r = T(0);        // rolling resistance
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "mass (> 0)");
    f("r", p.r, "radius (> 0)");
    f("Ith", p.Ith, "moment of inertia about the vertical diameter; m r^2/4 for a thin uniform disk (> 0)");
    f("Jph", p.Jph, "moment of inertia about the axle; m r^2/2 for a thin uniform disk (> 0)");
    f("tau_th", p.tau_th, "amplitude of the steering torque tau_th cos(w_th t)");
    f("w_th", p.w_th, "angular frequency of the steering torque (0: a constant torque tau_th)");
    f("tau_ph", p.tau_ph, "amplitude of the driving torque tau_ph sin(w_ph t)");
    f("w_ph", p.w_ph, "angular frequency of the driving torque");
    f("c_r", p.c_r, "rolling resistance: C = -c_r phi' on the phi row (>= 0)");
  }

  UKB_HD static void mass(const T* /*q*/, T /*t*/, const Params& p, T* M) {
    for (int i = 0; i < n * n; ++i) M[i] = T(0);
    M[0] = p.m;
    M[5] = p.m;
    M[10] = p.Ith;
    M[15] = p.Jph;
  }
  /// M = diag(m, m, I_theta, J_phi): the kernels factor its diagonal alone
  /// (model.hpp).
  UKB_HD static void mass_diagonal(const T* /*q*/, T /*t*/, const Params& p, T* d) {
    d[0] = p.m;
    d[1] = p.m;
    d[2] = p.Ith;
    d[3] = p.Jph;
  }

  UKB_HD static void force(const T* /*q*/, const T* /*qd*/, T t, const Params& p, T* Q) {
    Q[0] = T(0);
    Q[1] = T(0);
    Q[2] = p.tau_th * math::cos(p.w_th * t);
    Q[3] = p.tau_ph * math::sin(p.w_ph * t);
  }

  UKB_HD static void constraints(const T* q, const T* qd, T /*t*/, const Params& p, T* A, T* b) {
    const T c = math::cos(q[2]), s = math::sin(q[2]), k = p.r * qd[3] * qd[2];
    A[0] = T(1);
    A[1] = T(0);
    A[2] = T(0);
    A[3] = -p.r * c;
    A[4] = T(0);
    A[5] = T(1);
    A[6] = T(0);
    A[7] = -p.r * s;
    b[0] = -k * s;
    b[1] = k * c;
  }

  UKB_HD static void nonideal(const T* /*q*/, const T* qd, T /*t*/, const Params& p, const T* /*Qc_ideal*/,
                              const T* /*lambda*/, T* C) {
    C[0] = T(0);
    C[1] = T(0);
    C[2] = T(0);
    C[3] = -p.c_r * qd[3];
  }

  UKB_HD static void residual(const T* q, const T* qd, T t, const Params& p, T& pos, T& vel) {
    detail::nonholonomic_residual<RollingDisk>(q, qd, t, p, pos, vel);
  }

  static constexpr std::array<RowKind, m> row_kinds{RowKind::nonholonomic, RowKind::nonholonomic};

  /// psi = (x' - r phi' cos theta, y' - r phi' sin theta), the slip velocity
  /// of the contact point (A = d psi / dq').
  UKB_HD static void constraint_rows(const T* q, const T* qd, T /*t*/, const Params& p, T* phi, T* phid) {
    phi[0] = T(0);
    phi[1] = T(0);
    phid[0] = qd[0] - p.r * qd[3] * math::cos(q[2]);
    phid[1] = qd[1] - p.r * qd[3] * math::sin(q[2]);
  }

  UKB_HD static T potential(const T* /*q*/, T /*t*/, const Params& /*p*/) { return T(0); }

  UKB_HD static bool initial_state(const T* ic, const Params& p, T* q, T* qd) {
    for (int i = 0; i < n; ++i) q[i] = ic[i];
    qd[0] = p.r * ic[5] * math::cos(ic[2]);
    qd[1] = p.r * ic[5] * math::sin(ic[2]);
    qd[2] = ic[4];
    qd[3] = ic[5];
    return true;
  }

  UKB_HD static void natural_state(const T* q, const T* qd, const Params& /*p*/, T* ic) {
    for (int i = 0; i < n; ++i) ic[i] = q[i];
    ic[4] = qd[2];
    ic[5] = qd[3];
  }
};

}  // namespace ukb::models
