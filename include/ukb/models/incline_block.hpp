/// @file incline_block.hpp
/// @brief Block sliding on a straight inclined line with Coulomb friction.
#pragma once

#include <array>
#include <cmath>

#include "ukb/config.hpp"
#include "ukb/friction.hpp"
#include "ukb/models/common.hpp"

namespace ukb::models {

/// A block (point mass `m`) in the vertical plane confined to the straight
/// line through the origin inclined at angle `alpha` below the +x axis
/// (descending towards +x), gravity `g` along -y, Coulomb sliding friction of
/// coefficient `mu`.
///
/// - q = (x, y); M = m I; Q = (0, -m g).
/// - Constraint x sin(alpha) + y cos(alpha) = 0, differentiated twice:
///   A = [sin(alpha), cos(alpha)], b = 0.
/// - Non-ideal force C = -mu |Qc_ideal| v/|v|, v the sliding velocity (q'
///   along the line: less the part across it, which only drift gives); at rest (v = 0) static
///   friction up to mu |Qc_ideal| against the tangential part of Q, kinetic
///   friction against the impending motion beyond (ukb::friction::force).
/// While sliding down the line (unit direction (cos alpha, -sin alpha)), the
/// arclength s obeys s'' = g (sin alpha - mu cos alpha); sliding up,
/// s'' = g (sin alpha + mu cos alpha) towards the bottom.
///
/// Monitoring and `ukb run`: residuals phi = x sin(alpha) + y cos(alpha) and
/// its rate (also the row's constraint, for stabilisation); V = m g y;
/// natural quantities s (distance from the origin along the line, positive
/// down the slope) and v = s'. Stick-slip: the event is
/// v; at its zero the block sticks for good when tan(alpha) <= mu, else it
/// slides on (down the slope).
template <class T>
struct InclineBlock {
  using Scalar = T;
  /// The same model on another arithmetic type: its physics functions are
  /// branch-free and take sines and cosines through ukb::math, so the CPU
  /// backend calls them on SIMD packs (model.hpp).
  template <class U>
  using rebind = InclineBlock<U>;
  static constexpr bool rebind_float = true;  ///< literals through lit<T>: float packs too
  static constexpr const char* name = "incline_block";
  static constexpr const char* summary =
      "block on a straight line through the origin inclined at alpha below +x, gravity "
      "along -y, Coulomb sliding friction";
  static constexpr int n = 2;  // q = (x, y)
  static constexpr int m = 1;  // x sin(alpha) + y cos(alpha) = 0
  static constexpr std::array<const char*, n> coords{"x", "y"};
  static constexpr std::array<const char*, 2> initial_names{"s", "v"};
  static constexpr std::array<const char*, 2> initial_docs{"distance down the slope from the origin",
                                                           "velocity down the slope, s'"};

  struct Params {
    T m = T(1);       // block mass
    T alpha = lit<T>(0.5); // inclination below +x [rad]
    T g = lit<T>(9.81);    // gravitational acceleration
    T mu = lit<T>(0.3);    // sliding-friction coefficient
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "block mass (> 0)");
    f("alpha", p.alpha, "inclination of the line below the +x axis [rad]");
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

  UKB_HD static void constraints(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& p,
                                 T* A, T* b) {
    A[0] = math::sin(p.alpha);
    A[1] = math::cos(p.alpha);
    b[0] = T(0);
  }

  UKB_HD static void nonideal(const T* q, const T* qd, T t, const Params& p, const T* Qc_ideal,
                              const T* /*lambda*/, T* C) {
    ukb::friction::force<InclineBlock>(q, qd, t, p, Qc_ideal, p.mu, C);
  }

  UKB_HD static void residual(const T* q, const T* qd, T /*t*/, const Params& p, T& pos,
                              T& vel) {
    using std::abs;
    const T sa = math::sin(p.alpha), ca = math::cos(p.alpha);
    pos = abs(q[0] * sa + q[1] * ca);
    vel = abs(qd[0] * sa + qd[1] * ca);
  }

  static constexpr std::array<RowKind, m> row_kinds{RowKind::holonomic};

  /// phi = x sin(alpha) + y cos(alpha), the row's constraint.
  UKB_HD static void constraint_rows(const T* q, const T* qd, T /*t*/, const Params& p, T* phi,
                                     T* phid) {
    const T sa = math::sin(p.alpha), ca = math::cos(p.alpha);
    phi[0] = q[0] * sa + q[1] * ca;
    phid[0] = qd[0] * sa + qd[1] * ca;
  }

  UKB_HD static T potential(const T* q, T /*t*/, const Params& p) { return p.m * p.g * q[1]; }

  UKB_HD static bool initial_state(const T* ic, const Params& p, T* q, T* qd) {
    const T ca = math::cos(p.alpha), sa = math::sin(p.alpha);
    q[0] = ic[0] * ca;
    q[1] = -ic[0] * sa;
    qd[0] = ic[1] * ca;
    qd[1] = -ic[1] * sa;
    return true;
  }

  UKB_HD static void natural_state(const T* q, const T* qd, const Params& p, T* ic) {
    ic[0] = q[0] * math::cos(p.alpha) - q[1] * math::sin(p.alpha);
    ic[1] = event(q, qd, T(0), p);
  }

  UKB_HD static T event(const T* /*q*/, const T* qd, T /*t*/, const Params& p) {
    return qd[0] * math::cos(p.alpha) - qd[1] * math::sin(p.alpha);
  }

  UKB_HD static EventAction on_event(T* q, T* qd, T t, const Params& p) {
    return ukb::friction::stick_or_slip<InclineBlock>(q, qd, t, p, p.mu);
  }
};

}  // namespace ukb::models
