/// @file bead_on_ring.hpp
/// @brief Bead on a vertical circular ring with Coulomb sliding friction
///        (Udwadia 2000, J. Math. Anal. Appl. 251, section 5).
#pragma once

#include <array>
#include <cmath>

#include "ukb/config.hpp"
#include "ukb/friction.hpp"
#include "ukb/models/common.hpp"

namespace ukb::models {

/// A bead of mass `m` on a vertical ring of radius `R` centred at the origin,
/// gravity `g` along -y, Coulomb sliding friction of coefficient `mu`.
///
/// - q = (x, y); M = m I; Q = (0, -m g).
/// - Constraint x^2 + y^2 = R^2, differentiated twice:
///   A = [x, y], b = -(x'^2 + y'^2).
/// - Non-ideal force C = -mu |Qc_ideal| v/|v| with v the sliding velocity
///   (q' along the ring: q' less its radial part, which only drift gives): the friction
///   force opposes the sliding velocity and its magnitude is mu times the
///   normal force, which is the ideal constraint force. At rest (v = 0):
///   static friction -Q_t against the tangential part of Q where
///   |Q_t| <= mu |Qc_ideal|, else -mu |Qc_ideal| Q_t/|Q_t| against the
///   impending motion (ukb::friction::force).
/// `R` does not enter the acceleration (A and b depend on the state only); it
/// fixes the ring for initial states and residual monitoring.
///
/// Monitoring and `ukb run`: residuals r - R and r' (r = |q|); the row's
/// constraint (stabilisation) phi = (x^2 + y^2 - R^2) / 2, phi' = x x' + y y';
/// V = m g y; natural quantities theta (angle from +x, counter-clockwise;
/// q = R (cos theta, sin theta)) and omega = theta'. Stick-slip: the event
/// is the sliding velocity r omega = (x y' - y x')/r; at its zero the bead
/// sticks for good where |cot theta| <= mu (ukb::friction::holds), else slides on.
template <class T>
struct BeadOnRing {
  using Scalar = T;
  /// The same model on another arithmetic type: its mass, force,
  /// constraints and constraint_rows are branch-free and use + - * / and
  /// sqrt only, so the CPU backend calls them on SIMD packs (model.hpp).
  template <class U>
  using rebind = BeadOnRing<U>;
  static constexpr bool rebind_float = true;  ///< literals through lit<T>: float packs too
  static constexpr const char* name = "bead_on_ring";
  static constexpr const char* summary =
      "bead on a vertical circular ring centred at the origin, gravity along -y, "
      "Coulomb sliding friction";
  static constexpr int n = 2;  // q = (x, y)
  static constexpr int m = 1;  // x^2 + y^2 = R^2
  static constexpr std::array<const char*, n> coords{"x", "y"};
  static constexpr std::array<const char*, 2> initial_names{"theta", "omega"};
  static constexpr std::array<const char*, 2> initial_docs{
      "angle of the bead from +x, counter-clockwise (rad); the bottom of the ring is -pi/2",
      "angular velocity theta' (rad/s)"};

  struct Params {
    T m = T(1);      // bead mass
    T R = T(1);      // ring radius
    T g = lit<T>(9.81);   // gravitational acceleration
    T mu = lit<T>(0.2);   // sliding-friction coefficient
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "bead mass (> 0)");
    f("R", p.R, "ring radius (> 0)");
    f("g", p.g, "gravitational acceleration along -y");
    f("mu", p.mu, "Coulomb sliding-friction coefficient (>= 0)");
  }

  UKB_HD static void mass(const T* /*q*/, T /*t*/, const Params& p, T* M) {
    detail::scalar_mass<n>(p.m, M);
  }
  /// M = m I is diagonal: the kernels factor its diagonal alone (model.hpp).
  UKB_HD static void mass_diagonal(const T* /*q*/, T /*t*/, const Params& p, T* d) {
    detail::scalar_mass_diagonal<n>(p.m, d);
  }

  UKB_HD static void force(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& p, T* Q) {
    Q[0] = T(0);
    Q[1] = -p.m * p.g;
  }

  UKB_HD static void constraints(const T* q, const T* qd, T /*t*/, const Params& /*p*/, T* A,
                                 T* b) {
    A[0] = q[0];
    A[1] = q[1];
    b[0] = -(qd[0] * qd[0] + qd[1] * qd[1]);
  }

  UKB_HD static void nonideal(const T* q, const T* qd, T t, const Params& p, const T* Qc_ideal,
                              const T* /*lambda*/, T* C) {
    ukb::friction::force<BeadOnRing>(q, qd, t, p, Qc_ideal, p.mu, C);
  }

  UKB_HD static void residual(const T* q, const T* qd, T /*t*/, const Params& p, T& pos,
                              T& vel) {
    detail::circle_residual(q, qd, p.R, pos, vel);
  }

  static constexpr std::array<RowKind, m> row_kinds{RowKind::holonomic};

  /// phi = (x^2 + y^2 - R^2) / 2, the row's constraint (A = d phi / dq).
  UKB_HD static void constraint_rows(const T* q, const T* qd, T /*t*/, const Params& p, T* phi,
                                     T* phid) {
    detail::circle_row(q, qd, p.R, phi[0], phid[0]);
  }

  UKB_HD static T potential(const T* q, T /*t*/, const Params& p) { return p.m * p.g * q[1]; }

  UKB_HD static bool initial_state(const T* ic, const Params& p, T* q, T* qd) {
    using std::cos;
    using std::sin;
    detail::circle_state(p.R, cos(ic[0]), sin(ic[0]), ic[1], q, qd);
    return true;
  }

  UKB_HD static void natural_state(const T* q, const T* qd, const Params& /*p*/, T* ic) {
    using std::atan2;
    ic[0] = atan2(q[1], q[0]);
    ic[1] = detail::circle_rate(q, qd);
  }

  UKB_HD static T event(const T* q, const T* qd, T /*t*/, const Params& /*p*/) {
    using std::sqrt;
    return (q[0] * qd[1] - q[1] * qd[0]) / sqrt(q[0] * q[0] + q[1] * q[1]);
  }

  UKB_HD static EventAction on_event(T* q, T* qd, T t, const Params& p) {
    return ukb::friction::stick_or_slip<BeadOnRing>(q, qd, t, p, p.mu);
  }
};

}  // namespace ukb::models
