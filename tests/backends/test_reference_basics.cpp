// Tiers 1 and 2 for the reference solver itself: tiny cases checked by hand,
// the Penrose conditions of its pseudo-inverse, and its failure statuses.
#include <cstdio>
#include <limits>

#include "support.hpp"

namespace ukb::test {
namespace {

// The sanitizer build leaves Eigen's code uninstrumented and turns Eigen's
// own index and size checks on instead (cmake/sanitize_eigen.hpp, the
// reference backend's and the oracles' linear algebra): a coefficient
// outside a matrix's rows but inside its storage, which no sanitizer sees,
// stops the program with the stack that led to it.
TEST(SanitizerBuildDeathTest, EigenIndexErrorsStopTheProgram) {
  if (!sanitized) GTEST_SKIP() << "Eigen's own checks are on in the sanitizer build only (NDEBUG elsewhere)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        const MatrixXd m = MatrixXd::Zero(2, 2);
        volatile Eigen::Index row = 2;  // (2, 0): the third of the four stored coefficients
        std::printf("%g\n", m(row, 0));
      },
      "Eigen check failed: row");
}

TEST(PseudoInverse, OneByTwoByHand) {
  // [3 4]^+ = [3 4]^T / 25.
  int rank = -1;
  const MatrixXd P = reference::pseudo_inverse(MatrixXd{{3.0, 4.0}}, 1e-10, &rank);
  EXPECT_EQ(rank, 1);
  EXPECT_LT((P - MatrixXd{{0.12}, {0.16}}).norm(), 1e-15);
}

TEST(PseudoInverse, RankOneByHand) {
  // B = u v^T has B^+ = B^T / |B|_F^2; here |B|_F^2 = 25.
  int rank = -1;
  const MatrixXd B{{1.0, 2.0}, {2.0, 4.0}};
  const MatrixXd P = reference::pseudo_inverse(B, 1e-10, &rank);
  EXPECT_EQ(rank, 1);
  EXPECT_LT((P - B.transpose() / 25.0).norm(), 1e-15);
}

TEST(PseudoInverse, ZeroMatrixHasRankZero) {
  int rank = -1;
  const MatrixXd P = reference::pseudo_inverse(MatrixXd::Zero(2, 3), 1e-10, &rank);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(P.rows(), 3);
  EXPECT_EQ(P.cols(), 2);
  EXPECT_EQ(P.norm(), 0.0);
}

void expect_penrose(const MatrixXd& B, int expected_rank) {
  int rank = -1;
  const MatrixXd P = reference::pseudo_inverse(B, 1e-10, &rank);
  EXPECT_EQ(rank, expected_rank);
  const double s = B.norm() * P.norm();
  EXPECT_LT((B * P * B - B).norm() / B.norm(), 1e-13);
  EXPECT_LT((P * B * P - P).norm() / P.norm(), 1e-13);
  EXPECT_LT(((B * P).transpose() - B * P).norm() / s, 1e-13);
  EXPECT_LT(((P * B).transpose() - P * B).norm() / s, 1e-13);
}

TEST(PseudoInverse, PenroseConditionsFullRank) {
  Rng rng(1);
  for (const auto& [m, n] : {std::pair{1, 2}, {2, 2}, {3, 5}, {6, 12}, {12, 24}, {4, 3}}) {
    for (int i = 0; i < 20; ++i) expect_penrose(rng.matrix(m, n), std::min(m, n));
  }
}

TEST(PseudoInverse, PenroseConditionsRankDeficient) {
  Rng rng(2);
  for (const auto& [m, n, k] : {std::tuple{2, 2, 1}, {3, 5, 2}, {6, 12, 3}, {12, 24, 7}, {5, 3, 1}}) {
    for (int i = 0; i < 20; ++i) expect_penrose(rng.matrix(m, k) * rng.matrix(k, n), k);
  }
}

TEST(Solve, NonDiagonalMassByHand) {
  // M = [[2,1],[1,2]], Q = (1,0), constraint q1'' + q2'' = 0, C = (1,0).
  // Admissible q'' = (u,-u); the constraint force Qc = M q'' - Q = (u-1, -u)
  // must do on v = (1,-1) the work of C: (u - 1) + u = 1, so u = 1.
  // Ideal part (C = 0): u - 1 = -u, u = 1/2, Qc = (-1/2,-1/2) = A^T lambda.
  const MatrixXd M{{2.0, 1.0}, {1.0, 2.0}}, A{{1.0, 1.0}};
  const VectorXd Q{{1.0, 0.0}}, b{{0.0}}, C{{1.0, 0.0}};
  const reference::Result r =
      reference::solve(M, Q, A, b, [&](const VectorXd&, const VectorXd&) { return C; });
  ASSERT_EQ(r.status, Status::ok);
  EXPECT_EQ(r.rank, 1);
  EXPECT_LT((r.qdd - VectorXd{{1.0, -1.0}}).norm(), 1e-15);
  EXPECT_LT((r.Qc_ideal - VectorXd{{-0.5, -0.5}}).norm(), 1e-15);
  EXPECT_LT((r.Qc_nonideal - VectorXd{{0.5, -0.5}}).norm(), 1e-15);
  EXPECT_NEAR(r.lambda(0), -0.5, 1e-15);
}

TEST(Solve, ParticleOnAHorizontalLineByHand) {
  // Mass 2, gravity 9.81 and a push of 1 in x, constrained to y = 0:
  // q'' = (0.5, 0), the line pushes up with m g = 19.62 = lambda.
  const MatrixXd M = 2.0 * MatrixXd::Identity(2, 2), A{{0.0, 1.0}};
  const VectorXd Q{{1.0, -19.62}}, b{{0.0}};
  const reference::Result r = reference::solve(
      M, Q, A, b, [](const VectorXd&, const VectorXd&) { return VectorXd::Zero(2).eval(); });
  EXPECT_LT((r.qdd - VectorXd{{0.5, 0.0}}).norm(), 1e-15);
  EXPECT_NEAR(r.lambda(0), 19.62, 1e-13);
  EXPECT_LT((r.Qc_ideal - VectorXd{{0.0, 19.62}}).norm(), 1e-13);
}

TEST(Solve, FailureStatuses) {
  const MatrixXd A{{1.0, 0.0}};
  const VectorXd Q{{0.0, -1.0}}, b{{0.0}};
  const auto zero = [](const VectorXd&, const VectorXd&) { return VectorXd::Zero(2).eval(); };
  const double nan = std::numeric_limits<double>::quiet_NaN();

  const reference::Result indefinite = reference::solve(MatrixXd{{1.0, 0.0}, {0.0, -1.0}}, Q, A, b, zero);
  EXPECT_EQ(indefinite.status, Status::failed_mass_matrix);
  EXPECT_TRUE(indefinite.qdd.array().isNaN().all());

  const reference::Result singular = reference::solve(MatrixXd{{1.0, 1.0}, {1.0, 1.0}}, Q, A, b, zero);
  EXPECT_EQ(singular.status, Status::failed_mass_matrix);

  const reference::Result asym = reference::solve(MatrixXd{{2.0, 1.0}, {0.0, 2.0}}, Q, A, b, zero);
  EXPECT_EQ(asym.status, Status::failed_mass_matrix);

  const reference::Result nan_in = reference::solve(MatrixXd::Identity(2, 2), VectorXd{{nan, 0.0}}, A, b, zero);
  EXPECT_EQ(nan_in.status, Status::failed_nonfinite);

  const reference::Result nan_c = reference::solve(
      MatrixXd::Identity(2, 2), Q, A, b, [&](const VectorXd&, const VectorXd&) { return VectorXd{{nan, 0.0}}; });
  EXPECT_EQ(nan_c.status, Status::failed_nonfinite);

  const reference::Result ok = reference::solve(MatrixXd::Identity(2, 2), Q, A, b, zero);
  EXPECT_EQ(ok.status, Status::ok);
}

TEST(Solve, RankToleranceIsRelative) {
  // Two rows at a relative angle of 1e-12 count as one row (tolerance 1e-10),
  // whatever the overall scale; at 1e-6 they are two.
  for (double scale : {1e-6, 1.0, 1e6}) {
    const auto zero = [](const VectorXd&, const VectorXd&) { return VectorXd::Zero(2).eval(); };
    const MatrixXd M = MatrixXd::Identity(2, 2);
    const VectorXd Q{{0.0, -1.0}}, b{{0.0, 0.0}};
    const reference::Result near = reference::solve(M, Q, scale * MatrixXd{{1.0, 0.0}, {1.0, 1e-12}}, b, zero);
    EXPECT_EQ(near.rank, 1) << scale;
    const reference::Result apart = reference::solve(M, Q, scale * MatrixXd{{1.0, 0.0}, {1.0, 1e-6}}, b, zero);
    EXPECT_EQ(apart.rank, 2) << scale;
  }
}

}  // namespace
}  // namespace ukb::test
