// A model that is not built into ukb: a bead on a circular hoop of radius R
// that spins at the constant rate omega about the vertical z axis, gravity
// along -z, with viscous friction relative to the hoop. It shows the steps
// of docs/adding-a-model.md, including a time-dependent constraint.
#pragma once

#include <array>
#include <cmath>

#include "ukb/config.hpp"
#include "ukb/model.hpp"

template <class T>
struct RotatingHoop {
  using Scalar = T;
  static constexpr const char* name = "rotating_hoop";
  static constexpr const char* summary = "bead on a hoop spinning about the vertical axis";
  static constexpr int n = 3;  // q = (x, y, z)
  static constexpr int m = 2;  // on the sphere |q| = R, and in the hoop's plane
  static constexpr std::array<const char*, n> coords{"x", "y", "z"};

  struct Params {
    T m = T(1);        // bead mass
    T R = T(1);        // hoop radius
    T g = T(9.81);     // gravity along -z
    T omega = T(3);    // spin rate of the hoop about z
    T c = T(0.1);      // viscous friction coefficient relative to the hoop
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "bead mass (> 0)");
    f("R", p.R, "hoop radius (> 0)");
    f("g", p.g, "gravitational acceleration along -z");
    f("omega", p.omega, "spin rate of the hoop about the z axis [rad/s]");
    f("c", p.c, "viscous friction relative to the hoop (>= 0)");
  }

  UKB_HD static void mass(const T* /*q*/, T /*t*/, const Params& p, T* M) {
    for (int i = 0; i < n * n; ++i) M[i] = T(0);
    M[0] = M[4] = M[8] = p.m;
  }

  // Optional (speed): M is diagonal, so the cpu and cuda backends may factor
  // its diagonal alone; `mass` stays, for the reference backend.
  UKB_HD static void mass_diagonal(const T* /*q*/, T /*t*/, const Params& p, T* d) {
    d[0] = d[1] = d[2] = p.m;
  }

  UKB_HD static void force(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& p, T* Q) {
    Q[0] = T(0);
    Q[1] = T(0);
    Q[2] = -p.m * p.g;
  }

  // Row 1: x^2 + y^2 + z^2 = R^2.  Row 2: -sin(wt) x + cos(wt) y = 0, the
  // bead stays in the plane of the hoop; differentiated twice:
  //   -s x'' + c y'' = -w^2 (s x - c y) + 2 w (c x' + s y').
  UKB_HD static void constraints(const T* q, const T* qd, T t, const Params& p, T* A, T* b) {
    using std::cos;
    using std::sin;
    const T s = sin(p.omega * t), c = cos(p.omega * t), w = p.omega;
    A[0] = q[0];
    A[1] = q[1];
    A[2] = q[2];
    b[0] = -(qd[0] * qd[0] + qd[1] * qd[1] + qd[2] * qd[2]);
    A[3] = -s;
    A[4] = c;
    A[5] = T(0);
    b[1] = -w * w * (s * q[0] - c * q[1]) + T(2) * w * (c * qd[0] + s * qd[1]);
  }

  // Optional: the undifferentiated constraint of each row, scaled as the row
  // (A_i = d phi_i / dq, phi_i'' = (A q'' - b)_i), for stabilisation.
  //   phi_1 = (|q|^2 - R^2) / 2,            phi_1' = q . q'
  //   phi_2 = -sin(wt) x + cos(wt) y,       phi_2' = -s x' + c y' - w (c x + s y)
  static constexpr std::array<ukb::RowKind, m> row_kinds{ukb::RowKind::holonomic,
                                                         ukb::RowKind::holonomic};
  UKB_HD static void constraint_rows(const T* q, const T* qd, T t, const Params& p, T* phi,
                                     T* phid) {
    using std::cos;
    using std::sin;
    const T s = sin(p.omega * t), c = cos(p.omega * t), w = p.omega;
    phi[0] = T(0.5) * (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] - p.R * p.R);
    phid[0] = q[0] * qd[0] + q[1] * qd[1] + q[2] * qd[2];
    phi[1] = -s * q[0] + c * q[1];
    phid[1] = -s * qd[0] + c * qd[1] - w * (c * q[0] + s * q[1]);
  }

  // C = -c (q' - omega z x q): friction against the velocity relative to
  // the spinning hoop.
  UKB_HD static void nonideal(const T* q, const T* qd, T /*t*/, const Params& p,
                              const T* /*Qc_ideal*/, const T* /*lambda*/, T* C) {
    C[0] = -p.c * (qd[0] + p.omega * q[1]);
    C[1] = -p.c * (qd[1] - p.omega * q[0]);
    C[2] = -p.c * qd[2];
  }
};

UKB_MODEL(RotatingHoop)
