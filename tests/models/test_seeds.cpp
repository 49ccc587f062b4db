// Tier 3: the seed examples' closed forms at random states.
//
// Bead on a ring with Coulomb friction (Udwadia 2000, J. Math. Anal. Appl.
// 251, section 5, eq. 39) and the particle with y' = z^2 x' and the non-ideal
// force -a0 |u| u (Udwadia & Kalaba 2001, J. Appl. Mech. 68, section 5,
// eq. 17). The closed forms below are derived by hand with a Lagrange
// multiplier (no pseudo-inverse, no Cholesky), and for the ring once more in
// polar coordinates, so that they are independent of the solver.
#include <cmath>

#include "closed_forms.hpp"
#include "support.hpp"

namespace ukb::test {
namespace {

constexpr double kSeedTol = 1e-12;

TEST(Seeds, RingEq39ClosedFormAtRandomStates) {
  using Mo = models::BeadOnRing<double>;
  Rng rng(21);
  for (int i = 0; i < 200; ++i) {
    const Sample<Mo> s = Gen<Mo>::consistent(rng);
    const reference::Result r = reference::evaluate<Mo>(s.p, s.q, s.qd, 0);
    const VectorXd expected = ring_closed_form(s.p.g, s.p.mu, s.q(0), s.q(1), s.qd(0), s.qd(1));
    EXPECT_LT(rel_err(r.qdd, expected, 1e-300), kSeedTol) << "sample " << i;
    // Normal force m |g y - v^2| / R and friction mu times it, against v.
    const double normal = s.p.m * std::abs(s.p.g * s.q(1) - s.qd.squaredNorm()) / s.q.norm();
    EXPECT_NEAR(r.Qc_ideal.norm(), normal, kSeedTol * normal);
    const VectorXd friction = -s.p.mu * normal * s.qd.normalized();
    EXPECT_LT(rel_err(r.Qc_nonideal, friction, 1e-300), kSeedTol);
  }
}

TEST(Seeds, RingAgreesWithPolarDerivation) {
  // The same bead in the angle theta from the bottom: x = R sin th,
  // y = -R cos th. Tangentially m R th'' = -m g sin th - mu N sgn(th'), with
  // the normal force N = m |R th'^2 + g cos th| from the radial balance.
  using Mo = models::BeadOnRing<double>;
  Rng rng(22);
  for (int i = 0; i < 200; ++i) {
    const double R = rng.uniform(0.5, 2), g = rng.uniform(5, 15), mu = rng.uniform(0, 0.8);
    const double th = rng.uniform(-M_PI, M_PI), w = rng.sign() * rng.uniform(0.1, 4);
    const double N = std::abs(R * w * w + g * std::cos(th));
    const double thdd = -g / R * std::sin(th) - mu * N / R * (w > 0 ? 1 : -1);
    const VectorXd expected{{R * std::cos(th) * thdd - R * std::sin(th) * w * w,
                             R * std::sin(th) * thdd + R * std::cos(th) * w * w}};
    const Mo::Params p{rng.uniform(0.5, 2), R, g, mu};
    const VectorXd q{{R * std::sin(th), -R * std::cos(th)}};
    const VectorXd qd{{R * w * std::cos(th), R * w * std::sin(th)}};
    const reference::Result r = reference::evaluate<Mo>(p, q, qd, 0);
    EXPECT_LT(rel_err(r.qdd, expected, 1e-300), kSeedTol) << "sample " << i;
  }
}

TEST(Seeds, RingAtRestFrictionIsStatic) {
  // At rest at angle th from the downward vertical, gravity has the
  // tangential part m g sin th (towards the bottom) and the normal force is
  // m g cos th. Where tan th > mu the bead starts to slide and kinetic
  // friction mu m g cos th opposes the impending motion; where tan th <= mu
  // static friction holds it (zero acceleration).
  using Mo = models::BeadOnRing<double>;
  const double th = 0.7;  // tan th = 0.842
  const VectorXd q{{std::sin(th), -std::cos(th)}}, tangent{{std::cos(th), std::sin(th)}};
  for (const double mu : {0.2, 0.5, 1.0}) {
    Mo::Params p{};
    p.mu = mu;
    const reference::Result r = reference::evaluate<Mo>(p, q, VectorXd::Zero(2), 0);
    ASSERT_EQ(r.status, Status::ok);
    const double at = r.qdd.dot(tangent);
    if (std::tan(th) > mu) {
      EXPECT_NEAR(at, -p.g * std::sin(th) + mu * p.g * std::cos(th), 1e-14) << mu;
      EXPECT_NEAR(r.Qc_nonideal.norm(), mu * p.m * p.g * std::cos(th), 1e-14) << mu;
    } else {
      EXPECT_NEAR(r.qdd.norm(), 0.0, 1e-14) << mu;
      EXPECT_NEAR(r.Qc_nonideal.dot(tangent), p.m * p.g * std::sin(th), 1e-14) << mu;
    }
  }
}

// Particle with y' = z^2 x'. With the multiplier lambda of Qc = (-z^2, 1, 0)
// lambda and C = -a0 |u| u (which satisfies y-component = z^2 x-component on
// the manifold), the constraint y'' = z^2 x'' + 2 z z' x' gives
//   lambda (1 + z^4) = z^2 fx - fy + 2 m z z' x'
//   x'' = (fx + z^2 fy - 2 m z^3 z' x') / (m (1 + z^4)) + Cx / m
//   y'' = z^2 x'' + 2 z z' x'
//   z'' = (fz + Cz) / m
TEST(Seeds, NonholonomicParticleEq17ClosedFormAtRandomStates) {
  using Mo = models::NonholonomicParticle<double>;
  Rng rng(23);
  for (int i = 0; i < 200; ++i) {
    const Sample<Mo> s = Gen<Mo>::consistent(rng);
    const auto& p = s.p;
    const double x = s.q(0), z = s.q(2), xd = s.qd(0), zd = s.qd(2);
    (void)x;
    const VectorXd C = -p.a0 * s.qd.norm() * s.qd;
    const double z2 = z * z, z4 = z2 * z2;
    const double xdd = (p.fx + z2 * p.fy - 2 * p.m * z2 * z * zd * xd) / (p.m * (1 + z4)) + C(0) / p.m;
    const VectorXd expected{{xdd, z2 * xdd + 2 * z * zd * xd, (p.fz + C(2)) / p.m}};
    const double lambda = (z2 * p.fx - p.fy + 2 * p.m * z * zd * xd) / (1 + z4);
    const reference::Result r = reference::evaluate<Mo>(p, s.q, s.qd, 0);
    EXPECT_LT(rel_err(r.qdd, expected, 1e-300), kSeedTol) << "sample " << i;
    EXPECT_LT(rel_err(r.Qc_ideal, VectorXd{{-z2 * lambda, lambda, 0.0}}, 1e-300), kSeedTol);
    EXPECT_LT(rel_err(r.Qc_nonideal, C, 1e-300), kSeedTol);
    ASSERT_EQ(r.lambda.size(), 1);
    EXPECT_NEAR(r.lambda(0), lambda, kSeedTol * std::max(1.0, std::abs(lambda)));
  }
}

}  // namespace
}  // namespace ukb::test
