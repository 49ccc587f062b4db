// The nonholonomic systems of the seed text on Lagrange equations with
// multipliers (section 13.6): the Chaplygin sleigh, the rolling disk and the
// rolling sphere. Each reference below is derived by hand from Newton's and
// Euler's laws in the system's own variables (forward speed and turning
// rate; rolling rate; the centre's acceleration and the vertical spin), not
// through the Udwadia–Kalaba formula, and checked against the cpu and the
// reference backends.
#include <cmath>
#include <limits>

#include "engine_support.hpp"

namespace ukb::test {
namespace {

constexpr double kAccelTol = 1e-12;

// q'' of every system of b on a backend (evaluate), row by row.
template <class Mo>
std::vector<VectorXd> accelerations(Batch<Mo>& b, Backend be) {
  EXPECT_EQ(evaluate(b, be), 0) << Mo::name << " on " << to_string(be);
  std::vector<VectorXd> out(b.size(), VectorXd(Mo::n));
  for (int i = 0; i < b.size(); ++i)
    for (int j = 0; j < Mo::n; ++j) out[i](j) = b.qdd(i, j);
  return out;
}

// Random consistent systems (engine_support.hpp) at random times: the
// time-dependent torques at any phase.
template <template <class> class Model>
RandomBatch<Model> at_random_times(int N, unsigned long seed) {
  RandomBatch<Model> r(N, seed);
  Rng rng(seed + 1);
  for (int i = 0; i < N; ++i) {
    r.samples[i].t = rng.uniform(0, 5);
    r.set(i, r.samples[i]);
  }
  return r;
}

// The natural initial quantities give a state on the constraints, and the
// state gives them back.
template <class Mo>
void expect_natural_round_trip(const Sample<Mo>& s) {
  constexpr int k = static_cast<int>(Mo::initial_names.size());
  double ic[k], back[k], q[Mo::n], qd[Mo::n];
  Mo::natural_state(s.q.data(), s.qd.data(), s.p, ic);
  ASSERT_TRUE(Mo::initial_state(ic, s.p, q, qd));
  for (int j = 0; j < Mo::n; ++j) {
    EXPECT_NEAR(q[j], s.q(j), 1e-12 * (1 + std::abs(s.q(j))));
    EXPECT_NEAR(qd[j], s.qd(j), 1e-12 * (1 + std::abs(s.qd(j))));
  }
  double pos = -1, vel = -1;
  Mo::residual(q, qd, 0.0, s.p, pos, vel);
  EXPECT_EQ(pos, 0.0);
  EXPECT_LT(vel, 1e-13);
  Mo::natural_state(q, qd, s.p, back);
  for (int j = 0; j < k; ++j) EXPECT_NEAR(back[j], ic[j], 1e-12 * (1 + std::abs(ic[j])));
}

// ---------------------------------------------------------------- sleigh

// With e1 = (cos th, sin th), e2 = (-sin th, cos th), the centre of mass
// moves at v e1 + a w e2 (the blade, a behind it, has no sideways speed).
// Newton along e1 and e2 with the blade's lateral force N e2 at -a e1, and
// Euler about the centre of mass (torque -a N):
//   m (v' - a w^2) = F.e1 - c v,  m (a w' + v w) = F.e2 + N,  I w' = tau - a N,
// so v' = a w^2 + (F.e1 - c v)/m and (I + m a^2) w' = -m a v w + a F.e2 + tau;
// then (x'', y'') = (v' - a w^2) e1 + (v w + a w') e2 and th'' = w'.
VectorXd sleigh_by_hand(const models::ChaplyginSleigh<double>::Params& p, const VectorXd& q, const VectorXd& qd,
                        double t) {
  const double c = std::cos(q(2)), s = std::sin(q(2)), w = qd(2);
  const double v = qd(0) * c + qd(1) * s;
  const double Fe1 = p.Fx * c + p.Fy * s, Fe2 = -p.Fx * s + p.Fy * c, tau = p.tau0 * std::sin(p.w * t);
  const double vd = p.a * w * w + (Fe1 - p.c * v) / p.m;
  const double wd = (-p.m * p.a * v * w + p.a * Fe2 + tau) / (p.I + p.m * p.a * p.a);
  const double along = vd - p.a * w * w, across = v * w + p.a * wd;
  return VectorXd{{along * c - across * s, along * s + across * c, wd}};
}

TEST(Sleigh, AccelerationIsThatOfTheReducedEquations) {
  using Mo = models::ChaplyginSleigh<double>;
  RandomBatch<models::ChaplyginSleigh> r = at_random_times<models::ChaplyginSleigh>(300, 201);
  Batch<Mo>& b = r.batch;
  const std::vector<Sample<Mo>>& samples = r.samples;
  for (Backend be : {Backend::reference, Backend::cpu}) {
    const std::vector<VectorXd> qdd = accelerations(b, be);
    double worst = 0;
    for (int i = 0; i < b.size(); ++i) {
      const Sample<Mo>& s = samples[i];
      worst_of(worst, rel_err(qdd[i], sleigh_by_hand(s.p, s.q, s.qd, s.t), 1e-300));
    }
    EXPECT_LT(worst, kAccelTol) << to_string(be);
  }
  for (const Sample<Mo>& s : samples) expect_natural_round_trip<Mo>(s);
}

TEST(Sleigh, WithoutForcesTheEnergyStaysAndTheTurningDiesOut) {
  // m v^2 + J w^2 = 2E (J = I + m a^2) is constant, so with V = sqrt(2E/m)
  // v' = a w^2 = a m (V^2 - v^2)/J: v(t) = V tanh(a m V t/J + atanh(v0/V)),
  // and w^2 = m (V^2 - v^2)/J decays to zero: the sleigh ends on a straight
  // line at speed V. The heading's sign of turn never changes.
  using Mo = models::ChaplyginSleigh<double>;
  const int N = 16;
  Batch<Mo> b(N);
  Rng rng(202);
  std::vector<double> v0(N), w0(N);
  for (int i = 0; i < N; ++i) {
    Mo::Params p;
    p.m = rng.uniform(0.5, 2);
    p.I = rng.uniform(0.05, 0.3);
    p.a = rng.uniform(0.1, 0.4);
    b.set_params(i, p);
    v0[i] = rng.uniform(-0.5, 1);
    w0[i] = rng.sign() * rng.uniform(1, 3);
    const double ic[5] = {rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-3, 3), v0[i], w0[i]};
    double q[3], qd[3];
    ASSERT_TRUE(Mo::initial_state(ic, p, q, qd));
    b.set_state(i, q, qd);
  }
  // 40 s on the cpu backend (5 s under the sanitizers), the first 5 s on the
  // reference (slow by design; 1 s under the sanitizers).
  const double dt = 1e-3, T = sanitized ? 5 : 40;
  for (Backend be : {Backend::cpu, Backend::reference}) {
    Batch<Mo> run = b;
    const long steps = be == Backend::cpu ? long(T / dt) : (sanitized ? 1000 : 5000);
    ASSERT_EQ(step(run, be, dt, steps).failed, 0);
    for (int i = 0; i < N; ++i) {
      SCOPED_TRACE(std::string(to_string(be)) + " system " + std::to_string(i));
      const Mo::Params p = run.params(i);
      const double J = p.I + p.m * p.a * p.a;
      const double E = 0.5 * (p.m * v0[i] * v0[i] + J * w0[i] * w0[i]), V = std::sqrt(2 * E / p.m);
      const double t = run.t(i), th = run.q(i, 2), w = run.qd(i, 2);
      const double v = run.qd(i, 0) * std::cos(th) + run.qd(i, 1) * std::sin(th);
      const double energy = 0.5 * (p.m * (run.qd(i, 0) * run.qd(i, 0) + run.qd(i, 1) * run.qd(i, 1)) +
                                   p.I * w * w);
      EXPECT_LT(std::abs(energy - E) / E, 1e-10) << "energy";
      EXPECT_NEAR(v, V * std::tanh(p.a * p.m * V * t / J + std::atanh(v0[i] / V)), 1e-9 * V) << "forward speed";
      EXPECT_GE(w * w0[i], 0.0) << "the turn keeps its sign";
      if (be == Backend::cpu && !sanitized) {
        EXPECT_LT(std::abs(w), 1e-6 * std::abs(w0[i])) << "straight line at the end";
        EXPECT_NEAR(std::abs(v), V, 1e-9 * V);
      }
    }
  }
}

// ---------------------------------------------------------------- disk

// theta'' = tau_th / Ith; along the rolling direction the contact force
// (lambda1, lambda2) = m (x'', y'') acts on the rim: (Jph + m r^2) phi'' =
// tau_ph - c_r phi'; (x', y') = r phi' (cos th, sin th) differentiated gives
// x'', y''.
VectorXd disk_by_hand(const models::RollingDisk<double>::Params& p, const VectorXd& q, const VectorXd& qd, double t) {
  const double c = std::cos(q(2)), s = std::sin(q(2)), thd = qd(2), phd = qd(3);
  const double thdd = p.tau_th * std::cos(p.w_th * t) / p.Ith;
  const double phdd = (p.tau_ph * std::sin(p.w_ph * t) - p.c_r * phd) / (p.Jph + p.m * p.r * p.r);
  return VectorXd{{p.r * (phdd * c - phd * thd * s), p.r * (phdd * s + phd * thd * c), thdd, phdd}};
}

TEST(Disk, AccelerationIsThatOfTheReducedEquations) {
  using Mo = models::RollingDisk<double>;
  RandomBatch<models::RollingDisk> r = at_random_times<models::RollingDisk>(300, 203);
  Batch<Mo>& b = r.batch;
  const std::vector<Sample<Mo>>& samples = r.samples;
  for (Backend be : {Backend::reference, Backend::cpu}) {
    const std::vector<VectorXd> qdd = accelerations(b, be);
    double worst = 0;
    for (int i = 0; i < b.size(); ++i) {
      const Sample<Mo>& s = samples[i];
      worst_of(worst, rel_err(qdd[i], disk_by_hand(s.p, s.q, s.qd, s.t), 1e-300));
    }
    EXPECT_LT(worst, kAccelTol) << to_string(be);
  }
  for (const Sample<Mo>& s : samples) expect_natural_round_trip<Mo>(s);
}

TEST(Disk, TrajectoriesFollowTheClosedFormsUnderConstantTorques) {
  // A constant steering torque (w_th = 0) and no driving torque, rolling
  // resistance c_r: theta = th0 + w0 t + tau_th t^2 / (2 Ith), phi' = p0
  // e^{-k t} with k = c_r / (Jph + m r^2). Without the steering torque the
  // contact point's path integrates in closed form:
  // x = x0 + r p0 [e^{-k s} (w0 sin th(s) - k cos th(s))]_0^t / (k^2 + w0^2),
  // y = y0 + r p0 [e^{-k s} (-k sin th(s) - w0 cos th(s))]_0^t / (k^2 + w0^2).
  using Mo = models::RollingDisk<double>;
  const int N = 24;
  Batch<Mo> b(N);
  Rng rng(204);
  std::vector<Mo::Params> ps(N);
  std::vector<std::array<double, 6>> ics(N);
  for (int i = 0; i < N; ++i) {
    Mo::Params& p = ps[i];
    p.m = rng.uniform(0.5, 2);
    p.r = rng.uniform(0.1, 0.5);
    p.Ith = rng.uniform(0.01, 0.1);
    p.Jph = rng.uniform(0.01, 0.1);
    p.tau_th = i % 2 == 0 ? 0.0 : rng.uniform(-0.2, 0.2);
    p.c_r = rng.uniform(0, 0.1);
    ics[i] = {rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-3, 3), rng.uniform(-3, 3), rng.uniform(-2, 2),
              rng.uniform(-5, 5)};
    double q[4], qd[4];
    ASSERT_TRUE(Mo::initial_state(ics[i].data(), p, q, qd));
    b.set_params(i, p);
    b.set_state(i, q, qd);
  }
  for (Backend be : {Backend::cpu, Backend::reference}) {
    Batch<Mo> run = b;
    ASSERT_EQ(step(run, be, 1e-3, sanitized_shorter(3000, 4)).failed, 0);
    for (int i = 0; i < N; ++i) {
      SCOPED_TRACE(std::string(to_string(be)) + " system " + std::to_string(i));
      const Mo::Params& p = ps[i];
      const auto& ic = ics[i];
      const double t = run.t(i), k = p.c_r / (p.Jph + p.m * p.r * p.r), w0 = ic[4], p0 = ic[5];
      const double th = ic[2] + w0 * t + p.tau_th * t * t / (2 * p.Ith);
      const double decay = k > 0 ? (1 - std::exp(-k * t)) / k : t;
      EXPECT_NEAR(run.q(i, 2), th, 1e-10 * (1 + std::abs(th)));
      EXPECT_NEAR(run.q(i, 3), ic[3] + p0 * decay, 1e-10 * (1 + std::abs(p0 * t)));
      EXPECT_NEAR(run.qd(i, 3), p0 * std::exp(-k * t), 1e-10 * (1 + std::abs(p0)));
      if (p.tau_th == 0) {
        auto fx = [&](double s) { return std::exp(-k * s) * (w0 * std::sin(ic[2] + w0 * s) - k * std::cos(ic[2] + w0 * s)); };
        auto fy = [&](double s) { return std::exp(-k * s) * (-k * std::sin(ic[2] + w0 * s) - w0 * std::cos(ic[2] + w0 * s)); };
        const double scale = p.r * p0 / (k * k + w0 * w0);
        EXPECT_NEAR(run.q(i, 0), ic[0] + scale * (fx(t) - fx(0)), 1e-9 * (1 + std::abs(p.r * p0 * t)));
        EXPECT_NEAR(run.q(i, 1), ic[1] + scale * (fy(t) - fy(0)), 1e-9 * (1 + std::abs(p.r * p0 * t)));
      }
    }
  }
}

// ---------------------------------------------------------------- sphere

using Sphere = models::RollingSphere<double>;

TEST(Sphere, TheCentreAcceleratesAtFiveSeventhsOfFOverMAndTheVerticalSpinStays) {
  // Rolling: m a = F + f (f the friction at the contact), (2/5) m r^2 alpha =
  // r f (about the centre) and a = r alpha: a = F / (m (1 + 2/5)) = 5F/(7m).
  // The contact force has no moment about the vertical through the centre:
  // w_z = psi' + phi' cos theta is constant, d/dt = psi'' + phi'' cos theta -
  // phi' theta' sin theta = 0 (the seed text's equation (1)).
  RandomBatch<models::RollingSphere> r = at_random_times<models::RollingSphere>(300, 205);
  Batch<Sphere>& b = r.batch;
  const std::vector<Sample<Sphere>>& samples = r.samples;
  for (Backend be : {Backend::reference, Backend::cpu}) {
    const std::vector<VectorXd> qdd = accelerations(b, be);
    double worst_centre = 0, worst_spin = 0;
    for (int i = 0; i < b.size(); ++i) {
      const Sample<Sphere>& s = samples[i];
      const VectorXd centre{{5 * s.p.Fx / (7 * s.p.m), 5 * s.p.Fy / (7 * s.p.m)}};
      worst_of(worst_centre, rel_err(qdd[i].head(2), centre, 1e-300));
      const double th = s.q(3), scale = qdd[i].tail(3).norm() + s.qd.tail(3).squaredNorm();
      worst_of(worst_spin, std::abs(qdd[i](2) + qdd[i](4) * std::cos(th) -
                                                 s.qd(4) * s.qd(3) * std::sin(th)) / scale);
    }
    EXPECT_LT(worst_centre, kAccelTol) << to_string(be);
    EXPECT_LT(worst_spin, kAccelTol) << to_string(be);
  }
  for (const Sample<Sphere>& s : samples) expect_natural_round_trip<Sphere>(s);
}

TEST(Sphere, RollingConservesEnergyAndTheCentreMovesAsUnderFiveSeventhsOfF) {
  // With the force F the centre moves as x0 + v0 t + (5 F / 14 m) t^2; the
  // energy T - F.x and the vertical spin stay; without F the centre keeps
  // its velocity. Rates kept small so that theta stays clear of 0 and pi.
  const int N = 16;
  Batch<Sphere> b(N);
  Rng rng(206);
  std::vector<std::array<double, 8>> ics(N);
  for (int i = 0; i < N; ++i) {
    Sphere::Params p;
    p.m = rng.uniform(0.5, 2);
    p.r = rng.uniform(0.05, 0.3);
    p.Fx = i % 2 == 0 ? 0.0 : rng.uniform(-1, 1);
    p.Fy = i % 2 == 0 ? 0.0 : rng.uniform(-1, 1);
    ics[i] = {rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-3, 3), rng.uniform(1.2, 1.9), rng.uniform(-3, 3),
              rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05), rng.uniform(-1, 1)};
    double q[5], qd[5];
    ASSERT_TRUE(Sphere::initial_state(ics[i].data(), p, q, qd));
    b.set_params(i, p);
    b.set_state(i, q, qd);
  }
  auto energy = [](const Sphere::Params& p, const double* q, const double* qd) {
    const double k = 2 * p.m * p.r * p.r / 5;
    return 0.5 * p.m * (qd[0] * qd[0] + qd[1] * qd[1]) +
           0.5 * k * (qd[2] * qd[2] + qd[3] * qd[3] + qd[4] * qd[4] + 2 * qd[2] * qd[4] * std::cos(q[3])) -
           (p.Fx * q[0] + p.Fy * q[1]);
  };
  for (Backend be : {Backend::cpu, Backend::reference}) {
    Batch<Sphere> run = b;
    ASSERT_EQ(step(run, be, 1e-3, sanitized_shorter(2000, 4)).failed, 0);
    for (int i = 0; i < N; ++i) {
      SCOPED_TRACE(std::string(to_string(be)) + " system " + std::to_string(i));
      const Sphere::Params p = run.params(i);
      const auto& ic = ics[i];
      const double t = run.t(i);
      double q[5], qd[5], q0[5], qd0[5];
      for (int j = 0; j < 5; ++j) q[j] = run.q(i, j), qd[j] = run.qd(i, j), q0[j] = b.q(i, j), qd0[j] = b.qd(i, j);
      const double E0 = energy(p, q0, qd0);
      EXPECT_NEAR(energy(p, q, qd), E0, 1e-10 * (1 + std::abs(E0)));
      EXPECT_NEAR(q[0], ic[0] + ic[5] * t + 5 * p.Fx / (14 * p.m) * t * t, 1e-10);
      EXPECT_NEAR(q[1], ic[1] + ic[6] * t + 5 * p.Fy / (14 * p.m) * t * t, 1e-10);
      EXPECT_NEAR(qd[0], ic[5] + 5 * p.Fx / (7 * p.m) * t, 1e-10);
      EXPECT_NEAR(qd[1], ic[6] + 5 * p.Fy / (7 * p.m) * t, 1e-10);
      EXPECT_NEAR(qd[2] + qd[4] * std::cos(q[3]), ic[7], 1e-10);
      EXPECT_GT(std::sin(q[3]), 0.1) << "clear of the gimbal lock";
    }
  }
}

TEST(Sphere, TheGimbalLockIsAMassMatrixFailureNeverANaN) {
  // At sin theta = 0 the Euler angles' M is singular: theta = 0 exactly, and
  // theta = pi rounded (sin = 1.2e-16: singular to working precision).
  // At the locked states the velocities satisfy both rows (x' = y' = 0,
  // theta' = 0, sin theta = 0); the third state (theta = 1) is a control that
  // must evaluate, on or off the rows.
  Batch<Sphere> b(3);
  const double q_zero[5] = {0, 0, 0.3, 0, 0.1}, q_pi[5] = {0, 0, 0.3, M_PI, 0.1}, q_ok[5] = {0, 0, 0.3, 1, 0.1};
  const double qd[5] = {0, 0, 1.0, 0, 2.0};
  b.set_state(0, q_zero, qd);
  b.set_state(1, q_pi, qd);
  b.set_state(2, q_ok, qd);
  for (Backend be : {Backend::cpu, Backend::reference}) {
    SCOPED_TRACE(to_string(be));
    Batch<Sphere> e = b;
    EXPECT_EQ(evaluate(e, be), 2);
    EXPECT_EQ(e.status(0), Status::failed_mass_matrix);
    EXPECT_EQ(e.status(1), Status::failed_mass_matrix);
    EXPECT_EQ(e.status(2), Status::ok);
    Batch<Sphere> run = b;
    EXPECT_EQ(step(run, be, 1e-3, 10).failed, 2);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(run.status(i), Status::failed_mass_matrix);
      EXPECT_EQ(run.t(i), 0.0) << "stopped where it failed";
      for (int j = 0; j < 5; ++j) EXPECT_TRUE(std::isfinite(run.q(i, j)) && std::isfinite(run.qd(i, j)));
    }
    EXPECT_EQ(run.status(2), Status::ok);
  }
  // The natural initial quantities refuse theta outside (0, pi).
  const Sphere::Params p;
  double q[5], v[5];
  for (double th : {0.0, M_PI, -0.5, 4.0}) {
    const double ic[8] = {0, 0, 0, th, 0, 0.1, 0, 0};
    EXPECT_FALSE(Sphere::initial_state(ic, p, q, v)) << "theta = " << th;
  }
}

}  // namespace
}  // namespace ukb::test
