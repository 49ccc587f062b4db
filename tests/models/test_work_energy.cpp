// The work-energy balance of the built-in models, an oracle that shares no
// code with them: over an integrated motion, the change of the kinetic plus
// potential energy equals the work of the non-conservative applied forces
// and non-ideal constraint forces (damping, friction, resistances, driving
// torques). The energies and powers are written here from each model's
// documented physics (`ukb models`), not from its functions; the ideal
// constraint forces do no work on these scleronomic constraints
// (A q' = 0), and q'^T Qc_nonideal = q'^T C there (docs/design.md, the
// projection onto null(B)). A term of the wrong sign (damping that adds
// energy) breaks the balance by twice its work.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ukb/engine.hpp"
#include "ukb/models/all.hpp"

namespace ukb::test {
namespace {

using Vec = std::vector<double>;
// A function of the state (q, q', t): an energy or a power.
using OfState = std::function<double(const Vec& q, const Vec& qd, double t)>;

// Integrates one system of Mo from (q0, qd0) at t = 0 for `steps` RK4 steps
// of dt on each CPU backend and checks E(end) - E(0) = the integral of
// `power` (Simpson's rule over the steps' states), within `rtol` of the
// energies' scale; the work must be at least `min_share` of that scale (so
// that a term of the wrong sign cannot hide in the tolerance; 0: a model
// with none, whose energy stays), and the state
// must keep `moving(q, qd) > 0` (friction slides: no stick without events).
template <class Mo>
void check_balance(const typename Mo::Params& p, const Vec& q0, const Vec& qd0, double dt, int steps,
                   const OfState& energy, const OfState& power, double rtol = 1e-8, double min_share = 0.05,
                   const OfState& moving = nullptr) {
  ASSERT_EQ(steps % 2, 0) << "Simpson's rule takes pairs of steps";
  for (Backend be : {Backend::cpu, Backend::reference}) {
    SCOPED_TRACE(std::string(Mo::name) + " on " + std::string(to_string(be)));
    Batch<Mo> b(1);
    b.set_params(0, p);
    b.set_state(0, q0.data(), qd0.data(), 0.0);
    Vec q(Mo::n), qd(Mo::n);
    auto read = [&] {
      for (int j = 0; j < Mo::n; ++j) q[std::size_t(j)] = b.q(0, j), qd[std::size_t(j)] = b.qd(0, j);
      return b.t(0);
    };
    double t = read();
    const double e0 = energy(q, qd, t);
    double scale = std::abs(e0), work = 0, previous = power(q, qd, t), middle = 0;
    for (int k = 1; k <= steps; ++k) {
      step(b, be, dt, 1);
      ASSERT_EQ(b.status(0), Status::ok) << "step " << k;
      t = read();
      if (moving) {
        ASSERT_GT(moving(q, qd, t), 0.0) << "guard: still sliding at step " << k;
      }
      scale = std::max(scale, std::abs(energy(q, qd, t)));
      const double now = power(q, qd, t);
      if (k % 2 == 1) {
        middle = now;
      } else {
        work += dt / 3 * (previous + 4 * middle + now);
        previous = now;
      }
    }
    const double change = energy(q, qd, t) - e0;
    EXPECT_NEAR(change, work, rtol * scale) << "energy change " << change << ", work " << work;
    if (min_share > 0) {
      EXPECT_GT(std::abs(work), min_share * scale) << "guard: the non-conservative terms do work worth checking";
    }
  }
}

double dot(const Vec& a, const Vec& b, int from = 0, int to = -1) {
  double s = 0;
  for (std::size_t j = std::size_t(from); j < (to < 0 ? a.size() : std::size_t(to)); ++j) s += a[j] * b[j];
  return s;
}

TEST(WorkEnergy, ChainDampingRemovesWhatItsPowerSays) {
  // Three points of mass m on links of length l, pinned at the origin,
  // released horizontal: C = -c q' on every coordinate.
  models::PlanarChain3<double>::Params p;
  p.m = 0.7, p.l = 1.0, p.g = 9.81, p.c = 0.5;
  const Vec q0 = {1, 0, 2, 0, 3, 0}, qd0(6, 0.0);
  check_balance<models::PlanarChain3<double>>(
      p, q0, qd0, 1e-3, 1000,
      [&](const Vec& q, const Vec& qd, double) {
        return 0.5 * p.m * dot(qd, qd) + p.m * p.g * (q[1] + q[3] + q[5]);
      },
      [&](const Vec&, const Vec& qd, double) { return -p.c * dot(qd, qd); });
}

TEST(WorkEnergy, RedundantPendulumDampingRemovesWhatItsPowerSays) {
  models::RedundantPendulum<double>::Params p;
  p.m = 1.3, p.l = 0.8, p.g = 9.81, p.c = 0.6;
  check_balance<models::RedundantPendulum<double>>(
      p, {0.8, 0.0}, {0.0, 0.0}, 1e-3, 1000,
      [&](const Vec& q, const Vec& qd, double) { return 0.5 * p.m * dot(qd, qd) + p.m * p.g * q[1]; },
      [&](const Vec&, const Vec& qd, double) { return -p.c * dot(qd, qd); });
}

TEST(WorkEnergy, RingFrictionRemovesMuTimesTheNormalForceTimesTheSpeed) {
  // The normal force of the ring, from the radial balance at (x, y):
  // -m v^2 / R = N + (-m g y / R), so N = m g y / R - m v^2 / R (outward).
  models::BeadOnRing<double>::Params p;
  p.m = 0.9, p.R = 1.2, p.g = 9.81, p.mu = 0.25;
  check_balance<models::BeadOnRing<double>>(
      p, {0.0, -1.2}, {6.0, 0.0}, 1e-4, 2000,
      [&](const Vec& q, const Vec& qd, double) { return 0.5 * p.m * dot(qd, qd) + p.m * p.g * q[1]; },
      [&](const Vec& q, const Vec& qd, double) {
        const double v2 = dot(qd, qd), N = p.m * p.g * q[1] / p.R - p.m * v2 / p.R;
        return -p.mu * std::abs(N) * std::sqrt(v2);
      },
      1e-8, 0.05, [](const Vec&, const Vec& qd, double) { return std::sqrt(dot(qd, qd)) - 0.5; });
}

TEST(WorkEnergy, InclineFrictionRemovesMuMgCosAlphaTimesTheSpeed) {
  // Sliding down the line at alpha below +x: N = m g cos(alpha).
  models::InclineBlock<double>::Params p;
  p.m = 2.0, p.alpha = 0.5, p.g = 9.81, p.mu = 0.3;
  const double ca = std::cos(p.alpha), sa = std::sin(p.alpha);
  check_balance<models::InclineBlock<double>>(
      p, {0.0, 0.0}, {ca, -sa}, 1e-3, 1000,
      [&](const Vec& q, const Vec& qd, double) { return 0.5 * p.m * dot(qd, qd) + p.m * p.g * q[1]; },
      [&](const Vec&, const Vec& qd, double) { return -p.mu * p.m * p.g * ca * std::sqrt(dot(qd, qd)); }, 1e-8,
      0.05, [](const Vec&, const Vec& qd, double) { return std::sqrt(dot(qd, qd)) - 0.5; });
}

TEST(WorkEnergy, PuckFrictionRemovesMuMgCosAlphaTimesTheSpeedInThePlane) {
  // Launched across the plane with mu < tan(alpha): it slides for good
  // (docs/models.md), the normal force m g cos(alpha), the friction's power
  // -mu m g cos(alpha) |q'|; V = m g (z cos(alpha) - y sin(alpha)).
  models::PuckIncline<double>::Params p;
  p.m = 1.5, p.alpha = 0.4, p.g = 9.81, p.mu = 0.3;
  const double ca = std::cos(p.alpha), sa = std::sin(p.alpha);
  check_balance<models::PuckIncline<double>>(
      p, {0.0, 0.0, 0.0}, {2.0, 0.5, 0.0}, 1e-3, 1000,
      [&](const Vec& q, const Vec& qd, double) {
        return 0.5 * p.m * dot(qd, qd) + p.m * p.g * (q[2] * ca - q[1] * sa);
      },
      [&](const Vec&, const Vec& qd, double) { return -p.mu * p.m * p.g * ca * std::sqrt(dot(qd, qd)); }, 1e-8,
      0.05, [](const Vec&, const Vec& qd, double) { return std::sqrt(dot(qd, qd)) - 0.5; });
}

TEST(WorkEnergy, NonholonomicParticleLosesTheWorkOfItsDrag) {
  // y' = z^2 x'; the constant force f has the potential -f . q; the drag
  // C = -a0 |q'| q' has the power -a0 |q'|^3.
  models::NonholonomicParticle<double>::Params p;
  p.m = 1.5, p.a0 = 0.3, p.fx = 0.4, p.fy = -0.2, p.fz = -9.81;
  check_balance<models::NonholonomicParticle<double>>(
      p, {0.0, 0.0, 1.0}, {1.0, 1.0, 0.0}, 1e-3, 1000,
      [&](const Vec& q, const Vec& qd, double) {
        return 0.5 * p.m * dot(qd, qd) - (p.fx * q[0] + p.fy * q[1] + p.fz * q[2]);
      },
      [&](const Vec&, const Vec& qd, double) { return -p.a0 * std::pow(dot(qd, qd), 1.5); });
}

TEST(WorkEnergy, SleighGainsTheWorkOfItsTorqueAndLosesThatOfItsResistance) {
  // (x, y) the centre of mass, M = diag(m, m, I); the constant force has the
  // potential -F . (x, y); the torque tau0 sin(w t) has the power
  // tau0 sin(w t) theta'; the resistance -c v e1 along the blade, v the
  // forward speed x' cos(theta) + y' sin(theta), the power -c v^2.
  models::ChaplyginSleigh<double>::Params p;
  p.m = 1.2, p.I = 0.15, p.a = 0.2, p.Fx = 0.3, p.Fy = -0.2, p.tau0 = 0.5, p.w = 2.0, p.c = 0.4;
  check_balance<models::ChaplyginSleigh<double>>(
      p, {0.0, 0.0, 0.0}, {1.0, 0.2, 1.0}, 1e-3, 1000,
      [&](const Vec& q, const Vec& qd, double) {
        return 0.5 * p.m * (qd[0] * qd[0] + qd[1] * qd[1]) + 0.5 * p.I * qd[2] * qd[2] - (p.Fx * q[0] + p.Fy * q[1]);
      },
      [&](const Vec& q, const Vec& qd, double t) {
        const double v = qd[0] * std::cos(q[2]) + qd[1] * std::sin(q[2]);
        return p.tau0 * std::sin(p.w * t) * qd[2] - p.c * v * v;
      });
}

TEST(WorkEnergy, RollingDiskGainsItsTorquesWorkAndLosesItsRollingResistance) {
  // Rolling without slipping, x' = r phi' cos(theta), y' = r phi' sin(theta);
  // the steering torque tau_th cos(w_th t) on theta, the driving torque
  // tau_ph sin(w_ph t) and the resistance -c_r phi' on phi.
  models::RollingDisk<double>::Params p;
  p.m = 1.0, p.r = 0.3, p.Ith = 0.0225, p.Jph = 0.045, p.tau_th = 0.1, p.w_th = 3.0, p.tau_ph = 0.2,
  p.w_ph = 2.0, p.c_r = 0.05;
  check_balance<models::RollingDisk<double>>(
      p, {0.0, 0.0, 0.0, 0.0}, {0.6, 0.0, 1.0, 2.0}, 1e-3, 1000,
      [&](const Vec&, const Vec& qd, double) {
        return 0.5 * p.m * (qd[0] * qd[0] + qd[1] * qd[1]) + 0.5 * p.Ith * qd[2] * qd[2] +
               0.5 * p.Jph * qd[3] * qd[3];
      },
      [&](const Vec&, const Vec& qd, double t) {
        return p.tau_th * std::cos(p.w_th * t) * qd[2] + p.tau_ph * std::sin(p.w_ph * t) * qd[3] -
               p.c_r * qd[3] * qd[3];
      });
}

TEST(WorkEnergy, ArmTipFrictionRemovesCTimesTheTipSpeedAlongTheLineSquared) {
  // Rods 1 and 2 from the downward vertical at theta1, theta2: the centres
  // G1 = l1/2 (sin th1, -cos th1), G2 = l1 (sin th1, -cos th1) + l2/2 (sin
  // th2, -cos th2), each rod's own inertia m l^2 / 12; the tip p = l1 (sin
  // th1, -cos th1) + l2 (sin th2, -cos th2) slides on the line through p0
  // along t = (cos beta, sin beta) against F = -c (t . p') t: the power
  // -c (t . p')^2. The line is put through the tip of the starting pose,
  // and omega2 keeps the tip on it.
  models::TwoLinkArm<double>::Params p;
  p.m1 = 1.2, p.m2 = 0.8, p.l1 = 1.0, p.l2 = 0.7, p.g = 9.81, p.c = 0.8, p.beta = 0.2;
  const double th1 = 0.6, th2 = -0.3, w1 = 1.5;
  p.p0x = p.l1 * std::sin(th1) + p.l2 * std::sin(th2), p.p0y = -p.l1 * std::cos(th1) - p.l2 * std::cos(th2);
  const double w2 = -p.l1 * std::sin(th1 - p.beta) * w1 / (p.l2 * std::sin(th2 - p.beta));
  auto tip_velocity = [&](const Vec& q, const Vec& qd) {
    return std::pair{p.l1 * qd[0] * std::cos(q[0]) + p.l2 * qd[1] * std::cos(q[1]),
                     p.l1 * qd[0] * std::sin(q[0]) + p.l2 * qd[1] * std::sin(q[1])};
  };
  check_balance<models::TwoLinkArm<double>>(
      p, {th1, th2}, {w1, w2}, 1e-3, 1000,
      [&](const Vec& q, const Vec& qd, double) {
        const double g1x = 0.5 * p.l1 * qd[0] * std::cos(q[0]), g1y = 0.5 * p.l1 * qd[0] * std::sin(q[0]);
        const double g2x = p.l1 * qd[0] * std::cos(q[0]) + 0.5 * p.l2 * qd[1] * std::cos(q[1]);
        const double g2y = p.l1 * qd[0] * std::sin(q[0]) + 0.5 * p.l2 * qd[1] * std::sin(q[1]);
        const double kinetic = 0.5 * p.m1 * (g1x * g1x + g1y * g1y) + 0.5 * p.m1 * p.l1 * p.l1 / 12 * qd[0] * qd[0] +
                               0.5 * p.m2 * (g2x * g2x + g2y * g2y) + 0.5 * p.m2 * p.l2 * p.l2 / 12 * qd[1] * qd[1];
        const double y1 = -0.5 * p.l1 * std::cos(q[0]), y2 = -p.l1 * std::cos(q[0]) - 0.5 * p.l2 * std::cos(q[1]);
        return kinetic + p.m1 * p.g * y1 + p.m2 * p.g * y2;
      },
      [&](const Vec& q, const Vec& qd, double) {
        const auto [vx, vy] = tip_velocity(q, qd);
        const double along = vx * std::cos(p.beta) + vy * std::sin(p.beta);
        return -p.c * along * along;
      });
}

TEST(WorkEnergy, RollingSphereKeepsItsEnergyWithThePotentialOfItsForce) {
  // Rolling does no work: T (the centre's motion, and the spin with the
  // inertia 2 m r^2 / 5 about any axis, |omega|^2 = psi'^2 + theta'^2 +
  // phi'^2 + 2 psi' phi' cos(theta) in Z-X-Z angles) plus the potential
  // -F . (x, y) of the constant force stays. The start rolls: the contact
  // point's velocity, r phi' sin(theta) + x' cos(psi) + y' sin(psi) and
  // r theta' - x' sin(psi) + y' cos(psi), is zero.
  models::RollingSphere<double>::Params p;
  p.m = 1.0, p.r = 0.1, p.Fx = 0.3, p.Fy = -0.5;
  const double psi = 0.3, theta = 1.0, vx = 0.5, vy = -0.2;
  const double theta_dot = (vx * std::sin(psi) - vy * std::cos(psi)) / p.r;
  const double phi_dot = -(vx * std::cos(psi) + vy * std::sin(psi)) / (p.r * std::sin(theta));
  check_balance<models::RollingSphere<double>>(
      p, {0.0, 0.0, psi, theta, 0.0}, {vx, vy, 0.7, theta_dot, phi_dot}, 1e-4, 2000,
      [&](const Vec& q, const Vec& qd, double) {
        const double spin2 = qd[2] * qd[2] + qd[3] * qd[3] + qd[4] * qd[4] + 2 * qd[2] * qd[4] * std::cos(q[3]);
        return 0.5 * p.m * (qd[0] * qd[0] + qd[1] * qd[1]) + 0.2 * p.m * p.r * p.r * spin2 -
               (p.Fx * q[0] + p.Fy * q[1]);
      },
      [](const Vec&, const Vec&, double) { return 0.0; }, 1e-8, 0.0);
}

}  // namespace
}  // namespace ukb::test
