// two_link_arm: its M(q) and Q against an independent Lagrangian, and its
// constrained acceleration against the one-coordinate equation of motion of
// the tip along the line (no pseudo-inverse, no Udwadia–Kalaba formula).
#include <cmath>

#include "support.hpp"

namespace ukb::test {
namespace {

using Mo = models::TwoLinkArm<double>;

// Kinetic and potential energy written from the rods' kinematics: centre of
// mass velocities and rotation about the centre (I = m l^2 / 12).
double kinetic(const Mo::Params& p, const VectorXd& q, const VectorXd& qd) {
  const double v1x = 0.5 * p.l1 * qd(0) * std::cos(q(0)), v1y = 0.5 * p.l1 * qd(0) * std::sin(q(0));
  const double v2x = p.l1 * qd(0) * std::cos(q(0)) + 0.5 * p.l2 * qd(1) * std::cos(q(1));
  const double v2y = p.l1 * qd(0) * std::sin(q(0)) + 0.5 * p.l2 * qd(1) * std::sin(q(1));
  return 0.5 * p.m1 * (v1x * v1x + v1y * v1y) + 0.5 * (p.m1 * p.l1 * p.l1 / 12) * qd(0) * qd(0) +
         0.5 * p.m2 * (v2x * v2x + v2y * v2y) + 0.5 * (p.m2 * p.l2 * p.l2 / 12) * qd(1) * qd(1);
}

double potential(const Mo::Params& p, const VectorXd& q) {
  const double y1 = -0.5 * p.l1 * std::cos(q(0));
  const double y2 = -p.l1 * std::cos(q(0)) - 0.5 * p.l2 * std::cos(q(1));
  return p.g * (p.m1 * y1 + p.m2 * y2);
}

// M_ij = d^2 T / dq'_i dq'_j, exact for a quadratic form by polarisation.
MatrixXd mass_from_energy(const Mo::Params& p, const VectorXd& q) {
  MatrixXd M(2, 2);
  const VectorXd e0 = VectorXd::Unit(2, 0), e1 = VectorXd::Unit(2, 1);
  M(0, 0) = 2 * kinetic(p, q, e0);
  M(1, 1) = 2 * kinetic(p, q, e1);
  M(0, 1) = M(1, 0) = kinetic(p, q, e0 + e1) - kinetic(p, q, e0) - kinetic(p, q, e1);
  return M;
}

// Lagrange's equations d/dt(dT/dq') - dT/dq = -dV/dq, i.e. M q'' = Q with
// Q = dT/dq - (dM/dt) q' - dV/dq, by central differences.
VectorXd force_from_energy(const Mo::Params& p, const VectorXd& q, const VectorXd& qd) {
  const double h = 1e-5;
  VectorXd Q(2);
  MatrixXd Mdot = MatrixXd::Zero(2, 2);
  for (int k = 0; k < 2; ++k) {
    const VectorXd dq = h * VectorXd::Unit(2, k);
    const double dT = (kinetic(p, q + dq, qd) - kinetic(p, q - dq, qd)) / (2 * h);
    const double dV = (potential(p, q + dq) - potential(p, q - dq)) / (2 * h);
    Q(k) = dT - dV;
    Mdot += (mass_from_energy(p, q + dq) - mass_from_energy(p, q - dq)) / (2 * h) * qd(k);
  }
  return Q - Mdot * qd;
}

TEST(TwoLinkArm, MassMatrixAndForceMatchTheLagrangian) {
  Rng rng(41);
  for (int i = 0; i < 100; ++i) {
    const Sample<Mo> s = off_manifold(rng, Gen<Mo>::consistent(rng));
    const reference::Terms k = reference::terms<Mo>(s.p, s.q, s.qd, 0);
    const MatrixXd M = mass_from_energy(s.p, s.q);
    EXPECT_LT((k.M - M).norm() / M.norm(), 1e-14) << "sample " << i;
    EXPECT_GT(std::abs(M(0, 1)), 1e-6) << "guard: M is not diagonal";
    const VectorXd Q = force_from_energy(s.p, s.q, s.qd);
    EXPECT_LT(rel_err(k.Q, Q), 1e-8) << "sample " << i;
  }
}

TEST(TwoLinkArm, ConstraintKeepsTheTipOnTheLine) {
  // A and b against finite differences of the tip's distance from the line.
  Rng rng(42);
  for (int i = 0; i < 50; ++i) {
    const Sample<Mo> s = off_manifold(rng, Gen<Mo>::consistent(rng));
    const auto& p = s.p;
    auto phi = [&](const VectorXd& q) {
      const double px = p.l1 * std::sin(q(0)) + p.l2 * std::sin(q(1));
      const double py = -p.l1 * std::cos(q(0)) - p.l2 * std::cos(q(1));
      return -std::sin(p.beta) * (px - p.p0x) + std::cos(p.beta) * (py - p.p0y);
    };
    // phi'' = A q'' - b along q(t) = q + qd t + qdd t^2/2, for any qdd.
    const VectorXd qdd = rng.vector(2, -3, 3);
    const double h = 1e-4;
    auto at = [&](double t) { return phi(s.q + s.qd * t + 0.5 * qdd * t * t); };
    const double phidd = (at(h) - 2 * at(0) + at(-h)) / (h * h);
    const reference::Terms k = reference::terms<Mo>(p, s.q, s.qd, 0);
    EXPECT_NEAR((k.A * qdd)(0) - k.b(0), phidd, 1e-5) << "sample " << i;
  }
}

TEST(TwoLinkArm, AgreesWithTheOneCoordinateEquationAlongTheLine) {
  // With the tip Jacobian J and t the line direction, the tip moves as
  // p' = t s', p'' = t s'', so q' = w s' and q'' = w s'' + h with
  // w = J^{-1} t, h = -J^{-1} J' q'. The constraint force does on the only
  // virtual displacement w the work of the tip friction, w^T J^T F = -c s',
  // hence  w^T (M q'' - Q) = -c s'  gives
  //   s'' = (w^T (Q - M h) - c s') / (w^T M w).
  Rng rng(43);
  double max_c_effect = 0;
  for (int i = 0; i < 200; ++i) {
    const Sample<Mo> s = Gen<Mo>::consistent(rng);
    const auto& p = s.p;
    const double t1 = s.q(0), t2 = s.q(1), w1 = s.qd(0), w2 = s.qd(1);
    MatrixXd J(2, 2);
    J << p.l1 * std::cos(t1), p.l2 * std::cos(t2), p.l1 * std::sin(t1), p.l2 * std::sin(t2);
    const VectorXd Jdqd{{-p.l1 * std::sin(t1) * w1 * w1 - p.l2 * std::sin(t2) * w2 * w2,
                         p.l1 * std::cos(t1) * w1 * w1 + p.l2 * std::cos(t2) * w2 * w2}};
    const VectorXd t{{std::cos(p.beta), std::sin(p.beta)}};
    const VectorXd w = J.lu().solve(t), h = -J.lu().solve(Jdqd);
    const double sd = t.dot(J * s.qd);
    const reference::Terms k = reference::terms<Mo>(p, s.q, s.qd, 0);
    const double sdd = (w.dot(k.Q - k.M * h) - p.c * sd) / w.dot(k.M * w);
    const VectorXd expected = w * sdd + h;
    const reference::Result r = reference::evaluate<Mo>(p, s.q, s.qd, 0);
    EXPECT_LT(rel_err(r.qdd, expected), 1e-12) << "sample " << i;
    max_c_effect = std::max(max_c_effect, std::abs(p.c * sd / w.dot(k.M * w)));
  }
  EXPECT_GT(max_c_effect, 0.1) << "guard: the friction changes the acceleration";
}

}  // namespace
}  // namespace ukb::test
