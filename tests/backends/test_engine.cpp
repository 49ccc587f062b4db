// The batched engine (tier 5 of docs/design.md section 4): one suite,
// EngineOn, for every backend that integrates (cpu, and cuda where a GPU
// is): against the reference backend for every built-in model, at batch
// sizes that are not multiples of any block size, in double and float;
// trajectories; a system's result independent of N, position, threads,
// chunking and block size; failures that stay in their system. Then what
// belongs to one backend (the cpu's exceptions and argument checks, cuda
// against cpu under stabilisation).
#include <cstdio>

#include "engine_support.hpp"
#include "ukb/backends.hpp"  // the test's own model (TwoRows)
#include "ukb/cuda.hpp"

namespace ukb::test {
namespace {

const int kSizes[] = {1, 37, 1003};

// The suite common to the integrating backends, instantiated for cpu and
// cuda; on cuda it runs where a device is and says why it is skipped
// elsewhere. The cpu build does not contract a * b + c and nvcc does (fused
// multiply-adds), so against the reference cuda is held to rounding
// differences a decade looser (tol).
class EngineOn : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    std::string why;
    if (GetParam() == Backend::cuda && cuda::device_count(&why) == 0) GTEST_SKIP() << "no GPU here: " << why;
  }
  static Backend be() { return GetParam(); }
  static double tol(double cpu) { return GetParam() == Backend::cuda ? 10 * cpu : cpu; }
};

INSTANTIATE_TEST_SUITE_P(Backends, EngineOn, ::testing::Values(Backend::cpu, Backend::cuda),
                         [](const ::testing::TestParamInfo<Backend>& i) { return std::string(to_string(i.param)); });

template <template <class> class Model, class T>
void check_accelerations(Backend backend, double tol) {
  using MoD = Model<double>;
  for (int N : kSizes) {
    SCOPED_TRACE(std::string(MoD::name) + " N=" + std::to_string(N));
    RandomBatch<Model, T> fast(N, 100 + N);
    RandomBatch<Model, double> ref(N, 100 + N);
    ASSERT_EQ(evaluate(fast.batch, backend), 0);
    ASSERT_EQ(evaluate(ref.batch, Backend::reference), 0);
    EXPECT_LT(max_rel_diff(fast.batch, ref.batch, MoD::n, [](const auto& b, int i, int j) { return double(b.qdd(i, j)); }), tol);
    EXPECT_LT(max_rel_diff(fast.batch, ref.batch, MoD::n, [](const auto& b, int i, int j) { return double(b.Qc_ideal(i, j)); }), tol);
    EXPECT_LT(max_rel_diff(fast.batch, ref.batch, MoD::n, [](const auto& b, int i, int j) { return double(b.Qc_nonideal(i, j)); }), tol);
    EXPECT_LT(max_rel_diff(fast.batch, ref.batch, MoD::m, [](const auto& b, int i, int j) { return double(b.lambda(i, j)); }), tol);
    double mag = 0;
    for (int i = 0; i < N; ++i) {
      EXPECT_EQ(fast.batch.rank(i), ref.batch.rank(i)) << "system " << i;
      EXPECT_EQ(fast.batch.status(i), Status::ok);
      for (int j = 0; j < MoD::n; ++j) mag = std::max(mag, std::abs(ref.batch.qdd(i, j)));
    }
    EXPECT_GT(mag, 0.1) << "guard: the accelerations are not trivially zero";
  }
}

TEST_P(EngineOn, AccelerationsMatchReferenceInDouble) {
  for_each_model_template([]<template <class> class Model>() {
    check_accelerations<Model, double>(be(), tol(1e-12));
  });
}

TEST_P(EngineOn, AccelerationsMatchReferenceInFloat) {
  for_each_model_template([]<template <class> class Model>() {
    check_accelerations<Model, float>(be(), 1e-4);
  });
}

TEST_P(EngineOn, StraightChainAgreesWithReference) {
  // Near-singular configurations: the chain hanging straight down, and
  // stretched horizontally, up to 1e-9 perturbations, with random rates.
  using Mo = models::PlanarChain6<double>;
  Rng rng(8);
  for (double angle : {0.0, M_PI / 2}) {
    Batch<Mo> fast(37), ref(37);
    for (int i = 0; i < 37; ++i) {
      double q[Mo::n], qd[Mo::n], x = 0, y = 0, u = 0, v = 0;
      for (int k = 0; k < 6; ++k) {
        const double phi = angle + rng.uniform(-1e-9, 1e-9), w = rng.uniform(-2, 2);
        x += std::sin(phi), y -= std::cos(phi);
        u += w * std::cos(phi), v += w * std::sin(phi);
        q[2 * k] = x, q[2 * k + 1] = y, qd[2 * k] = u, qd[2 * k + 1] = v;
      }
      for (auto* b : {&fast, &ref}) b->set_state(i, q, qd);
    }
    ASSERT_EQ(evaluate(fast, be()), 0);
    ASSERT_EQ(evaluate(ref, Backend::reference), 0);
    for (int i = 0; i < 37; ++i) EXPECT_EQ(fast.rank(i), 6);
    EXPECT_LT(max_rel_diff(fast, ref, Mo::n, [](const auto& b, int i, int j) { return b.qdd(i, j); }), tol(1e-12));
    EXPECT_LT(max_rel_diff(fast, ref, Mo::m, [](const auto& b, int i, int j) { return b.lambda(i, j); }), tol(1e-12));
  }
}

TEST_P(EngineOn, RedundantPendulumHasRankOne) {
  RandomBatch<models::RedundantPendulum> b(37, 7);
  ASSERT_EQ(evaluate(b.batch, be()), 0);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(b.batch.rank(i), 1);
}

// Coulomb friction is discontinuous where the sliding velocity vanishes; a
// system that comes to rest chatters there, and round-off decides each flip
// (stick-slip events handle that, with the Monte Carlo driver). Trajectory
// comparisons therefore use Coulomb systems that keep sliding for the run:
// the bead fast enough to loop, the block sliding down with tan(alpha) > mu.
template <template <class> class Model, class B>
void keep_sliding(B& rb, Rng& rng) {
  for (int i = 0; i < rb.batch.size(); ++i) {
    auto s = rb.samples[i];
    if constexpr (std::is_same_v<Model<double>, models::BeadOnRing<double>>) {
      s.p.mu = rng.uniform(0, 0.2);
      const double th = rng.uniform(-M_PI, M_PI), w = rng.sign() * rng.uniform(8, 10), R = s.p.R;
      s.q = VectorXd{{R * std::sin(th), -R * std::cos(th)}};
      s.qd = VectorXd{{R * w * std::cos(th), R * w * std::sin(th)}};
    } else if constexpr (std::is_same_v<Model<double>, models::InclineBlock<double>>) {
      s.p.mu = rng.uniform(0, 0.8) * std::tan(s.p.alpha);
      const double v = rng.uniform(0.1, 3);
      s.qd = VectorXd{{v * std::cos(s.p.alpha), -v * std::sin(s.p.alpha)}};
    }  // (the puck's random states slide for good already: support.hpp)
    rb.samples[i] = s;
    rb.set(i, s);
  }
}

TEST_P(EngineOn, TrajectoriesMatchReferenceRk4) {
  // 1000 RK4 steps of 1 ms. The reference (slow by design) integrates every
  // stride-th system; the backend under test integrates all of them. For the two
  // large chains the N = 1003 batch runs 20 steps: a system's arithmetic does
  // not depend on N (tested bitwise below), and 1000 steps of 1003 chains of
  // 12 take minutes here.
  for_each_model_template([]<template <class> class Model>() {
    using Mo = Model<double>;
    for (int N : kSizes) {
      const long steps = (N > 100 && Mo::n > 6) ? 20 : sanitized_shorter(1000, 8);
      SCOPED_TRACE(std::string(Mo::name) + " N=" + std::to_string(N));
      RandomBatch<Model> fast(N, 200 + N);
      Rng rng(250 + N);
      keep_sliding<Model>(fast, rng);
      const int stride = N > 100 ? 50 : N > 1 ? 4 : 1;
      Batch<Mo> ref((N + stride - 1) / stride);
      for (int k = 0; k < ref.size(); ++k) {
        ref.set_params(k, fast.batch.params(k * stride));
        ref.set_state(k, fast.samples[k * stride].q.data(), fast.samples[k * stride].qd.data(), 0.0);
      }
      ASSERT_EQ(step(fast.batch, be(), 1e-3, steps).failed, 0);
      ASSERT_EQ(step(ref, Backend::reference, 1e-3, steps).failed, 0);
      double worst = 0, moved = 0;
      for (int k = 0; k < ref.size(); ++k) {
        const int i = k * stride;
        VectorXd a(2 * Mo::n), b(2 * Mo::n);
        for (int j = 0; j < Mo::n; ++j) {
          a(j) = fast.batch.q(i, j), a(Mo::n + j) = fast.batch.qd(i, j);
          b(j) = ref.q(k, j), b(Mo::n + j) = ref.qd(k, j);
          moved = std::max(moved, std::abs(b(j) - fast.samples[i].q(j)));
        }
        worst_of(worst, rel_err(a, b));
        EXPECT_NEAR(fast.batch.t(i), double(steps) * 1e-3, 1e-12);
      }
      EXPECT_LT(worst, tol(1e-10));
      EXPECT_GT(moved, steps * 1e-6) << "guard: the systems moved";
    }
  });
}

TEST_P(EngineOn, RunUntilLandsOnTEnd) {
  RandomBatch<models::PlanarChain3> a(37, 9), b(37, 9);
  // 0.25 / 0.0011 is not an integer: the last step is shortened.
  ASSERT_EQ(run_until(a.batch, be(), 0.0011, 0.25).failed, 0);
  ASSERT_EQ(run_until(b.batch, Backend::reference, 0.0011, 0.25).failed, 0);
  for (int i = 0; i < 37; ++i) EXPECT_DOUBLE_EQ(a.batch.t(i), 0.25);
  EXPECT_LT(max_rel_diff(a.batch, b.batch, 6, [](const auto& x, int i, int j) { return x.q(i, j); }), tol(1e-11));
}

TEST_P(EngineOn, ResultDoesNotDependOnBatchSizePositionThreadsOrChunk) {
  for_each_model_template([]<template <class> class Model>() {
    using Mo = Model<double>;
    SCOPED_TRACE(Mo::name);
    RandomBatch<Model> big(1003, 300);
    // cpu: threads and chunks; cuda: blocks of the launch.
    ASSERT_EQ(step(big.batch, be(), 1e-3, 5, {.threads = 2, .chunk = 7, .cuda_block = 64}).failed, 0);
    // The same systems in reverse order, one thread, another chunk (block) size.
    Batch<Mo> rev(1003);
    RandomBatch<Model> src(1003, 300);
    for (int i = 0; i < 1003; ++i) {
      rev.set_params(i, src.batch.params(1002 - i));
      std::vector<double> q(Mo::n), qd(Mo::n);
      for (int j = 0; j < Mo::n; ++j) q[j] = src.batch.q(1002 - i, j), qd[j] = src.batch.qd(1002 - i, j);
      rev.set_state(i, q.data(), qd.data(), src.batch.t(1002 - i));
    }
    ASSERT_EQ(step(rev, be(), 1e-3, 5, {.threads = 1, .chunk = 1000, .cuda_block = 96}).failed, 0);
    int mismatches = 0;
    for (int i = 0; i < 1003; ++i) mismatches += !same_bits(big.batch, i, rev, 1002 - i, Mo::n);
    EXPECT_EQ(mismatches, 0);
    // System 500 alone.
    Batch<Mo> one(1);
    one.set_params(0, src.batch.params(500));
    std::vector<double> q(Mo::n), qd(Mo::n);
    for (int j = 0; j < Mo::n; ++j) q[j] = src.batch.q(500, j), qd[j] = src.batch.qd(500, j);
    one.set_state(0, q.data(), qd.data(), src.batch.t(500));
    ASSERT_EQ(step(one, be(), 1e-3, 5).failed, 0);
    EXPECT_TRUE(same_bits(big.batch, 500, one, 0, Mo::n));
  });
}

TEST_P(EngineOn, AFailingSystemStopsAloneWithItsStatus) {
  RandomBatch<models::BeadOnRing> b(37, 10), clean(37, 10);
  auto p = b.batch.params(5);
  p.m = -1;  // mass matrix not positive definite
  b.batch.set_params(5, p);
  EXPECT_EQ(step(b.batch, be(), 1e-3, 100).failed, 1);
  ASSERT_EQ(step(clean.batch, be(), 1e-3, 100).failed, 0);
  EXPECT_EQ(b.batch.status(5), Status::failed_mass_matrix);
  EXPECT_EQ(b.batch.t(5), b.samples[5].t);  // frozen at its last good state
  for (int i = 0; i < 37; ++i) {
    if (i != 5) {
      EXPECT_TRUE(same_bits(b.batch, i, clean.batch, i, 2)) << i;
    }
  }
}

// Every kind of failure in one batch run with events, monitors and a
// residual limit: each bad system stops alone with its status, at its last
// good state, with t_stop the time of that state; every other system's
// state and counters are bitwise those of a run without the bad ones; the
// reference backend gives the bad ones the same statuses and stop times.
TEST_P(EngineOn, FailuresOfEveryKindStayInTheirSystemWithTheirTime) {
  constexpr int N = 37;
  const RunOptions run{.dt = 1e-3, .t_end = 0.6, .residual_limit = 1e-6};
  auto bad = [](Batch<models::BeadOnRing<double>>& b) {
    auto p = b.params(3);
    p.m = -1;  // mass matrix not positive definite
    b.set_params(3, p);
    p = b.params(11);
    p.mu = std::numeric_limits<double>::quiet_NaN();  // C is NaN
    b.set_params(11, p);
    const double nan2[2] = {std::numeric_limits<double>::quiet_NaN(), 0.0}, q20[2] = {b.q(20, 0), b.q(20, 1)};
    b.set_state(20, q20, nan2, b.t(20));  // a NaN velocity
    // Fast enough to drift by more than 1e-6 within the run.
    const double q[2] = {b.q(29, 0), b.q(29, 1)}, qd[2] = {60 * b.qd(29, 0), 60 * b.qd(29, 1)};
    b.set_state(29, q, qd, b.t(29));
  };
  struct Stop {
    Status status;
    double t_stop;
    std::int64_t steps;
  };
  std::vector<std::vector<Stop>> stops;  // per backend, systems 3, 11, 20, 29
  for (Backend backend : {be(), Backend::reference}) {
    SCOPED_TRACE(std::string(to_string(backend)));
    RandomBatch<models::BeadOnRing> b(N, 12), clean(N, 12);
    bad(b.batch);
    integrate(b.batch, backend, run, std::numeric_limits<long>::max(), {.threads = 2, .chunk = 5});
    integrate(clean.batch, backend, run);
    EXPECT_EQ(b.batch.status(3), Status::failed_mass_matrix);
    EXPECT_EQ(b.batch.status(11), Status::failed_nonfinite);
    EXPECT_EQ(b.batch.status(20), Status::failed_nonfinite);
    EXPECT_EQ(b.batch.status(29), Status::failed_residual);
    for (int i : {3, 11, 20}) {
      EXPECT_EQ(b.batch.steps(i), 0) << i;
      EXPECT_EQ(b.batch.t_stop(i), b.samples[std::size_t(i)].t) << i;
      EXPECT_EQ(b.batch.t(i), b.samples[std::size_t(i)].t) << i;
    }
    // The drifting system stopped after some steps, at its last state within
    // the limit: the same run with that many steps as its step limit ends
    // bitwise there and within the limit.
    const std::int64_t k = b.batch.steps(29);
    EXPECT_GT(k, 0);
    EXPECT_EQ(b.batch.t_stop(29), b.batch.t(29));
    EXPECT_LE(b.batch.res_pos(29), 1e-6);
    EXPECT_LE(b.batch.res_vel(29), 1e-6);
    RandomBatch<models::BeadOnRing> again(N, 12);
    bad(again.batch);
    RunOptions limited = run;
    limited.max_steps = k;
    integrate(again.batch, backend, limited);
    EXPECT_EQ(again.batch.t(29), b.batch.t(29));
    for (int j = 0; j < 2; ++j) {
      EXPECT_EQ(again.batch.q(29, j), b.batch.q(29, j));
      EXPECT_EQ(again.batch.qd(29, j), b.batch.qd(29, j));
    }
    int others = 0;
    for (int i = 0; i < N; ++i) {
      if (i == 3 || i == 11 || i == 20 || i == 29) continue;
      ++others;
      EXPECT_TRUE(same_bits(b.batch, i, clean.batch, i, 2)) << i;
      EXPECT_EQ(b.batch.steps(i), clean.batch.steps(i)) << i;
      EXPECT_EQ(b.batch.events(i), clean.batch.events(i)) << i;
      EXPECT_EQ(b.batch.res_pos(i), clean.batch.res_pos(i)) << i;
      EXPECT_TRUE(b.batch.t_stop(i) == clean.batch.t_stop(i) ||
                  (std::isnan(b.batch.t_stop(i)) && std::isnan(clean.batch.t_stop(i)))) << i;
    }
    EXPECT_EQ(others, N - 4);
    EXPECT_GT(clean.batch.steps(0), 100) << "guard: the systems moved";
    stops.emplace_back();
    for (int i : {3, 11, 20, 29}) stops.back().push_back({b.batch.status(i), b.batch.t_stop(i), b.batch.steps(i)});
  }
  // The reference loop, written separately, stops them alike.
  ASSERT_EQ(stops.size(), 2u);
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(stops[0][k].status, stops[1][k].status) << k;
    EXPECT_EQ(stops[0][k].steps, stops[1][k].steps) << k;
    EXPECT_NEAR(stops[0][k].t_stop, stops[1][k].t_stop, 1e-12) << k;
  }
}

// A particle on a line with two rows for x'' that agree (b1 == b2) or
// contradict each other (b1 != b2): the least-squares q'' takes their mean.
template <class T>
struct TwoRows {
  using Scalar = T;
  static constexpr const char* name = "two_rows";
  static constexpr const char* summary = "test model: two rows on one coordinate";
  static constexpr int n = 2, m = 2;
  static constexpr std::array<const char*, n> coords{"x", "y"};
  struct Params {
    T b1 = T(1), b2 = T(1);
  };
  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("b1", p.b1, "first row's right-hand side");
    f("b2", p.b2, "second row's right-hand side");
  }
  UKB_HD static void mass(const T*, T, const Params&, T* M) {
    M[0] = T(2), M[1] = T(0), M[2] = T(0), M[3] = T(1);
  }
  UKB_HD static void force(const T*, const T*, T, const Params&, T* Q) { Q[0] = T(0.5), Q[1] = T(-1); }
  UKB_HD static void constraints(const T*, const T*, T, const Params& p, T* A, T* b) {
    A[0] = T(1), A[1] = T(0), A[2] = T(1), A[3] = T(0);
    b[0] = p.b1, b[1] = p.b2;
  }
  UKB_HD static void nonideal(const T*, const T*, T, const Params&, const T*, const T*, T* C) {
    C[0] = C[1] = T(0);
  }
};

// On cpu alone: TwoRows, the test's own model, has no cuda instance (the
// cuda backend is compiled for the built-in models and model files).
TEST(Engine, InconsistentConstraintsAreCountedAlikeOnCpuAndReference) {
  using Mo = TwoRows<double>;
  // b2 - b1 = 0: consistent; 1e-12: round-off, consistent; 1e-3 and 1:
  // contradictory, q'' = (b1 + b2) / 2 in the least-squares sense.
  const double gaps[] = {0.0, 1e-12, 1e-3, 1.0};
  Batch<Mo> cpu(4), ref(4);
  for (Batch<Mo>* b : {&cpu, &ref})
    for (int i = 0; i < 4; ++i) {
      b->set_params(i, {1.0, 1.0 + gaps[i]});
      const double q[2] = {0, 0}, qd[2] = {0, 0};
      b->set_state(i, q, qd);
    }
  const RunOptions run{.dt = 1e-2, .t_end = 0.5};
  integrate(cpu, Backend::cpu, run);
  integrate(ref, Backend::reference, run);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(cpu.steps(i), 50) << i;
    EXPECT_EQ(cpu.inconsistent(i), i < 2 ? 0 : 50) << i;
    EXPECT_EQ(ref.inconsistent(i), cpu.inconsistent(i)) << i;
    // x = (b1 + b2) / 4 t^2 (mass 2 along x), y free under Q_y = -1.
    EXPECT_NEAR(cpu.q(i, 0), (2.0 + gaps[i]) / 4 * 0.25, 1e-14) << i;
    EXPECT_NEAR(cpu.q(i, 1), -0.5 * 0.25, 1e-14) << i;
  }
  // The reference's flag for one evaluation, and its residual.
  const reference::Result r = reference::evaluate<Mo>({1.0, 2.0}, Eigen::VectorXd::Zero(2), Eigen::VectorXd::Zero(2), 0.0);
  EXPECT_TRUE(r.inconsistent);
  EXPECT_NEAR(r.constraint_residual, 0.5, 1e-15);
}

// A free particle whose force throws where its parameter `bad` is 1, naming
// the system by its parameter `id`.
template <class T>
struct Thrower {
  using Scalar = T;
  static constexpr const char* name = "thrower";
  static constexpr const char* summary = "test model: a force that throws";
  static constexpr int n = 2, m = 1;
  static constexpr std::array<const char*, n> coords{"x", "y"};
  struct Params {
    T bad = T(0), id = T(0);
  };
  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("bad", p.bad, "1: the force throws");
    f("id", p.id, "the system's number, in the message");
  }
  UKB_HD static void mass(const T*, T, const Params&, T* M) { M[0] = M[3] = T(1), M[1] = M[2] = T(0); }
  static void force(const T* q, const T*, T, const Params& p, T* Q) {
    if (p.bad == T(1) && q[0] > T(0.5)) throw std::domain_error("system " + std::to_string(int(p.id)));
    Q[0] = Q[1] = T(0);
  }
  UKB_HD static void constraints(const T*, const T*, T, const Params&, T* A, T* b) {
    A[0] = T(0), A[1] = T(1), b[0] = T(0);
  }
  UKB_HD static void nonideal(const T*, const T*, T, const Params&, const T*, const T*, T* C) { C[0] = C[1] = T(0); }
};

TEST(Engine, AModelThatThrowsGivesAModelErrorWithItsMessage) {
  // Systems 123 and 200 of 300 throw once x passes 0.5 (at t = 0.5 with
  // x' = 1): never std::terminate from an OpenMP region. One thread at a
  // time per system (and the reference) says the first failing system as
  // a single thread going in order would; SIMD lanes say one of them.
  using Mo = Thrower<double>;
  const int N = 300;
  auto fill = [&](Batch<Mo>& b, double x0) {
    for (int i = 0; i < N; ++i) {
      b.set_params(i, {i == 123 || i == 200 ? 1.0 : 0.0, double(i)});
      const double q[2] = {x0, 0}, qd[2] = {1, 0};
      b.set_state(i, q, qd);
    }
  };
  // The message of the ModelError `call` throws, with its nested exception's.
  auto caught = [](auto&& call) -> std::pair<std::string, std::string> {
    try {
      call();
    } catch (const ModelError& e) {
      try {
        std::rethrow_if_nested(e);
      } catch (const std::domain_error& inner) {
        return {e.what(), inner.what()};
      }
      return {e.what(), "(nothing nested)"};
    }
    return {"(no ModelError)", ""};
  };
  const RunOptions run{.dt = 1e-2, .t_end = 1.0};
  for (const bool simd : {false, true}) {
    SCOPED_TRACE(simd ? "simd" : "one system at a time");
    Batch<Mo> b(N);
    fill(b, 0.0);
    const auto [what, inner] = caught([&] { integrate(b, Backend::cpu, run, 1000, {.threads = 2, .chunk = 4, .simd = simd}); });
    if (simd) {
      EXPECT_TRUE(inner == "system 123" || inner == "system 200") << inner;
    } else {
      EXPECT_EQ(inner, "system 123");
    }
    EXPECT_EQ(what, "model 'thrower' threw an exception while integrating: " + inner);
    Batch<Mo> e(N);
    fill(e, 1.0);
    const auto [ewhat, einner] = caught([&] { evaluate(e, Backend::cpu, {}, {.threads = 2, .chunk = 4, .simd = simd}); });
    EXPECT_EQ(ewhat, "model 'thrower' threw an exception while evaluating: system 123");
  }
  Batch<Mo> r(N);
  fill(r, 0.0);
  EXPECT_EQ(caught([&] { integrate(r, Backend::reference, run); }).first,
            "model 'thrower' threw an exception while integrating: system 123");
  // The systems without the fault, in a batch of their own, run to the end.
  Batch<Mo> good(N);
  fill(good, 0.0);
  for (int i : {123, 200}) good.set_params(i, {0.0, double(i)});
  EXPECT_NO_THROW(integrate(good, Backend::cpu, run, 1000, {.threads = 2}));
  EXPECT_NEAR(good.q(123, 0), 1.0, 1e-12);
}

TEST_P(EngineOn, AnEndWithinTheDocumentedSlackIsReachedAndOneBeyondItIsStepped) {
  // docs/config.md ([integrator] dt, policy::end_slack = 1e-9): the last step is
  // shortened (or lengthened) to land on t_end where the remaining time is
  // below dt (1 + 1e-9), and a time within 1e-9 dt of t_end has reached
  // it. dt = 0.01: t_end = 1 + 5e-10 (5e-8 dt beyond 100 steps) takes 100
  // whole steps and a 101st of 5e-10; t_end = 1 + 5e-13 has its 100th step
  // lengthened by 5e-11 dt. Either lands on t_end exactly.
  using Mo = models::BeadOnRing<double>;
  for (Backend backend : {be(), Backend::reference}) {
    SCOPED_TRACE(std::string(to_string(backend)));
    for (const auto& [t_end, steps] : {std::pair{1.0 + 5e-10, 101L}, std::pair{1.0 + 5e-13, 100L}}) {
      Batch<Mo> b(1);
      const double q[2] = {1, 0}, qd[2] = {0, 0};
      b.set_params(0, Mo::Params{.mu = 0.0});
      b.set_state(0, q, qd);
      integrate(b, backend, RunOptions{.dt = 0.01, .t_end = t_end, .events = false});
      EXPECT_EQ(b.steps(0), steps) << "t_end - 1 = " << t_end - 1;
      EXPECT_EQ(b.t(0), t_end);
    }
  }
}

TEST(Engine, BadArgumentsAreRefused) {
  Batch<models::BeadOnRing<double>> b(3);
  EXPECT_THROW(step(b, Backend::cpu, 0.0, 10), std::invalid_argument);
  EXPECT_THROW(step(b, Backend::cpu, -1e-3, 10), std::invalid_argument);
  EXPECT_THROW(step(b, Backend::cpu, 1e-3, -1), std::invalid_argument);
  EXPECT_THROW(run_until(b, Backend::cpu, 1e-3, std::nan("")), std::invalid_argument);
  EXPECT_THROW(run_until(b, Backend::cpu, 1e-3, INFINITY), std::invalid_argument);
  EXPECT_THROW(step(b, Backend::cpu, 1e-3, 1, {.chunk = 0}), std::invalid_argument);
  EXPECT_THROW(evaluate(b, Backend::cpu, {}, {.cuda_block = -1}), std::invalid_argument);
  EXPECT_THROW(evaluate(b, Backend::cpu, {}, {.cuda_block = 1025}), std::invalid_argument);
  EXPECT_THROW(evaluate(b, Backend::cpu, {.rank_rtol = 1.0}), std::invalid_argument);
  EXPECT_THROW(Batch<models::BeadOnRing<double>>(0), std::invalid_argument);
  EXPECT_THROW(b.q(3, 0), std::out_of_range);
  Batch<models::BeadOnRing<float>> f(3);
  EXPECT_THROW(evaluate(f, Backend::reference), BackendUnavailable);
}

TEST_P(EngineOn, RunUntilStopsWhereDtNoLongerAdvancesTime) {
  // In float at t = 1e4 one ulp (~1e-3) exceeds dt = 1e-4: t + dt == t.
  // The run must end (not loop forever) and leave the system where it was.
  RandomBatch<models::BeadOnRing, float> b(3, 11);
  for (int i = 0; i < 3; ++i) {
    float q[2] = {b.batch.q(i, 0), b.batch.q(i, 1)}, qd[2] = {b.batch.qd(i, 0), b.batch.qd(i, 1)};
    b.batch.set_state(i, q, qd, 1e4f);
  }
  EXPECT_EQ(run_until(b.batch, be(), 1e-4f, 1e4f + 1.0f).failed, 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b.batch.t(i), 1e4f);
}

TEST(Engine, MemoryPerSystemIsStatePlusParametersPlusMonitors) {
  // (2 n + 4 + np) scalars (state, run monitors, parameters), four 32-bit
  // integers (status, events, rank_prev, ctrl) and six 64-bit counters
  // (steps, rank_drops, rank_changes, rank_marginal, proj_fails,
  // inconsistent). bead_on_ring: (4 + 4 + 4) * 8 + 16 + 48.
  EXPECT_EQ(bytes_per_system<models::BeadOnRing<double>>(), 160u);
  EXPECT_EQ(bytes_per_system<models::PlanarChain12<float>>(), (2 * 24 + 4 + 4) * 4 + 64u);
  // The outputs of evaluate, (3 n + m) scalars and the rank, come with the
  // first evaluation only.
  EXPECT_EQ(output_bytes_per_system<models::BeadOnRing<double>>(), 7 * 8 + 4u);
  RandomBatch<models::BeadOnRing> b(5, 3);
  EXPECT_EQ(b.batch.view().qdd, nullptr);
  integrate(b.batch, Backend::cpu, {.dt = 1e-3, .t_end = 0.01});
  EXPECT_EQ(b.batch.view().qdd, nullptr) << "a run allocates no outputs";
  EXPECT_THROW(b.batch.qdd(0, 0), std::logic_error);
  EXPECT_EQ(evaluate(b.batch, Backend::cpu), 0);
  EXPECT_NE(b.batch.view().qdd, nullptr);
  EXPECT_TRUE(std::isfinite(b.batch.qdd(4, 1)));
  // The monitors of adaptive steps (h_next, err_prev, rejected, rhs_evals)
  // come with the first dopri5 run only, the dense output on request.
  EXPECT_FALSE(b.batch.has_adaptive_monitors());
  EXPECT_THROW(b.batch.rejected(0), std::logic_error);
  integrate(b.batch, Backend::cpu, {.method = Method::dopri5, .dt = 1e-3, .t_end = 0.02});
  EXPECT_TRUE(b.batch.has_adaptive_monitors());
  EXPECT_GT(b.batch.rhs_evals(0), 0);
  EXPECT_FALSE(b.batch.has_dense());
}

// The CUDA backend on a real GPU against the cpu backend (skipped here
// without one; EngineOn/cuda checks it against the reference).
TEST(Engine, CudaMatchesCpu) {
  std::string why;
  if (cuda::device_count(&why) == 0) GTEST_SKIP() << "no GPU here: " << why;
  for_each_model_template([]<template <class> class Model>() {
    using Mo = Model<double>;
    RandomBatch<Model> gpu(1003, 400), cpu(1003, 400);
    ASSERT_EQ(step(gpu.batch, Backend::cuda, 1e-3, 200).failed, 0);
    ASSERT_EQ(step(cpu.batch, Backend::cpu, 1e-3, 200).failed, 0);
    // The GPU contracts a * b + c into fused multiply-adds and the CPU build
    // does not, so the two differ by rounding. Plain steps do not locate
    // events: a friction model's force (C ~ v/|v|) is then integrated across
    // the sliding velocity's zero, where the rounding difference of v is
    // amplified (measured on an H200: 2.1e-10 for bead_on_ring after 200
    // steps). The runs below locate the events and meet the tight bound.
    const double step_tol = HasEvents<Mo> ? 1e-8 : 1e-10;
    const double step_diff = max_rel_diff(gpu.batch, cpu.batch, Mo::n, [](const auto& b, int i, int j) { return b.q(i, j); });
    std::printf("%s: GPU vs CPU after 200 plain steps: %.3g\n", Mo::name, step_diff);
    EXPECT_LT(step_diff, step_tol) << Mo::name;
    // Stabilised ensemble runs (events, monitors, counters) on the GPU.
    for (Stabilization st : {Stabilization::baumgarte, Stabilization::projection}) {
      RandomBatch<Model> g(1003, 410), c(1003, 410);
      const RunOptions r{.dt = 1e-3, .t_end = 0.2, .stabilization = st};
      integrate(g.batch, Backend::cuda, r);
      integrate(c.batch, Backend::cpu, r);
      EXPECT_LT(max_rel_diff(g.batch, c.batch, Mo::n, [](const auto& b, int i, int j) { return b.q(i, j); }), 1e-10)
          << Mo::name << " " << to_string(st);
      long counters = 0;
      for (int i = 0; i < 1003; ++i)
        counters += g.batch.rank_drops(i) != c.batch.rank_drops(i) || g.batch.proj_fails(i) != c.batch.proj_fails(i);
      EXPECT_EQ(counters, 0) << Mo::name << " " << to_string(st);
    }
  });
}

TEST(Engine, CudaWithoutDeviceSaysWhy) {
  std::string why;
  if (cuda::device_count(&why) > 0) GTEST_SKIP() << "a GPU is present, so the error raised without one cannot be checked here";
  Batch<models::BeadOnRing<double>> b(3);
  try {
    evaluate(b, Backend::cuda);
    FAIL() << "expected BackendUnavailable";
  } catch (const BackendUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("not available"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ukb::test
