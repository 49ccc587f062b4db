// The CPU backend's SIMD lanes (kernels/ukb/cpu/simd.hpp) against the same
// kernels one system at a time: every lane must give its system's scalar
// result bit for bit (lanes.hpp says why it can), whatever its neighbours
// do: other routes of the pseudo-inverse, failures, events, stops; with the
// model called on packs (PackInputs) or lane by lane. The
// scalar path itself is checked against the reference backend in
// test_engine.cpp (which, with EngineOptions::simd on by default, checks the
// lanes as well).
#include <cstring>
#include <limits>
#include <set>

#include "engine_support.hpp"
#include "ukb/cpu/simd.hpp"

namespace ukb::test {
namespace {

template <class T>
bool same(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Every per-system output of an integration, bitwise.
template <class Mo>
int mismatches(const Batch<Mo>& a, const Batch<Mo>& b) {
  int bad = 0;
  for (int i = 0; i < a.size(); ++i) {
    bool ok = a.status(i) == b.status(i) && same(a.t(i), b.t(i)) && a.steps(i) == b.steps(i) &&
              a.events(i) == b.events(i) && a.rank_drops(i) == b.rank_drops(i) &&
              a.inconsistent(i) == b.inconsistent(i) && a.proj_fails(i) == b.proj_fails(i) &&
              same(a.res_pos(i), b.res_pos(i)) && same(a.res_vel(i), b.res_vel(i)) &&
              same(a.t_stop(i), b.t_stop(i));
    for (int j = 0; j < Mo::n; ++j) ok = ok && same(a.q(i, j), b.q(i, j)) && same(a.qd(i, j), b.qd(i, j));
    // The monitors of adaptive steps, where the run had them.
    if (a.has_adaptive_monitors() && b.has_adaptive_monitors())
      ok = ok && a.rejected(i) == b.rejected(i) && a.rhs_evals(i) == b.rhs_evals(i) &&
           same(a.h_next(i), b.h_next(i)) && same(a.err_prev(i), b.err_prev(i)) && a.ctrl(i) == b.ctrl(i);
    if (!ok) ADD_FAILURE() << Mo::name << ": system " << i << " differs: status " << int(a.status(i)) << "/" << int(b.status(i)) << " t " << a.t(i) << "/" << b.t(i) << " steps " << a.steps(i) << "/" << b.steps(i) << (a.has_adaptive_monitors() ? " rej " + std::to_string(a.rejected(i)) + "/" + std::to_string(b.rejected(i)) + " rhs " + std::to_string(a.rhs_evals(i)) + "/" + std::to_string(b.rhs_evals(i)) + " ctrl " + std::to_string(a.ctrl(i)) + "/" + std::to_string(b.ctrl(i)) : std::string()) << " q0 " << a.q(i, 0) << "/" << b.q(i, 0) << " res " << a.res_pos(i) << "/" << b.res_pos(i) << " drops " << a.rank_drops(i) << "/" << b.rank_drops(i) << " inc " << a.inconsistent(i) << "/" << b.inconsistent(i) << " resv " << a.res_vel(i) << "/" << b.res_vel(i) << " tstop " << a.t_stop(i) << "/" << b.t_stop(i) << " ev " << a.events(i) << "/" << b.events(i) << " pf " << a.proj_fails(i) << "/" << b.proj_fails(i) << " h " << (a.has_adaptive_monitors() ? a.h_next(i) - b.h_next(i) : 0.0) << " e " << (a.has_adaptive_monitors() ? a.err_prev(i) - b.err_prev(i) : 0.0) << " qd " << a.qd(i, 0) - b.qd(i, 0) << " q1 " << a.q(i, 1) - b.q(i, 1);
    bad += !ok;
  }
  return bad;
}

// Systems 5 and 17 get a NaN velocity (failed_nonfinite at the first step);
// system 9 moves 50x faster, so that a residual limit stops it
// (failed_residual) after some steps where its model drifts enough.
template <class B>
void spoil(B& b) {
  using T = typename B::T;
  constexpr int n = B::n;
  for (int i : {5, 17, 9}) {
    T q[n], qd[n];
    for (int j = 0; j < n; ++j) q[j] = b.q(i, j), qd[j] = b.qd(i, j);
    if (i == 9) {
      for (int j = 0; j < n; ++j) qd[j] *= T(50);
    } else {
      qd[0] = std::numeric_limits<T>::quiet_NaN();
    }
    b.set_state(i, q, qd, b.t(i));
  }
}

// Returns the number of systems stopped by the residual limit.
template <template <class> class Model, class T>
int lanes_match_scalar(int N, const RunOptions& run) {
  int residual_stops = 0;
  using Mo = Model<T>;
  for (Stabilization st : {Stabilization::none, Stabilization::baumgarte, Stabilization::projection}) {
    if (st != Stabilization::none && !HasConstraintRows<Mo>) continue;
    SCOPED_TRACE(std::string(Mo::name) + (sizeof(T) == 4 ? " float " : " double ") +
                 std::string(to_string(st)));
    RunOptions r = run;
    r.stabilization = st;
    RandomBatch<Model, T> lanes(N, 40 + N), one(N, 40 + N);
    spoil(lanes.batch);
    spoil(one.batch);
    // Two calls, so that the lanes also resume from a stored state.
    for (int call = 0; call < 2; ++call) {
      integrate(lanes.batch, Backend::cpu, r, 20, {.threads = 2, .chunk = 24, .simd = true});
      integrate(one.batch, Backend::cpu, r, 20, {.threads = 1, .simd = false});
    }
    EXPECT_EQ(mismatches(lanes.batch, one.batch), 0);
    // (failed_nonfinite, or failed_residual where the NaN shows in the
    // residual first)
    EXPECT_NE(lanes.batch.status(5), Status::ok);
    EXPECT_NE(lanes.batch.status(17), Status::ok);
    for (int i = 0; i < N; ++i) residual_stops += lanes.batch.status(i) == Status::failed_residual;
    long moved = 0;
    for (int i = 0; i < N; ++i) moved += lanes.batch.steps(i) > 0;
    EXPECT_GT(moved, N / 2) << "guard: the systems were integrated";
  }
  return residual_stops;
}

}  // namespace

// The ring under another name: a model derived from another inherits a
// `rebind` that names its base, so the cpu backend calls this one lane by
// lane (simd.hpp, PackInputs). (Outside the anonymous namespace: the test
// helpers' types hold it.)
template <class T>
struct LaneByLaneRing : models::BeadOnRing<T> {
  static constexpr const char* name = "lane_by_lane_ring";
};

template <>
struct Gen<LaneByLaneRing<double>> {
  static Sample<LaneByLaneRing<double>> consistent(Rng& r) {
    const Sample<models::BeadOnRing<double>> s = Gen<models::BeadOnRing<double>>::consistent(r);
    return {s.p, s.q, s.qd, s.t};
  }
};

namespace {

// Every built-in model runs with its functions on packs (rebind, in double;
// in float with rebind_float); the derived ring lane by lane: both paths
// are covered in both types.
static_assert([] {
  bool all = true;
  models::Builtin::for_each<double>([&]<class Mo>() { all = all && kernels::PackInputs<Mo, cpu::Pack<double, 8>>; });
  models::Builtin::for_each<float>([&]<class Mo>() { all = all && kernels::PackInputs<Mo, cpu::Pack<float, 16>>; });
  return all;
}());
static_assert(!kernels::PackInputs<LaneByLaneRing<double>, cpu::Pack<double, 8>>);
static_assert(!kernels::PackInputs<LaneByLaneRing<float>, cpu::Pack<float, 16>>);

TEST(Simd, LanesIntegrateEveryModelBitwiseAsOneSystemAtATime) {
  // 83 systems (43 under the sanitizers): full packs and a tail at every
  // lane width (2 to 16).
  const RunOptions run{.dt = 1e-3, .residual_limit = 1e-3};
  const int N = sanitized ? 43 : 83;
  int residual_stops = 0;
  for_each_model_template([&]<template <class> class Model>() {
    residual_stops += lanes_match_scalar<Model, double>(N, run);
    residual_stops += lanes_match_scalar<Model, float>(N, run);
  });
  residual_stops += lanes_match_scalar<LaneByLaneRing, double>(N, run);
  residual_stops += lanes_match_scalar<LaneByLaneRing, float>(N, run);
  EXPECT_GT(residual_stops, 0) << "guard: the residual limit stopped systems in their packs";
}

TEST(Simd, AdaptiveStepsInLanesAreBitwiseOneSystemAtATime) {
  // Dormand–Prince: each lane its own step size, accepted or rejected on
  // its own, with every model, stabilisation and failure of the RK4 test.
  RunOptions run{.method = Method::dopri5, .dt = 0, .residual_limit = 1e-3};
  run.rtol = 1e-7;
  run.atol = {1e-9};
  const int N = sanitized ? 43 : 83;
  int residual_stops = 0;
  for_each_model_template([&]<template <class> class Model>() {
    residual_stops += lanes_match_scalar<Model, double>(N, run);
    residual_stops += lanes_match_scalar<Model, float>(N, run);
  });
  // (Under the sanitizers, with fewer models, none of them reaches the
  // limit with adaptive steps; the RK4 test above stops systems there.)
  if (!sanitized) {
    EXPECT_GT(residual_stops, 0) << "guard: the residual limit stopped systems in their packs";
  }
}

TEST(Simd, AdaptiveStepsLocateStickSlipEventsInLanesAsOneSystemAtATime) {
  // The rough ring with dopri5 until every bead rests: events located on
  // the dense output and by trial steps, lanes refilled, dense output kept.
  using Mo = models::BeadOnRing<double>;
  RunOptions run{.method = Method::dopri5, .dt = 0, .t_end = 4.0};
  run.rtol = 1e-8;
  run.atol = {1e-10};
  const int N = sanitized ? 101 : 403;
  RandomBatch<models::BeadOnRing> lanes(N, 7), one(N, 7);
  lanes.batch.allocate_dense();
  one.batch.allocate_dense();
  integrate(lanes.batch, Backend::cpu, run, std::numeric_limits<long>::max(), {.simd = true});
  integrate(one.batch, Backend::cpu, run, std::numeric_limits<long>::max(), {.simd = false});
  EXPECT_EQ(mismatches<Mo>(lanes.batch, one.batch), 0);
  int rest = 0, rejected = 0, dense_differ = 0;
  for (int i = 0; i < N; ++i) {
    rest += lanes.batch.status(i) == Status::at_rest;
    rejected += lanes.batch.rejected(i) > 0;
    for (int j = 0; j < 10 * Mo::n + 2; ++j) dense_differ += !same(lanes.batch.dense(i, j), one.batch.dense(i, j));
  }
  EXPECT_EQ(dense_differ, 0);
  EXPECT_GT(rest, N / 10) << "guard: many beads came to rest";
  EXPECT_GT(rejected, N / 10) << "guard: steps were rejected";
}

TEST(Simd, LanesLocateStickSlipEventsAsOneSystemAtATime) {
  // The bead on the rough ring until it rests for good: every lane
  // locates its own events and stops at its own time while its pack goes on.
  using Mo = models::BeadOnRing<double>;
  const RunOptions run{.dt = 1e-3, .t_end = 4.0};
  RandomBatch<models::BeadOnRing> lanes(403, 7), one(403, 7);
  integrate(lanes.batch, Backend::cpu, run, std::numeric_limits<long>::max(), {.simd = true});
  integrate(one.batch, Backend::cpu, run, std::numeric_limits<long>::max(), {.simd = false});
  EXPECT_EQ(mismatches<Mo>(lanes.batch, one.batch), 0);
  int rest = 0, events = 0;
  for (int i = 0; i < 403; ++i) {
    rest += lanes.batch.status(i) == Status::at_rest;
    events += lanes.batch.events(i) > 0;
  }
  EXPECT_GT(rest, 40) << "guard: many beads came to rest";
  EXPECT_LT(rest, 403) << "guard: not all of them";
  EXPECT_GT(events, rest) << "guard: beads that stuck and slid on";
  std::set<long> stops;
  for (int i = 0; i < 403; ++i)
    if (lanes.batch.status(i) == Status::at_rest) stops.insert(lanes.batch.steps(i));
  EXPECT_GT(stops.size(), 30u) << "guard: lanes refilled after stops at many different steps";
}

// Beads released at rest consult their handler before the first step,
// after an evaluation at the state that the lanes make together
// (kernels::consult_lanes): some stick at once and their lane takes the
// next system (which may consult again), some slide off, some fail that
// evaluation (mu NaN: the friction force at rest is not finite) before the
// handler is asked; the outcomes and counters as one system at a time.
TEST(Simd, StartConsultationsInLanesAsOneSystemAtATime) {
  using Mo = models::BeadOnRing<double>;
  const int N = sanitized ? 97 : 301;
  for (const Method method : {Method::rk4, Method::dopri5}) {
    SCOPED_TRACE(to_string(method));
    RandomBatch<models::BeadOnRing> lanes(N, 23), one(N, 23);
    for (int i = 0; i < N; ++i) {
      auto s = lanes.samples[std::size_t(i)];
      if (i % 7 != 6) s.qd[0] = s.qd[1] = 0.0;  // at rest, but every 7th
      s.p.mu = 4.0 * i / N;                     // from 0 (slides off) to 4 (sticks at most angles)
      if (i % 23 == 4) s.p.mu = std::numeric_limits<double>::quiet_NaN();
      lanes.set(i, s), one.set(i, s);
    }
    RunOptions run{.method = method, .dt = method == Method::rk4 ? 1e-3 : 0.0, .t_end = 0.2};
    if (method == Method::dopri5) {  // (and the counters of adaptive runs compared: rhs_evals)
      lanes.batch.allocate_adaptive();
      one.batch.allocate_adaptive();
    }
    integrate(lanes.batch, Backend::cpu, run, std::numeric_limits<long>::max(), {.chunk = 16, .simd = true});
    integrate(one.batch, Backend::cpu, run, std::numeric_limits<long>::max(), {.simd = false});
    EXPECT_EQ(mismatches<Mo>(lanes.batch, one.batch), 0);
    int stuck = 0, slid = 0, failed = 0;
    for (int i = 0; i < N; ++i) {
      const Status st = lanes.batch.status(i);
      const bool at_rest = i % 7 != 6;
      stuck += st == Status::at_rest && lanes.batch.steps(i) == 0 && lanes.batch.events(i) == 1;
      slid += st == Status::ok && lanes.batch.steps(i) > 0 && lanes.batch.events(i) >= 1;
      failed += at_rest && st == Status::failed_nonfinite && lanes.batch.steps(i) == 0 && lanes.batch.events(i) == 0;
    }
    EXPECT_GT(stuck, N / 10) << "guard: beads that stuck at their start";
    EXPECT_GT(slid, N / 10) << "guard: beads that consulted and slid off";
    EXPECT_GE(failed, N / 30) << "guard: beads whose start could not be evaluated";
  }
}

// The puck on the rough incline until it stops: friction against a 2-D
// sliding velocity, its stop event (ukb::friction::stop_event, branch-free
// through pick) evaluated on packs, and its handler (finish_stop, which
// moves the time) per lane; with RK4 and Dormand–Prince, in double and float.
template <class T>
void puck_lanes_stop_as_one_system_at_a_time(Method method) {
  using Mo = models::PuckIncline<T>;
  const int N = sanitized ? 61 : 203;
  RandomBatch<models::PuckIncline, T> lanes(N, 11), one(N, 11);
  for (int i = 0; i < N; ++i) {
    auto s = lanes.samples[std::size_t(i)];
    // k = mu / tan(alpha) from 0.5 (slides on) to 3 (stops within the run).
    s.p.mu = std::tan(s.p.alpha) * (0.5 + 2.5 * i / N);
    s.p.lookahead = 1e-3;
    lanes.set(i, s), one.set(i, s);
  }
  // (A step budget far above the runs' needs, 2000 RK4 steps or about 200
  // Dormand–Prince ones: a stop event that never fires ends the test in
  // seconds, not in an adaptive crawl towards the stops.)
  RunOptions run{.method = method, .dt = method == Method::rk4 ? 1e-3 : 0.0, .t_end = 2.0, .max_steps = 20000};
  if (method == Method::dopri5) {
    run.rtol = 1e-8;
    run.atol = {1e-10};
  }
  integrate(lanes.batch, Backend::cpu, run, std::numeric_limits<long>::max(), {.simd = true});
  integrate(one.batch, Backend::cpu, run, std::numeric_limits<long>::max(), {.simd = false});
  EXPECT_EQ(mismatches<Mo>(lanes.batch, one.batch), 0);
  int rest = 0;
  std::set<long> stops;
  for (int i = 0; i < N; ++i)
    if (lanes.batch.status(i) == Status::at_rest) ++rest, stops.insert(lanes.batch.steps(i));
  EXPECT_GT(rest, N / 3) << "guard: many pucks stopped";
  EXPECT_LT(rest, N) << "guard: not all of them";
  EXPECT_GT(stops.size(), std::size_t(rest / 4)) << "guard: lanes stopped at many different steps";
}

TEST(Simd, SurfaceFrictionStopsInLanesAsOneSystemAtATime) {
  for (Method method : {Method::rk4, Method::dopri5}) {
    SCOPED_TRACE(method == Method::rk4 ? "rk4" : "dopri5");
    puck_lanes_stop_as_one_system_at_a_time<double>(method);
    puck_lanes_stop_as_one_system_at_a_time<float>(method);
  }
}

template <class T>
void pinv_lanes_take_their_own_route() {
  // 8 doubles or 16 floats whatever the backend's lane width: the lane
  // patterns below need that many lanes.
  constexpr int M = 6, N = 12, W = 64 / int(sizeof(T));
  using V = cpu::Pack<T, W>;
  const T rtol = policy::default_rank_rtol<T>();
  Rng rng(5);
  T B[W][M * N], y[W][M];
  for (int l = 0; l < W; ++l) {
    MatrixXd b = rng.matrix(M, N);
    if (l % 4 == 2) b.leftCols(M) = MatrixXd::Identity(M, M) + 0.05 * b.leftCols(M);  // near-orthogonal rows
    if (l % 4 == 0) b.row(0) *= 0.05;  // cond(G) some thousands
    if (l == 1 || l == 4) b.row(2) = 0.5 * b.row(0) - 2 * b.row(5);
    if (l == 6) b.row(1) = b.row(3), b.row(4) = -b.row(0) + b.row(2);
    if (l == 3) b.setZero();
    for (int i = 0; i < M; ++i)
      for (int k = 0; k < N; ++k) B[l][i * N + k] = T(b(i, k));
    for (int i = 0; i < M; ++i) y[l][i] = T(rng.uniform(-1, 1));
  }
  for (bool allow_gram : {true, false}) {
    SCOPED_TRACE(allow_gram ? "Gram allowed" : "Jacobi only");
    V Bv[M * N], yv[M];
    for (int k = 0; k < M * N; ++k) Bv[k] = V([&](int l) { return B[l][k]; });
    for (int i = 0; i < M; ++i) yv[i] = V([&](int l) { return y[l][i]; });
    kernels::PseudoInverse<M, N, V> pv;
    pv.factor(Bv, V(rtol), allow_gram);
    V xv[N], gv[M];
    pv.apply(yv, xv);
    pv.apply_gram(yv, gv);
    int gram_lanes = 0, wide_lanes = 0;
    for (int l = 0; l < W; ++l) {
      kernels::PseudoInverse<M, N, T> ps;
      ps.factor(B[l], rtol, allow_gram);
      T xs[N], gs[M];
      ps.apply(y[l], xs);
      ps.apply_gram(y[l], gs);
      EXPECT_EQ(pv.rank[l], ps.rank) << "lane " << l;
      EXPECT_EQ(bool(pv.gram[l]), ps.gram) << "lane " << l;
      EXPECT_EQ(bool(pv.gram_wide[l]), ps.gram_wide) << "lane " << l;
      for (int k = 0; k < N; ++k) EXPECT_TRUE(same(T(xv[k][l]), xs[k])) << "lane " << l << " x " << k;
      for (int i = 0; i < M; ++i) EXPECT_TRUE(same(T(gv[i][l]), gs[i])) << "lane " << l << " G " << i;
      gram_lanes += ps.gram && !ps.gram_wide;
      wide_lanes += ps.gram_wide;
    }
    EXPECT_EQ(pv.rank[1], 5);
    EXPECT_EQ(pv.rank[6], 4);
    EXPECT_EQ(pv.rank[3], 0);
    if (allow_gram) {
      EXPECT_GE(gram_lanes, 2) << "guard: the Gram route in T in the pack";
      if constexpr (sizeof(T) == 4) {
        EXPECT_GE(wide_lanes, 2) << "guard: float lanes on the double Gram route too";
      }
      EXPECT_FALSE(bool(pv.gram[1]) || bool(pv.gram[3]) || bool(pv.gram[4]) || bool(pv.gram[6]));
    } else {
      EXPECT_EQ(gram_lanes + wide_lanes, 0);
    }
  }
}

// A pack of wide matrices B (6 x 12): lanes 1 and 4 with a dependent row
// (rank 5), lane 6 with two (rank 4), lane 3 zero: those take the Jacobi
// route; lanes 2, 6, 10 and 14 near-orthogonal rows (the Gram route even in
// float's own arithmetic, but lane 6 has dependent rows), lanes 0, 8 and
// 12 a short row (cond(G) some thousands: in float the Gram route in
// double), the others random. Each lane's factorisation and applications must be the
// scalar ones, bitwise.
TEST(Simd, PseudoInverseLanesEachTakeTheirOwnRoute) {
  pinv_lanes_take_their_own_route<double>();
  pinv_lanes_take_their_own_route<float>();
}

// One evaluation of a pack of rings where lanes fail in every way an
// evaluation can: each lane's status and outputs are the scalar ones.
TEST(Simd, FailingLanesGetTheirOwnStatusAndLeaveTheOthersAlone) {
  using Mo = models::BeadOnRing<double>;
  constexpr int W = 8, n = Mo::n, m = Mo::m;  // lanes 2, 5 and 7 fail, whatever the backend's lane width
  using V = cpu::Pack<double, W>;
  RandomBatch<models::BeadOnRing> src(W, 3);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  kernels::ModelLanes<Mo, V>::Params P;
  double q[W][n], qd[W][n];
  for (int l = 0; l < W; ++l)
    for (int j = 0; j < n; ++j) q[l][j] = src.batch.q(l, j), qd[l][j] = src.batch.qd(l, j);
  q[5][1] = nan;  // failed_nonfinite (inputs), which comes first:
  for (int l = 0; l < W; ++l) {
    Mo::Params x = src.batch.params(l);
    if (l == 2 || l == 5) x.m = -1;  // failed_mass_matrix (lane 2; not lane 5, see above)
    if (l == 7) x.mu = nan;          // failed_nonfinite (the non-ideal force)
    P.set(l, x);
  }
  V qv[n], qdv[n];
  for (int j = 0; j < n; ++j) {
    qv[j] = V([&](int l) { return q[l][j]; });
    qdv[j] = V([&](int l) { return qd[l][j]; });
  }
  kernels::Accel<Mo, V> av;
  const auto sv = kernels::uk_accel<Mo, V>(qv, qdv, V(0.0), P, 1e-10, av);
  int ok = 0;
  for (int l = 0; l < W; ++l) {
    kernels::Accel<Mo> as;
    const Status ss = kernels::uk_accel<Mo>(q[l], qd[l], 0.0, P.each[std::size_t(l)], 1e-10, as);
    EXPECT_EQ(sv[std::size_t(l)], ss) << "lane " << l;
    if (ss != Status::ok) continue;
    ++ok;
    EXPECT_EQ(av.rank[std::size_t(l)], as.rank);
    EXPECT_EQ(bool(av.inconsistent[l]), as.inconsistent);
    for (int j = 0; j < n; ++j) {
      EXPECT_TRUE(same(double(av.qdd[j][l]), as.qdd[j])) << "lane " << l;
      EXPECT_TRUE(same(double(av.Qc_ideal[j][l]), as.Qc_ideal[j])) << "lane " << l;
      EXPECT_TRUE(same(double(av.Qc_nonideal[j][l]), as.Qc_nonideal[j])) << "lane " << l;
    }
    for (int j = 0; j < m; ++j) EXPECT_TRUE(same(double(av.lambda[j][l]), as.lambda[j])) << "lane " << l;
  }
  EXPECT_EQ(sv[2], Status::failed_mass_matrix);
  EXPECT_EQ(sv[5], Status::failed_nonfinite);
  EXPECT_EQ(sv[7], Status::failed_nonfinite);
  EXPECT_EQ(ok, W - 3);
}

}  // namespace
}  // namespace ukb::test
