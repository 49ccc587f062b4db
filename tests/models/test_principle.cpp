// Tiers 2 and 3 of docs/design.md section 4 for every built-in model: the
// properties of the Udwadia–Kalaba solution (A q'' = b, the work of the
// constraint force on null(A), Gauss's minimum principle, invariance to the
// square root of M and to the {1,4}-inverse), at consistent states, at states
// off the constraint manifold, with the model's C and with random C; and
// negative controls showing that wrong formulas fail these same checks.
#include "principle.hpp"

namespace ukb::test {
namespace {

constexpr double kTol = 1e-11;

template <class Mo>
int expected_rank() {
  return std::is_same_v<Mo, models::RedundantPendulum<double>> ? 1 : Mo::m;
}

// Checks of the reference's own outputs beyond q''.
template <class Mo>
void check_result_parts(const Problem& p, const reference::Result& r, const char* where) {
  SCOPED_TRACE(std::string(Mo::name) + " " + where);
  ASSERT_EQ(r.status, Status::ok);
  EXPECT_EQ(r.rank, expected_rank<Mo>());
  const VectorXd Qc = p.M * r.qdd - p.Q;
  const double scale = Qc.norm() + p.Q.norm() + p.C.norm() + 1e-300;
  EXPECT_LT((r.Qc_ideal + r.Qc_nonideal - Qc).norm() / scale, kTol);
  EXPECT_LT((p.A.transpose() * r.lambda - r.Qc_ideal).norm() / scale, kTol);
  const MatrixXd N = null_space(p.A);
  for (int j = 0; j < N.cols(); ++j) {
    EXPECT_LT(std::abs(N.col(j).dot(r.Qc_ideal)) / scale, kTol) << "ideal force does work";
    EXPECT_LT(std::abs(N.col(j).dot(r.Qc_nonideal - p.C)) / scale, kTol);
  }
}

void expect_ok(const Violations& v, const std::string& what) {
  EXPECT_LT(v.constraint, kTol) << what;
  EXPECT_LT(v.normal, kTol) << what;
  EXPECT_LT(v.work, kTol) << what;
  EXPECT_EQ(v.minimum, 0.0) << what;
  EXPECT_LT(v.sqrt_inv, kTol) << what;
  EXPECT_LT(v.inverse_inv, kTol) << what;
}

TEST(Principle, EveryModelAtConsistentStates) {
  for_each_model([]<class Mo>() {
    Rng rng(11);
    double max_qdd = 0, max_C = 0;
    for (int i = 0; i < 60; ++i) {
      const Sample<Mo> s = Gen<Mo>::consistent(rng);
      const auto [p, r] = model_problem<Mo>(s);
      check_result_parts<Mo>(p, r, "consistent");
      expect_ok(check_principle(p, r.qdd, rng), std::string(Mo::name) + " sample " + std::to_string(i));
      EXPECT_LT(r.constraint_residual, kTol * (1 + p.b.norm() + p.A.norm() * r.qdd.norm()));
      max_qdd = std::max(max_qdd, r.qdd.norm());
      max_C = std::max(max_C, p.C.norm());
    }
    // Guard: the data are not trivially zero.
    EXPECT_GT(max_qdd, 0.1) << Mo::name;
    if constexpr (!std::is_same_v<Mo, models::RollingSphere<double>>) {  // rolling does no work: C = 0
      EXPECT_GT(max_C, 0.01) << Mo::name;
    }
  });
}

TEST(Principle, EveryModelOffTheManifold) {
  for_each_model([]<class Mo>() {
    Rng rng(12);
    for (int i = 0; i < 60; ++i) {
      Sample<Mo> s = off_manifold(rng, Gen<Mo>::consistent(rng));
      if constexpr (std::is_same_v<Mo, models::RedundantPendulum<double>>) {
        // Its two rows agree only without radial velocity; keep the position
        // off the circle but remove the radial velocity half of the time.
        if (i % 2 == 0) s.qd -= s.q * (s.q.dot(s.qd) / s.q.squaredNorm());
      }
      const auto [p, r] = model_problem<Mo>(s);
      check_result_parts<Mo>(p, r, "off manifold");
      expect_ok(check_principle(p, r.qdd, rng), std::string(Mo::name) + " off-manifold sample " + std::to_string(i));
    }
  });
}

TEST(Principle, RedundantRowsInconsistentGiveLeastSquares) {
  // Off the manifold with radial velocity the two rows of the redundant
  // pendulum disagree: A q'' = b has no solution, and the pseudo-inverse
  // gives the least-squares one (A^T (A q'' - b) = 0) with a nonzero residual.
  using Mo = models::RedundantPendulum<double>;
  Rng rng(13);
  for (int i = 0; i < 40; ++i) {
    Sample<Mo> s = Gen<Mo>::consistent(rng);
    s.q *= rng.uniform(1.1, 1.5);
    s.qd += s.q * rng.uniform(0.5, 1.0);
    const auto [p, r] = model_problem<Mo>(s);
    ASSERT_FALSE(consistent(p));
    const Violations v = check_principle(p, r.qdd, rng);
    EXPECT_LT(v.normal, kTol);
    EXPECT_LT(v.work, kTol);
    EXPECT_LT(v.sqrt_inv, kTol);
    EXPECT_GT(r.constraint_residual, 1e-3);
  }
}

// The three accelerations of the negative controls, each a classic mistake.
struct Wrong {
  // C added to the ideal acceleration without projection.
  static VectorXd unprojected(const Problem& p) {
    const MatrixXd L = p.M.llt().matrixL();
    const VectorXd a = p.M.llt().solve(p.Q);
    const MatrixXd B = p.A * lu_inverse(L).transpose();
    const VectorXd ideal = a + lu_inverse(L.transpose()) * test_pinv(B) * (p.b - p.A * a);
    return ideal + p.M.llt().solve(p.C);
  }
  // C projected onto null(A) without the mass weighting.
  static VectorXd unweighted(const Problem& p) {
    const MatrixXd L = p.M.llt().matrixL();
    const VectorXd a = p.M.llt().solve(p.Q);
    const MatrixXd B = p.A * lu_inverse(L).transpose();
    const VectorXd ideal = a + lu_inverse(L.transpose()) * test_pinv(B) * (p.b - p.A * a);
    const MatrixXd P = MatrixXd::Identity(p.M.rows(), p.M.rows()) - test_pinv(p.A) * p.A;
    return ideal + p.M.llt().solve(P * p.C);
  }
  // The square root of M taken entry by entry on the diagonal.
  static VectorXd diagonal_root(const Problem& p) {
    const MatrixXd D = p.M.diagonal().cwiseSqrt().asDiagonal();
    const MatrixXd Di = lu_inverse(D);
    const VectorXd a = p.M.llt().solve(p.Q);
    const MatrixXd B = p.A * Di;
    const VectorXd c = Di * p.C;
    return a + Di * (c + test_pinv(B) * (p.b - p.A * a - B * c));
  }
};

// A random C with a component outside null(A): A M^{-1} C is not small.
template <class Mo>
VectorXd random_force(Rng& rng, const Problem& p) {
  for (;;) {
    const VectorXd C = rng.vector(Mo::n, -5, 5);
    if ((p.A * p.M.llt().solve(C)).norm() > 0.1 * p.A.norm() * C.norm() / p.M.norm()) return C;
  }
}

TEST(Principle, RandomNonidealForcesOnAndOffTheManifold) {
  for_each_model([]<class Mo>() {
    Rng rng(14);
    for (int i = 0; i < 60; ++i) {
      Sample<Mo> s = Gen<Mo>::consistent(rng);
      if (i % 2 == 1) s = off_manifold(rng, s);
      if constexpr (std::is_same_v<Mo, models::RedundantPendulum<double>>)
        s.qd -= s.q * (s.q.dot(s.qd) / s.q.squaredNorm());
      const reference::Terms k = reference::terms<Mo>(s.p, s.q, s.qd, s.t);
      Problem p{k.M, k.A, k.Q, k.b, VectorXd()};
      p.C = random_force<Mo>(rng, p);
      const reference::Result r =
          reference::solve(p.M, p.Q, p.A, p.b, [&](const VectorXd&, const VectorXd&) { return p.C; });
      check_result_parts<Mo>(p, r, "random C");
      expect_ok(check_principle(p, r.qdd, rng), std::string(Mo::name) + " random C sample " + std::to_string(i));
    }
  });
}

TEST(Principle, NegativeControlsFailTheSameChecks) {
  // Each wrong formula must be caught by check_principle: the checks can fail.
  // With M = m I the last two mistakes are harmless, and with a diagonal M
  // the diagonal root is the root: the models with other mass matrices
  // (two_link_arm and rolling_sphere: not diagonal; chaplygin_sleigh and
  // rolling_disk: diagonal, unequal) are the ones that catch them.
  int caught_unprojected = 0, caught_unweighted = 0, caught_diagonal = 0, trials_unweighted = 0,
      trials_diagonal = 0;
  for_each_model([&]<class Mo>() {
    Rng rng(15);
    for (int i = 0; i < 20; ++i) {
      const Sample<Mo> s = Gen<Mo>::consistent(rng);
      const reference::Terms k = reference::terms<Mo>(s.p, s.q, s.qd, s.t);
      Problem p{k.M, k.A, k.Q, k.b, VectorXd()};
      p.C = random_force<Mo>(rng, p);
      const Violations v_a = check_principle(p, Wrong::unprojected(p), rng);
      EXPECT_GT(v_a.constraint, 1e-3) << Mo::name << ": unprojected C must break A q'' = b";
      caught_unprojected += v_a.worst() > 1e-3;
      const Violations v_b = check_principle(p, Wrong::unweighted(p), rng);
      const Violations v_c = check_principle(p, Wrong::diagonal_root(p), rng);
      const MatrixXd off = p.M - MatrixXd(p.M.diagonal().asDiagonal());
      const bool diagonal = off.norm() == 0;
      const bool scalar = diagonal && (p.M.diagonal().array() == p.M(0, 0)).all();
      if (!scalar) {
        ++trials_unweighted;
        caught_unweighted += v_b.worst() > 1e-3;
      }
      if (!diagonal) {
        ++trials_diagonal;
        caught_diagonal += v_c.worst() > 1e-3;
      } else if (Mo::m == 1 || expected_rank<Mo>() == Mo::m) {
        EXPECT_LT(v_c.worst(), 1e-9) << Mo::name;
        if (scalar) {
          EXPECT_LT(v_b.worst(), 1e-9) << Mo::name;
        }
      }
    }
  });
  EXPECT_EQ(caught_unprojected, models::Builtin::size * 20);
  EXPECT_EQ(trials_unweighted, 4 * 20) << "two_link_arm, chaplygin_sleigh, rolling_disk, rolling_sphere";
  EXPECT_EQ(trials_diagonal, 2 * 20) << "two_link_arm, rolling_sphere";
  EXPECT_EQ(caught_unweighted, trials_unweighted);
  EXPECT_EQ(caught_diagonal, trials_diagonal);
}

TEST(Principle, NonDiagonalMassWithRankDeficientConstraints) {
  // The hardest case for the invariances: a dense random SPD M, a
  // rank-deficient A with consistent b, a random C. Here another
  // {1,4}-inverse really differs from B^+, so its invariance is tested.
  Rng rng(17);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 5, m = 3, rank = 2;
    const MatrixXd X = rng.matrix(n, n);
    Problem p;
    p.M = X * X.transpose() + 0.5 * MatrixXd::Identity(n, n);
    p.A = rng.matrix(m, rank) * rng.matrix(rank, n);
    p.b = p.A * rng.vector(n, -2, 2);  // consistent
    p.Q = rng.vector(n, -5, 5);
    p.C = rng.vector(n, -5, 5);
    const reference::Result r =
        reference::solve(p.M, p.Q, p.A, p.b, [&](const VectorXd&, const VectorXd&) { return p.C; });
    ASSERT_EQ(r.status, Status::ok);
    EXPECT_EQ(r.rank, rank);
    expect_ok(check_principle(p, r.qdd, rng), "trial " + std::to_string(trial));
    // Guard: another {1,4}-inverse is not B^+ itself here.
    const MatrixXd L = p.M.llt().matrixL();
    const MatrixXd B = p.A * lu_inverse(L).transpose(), Bp = test_pinv(B);
    const MatrixXd G = Bp + rng.matrix(n, m) * (MatrixXd::Identity(m, m) - B * Bp);
    EXPECT_GT((G - Bp).norm(), 0.01 * Bp.norm());
  }
}

TEST(Principle, SolutionIsTheUniqueMinimiserAmongAdmissibleAccelerations) {
  // Direct check of Gauss's principle on the two-link arm, where M is not
  // diagonal: every admissible x = q'' + v has a strictly larger G.
  using Mo = models::TwoLinkArm<double>;
  Rng rng(16);
  for (int i = 0; i < 50; ++i) {
    const Sample<Mo> s = Gen<Mo>::consistent(rng);
    const auto [p, r] = model_problem<Mo>(s);
    const MatrixXd N = null_space(p.A);
    ASSERT_EQ(N.cols(), 1);
    // (clang 14 cannot capture a structured binding: capture a reference)
    auto G = [&pr = p](const VectorXd& x) {
      const VectorXd e = pr.M * x - pr.Q - pr.C;
      return e.dot(pr.M.llt().solve(e));
    };
    for (double eps : {1e-3, 1e-2, 0.1, 1.0}) {
      EXPECT_GT(G(r.qdd + eps * N.col(0)), G(r.qdd));
      EXPECT_GT(G(r.qdd - eps * N.col(0)), G(r.qdd));
    }
  }
}

}  // namespace
}  // namespace ukb::test
