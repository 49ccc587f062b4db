// Test support: random parameters and random states for every built-in
// model, generated from each model's natural coordinates (angles, arclength)
// independently of the model code, plus small linear-algebra helpers.
#pragma once

#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <random>
#include <type_traits>

#include "ukb/models/all.hpp"
#include "ukb/reference.hpp"

#include "sanitized.hpp"
#include "worst.hpp"

namespace ukb::test {

using Eigen::MatrixXd;
using Eigen::VectorXd;

/// Fixed-seed generator: tests are reproducible.
struct Rng {
  std::mt19937_64 engine;
  explicit Rng(unsigned long seed) : engine(seed) {}
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(engine); }
  double sign() { return uniform(0, 1) < 0.5 ? -1.0 : 1.0; }
  VectorXd vector(int n, double lo, double hi) {
    VectorXd v(n);
    for (int i = 0; i < n; ++i) v(i) = uniform(lo, hi);
    return v;
  }
  MatrixXd matrix(int r, int c, double lo = -1, double hi = 1) {
    MatrixXd a(r, c);
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < c; ++j) a(i, j) = uniform(lo, hi);
    return a;
  }
};

/// A system: parameters and a state.
template <class Mo>
struct Sample {
  typename Mo::Params p;
  VectorXd q, qd;
  double t = 0;
};

/// Random parameters and states on the constraint manifold (consistent
/// position and velocity), per model. Specialised below.
template <class Mo>
struct Gen;

template <>
struct Gen<models::BeadOnRing<double>> {
  using Mo = models::BeadOnRing<double>;
  static Sample<Mo> consistent(Rng& r) {
    Sample<Mo> s;
    s.p = {r.uniform(0.5, 2), r.uniform(0.5, 2), r.uniform(5, 15), r.uniform(0, 0.8)};
    const double th = r.uniform(-M_PI, M_PI), w = r.sign() * r.uniform(0.1, 4), R = s.p.R;
    s.q = VectorXd{{R * std::sin(th), -R * std::cos(th)}};
    s.qd = VectorXd{{R * w * std::cos(th), R * w * std::sin(th)}};
    return s;
  }
};

template <>
struct Gen<models::NonholonomicParticle<double>> {
  using Mo = models::NonholonomicParticle<double>;
  static Sample<Mo> consistent(Rng& r) {
    Sample<Mo> s;
    s.p = {r.uniform(0.5, 2), r.uniform(0, 0.5), r.uniform(-5, 5), r.uniform(-5, 5), r.uniform(-15, 5)};
    s.q = r.vector(3, -1.5, 1.5);
    const double xd = r.uniform(-2, 2), zd = r.uniform(-2, 2);
    s.qd = VectorXd{{xd, s.q(2) * s.q(2) * xd, zd}};
    return s;
  }
};

template <>
struct Gen<models::InclineBlock<double>> {
  using Mo = models::InclineBlock<double>;
  static Sample<Mo> consistent(Rng& r) {
    Sample<Mo> s;
    s.p = {r.uniform(0.5, 2), r.uniform(0.1, 1.2), r.uniform(5, 15), r.uniform(0, 1)};
    const double a = s.p.alpha, pos = r.uniform(-3, 3), vel = r.sign() * r.uniform(0.1, 3);
    s.q = VectorXd{{pos * std::cos(a), -pos * std::sin(a)}};
    s.qd = VectorXd{{vel * std::cos(a), -vel * std::sin(a)}};
    return s;
  }
};

template <>
struct Gen<models::PuckIncline<double>> {
  using Mo = models::PuckIncline<double>;
  static Sample<Mo> consistent(Rng& r) {
    Sample<Mo> s;
    // mu < 0.8 tan(alpha) (k < 0.8), launched at 1 to 3 m/s with a heading
    // within pi/2 of straight down the slope: it never stops, and its speed
    // stays above 0.69 of the launch's (docs/models.md's invariant), so
    // every test's run follows a smooth slide (stops have tests of their
    // own: tests/models/test_puck.cpp, Simd.SurfaceFriction*).
    const double alpha = r.uniform(0.1, 1.2);
    s.p = {r.uniform(0.5, 2), alpha, r.uniform(5, 15), r.uniform(0, 0.8) * std::tan(alpha), r.uniform(1e-3, 1e-2)};
    const double speed = r.uniform(1, 3), heading = r.uniform(-M_PI / 2, M_PI / 2);
    s.q = VectorXd{{r.uniform(-3, 3), r.uniform(-3, 3), 0.0}};
    s.qd = VectorXd{{speed * std::sin(heading), speed * std::cos(heading), 0.0}};
    return s;
  }
};

template <int K>
struct Gen<models::PlanarChain<double, K>> {
  using Mo = models::PlanarChain<double, K>;
  static Sample<Mo> consistent(Rng& r) {
    Sample<Mo> s;
    s.p = {r.uniform(0.5, 2), r.uniform(0.5, 2), r.uniform(5, 15), r.uniform(0, 1)};
    s.q.resize(2 * K);
    s.qd.resize(2 * K);
    double x = 0, y = 0, u = 0, v = 0;
    for (int k = 0; k < K; ++k) {
      const double phi = r.uniform(-M_PI, M_PI), w = r.uniform(-2, 2), l = s.p.l;
      x += l * std::sin(phi);
      y -= l * std::cos(phi);
      u += l * w * std::cos(phi);
      v += l * w * std::sin(phi);
      s.q.segment(2 * k, 2) << x, y;
      s.qd.segment(2 * k, 2) << u, v;
    }
    return s;
  }
};

template <>
struct Gen<models::RedundantPendulum<double>> {
  using Mo = models::RedundantPendulum<double>;
  static Sample<Mo> consistent(Rng& r) {
    Sample<Mo> s;
    s.p = {r.uniform(0.5, 2), r.uniform(0.5, 2), r.uniform(5, 15), r.uniform(0, 1)};
    const double th = r.uniform(-M_PI, M_PI), w = r.uniform(-4, 4), l = s.p.l;
    s.q = VectorXd{{l * std::sin(th), -l * std::cos(th)}};
    s.qd = VectorXd{{l * w * std::cos(th), l * w * std::sin(th)}};
    return s;
  }
};

template <>
struct Gen<models::TwoLinkArm<double>> {
  using Mo = models::TwoLinkArm<double>;
  static Sample<Mo> consistent(Rng& r) {
    Sample<Mo> s;
    auto& p = s.p;
    p.m1 = r.uniform(0.5, 2);
    p.m2 = r.uniform(0.5, 2);
    p.l1 = r.uniform(0.9, 1.3);
    p.l2 = r.uniform(0.9, 1.3);
    p.g = r.uniform(5, 15);
    p.c = r.uniform(0, 2);
    p.beta = r.uniform(-0.6, 0.6);
    p.p0x = r.uniform(-0.3, 0.3);
    p.p0y = r.uniform(-1.5, -1.1);  // the line passes within 1.5 of the pivot: reachable
    // A tip position on the line, reachable with a bent elbow.
    double px = 0, py = 0, rho2 = 0;
    do {
      const double sl = r.uniform(-2, 2);
      px = p.p0x + sl * std::cos(p.beta);
      py = p.p0y + sl * std::sin(p.beta);
      rho2 = px * px + py * py;
    } while (std::sqrt(rho2) > p.l1 + p.l2 - 0.1 || std::sqrt(rho2) < std::abs(p.l1 - p.l2) + 0.1);
    // Inverse kinematics with e(th) = (sin th, -cos th): p = l1 e(th1) + l2 e(th1 - d).
    const double d = r.sign() * std::acos((rho2 - p.l1 * p.l1 - p.l2 * p.l2) / (2 * p.l1 * p.l2));
    const double gamma = std::atan2(-p.l2 * std::sin(d), p.l1 + p.l2 * std::cos(d));
    const double th1 = std::atan2(px, -py) - gamma;
    s.q = VectorXd{{th1, th1 - d}};
    // A velocity tangent to the constraint: A q' = 0 with A = [a1, a2].
    const double a1 = p.l1 * std::sin(s.q(0) - p.beta), a2 = p.l2 * std::sin(s.q(1) - p.beta);
    const double w = r.uniform(-3, 3) / std::hypot(a1, a2);
    s.qd = VectorXd{{a2 * w, -a1 * w}};
    return s;
  }
};

template <>
struct Gen<models::ChaplyginSleigh<double>> {
  using Mo = models::ChaplyginSleigh<double>;
  static Sample<Mo> consistent(Rng& r) {
    Sample<Mo> s;
    s.p = {r.uniform(0.5, 2),  r.uniform(0.05, 0.5), r.uniform(-0.5, 0.5), r.uniform(-2, 2),
           r.uniform(-2, 2),   r.uniform(-1, 1),     r.uniform(0, 3),      r.uniform(0, 1)};
    const double th = r.uniform(-M_PI, M_PI), v = r.uniform(-2, 2), w = r.uniform(-3, 3);
    // The centre of mass moves at v along e1 and at a w along e2 (the blade
    // a behind it has no sideways speed).
    s.q = VectorXd{{r.uniform(-2, 2), r.uniform(-2, 2), th}};
    s.qd = VectorXd{{v * std::cos(th) - s.p.a * w * std::sin(th), v * std::sin(th) + s.p.a * w * std::cos(th), w}};
    return s;
  }
};

template <>
struct Gen<models::RollingDisk<double>> {
  using Mo = models::RollingDisk<double>;
  static Sample<Mo> consistent(Rng& r) {
    Sample<Mo> s;
    s.p = {r.uniform(0.5, 2), r.uniform(0.1, 0.5), r.uniform(0.01, 0.1), r.uniform(0.01, 0.1), r.uniform(-1, 1),
           r.uniform(0, 3),   r.uniform(-1, 1),    r.uniform(0, 3),      r.uniform(0, 0.5)};
    const double th = r.uniform(-M_PI, M_PI), thd = r.uniform(-3, 3), phd = r.uniform(-5, 5);
    s.q = VectorXd{{r.uniform(-2, 2), r.uniform(-2, 2), th, r.uniform(-M_PI, M_PI)}};
    s.qd = VectorXd{{s.p.r * phd * std::cos(th), s.p.r * phd * std::sin(th), thd, phd}};
    return s;
  }
};

template <>
struct Gen<models::RollingSphere<double>> {
  using Mo = models::RollingSphere<double>;
  static Sample<Mo> consistent(Rng& r) {
    Sample<Mo> s;
    // Slow (|w| <= 0.3, a small force): the tests' runs of 1 s then keep the
    // body axis more than 0.1 rad from the vertical.
    s.p = {r.uniform(0.5, 2), r.uniform(0.1, 0.3), r.uniform(-0.02, 0.02), r.uniform(-0.02, 0.02)};
    // Away from the gimbal lock (sin theta = 0; also after off_manifold's
    // perturbation of up to 0.3); the centre's velocity from
    // the Euler rates by rolling (the seed text's relations):
    // x' = r theta' sin psi - r phi' sin theta cos psi,
    // y' = -r theta' cos psi - r phi' sin theta sin psi.
    const double psi = r.uniform(-M_PI, M_PI), th = r.uniform(0.4, M_PI - 0.4), R = s.p.r;
    const double psid = r.uniform(-0.1, 0.1), thd = r.uniform(-0.1, 0.1), phd = r.uniform(-0.1, 0.1);
    s.q = VectorXd{{r.uniform(-2, 2), r.uniform(-2, 2), psi, th, r.uniform(-M_PI, M_PI)}};
    s.qd = VectorXd{{R * thd * std::sin(psi) - R * phd * std::sin(th) * std::cos(psi),
                     -R * thd * std::cos(psi) - R * phd * std::sin(th) * std::sin(psi), psid, thd, phd}};
    return s;
  }
};

/// A random state off the constraint manifold: positions and velocities
/// perturbed in every coordinate. Keeps the parameters of `base`.
template <class Mo>
Sample<Mo> off_manifold(Rng& r, Sample<Mo> base) {
  base.q += r.vector(Mo::n, -0.3, 0.3);
  base.qd += r.vector(Mo::n, -0.5, 0.5);
  base.t = r.uniform(-1, 1);
  return base;
}

/// |x - y| / max(|y|, floor): relative error with an absolute floor.
inline double rel_err(const VectorXd& x, const VectorXd& y, double floor = 1.0) {
  return (x - y).norm() / std::max(y.norm(), floor);
}

/// Runs `f.template operator()<Mo>()` for every double built-in model.
template <class F>
void for_each_model(F&& f) {
  models::Builtin::for_each<double>(f);
}

/// One built-in model of each kind of code: events and friction
/// (bead_on_ring), rank drops (redundant_pendulum), the largest arrays
/// (planar_chain_12, the chains' template), nonholonomic rows
/// (chaplygin_sleigh, rolling_sphere). The engine tests take these alone
/// under the sanitizers (memory errors, undefined behaviour: not numbers,
/// which the main build checks for every model). Every model's own code
/// still runs there, in tests that keep all models: its mass, forces and
/// constraints in the principle tests, its constraint rows in
/// ConstraintRows.*, its mass_diagonal and constraint_columns in
/// Registry.EveryBuiltinDiagonalAndColumnsAgreeWithItsDenseSelf.
using ModelKinds = models::ModelList<models::BeadOnRing, models::RedundantPendulum, models::PlanarChain12,
                                     models::ChaplyginSleigh, models::RollingSphere>;

/// The models of the engine, emulation, kernel and stabilisation tests'
/// per-model loops: every built-in model in the main build, ModelKinds'
/// under the sanitizers, where the per-model instances dominate those
/// tests' compile.
using TestedModels = std::conditional_t<sanitized, ModelKinds, models::Builtin>;

/// Calls f.template operator()<Mo>() for TestedModels' models in double.
template <class F>
void for_each_model_or_kind(F&& f) {
  TestedModels::for_each<double>(f);
}

}  // namespace ukb::test
