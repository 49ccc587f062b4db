// Tier 4: analytic solutions and the order of the RK4 driver.
#include <cmath>

#include "support.hpp"
#include "ukb/engine.hpp"

namespace ukb::test {
namespace {

// While the block slides, its arclength s along the descending direction
// (cos alpha, -sin alpha) has constant acceleration
//   s'' = g sin(alpha) - mu g cos(alpha) sgn(s'),
// so s(t) = s0 + v0 t + s'' t^2 / 2 until s' changes sign. RK4 integrates a
// constant acceleration exactly, so the integrated state matches the
// closed form to round-off.
void check_sliding(double alpha, double mu, double v0, double t_end) {
  using Mo = models::InclineBlock<double>;
  Mo::Params p;
  p.alpha = alpha;
  p.mu = mu;
  p.m = 2.5;
  const double s0 = 0.3, acc = p.g * std::sin(alpha) - mu * p.g * std::cos(alpha) * (v0 > 0 ? 1 : -1);
  const VectorXd dir{{std::cos(alpha), -std::sin(alpha)}};
  reference::State st{s0 * dir, v0 * dir, 0};
  const double dt = 1e-3;
  const long steps = std::lround(t_end / dt);
  long k = 0;
  double worst = 0;
  const Status status = reference::integrate_rk4(
      reference::accel_fn<Mo>(p), st, dt, steps, [&](const reference::State& x) {
        const double t = ++k * dt;
        const double s = s0 + v0 * t + 0.5 * acc * t * t, v = v0 + acc * t;
        ASSERT_GT(v * v0, 0) << "the test must stop before the block stops";
        worst_of(worst, (x.q - s * dir).norm() / (1 + std::abs(s)));
        worst_of(worst, (x.qd - v * dir).norm() / (1 + std::abs(v)));
      });
  ASSERT_EQ(status, Status::ok);
  EXPECT_LT(worst, 1e-12) << "alpha " << alpha << " mu " << mu << " v0 " << v0;
  // Guard: the motion is not trivial.
  EXPECT_GT(std::abs(acc), 0.1);
}

TEST(Incline, SlidingDownAcceleratesWhenTanAlphaExceedsMu) { check_sliding(0.6, 0.3, 0.5, 2.0); }

TEST(Incline, SlidingDownDeceleratesWhenMuExceedsTanAlpha) {
  // acc = g (sin 0.3 - 0.8 cos 0.3) < 0: stops at t = v0 / |acc| ~ 0.65 s.
  check_sliding(0.3, 0.8, 3.0, 0.6);
}

TEST(Incline, SlidingUpDecelerates) { check_sliding(0.4, 0.25, -4.0, 0.6); }

TEST(Incline, TheStopIsLocatedToTheDocumentedEventTolerance) {
  // Sliding down with mu > tan(alpha): s' = v0 + acc t reaches 0 at
  // t* = v0 / |acc|, where static friction holds the block (at_rest). RK4
  // is exact on this motion, so the located instant is off t* by the
  // bracket alone: docs/config.md ("Stick-slip"), located to event_tol, whose
  // default is 1e-10 ("[integrator]" table). Both CPU backends; the
  // event rule and the default are shared by them, the closed form is not.
  using Mo = models::InclineBlock<double>;
  Mo::Params p;
  p.alpha = 0.3, p.mu = 0.8, p.m = 2.5;
  const double v0 = 3.0, acc = p.g * std::sin(p.alpha) - p.mu * p.g * std::cos(p.alpha);
  const double t_star = v0 / -acc;
  ASSERT_GT(t_star, 0.5);
  for (Backend be : {Backend::cpu, Backend::reference}) {
    SCOPED_TRACE(std::string(to_string(be)));
    Batch<Mo> b(1);
    b.set_params(0, p);
    const double q[2] = {0, 0}, qd[2] = {v0 * std::cos(p.alpha), -v0 * std::sin(p.alpha)};
    b.set_state(0, q, qd);
    integrate(b, be, RunOptions{.dt = 1e-3, .t_end = 2.0});  // events on, event_tol at its default
    EXPECT_EQ(b.status(0), Status::at_rest);
    EXPECT_NEAR(b.t_stop(0), t_star, 1e-10);
    const double s_star = 0.5 * v0 * t_star;  // where it stops
    EXPECT_NEAR(b.q(0, 0), s_star * std::cos(p.alpha), 1e-9);
    EXPECT_NEAR(b.q(0, 1), -s_star * std::sin(p.alpha), 1e-9);
  }
}

TEST(Rk4, FourthOrderOnTheFrictionlessChain) {
  // The planar chain with c = 0 is smooth. Errors at t = 1 against a run with
  // a 64 times smaller step must fall about 16x per halving of dt.
  using Mo = models::PlanarChain3<double>;
  Rng rng(31);
  const Sample<Mo> s = Gen<Mo>::consistent(rng);
  Mo::Params p = s.p;
  p.c = 0;
  auto run = [&](double dt) {
    reference::State st{s.q, s.qd, 0};
    EXPECT_EQ(reference::integrate_rk4(reference::accel_fn<Mo>(p), st, dt, std::lround(1.0 / dt)),
              Status::ok);
    VectorXd y(2 * Mo::n);
    y << st.q, st.qd;
    return y;
  };
  // Under the sanitizers (this test's Eigen at -O0 there: 25-29 s, the
  // longest test of that build) one ratio, against a run with a 32 times
  // smaller step: 3500 steps instead of 7100.
  const VectorXd truth = run(0.01 / (sanitized ? 32 : 64));
  const double e1 = (run(0.01) - truth).norm(), e2 = (run(0.005) - truth).norm();
  EXPECT_GT(e1, 1e-9) << "guard: the error must be measurable";
  EXPECT_NEAR(e1 / e2, 16.0, 2.5);
  if (!sanitized) {
    EXPECT_NEAR(e2 / (run(0.0025) - truth).norm(), 16.0, 2.5);
  }
}

TEST(Rk4, FailedStageLeavesStateUnchanged) {
  // A mass matrix that is not positive definite stops the step.
  using Mo = models::BeadOnRing<double>;
  Mo::Params p;
  p.m = -1;
  reference::State st{VectorXd{{1.0, 0.0}}, VectorXd{{0.0, 1.0}}, 0.5};
  const reference::State before = st;
  EXPECT_EQ(reference::rk4_step(reference::accel_fn<Mo>(p), st, 0.01), Status::failed_mass_matrix);
  EXPECT_EQ(st.q, before.q);
  EXPECT_EQ(st.qd, before.qd);
  EXPECT_EQ(st.t, before.t);
}

}  // namespace
}  // namespace ukb::test
