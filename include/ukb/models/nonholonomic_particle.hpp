/// @file nonholonomic_particle.hpp
/// @brief Particle with the nonholonomic constraint y' = z^2 x' and a
///        non-ideal force -a0 |u| u (Udwadia & Kalaba 2001, J. Appl. Mech. 68,
///        section 5).
#pragma once

#include <array>
#include <cmath>

#include "ukb/config.hpp"
#include "ukb/models/common.hpp"

namespace ukb::models {

/// A particle of mass `m` in 3D under a constant impressed force
/// (`fx`, `fy`, `fz`) and the nonholonomic constraint y' = z^2 x'.
///
/// - q = (x, y, z); M = m I; Q = (fx, fy, fz).
/// - Constraint y' - z^2 x' = 0, differentiated once:
///   A = [-z^2, 1, 0], b = 2 z z' x'.
/// - Non-ideal force C = -a0 |u| u with u = q' the velocity.
///
/// Monitoring and `ukb run`: no holonomic row (position residual 0),
/// velocity residual psi = y' - z^2 x' (the row is nonholonomic); V = -(fx x + fy y + fz z); natural
/// quantities x, y, z, x_dot, z_dot (y_dot = z^2 x_dot follows).
template <class T>
struct NonholonomicParticle {
  using Scalar = T;
  /// The same model on another arithmetic type: its physics functions are
  /// branch-free and take sines and cosines through ukb::math, so the CPU
  /// backend calls them on SIMD packs (model.hpp).
  template <class U>
  using rebind = NonholonomicParticle<U>;
  static constexpr bool rebind_float = true;  ///< literals through lit<T>: float packs too
  static constexpr const char* name = "nonholonomic_particle";
  static constexpr const char* summary =
      "particle in 3D with the nonholonomic constraint y' = z^2 x' and the non-ideal "
      "force -a0 |u| u";
  static constexpr int n = 3;  // q = (x, y, z)
  static constexpr int m = 1;  // y' = z^2 x'
  static constexpr std::array<const char*, n> coords{"x", "y", "z"};
  static constexpr std::array<const char*, 5> initial_names{"x", "y", "z", "x_dot", "z_dot"};
  static constexpr std::array<const char*, 5> initial_docs{"position, x", "position, y", "position, z", "velocity x'",
                                                           "velocity z' (y' = z^2 x' follows)"};

  struct Params {
    T m = T(1);       // particle mass
    T a0 = lit<T>(0.1);    // coefficient of the non-ideal force
    T fx = T(0);      // impressed force, x component
    T fy = T(0);      // impressed force, y component
    T fz = lit<T>(-9.81);  // impressed force, z component
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "particle mass (> 0)");
    f("a0", p.a0, "coefficient of the non-ideal force C = -a0 |u| u");
    f("fx", p.fx, "constant impressed force, x component");
    f("fy", p.fy, "constant impressed force, y component");
    f("fz", p.fz, "constant impressed force, z component");
  }

  UKB_HD static void mass(const T* /*q*/, T /*t*/, const Params& p, T* M) {
    detail::scalar_mass<n>(p.m, M);
  }
  /// M = m I is diagonal: the kernels factor its diagonal alone (model.hpp).
  UKB_HD static void mass_diagonal(const T* /*q*/, T /*t*/, const Params& p, T* d) {
    detail::scalar_mass_diagonal<n>(p.m, d);
  }

  UKB_HD static void force(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& p, T* Q) {
    Q[0] = p.fx;
    Q[1] = p.fy;
    Q[2] = p.fz;
  }

  UKB_HD static void constraints(const T* q, const T* qd, T /*t*/, const Params& /*p*/, T* A,
                                 T* b) {
    A[0] = -q[2] * q[2];
    A[1] = T(1);
    A[2] = T(0);
    b[0] = T(2) * q[2] * qd[2] * qd[0];
  }

  UKB_HD static void nonideal(const T* /*q*/, const T* qd, T /*t*/, const Params& p,
                              const T* /*Qc_ideal*/, const T* /*lambda*/, T* C) {
    using std::sqrt;
    const T speed = sqrt(qd[0] * qd[0] + qd[1] * qd[1] + qd[2] * qd[2]);
    for (int i = 0; i < n; ++i) C[i] = -p.a0 * speed * qd[i];
  }

  UKB_HD static void residual(const T* q, const T* qd, T /*t*/, const Params& /*p*/, T& pos,
                              T& vel) {
    using std::abs;
    pos = T(0);
    vel = abs(qd[1] - q[2] * q[2] * qd[0]);
  }

  static constexpr std::array<RowKind, m> row_kinds{RowKind::nonholonomic};

  /// psi = y' - z^2 x', the row's nonholonomic constraint (A = d psi / dq').
  UKB_HD static void constraint_rows(const T* q, const T* qd, T /*t*/, const Params& /*p*/,
                                     T* phi, T* phid) {
    phi[0] = T(0);
    phid[0] = qd[1] - q[2] * q[2] * qd[0];
  }

  UKB_HD static T potential(const T* q, T /*t*/, const Params& p) {
    return -(p.fx * q[0] + p.fy * q[1] + p.fz * q[2]);
  }

  UKB_HD static bool initial_state(const T* ic, const Params& /*p*/, T* q, T* qd) {
    q[0] = ic[0];
    q[1] = ic[1];
    q[2] = ic[2];
    qd[0] = ic[3];
    qd[1] = ic[2] * ic[2] * ic[3];
    qd[2] = ic[4];
    return true;
  }

  UKB_HD static void natural_state(const T* q, const T* qd, const Params& /*p*/, T* ic) {
    ic[0] = q[0];
    ic[1] = q[1];
    ic[2] = q[2];
    ic[3] = qd[0];
    ic[4] = qd[2];
  }
};

}  // namespace ukb::models
