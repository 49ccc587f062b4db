// Forward sensitivities, first part (issue 52): dual numbers (ukb/dual.hpp)
// through the shared kernels and the cpu backend carry derivatives that
// match closed forms and central differences of complete runs.
#include <array>
#include <cmath>
#include <utility>

#include "spring_block.hpp"  // examples/models: a model file, without `rebind`
#include "support.hpp"
#include "ukb/dual.hpp"
#include "ukb/backends.hpp"
#include "ukb/engine.hpp"
#include "ukb/kernels/tangents.hpp"
#include "ukb/models/bead_on_ring.hpp"
#include "ukb/models/chaplygin_sleigh.hpp"
#include "ukb/models/incline_block.hpp"
#include "ukb/models/planar_chain.hpp"

namespace ukb::test {
namespace {

using D2 = Dual<double, 2>;

TEST(Dual, ArithmeticAndFunctionsCarryTheirPartialDerivatives) {
  const double x0 = 0.7, y0 = -1.3;
  const D2 x = D2::variable(x0, 0), y = D2::variable(y0, 1);
  // f = x y + sin(x) / y - cos(y) x: df/dx = y + cos(x) / y - cos(y),
  // df/dy = x - sin(x) / y^2 + sin(y) x.
  const D2 f = x * y + sin(x) / y - cos(y) * x;
  EXPECT_DOUBLE_EQ(f.v, x0 * y0 + std::sin(x0) / y0 - std::cos(y0) * x0);
  EXPECT_NEAR(f.d[0], y0 + std::cos(x0) / y0 - std::cos(y0), 1e-15);
  EXPECT_NEAR(f.d[1], x0 - std::sin(x0) / (y0 * y0) + std::sin(y0) * x0, 1e-15);
  // r = sqrt(x^2 + y^2): dr/dx = x / r; phi = atan2(y, x): dphi/dx = -y / r^2,
  // dphi/dy = x / r^2; exp(log(x)) = x; |y| = -y here.
  const double r0 = std::hypot(x0, y0);
  const D2 r = sqrt(x * x + y * y), phi = atan2(y, x), e = exp(log(x)), a = abs(y);
  EXPECT_NEAR(r.d[0], x0 / r0, 1e-15);
  EXPECT_NEAR(r.d[1], y0 / r0, 1e-15);
  EXPECT_NEAR(phi.d[0], -y0 / (r0 * r0), 1e-15);
  EXPECT_NEAR(phi.d[1], x0 / (r0 * r0), 1e-15);
  EXPECT_NEAR(e.d[0], 1.0, 1e-15);
  EXPECT_EQ(e.d[1], 0.0);
  EXPECT_EQ(a.d[1], -1.0);
  // x^3: 3 x^2; 2^y: 2^y log 2; 0^2 of a moving 0: 0; acos(x): -1 / sqrt(1 - x^2).
  EXPECT_NEAR(pow(x, D2(3.0)).d[0], 3 * x0 * x0, 1e-15);
  EXPECT_NEAR(pow(D2(2.0), y).d[1], std::pow(2.0, y0) * std::log(2.0), 1e-15);
  EXPECT_EQ(pow(D2::variable(0.0, 0), D2(2.0)).d[0], 0.0);
  EXPECT_NEAR(acos(x).d[0], -1 / std::sqrt(1 - x0 * x0), 1e-15);
  // |-0| is +0, as std::abs; atan2 of huge and tiny coordinates keeps its
  // derivative finite (-y / r^2 = -1 / (2e200) at (1e200, 1e200)).
  EXPECT_FALSE(std::signbit(abs(D2(-0.0)).v));
  EXPECT_NEAR(atan2(D2::variable(1e200, 1), D2::variable(1e200, 0)).d[0], -0.5e-200, 1e-215);
  EXPECT_NEAR(atan2(D2::variable(1e-200, 1), D2::variable(1e-200, 0)).d[1], 0.5e200, 1e185);
  // Comparisons see values alone; a constant has no tangents.
  EXPECT_TRUE(x > y && D2(0.7) == x);
  EXPECT_EQ(D2(3.0).d[0], 0.0);
  EXPECT_FALSE(isfinite(sqrt(D2::variable(0.0, 0))));  // no derivative of sqrt at 0
}

// Integrates system 0 of b on cpu until no system is active.
template <class Mo>
void run_to_rest(Batch<Mo>& b, const RunOptions& r) {
  for (int call = 0; call < 100 && integrate(b, Backend::cpu, r, 100000).active > 0; ++call) {
  }
}

// System 0 of b: a block on the incline of angle alpha, s = 0, launched at
// speed v0 down the line; mu and v0 seeded (tangents 0 and 1); with the
// adaptive fields for Dormand-Prince. Its run options: the method's step
// (dt 1e-3, or automatic), the given event and error tolerances.
template <class Mo>
RunOptions launch(Batch<Mo>& b, double alpha, double mu, double v0, Method method, double event_tol,
                  double rtol) {
  typename Mo::Params p;
  p.alpha = alpha;
  p.mu = D2::variable(mu, 0);
  b.set_params(0, p);
  const D2 ic[2] = {D2(0.0), D2::variable(v0, 1)};
  D2 q[2], qd[2];
  EXPECT_TRUE(Mo::initial_state(ic, p, q, qd));
  b.set_state(0, q, qd);
  if (method == Method::dopri5) b.allocate_adaptive();
  RunOptions r;
  r.method = method;
  r.dt = method == Method::rk4 ? 1e-3 : 0;
  r.event_tol = event_tol;
  r.rtol = rtol;
  r.atol = {rtol / 100};
  return r;
}

// A block launched down a rough incline (mu > tan alpha) at speed v0
// decelerates at a = g (mu cos alpha - sin alpha) and stops after
// s = v0^2 / (2 a) at t = v0 / a: ds/dmu = -v0^2 g cos alpha / (2 a^2),
// ds/dv0 = v0 / a, dt/dmu = -v0 g cos alpha / a^2, dt/dv0 = 1 / a. Through
// ukb::integrate on cpu, RK4 (the stop located by bisection) and
// Dormand-Prince (on the dense output), on dual numbers seeded in mu and
// v0: the rest state's and t_stop's tangents are those derivatives (the
// event time's through the implicit function theorem, tangents.hpp).
TEST(Dual, TheInclineStopHasTheClosedFormDerivativesOnBothMethods) {
  using Mo = models::InclineBlock<D2>;
  for (const Method method : {Method::rk4, Method::dopri5}) {
    for (const double mu : {0.45, 0.8}) {
      for (const double v0 : {0.5, 2.0}) {
        SCOPED_TRACE(testing::Message() << to_string(method) << ", mu " << mu << ", v0 " << v0);
        Batch<Mo> b(1);
        // event_tol 1e-9: a tighter location amplifies rounding in the tangents (docs/sensitivities.md)
        run_to_rest(b, launch(b, 0.3, mu, v0, method, 1e-9, 1e-10));
        const Mo::Params p = b.params(0);
        const BatchView<Mo> v = b.view();
        ASSERT_EQ(static_cast<Status>(v.status[0]), Status::at_rest);
        D2 qf[2], qdf[2], nat[2];
        for (int j = 0; j < 2; ++j) qf[j] = v.q[soa(j, 0, 1)], qdf[j] = v.qd[soa(j, 0, 1)];
        Mo::natural_state(qf, qdf, p, nat);
        const double g = 9.81, ca = std::cos(0.3), sa = std::sin(0.3);
        const double a = g * (mu * ca - sa), dist = v0 * v0 / (2 * a), stop = v0 / a;
        EXPECT_NEAR(nat[0].v, dist, 1e-9);  // located within event_tol of the stop, where v ~ 0
        const double ds_dmu = -v0 * v0 * g * ca / (2 * a * a), ds_dv0 = v0 / a;
        const double dt_dmu = -v0 * g * ca / (a * a), dt_dv0 = 1 / a;
        EXPECT_NEAR(nat[0].d[0], ds_dmu, 1e-8 * std::abs(ds_dmu));
        EXPECT_NEAR(nat[0].d[1], ds_dv0, 1e-8 * ds_dv0);
        const D2 ts = v.t_stop[0];
        EXPECT_NEAR(ts.v, stop, 2e-9);
        // The event time's derivatives (tangents.hpp) to 1e-6, issue 52's
        // bound: near the stop the friction's direction v / |v| turns the
        // rounding of v's tangent across the line into tangents of order
        // 1e-16 / |v|, and the last stage of the located step has |v| about
        // a event_tol.
        EXPECT_NEAR(ts.d[0], dt_dmu, 1e-6 * std::abs(dt_dmu));
        EXPECT_NEAR(ts.d[1], dt_dv0, 1e-6 * dt_dv0);
        EXPECT_EQ(nat[1].v, 0.0);  // at rest, and so are its tangents
        EXPECT_EQ(nat[1].d[0], 0.0);
      }
    }
  }
}

// A block sliding down an incline (tan alpha > mu) whose brake halves its
// velocity where it passes the mark s = s1: an event of position, after
// which the motion goes on, so that the event time's derivative moves the
// state (q' dt_e, q'' dt_e) as well as the time (tangents.hpp).
template <class T>
struct BrakedBlock : models::InclineBlock<T> {
  using Base = models::InclineBlock<T>;
  using Params = typename Base::Params;
  template <class U>
  using rebind = BrakedBlock<U>;
  static constexpr const char* name = "braked_block";
  UKB_HD static T event(const T* q, const T* qd, T /*t*/, const Params& p) {
    T ic[2];
    Base::natural_state(q, qd, p, ic);
    return ic[0] - T(0.5);
  }
  // The velocity halved, and the block moved 1e-9 m on, past the mark (the
  // located state is just before it; resumed there, the event would fire
  // again at once: the event contract, docs/adding-a-model.md).
  UKB_HD static EventAction on_event(T* q, T* qd, T /*t*/, const Params& p) {
    using std::cos;
    using std::sin;
    q[0] += T(1e-9) * cos(p.alpha.v);
    q[1] -= T(1e-9) * sin(p.alpha.v);
    for (int j = 0; j < 2; ++j) qd[j] *= T(0.5);
    return EventAction::resume;
  }
};

// Its position and velocity at T = 1 s from the start at s = 0 with speed
// v0: s = v0 t + a t^2 / 2 to the mark s1 = 0.5 (t1, v1 = sqrt(v0^2 + 2 a
// s1)), then from v1 / 2; a = g (sin alpha - mu cos alpha).
std::array<double, 2> braked_at_1s(double mu, double v0) {
  const double a = 9.81 * (std::sin(0.5) - mu * std::cos(0.5)), s1 = 0.5, T = 1.0;
  const double v1 = std::sqrt(v0 * v0 + 2 * a * s1), t1 = (v1 - v0) / a, u = T - t1;
  return {s1 + v1 / 2 * u + a * u * u / 2, v1 / 2 + a * u};
}

// The derivatives of the braked block's position and velocity at 1 s with
// respect to mu and v0, on both methods, against central differences of
// the closed form (h = 1e-6: their error is below 1e-9 relative here).
TEST(Dual, AnEventAfterWhichTheMotionGoesOnMovesTheStatesTangents) {
  using Mo = BrakedBlock<D2>;
  static_assert(HasEvents<Mo>);
  const double mu = 0.2, v0 = 1.0, h = 1e-6;
  for (const Method method : {Method::rk4, Method::dopri5}) {
    SCOPED_TRACE(to_string(method));
    Batch<Mo> b(1);
    RunOptions r = launch(b, 0.5, mu, v0, method, 1e-12, 1e-12);  // tan(0.5) = 0.55 > mu: it slides on
    r.t_end = 1.0;
    run_to_rest(b, r);
    const Mo::Params p = b.params(0);
    const BatchView<Mo> v = b.view();
    ASSERT_EQ(static_cast<Status>(v.status[0]), Status::ok);
    EXPECT_EQ(v.events[0], 1);
    EXPECT_TRUE(std::isnan(v.t_stop[0].v));  // NaN-initialised fields are NaN on dual numbers too
    D2 qf[2], qdf[2], nat[2];
    for (int j = 0; j < 2; ++j) qf[j] = v.q[soa(j, 0, 1)], qdf[j] = v.qd[soa(j, 0, 1)];
    EXPECT_EQ(v.t[0].v, 1.0);
    EXPECT_EQ(v.t[0].d[0], 0.0);  // the end lands on t_end, which does not move
    Mo::natural_state(qf, qdf, p, nat);
    const std::array<double, 2> at = braked_at_1s(mu, v0);
    for (int k = 0; k < 2; ++k) {  // s, v
      EXPECT_NEAR(nat[k].v, at[k], 1e-8) << k;  // (the 1e-9 m past the mark)
      const double d_mu = (braked_at_1s(mu + h, v0)[k] - braked_at_1s(mu - h, v0)[k]) / (2 * h);
      const double d_v0 = (braked_at_1s(mu, v0 + h)[k] - braked_at_1s(mu, v0 - h)[k]) / (2 * h);
      EXPECT_NEAR(nat[k].d[0], d_mu, 1e-7 * std::abs(d_mu)) << k;
      EXPECT_NEAR(nat[k].d[1], d_v0, 1e-7 * std::abs(d_v0)) << k;
    }
  }
}

// The demo's bead, released at rest level with the ring's centre, slides
// down and stops (its event: the sign of its rate along the ring; at the
// zero, ukb::friction::stick_or_slip). The derivative of its resting angle with respect to mu, from a run
// on dual numbers, against central differences of complete runs in double
// (Richardson's extrapolation of steps h and h / 2), to 1e-6 relative; and
// so the derivative of the time it stops; with RK4 also under Baumgarte
// stabilisation and under projection.
TEST(Dual, TheRingsRestingAngleHasTheDerivativeOfCompleteRuns) {
  using M1 = models::BeadOnRing<Dual<double, 1>>;
  using M0 = models::BeadOnRing<double>;
  // Both methods; with RK4 also under each stabilisation.
  const std::pair<Method, Stabilization> cases[] = {{Method::rk4, Stabilization::none},
                                                    {Method::rk4, Stabilization::baumgarte},
                                                    {Method::rk4, Stabilization::projection},
                                                    {Method::dopri5, Stabilization::none}};
  for (const auto& c : cases) {
    const Method method = c.first;
    const Stabilization stab = c.second;
    RunOptions r;
    r.stabilization = stab;
    r.method = method;
    r.dt = method == Method::rk4 ? 1e-3 : 0;
    r.event_tol = 1e-12;  // the differences of complete runs: their location's jitter over h stays below 1e-8
    r.rtol = 1e-12;
    r.atol = {1e-14};
    auto outcome_of = [&](double mu) {  // the resting angle, the time of the stop
      Batch<M0> b(1);
      M0::Params p;
      p.mu = mu;
      b.set_params(0, p);
      const double ic[2] = {0.0, 0.0};
      double q[2], qd[2];
      M0::initial_state(ic, p, q, qd);
      b.set_state(0, q, qd);
      if (method == Method::dopri5) b.allocate_adaptive();
      run_to_rest(b, r);
      EXPECT_EQ(static_cast<Status>(b.view().status[0]), Status::at_rest);
      return std::array<double, 2>{std::atan2(b.view().q[1], b.view().q[0]), b.view().t_stop[0]};
    };
    for (const double mu : {0.1, 0.3}) {
      SCOPED_TRACE(testing::Message() << to_string(method) << ", " << to_string(stab) << ", mu " << mu);
      Batch<M1> b(1);
      M1::Params p;
      p.mu = Dual<double, 1>::variable(mu, 0);
      b.set_params(0, p);
      const Dual<double, 1> ic[2] = {0.0, 0.0};
      Dual<double, 1> q[2], qd[2];
      M1::initial_state(ic, p, q, qd);
      b.set_state(0, q, qd);
      if (method == Method::dopri5) b.allocate_adaptive();
      run_to_rest(b, r);
      ASSERT_EQ(static_cast<Status>(b.view().status[0]), Status::at_rest);
      const Dual<double, 1> out[2] = {atan2(b.view().q[1], b.view().q[0]), b.view().t_stop[0]};
      const std::array<double, 2> plain = outcome_of(mu);
      const double h = 1e-4;
      for (int k = 0; k < 2; ++k) {
        EXPECT_EQ(out[k].v, plain[k]) << k;  // the values are those of double
        const double c1 = (outcome_of(mu + h)[k] - outcome_of(mu - h)[k]) / (2 * h);
        const double c2 = (outcome_of(mu + h / 2)[k] - outcome_of(mu - h / 2)[k]) / h;
        const double richardson = (4 * c2 - c1) / 3;
        EXPECT_NEAR(out[k].d[0], richardson, 1e-6 * std::abs(richardson)) << k;
      }
    }
  }
}

// A model file with events and no `rebind` (examples/models/spring_block.hpp):
// a block on a spring on a rough floor, released at rest at x0 > 0, swings
// about +-d, d = mu m g / k, each half swing a half period pi sqrt(m / k)
// long, to the turning points x_j = (-1)^j (x0 - 2 j d), and sticks at the
// first with |x_j| <= d. So dx_j/dmu = (-1)^(j+1) 2 j m g / k, dx_j/dx0 =
// (-1)^j, dx_j/dk = (-1)^j 2 j mu m g / k^2; the time of the stop,
// j pi sqrt(m / k), depends on neither mu nor x0, and dt/dk = -j pi
// sqrt(m) / (2 k^1.5). Each turning point is an event: its time's
// derivative in k is -g_k / g', so the event's rate (taken on the model's
// own dual numbers) shows in dt/dk; the start is a consultation of the
// handler.
TEST(Dual, AModelFileWithEventsHasTheClosedFormDerivativesOfItsRest) {
  using D3 = Dual<double, 3>;
  using M = SpringBlock<D3>;
  using M0 = SpringBlock<double>;
  const M0::Params p0{};
  const double mu = 0.2, x0 = 1.0, k = p0.k, m = p0.m, g = p0.g;
  RunOptions r;
  r.dt = 1e-3;
  r.event_tol = 1e-12;
  Batch<M> b(1);
  M::Params p;
  p.mu = D3::variable(mu, 0);
  p.k = D3::variable(k, 2);
  b.set_params(0, p);
  const D3 ic[2] = {D3::variable(x0, 1), D3(0.0)};
  D3 q[2], qd[2];
  ASSERT_TRUE(M::initial_state(ic, p, q, qd));
  b.set_state(0, q, qd);
  run_to_rest(b, r);
  ASSERT_EQ(static_cast<Status>(b.view().status[0]), Status::at_rest);
  const double d = mu * m * g / k;
  const int j = static_cast<int>(std::ceil((x0 - d) / (2 * d)));  // the first j with x0 - 2 j d <= d
  ASSERT_GE(j, 2) << "guard: the block turns and slides on before it sticks";
  const double sign = j % 2 == 0 ? 1.0 : -1.0;
  const D3 x = b.view().q[0], t = b.view().t_stop[0];
  EXPECT_EQ(b.view().events[0], j + 1) << "the start's consultation and every turning point";
  EXPECT_NEAR(x.v, sign * (x0 - 2 * j * d), 1e-9);
  EXPECT_NEAR(x.d[0], -sign * 2 * j * m * g / k, 1e-7);
  EXPECT_NEAR(x.d[1], sign, 1e-7);
  EXPECT_NEAR(x.d[2], sign * 2 * j * mu * m * g / (k * k), 1e-7);
  EXPECT_NEAR(t.v, j * M_PI * std::sqrt(m / k), 1e-9);
  EXPECT_NEAR(t.d[0], 0.0, 1e-7);
  EXPECT_NEAR(t.d[1], 0.0, 1e-7);
  const double dt_dk = -j * M_PI * std::sqrt(m) / (2 * k * std::sqrt(k));
  EXPECT_NEAR(t.d[2], dt_dk, 1e-7 * std::abs(dt_dk));
}

// The ring with an event function that also depends on the time and on a
// parameter: g = q1' + mu sin t. Along the motion, g' = q1'' + mu cos t;
// the event's rate (tangents.hpp) takes it with the parameters' own
// tangents dropped, whatever they are.
template <class T>
struct TimedEventRing : models::BeadOnRing<T> {
  static constexpr const char* name = "timed_event_ring";
  UKB_HD static T event(const T* /*q*/, const T* qd, T t, const typename models::BeadOnRing<T>::Params& p) {
    using std::sin;
    return qd[1] + p.mu * sin(t);
  }
};

TEST(Dual, TheEventsRateIsItsDerivativeAlongTheMotion) {
  using M = TimedEventRing<D2>;
  M::Params p;
  p.mu = D2::variable(0.3, 0);
  p.mu.d[1] = 2.5;  // any tangents: dropped
  p.R = D2::variable(1.0, 1);
  const D2 q[2] = {D2::variable(0.6, 0), D2(0.8)}, qd[2] = {D2(-0.4), D2::variable(0.3, 1)};
  const D2 qdd[2] = {D2(0.7), D2(-1.1)}, t = D2::variable(0.9, 0);
  const double rate = kernels::event_rate<M>(q, qd, qdd, t, p);
  EXPECT_NEAR(rate, -1.1 + 0.3 * std::cos(0.9), 1e-15);
}

// Smooth outcomes (no event) of a chain and of the sleigh at t = 1, RK4
// with dt = 1e-2: the tangents are the derivatives of the computed
// solution, which central differences of complete runs in double
// (Richardson's extrapolation of steps h and h / 2) approach; to 1e-6
// relative. The chain's tip against its damping c and the first link's
// initial angle; the sleigh's heading against the resistance c and the
// initial speed, under a periodic torque.
// System 0 of b from its parameters p and initial quantities ic, run to
// t = 1 with RK4 steps of 1e-2.
template <class M>
void run_one_second(Batch<M>& b, const typename M::Params& p, const typename M::Scalar* ic) {
  typename M::Scalar q[M::n], qd[M::n];
  b.set_params(0, p);
  EXPECT_TRUE(M::initial_state(ic, p, q, qd));
  b.set_state(0, q, qd);
  integrate(b, Backend::cpu, RunOptions{.dt = 1e-2, .t_end = 1.0}, 1000);
  EXPECT_EQ(static_cast<Status>(b.view().status[0]), Status::ok);
}
template <class S>
std::array<S, 2> chain_tip(S c, S angle) {
  using M = models::PlanarChain<S, 3>;
  Batch<M> b(1);
  typename M::Params p;
  p.c = c;
  const S ic[6] = {angle, S(0.4), S(-0.3), S(0.0), S(0.5), S(0.0)};
  run_one_second(b, p, ic);
  return {b.view().q[4], b.view().q[5]};
}
template <class S>
std::array<S, 2> sleigh_heading(S c, S v) {
  using M = models::ChaplyginSleigh<S>;
  Batch<M> b(1);
  typename M::Params p;
  p.c = c, p.tau0 = S(0.5), p.w = S(3.0);
  const S ic[5] = {S(0.0), S(0.0), S(0.3), v, S(0.8)};
  run_one_second(b, p, ic);
  return {b.view().q[2], b.view().q[0]};
}

template <class F>
void tangents_match_differences(F outcome, double a, double u) {
  const std::array<D2, 2> dual = outcome(D2::variable(a, 0), D2::variable(u, 1));
  const std::array<double, 2> plain = outcome(a, u);
  const double h = 1e-4;
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(dual[k].v, plain[k]) << k;  // the values are those of double
    for (int wrt = 0; wrt < 2; ++wrt) {
      auto at = [&](double step) { return wrt == 0 ? outcome(a + step, u)[k] : outcome(a, u + step)[k]; };
      const double c1 = (at(h) - at(-h)) / (2 * h), c2 = (at(h / 2) - at(-h / 2)) / h;
      const double richardson = (4 * c2 - c1) / 3;
      EXPECT_GT(std::abs(richardson), 1e-3) << "guard: an outcome that depends on it, " << k << " " << wrt;
      EXPECT_NEAR(dual[k].d[wrt], richardson, 1e-6 * std::abs(richardson)) << k << " " << wrt;
    }
  }
}

TEST(Dual, AChainAndTheSleighHaveTheDerivativesOfCompleteRuns) {
  {
    SCOPED_TRACE("planar_chain_3");
    tangents_match_differences([](auto c, auto angle) { return chain_tip(c, angle); }, 0.3, 0.7);
  }
  {
    SCOPED_TRACE("chaplygin_sleigh");
    tangents_match_differences([](auto c, auto v) { return sleigh_heading(c, v); }, 0.4, 1.2);
  }
}

// The reference backend computes in double only; cuda is compiled for the
// built-in models in double and float: on dual numbers both say so.
TEST(Dual, TheBackendsWithoutDualNumbersSaySo) {
  Batch<models::InclineBlock<D2>> b(1);
  EXPECT_THROW(integrate(b, Backend::reference, RunOptions{}, 1), BackendUnavailable);
  EXPECT_THROW(integrate(b, Backend::cuda, RunOptions{}, 1), BackendUnavailable);
}

}  // namespace
}  // namespace ukb::test
