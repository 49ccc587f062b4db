// The Udwadia–Kalaba evaluation and the RK4 step by a team of threads that
// shares one system's workspace (kernels/ukb/kernels/uk.hpp, rk4.hpp,
// team.hpp), emulated on the CPU with one host thread per member
// (team_support.hpp): free teams of 1, 2, 3 and 8, and teams of 3 and 8
// taking turns, on workspaces that start as NaN. Every tested model in double and float (the sanitizer build tests
// fewer), at random consistent states, with Baumgarte stabilisation, with
// parameters that fail the factorisation and with a non-finite input, and
// a 48-link float chain whose Gram route is widened to double: the
// members' statuses and the outputs are the bits of one thread's.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine_support.hpp"
#include "support.hpp"
#include "team_support.hpp"
#include "ukb/kernels/rk4.hpp"
#include "ukb/kernels/uk.hpp"

namespace ukb::test {
namespace {

template <class T, int K>
bool same_bits(const T (&a)[K], const T (&b)[K]) {
  return std::memcmp(a, b, sizeof a) == 0;
}

// A sample's parameters in T (all zero with `zero`) and its state.
template <template <class> class Model, class T>
typename Model<T>::Params params_in(const Sample<Model<double>>& s, bool zero = false) {
  typename Model<T>::Params p{};
  std::vector<double> values;
  Model<double>::visit_params(s.p, [&](const char*, const double& v, const char*) { values.push_back(v); });
  std::size_t next = 0;
  Model<T>::visit_params(p, [&](const char*, T& f, const char*) { f = static_cast<T>(zero ? 0.0 : values[next++]); });
  return p;
}

template <class S, class T, int n>
void state_in(const S& s, T (&q)[n], T (&qd)[n]) {
  for (int j = 0; j < n; ++j) q[j] = static_cast<T>(s.q(j)), qd[j] = static_cast<T>(s.qd(j));
}

// The ways a team is run: free threads of sizes 1, 2, 3 and 8, and teams
// of 3 taking turns in rank order and in reverse and of 8 in reverse (a missing
// sync then shows every time; each turn is a wake-up of a thread, slow on
// two busy cores, so the turns run on each model's first sample only).
struct Way {
  int size;
  int turns;  // 0: free threads; 1: in rank order; -1: in reverse
  std::string name() const {
    return "team of " + std::to_string(size) + (turns == 0 ? "" : turns > 0 ? " in turns" : " in reverse turns");
  }
};
const Way ways[] = {{1, 0}, {2, 0}, {3, 0}, {8, 0}, {3, 1}, {3, -1}, {8, -1}};

template <class F>
void run_way(const Way& w, const F& f) {
  if (w.turns == 0) {
    run_team(w.size, f);
  } else {
    run_team_in_turns(w.size, w.turns < 0, f);
  }
}

// NaN in every value of a workspace and of an Accel: a member that reads
// an entry before it is written reads NaN.
template <class T, std::size_t K>
void poison(T (&x)[K]) {
  for (T& v : x) v = std::numeric_limits<T>::quiet_NaN();
}
template <class Mo>
void poison(kernels::UkWorkspace<Mo>& ws) {
  poison(ws.Lm.L), poison(ws.Lm.rd), poison(ws.pinv.W), poison(ws.pinv.Vrot), poison(ws.pinv.inv_s2);
  poison(ws.a), poison(ws.A), poison(ws.b), poison(ws.r), poison(ws.z), poison(ws.u), poison(ws.w), poison(ws.y), poison(ws.scratch);
  if constexpr (decltype(ws.pinv)::mixed)
    poison(ws.pinv.wide.Bt), poison(ws.pinv.wide.L), poison(ws.pinv.wide.rdiag), poison(ws.pinv.wide.scratch);
}
template <class Mo>
void poison(kernels::Accel<Mo>& k) {
  poison(k.qdd), poison(k.Qc_ideal), poison(k.Qc_nonideal), poison(k.lambda);
}

// How many evaluations took each route of the pseudo-inverse (the guards:
// both routes and the float Gram route in double are exercised).
struct Routes {
  int gram = 0, jacobi = 0, wide = 0, failed = 0;
};

template <template <class> class Model, class T>
void check_team_evaluation(const Sample<Model<double>>& s, int variant, Routes& routes, bool turns = true) {
  using Mo = Model<T>;
  constexpr int n = Mo::n;
  const typename Mo::Params p = params_in<Model, T>(s, variant == 2);
  T q[n], qd[n];
  state_in(s, q, qd);
  if (variant == 3) qd[n - 1] = std::numeric_limits<T>::quiet_NaN();
  Baumgarte<T> bg{};
  if constexpr (HasConstraintRows<Mo>)
    if (variant == 1) bg = {true, T(2), T(3), T(1.5)};
  const T t = static_cast<T>(s.t), rtol = policy::default_rank_rtol<T>();
  kernels::Accel<Mo> one{};
  const Status want = kernels::uk_accel<Mo>(q, qd, t, p, rtol, one, bg);
  for (const Way& way : ways) {
    if (way.turns != 0 && !turns) continue;
    const int size = way.size;
    SCOPED_TRACE(std::string(Mo::name) + (sizeof(T) == 4 ? " float" : " double") + ", variant " +
                 std::to_string(variant) + ", " + way.name());
    kernels::UkWorkspace<Mo> ws;
    kernels::Accel<Mo> out{};
    poison(ws);
    poison(out);
    std::vector<Status> got(static_cast<std::size_t>(size), Status::failed_rank);
    run_way(way, [&](const auto& team) {
      got[static_cast<std::size_t>(team.rank())] = kernels::uk_accel<Mo, T>(team, ws.arrays(), q, qd, t, p, rtol, out, bg);
    });
    for (int r = 0; r < size; ++r) ASSERT_EQ(got[static_cast<std::size_t>(r)], want) << "member " << r;
    if (want != Status::ok) {
      routes.failed += size == 1 && way.turns == 0;
      continue;
    }
    EXPECT_TRUE(same_bits(out.qdd, one.qdd));
    EXPECT_TRUE(same_bits(out.Qc_ideal, one.Qc_ideal));
    EXPECT_TRUE(same_bits(out.Qc_nonideal, one.Qc_nonideal));
    EXPECT_TRUE(same_bits(out.lambda, one.lambda));
    EXPECT_EQ(out.rank, one.rank);
    EXPECT_EQ(out.inconsistent, one.inconsistent);
    EXPECT_EQ(out.marginal, one.marginal);
    if (size == 1 && way.turns == 0) {
      routes.gram += ws.pinv.gram && !ws.pinv.gram_wide;
      routes.wide += ws.pinv.gram_wide;
      routes.jacobi += !ws.pinv.gram;
    }
  }
}

template <class T>
Routes check_every_model(int samples) {
  Routes routes;
  for_each_model_template([&]<template <class> class Model>() {
    Rng rng(4242);
    for (int k = 0; k < samples; ++k) {
      const auto s = Gen<Model<double>>::consistent(rng);
      for (int variant = 0; variant < 4; ++variant) check_team_evaluation<Model, T>(s, variant, routes, k == 0);
    }
  });
  return routes;
}

TEST(Team, EvaluationIsOneThreadsBitForBitInDouble) {
  const Routes r = check_every_model<double>(sanitized ? 2 : 3);
  EXPECT_GT(r.gram, 0) << "guard: some evaluations take the Gram route";
  EXPECT_GT(r.jacobi, 0) << "guard: some take the Jacobi route (the redundant pendulum)";
  EXPECT_GT(r.failed, 0) << "guard: some fail (zero parameters, a NaN velocity)";
}

TEST(Team, EvaluationIsOneThreadsBitForBitInFloat) {
  const Routes r = check_every_model<float>(sanitized ? 2 : 3);
  EXPECT_GT(r.gram + r.wide, 0) << "guard: some evaluations take a Gram route";
  EXPECT_GT(r.jacobi, 0) << "guard: some take the Jacobi route";
  EXPECT_GT(r.failed, 0) << "guard: some fail";
}

// The states a step's stages are observed at, as one member saw them.
template <class T>
struct SeenStages {
  std::vector<T>* seen;
  void operator()(const T* x, const T* v, T ts) const {
    seen->push_back(x[0]);
    seen->push_back(v[0]);
    seen->push_back(ts);
  }
};

// Steps of RK4 from a random consistent state (Baumgarte on where the model
// states its constraint rows), by one thread and by teams: the states, the
// statuses, what the stages were observed at and the rank trackers agree
// bit for bit after every step.
template <template <class> class Model, class T>
void check_team_steps(const Sample<Model<double>>& s, bool baumgarte, bool turns) {
  using Mo = Model<T>;
  constexpr int n = Mo::n;
  const typename Mo::Params p = params_in<Model, T>(s);
  kernels::StageSettings<T> ss{policy::default_rank_rtol<T>(), {}};
  if constexpr (HasConstraintRows<Mo>)
    if (baumgarte) ss.bg = {true, T(2), T(3), T(1.5)};
  constexpr int steps = 2;
  const T h = T(1e-3);
  // One thread.
  T q1[n], qd1[n], t1 = static_cast<T>(s.t);
  state_in(s, q1, qd1);
  std::vector<Status> st1;
  std::vector<int> ranks1;
  std::vector<T> seen1;
  for (int k = 0; k < steps; ++k) {
    int lo = Mo::m, hi = 0;
    bool bad = false, marginal = false;
    kernels::StageSettings<T> sk = ss;
    sk.min_rank = &lo, sk.max_rank = &hi, sk.inconsistent = &bad, sk.marginal = &marginal;
    st1.push_back(kernels::rk4_step<Mo>(q1, qd1, t1, h, p, sk, SeenStages<T>{&seen1}));
    ranks1.insert(ranks1.end(), {lo, hi, int(bad), int(marginal)});
  }
  for (const Way& way : ways) {
    if (way.turns != 0 && !turns) continue;
    const int size = way.size;
    SCOPED_TRACE(std::string(Mo::name) + (sizeof(T) == 4 ? " float" : " double") +
                 (baumgarte ? ", Baumgarte" : "") + ", " + way.name());
    kernels::Rk4Workspace<Mo> ws;
    poison(ws.uk), poison(ws.k), poison(ws.qs), poison(ws.vs), poison(ws.dq), poison(ws.dv);
    T q[n], qd[n];  // shared by the team
    state_in(s, q, qd);
    std::vector<std::vector<Status>> st(static_cast<std::size_t>(size));
    std::vector<std::vector<int>> ranks(static_cast<std::size_t>(size));
    std::vector<std::vector<T>> seen(static_cast<std::size_t>(size));
    std::vector<T> times(static_cast<std::size_t>(size));
    run_way(way, [&](const auto& team) {
      const auto r = static_cast<std::size_t>(team.rank());
      T t = static_cast<T>(s.t);
      for (int k = 0; k < steps; ++k) {
        int lo = Mo::m, hi = 0;
        bool bad = false, marginal = false;
        kernels::StageSettings<T> sk = ss;
        sk.min_rank = &lo, sk.max_rank = &hi, sk.inconsistent = &bad, sk.marginal = &marginal;
        st[r].push_back(kernels::rk4_step<Mo>(team, ws, q, qd, t, h, p, sk, SeenStages<T>{&seen[r]}));
        ranks[r].insert(ranks[r].end(), {lo, hi, int(bad), int(marginal)});
      }
      times[r] = t;
    });
    EXPECT_TRUE(same_bits(q, q1));
    EXPECT_TRUE(same_bits(qd, qd1));
    for (int r = 0; r < size; ++r) {
      const auto m = static_cast<std::size_t>(r);
      EXPECT_EQ(st[m], st1) << "member " << r;
      EXPECT_EQ(ranks[m], ranks1) << "member " << r;
      EXPECT_EQ(std::memcmp(&times[m], &t1, sizeof t1), 0) << "member " << r;
      ASSERT_EQ(seen[m].size(), seen1.size()) << "member " << r;
      EXPECT_EQ(std::memcmp(seen[m].data(), seen1.data(), seen1.size() * sizeof(T)), 0) << "member " << r;
    }
  }
}

template <class T>
void check_every_model_steps(int samples) {
  for_each_model_template([&]<template <class> class Model>() {
    Rng rng(777);
    for (int k = 0; k < samples; ++k) {
      const auto s = Gen<Model<double>>::consistent(rng);
      check_team_steps<Model, T>(s, true, k == 0);
    }
  });
}

// The float Gram route that the float certificate cannot vouch for is
// certified and solved in double on the CPU (linalg.hpp, mixed precision):
// a 48-link chain (W6) held nearly straight, at rest, whose Gram matrix is
// close to a path graph's Laplacian (condition about 10^3, beyond float's
// 200), takes it.
template <class T>
using Chain48 = models::PlanarChain<T, 48>;

TEST(Team, FloatEvaluationsWidenedToDoubleAreOneThreadsBitForBit) {
  Routes routes;
  Rng rng(4848);
  for (int k = 0; k < (sanitized ? 1 : 3); ++k) {
    Sample<Chain48<double>> s = Gen<Chain48<double>>::consistent(rng);
    double x = 0, y = 0;
    for (int j = 0; j < 48; ++j) {
      const double phi = 0.3 + 0.05 * rng.uniform(-1, 1);
      x += s.p.l * std::sin(phi);
      y -= s.p.l * std::cos(phi);
      s.q.segment(2 * j, 2) << x, y;
      s.qd.segment(2 * j, 2) << 0, 0;
    }
    check_team_evaluation<Chain48, float>(s, 0, routes);
  }
  EXPECT_GT(routes.wide, 0) << "guard: the Gram route in double is taken";
}

TEST(Team, Rk4StepsAreOneThreadsBitForBit) {
  check_every_model_steps<double>(1);
  check_every_model_steps<float>(1);
}

}  // namespace
}  // namespace ukb::test
