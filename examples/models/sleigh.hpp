// A model file (docs/adding-a-model.md): the Chaplygin sleigh, a rigid
// body on a horizontal plane that rests on a knife edge at P = (x, y) and
// points along theta; its centre of mass is a distance a ahead of P. The
// knife edge cannot slip sideways: a nonholonomic constraint.
#pragma once

#include <array>
#include <cmath>

#include "ukb/model.hpp"

template <class T>
struct Sleigh {
  using Scalar = T;
  static constexpr const char* name = "sleigh";
  static constexpr const char* summary = "Chaplygin sleigh: knife edge at (x, y), centre of mass a ahead";
  static constexpr int n = 3;  // q = (x, y, theta)
  static constexpr int m = 1;  // -sin(theta) x' + cos(theta) y' = 0
  static constexpr std::array<const char*, n> coords{"x", "y", "theta"};

  struct Params {
    T mass = T(1);  // mass
    T a = T(0.5);   // distance from the knife edge to the centre of mass
    T I = T(0.1);   // moment of inertia about the centre of mass
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("mass", p.mass, "mass (> 0)");
    f("a", p.a, "distance from the knife edge to the centre of mass");
    f("I", p.I, "moment of inertia about the centre of mass (> 0)");
  }

  // Kinetic energy m/2 |v_G|^2 + I/2 theta'^2, v_G = (x' - a s theta', y' + a c theta').
  UKB_HD static void mass(const T* q, T /*t*/, const Params& p, T* M) {
    using std::cos, std::sin;
    const T s = sin(q[2]), c = cos(q[2]), ma = p.mass * p.a;
    M[0] = p.mass, M[1] = T(0), M[2] = -ma * s;
    M[3] = T(0), M[4] = p.mass, M[5] = ma * c;
    M[6] = -ma * s, M[7] = ma * c, M[8] = p.I + ma * p.a;
  }

  // No applied force; the centripetal terms of the configuration-dependent
  // M (M q'' = Q from Lagrange's equations).
  UKB_HD static void force(const T* q, const T* qd, T /*t*/, const Params& p, T* Q) {
    using std::cos, std::sin;
    const T w2 = p.mass * p.a * qd[2] * qd[2];
    Q[0] = w2 * cos(q[2]), Q[1] = w2 * sin(q[2]), Q[2] = T(0);
  }

  // -s x' + c y' = 0 differentiated once: -s x'' + c y'' = theta' (c x' + s y').
  UKB_HD static void constraints(const T* q, const T* qd, T /*t*/, const Params& /*p*/, T* A, T* b) {
    using std::cos, std::sin;
    const T s = sin(q[2]), c = cos(q[2]);
    A[0] = -s, A[1] = c, A[2] = T(0);
    b[0] = qd[2] * (c * qd[0] + s * qd[1]);
  }

  // An ideal knife edge: no constraint force does work.
  UKB_HD static void nonideal(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& /*p*/,
                              const T* /*Qc_ideal*/, const T* /*lambda*/, T* C) {
    C[0] = C[1] = C[2] = T(0);
  }
};

UKB_MODEL(Sleigh)
