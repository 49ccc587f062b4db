/// @file chaplygin_sleigh.hpp
/// @brief The Chaplygin sleigh: a rigid body in the plane on a knife edge
///        that cannot slide sideways, with a resistance along the blade.
#pragma once

#include <array>
#include <cmath>

#include "ukb/config.hpp"
#include "ukb/models/common.hpp"

namespace ukb::models {

/// A rigid body of mass `m` and moment of inertia `I` about its centre of
/// mass, moving in the horizontal plane on a knife edge (blade) that
/// touches the plane at distance `a` behind the centre of mass along the
/// body axis e1 = (cos theta, sin theta) and cannot slide along
/// e2 = (-sin theta, cos theta).
///
/// - q = (x, y, theta): (x, y) the centre of mass, theta the heading of e1
///   from +x; M = diag(m, m, I).
/// - Q = (Fx, Fy, tau0 sin(w t)): a constant force at the centre of mass and
///   a periodic torque about it.
/// - Constraint (nonholonomic: the blade's sideways speed is zero)
///   -sin(theta) x' + cos(theta) y' - a theta' = 0, differentiated once:
///   A = [-sin theta, cos theta, -a], b = theta' v, with
///   v = x' cos theta + y' sin theta the forward speed.
/// - Non-ideal force: a resistance along the blade, C = -c v (cos theta,
///   sin theta, 0) (it does work: e1 is an admissible direction).
///
/// With u = e2 . (x', y') = a omega (omega = theta'), the motion in
/// (v, omega) is v' = a omega^2 + (F.e1 - c v)/m,
/// (I + m a^2) omega' = -m a v omega + a F.e2 + tau: without forces
/// m v^2 + (I + m a^2) omega^2 stays and omega decays to zero, the sleigh
/// ending on a straight line (the tests derive this independently).
///
/// Monitoring and `ukb run`: no holonomic row (position residual 0),
/// velocity residual |-sin(theta) x' + cos(theta) y' - a theta'|;
/// V = -(Fx x + Fy y) (the torque, a function of time, has no potential:
/// energy_dissipated counts its work with the blade's); natural quantities
/// x, y, theta, v (forward speed) and omega (turning rate).
template <class T>
struct ChaplyginSleigh {
  using Scalar = T;
  /// The same model on another arithmetic type: its physics functions are
  /// branch-free and take sines and cosines through ukb::math, so the CPU
  /// backend calls them on SIMD packs (model.hpp).
  template <class U>
  using rebind = ChaplyginSleigh<U>;
  static constexpr bool rebind_float = true;  ///< literals through lit<T>: float packs too
  static constexpr const char* name = "chaplygin_sleigh";
  static constexpr const char* summary =
      "Chaplygin sleigh: a body on a knife edge a behind its centre of mass that cannot slide sideways, "
      "with a resistance -c v along the blade";
  static constexpr int n = 3;  // q = (x, y, theta)
  static constexpr int m = 1;  // no sideways slip of the blade
  static constexpr std::array<const char*, n> coords{"x", "y", "theta"};
  static constexpr std::array<const char*, 5> initial_names{"x", "y", "theta", "v", "omega"};
  static constexpr std::array<const char*, 5> initial_docs{
      "centre of mass, x", "centre of mass, y", "heading of the body axis from +x (rad)",
      "forward speed along the body axis", "turning rate theta'"};

  struct Params {
    T m = T(1);     // mass
    T I = lit<T>(0.1);   // moment of inertia about the centre of mass
    T a = lit<T>(0.2);   // distance from the blade's contact point to the centre of mass
    T Fx = T(0);    // force at the centre of mass, x
    T Fy = T(0);    // force at the centre of mass, y
    T tau0 = T(0);  // amplitude of the torque tau0 sin(w t)
    T w = T(0);     // angular frequency of the torque
    T c = T(0);     // resistance along the blade
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "mass (> 0)");
    f("I", p.I, "moment of inertia about the centre of mass (> 0)");
    f("a", p.a, "distance of the blade's contact point behind the centre of mass, along the body axis");
    f("Fx", p.Fx, "constant force at the centre of mass, x component");
    f("Fy", p.Fy, "constant force at the centre of mass, y component");
    f("tau0", p.tau0, "amplitude of the torque tau0 sin(w t) about the centre of mass");
    f("w", p.w, "angular frequency of the torque (rad per unit time)");
    f("c", p.c, "resistance along the blade: C = -c v e1, v the forward speed (>= 0)");
  }

  UKB_HD static void mass(const T* /*q*/, T /*t*/, const Params& p, T* M) {
    for (int i = 0; i < n * n; ++i) M[i] = T(0);
    M[0] = p.m;
    M[4] = p.m;
    M[8] = p.I;
  }
  /// M = diag(m, m, I): the kernels factor its diagonal alone (model.hpp).
  UKB_HD static void mass_diagonal(const T* /*q*/, T /*t*/, const Params& p, T* d) {
    d[0] = p.m;
    d[1] = p.m;
    d[2] = p.I;
  }

  UKB_HD static void force(const T* /*q*/, const T* /*qd*/, T t, const Params& p, T* Q) {
    Q[0] = p.Fx;
    Q[1] = p.Fy;
    Q[2] = p.tau0 * math::sin(p.w * t);
  }

  UKB_HD static void constraints(const T* q, const T* qd, T /*t*/, const Params& p, T* A, T* b) {
    const T c = math::cos(q[2]), s = math::sin(q[2]);
    A[0] = -s;
    A[1] = c;
    A[2] = -p.a;
    b[0] = qd[2] * (qd[0] * c + qd[1] * s);
  }

  UKB_HD static void nonideal(const T* q, const T* qd, T /*t*/, const Params& p, const T* /*Qc_ideal*/,
                              const T* /*lambda*/, T* C) {
    const T c = math::cos(q[2]), s = math::sin(q[2]);
    const T v = qd[0] * c + qd[1] * s;
    C[0] = -p.c * v * c;
    C[1] = -p.c * v * s;
    C[2] = T(0);
  }

  UKB_HD static void residual(const T* q, const T* qd, T t, const Params& p, T& pos, T& vel) {
    detail::nonholonomic_residual<ChaplyginSleigh>(q, qd, t, p, pos, vel);
  }

  static constexpr std::array<RowKind, m> row_kinds{RowKind::nonholonomic};

  /// psi = -sin(theta) x' + cos(theta) y' - a theta', the blade's sideways
  /// speed (A = d psi / dq').
  UKB_HD static void constraint_rows(const T* q, const T* qd, T /*t*/, const Params& p, T* phi, T* phid) {
    phi[0] = T(0);
    phid[0] = -math::sin(q[2]) * qd[0] + math::cos(q[2]) * qd[1] - p.a * qd[2];
  }

  UKB_HD static T potential(const T* q, T /*t*/, const Params& p) { return -(p.Fx * q[0] + p.Fy * q[1]); }

  /// q' = v e1 + a omega e2, theta' = omega.
  UKB_HD static bool initial_state(const T* ic, const Params& p, T* q, T* qd) {
    const T c = math::cos(ic[2]), s = math::sin(ic[2]), v = ic[3], u = p.a * ic[4];
    q[0] = ic[0];
    q[1] = ic[1];
    q[2] = ic[2];
    qd[0] = v * c - u * s;
    qd[1] = v * s + u * c;
    qd[2] = ic[4];
    return true;
  }

  UKB_HD static void natural_state(const T* q, const T* qd, const Params& /*p*/, T* ic) {
    ic[0] = q[0];
    ic[1] = q[1];
    ic[2] = q[2];
    ic[3] = qd[0] * math::cos(q[2]) + qd[1] * math::sin(q[2]);
    ic[4] = qd[2];
  }
};

}  // namespace ukb::models
