// Tier 4: a model of the user's own that slides in two dimensions
// (examples/models/puck_incline.hpp) against the closed forms of the puck on
// a rough incline, derived in the test from Newton's law in the plane: with
// a = g sin(alpha), k = mu / tan(alpha), speed v and heading phi (from
// straight down the slope),
//   v' = a (cos phi - k),  v phi' = -a sin phi,
// whence, while it slides,
//   (1) v sin(phi) / tan(phi / 2)^k is constant (d/dphi of its log is 0);
//   (2) k v + y' = k v0 + y'0 + a (1 - k^2) t (k v' + y'' = a (1 - k^2));
// and for k > 1 it stops for good where (2) reaches 0. With w = tan(phi/2)
// and v = (c/2) w^(k-1) (1 + w^2) (from (1)), ds = -v^2 dphi / (a sin phi)
// and dx = -v^2 dphi / a integrate in closed form from w0 down to 0:
//   x_stop = c^2 / (2a) (w0^(2k-1) / (2k-1) + w0^(2k+1) / (2k+1)),
//   s_stop = c^2 / (4a) (w0^(2k-2) / (2k-2) + w0^(2k) / k + w0^(2k+2) / (2k+2)),
//   y_stop = (k v0 + y'0)^2 / (2 a (k^2 - 1)) - k s_stop   (from (2), integrated).
#include <cmath>
#include <numbers>
#include <vector>

#include "puck_incline.hpp"  // examples/models: a model file, not a built-in model
#include "support.hpp"
#include "ukb/backends.hpp"
#include "ukb/engine.hpp"

namespace ukb::test {
namespace {

using Puck = PuckIncline<double>;

struct PuckLaunch {
  double k, heading;
};

struct Closed {
  double t_stop, x_stop, y_stop;
};

Closed closed_stop(double a, double k, double v0, double phi0) {
  const double vy0 = v0 * std::cos(phi0), w0 = std::tan(phi0 / 2);
  const double c = 2 * v0 / (std::pow(w0, k - 1) * (1 + w0 * w0));
  const double x = c * c / (2 * a) * (std::pow(w0, 2 * k - 1) / (2 * k - 1) + std::pow(w0, 2 * k + 1) / (2 * k + 1));
  const double s = c * c / (4 * a) *
                   (std::pow(w0, 2 * k - 2) / (2 * k - 2) + std::pow(w0, 2 * k) / k + std::pow(w0, 2 * k + 2) / (2 * k + 2));
  const double sum = k * v0 + vy0;
  return {sum / (a * (k * k - 1)), x, sum * sum / (2 * a * (k * k - 1)) - k * s};
}

// The largest deviations from the closed forms of `launches` on one
// backend and method.
struct Deviations {
  double t_stop = 0, stop_position = 0, invariant = 0, linear = 0, off_plane = 0;
};

void deviations(Backend be, const RunOptions& run, const std::vector<PuckLaunch>& launches, Deviations& d) {
  const int N = static_cast<int>(launches.size());
  Batch<Puck> b(N);
  const double v0 = 2.0;
  Puck::Params p;
  p.alpha = 0.3;
  const double a = p.g * std::sin(p.alpha);
  for (int i = 0; i < N; ++i) {
    p.mu = launches[std::size_t(i)].k * std::tan(p.alpha);
    const double ic[2] = {v0, launches[std::size_t(i)].heading};
    double q[3], qd[3];
    EXPECT_TRUE(Puck::initial_state(ic, p, q, qd));
    b.set_params(i, p), b.set_state(i, q, qd, 0.0);
  }
  integrate(b, be, run);
  for (int i = 0; i < N; ++i) {
    const double k = launches[std::size_t(i)].k, phi0 = launches[std::size_t(i)].heading;
    SCOPED_TRACE(testing::Message() << "k " << k << " heading " << phi0);
    worst_of(d.off_plane, std::abs(b.q(i, 2)) + std::abs(b.qd(i, 2)));
    if (k > 1) {
      ASSERT_EQ(b.status(i), Status::at_rest);
      const Closed c = closed_stop(a, k, v0, phi0);
      ASSERT_LT(c.t_stop, run.t_end) << "guard: the stop is within the run";
      worst_of(d.t_stop, std::abs(b.t_stop(i) - c.t_stop));
      worst_of(d.stop_position, std::hypot(b.q(i, 0) - c.x_stop, b.q(i, 1) - c.y_stop));
      EXPECT_EQ(b.qd(i, 0), 0.0);
      EXPECT_EQ(b.qd(i, 1), 0.0);
    } else {
      ASSERT_EQ(b.status(i), Status::ok);
      const double vx = b.qd(i, 0), vy = b.qd(i, 1), v = std::hypot(vx, vy), phi = std::atan2(vx, vy);
      const double I0 = v0 * std::sin(phi0) / std::pow(std::tan(phi0 / 2), k);
      worst_of(d.invariant, std::abs(v * std::sin(phi) / std::pow(std::tan(phi / 2), k) - I0) / I0);
      const double L0 = k * v0 + v0 * std::cos(phi0);
      worst_of(d.linear, std::abs(k * v + vy - (L0 + a * (1 - k * k) * b.t(i))) / (1 + std::abs(L0)));
      EXPECT_GT(std::abs(phi0 - phi), 0.1) << "guard: the heading turned";
    }
  }
}

std::vector<PuckLaunch> launches(std::initializer_list<double> ks) {
  std::vector<PuckLaunch> l;
  for (double k : ks)
    for (double heading : {0.4, std::numbers::pi / 2, 2.0, 2.8}) l.push_back({k, heading});
  return l;
}

TEST(Puck, AcrossARoughInclineItFollowsItsClosedFormsWithAdaptiveSteps) {
  // dopri5 with tight tolerances: the curved path, the stop located to
  // event_tol, on the cpu backend and the reference. Measured (2026-11-28):
  // stop times within 1.2e-12 s, stop positions within 2.8e-13 m, the
  // invariants within 1e-11.
  RunOptions run{.method = Method::dopri5, .dt = 0, .t_end = 1.6, .event_tol = 1e-12};
  run.rtol = 1e-11;
  run.atol = {1e-12};
  for (Backend be : {Backend::cpu, Backend::reference}) {
    SCOPED_TRACE(to_string(be));
    Deviations d;
    deviations(be, run, launches({0.5, 1.0, 1.5, 1.9, 3.0}), d);
    EXPECT_LT(d.t_stop, 1e-9);
    EXPECT_LT(d.stop_position, 1e-9);
    EXPECT_LT(d.invariant, 1e-9);
    EXPECT_LT(d.linear, 1e-9);
    EXPECT_LT(d.off_plane, 1e-12);
  }
}

TEST(Puck, WithFixedStepsTheSlidingPathConvergesAtFourthOrder) {
  // RK4 while the puck slides (mu <= tan alpha: no stop; the uphill arcs'
  // tops are events): the invariants' errors fall by 2^4 per halving of dt.
  // (Where mu > tan alpha, RK4 at dt = 1e-3 misses the stop: near it the
  // heading relaxes at a rate a / v that no fixed step resolves; issue 53.)
  for (Backend be : {Backend::cpu, Backend::reference}) {
    SCOPED_TRACE(to_string(be));
    Deviations coarse, fine;
    deviations(be, RunOptions{.dt = 2e-3, .t_end = 1.6}, launches({0.5, 1.0}), coarse);
    deviations(be, RunOptions{.dt = 1e-3, .t_end = 1.6}, launches({0.5, 1.0}), fine);
    std::printf("%s: invariant %.3g -> %.3g, linear %.3g -> %.3g\n", std::string(to_string(be)).c_str(),
                coarse.invariant, fine.invariant, coarse.linear, fine.linear);
    EXPECT_LT(fine.invariant, 1e-7);
    EXPECT_GT(coarse.invariant / fine.invariant, 12.0);
    EXPECT_LT(coarse.invariant / fine.invariant, 20.0);
    EXPECT_LT(fine.off_plane, 1e-12);
  }
}

}  // namespace
}  // namespace ukb::test
