/// @file two_link_arm.hpp
/// @brief Two uniform rods (a double pendulum with a configuration-dependent,
///        non-diagonal mass matrix) whose tip slides on a straight line with
///        viscous friction along the line.
#pragma once

#include <array>
#include <cmath>

#include "ukb/config.hpp"
#include "ukb/models/common.hpp"

namespace ukb::models {

/// Rod 1 (mass `m1`, length `l1`) pinned at the origin, rod 2 (`m2`, `l2`)
/// hinged at the free end of rod 1, gravity `g` along -y. q = (theta1,
/// theta2), absolute angles from the downward vertical. Tip:
/// p = (l1 sin th1 + l2 sin th2, -l1 cos th1 - l2 cos th2).
///
/// From T = 1/2 (m1 l1^2/3) th1'^2 + 1/2 m2 |v_G2|^2 + 1/2 (m2 l2^2/12) th2'^2
/// and V = -(m1/2 + m2) g l1 cos th1 - m2 g (l2/2) cos th2, with
/// d = th1 - th2:
///
///     M = [ (m1/3 + m2) l1^2          m2 l1 l2 cos(d) / 2 ]
///         [ m2 l1 l2 cos(d) / 2       m2 l2^2 / 3         ]
///     Q1 = -m2 l1 l2 sin(d) th2'^2 / 2 - (m1/2 + m2) g l1 sin th1
///     Q2 =  m2 l1 l2 sin(d) th1'^2 / 2 - m2 g l2 sin(th2) / 2
///
/// Constraint: the tip stays on the line through (p0x, p0y) with direction
/// t = (cos beta, sin beta), i.e. nn . (p - p0) = 0 with nn = (-sin beta,
/// cos beta). With the tip Jacobian J = dp/dq, differentiated twice:
///     A = nn^T J = [l1 sin(th1 - beta), l2 sin(th2 - beta)],
///     b = -nn . (J' q') = -(l1 cos(th1 - beta) th1'^2 + l2 cos(th2 - beta) th2'^2).
/// Non-ideal force: viscous friction at the tip along the line,
/// F = -c (t . p') t, as generalized force C = J^T F.
///
/// Monitoring and `ukb run`: residuals |nn . (p - p0)| and |A q'| (the
/// row's constraint phi = nn . (p - p0) and its rate, for stabilisation); V as
/// above; natural quantities theta1, omega1 and elbow (1 or -1, nothing else): theta2 =
/// beta + elbow acos(-(nn . p0 + l1 cos(theta1 - beta)) / l2) puts the tip
/// on the line, omega2 = -l1 sin(theta1 - beta) omega1 / (l2 sin(theta2 -
/// beta)) keeps it there; no consistent state exists where the acos
/// argument leaves [-1, 1] or, with omega1 != 0, sin(theta2 - beta) = 0.
template <class T>
struct TwoLinkArm {
  using Scalar = T;
  /// The same model on another arithmetic type: its physics functions are
  /// branch-free and take sines and cosines through ukb::math, so the CPU
  /// backend calls them on SIMD packs (model.hpp).
  template <class U>
  using rebind = TwoLinkArm<U>;
  static constexpr bool rebind_float = true;  ///< literals through lit<T>: float packs too
  static constexpr const char* name = "two_link_arm";
  static constexpr const char* summary =
      "two uniform rods (double pendulum, non-diagonal M(q)) whose tip slides on a straight "
      "line, viscous friction at the tip along the line";
  static constexpr int n = 2;  // q = (theta1, theta2)
  static constexpr int m = 1;  // tip on the line
  static constexpr std::array<const char*, n> coords{"theta1", "theta2"};
  static constexpr std::array<const char*, 3> initial_names{"theta1", "omega1", "elbow"};
  static constexpr std::array<const char*, 3> initial_docs{
      "angle of rod 1 from the downward vertical (rad)", "angular velocity of rod 1 (rad/s)",
      "which of the two configurations: the sign of sin(theta2 - beta); omitted: 1 (one of 1, -1)"};

  struct Params {
    T m1 = T(1);      // mass of rod 1
    T m2 = T(1);      // mass of rod 2
    T l1 = T(1);      // length of rod 1
    T l2 = T(1);      // length of rod 2
    T g = lit<T>(9.81);    // gravitational acceleration
    T c = T(0);       // viscous friction coefficient at the tip
    T beta = T(0);    // direction angle of the line
    T p0x = T(0);     // a point of the line, x
    T p0y = lit<T>(-1.5);  // a point of the line, y
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m1", p.m1, "mass of rod 1 (> 0)");
    f("m2", p.m2, "mass of rod 2 (> 0)");
    f("l1", p.l1, "length of rod 1 (> 0)");
    f("l2", p.l2, "length of rod 2 (> 0)");
    f("g", p.g, "gravitational acceleration along -y");
    f("c", p.c, "viscous friction coefficient at the tip, along the line (>= 0)");
    f("beta", p.beta, "direction angle of the line from the +x axis [rad]");
    f("p0x", p.p0x, "x of a point on the line");
    f("p0y", p.p0y, "y of a point on the line");
  }

  UKB_HD static void mass(const T* q, T /*t*/, const Params& p, T* M) {
    const T m12 = lit<T>(0.5) * p.m2 * p.l1 * p.l2 * math::cos(q[0] - q[1]);
    M[0] = (p.m1 / T(3) + p.m2) * p.l1 * p.l1;
    M[1] = m12;
    M[2] = m12;
    M[3] = p.m2 * p.l2 * p.l2 / T(3);
  }

  UKB_HD static void force(const T* q, const T* qd, T /*t*/, const Params& p, T* Q) {
    const T h = lit<T>(0.5) * p.m2 * p.l1 * p.l2 * math::sin(q[0] - q[1]);
    Q[0] = -h * qd[1] * qd[1] - (lit<T>(0.5) * p.m1 + p.m2) * p.g * p.l1 * math::sin(q[0]);
    Q[1] = h * qd[0] * qd[0] - lit<T>(0.5) * p.m2 * p.g * p.l2 * math::sin(q[1]);
  }

  UKB_HD static void constraints(const T* q, const T* qd, T /*t*/, const Params& p, T* A,
                                 T* b) {
    A[0] = p.l1 * math::sin(q[0] - p.beta);
    A[1] = p.l2 * math::sin(q[1] - p.beta);
    b[0] = -(p.l1 * math::cos(q[0] - p.beta) * qd[0] * qd[0] +
             p.l2 * math::cos(q[1] - p.beta) * qd[1] * qd[1]);
  }

  UKB_HD static void nonideal(const T* q, const T* qd, T /*t*/, const Params& p,
                              const T* /*Qc_ideal*/, const T* /*lambda*/, T* C) {
    // Tip Jacobian J (2 x 2) and line direction t.
    const T J00 = p.l1 * math::cos(q[0]), J01 = p.l2 * math::cos(q[1]);
    const T J10 = p.l1 * math::sin(q[0]), J11 = p.l2 * math::sin(q[1]);
    const T tx = math::cos(p.beta), ty = math::sin(p.beta);
    const T pdx = J00 * qd[0] + J01 * qd[1], pdy = J10 * qd[0] + J11 * qd[1];
    const T s = -p.c * (tx * pdx + ty * pdy);  // F = s t
    C[0] = J00 * s * tx + J10 * s * ty;
    C[1] = J01 * s * tx + J11 * s * ty;
  }

  UKB_HD static void residual(const T* q, const T* qd, T /*t*/, const Params& p, T& pos,
                              T& vel) {
    // Geometrically: the tip p and its velocity p' against the line's normal nn.
    using std::abs;
    const T px = p.l1 * math::sin(q[0]) + p.l2 * math::sin(q[1]), py = -p.l1 * math::cos(q[0]) - p.l2 * math::cos(q[1]);
    const T vx = p.l1 * math::cos(q[0]) * qd[0] + p.l2 * math::cos(q[1]) * qd[1];
    const T vy = p.l1 * math::sin(q[0]) * qd[0] + p.l2 * math::sin(q[1]) * qd[1];
    const T nx = -math::sin(p.beta), ny = math::cos(p.beta);
    pos = abs(nx * (px - p.p0x) + ny * (py - p.p0y));
    vel = abs(nx * vx + ny * vy);
  }

  static constexpr std::array<RowKind, m> row_kinds{RowKind::holonomic};

  /// phi = nn . (p - p0) = -l1 cos(th1 - beta) - l2 cos(th2 - beta) - nn . p0
  /// (A = d phi / dq), phi' = A q'.
  UKB_HD static void constraint_rows(const T* q, const T* qd, T /*t*/, const Params& p, T* phi,
                                     T* phid) {
    const T nn_p0 = -math::sin(p.beta) * p.p0x + math::cos(p.beta) * p.p0y;
    phi[0] = -p.l1 * math::cos(q[0] - p.beta) - p.l2 * math::cos(q[1] - p.beta) - nn_p0;
    phid[0] = p.l1 * math::sin(q[0] - p.beta) * qd[0] + p.l2 * math::sin(q[1] - p.beta) * qd[1];
  }

  UKB_HD static T potential(const T* q, T /*t*/, const Params& p) {
    return -(lit<T>(0.5) * p.m1 + p.m2) * p.g * p.l1 * math::cos(q[0]) -
           lit<T>(0.5) * p.m2 * p.g * p.l2 * math::cos(q[1]);
  }

  UKB_HD static bool initial_state(const T* ic, const Params& p, T* q, T* qd) {
    using std::acos;
    using std::isfinite;
    const T nn_p0 = -math::sin(p.beta) * p.p0x + math::cos(p.beta) * p.p0y;
    const T c = -(nn_p0 + p.l1 * math::cos(ic[0] - p.beta)) / p.l2;
    if (!(c >= T(-1) && c <= T(1))) return false;
    q[0] = ic[0];
    q[1] = p.beta + (ic[2] < T(0) ? -acos(c) : acos(c));
    const T s2 = math::sin(q[1] - p.beta);
    qd[0] = ic[1];
    qd[1] = ic[1] == T(0) ? T(0) : -p.l1 * math::sin(ic[0] - p.beta) * ic[1] / (p.l2 * s2);
    return isfinite(qd[1]);
  }

  UKB_HD static void natural_state(const T* q, const T* qd, const Params& p, T* ic) {
    ic[0] = q[0];
    ic[1] = qd[0];
    ic[2] = math::sin(q[1] - p.beta) < T(0) ? T(-1) : T(1);
  }
};

}  // namespace ukb::models
