// A particle sliding inside a rough spherical bowl (tests/scipy_bowl.py checks
// an ensemble of it against SciPy): a 3-D point held on the sphere |q| = R,
// gravity along -z, Coulomb friction against its 2-D sliding velocity with
// the normal force of the constraint (centripetal part included), and the
// stop found and finished by ukb's friction helpers (ukb/friction.hpp).
// On the curved surface the forces change along the last stretch of a stop,
// so its closed-form finish is exact only to that change: the check says by
// how much.
#pragma once

#include <array>
#include <cmath>

#include "ukb/friction.hpp"
#include "ukb/model.hpp"

template <class T>
struct RoughBowl {
  using Scalar = T;
  static constexpr const char* name = "rough_bowl";
  static constexpr const char* summary = "particle in a rough spherical bowl: Coulomb friction on a curved surface";
  static constexpr int n = 3;
  static constexpr int m = 1;
  static constexpr std::array<const char*, n> coords{"x", "y", "z"};
  static constexpr std::array<const char*, 3> initial_names{"theta", "speed", "heading"};
  static constexpr std::array<const char*, 3> initial_docs{
      "angle from the bottom of the bowl [rad], in [0, pi/2)", "sliding speed (>= 0)",
      "angle of the velocity from straight down the bowl [rad]"};

  struct Params {
    T m = T(1);
    T R = T(1);
    T g = T(9.81);
    T mu = T(0.3);
    T lookahead = T(1e-3);
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "particle mass (> 0)");
    f("R", p.R, "radius of the bowl (> 0)");
    f("g", p.g, "gravitational acceleration (> 0)");
    f("mu", p.mu, "Coulomb friction coefficient (>= 0)");
    f("lookahead", p.lookahead, "the stop event's look-ahead [s] (ukb/friction.hpp) (> 0)");
  }

  UKB_HD static void mass(const T* /*q*/, T /*t*/, const Params& p, T* M) {
    for (int i = 0; i < n * n; ++i) M[i] = T(0);
    M[0] = M[4] = M[8] = p.m;
  }
  UKB_HD static void force(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& p, T* Q) {
    Q[0] = T(0), Q[1] = T(0), Q[2] = -p.m * p.g;
  }
  // |q|^2 = R^2 twice differentiated: q . q'' = -|q'|^2.
  UKB_HD static void constraints(const T* q, const T* qd, T /*t*/, const Params& /*p*/, T* A, T* b) {
    A[0] = q[0], A[1] = q[1], A[2] = q[2];
    b[0] = -(qd[0] * qd[0] + qd[1] * qd[1] + qd[2] * qd[2]);
  }
  UKB_HD static void nonideal(const T* q, const T* qd, T t, const Params& p, const T* Qc_ideal,
                              const T* /*lambda*/, T* C) {
    ukb::friction::force<RoughBowl>(q, qd, t, p, Qc_ideal, p.mu, C);
  }
  UKB_HD static void residual(const T* q, const T* qd, T /*t*/, const Params& p, T& pos, T& vel) {
    using std::abs;
    using std::sqrt;
    const T r = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2]);
    pos = abs(r - p.R), vel = abs(q[0] * qd[0] + q[1] * qd[1] + q[2] * qd[2]) / r;
  }
  UKB_HD static T event(const T* q, const T* qd, T t, const Params& p) {
    return ukb::friction::stop_event<RoughBowl>(q, qd, t, p, p.mu, p.lookahead);
  }
  UKB_HD static ukb::EventAction on_event(T* q, T* qd, T& t, const Params& p) {
    return ukb::friction::finish_stop<RoughBowl>(q, qd, t, p, p.mu);
  }
  // At the angle theta from the bottom on the meridian y = 0, moving at
  // `speed` at the angle `heading` from straight down (the direction of
  // falling theta) towards +y.
  UKB_HD static bool initial_state(const T* ic, const Params& p, T* q, T* qd) {
    using std::cos;
    using std::sin;
    const T th = ic[0], v = ic[1], h = ic[2];
    if (!(th >= T(0) && th < T(1.5707963267948966)) || !(v >= T(0)) || !(h - h == T(0))) return false;
    q[0] = p.R * sin(th), q[1] = T(0), q[2] = -p.R * cos(th);
    // e_down = -(cos th, 0, sin th) (falling theta), e_across = (0, 1, 0).
    qd[0] = -v * cos(h) * cos(th), qd[1] = v * sin(h), qd[2] = -v * cos(h) * sin(th);
    return true;
  }
  UKB_HD static void natural_state(const T* q, const T* qd, const Params& p, T* ic) {
    using std::acos;
    using std::atan2;
    using std::cos;
    using std::sin;
    using std::sqrt;
    T c = -q[2] / p.R;
    c = c > T(1) ? T(1) : c < T(-1) ? T(-1) : c;
    const T th = acos(c), ph = atan2(q[1], q[0]);
    const T down = -(qd[0] * cos(th) * cos(ph) + qd[1] * cos(th) * sin(ph) + qd[2] * sin(th));
    const T across = -qd[0] * sin(ph) + qd[1] * cos(ph);
    ic[0] = th, ic[1] = sqrt(down * down + across * across), ic[2] = atan2(across, down);
  }
  // Where around the bowl the particle is (its angle from the bottom is the
  // natural theta_final).
  static constexpr std::array<const char*, 1> observable_names{"azimuth"};
  UKB_HD static void observables(const T* q, const T* /*qd*/, T /*t*/, const Params& /*p*/, T* out) {
    using std::atan2;
    out[0] = atan2(q[1], q[0]);
  }
};

UKB_MODEL(RoughBowl)
