/// @file puck_incline.hpp
/// @brief A puck on a rough inclined plane launched across it: Coulomb
///        friction against a 2-D sliding velocity, stops found and
///        finished by ukb/friction.hpp.
#pragma once

#include <array>
#include <cmath>

#include "ukb/config.hpp"
#include "ukb/friction.hpp"
#include "ukb/models/common.hpp"

namespace ukb::models {

/// A puck (point mass `m`) on a rough plane inclined at `alpha`, launched
/// across it, with Coulomb friction of coefficient `mu` (sliding and
/// static) against its 2-D sliding velocity.
///
/// - Coordinates in the plane's frame: q = (x, y, z), x across the slope
///   (horizontal), y down the slope, z along the plane's normal (0 on it).
/// - M = m I; Q = (0, m g sin(alpha), -m g cos(alpha)).
/// - Constraint z = 0: A = [0, 0, 1], b = 0.
/// - C: ukb::friction::force (mu |N| against the sliding velocity; at rest
///   static friction up to mu |N|).
/// - Stops: ukb::friction::stop_event with the look-ahead `lookahead`, and
///   ukb::friction::finish_stop, which finishes the motion to the stop in
///   closed form and moves the time.
///
/// Closed forms (the test of the 2-D friction mechanism): with
/// a = g sin(alpha), k = mu / tan(alpha), speed v and heading phi (the
/// angle of the velocity from straight down the slope), while it slides
///   v' = a (cos phi - k),   v phi' = -a sin phi,
/// so v |sin(phi)| / |tan(phi / 2)|^k stays constant and
/// k v + y' = k v0 + y'0 + a (1 - k^2) t. For k > 1 (mu > tan(alpha)) the
/// puck stops for good at t = (k v0 + y'0) / (a (k^2 - 1)); for k <= 1 it
/// never stops once launched, except when launched straight up the slope
/// (docs/models.md).
///
/// `ukb run`: natural quantities `speed` and `heading` (the launch), the
/// event fires a little before each stop (docs/models.md).
template <class T>
struct PuckIncline {
  using Scalar = T;
  /// The same model on another arithmetic type: its physics functions and
  /// its event are branch-free (ukb::friction's helpers pick per lane), so
  /// the CPU backend calls them on SIMD packs (model.hpp).
  template <class U>
  using rebind = PuckIncline<U>;
  static constexpr bool rebind_float = true;  ///< literals through lit<T>: float packs too
  static constexpr const char* name = "puck_incline";
  static constexpr const char* summary =
      "puck on a rough inclined plane launched across it: Coulomb friction against a 2-D sliding velocity";
  static constexpr int n = 3;  // q = (x, y, z): across, down the slope, normal
  static constexpr int m = 1;  // on the plane: z = 0
  static constexpr std::array<const char*, n> coords{"x", "y", "z"};
  static constexpr std::array<const char*, 2> initial_names{"speed", "heading"};
  static constexpr std::array<const char*, 2> initial_docs{
      "sliding speed (>= 0)", "angle of the velocity from straight down the slope [rad]; pi/2: across, towards +x"};

  struct Params {
    T m = T(1);                  // mass
    T alpha = lit<T>(0.3);       // inclination of the plane [rad]
    T g = lit<T>(9.81);          // gravitational acceleration
    T mu = lit<T>(0.5);          // Coulomb friction coefficient (sliding and static)
    T lookahead = lit<T>(1e-3);  // the stop event's look-ahead [s] (ukb/friction.hpp)
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "puck mass (> 0)");
    f("alpha", p.alpha, "inclination of the plane [rad]; the closed forms of docs/models.md take 0 < alpha < pi/2");
    f("g", p.g, "gravitational acceleration (the closed forms take g > 0)");
    f("mu", p.mu, "Coulomb friction coefficient, sliding and static; the puck stops for good where mu > tan(alpha) (>= 0)");
    f("lookahead", p.lookahead,
      "the stop is finished in closed form from where friction would take the speed left away in this time "
      "[s]: about the RK4 step dt, any positive value with dopri5 (> 0)");
  }

  UKB_HD static void mass(const T* /*q*/, T /*t*/, const Params& p, T* M) { detail::scalar_mass<n>(p.m, M); }
  /// M = m I is diagonal: the kernels factor its diagonal alone (model.hpp).
  UKB_HD static void mass_diagonal(const T* /*q*/, T /*t*/, const Params& p, T* d) {
    detail::scalar_mass_diagonal<n>(p.m, d);
  }
  UKB_HD static void force(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& p, T* Q) {
    Q[0] = T(0), Q[1] = p.m * p.g * math::sin(p.alpha), Q[2] = -(p.m * p.g * math::cos(p.alpha));
  }
  UKB_HD static void constraints(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& /*p*/, T* A, T* b) {
    A[0] = T(0), A[1] = T(0), A[2] = T(1), b[0] = T(0);
  }
  /// Friction mu |N| against the sliding velocity (q' less its part along
  /// the row); at rest, static friction up to mu |N| against the pull down
  /// the slope.
  UKB_HD static void nonideal(const T* q, const T* qd, T t, const Params& p, const T* Qc_ideal,
                              const T* /*lambda*/, T* C) {
    ukb::friction::force<PuckIncline>(q, qd, t, p, Qc_ideal, p.mu, C);
  }

  UKB_HD static void residual(const T* q, const T* qd, T /*t*/, const Params& /*p*/, T& pos, T& vel) {
    using std::abs;
    pos = abs(q[2]), vel = abs(qd[2]);
  }
  static constexpr std::array<RowKind, m> row_kinds{RowKind::holonomic};
  /// phi = z, the row's constraint.
  UKB_HD static void constraint_rows(const T* q, const T* qd, T /*t*/, const Params& /*p*/, T* phi, T* phid) {
    phi[0] = q[2], phid[0] = qd[2];
  }
  UKB_HD static T potential(const T* q, T /*t*/, const Params& p) {
    return p.m * p.g * (q[2] * math::cos(p.alpha) - q[1] * math::sin(p.alpha));
  }
  /// From the origin at `speed` along `heading`; refused for a negative or
  /// NaN speed or a heading that is not finite.
  UKB_HD static bool initial_state(const T* ic, const Params& /*p*/, T* q, T* qd) {
    if (!(ic[0] >= T(0)) || !(ic[1] - ic[1] == T(0))) return false;
    q[0] = q[1] = q[2] = T(0);
    qd[0] = ic[0] * math::sin(ic[1]), qd[1] = ic[0] * math::cos(ic[1]), qd[2] = T(0);
    return true;
  }
  /// The speed and heading of q' in the plane (0 and 0 at rest).
  UKB_HD static void natural_state(const T* /*q*/, const T* qd, const Params& /*p*/, T* ic) {
    using std::atan2;
    using std::sqrt;
    ic[0] = sqrt(qd[0] * qd[0] + qd[1] * qd[1]);
    ic[1] = atan2(qd[0], qd[1]);
  }
  /// The stop: an event a little before it, where the speed left is what
  /// friction takes away in `lookahead` seconds, and a handler that
  /// finishes the motion to the stop in closed form (moving the time) and
  /// holds the puck there where mu >= tan(alpha).
  UKB_HD static T event(const T* q, const T* qd, T t, const Params& p) {
    return ukb::friction::stop_event<PuckIncline>(q, qd, t, p, p.mu, p.lookahead);
  }
  UKB_HD static EventAction on_event(T* q, T* qd, T& t, const Params& p) {
    return ukb::friction::finish_stop<PuckIncline>(q, qd, t, p, p.mu);
  }
};

}  // namespace ukb::models
