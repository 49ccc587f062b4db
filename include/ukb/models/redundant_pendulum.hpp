/// @file redundant_pendulum.hpp
/// @brief Planar pendulum whose length constraint is stated twice (rank 1
///        with m = 2): the test case for the rank-revealing pseudo-inverse.
#pragma once

#include <array>
#include <cmath>

#include "ukb/config.hpp"
#include "ukb/models/common.hpp"

namespace ukb::models {

/// A point mass `m` on a massless rod of length `l` pivoting at the origin,
/// in Cartesian coordinates, gravity `g` along -y, damping C = -c q'.
///
/// - q = (x, y); M = m I; Q = (0, -m g); r = sqrt(x^2 + y^2).
/// - Row 1: x^2 + y^2 = l^2, differentiated twice:
///   [x, y] q'' = -(x'^2 + y'^2).
/// - Row 2: r = l, differentiated twice:
///   [x/r, y/r] q'' = -(x'^2 + y'^2)/r + (x x' + y y')^2/r^3.
/// The rows are parallel, so A has rank 1. They are consistent exactly when
/// the radial velocity x x' + y y' vanishes; otherwise the solution is the
/// (mass-weighted) least-squares one that the pseudo-inverse gives.
///
/// Monitoring and `ukb run`: residuals r - l and r'; the rows' constraints
/// (stabilisation) (r^2 - l^2) / 2 and r - l; V = m g y;
/// natural quantities theta (angle from the downward vertical,
/// q = l (sin theta, -cos theta)) and omega = theta'.
template <class T>
struct RedundantPendulum {
  using Scalar = T;
  /// The same model on another arithmetic type: its mass, force,
  /// constraints and constraint_rows are branch-free and use + - * / and
  /// sqrt only, so the CPU backend calls them on SIMD packs (model.hpp).
  template <class U>
  using rebind = RedundantPendulum<U>;
  static constexpr bool rebind_float = true;  ///< literals through lit<T>: float packs too
  static constexpr const char* name = "redundant_pendulum";
  static constexpr const char* summary =
      "planar pendulum in Cartesian coordinates with its length constraint stated twice "
      "(x^2+y^2 = l^2 and sqrt(x^2+y^2) = l: rank 1, m = 2), damping C = -c q'";
  static constexpr int n = 2;  // q = (x, y)
  static constexpr int m = 2;  // the same constraint in two forms
  static constexpr std::array<const char*, n> coords{"x", "y"};
  static constexpr std::array<const char*, 2> initial_names{"theta", "omega"};
  static constexpr std::array<const char*, 2> initial_docs{"angle of the rod from the downward vertical (rad)",
                                                           "angular velocity theta' (rad/s)"};

  struct Params {
    T m = T(1);     // bob mass
    T l = T(1);     // rod length
    T g = lit<T>(9.81);  // gravitational acceleration
    T c = T(0);     // damping coefficient
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "bob mass (> 0)");
    f("l", p.l, "rod length (> 0)");
    f("g", p.g, "gravitational acceleration along -y");
    f("c", p.c, "damping coefficient of C = -c q' (>= 0)");
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
    using std::sqrt;
    const T v2 = qd[0] * qd[0] + qd[1] * qd[1];
    const T r = sqrt(q[0] * q[0] + q[1] * q[1]);
    const T rdot_r = q[0] * qd[0] + q[1] * qd[1];  // r r'
    A[0] = q[0];
    A[1] = q[1];
    b[0] = -v2;
    A[2] = q[0] / r;
    A[3] = q[1] / r;
    b[1] = -v2 / r + rdot_r * rdot_r / (r * r * r);
  }

  UKB_HD static void nonideal(const T* /*q*/, const T* qd, T /*t*/, const Params& p,
                              const T* /*Qc_ideal*/, const T* /*lambda*/, T* C) {
    detail::linear_damping<n>(qd, p.c, C);
  }

  UKB_HD static void residual(const T* q, const T* qd, T /*t*/, const Params& p, T& pos,
                              T& vel) {
    detail::circle_residual(q, qd, p.l, pos, vel);
  }

  static constexpr std::array<RowKind, m> row_kinds{RowKind::holonomic, RowKind::holonomic};

  /// Row 1: phi = (r^2 - l^2) / 2, phi' = x x' + y y'; row 2: phi = r - l,
  /// phi' = (x x' + y y') / r.
  UKB_HD static void constraint_rows(const T* q, const T* qd, T /*t*/, const Params& p, T* phi,
                                     T* phid) {
    using std::sqrt;
    detail::circle_row(q, qd, p.l, phi[0], phid[0]);
    const T r = sqrt(q[0] * q[0] + q[1] * q[1]);
    phi[1] = r - p.l;
    phid[1] = phid[0] / r;
  }

  UKB_HD static T potential(const T* q, T /*t*/, const Params& p) { return p.m * p.g * q[1]; }

  // theta from the downward vertical: the bob at l (sin theta, -cos theta).
  UKB_HD static bool initial_state(const T* ic, const Params& p, T* q, T* qd) {
    using std::cos;
    using std::sin;
    detail::circle_state(p.l, sin(ic[0]), -cos(ic[0]), ic[1], q, qd);
    return true;
  }

  UKB_HD static void natural_state(const T* q, const T* qd, const Params& /*p*/, T* ic) {
    using std::atan2;
    ic[0] = atan2(q[0], -q[1]);
    ic[1] = detail::circle_rate(q, qd);
  }
};

}  // namespace ukb::models
