// A model file that slides in two dimensions (docs/adding-a-model.md): a puck
// on a rough plane inclined at alpha, launched across it. Coulomb friction
// acts against the 2-D sliding velocity, with the normal force from the
// plane's constraint force, and the stop is detected and finished by ukb's
// friction helpers (ukb/friction.hpp: force, stop_event, finish_stop).
//
// Coordinates in the plane's frame: x across the slope (horizontal), y down
// the slope, z along the plane's normal (0 on it). With a = g sin(alpha),
// k = mu / tan(alpha), v the speed and phi the heading (the angle of the
// velocity from straight down the slope), while the puck slides
//   v' = a (cos phi - k),   v phi' = -a sin phi,
// so v sin(phi) / tan(phi / 2)^k stays constant (for k = 1: v (1 + cos phi))
// and k v + y' = k v0 + y'0 + a (1 - k^2) t. For k > 1 (mu > tan alpha) the
// puck stops for good at t = (k v0 + y'0) / (a (k^2 - 1)), where that sum
// reaches 0. For k <= 1 it never stops once launched (k < 1: it accelerates
// down the slope; k = 1: it tends to the speed v0 (1 + cos phi0) / 2
// straight down).
#pragma once

#include <array>
#include <cmath>

#include "ukb/friction.hpp"
#include "ukb/model.hpp"

template <class T>
struct PuckIncline {
  using Scalar = T;
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
    T m = T(1);        // mass
    T alpha = T(0.3);  // inclination of the plane [rad]
    T g = T(9.81);     // gravitational acceleration
    T mu = T(0.5);     // Coulomb friction coefficient (sliding and static)
    T lookahead = T(1e-3);  // the stop event's look-ahead [s] (ukb/friction.hpp)
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "puck mass (> 0)");
    f("alpha", p.alpha, "inclination of the plane [rad], in (0, pi/2)");
    f("g", p.g, "gravitational acceleration (> 0)");
    f("mu", p.mu, "Coulomb friction coefficient (>= 0); the puck stops for good where mu > tan(alpha)");
    f("lookahead", p.lookahead,
      "the stop is finished in closed form from where friction would take the speed left away in this time "
      "[s]: about the RK4 step dt, any positive value with dopri5 (> 0)");
  }

  UKB_HD static void mass(const T* /*q*/, T /*t*/, const Params& p, T* M) {
    for (int i = 0; i < n * n; ++i) M[i] = T(0);
    M[0] = M[4] = M[8] = p.m;
  }
  UKB_HD static void force(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& p, T* Q) {
    using std::cos;
    using std::sin;
    Q[0] = T(0), Q[1] = p.m * p.g * sin(p.alpha), Q[2] = -p.m * p.g * cos(p.alpha);
  }
  UKB_HD static void constraints(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& /*p*/, T* A, T* b) {
    A[0] = T(0), A[1] = T(0), A[2] = T(1), b[0] = T(0);
  }
  // Friction mu |N| against the sliding velocity (q' less its part along
  // the row); at rest, static friction up to mu |N| against the pull down
  // the slope.
  UKB_HD static void nonideal(const T* q, const T* qd, T t, const Params& p, const T* Qc_ideal,
                              const T* /*lambda*/, T* C) {
    ukb::friction::force<PuckIncline>(q, qd, t, p, Qc_ideal, p.mu, C);
  }

  UKB_HD static void residual(const T* q, const T* qd, T /*t*/, const Params& /*p*/, T& pos, T& vel) {
    using std::abs;
    pos = abs(q[2]), vel = abs(qd[2]);
  }
  static constexpr std::array<ukb::RowKind, m> row_kinds{ukb::RowKind::holonomic};
  UKB_HD static void constraint_rows(const T* q, const T* qd, T /*t*/, const Params& /*p*/, T* phi, T* phid) {
    phi[0] = q[2], phid[0] = qd[2];
  }
  UKB_HD static T potential(const T* q, T /*t*/, const Params& p) {
    using std::cos;
    using std::sin;
    return p.m * p.g * (q[2] * cos(p.alpha) - q[1] * sin(p.alpha));
  }
  UKB_HD static bool initial_state(const T* ic, const Params& /*p*/, T* q, T* qd) {
    using std::cos;
    using std::sin;
    if (!(ic[0] >= T(0)) || !(ic[1] - ic[1] == T(0))) return false;  // a speed, a finite heading
    q[0] = q[1] = q[2] = T(0);
    qd[0] = ic[0] * sin(ic[1]), qd[1] = ic[0] * cos(ic[1]), qd[2] = T(0);
    return true;
  }
  UKB_HD static void natural_state(const T* /*q*/, const T* qd, const Params& /*p*/, T* ic) {
    using std::atan2;
    using std::sqrt;
    ic[0] = sqrt(qd[0] * qd[0] + qd[1] * qd[1]);
    ic[1] = atan2(qd[0], qd[1]);
  }
  // The stop: an event a little before it, where the speed left is what
  // friction takes away in `lookahead` seconds, and a handler that finishes
  // the motion to the stop in closed form (moving the time) and holds the
  // puck there where mu >= tan(alpha).
  UKB_HD static T event(const T* q, const T* qd, T t, const Params& p) {
    return ukb::friction::stop_event<PuckIncline>(q, qd, t, p, p.mu, p.lookahead);
  }
  UKB_HD static ukb::EventAction on_event(T* q, T* qd, T& t, const Params& p) {
    return ukb::friction::finish_stop<PuckIncline>(q, qd, t, p, p.mu);
  }
};

UKB_MODEL(PuckIncline)
