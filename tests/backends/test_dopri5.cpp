// Adaptive steps (Method::dopri5, kernels/ukb/kernels/dopri5.hpp and
// AdaptiveRun in run.hpp): the tableau against the order conditions of
// Runge–Kutta theory, the global error against a tight RK4 solution of the
// reference backend (its rate in the work), the energy of a conservative
// chain, the cpu backend against the reference backend's own Dormand–Prince,
// events against RK4, the step-size floor, calls and the dense output.
// (The lanes, bitwise: test_simd.cpp; SciPy's RK45: tests/scipy_rk45.py;
// the CUDA source: test_cuda_emulation.cpp; ukb run: tests/run/.)
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "engine_support.hpp"
#include "ukb/kernels/dopri5.hpp"

namespace ukb::test {
namespace {

using Tab = kernels::Dopri5Tableau;

double b(int j) { return Tab::a(6, j); }
double bh(int j) { return b(j) - Tab::e(j); }
double A(int i, int j) { return Tab::a(i, j); }
double c(int i) { return Tab::c(i); }

// sum_j w_j phi_j for the weights w (b or b^) and per-stage values phi.
template <class W, class F>
double sum(W w, F phi) {
  double s = 0;
  for (int j = 0; j < 7; ++j) s += w(j) * phi(j);
  return s;
}
// (A x)_i for per-stage values x.
template <class F>
auto Ax(F x) {
  return [x](int i) {
    double s = 0;
    for (int j = 0; j < 7; ++j) s += A(i, j) * x(j);
    return s;
  };
}

TEST(Dopri5, TableauMeetsTheOrderConditionsOfItsPair) {
  // Butcher's order conditions (Hairer, Norsett, Wanner I, Table II.2.2):
  // the weights b are of order 5 (17 conditions), b^ of order 4 but not 5.
  auto one = [](int) { return 1.0; };
  auto C = [](int k) { return [k](int j) { return std::pow(c(j), k); }; };
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(Ax(one)(i), c(i), 1e-15) << "row sum " << i;
  for (int j = 0; j < 7; ++j) EXPECT_EQ(A(6, j), b(j)) << "FSAL: stage 7 is the solution";
  EXPECT_EQ(c(6), 1.0);
  auto conditions = [&](auto w) {
    std::vector<std::pair<double, double>> k = {
        {sum(w, one), 1.0},
        {sum(w, C(1)), 1.0 / 2},
        {sum(w, C(2)), 1.0 / 3},
        {sum(w, Ax(C(1))), 1.0 / 6},
        {sum(w, C(3)), 1.0 / 4},
        {sum(w, [&](int j) { return c(j) * Ax(C(1))(j); }), 1.0 / 8},
        {sum(w, Ax(C(2))), 1.0 / 12},
        {sum(w, Ax(Ax(C(1)))), 1.0 / 24},
        {sum(w, C(4)), 1.0 / 5},
        {sum(w, [&](int j) { return c(j) * c(j) * Ax(C(1))(j); }), 1.0 / 10},
        {sum(w, [&](int j) { return std::pow(Ax(C(1))(j), 2); }), 1.0 / 20},
        {sum(w, [&](int j) { return c(j) * Ax(C(2))(j); }), 1.0 / 15},
        {sum(w, Ax(C(3))), 1.0 / 20},
        {sum(w, [&](int j) { return c(j) * Ax(Ax(C(1)))(j); }), 1.0 / 30},
        {sum(w, Ax([&](int j) { return c(j) * Ax(C(1))(j); })), 1.0 / 40},
        {sum(w, Ax(Ax(C(2)))), 1.0 / 60},
        {sum(w, Ax(Ax(Ax(C(1))))), 1.0 / 120}};
    return k;
  };
  const auto five = conditions(b), four = conditions(bh);
  for (std::size_t k = 0; k < five.size(); ++k) EXPECT_NEAR(five[k].first, five[k].second, 1e-14) << "b, " << k;
  for (std::size_t k = 0; k < 8; ++k) EXPECT_NEAR(four[k].first, four[k].second, 1e-14) << "b^, " << k;
  double off = 0;
  for (std::size_t k = 8; k < four.size(); ++k) off = std::max(off, std::abs(four[k].first - four[k].second));
  EXPECT_GT(off, 1e-5) << "b^ is of order 4, not 5: the difference estimates the error";
}

// The bead on a frictionless ring (a pendulum) from a range of swings.
RandomBatch<models::BeadOnRing> pendulums(int N) {
  RandomBatch<models::BeadOnRing> r(N, 91);
  for (int i = 0; i < N; ++i) {
    models::BeadOnRing<double>::Params p{};
    p.mu = 0;
    r.batch.set_params(i, p);
  }
  return r;
}

// The largest |difference| of q and q' between two batches.
template <class Mo>
double max_state_diff(const Batch<Mo>& a, const Batch<Mo>& b) {
  double d = 0;
  for (int i = 0; i < a.size(); ++i)
    for (int j = 0; j < Mo::n; ++j) {
      worst_of(d, std::abs(a.q(i, j) - b.q(i, j)));
      worst_of(d, std::abs(a.qd(i, j) - b.qd(i, j)));
    }
  return d;
}

TEST(Dopri5, TheErrorNormIsTheRootMeanSquareOverAllTwoNComponents) {
  // docs/adaptive.md and dopri5.hpp: sqrt(1/(2n) sum_y (err_y /
  // (atol_y + rtol max(|y0|, |y1|)))^2) over q and q'. n = 2, one error
  // of 1e-6 in q_0 where |y| = 1 and 2e-6 in q'_1 where |y| = 3: the sum
  // is (1e-6 / 1.001e-3)^2 + (2e-6 / 3.001e-3)^2, divided by 4.
  ErrorControl<double> c;
  c.rtol = 1e-3;
  c.atol[0] = 1e-6;
  const double q0[2] = {1.0, -0.5}, qd0[2] = {0.0, -3.0}, q1[2] = {0.9, -0.5}, qd1[2] = {0.0, 2.0};
  const double eq[2] = {1e-6, 0.0}, ev[2] = {0.0, 2e-6};
  const double a = 1e-6 / 1.001e-3, b = 2e-6 / 3.001e-3;
  EXPECT_NEAR(kernels::dopri5_error<2>(q0, qd0, q1, qd1, eq, ev, c), std::sqrt((a * a + b * b) / 4), 1e-15);
  // Per-component tolerances (2n of them): q'_1's atol alone changes.
  c.atol_count = 4;
  c.atol[1] = c.atol[2] = 1e-6, c.atol[3] = 1e-3;
  const double b2 = 2e-6 / (1e-3 + 3e-3);
  EXPECT_NEAR(kernels::dopri5_error<2>(q0, qd0, q1, qd1, eq, ev, c), std::sqrt((a * a + b2 * b2) / 4), 1e-15);
}

TEST(Dopri5, GlobalErrorFallsWithTheToleranceAsAFifthOrderMethod) {
  // Against RK4 with dt = 1e-4 (the fixed-step kernels, error ~1e-13
  // here): the error falls with rtol, stays within a
  // small multiple of it, and against the evaluations it falls as their
  // fifth power (log-log slope -5 for a method of order 5).
  using Mo = models::BeadOnRing<double>;
  const int N = 8;
  const double t_end = 3.0;
  RandomBatch<models::BeadOnRing> truth = pendulums(N);
  ASSERT_EQ(integrate(truth.batch, Backend::cpu, {.dt = 1e-4, .t_end = t_end, .events = false}).failed, 0);
  std::vector<double> errs, evals;
  for (double rtol : {1e-5, 1e-7, 1e-9}) {
    RandomBatch<models::BeadOnRing> b = pendulums(N);
    RunOptions r{.method = Method::dopri5, .dt = 0, .t_end = t_end, .events = false};
    r.rtol = rtol;
    r.atol = {rtol * 1e-2};
    ASSERT_EQ(integrate(b.batch, Backend::cpu, r).failed, 0);
    const double err = max_state_diff<Mo>(b.batch, truth.batch);
    double work = 0;
    for (int i = 0; i < N; ++i) work += double(b.batch.rhs_evals(i));
    EXPECT_LT(err, 1000 * rtol) << "rtol " << rtol;  // a global error over 3 s of swinging
    errs.push_back(err);
    evals.push_back(work);
  }
  EXPECT_LT(errs[1], errs[0] / 10);
  EXPECT_LT(errs[2], errs[1] / 10);
  const double slope = std::log(errs[2] / errs[0]) / std::log(evals[2] / evals[0]);
  EXPECT_GT(slope, -6.5) << "error ~ evaluations^slope";
  EXPECT_LT(slope, -4.0) << "error ~ evaluations^slope";
}

TEST(Dopri5, EnergyOfAConservativeChainDriftsNoMoreThanTheTolerance) {
  // planar_chain_3 without damping, no stabilisation, 10 s of swinging: the
  // energy drift (per unit energy) stays within a multiple of rtol and falls
  // with it.
  using Mo = models::PlanarChain3<double>;
  auto drift = [](double rtol) {
    RandomBatch<models::PlanarChain3> b(6, 33);
    for (int i = 0; i < 6; ++i) {
      Mo::Params p{};
      p.c = 0;
      b.batch.set_params(i, p);
    }
    auto energy = [&](int i) {
      const Mo::Params p = b.batch.params(i);
      double q[Mo::n], qd[Mo::n], M[Mo::n * Mo::n], e = 0;
      for (int j = 0; j < Mo::n; ++j) q[j] = b.batch.q(i, j), qd[j] = b.batch.qd(i, j);
      Mo::mass(q, 0, p, M);
      for (int j = 0; j < Mo::n; ++j)
        for (int k = 0; k < Mo::n; ++k) e += 0.5 * qd[j] * M[j * Mo::n + k] * qd[k];
      return e + Mo::potential(q, 0, p);
    };
    std::vector<double> e0;
    for (int i = 0; i < 6; ++i) e0.push_back(energy(i));
    RunOptions r{.method = Method::dopri5, .dt = 0, .t_end = 10.0};
    r.rtol = rtol;
    r.atol = {rtol * 1e-2};
    EXPECT_EQ(integrate(b.batch, Backend::cpu, r).failed, 0);
    double worst = 0;
    for (int i = 0; i < 6; ++i) {
      const double scale = std::abs(e0[i]) + 3 * 9.81;  // energies of order m g l K
      worst_of(worst, std::abs(energy(i) - e0[i]) / scale);
      EXPECT_GT(b.batch.steps(i), 100) << "guard: the chain moved through many steps";
    }
    return worst;
  };
  const double loose = drift(1e-7), tight = drift(1e-9);
  EXPECT_LT(loose, 1000 * 1e-7);
  EXPECT_LT(tight, 1000 * 1e-9);
  EXPECT_LT(tight, loose / 20) << "the drift falls with the tolerance";
}

// Every per-system output of a cpu and a reference integration within tol.
template <template <class> class Model>
void cpu_matches_reference(const RunOptions& r, double tol, int N) {
  using Mo = Model<double>;
  SCOPED_TRACE(std::string(Mo::name) + " " + std::string(to_string(r.stabilization)));
  RandomBatch<Model> cpu(N, 17 + N), ref(N, 17 + N);
  integrate(cpu.batch, Backend::cpu, r);
  integrate(ref.batch, Backend::reference, r);
  int moved = 0;
  for (int i = 0; i < N; ++i) {
    ASSERT_EQ(cpu.batch.status(i), ref.batch.status(i)) << "system " << i;
    EXPECT_NEAR(cpu.batch.t(i), ref.batch.t(i), tol) << "system " << i;
    for (int j = 0; j < Mo::n; ++j) {
      EXPECT_NEAR(cpu.batch.q(i, j), ref.batch.q(i, j), tol * std::max(1.0, std::abs(ref.batch.q(i, j))));
      EXPECT_NEAR(cpu.batch.qd(i, j), ref.batch.qd(i, j), tol * std::max(1.0, std::abs(ref.batch.qd(i, j))));
    }
    // The same rules of the controller: step counts within a few percent.
    EXPECT_NEAR(double(cpu.batch.steps(i)), double(ref.batch.steps(i)), 2 + 0.05 * double(ref.batch.steps(i)));
    moved += cpu.batch.steps(i) > 3;
  }
  EXPECT_GT(moved, N / 2) << "guard: the systems took steps";
}

TEST(Dopri5, CpuBackendMatchesTheReferenceBackendsOwnDormandPrince) {
  // Two implementations of the same rules (the reference's tableau is a
  // Butcher array with b - b^ formed from both weights, its event location
  // a plain bisection): the results agree to the tolerance's level.
  RunOptions r{.method = Method::dopri5, .dt = 0, .t_end = 0.5};
  r.rtol = 1e-10;
  r.atol = {1e-12};
  const int N = sanitized ? 5 : 24;
  for_each_model_template([&]<template <class> class Model>() {
    RunOptions x = r;
    for (Stabilization st : {Stabilization::none, Stabilization::projection}) {
      if (st != Stabilization::none && !HasConstraintRows<Model<double>>) continue;
      x.stabilization = st;
      cpu_matches_reference<Model>(x, 1e-7, N);
    }
  });
}

TEST(Dopri5, RingRestsWhereRk4AtASmallStepSaysOnEveryBackend) {
  // Stick-slip events on the dense output (and by trial steps where it
  // does not show them): resting angles and times as RK4's at dt = 1e-4.
  const int N = sanitized ? 12 : 48;
  RandomBatch<models::BeadOnRing> rk4(N, 5);
  ASSERT_EQ(integrate(rk4.batch, Backend::cpu, {.dt = 1e-4, .t_end = 8.0}).failed, 0);
  RunOptions r{.method = Method::dopri5, .dt = 0, .t_end = 8.0};
  r.rtol = 1e-12;
  r.atol = {1e-14};
  int rest = 0;
  for (Backend be : {Backend::cpu, Backend::reference}) {
    RandomBatch<models::BeadOnRing> dp(N, 5);
    ASSERT_EQ(integrate(dp.batch, be, r).failed, 0);
    for (int i = 0; i < N; ++i) {
      ASSERT_EQ(dp.batch.status(i), rk4.batch.status(i)) << "system " << i;
      if (dp.batch.status(i) != Status::at_rest) continue;
      ++rest;
      const double th = std::atan2(dp.batch.q(i, 1), dp.batch.q(i, 0));
      const double th4 = std::atan2(rk4.batch.q(i, 1), rk4.batch.q(i, 0));
      EXPECT_NEAR(th, th4, 1e-8) << "system " << i;
      // (the instant of rest moves by the velocity's error over the
      // deceleration there, which is small for some beads)
      EXPECT_NEAR(dp.batch.t_stop(i), rk4.batch.t_stop(i), 1e-7) << "system " << i;
      EXPECT_EQ(dp.batch.events(i), rk4.batch.events(i)) << "system " << i;
      EXPECT_LT(double(dp.batch.steps(i)), double(rk4.batch.steps(i)) / 20) << "guard: far fewer steps";
    }
  }
  EXPECT_GT(rest, N / 2) << "guard: beads came to rest";
}

// Beads at the bottom of a frictionless ring, moving along it at speeds w.
Batch<models::BeadOnRing<double>> beads_at_the_bottom(const std::vector<double>& w) {
  using Mo = models::BeadOnRing<double>;
  Batch<Mo> b(static_cast<int>(w.size()));
  for (int i = 0; i < b.size(); ++i) {
    Mo::Params p{};
    p.mu = 0;
    b.set_params(i, p);
    const double q[2] = {0, -1}, qd[2] = {w[static_cast<std::size_t>(i)], 0};
    b.set_state(i, q, qd);
  }
  return b;
}

// The rough ring whose handler resumes without changing anything: the
// bead is left where its event (the sign of omega) is crossed at once.
template <class T>
struct StubbornRing : models::BeadOnRing<T> {
  static constexpr const char* name = "stubborn_ring";
  template <class U>
  using rebind = StubbornRing<U>;
  UKB_HD static EventAction on_event(T*, T*, T, const typename models::BeadOnRing<T>::Params&) {
    return EventAction::resume;
  }
};

// Beads at the bottom of a rough ring (mu), moving at the rates w.
template <class Mo>
Batch<Mo> ring_beads(const std::vector<double>& w, double mu) {
  Batch<Mo> b(static_cast<int>(w.size()));
  for (int i = 0; i < b.size(); ++i) {
    typename Mo::Params p{};
    p.mu = mu;
    b.set_params(i, p);
    const double q[2] = {0, -1}, qd[2] = {w[static_cast<std::size_t>(i)], 0};
    b.set_state(i, q, qd);
  }
  return b;
}

// The events tests' two runs to t = 5: RK4 at dt = 1e-3, dopri5 at rtol 1e-10.
std::vector<RunOptions> event_runs() {
  RunOptions dp{.method = Method::dopri5, .dt = 0, .t_end = 5.0};
  dp.rtol = 1e-10;
  dp.atol = {1e-12};
  return {RunOptions{.dt = 1e-3, .t_end = 5.0}, dp};
}

TEST(Events, AResumeThatChangesNothingFailsAtTheEventInsteadOfLooping) {
  // docs/adding-a-model.md, "The event contract": the next step's event is
  // located within event_tol of its own start, the instant of the last one;
  // the sample fails there with failed_event_loop (before, the time stood still and the
  // handler was called until max_steps, for ever without one). On both
  // backends, both methods, lanes and one at a time; the well-behaved ring
  // (its handler zeroes omega or stops the bead) never fails so.
  const std::vector<double> w = {0.5, 1.0, 2.0, 3.0};
  std::vector<RunOptions> runs = event_runs();
  // Without the rule, max_steps instead of a run that never ends.
  for (RunOptions& r : runs) r.max_steps = 100000;
  std::vector<double> first(w.size(), -1.0);  // each bead's instant, from the first run
  for (const RunOptions& r : runs) {
    for (Backend be : {Backend::cpu, Backend::reference}) {
      for (bool simd : {true, false}) {
        if (be == Backend::reference && !simd) continue;
        SCOPED_TRACE(std::string(to_string(be)) + (r.method == Method::dopri5 ? " dopri5" : " rk4") +
                     (simd ? "" : " one at a time"));
        Batch<StubbornRing<double>> b = ring_beads<StubbornRing<double>>(w, 0.3);
        const Tally t = integrate(b, be, r, std::numeric_limits<long>::max(), EngineOptions{.threads = 1, .simd = simd});
        EXPECT_EQ(t.failed, b.size());
        Batch<models::BeadOnRing<double>> good = ring_beads<models::BeadOnRing<double>>(w, 0.3);
        EXPECT_EQ(integrate(good, be, r, std::numeric_limits<long>::max(), EngineOptions{.threads = 1, .simd = simd}).failed, 0);
        for (int i = 0; i < b.size(); ++i) {
          EXPECT_EQ(b.status(i), Status::failed_event_loop) << i;
          EXPECT_EQ(b.events(i), 1) << i << ": the handler was called once";
          EXPECT_GT(good.events(i), 0) << i << ": the well-behaved ring's handler was called too";
          EXPECT_LT(b.t(i), 5.0) << i;
          EXPECT_EQ(b.t_stop(i), b.t(i)) << i << ": t_stop is the instant it stopped at";
          // At the turning point: omega (= the event function, R = 1) about 0.
          const double omega = b.q(i, 0) * b.qd(i, 1) - b.q(i, 1) * b.qd(i, 0);
          EXPECT_LT(std::abs(omega), 1e-6) << i;
          double& t0 = first[static_cast<std::size_t>(i)];
          if (t0 < 0) t0 = b.t(i);
          EXPECT_NEAR(b.t(i), t0, 1e-6) << i << ": the same turning point on every route";
        }
      }
    }
  }
}

// A ring whose handler does what the ring's does and then moves the time:
// forward by a quarter second (allowed: a handler that finishes a motion),
// back by one, or to NaN (both refused).
enum class TimeMove { forward, back, nan };

template <class T, TimeMove Move>
struct TimeMovingRing : models::BeadOnRing<T> {
  static constexpr const char* name = "time_moving_ring";
  template <class U>
  using rebind = TimeMovingRing<U, Move>;
  UKB_HD static EventAction on_event(T* q, T* qd, T& t, const typename models::BeadOnRing<T>::Params& p) {
    const EventAction a = models::BeadOnRing<T>::on_event(q, qd, t, p);
    t = Move == TimeMove::forward ? t + T(0.25) : Move == TimeMove::back ? t - T(1) : T(NAN);
    return a;
  }
};

// Only a handler that takes the time by reference can move it; the run
// loops skip the time check (and its copy of the state) for the others.
static_assert(HandlerMovesTime<TimeMovingRing<double, TimeMove::forward>>);
static_assert(!HandlerMovesTime<models::BeadOnRing<double>>);
static_assert(!HandlerMovesTime<StubbornRing<double>>);
// A forwarding reference could move it: counted as moving.
struct ForwardingRing : models::BeadOnRing<double> {
  template <class U>
  static EventAction on_event(double*, double*, U&&, const Params&) {
    return EventAction::resume;
  }
};
static_assert(HasEvents<ForwardingRing> && HandlerMovesTime<ForwardingRing>);
static_assert(!HandlerMovesTime<models::InclineBlock<float>>);

TEST(Events, AHandlerMayMoveTheTimeForwardAndNotBackOrToNaN) {
  // docs/adding-a-model.md, "The event contract": the located state is
  // where it is on every route; a handler's time is then the system's (at
  // rest: t_stop), and a time before the event's or NaN fails the sample
  // with failed_nonfinite at the event's state. Beads on a rough ring, each
  // stopping at its first located turning point (the well-behaved ring of
  // the same runs says where and when).
  const std::vector<double> w = {0.5, 1.0, 1.5, 1.8};
  for (const RunOptions& r : event_runs()) {
    for (Backend be : {Backend::cpu, Backend::reference}) {
      for (bool simd : {true, false}) {
        if (be == Backend::reference && !simd) continue;
        SCOPED_TRACE(std::string(to_string(be)) + (r.method == Method::dopri5 ? " dopri5" : " rk4") +
                     (simd ? "" : " one at a time"));
        const EngineOptions eo{.threads = 1, .simd = simd};
        const long all = std::numeric_limits<long>::max();
        Batch<models::BeadOnRing<double>> good = ring_beads<models::BeadOnRing<double>>(w, 0.8);
        integrate(good, be, r, all, eo);
        auto fwd = ring_beads<TimeMovingRing<double, TimeMove::forward>>(w, 0.8);
        auto back = ring_beads<TimeMovingRing<double, TimeMove::back>>(w, 0.8);
        auto nan = ring_beads<TimeMovingRing<double, TimeMove::nan>>(w, 0.8);
        EXPECT_EQ(integrate(fwd, be, r, all, eo).failed, 0);
        EXPECT_EQ(integrate(back, be, r, all, eo).failed, back.size());
        EXPECT_EQ(integrate(nan, be, r, all, eo).failed, nan.size());
        for (int i = 0; i < good.size(); ++i) {
          ASSERT_EQ(good.status(i), Status::at_rest) << i << ": guard: each bead stops at its first turn";
          ASSERT_EQ(good.events(i), 1) << i;
          EXPECT_EQ(fwd.status(i), Status::at_rest) << i;
          EXPECT_EQ(fwd.t_stop(i), good.t_stop(i) + 0.25) << i;
          EXPECT_EQ(fwd.t(i), fwd.t_stop(i)) << i;
          EXPECT_EQ(fwd.q(i, 0), good.q(i, 0)) << i;
          EXPECT_EQ(back.status(i), Status::failed_nonfinite) << i;
          EXPECT_EQ(nan.status(i), Status::failed_nonfinite) << i;
          EXPECT_EQ(back.t_stop(i), good.t_stop(i)) << i << ": the event's time";
          EXPECT_EQ(nan.t_stop(i), good.t_stop(i)) << i << ": the event's time";
          EXPECT_EQ(back.t(i), good.t_stop(i)) << i;
          EXPECT_EQ(nan.t(i), good.t_stop(i)) << i;
          // The event's state is kept, not the handler's (which set the
          // velocity to zero): the located bead still moves, by a hair.
          EXPECT_EQ(back.q(i, 0), good.q(i, 0)) << i;
          EXPECT_GT(std::hypot(back.qd(i, 0), back.qd(i, 1)), 0.0) << i;
          EXPECT_GT(std::hypot(nan.qd(i, 0), nan.qd(i, 1)), 0.0) << i;
        }
      }
    }
  }
}

TEST(Dopri5, AStepBelowDtMinEndsThatSystemAlone) {
  // Six beads at the bottom of a frictionless ring, two of them spinning at
  // 3000 rad/s: with rtol = 1e-4 those need steps near 5e-5 < dt_min =
  // 1e-3 and end with failed_step_size at their last good state; the others
  // (1 rad/s) finish.
  using Mo = models::BeadOnRing<double>;
  const Batch<Mo> b = beads_at_the_bottom({1, 3000, 1, 1, 3000, 1});
  RunOptions r{.method = Method::dopri5, .dt = 0, .t_end = 0.5, .events = false};
  r.rtol = 1e-4;
  r.atol = {1e-6};
  r.dt_min = 1e-3;
  for (Backend be : {Backend::cpu, Backend::reference}) {
    Batch<Mo> c = b;
    const Tally t = integrate(c, be, r);
    EXPECT_EQ(t.failed, 2);
    for (int i = 0; i < 6; ++i) {
      const bool fast = i == 1 || i == 4;
      EXPECT_EQ(c.status(i), fast ? Status::failed_step_size : Status::ok) << i;
      EXPECT_EQ(c.t(i) == 0.5, !fast) << i;
      if (fast) {
        EXPECT_EQ(c.t_stop(i), c.t(i));
        EXPECT_LT(c.h_next(i), r.dt_min);
      }
    }
  }
}

TEST(Dopri5, NoStepIsLongerThanDtMaxTheLastOneIncluded) {
  // A step that would land on t_end by growing 1 % beyond the control's
  // choice does so only where that is within dt_max: with dt = dt_max =
  // 0.1 and t_end = 0.1005, two steps (0.1, then 0.0005), on both backends.
  using Mo = models::BeadOnRing<double>;
  const Batch<Mo> b = beads_at_the_bottom({0.1, 0.2, 0.3});
  RunOptions r{.method = Method::dopri5, .dt = 0.1, .t_end = 0.1005, .events = false};
  r.rtol = 1e-3;
  r.atol = {1e-3};
  r.dt_max = 0.1;
  for (Backend be : {Backend::cpu, Backend::reference}) {
    Batch<Mo> c = b;
    integrate(c, be, r);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(c.status(i), Status::ok) << i;
      EXPECT_EQ(c.t(i), 0.1005) << i;
      EXPECT_EQ(c.steps(i), 2) << "backend " << int(be) << ", system " << i;
      EXPECT_EQ(c.rejected(i), 0) << i;
    }
  }
}

TEST(Dopri5, TheSafetyFactorScalesTheStepTheControlChoosesOnEveryBackend) {
  // integrator.safety: the next step is h / clamp(err^0.17 / err_prev^0.04 /
  // safety, ...) (docs/adaptive.md), so after the same accepted first step
  // half the factor chooses half the step, where the clamp does not act;
  // over a whole run a smaller factor takes more steps. The reference
  // backend's own controller agrees.
  using Mo = models::BeadOnRing<double>;
  const Batch<Mo> b = beads_at_the_bottom({0.5, 1.0, 2.0});
  RunOptions r{.method = Method::dopri5, .dt = 0.01, .t_end = 2.0, .events = false};
  r.rtol = 1e-6;
  r.atol = {1e-6};
  std::map<double, std::map<int, long>> steps;
  for (Backend be : {Backend::cpu, Backend::reference}) {
    SCOPED_TRACE(to_string(be));
    std::map<double, Batch<Mo>> first;
    for (double safety : {0.9, 0.45}) {
      RunOptions one = r;
      one.safety = safety;
      one.max_steps = 1;
      first.emplace(safety, b);
      integrate(first.at(safety), be, one);
      Batch<Mo> whole = b;
      one.max_steps = std::numeric_limits<long>::max();
      integrate(whole, be, one);
      for (int i = 0; i < b.size(); ++i) {
        ASSERT_EQ(whole.status(i), Status::ok) << i;
        ASSERT_EQ(whole.t(i), 2.0) << i;
        steps[safety][i + 10 * int(be)] = whole.steps(i);
      }
    }
    for (int i = 0; i < b.size(); ++i) {
      const double h90 = first.at(0.9).h_next(i), h45 = first.at(0.45).h_next(i);
      ASSERT_EQ(first.at(0.9).rejected(i) + first.at(0.45).rejected(i), 0) << i << ": guard: the first step is accepted";
      ASSERT_TRUE(h90 > 0.01 / 5 && h90 < 0.01 * 10 && h45 > 0.01 / 5) << i << ": guard: the clamp does not act";
      EXPECT_NEAR(h45 / h90, 0.5, 1e-14) << i;
    }
  }
  for (int i = 0; i < b.size(); ++i) {
    EXPECT_GT(steps[0.45][i], steps[0.9][i]) << i;
    for (double safety : {0.9, 0.45})  // the two controllers: the same rules
      EXPECT_NEAR(double(steps[safety][i]), double(steps[safety][i + 10]), 2 + 0.05 * double(steps[safety][i + 10]))
          << i;
  }
}

TEST(Dopri5, SplittingARunIntoCallsChangesNothing) {
  // The controller's state (h_next, err_prev, ctrl) lives in the batch: a
  // run in calls of 3 steps is bitwise a run in one call, events included.
  using Mo = models::BeadOnRing<double>;
  RunOptions r{.method = Method::dopri5, .dt = 0, .t_end = 3.0};
  r.rtol = 1e-9;
  r.atol = {1e-11};
  RandomBatch<models::BeadOnRing> one(30, 12), many(30, 12);
  integrate(one.batch, Backend::cpu, r);
  while (integrate(many.batch, Backend::cpu, r, 3).active > 0) {
  }
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(one.batch.status(i), many.batch.status(i));
    EXPECT_EQ(one.batch.steps(i), many.batch.steps(i));
    EXPECT_EQ(one.batch.rejected(i), many.batch.rejected(i));
    EXPECT_EQ(one.batch.rhs_evals(i), many.batch.rhs_evals(i)) << "FSAL's evaluations are counted once";
    EXPECT_EQ(one.batch.t(i), many.batch.t(i));
    for (int j = 0; j < Mo::n; ++j) EXPECT_EQ(one.batch.q(i, j), many.batch.q(i, j));
  }
}

TEST(Dopri5, DenseOutputInterpolatesTheStepToItsOwnOrder) {
  // The dense output of the last step, evaluated inside it, against a
  // tight solution at that time (RK4, dt = 1e-4): errors
  // of the interpolant's order 4 with steps of ~0.05, far below the step's
  // own size of change.
  using Mo = models::BeadOnRing<double>;
  RandomBatch<models::BeadOnRing> b = pendulums(4);
  b.batch.allocate_dense();
  RunOptions r{.method = Method::dopri5, .dt = 0, .t_end = 1.0, .events = false};
  r.rtol = 1e-9;
  r.atol = {1e-11};
  integrate(b.batch, Backend::cpu, r, 10);
  for (int i = 0; i < 4; ++i) {
    double rr[10 * Mo::n];
    for (int j = 0; j < 10 * Mo::n; ++j) rr[j] = b.batch.dense(i, j);
    const double t0 = b.batch.dense(i, 10 * Mo::n), h = b.batch.dense(i, 10 * Mo::n + 1);
    ASSERT_GT(h, 0.0);
    EXPECT_EQ(t0 + h, b.batch.t(i));
    for (double theta : {0.0, 0.3, 0.77, 1.0}) {
      double q[Mo::n], qd[Mo::n];
      kernels::dense_state(rr, Mo::n, theta, q, qd);
      RandomBatch<models::BeadOnRing> truth = pendulums(4);
      Batch<Mo> one(1);
      one.set_params(0, truth.batch.params(i));
      const double q0[2] = {truth.batch.q(i, 0), truth.batch.q(i, 1)}, v0[2] = {truth.batch.qd(i, 0), truth.batch.qd(i, 1)};
      one.set_state(0, q0, v0);
      run_until(one, Backend::cpu, 1e-4, t0 + theta * h);
      for (int j = 0; j < Mo::n; ++j) {
        EXPECT_NEAR(q[j], one.q(0, j), 1e-8) << "theta " << theta;
        EXPECT_NEAR(qd[j], one.qd(0, j), 1e-8) << "theta " << theta;
      }
    }
  }
}

}  // namespace
}  // namespace ukb::test
