/// @file incline_block.hpp
/// @brief Block sliding on a straight inclined line with Coulomb friction.
#pragma once

#include <array>
#include <cmath>

#include "ukb/config.hpp"
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
/// - Non-ideal force C = -mu |Qc_ideal| v/|v| (C = 0 when v = 0).
/// While sliding down the line (unit direction (cos alpha, -sin alpha)), the
/// arclength s obeys s'' = g (sin alpha - mu cos alpha); sliding up,
/// s'' = g (sin alpha + mu cos alpha) towards the bottom.
template <class T>
struct InclineBlock {
  using Scalar = T;
  static constexpr const char* name = "incline_block";
  static constexpr const char* summary =
      "block on a straight line through the origin inclined at alpha below +x, gravity "
      "along -y, Coulomb sliding friction";
  static constexpr int n = 2;  // q = (x, y)
  static constexpr int m = 1;  // x sin(alpha) + y cos(alpha) = 0
  static constexpr std::array<const char*, n> coords{"x", "y"};

  struct Params {
    T m = T(1);       // block mass
    T alpha = T(0.5); // inclination below +x [rad]
    T g = T(9.81);    // gravitational acceleration
    T mu = T(0.3);    // sliding-friction coefficient
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

  UKB_HD static void force(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& p, T* Q) {
    Q[0] = T(0);
    Q[1] = -p.m * p.g;
  }

  UKB_HD static void constraints(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& p,
                                 T* A, T* b) {
    using std::cos;
    using std::sin;
    A[0] = sin(p.alpha);
    A[1] = cos(p.alpha);
    b[0] = T(0);
  }

  UKB_HD static void nonideal(const T* /*q*/, const T* qd, T /*t*/, const Params& p,
                              const T* Qc_ideal, const T* /*lambda*/, T* C) {
    detail::coulomb_sliding<n>(qd, Qc_ideal, p.mu, C);
  }
};

}  // namespace ukb::models
