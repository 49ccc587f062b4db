// Constraint drift and its stabilisation (issue 7): the models' constraint
// rows against finite differences of their own A and b; Baumgarte's
// corrected constraint acceleration; the projection's landing on the
// manifold, its mass weighting and its agreement with the reference; the
// drift of planar_chain_6 over 1e5 steps with each option; fourth-order
// energy errors; unchanged well-resolved trajectories; unit invariance of
// every built-in model; singular configurations; every backend that runs
// here against the reference.
#include <algorithm>

#include "engine_support.hpp"
#include "ukb/backends.hpp"  // the test's own models (NanRowsRing, SlidingBead)
#include "ukb/kernels/stabilize.hpp"
#include "ukb/kernels/uk.hpp"

namespace ukb::test {
namespace {

const Stabilization kOptions[] = {Stabilization::none, Stabilization::baumgarte,
                                  Stabilization::projection};

template <class Mo>
void rows_of(const Sample<Mo>& s, const VectorXd& q, const VectorXd& qd, double t, VectorXd& phi,
             VectorXd& phid) {
  phi.resize(Mo::m);
  phid.resize(Mo::m);
  Mo::constraint_rows(q.data(), qd.data(), t, s.p, phi.data(), phid.data());
}

// The rows' constraints are what A and b differentiate (model.hpp): checked
// by central differences of the model's own phi/psi against its A and b.
TEST(ConstraintRows, MatchTheRowsOfAAndBByFiniteDifferences) {
  for_each_model([]<class Mo>() {  // every model under the sanitizers too: their rows' code, no kernels'
    SCOPED_TRACE(Mo::name);
    Rng rng(700);
    for (int trial = 0; trial < 10; ++trial) {
      const Sample<Mo> base = Gen<Mo>::consistent(rng);
      VectorXd phi, phid;
      rows_of(base, base.q, base.qd, base.t, phi, phid);
      EXPECT_LT(phi.cwiseAbs().maxCoeff(), 1e-12) << "a consistent state satisfies phi = 0";
      EXPECT_LT(phid.cwiseAbs().maxCoeff(), 1e-12) << "and phi' = 0, psi = 0";
      // Off the manifold the identities still hold (they are identities in q, q', t).
      Sample<Mo> s = base;
      s.q += rng.vector(Mo::n, -0.05, 0.05);
      s.qd += rng.vector(Mo::n, -0.5, 0.5);
      const reference::Terms k = reference::terms<Mo>(s.p, s.q, s.qd, s.t);
      const VectorXd qdd = rng.vector(Mo::n, -3, 3);
      const double h = 1e-6;
      VectorXd p0, d0, p1, d1;
      // d/ds of phid along (q', q'', 1): phi'' or psi' = (A q'' - b).
      rows_of(s, s.q + h * s.qd, s.qd + h * qdd, s.t + h, p1, d1);
      rows_of(s, s.q - h * s.qd, s.qd - h * qdd, s.t - h, p0, d0);
      const VectorXd second = (d1 - d0) / (2 * h), expect = k.A * qdd - k.b;
      EXPECT_LT((second - expect).cwiseAbs().maxCoeff(), 1e-6 * (1 + expect.cwiseAbs().maxCoeff()));
      // d/ds of phi along (q', 1) is phid, for holonomic rows.
      const VectorXd first = (p1 - p0) / (2 * h);
      rows_of(s, s.q, s.qd, s.t, phi, phid);
      for (int i = 0; i < Mo::m; ++i) {
        if (Mo::row_kinds[i] == RowKind::holonomic) {
          EXPECT_NEAR(first(i), phid(i), 1e-6 * (1 + std::abs(phid(i)))) << "row " << i;
        } else {
          EXPECT_EQ(phi(i), 0.0) << "row " << i << " is nonholonomic";
        }
      }
      // A_i = d phi_i / dq (holonomic) or d psi_i / dq' (nonholonomic).
      for (int j = 0; j < Mo::n; ++j) {
        VectorXd e = VectorXd::Zero(Mo::n);
        e(j) = h;
        rows_of(s, s.q + e, s.qd, s.t, p1, d1);
        rows_of(s, s.q - e, s.qd, s.t, p0, d0);
        VectorXd pq = (p1 - p0) / (2 * h);
        rows_of(s, s.q, s.qd + e, s.t, p1, d1);
        rows_of(s, s.q, s.qd - e, s.t, p0, d0);
        VectorXd pv = (d1 - d0) / (2 * h);
        for (int i = 0; i < Mo::m; ++i) {
          const double got = Mo::row_kinds[i] == RowKind::holonomic ? pq(i) : pv(i);
          EXPECT_NEAR(got, k.A(i, j), 1e-6 * (1 + std::abs(k.A(i, j)))) << "A(" << i << "," << j << ")";
        }
      }
    }
  });
}

// With Baumgarte the solved acceleration satisfies the corrected rows:
// A q'' - b = -(2 alpha phi' + beta^2 phi) (holonomic), -gamma psi
// (nonholonomic), at states off the manifold; and the kernels agree with
// the reference's independent Baumgarte evaluation.
TEST(Baumgarte, TheAccelerationObeysTheCorrectedRowsAndMatchesTheReference) {
  for_each_model_or_kind([]<class Mo>() {
    SCOPED_TRACE(Mo::name);
    Rng rng(710);
    for (int trial = 0; trial < 20; ++trial) {
      Sample<Mo> s = Gen<Mo>::consistent(rng);
      s.q += rng.vector(Mo::n, -0.01, 0.01);
      s.qd += rng.vector(Mo::n, -0.1, 0.1);
      const Baumgarte<double> bg{true, rng.uniform(0, 20), rng.uniform(0, 20), rng.uniform(0, 20)};
      kernels::Accel<Mo> a;
      ASSERT_EQ(kernels::uk_accel<Mo>(s.q.data(), s.qd.data(), s.t, s.p, 1e-10, a, bg), Status::ok);
      const reference::Result r = reference::evaluate<Mo>(
          s.p, s.q, s.qd, s.t, {.baumgarte = bg});
      ASSERT_EQ(r.status, Status::ok);
      const VectorXd qdd = Eigen::Map<const VectorXd>(a.qdd, Mo::n);
      EXPECT_LT(rel_err(qdd, r.qdd), 1e-12);
      if (a.rank < Mo::m) continue;  // redundant rows off the manifold: least squares, not exact
      const reference::Terms k = reference::terms<Mo>(s.p, s.q, s.qd, s.t);
      VectorXd phi, phid;
      rows_of(s, s.q, s.qd, s.t, phi, phid);
      const VectorXd lhs = k.A * qdd - k.b;
      for (int i = 0; i < Mo::m; ++i) {
        const double want = Mo::row_kinds[i] == RowKind::holonomic
                                ? -(2 * bg.alpha * phid(i) + bg.beta * bg.beta * phi(i))
                                : -bg.gamma * phid(i);
        EXPECT_NEAR(lhs(i), want, 1e-9 * (1 + k.b.cwiseAbs().maxCoeff())) << "row " << i;
      }
      EXPECT_GT(phi.cwiseAbs().maxCoeff() + phid.cwiseAbs().maxCoeff(), 1e-4) << "guard: off the manifold";
    }
  });
}

// The projection lands on the manifold (the model's own residual monitor,
// written separately from its rows, reads round-off), converges, and agrees
// with the reference's Eigen projection.
TEST(Projection, LandsOnTheManifoldAndMatchesTheReference) {
  for_each_model_or_kind([]<class Mo>() {
    SCOPED_TRACE(Mo::name);
    Rng rng(720);
    for (int trial = 0; trial < 20; ++trial) {
      Sample<Mo> s = Gen<Mo>::consistent(rng);
      s.q += rng.vector(Mo::n, -1e-3, 1e-3);
      s.qd += rng.vector(Mo::n, -1e-2, 1e-2);
      double before_pos, before_vel, pos, vel;
      Mo::residual(s.q.data(), s.qd.data(), s.t, s.p, before_pos, before_vel);
      VectorXd q = s.q, qd = s.qd;
      bool converged = false;
      const Projection<double> pr{true, 1e-10, 4};
      ASSERT_EQ(kernels::project<Mo>(q.data(), qd.data(), s.t, s.p, 1e-10, pr, converged), Status::ok);
      EXPECT_TRUE(converged);
      Mo::residual(q.data(), qd.data(), s.t, s.p, pos, vel);
      const double scale = 1 + s.q.cwiseAbs().maxCoeff() + s.qd.cwiseAbs().maxCoeff();
      EXPECT_LT(pos, 1e-14 * scale);
      EXPECT_LT(vel, 1e-13 * scale);
      EXPECT_GT(before_vel, 1e-5) << "guard: the velocity was off";
      if (std::ranges::any_of(Mo::row_kinds, [](RowKind k) { return k == RowKind::holonomic; })) {
        EXPECT_GT(before_pos, 1e-6) << "guard: the position was off";
      } else {
        EXPECT_EQ(q, s.q) << "no holonomic row: the positions stay";
      }
      reference::State x{s.q, s.qd, s.t};
      const reference::Projected rp = reference::project<Mo>(s.p, x, 1e-10, 4, 1e-10);
      ASSERT_EQ(rp.status, Status::ok);
      EXPECT_TRUE(rp.converged);
      EXPECT_LT(rel_err(q, x.q), 1e-13);
      EXPECT_LT(rel_err(qd, x.qd), 1e-12);
    }
  });
}

// The stopping rule as docs/stabilisation.md states it, derived by hand: a
// level stops after the first correction with |dx|_inf <= tol |x|_inf, or
// after max_iter corrections (not converged). A bead off its ring at radius
// R (1 + d): phi = (x^2 - R^2) / 2, A = [x, 0], so the first correction of
// least size is dx = -phi / x = -R (d + d^2 / 2) / (1 + d), which lands at
// x = R (1 + d^2 / (2 (1 + d))); the second is of size R d^2 / 2. At
// d = tol / 2 one correction converges; at d = 2 tol it does not, and two
// do. The velocity level has nothing to correct (q' = 0). Both the kernels
// and the reference backend follow the rule, at every scale R.
TEST(Projection, StopsAtTheFirstCorrectionWithinTheDocumentedRelativeTolerance) {
  using Mo = models::BeadOnRing<double>;
  constexpr double tol = 1e-6;
  struct Case {
    double d;
    int max_iter;
    bool converged;
  };
  for (const double R : {1.0, 1e3, 1e-3}) {
    for (const Case c : {Case{0.5 * tol, 1, true}, Case{2 * tol, 1, false}, Case{2 * tol, 2, true}}) {
      SCOPED_TRACE(::testing::Message() << "R = " << R << ", d = " << c.d << ", max_iter = " << c.max_iter);
      Mo::Params p;
      p.R = R;
      double q[2] = {R * (1 + c.d), 0}, qd[2] = {0, 0};
      bool converged = !c.converged;
      ASSERT_EQ(kernels::project<Mo>(q, qd, 0.0, p, 1e-10, Projection<double>{true, tol, c.max_iter}, converged),
                Status::ok);
      EXPECT_EQ(converged, c.converged);
      const double one = R * (1 + c.d * c.d / (2 * (1 + c.d)));  // after one correction
      const double expected = c.max_iter == 1 ? one : R;  // two: within R d^4 of the ring
      EXPECT_NEAR(q[0], expected, 4 * R * 1e-16) << "the Gauss-Newton step of least size";
      EXPECT_EQ(q[1], 0.0);
      reference::State x{VectorXd::Zero(2), VectorXd::Zero(2), 0.0};
      x.q(0) = R * (1 + c.d);
      const reference::Projected rp = reference::project<Mo>(p, x, tol, c.max_iter, 1e-10);
      ASSERT_EQ(rp.status, Status::ok);
      EXPECT_EQ(rp.converged, c.converged) << "reference";
      EXPECT_NEAR(x.q(0), expected, 4 * R * 1e-16) << "reference";
    }
  }
}

// The correction is the mass-weighted one: for the arm (non-diagonal M(q))
// the position change lies along M^{-1} A^T, not along A^T.
TEST(Projection, IsMassWeighted) {
  using Mo = models::TwoLinkArm<double>;
  Rng rng(730);
  for (int trial = 0; trial < 20; ++trial) {
    Sample<Mo> s = Gen<Mo>::consistent(rng);
    s.q += rng.vector(Mo::n, -1e-6, 1e-6);
    VectorXd q = s.q, qd = s.qd;
    bool converged = false;
    ASSERT_EQ(kernels::project<Mo>(q.data(), qd.data(), s.t, s.p, 1e-10, {true, 1e-12, 4}, converged),
              Status::ok);
    const reference::Terms k = reference::terms<Mo>(s.p, s.q, s.qd, s.t);
    const VectorXd dq = q - s.q, w = k.M.llt().solve(k.A.transpose()), e = k.A.transpose();
    auto sin_angle = [](const VectorXd& a, const VectorXd& b) {
      return std::abs(a(0) * b(1) - a(1) * b(0)) / (a.norm() * b.norm());
    };
    EXPECT_LT(sin_angle(dq, w), 1e-4) << "along M^{-1} A^T";
    EXPECT_GT(sin_angle(w, e), 0.02) << "guard: M^{-1} A^T and A^T differ here";
  }
}

// planar_chain_6 at the arm's-length angles of a Monte Carlo run.
template <class Mo>
void chain_state(Batch<Mo>& b, int i, double amp, double shift) {
  constexpr int K = Mo::n / 2;
  double ic[2 * K], q[Mo::n], qd[Mo::n];
  for (int k = 0; k < K; ++k) {
    ic[k] = amp * std::sin(1.0 + 0.7 * k + shift);
    ic[K + k] = 0.5 * amp * std::cos(0.4 * k + 2 * shift);
  }
  Mo::initial_state(ic, b.params(i), q, qd);
  b.set_state(i, q, qd);
}

template <class Mo>
double energy(const Batch<Mo>& b, int i) {
  double M[Mo::n * Mo::n], q[Mo::n], qd[Mo::n];
  for (int j = 0; j < Mo::n; ++j) q[j] = b.q(i, j), qd[j] = b.qd(i, j);
  Mo::mass(q, b.t(i), b.params(i), M);
  return models::detail::kinetic_energy<Mo::n>(M, qd) + Mo::potential(q, b.t(i), b.params(i));
}

// The drift study: planar_chain_6, ideal (c = 0), 1e5 RK4 steps of
// 1 ms. Without stabilisation the position residual grows; with Baumgarte
// and with projection it stays below 1e-8.
TEST(Drift, ChainSixOverHundredThousandSteps) {
  using Mo = models::PlanarChain6<double>;
  double grown = 0;
  for (Stabilization st : kOptions) {
    Batch<Mo> b(1);
    chain_state(b, 0, 1.0, 0.0);
    const double e0 = energy(b, 0);
    const RunOptions r{.dt = 1e-3, .t_end = 100.0, .stabilization = st};
    integrate(b, Backend::cpu, r, 10000);
    const double early = b.res_pos(0);
    EXPECT_EQ(integrate(b, Backend::cpu, r).active, 0);
    ASSERT_EQ(b.status(0), Status::ok);
    EXPECT_EQ(b.steps(0), 100000);
    const std::string name(to_string(st));
    std::printf("[ drift    ] %-10s res_pos after 1e4 steps %.3e, after 1e5 %.3e; res_vel %.3e; "
                "|E - E0| %.3e; projection failures %ld\n",
                name.c_str(), early, b.res_pos(0), b.res_vel(0), std::abs(energy(b, 0) - e0),
                static_cast<long>(b.proj_fails(0)));
    ::testing::Test::RecordProperty("res_pos_" + name, std::to_string(b.res_pos(0)));
    if (st == Stabilization::none) {
      grown = b.res_pos(0);
      EXPECT_GT(b.res_pos(0), 10 * early) << "the drift grows";
      EXPECT_GT(b.res_pos(0), 1e-6);
    } else {
      EXPECT_LT(b.res_pos(0), 1e-8);
      EXPECT_LT(b.res_pos(0), 1e-3 * grown);
      EXPECT_EQ(b.proj_fails(0), 0);
    }
  }
}

// The energy error of the ideal chain (max over the run of |E - E0|)
// shrinks about 16x per halving of dt with every option: the stabilisation
// keeps RK4's fourth order.
TEST(Drift, EnergyErrorIsFourthOrderWithEveryOption) {
  using Mo = models::PlanarChain6<double>;
  for (Stabilization st : kOptions) {
    double prev = 0;
    for (double dt : {4e-3, 2e-3, 1e-3}) {
      Batch<Mo> b(1);
      chain_state(b, 0, 0.5, 0.0);
      const double e0 = energy(b, 0);
      const RunOptions r{.dt = dt, .t_end = 10.0, .stabilization = st};
      double err = 0;
      for (long active = 1; active > 0;) {
        active = integrate(b, Backend::cpu, r, 25).active;
        worst_of(err, std::abs(energy(b, 0) - e0));
      }
      std::printf("[ energy   ] %-10s dt %.0e  max |E - E0| %.3e  ratio %.2f\n",
                  std::string(to_string(st)).c_str(), dt, err, prev > 0 ? prev / err : 0.0);
      if (prev > 0) {
        EXPECT_GT(prev / err, 12.0) << to_string(st) << " dt " << dt;
        EXPECT_LT(prev / err, 24.0) << to_string(st) << " dt " << dt;
      }
      prev = err;
    }
  }
}

// Stabilisation does not move a well-resolved trajectory by more than the
// integration error: planar_chain_3 over 10 s at dt = 1e-3, against the
// same systems at dt = 1e-4 without stabilisation.
TEST(Drift, StabilisationDoesNotChangeAWellResolvedTrajectory) {
  using Mo = models::PlanarChain3<double>;
  Batch<Mo> truth(3);
  for (int i = 0; i < 3; ++i) chain_state(truth, i, 0.5, 0.3 * i);
  ASSERT_EQ(run_until(truth, Backend::cpu, 1e-4, 10.0).failed, 0);
  double err_none = 0;
  for (Stabilization st : kOptions) {
    Batch<Mo> b(3);
    for (int i = 0; i < 3; ++i) chain_state(b, i, 0.5, 0.3 * i);
    integrate(b, Backend::cpu, {.dt = 1e-3, .t_end = 10.0, .stabilization = st});
    double err = 0;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < Mo::n; ++j) worst_of(err, std::abs(b.q(i, j) - truth.q(i, j)));
    std::printf("[ resolved ] %-10s max |q - q_fine| %.3e\n", std::string(to_string(st)).c_str(), err);
    if (st == Stabilization::none) {
      err_none = err;
      EXPECT_GT(err, 1e-12) << "guard: the integration error is visible";
    } else {
      EXPECT_LT(err, 2 * err_none) << to_string(st);
    }
  }
}

// Units: every built-in model in other units gives the same physical
// trajectory. Lengths scale by L = 1e3 (g with them, so time does not
// change); nonholonomic_particle's constraint y' = z^2 x' fixes a unit of
// length (z^2 is dimensionless), so it changes its unit of mass instead, as
// do the sleigh, the disk and the sphere (lengths and angles in one q).
struct Units {
  template <class Mo>
  static void scale(typename Mo::Params& p, double L, double Mass, double& state) {
    if constexpr (std::is_same_v<Mo, models::BeadOnRing<double>>) {
      p.R *= L, p.g *= L, state = L;
    } else if constexpr (std::is_same_v<Mo, models::InclineBlock<double>>) {
      p.g *= L, state = L;
    } else if constexpr (std::is_same_v<Mo, models::PuckIncline<double>>) {
      p.g *= L, state = L;  // the look-ahead is a time
    } else if constexpr (std::is_same_v<Mo, models::RedundantPendulum<double>> ||
                         std::is_same_v<Mo, models::PlanarChain3<double>> ||
                         std::is_same_v<Mo, models::PlanarChain6<double>> ||
                         std::is_same_v<Mo, models::PlanarChain12<double>>) {
      p.l *= L, p.g *= L, p.m *= Mass, p.c *= Mass, state = L;  // c: force per velocity
    } else if constexpr (std::is_same_v<Mo, models::TwoLinkArm<double>>) {
      p.l1 *= L, p.l2 *= L, p.g *= L, p.p0x *= L, p.p0y *= L, state = 1;  // angles
    } else if constexpr (std::is_same_v<Mo, models::NonholonomicParticle<double>>) {
      p.m *= Mass, p.a0 *= Mass, p.fx *= Mass, p.fy *= Mass, p.fz *= Mass, state = 1;
    } else if constexpr (std::is_same_v<Mo, models::ChaplyginSleigh<double>>) {  // lengths and an angle: mass
      p.m *= Mass, p.I *= Mass, p.Fx *= Mass, p.Fy *= Mass, p.tau0 *= Mass, p.c *= Mass, state = 1;
    } else if constexpr (std::is_same_v<Mo, models::RollingDisk<double>>) {
      p.m *= Mass, p.Ith *= Mass, p.Jph *= Mass, p.tau_th *= Mass, p.tau_ph *= Mass, p.c_r *= Mass, state = 1;
    } else if constexpr (std::is_same_v<Mo, models::RollingSphere<double>>) {
      p.m *= Mass, p.Fx *= Mass, p.Fy *= Mass, state = 1;
    } else {
      static_assert(sizeof(Mo) == 0, "a built-in model without its units in this test");
    }
  }
};

TEST(UnitScaling, EveryModelGivesTheSameTrajectoryInOtherUnits) {
  for_each_model_or_kind([]<class Mo>() {
    for (Stabilization st : kOptions) {
      SCOPED_TRACE(std::string(Mo::name) + " " + std::string(to_string(st)));
      const int N = 7;
      Rng rng(740);
      Batch<Mo> a(N), b(N);
      double s = 1;
      for (int i = 0; i < N; ++i) {
        const Sample<Mo> x = Gen<Mo>::consistent(rng);
        typename Mo::Params p = x.p;
        Units::scale<Mo>(p, 1e3, 1e3, s);
        a.set_params(i, x.p);
        b.set_params(i, p);
        const VectorXd q = s * x.q, qd = s * x.qd;
        a.set_state(i, x.q.data(), x.qd.data(), x.t);
        b.set_state(i, q.data(), qd.data(), x.t);
      }
      const RunOptions r{.dt = 1e-3, .t_end = 0.5, .stabilization = st};
      integrate(a, Backend::cpu, r);
      integrate(b, Backend::cpu, r);
      double worst = 0, moved = 0;
      for (int i = 0; i < N; ++i) {
        EXPECT_EQ(a.status(i), b.status(i)) << i;
        EXPECT_EQ(a.events(i), b.events(i)) << i;
        EXPECT_EQ(a.rank_drops(i), b.rank_drops(i)) << i;
        EXPECT_EQ(a.proj_fails(i), b.proj_fails(i)) << i;
        EXPECT_NEAR(a.t(i), b.t(i), 1e-9) << i;  // located events: within event_tol
        for (int j = 0; j < Mo::n; ++j) {
          const double scale = 1 + std::abs(a.q(i, j)) + std::abs(a.qd(i, j));
          worst_of(worst, std::abs(b.q(i, j) / s - a.q(i, j)) / scale);
          worst_of(worst, std::abs(b.qd(i, j) / s - a.qd(i, j)) / scale);
          moved = std::max(moved, std::abs(a.q(i, j) - b.q(i, j) / s) + std::abs(a.qd(i, j)));
        }
      }
      EXPECT_LT(worst, 1e-9);
      EXPECT_GT(moved, 1e-3) << "guard: the systems move";
    }
  });
}

// A batch run on the CPU backend and the reference with a stabilisation:
// states within tol, identical statuses and counters; the projection
// failures of at most `flips` systems may differ by one (a failure is a
// threshold decision, |dx| > tol |x|, on a correction that the two
// backends round differently: one within rounding of the threshold can go
// either way).
template <class Mo>
void expect_cpu_matches_reference(Batch<Mo>& cpu, Batch<Mo>& ref, const RunOptions& r, double tol, int flips = 0) {
  integrate(cpu, Backend::cpu, r);
  integrate(ref, Backend::reference, r);
  double worst = 0;
  for (int i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(cpu.status(i), ref.status(i)) << i;
    EXPECT_EQ(cpu.steps(i), ref.steps(i)) << i;
    EXPECT_EQ(cpu.events(i), ref.events(i)) << i;
    EXPECT_EQ(cpu.rank_drops(i), ref.rank_drops(i)) << i;
    EXPECT_EQ(cpu.rank_changes(i), ref.rank_changes(i)) << i;
    EXPECT_EQ(cpu.rank_marginal(i), ref.rank_marginal(i)) << i;
    if (cpu.proj_fails(i) != ref.proj_fails(i)) {
      --flips;
      EXPECT_EQ(std::abs(cpu.proj_fails(i) - ref.proj_fails(i)), 1) << i;
    }
    for (int j = 0; j < Mo::n; ++j) {
      const double scale = 1 + std::abs(ref.q(i, j)) + std::abs(ref.qd(i, j));
      worst_of(worst, (std::abs(cpu.q(i, j) - ref.q(i, j)) + std::abs(cpu.qd(i, j) - ref.qd(i, j))) / scale);
      EXPECT_TRUE(std::isfinite(cpu.q(i, j)) && std::isfinite(cpu.qd(i, j)));
    }
  }
  EXPECT_LT(worst, tol);
  EXPECT_GE(flips, 0) << "projection failures counted differently in too many systems";
}

// Every model, every option, batch sizes 1 and 37: the CPU backend's shared
// kernels against the reference's own loop, projection and Baumgarte.
TEST(Stabilization, CpuMatchesReferenceForEveryModelAndOption) {
  for_each_model_template([]<template <class> class Model>() {
    using Mo = Model<double>;
    for (Stabilization st : kOptions) {
      for (int N : {1, 37}) {
        SCOPED_TRACE(std::string(Mo::name) + " " + std::string(to_string(st)) + " N=" + std::to_string(N));
        RandomBatch<Model> cpu(N, 800 + N), ref(N, 800 + N);
        const double t_end = (Mo::n > 6 ? 0.05 : 0.2) / (sanitized ? 4 : 1);
        expect_cpu_matches_reference(cpu.batch, ref.batch, {.dt = 1e-3, .t_end = t_end, .stabilization = st}, 1e-10);
      }
    }
  });
}

// Singular configurations. The chain passes through its straight (fully
// extended) configuration mid-run: started from the straight state S moving
// with rates w, run back by time T (velocities reversed), then forward 2T
// from there (reversed again): the ideal chain is time-reversible, so it
// passes S at T.
TEST(Singular, ChainThroughItsStraightConfigurationAgreesWithReference) {
  using Mo = models::PlanarChain6<double>;
  for (Stabilization st : kOptions) {
    SCOPED_TRACE(to_string(st));
    Batch<Mo> cpu(3), ref(3);
    for (int i = 0; i < 3; ++i) {
      double ic[12], q[12], qd[12];
      for (int k = 0; k < 6; ++k) ic[k] = 0.4 * i, ic[6 + k] = 1.0 + 0.5 * k;  // straight, bending
      Mo::initial_state(ic, cpu.params(i), q, qd);
      for (double& v : qd) v = -v;
      cpu.set_state(i, q, qd);
    }
    ASSERT_EQ(run_until(cpu, Backend::cpu, 1e-3, 0.2).failed, 0);
    for (int i = 0; i < 3; ++i) {
      double q[12], qd[12];
      for (int j = 0; j < 12; ++j) q[j] = cpu.q(i, j), qd[j] = -cpu.qd(i, j);
      cpu.set_state(i, q, qd);
      ref.set_state(i, q, qd);
    }
    // Through the straight state at t = 0.2 (within the reversal's error).
    Batch<Mo> mid = cpu;
    ASSERT_EQ(run_until(mid, Backend::cpu, 1e-3, 0.2).failed, 0);
    for (int i = 0; i < 3; ++i)
      for (int k = 1; k < 6; ++k) {
        const double ax = mid.q(i, 2 * k) - mid.q(i, 2 * k - 2), ay = mid.q(i, 2 * k + 1) - mid.q(i, 2 * k - 1);
        const double bx = k > 1 ? mid.q(i, 2 * k - 2) - mid.q(i, 2 * k - 4) : mid.q(i, 0);
        const double by = k > 1 ? mid.q(i, 2 * k - 1) - mid.q(i, 2 * k - 3) : mid.q(i, 1);
        EXPECT_LT(std::abs(ax * by - ay * bx), 1e-9) << "links " << k - 1 << " and " << k << " aligned";
      }
    expect_cpu_matches_reference(cpu, ref, {.dt = 1e-3, .t_end = 0.4, .stabilization = st}, 1e-10);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(cpu.rank_drops(i), 0) << "the straight chain keeps rank 6";
  }
}

// The redundant pendulum (rank 1 < m = 2 at every evaluation) with each
// option: no NaN, agreement with the reference, every step counted as a
// rank drop.
TEST(Singular, RedundantPendulumAgreesWithReference) {
  for (Stabilization st : kOptions) {
    SCOPED_TRACE(to_string(st));
    RandomBatch<models::RedundantPendulum> cpu(37, 900), ref(37, 900);
    const long steps = sanitized_shorter(1000, 4);
    expect_cpu_matches_reference(cpu.batch, ref.batch,
                                 {.dt = 1e-3, .t_end = double(steps) * 1e-3, .stabilization = st}, 1e-10);
    for (int i = 0; i < 37; ++i) {
      EXPECT_EQ(cpu.batch.rank_drops(i), cpu.batch.steps(i)) << i;
      EXPECT_EQ(cpu.batch.steps(i), steps) << i;
    }
  }
}

// Projection failures are counted alike by the kernels and the reference:
// systems started 1e-2 off their manifold with one correction per level
// allowed: the first corrections (1e-2, then about 1e-4 and 1e-8 for the
// curved holonomic rows) are far above the tolerance 1e-10 and count as
// failures; Gauss-Newton then lands far below it.
TEST(Stabilization, ProjectionFailuresAreCountedAlikeOnCpuAndReference) {
  for_each_model_template([]<template <class> class Model>() {
    using Mo = Model<double>;
    if constexpr (Mo::n <= 6) {
      SCOPED_TRACE(Mo::name);
      RandomBatch<Model> cpu(37, 950), ref(37, 950);
      Rng rng(951);
      for (int i = 0; i < 37; ++i) {
        auto s = cpu.samples[i];
        s.q += rng.vector(Mo::n, -1e-2, 1e-2);
        s.qd += rng.vector(Mo::n, -1e-2, 1e-2);
        cpu.set(i, s);
        ref.set(i, s);
      }
      expect_cpu_matches_reference(cpu.batch, ref.batch,
                                   {.dt = 1e-3, .t_end = 0.05, .stabilization = Stabilization::projection,
                                    .projection_iters = 1},
                                   1e-10, 2);
      long failures = 0;
      for (int i = 0; i < 37; ++i) failures += cpu.batch.proj_fails(i);
      EXPECT_GE(failures, 37) << "guard: failures happen";
    }
  });
}

// A model whose constraint rows become NaN after t = 0.0503: the step whose
// stabilisation meets them fails; the system keeps its last good state and
// gets failed_nonfinite, on the CPU backend and the reference alike; its
// counters count the accepted steps only.
struct NanRowsRing : models::BeadOnRing<double> {
  static void constraint_rows(const double* q, const double* qd, double t, const Params& p,
                              double* phi, double* phid) {
    models::BeadOnRing<double>::constraint_rows(q, qd, t, p, phi, phid);
    if (t > 0.0503) phi[0] = std::numeric_limits<double>::quiet_NaN();
  }
};
static_assert(HasConstraintRows<NanRowsRing>);

TEST(Stabilization, AFailingStabilisationKeepsTheLastGoodStateOnEveryBackend) {
  for (Stabilization st : {Stabilization::baumgarte, Stabilization::projection}) {
    SCOPED_TRACE(to_string(st));
    Batch<NanRowsRing> cpu(3), ref(3), good(3);
    Rng rng(960);
    for (int i = 0; i < 3; ++i) {
      const auto s = Gen<models::BeadOnRing<double>>::consistent(rng);
      for (auto* b : {&cpu, &ref, &good}) {
        b->set_params(i, s.p);
        b->set_state(i, s.q.data(), s.qd.data(), 0.0);
      }
    }
    const RunOptions r{.dt = 1e-3, .t_end = 0.1, .events = false, .stabilization = st};
    integrate(cpu, Backend::cpu, r);
    integrate(ref, Backend::reference, r);
    // The last good state is at t = 0.05: the next step meets the NaN at
    // its midpoint stages (Baumgarte) or at its end (projection).
    const double t_good = 0.05;
    integrate(good, Backend::cpu, {.dt = 1e-3, .t_end = t_good, .events = false, .stabilization = st});
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(cpu.status(i), Status::failed_nonfinite) << i;
      EXPECT_EQ(ref.status(i), Status::failed_nonfinite) << i;
      EXPECT_EQ(cpu.steps(i), good.steps(i)) << i;
      EXPECT_EQ(ref.steps(i), good.steps(i)) << i;
      ASSERT_EQ(good.status(i), Status::ok) << i;
      for (int j = 0; j < 2; ++j) {
        EXPECT_NEAR(cpu.q(i, j), good.q(i, j), 1e-13) << i;
        EXPECT_NEAR(cpu.qd(i, j), good.qd(i, j), 1e-13) << i;
      }
      EXPECT_NEAR(cpu.t(i), t_good, 1e-12) << i;
      EXPECT_NEAR(ref.t(i), t_good, 1e-12) << i;
      for (int j = 0; j < 2; ++j) EXPECT_NEAR(ref.q(i, j), cpu.q(i, j), 1e-12) << i;
    }
  }
}

// A model without constraint rows cannot be stabilised: refused with its name.
struct SlidingBead {
  using Scalar = double;
  static constexpr const char* name = "sliding_bead";
  static constexpr const char* summary = "a bead on the x axis";
  static constexpr int n = 2, m = 1;
  static constexpr std::array<const char*, 2> coords{"x", "y"};
  struct Params {
    double m = 1;
  };
  template <class P, class F>
  static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "mass");
  }
  static void mass(const double*, double, const Params& p, double* M) {
    M[0] = M[3] = p.m, M[1] = M[2] = 0;
  }
  static void force(const double*, const double*, double, const Params& p, double* Q) {
    Q[0] = 0, Q[1] = -9.81 * p.m;
  }
  static void constraints(const double*, const double*, double, const Params&, double* A, double* b) {
    A[0] = 0, A[1] = 1, b[0] = 0;
  }
  static void nonideal(const double*, const double*, double, const Params&, const double*,
                       const double*, double* C) {
    C[0] = C[1] = 0;
  }
};
static_assert(Model<SlidingBead> && !HasConstraintRows<SlidingBead>);

TEST(Stabilization, AModelWithoutConstraintRowsIsRefused) {
  Batch<SlidingBead> b(2);
  for (Stabilization st : {Stabilization::baumgarte, Stabilization::projection}) {
    try {
      integrate(b, Backend::cpu, {.dt = 1e-3, .t_end = 1.0, .stabilization = st});
      ADD_FAILURE() << "expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("sliding_bead"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("constraint_rows"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(integrate(b, Backend::cpu, {.dt = 1e-3, .t_end = 0.01}).active, 0) << "without stabilisation it runs";
}

// Splitting a stabilised run into calls changes nothing, counters included.
TEST(Stabilization, SplittingARunIntoCallsChangesNothing) {
  for (Stabilization st : kOptions) {
    SCOPED_TRACE(to_string(st));
    RandomBatch<models::RedundantPendulum> whole(37, 970), parts(37, 970);
    RandomBatch<models::BeadOnRing> ring_whole(37, 971), ring_parts(37, 971);
    const RunOptions r{.dt = 1e-3, .t_end = 0.5, .stabilization = st, .projection_iters = 1};
    integrate(whole.batch, Backend::cpu, r);
    integrate(ring_whole.batch, Backend::cpu, r);
    while (integrate(parts.batch, Backend::cpu, r, 7).active > 0) {
    }
    while (integrate(ring_parts.batch, Backend::cpu, r, 7).active > 0) {
    }
    long events = 0;
    for (int i = 0; i < 37; ++i) {
      EXPECT_TRUE(same_bits(whole.batch, i, parts.batch, i, 2)) << i;
      EXPECT_TRUE(same_bits(ring_whole.batch, i, ring_parts.batch, i, 2)) << i;
      EXPECT_EQ(whole.batch.rank_drops(i), parts.batch.rank_drops(i)) << i;
      EXPECT_EQ(whole.batch.proj_fails(i), parts.batch.proj_fails(i)) << i;
      EXPECT_EQ(ring_whole.batch.proj_fails(i), ring_parts.batch.proj_fails(i)) << i;
      EXPECT_EQ(ring_whole.batch.events(i), ring_parts.batch.events(i)) << i;
      events += ring_whole.batch.events(i);
    }
    EXPECT_GT(whole.batch.rank_drops(0), 0) << "guard: rank drops are counted";
    EXPECT_GT(events, 0) << "guard: the rings meet events";
  }
}

TEST(Stabilization, BadOptionsAreRefused) {
  Batch<models::BeadOnRing<double>> b(1);
  auto run = [&](RunOptions r) { integrate(b, Backend::cpu, r, 1); };
  EXPECT_THROW(run({.dt = 1e-3, .projection_tol = 0}), std::invalid_argument);
  EXPECT_THROW(run({.dt = 1e-3, .projection_tol = 1}), std::invalid_argument);
  EXPECT_THROW(run({.dt = 1e-3, .projection_tol = NAN}), std::invalid_argument);
  EXPECT_THROW(run({.dt = 1e-3, .projection_iters = 0}), std::invalid_argument);
  EXPECT_THROW(run({.dt = 1e-3, .stabilization = Stabilization::projection, .projection_tol = 1e-17}),
               std::invalid_argument);  // below 4 epsilon: could never be met
  EXPECT_THROW(run({.dt = 1e-3, .baumgarte_alpha = INFINITY}), std::invalid_argument);
  // max(2 alpha, beta, gamma) dt > 1: stiff for RK4.
  EXPECT_THROW(run({.dt = 0.1, .stabilization = Stabilization::baumgarte}), std::invalid_argument);
  EXPECT_THROW(run({.dt = 1e-3, .stabilization = Stabilization::baumgarte, .baumgarte_gamma = 2000}),
               std::invalid_argument);
  EXPECT_NO_THROW(run({.dt = 0.05, .stabilization = Stabilization::baumgarte}));
}

// ---- a redundant system whose rank changes mid-run -------------------------

// A pendulum (point mass, rod of length l from the origin) with a second
// row implied by the first on the manifold only: phi1 = (r^2 - l^2) / 2 and
// phi2 = phi1 h with h = x + 2 l. On phi1 = 0 the gradient of phi2 is h
// times that of phi1 (rank 1); off it, by phi1 (1, 0) more (rank 2, with a
// smallest singular value about |phi1|). Unstabilised, round-off and
// truncation drift grows phi1 until the rank decision flips: the solver
// must say so (rank_changes, rank_marginal, failed_rank), not hand back a
// q'' of another rank with a clean status.
//   phi2'' = h phi1'' + 2 phi1' x' + phi1 x''  gives the row
//   (h x + phi1) x'' + h y y'' = h b1 - 2 phi1' x',  b1 = -(x'^2 + y'^2).
struct ImpliedRowPendulum {
  using Scalar = double;
  static constexpr const char* name = "implied_row_pendulum";
  static constexpr const char* summary = "pendulum with a second row implied on the manifold only";
  static constexpr int n = 2, m = 2;
  static constexpr std::array<const char*, 2> coords{"x", "y"};
  struct Params {
    double m = 1, l = 1, g = 9.81;
  };
  template <class P, class F>
  static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "mass (> 0)");
    f("l", p.l, "rod length (> 0)");
    f("g", p.g, "gravity");
  }
  static void mass(const double*, double, const Params& p, double* M) { M[0] = M[3] = p.m, M[1] = M[2] = 0; }
  static void force(const double*, const double*, double, const Params& p, double* Q) {
    Q[0] = 0, Q[1] = -p.m * p.g;
  }
  static void constraints(const double* q, const double* qd, double, const Params& p, double* A, double* b) {
    const double phi = 0.5 * (q[0] * q[0] + q[1] * q[1] - p.l * p.l), phid = q[0] * qd[0] + q[1] * qd[1];
    const double h = q[0] + 2 * p.l, b1 = -(qd[0] * qd[0] + qd[1] * qd[1]);
    A[0] = q[0], A[1] = q[1], b[0] = b1;
    A[2] = h * q[0] + phi, A[3] = h * q[1], b[1] = h * b1 - 2 * phid * qd[0];
  }
  static void nonideal(const double*, const double*, double, const Params&, const double*, const double*,
                       double* C) {
    C[0] = C[1] = 0;
  }
  static constexpr std::array<RowKind, 2> row_kinds{RowKind::holonomic, RowKind::holonomic};
  static void constraint_rows(const double* q, const double* qd, double, const Params& p, double* phi,
                              double* phid) {
    phi[0] = 0.5 * (q[0] * q[0] + q[1] * q[1] - p.l * p.l);
    phid[0] = q[0] * qd[0] + q[1] * qd[1];
    phi[1] = phi[0] * (q[0] + 2 * p.l);
    phid[1] = phid[0] * (q[0] + 2 * p.l) + phi[0] * qd[0];
  }
};
static_assert(Model<ImpliedRowPendulum> && HasConstraintRows<ImpliedRowPendulum>);

// sigma_min / sigma_max of B at a state, by Eigen's SVD, independently of
// both backends.
double eigen_sigma_ratio(const Batch<ImpliedRowPendulum>& b, int i) {
  const double q[2] = {b.q(i, 0), b.q(i, 1)}, qd[2] = {b.qd(i, 0), b.qd(i, 1)};
  double A[4], rhs[2];
  ImpliedRowPendulum::constraints(q, qd, 0, {}, A, rhs);
  Eigen::Matrix2d B;
  B << A[0], A[1], A[2], A[3];  // B = A L^{-T} with L = I (m = 1)
  const Eigen::Vector2d s = Eigen::JacobiSVD<Eigen::Matrix2d>(B).singularValues();
  return s(1) / s(0);
}

// Released on the manifold with a radial velocity eps: without
// stabilisation phi1'' = 0 is enforced, so phi1 = eps t grows and with it
// the smallest singular value of B (about |phi1| / 3 of the largest): the
// rank decision (rank_rtol = 1e-3 here, so that RK4's stage states, off the
// manifold by h^2 |q'|^2 / 8, do not flip it first) turns from 1 to 2
// mid-run.
Batch<ImpliedRowPendulum> implied_row_batch() {
  Batch<ImpliedRowPendulum> b(3);
  const double theta[3] = {0.6, 1.0, 1.4}, eps = 1e-3;
  for (int i = 0; i < 3; ++i) {
    const double q[2] = {std::sin(theta[i]), -std::cos(theta[i])};
    const double qd[2] = {eps * q[0], eps * q[1]};
    b.set_state(i, q, qd, 0.0);
  }
  return b;
}

TEST(Singular, ARankChangeMidRunIsCountedOrFailsAndAgreesWithReference) {
  const double dt = 0.01, t_end = 5, rtol = 1e-3;
  const RunOptions free{.dt = dt, .t_end = t_end, .rank_rtol = rtol};
  // Unstabilised, both backends alike, every counter included: the rank
  // starts at 1 and ends at 2 (Eigen's SVD at the first and last states), so
  // at least one change is counted (as the pendulum swings, the ratio falls
  // back below the cut and rises again: changes in both directions).
  Batch<ImpliedRowPendulum> cpu = implied_row_batch(), ref = implied_row_batch();
  for (int i = 0; i < 3; ++i) ASSERT_LT(eigen_sigma_ratio(cpu, i), 1e-12) << "guard: rank 1 at the start";
  expect_cpu_matches_reference(cpu, ref, free, 1e-9);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(cpu.status(i), Status::ok) << i;
    EXPECT_GT(eigen_sigma_ratio(cpu, i), rtol) << i << ": guard: the drift has raised the rank";
    EXPECT_GE(cpu.rank_changes(i), 1) << i;
    EXPECT_GE(cpu.rank_marginal(i), 1) << i;
    EXPECT_LT(cpu.rank_drops(i), cpu.steps(i)) << i;
  }

  // Step by step: the first change comes at the step that reaches, or
  // starts from, the first state of rank 2 by Eigen (its evaluations see
  // its start and its stages, not its end); the same for the first
  // marginal decision (a ratio within a factor 100 of rtol).
  Batch<ImpliedRowPendulum> steps = implied_row_batch();
  long first_marginal = -1, first_change = -1, eigen_marginal = -1, eigen_change = -1;
  for (long k = 1; k <= 500 && first_change < 0; ++k) {
    integrate(steps, Backend::cpu, free, 1);
    const double ratio = eigen_sigma_ratio(steps, 0);
    if (eigen_marginal < 0 && ratio > rtol / 100) eigen_marginal = k;
    if (eigen_change < 0 && ratio > rtol) eigen_change = k;
    if (first_marginal < 0 && steps.rank_marginal(0) > 0) first_marginal = k;
    if (steps.rank_changes(0) > 0) {
      first_change = k;
      // Every step before counts a drop; the changed one where its stages disagree.
      EXPECT_GE(steps.rank_drops(0), k - 1);
      EXPECT_LE(steps.rank_drops(0), k);
    }
  }
  ASSERT_GT(first_change, 10) << "guard: the change comes mid-run";
  EXPECT_TRUE(first_change == eigen_change || first_change == eigen_change + 1)
      << first_change << " vs Eigen " << eigen_change;
  EXPECT_TRUE(first_marginal == eigen_marginal || first_marginal == eigen_marginal + 1)
      << first_marginal << " vs Eigen " << eigen_marginal;
  EXPECT_LT(first_marginal, first_change);

  // expected_rank = 1: the step that changed the rank fails instead, the
  // state before it kept, alike on both backends.
  Batch<ImpliedRowPendulum> fc = implied_row_batch(), fr = implied_row_batch();
  RunOptions strict = free;
  strict.expected_rank = 1;
  expect_cpu_matches_reference(fc, fr, strict, 1e-12);
  EXPECT_EQ(fc.status(0), Status::failed_rank);
  EXPECT_EQ(fc.steps(0), first_change - 1);
  EXPECT_NEAR(fc.t_stop(0), dt * static_cast<double>(first_change - 1), 1e-9);
  EXPECT_EQ(fc.rank_changes(0), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fc.status(i), Status::failed_rank) << i;
  EXPECT_EQ(integrate(fc, Backend::cpu, strict).failed, 3) << "failed_rank is a failure";

  // Stabilised, the same systems return to the manifold and keep rank 1.
  for (Stabilization st : {Stabilization::baumgarte, Stabilization::projection}) {
    SCOPED_TRACE(to_string(st));
    Batch<ImpliedRowPendulum> sc = implied_row_batch(), sr = implied_row_batch();
    RunOptions held = strict;
    held.stabilization = st;
    expect_cpu_matches_reference(sc, sr, held, 1e-9);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(sc.status(i), Status::ok) << i;
      EXPECT_EQ(sc.rank_changes(i), 0) << i;
      EXPECT_EQ(sc.rank_drops(i), sc.steps(i)) << i;
    }
  }
}

}  // namespace
}  // namespace ukb::test
