// Stick-slip in Monte Carlo runs: the incline against its analytic stop,
// the ring against an independent integrator of the polar-angle equation.
#include "run/run_support.hpp"

namespace ukb::test {
namespace {

std::string incline_toml(double alpha, double mu, const std::string& v, double t_end,
                         const std::string& backend = "cpu") {
  std::ostringstream s;
  s.precision(17);
  s << "model = \"incline_block\"\nsamples = 4\nbackend = \"" << backend << "\"\n[integrator]\ndt = 0.01\nt_end = "
    << t_end << "\nevent_tol = 1e-10\n[params]\nalpha = " << alpha << "\nmu = " << mu
    << "\n[initial]\ns = 0.0\nv = " << v << "\n";
  return s.str();
}

TEST(StickSlip, InclineBlockSticksAtTheAnalyticPointAndTime) {
  // tan(alpha) < mu: sliding down, the block decelerates at
  // a = g (mu cos alpha - sin alpha) and sticks at t = v0/a, s = v0^2/(2a).
  const double alpha = 0.3, mu = 0.5, a = kG * (mu * std::cos(alpha) - std::sin(alpha));
  for (const char* backend : {"cpu", "reference"}) {
    const Csv r(run_into(config(incline_toml(alpha, mu, "[0.5, 1.0, 2.0, 3.0]", 10.0, backend)), backend) /
                "results.csv");
    const std::vector<double> v0 = r.num("v"), ts = r.num("t_stop"), s = r.num("s_final"), v = r.num("v_final");
    for (std::size_t i = 0; i < v0.size(); ++i) {
      EXPECT_EQ(r.text("status")[i], "at_rest");
      // The instant is bracketed to event_tol; RK4 is exact for a constant
      // acceleration, so the position error is a * tol * (t - t_stop) at most.
      EXPECT_NEAR(ts[i], v0[i] / a, 1e-10 + 1e-13) << backend << " v0 = " << v0[i];
      EXPECT_NEAR(s[i], v0[i] * v0[i] / (2 * a), 1e-12) << backend << " v0 = " << v0[i];
      EXPECT_EQ(v[i], 0.0);
      EXPECT_EQ(r.text("events")[i], "1");
    }
  }
}

TEST(StickSlip, InclineBlockWithTanAlphaAboveMuNeverSticks) {
  // tan(alpha) > mu: released at rest it slides down at once with
  // a_down = g (sin alpha - mu cos alpha) (friction at rest opposes the
  // impending motion); sent up the slope at v0 < 0 it decelerates at
  // a_up = g (sin alpha + mu cos alpha), turns at t1 = -v0/a_up (one event)
  // and slides down from rest.
  const double alpha = 0.5, mu = 0.2, T = 3.0;
  const double a_dn = kG * (std::sin(alpha) - mu * std::cos(alpha));
  const double a_up = kG * (std::sin(alpha) + mu * std::cos(alpha));
  const Csv r(run_into(config(incline_toml(alpha, mu, "[0.0, -1.0, -2.0, 1.0]", T)), "slide") / "results.csv");
  const std::vector<double> v0 = r.num("v"), s = r.num("s_final"), v = r.num("v_final");
  for (std::size_t i = 0; i < v0.size(); ++i) {
    EXPECT_EQ(r.text("status")[i], "finished");
    double s_exp, v_exp;
    int events;
    if (v0[i] < 0) {
      const double t1 = -v0[i] / a_up, s1 = -v0[i] * v0[i] / (2 * a_up);
      s_exp = s1 + 0.5 * a_dn * (T - t1) * (T - t1);
      v_exp = a_dn * (T - t1);
      events = 1;
    } else {
      s_exp = v0[i] * T + 0.5 * a_dn * T * T;
      v_exp = v0[i] + a_dn * T;
      events = v0[i] == 0 ? 1 : 0;  // a system released at rest consults its handler once
    }
    EXPECT_NEAR(s[i], s_exp, 1e-8) << "v0 = " << v0[i];
    EXPECT_NEAR(v[i], v_exp, 1e-8) << "v0 = " << v0[i];
    EXPECT_EQ(r.text("events")[i], std::to_string(events)) << "v0 = " << v0[i];
  }
}

// The bead's polar angle th (from +x, counter-clockwise) on a ring of
// radius R: R th'' = -g cos th - mu sgn(th') |g sin th - R th'^2| (the normal
// force per mass is g sin th - R th'^2). Integrated independently of ukb:
// RK4 with a tiny step and the sliding direction frozen over each step (so
// the field is smooth), the zero of th' located on the cubic Hermite
// interpolant of the step; at rest the bead sticks where |cot th| <= mu, else
// it slides off towards the bottom.
struct Rest {
  double theta, t;
};

Rest ring_reference(double mu, double R, double th, double w) {
  const double h = 1e-4;
  double t = 0;
  auto f = [&](double a, double b, double s) {
    return (-kG * std::cos(a) - mu * s * std::abs(kG * std::sin(a) - R * b * b)) / R;
  };
  for (int guard = 0; guard < 10000000; ++guard) {
    double s = w > 0 ? 1 : w < 0 ? -1 : 0;
    if (s == 0) {
      if (std::abs(std::cos(th)) <= mu * std::abs(std::sin(th))) return {th, t};
      s = -std::cos(th) > 0 ? 1 : -1;  // the impending motion
    }
    const double k1a = w, k1b = f(th, w, s);
    const double k2a = w + 0.5 * h * k1b, k2b = f(th + 0.5 * h * k1a, w + 0.5 * h * k1b, s);
    const double k3a = w + 0.5 * h * k2b, k3b = f(th + 0.5 * h * k2a, w + 0.5 * h * k2b, s);
    const double k4a = w + h * k3b, k4b = f(th + h * k3a, w + h * k3b, s);
    const double th1 = th + h / 6 * (k1a + 2 * k2a + 2 * k3a + k4a);
    const double w1 = w + h / 6 * (k1b + 2 * k2b + 2 * k3b + k4b);
    if (w1 * s > 0) {
      th = th1, w = w1, t += h;
      continue;
    }
    // Hermite cubic through (w, w') at both ends; its zero by bisection.
    const double d0 = f(th, w, s), d1 = f(th1, w1, s);
    auto herm = [&](double y0, double y1, double m0, double m1, double x) {
      const double u = x / h, u2 = u * u, u3 = u2 * u;
      return (2 * u3 - 3 * u2 + 1) * y0 + (u3 - 2 * u2 + u) * h * m0 + (-2 * u3 + 3 * u2) * y1 +
             (u3 - u2) * h * m1;
    };
    double lo = 0, hi = h;
    for (int it = 0; it < 80; ++it) {
      const double mid = 0.5 * (lo + hi);
      (herm(w, w1, d0, d1, mid) * s > 0 ? lo : hi) = mid;
    }
    th = herm(th, th1, w, w1, lo);
    w = 0;
    t += lo;
  }
  ADD_FAILURE() << "the reference bead never came to rest";
  return {th, t};
}

// The beads of a ring run released level with the centre (R = 1) rest at
// the independent integrator's angle and time to within tol, where static
// friction holds them (|cot theta| <= mu).
void expect_rests_as_the_independent_integrator(const Csv& r, double tol) {
  const std::vector<double> mu = r.num("mu"), th = r.num("theta_final"), ts = r.num("t_stop");
  for (std::size_t i = 0; i < mu.size(); ++i) {
    ASSERT_EQ(r.text("status")[i], "at_rest") << mu[i];
    const Rest ref = ring_reference(mu[i], 1.0, 0.0, 0.0);
    EXPECT_NEAR(th[i], ref.theta, tol) << "mu = " << mu[i];
    EXPECT_NEAR(ts[i], ref.t, tol) << "mu = " << mu[i];
    EXPECT_LE(std::abs(std::cos(th[i])), mu[i] * std::abs(std::sin(th[i])));
  }
}

TEST(StickSlip, RingRestingAngleAndTimeMatchAnIndependentIntegrator) {
  Config c = config(ring_toml(6, "", "[0.05, 0.1, 0.2, 0.3, 0.4, 0.5]"));
  c.run.dt = 0.001;
  expect_rests_as_the_independent_integrator(Csv(run_into(c, "ring") / "results.csv"), 1e-9);
}

TEST(StickSlip, RingRestingAngleAndTimeWithAdaptiveStepsMatchTheIndependentIntegrator) {
  // The same beads with dopri5 (events on the dense output, or by trial
  // steps): to 1e-8 at rtol = 1e-12 (the angles are within 1e-10; an
  // instant of rest moves by the velocity's error over the deceleration).
  std::string toml = ring_toml(6, "", "[0.05, 0.1, 0.2, 0.3, 0.4, 0.5]");
  toml.replace(toml.find("dt = 0.01\n"), 10, "method = \"dopri5\"\nrtol = 1e-12\natol = 1e-14\n");
  expect_rests_as_the_independent_integrator(Csv(run_into(config(toml), "ring_dopri5") / "results.csv"), 1e-8);
}

TEST(StickSlip, ABeadReleasedAtRestStaysWhereStaticFrictionHoldsIt) {
  // Released at rest: where |cot theta| <= mu the handler keeps the bead
  // there for good (at_rest at t = 0, nothing moved); elsewhere it slides.
  using Mo = models::BeadOnRing<double>;
  const double thetas[4] = {-1.4, -1.7, -2.0, -0.9};  // |cot| = 0.17, 0.13, 0.46, 0.79
  Batch<Mo> b(4);
  for (int i = 0; i < 4; ++i) {
    Mo::Params p{};
    p.mu = 0.5;
    b.set_params(i, p);
    const double q[2] = {std::cos(thetas[i]), std::sin(thetas[i])}, qd[2] = {0, 0};
    b.set_state(i, q, qd);
  }
  for (Backend be : {Backend::cpu, Backend::reference}) {
    Batch<Mo> c = b;
    EXPECT_EQ(integrate(c, be, {.dt = 0.01, .t_end = 0.5}).active, 0);
    for (int i = 0; i < 4; ++i) {
      const bool holds = std::abs(std::cos(thetas[i])) <= 0.5 * std::abs(std::sin(thetas[i]));
      EXPECT_EQ(c.status(i), holds ? Status::at_rest : Status::ok) << thetas[i];
      EXPECT_EQ(c.events(i), 1) << thetas[i];
      if (holds) {
        EXPECT_EQ(c.t_stop(i), 0.0);
        EXPECT_EQ(c.q(i, 0), b.q(i, 0));
        EXPECT_EQ(c.q(i, 1), b.q(i, 1));
        EXPECT_EQ(c.steps(i), 0);
      } else {
        EXPECT_GT(std::abs(c.q(i, 0) - b.q(i, 0)), 1e-3) << "slides";
      }
    }
  }
}

}  // namespace
}  // namespace ukb::test
