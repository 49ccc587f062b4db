// The per-system kernels (kernels/ukb/kernels): hand-checked tiny cases, the
// Penrose conditions and rank decisions of the one-sided Jacobi
// pseudo-inverse against the reference's SVD, near-singular matrices.
#include <barrier>
#include <cstring>
#include <thread>
#include <vector>

#include "support.hpp"
#include "team_support.hpp"
#include "ukb/kernels/linalg.hpp"
#include "ukb/kernels/stabilize.hpp"
#include "ukb/kernels/team.hpp"
#include "ukb/kernels/uk.hpp"
#include "ukb/models/planar_chain.hpp"

namespace ukb::test {
namespace {

TEST(Kernels, CholeskyTwoByTwoByHand) {
  // [[4, 2], [2, 3]] = L L^T with L = [[2, 0], [1, sqrt(2)]].
  double A[4] = {4, 2, 2, 3}, rd[2];
  ASSERT_EQ(kernels::cholesky<2>(A, rd), 0);
  EXPECT_DOUBLE_EQ(A[0], 2.0);
  EXPECT_DOUBLE_EQ(A[2], 1.0);
  EXPECT_DOUBLE_EQ(A[3], std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(rd[0], 0.5);
  EXPECT_DOUBLE_EQ(rd[1], 1 / std::sqrt(2.0));
  // Solve M x = (2, 1): x = (0.5, 0).
  double x[2] = {2, 1};
  kernels::solve_lower<2>(A, rd, x);
  kernels::solve_lower_transpose<2>(A, rd, x);
  EXPECT_NEAR(x[0], 0.5, 1e-15);
  EXPECT_NEAR(x[1], 0.0, 1e-15);
}

TEST(Kernels, CholeskyReportsTheFailingPivot) {
  double indefinite[4] = {1, 2, 2, 1};  // second pivot 1 - 4 < 0
  EXPECT_EQ(kernels::cholesky<2>(indefinite), 2);
  double negative[4] = {-1, 0, 0, 1};
  EXPECT_EQ(kernels::cholesky<2>(negative), 1);
  double nan[4] = {std::nan(""), 0, 0, 1};
  EXPECT_EQ(kernels::cholesky<2>(nan), 1);
}

// A random symmetric positive definite 12 x 12 matrix (eigenvalues >= 0.1).
MatrixXd random_spd(Rng& rng) {
  const MatrixXd X = rng.matrix(12, 12);
  return X * X.transpose() + 0.1 * MatrixXd::Identity(12, 12);
}

TEST(Kernels, CholeskyMatchesEigenOnRandomSpdMatrices) {
  Rng rng(61);
  for (int trial = 0; trial < 50; ++trial) {
    const MatrixXd M = random_spd(rng);
    Eigen::Matrix<double, 12, 12, Eigen::RowMajor> A = M;
    ASSERT_EQ(kernels::cholesky<12>(A.data()), 0);
    const MatrixXd L = A.triangularView<Eigen::Lower>();
    EXPECT_LT((L * L.transpose() - M).norm() / M.norm(), 1e-14);
  }
}

// X <- X L^{-T} for several rows at once: X L^T gives back the rows (to
// round-off), and each row is bitwise the single-row forward substitution.
TEST(Kernels, TriangularSolvesOfSeveralRowsAtOnce) {
  Rng rng(62);
  for (int trial = 0; trial < 20; ++trial) {
    Eigen::Matrix<double, 12, 12, Eigen::RowMajor> A = random_spd(rng);
    double rd[12];
    ASSERT_EQ(kernels::cholesky<12>(A.data(), rd), 0);
    const MatrixXd L = A.triangularView<Eigen::Lower>();
    Eigen::Matrix<double, 5, 12, Eigen::RowMajor> X0 = rng.matrix(5, 12), X = X0, Xs = X0;
    kernels::solve_lower_rows<12, 5>(A.data(), rd, X.data());
    for (int r = 0; r < 5; ++r) kernels::solve_lower<12>(A.data(), rd, Xs.data() + 12 * r);
    EXPECT_LT((MatrixXd(X) * L.transpose() - MatrixXd(X0)).norm() / X0.norm(), 1e-13);
    for (int k = 0; k < 60; ++k) EXPECT_EQ(X.data()[k], Xs.data()[k]) << k;
  }
}

TEST(Kernels, PinvOneByTwoByHand) {
  const double B[2] = {3, 4};
  kernels::PseudoInverse<1, 2, double> p;
  p.factor(B, 1e-10);
  EXPECT_EQ(p.rank, 1);
  const double y[1] = {25};
  double x[2];
  p.apply(y, x);  // [3 4]^+ 25 = (3, 4)
  EXPECT_NEAR(x[0], 3.0, 1e-14);
  EXPECT_NEAR(x[1], 4.0, 1e-14);
  double g[1];
  p.apply_gram(y, g);  // (B B^T)^+ 25 = 1
  EXPECT_NEAR(g[0], 1.0, 1e-15);
}

// Materialises the R x M matrix of a linear map y -> x column by column.
template <int R, int M, class Apply>
MatrixXd matrix_of(Apply&& apply) {
  MatrixXd P(R, M);
  for (int c = 0; c < M; ++c) {
    double e[M] = {}, x[R];
    e[c] = 1;
    apply(e, x);
    for (int k = 0; k < R; ++k) P(k, c) = x[k];
  }
  return P;
}

// Penrose residuals grow with the condition number kappa of the kept part.
template <int M, int N>
void check_against_reference(const MatrixXd& B, double rtol, double kappa = 1) {
  const double tol = 1e-13 + 1e-15 * kappa;
  Eigen::Matrix<double, M, N, Eigen::RowMajor> Br = B;
  kernels::PseudoInverse<M, N, double> p;
  p.factor(Br.data(), rtol);
  int ref_rank = -1;
  const MatrixXd Pref = reference::pseudo_inverse(B, rtol, &ref_rank);
  ASSERT_EQ(p.rank, ref_rank);
  EXPECT_LT(p.sweeps, 40) << "Jacobi did not converge";
  const MatrixXd P = matrix_of<N, M>([&](const double* y, double* x) { p.apply(y, x); });
  // Penrose conditions.
  const double s = B.norm() * P.norm();
  EXPECT_LT((B * P * B - B).norm() / B.norm(), tol);
  EXPECT_LT((P * B * P - P).norm() / P.norm(), tol);
  EXPECT_LT(((B * P).transpose() - B * P).norm() / s, tol);
  EXPECT_LT(((P * B).transpose() - P * B).norm() / s, tol);
  // Same matrix as the reference, to the conditioning of the kept part.
  EXPECT_LT((P - Pref).norm() / Pref.norm(), 1e-9);
  // (B B^T)^+ from apply_gram.
  const MatrixXd G = matrix_of<M, M>([&](const double* y, double* x) { p.apply_gram(y, x); });
  EXPECT_LT((G - Pref.transpose() * Pref).norm() / G.norm(), 1e-9);
}

TEST(Kernels, PinvMatchesReferenceFullRankAndRankDeficient) {
  Rng rng(62);
  for (int trial = 0; trial < 20; ++trial) {
    check_against_reference<1, 2>(rng.matrix(1, 2), 1e-10);
    check_against_reference<3, 6>(rng.matrix(3, 6), 1e-10);
    check_against_reference<6, 12>(rng.matrix(6, 12), 1e-10);
    check_against_reference<12, 24>(rng.matrix(12, 24), 1e-10);
    check_against_reference<2, 2>(rng.matrix(2, 1) * rng.matrix(1, 2), 1e-10);
    check_against_reference<6, 12>(rng.matrix(6, 3) * rng.matrix(3, 12), 1e-10);
    check_against_reference<12, 24>(rng.matrix(12, 7) * rng.matrix(7, 24), 1e-10);
  }
}

// B = U diag(s) V^T (rows x cols) with random orthogonal U and V: the
// singular values s exactly, up to rounding.
MatrixXd rotated_diagonal(Rng& rng, int rows, int cols, const std::vector<double>& s) {
  const Eigen::HouseholderQR<MatrixXd> qu(rng.matrix(rows, rows)), qv(rng.matrix(cols, cols));
  const MatrixXd U = qu.householderQ(), V = qv.householderQ();
  MatrixXd S = MatrixXd::Zero(rows, cols);
  for (std::size_t i = 0; i < s.size(); ++i) S(Eigen::Index(i), Eigen::Index(i)) = s[i];
  return U * S * V.transpose();
}

TEST(Kernels, PinvNearSingularRankDecisionFollowsTheTolerance) {
  // B = U diag(1, ..., 1, s) V^T with s below and above the tolerance 1e-10.
  Rng rng(63);
  for (double s : {1e-6, 1e-9, 1e-11, 1e-13}) {
    for (int trial = 0; trial < 10; ++trial) {
      const MatrixXd B = rotated_diagonal(rng, 3, 6, {1, 0.5, s});
      Eigen::Matrix<double, 3, 6, Eigen::RowMajor> Br = B;
      kernels::PseudoInverse<3, 6, double> p;
      p.factor(Br.data(), 1e-10);
      EXPECT_EQ(p.rank, s > 1e-10 ? 3 : 2) << "s = " << s;
      int ref_rank = -1;  // the reference applies the same relative rule
      reference::pseudo_inverse(B, 1e-10, &ref_rank);
      EXPECT_EQ(ref_rank, p.rank) << "s = " << s;
      // Kept: condition 1/s; dropped: the kept part has condition 2.
      if (s > 1e-8) check_against_reference<3, 6>(B, 1e-10, 1 / s);
      if (s < 1e-12) check_against_reference<3, 6>(B, 1e-10, 2);
    }
  }
}

// A rank decision is marginal where a singular value lies within a factor
// 100 of the cut rtol * s_max, either side (docs/outputs.md, rank_marginal;
// the factor written here as documented, not taken from policy.hpp): B =
// U diag(1, 0.5, s) V^T with rtol = 1e-6, s at a factor 2 inside and
// outside each edge of the band (1e-8, 1e-4] around the cut 1e-6. Rank: s
// is kept above the cut. The Gram route never decides marginally; here it
// cannot certify these conditions (1 / s^2 > 1.6e5), so Jacobi decides.
TEST(Kernels, PinvMarginalDecisionsAreThoseWithinAFactorHundredOfTheCut) {
  constexpr double rtol = 1e-6, documented_margin = 100;
  Rng rng(101);
  struct Case {
    double s;
    bool marginal;
  };
  const double cut = rtol;
  for (const Case c : {Case{cut / documented_margin / 2, false}, Case{cut / documented_margin * 2, true},
                       Case{cut / 2, true}, Case{cut * 2, true}, Case{cut * documented_margin / 2, true},
                       Case{cut * documented_margin * 2, false}}) {
    for (int trial = 0; trial < 5; ++trial) {
      const Eigen::Matrix<double, 3, 6, Eigen::RowMajor> B = rotated_diagonal(rng, 3, 6, {1, 0.5, c.s});
      kernels::PseudoInverse<3, 6, double> p;
      p.factor(B.data(), rtol);
      EXPECT_FALSE(p.gram) << "s = " << c.s;
      EXPECT_EQ(p.marginal, c.marginal) << "s = " << c.s;
      EXPECT_EQ(p.rank, c.s > cut ? 3 : 2) << "s = " << c.s;
    }
  }
}

// B = U diag(s) V^T (M x N) with singular values from 1 down to 1/cond, the
// last `deficient` of them exactly zero.
MatrixXd with_singular_values(Rng& rng, int M, int N, double cond, int deficient) {
  const int r = M - deficient;
  std::vector<double> s(std::size_t(M), 0.0);
  for (int i = 0; i < r; ++i) s[std::size_t(i)] = std::pow(cond, -double(i) / std::max(1, r - 1));
  return rotated_diagonal(rng, M, N, s);
}

// The Gram–Cholesky route is taken exactly where its certificate holds
// (kappa(G) = cond^2 well below 1.6e5 / M^2), and then gives the reference's
// rank and pseudo-inverse as closely as the Jacobi route does.
template <int M, int N>
void check_routes(Rng& rng) {
  struct Case {
    double cond;
    int deficient;
    bool gram;
  };
  for (const Case c : {Case{2, 0, true}, Case{10, 0, true}, Case{1e4, 0, false}, Case{10, 1, false}}) {
    for (int trial = 0; trial < 10; ++trial) {
      const MatrixXd B = with_singular_values(rng, M, N, c.cond, c.deficient);
      Eigen::Matrix<double, M, N, Eigen::RowMajor> Br = B;
      kernels::PseudoInverse<M, N, double> fast, jacobi;
      fast.factor(Br.data(), 1e-10);
      jacobi.factor(Br.data(), 1e-10, false);
      EXPECT_EQ(fast.gram, c.gram) << M << "x" << N << " cond " << c.cond << " deficient " << c.deficient;
      EXPECT_FALSE(jacobi.gram);
      EXPECT_EQ(fast.rank, jacobi.rank);
      check_against_reference<M, N>(B, 1e-10, c.cond);
      const MatrixXd Pf = matrix_of<N, M>([&](const double* y, double* x) { fast.apply(y, x); });
      const MatrixXd Pj = matrix_of<N, M>([&](const double* y, double* x) { jacobi.apply(y, x); });
      EXPECT_LT((Pf - Pj).norm() / Pj.norm(), 1e-14 * c.cond * c.cond);
      const MatrixXd Gf = matrix_of<M, M>([&](const double* y, double* x) { fast.apply_gram(y, x); });
      const MatrixXd Gj = matrix_of<M, M>([&](const double* y, double* x) { jacobi.apply_gram(y, x); });
      EXPECT_LT((Gf - Gj).norm() / Gj.norm(), 1e-14 * c.cond * c.cond);
    }
  }
}

TEST(Kernels, PinvGramRouteOnlyWhereCertified) {
  Rng rng(64);
  check_routes<2, 2>(rng);
  check_routes<3, 6>(rng);
  check_routes<6, 12>(rng);
  check_routes<12, 24>(rng);
}

TEST(Kernels, PinvGramRouteRespectsALargeRankTolerance) {
  // cond 10 is certified at rtol 1e-10, but not at rtol 0.05 where s_min =
  // 0.1 s_max is within the margin of the cut: Jacobi decides (rank 6).
  Rng rng(65);
  const MatrixXd B = with_singular_values(rng, 6, 12, 10, 0);
  Eigen::Matrix<double, 6, 12, Eigen::RowMajor> Br = B;
  kernels::PseudoInverse<6, 12, double> p;
  p.factor(Br.data(), 0.05);
  EXPECT_FALSE(p.gram);
  EXPECT_EQ(p.rank, 6);
  p.factor(Br.data(), 0.12);  // s_min = 0.1 s_max is now dropped (the next is 0.16)
  EXPECT_FALSE(p.gram);
  EXPECT_EQ(p.rank, 5);
}

// kappa(G) = 20^2 = 400: beyond what a float Gram matrix could certify
// (eps^{-1/3} = 200), well within the double Gram route's 1.6e5 (the bound
// is at most M^2 * 400). The float route computes
// G, its factor and the solves in double: B^+ and (B B^T)^+ of the float
// matrix to float accuracy, as float Jacobi gets them.
template <int M, int N>
void check_float_gram_in_double(Rng& rng) {
  constexpr double cond = 20, eps = std::numeric_limits<float>::epsilon();
  for (int trial = 0; trial < 10; ++trial) {
    const Eigen::Matrix<float, M, N, Eigen::RowMajor> Bf = with_singular_values(rng, M, N, cond, 0).template cast<float>();
    const MatrixXd B = Bf.template cast<double>();  // the float matrix, exactly
    const Eigen::JacobiSVD<MatrixXd> svd(B, Eigen::ComputeThinU | Eigen::ComputeThinV);
    const MatrixXd P = svd.solve(MatrixXd::Identity(M, M));             // B^+
    const MatrixXd Gi = (B * B.transpose()).inverse();                    // (B B^T)^+
    kernels::PseudoInverse<M, N, float> fast, jacobi;
    fast.factor(Bf.data(), 1e-5f);
    jacobi.factor(Bf.data(), 1e-5f, false);
    EXPECT_TRUE(fast.gram);
    EXPECT_TRUE(fast.gram_wide);
    EXPECT_EQ(fast.rank, M);
    EXPECT_EQ(jacobi.rank, M);
    // f (float in, K floats out) on double vectors.
    const auto as_double = []<int K>(std::integral_constant<int, K>, auto f) {
      return [f](const double* y, double* x) {
        float yf[M], xf[K];
        for (int i = 0; i < M; ++i) yf[i] = float(y[i]);
        f(yf, xf);
        for (int i = 0; i < K; ++i) x[i] = xf[i];
      };
    };
    const std::integral_constant<int, N> cols;
    const std::integral_constant<int, M> rows;
    const MatrixXd Pf = matrix_of<N, M>(as_double(cols, [&](const float* y, float* x) { fast.apply(y, x); }));
    const MatrixXd Pj = matrix_of<N, M>(as_double(cols, [&](const float* y, float* x) { jacobi.apply(y, x); }));
    const double err_gram = (Pf - P).norm() / P.norm(), err_jacobi = (Pj - P).norm() / P.norm();
    EXPECT_LT(err_gram, 20 * cond * eps) << "trial " << trial;
    EXPECT_LT(err_jacobi, 20 * cond * eps) << "trial " << trial;
    const MatrixXd Gf = matrix_of<M, M>(as_double(rows, [&](const float* y, float* x) { fast.apply_gram(y, x); }));
    EXPECT_LT((Gf - Gi).norm() / Gi.norm(), 20 * cond * eps) << "trial " << trial;
  }
}

TEST(Kernels, PinvInFloatTakesTheGramRouteInDoubleWhereCertified) {
  Rng rng(66);
  check_float_gram_in_double<6, 12>(rng);
  check_float_gram_in_double<12, 24>(rng);
}

// The certificate's bounds, trace(G) ||L^-1||_F^2 and min(trace G,
// ||L||_1 ||L||_inf) min(||L^-1||_F^2, ||L^-1||_1 ||L^-1||_inf), are
// never below kappa(G): a B whose kappa(G) is
// just above the limit (200 in float, 1.6e5 in double) never takes the
// Gram route in that arithmetic, whatever its singular vectors.
template <int M, int N>
void check_bound_holds(Rng& rng) {
  for (int trial = 0; trial < 50; ++trial) {
    const MatrixXd Bd = with_singular_values(rng, M, N, std::sqrt(1.05 * 1.6e5), 0);
    Eigen::Matrix<double, M, N, Eigen::RowMajor> Br = Bd;
    kernels::PseudoInverse<M, N, double> d;
    d.factor(Br.data(), 1e-10);
    EXPECT_FALSE(d.gram) << M << "x" << N << " trial " << trial;
    const Eigen::Matrix<float, M, N, Eigen::RowMajor> Bf =
        with_singular_values(rng, M, N, std::sqrt(1.05 * 200), 0).template cast<float>();
    kernels::PseudoInverse<M, N, float> f;
    f.factor(Bf.data(), 1e-5f);
    EXPECT_TRUE(!f.gram || f.gram_wide) << M << "x" << N << " trial " << trial;
  }
}

TEST(Kernels, PinvCertificateBoundIsNeverBelowTheCondition) {
  Rng rng(67);
  check_bound_holds<2, 4>(rng);
  check_bound_holds<6, 12>(rng);
  check_bound_holds<12, 24>(rng);
}

// And it is sharp where the structure allows: the 12-link chain's B = A
// (m = 1) at the states of the W3 workload (angles in [-1, 1]) has kappa(G)
// of a few tens (the 1- and inf-norms follow the band of G and L; the trace
// and the Frobenius norm give about 250), so float keeps the Gram route in
// float.
TEST(Kernels, PinvInFloatKeepsTwelveLinkChainsOnTheFloatGramRoute) {
  using Mo = models::PlanarChain<float, 12>;
  std::mt19937_64 g(68);
  std::uniform_real_distribution<double> angle(-1, 1);
  for (int trial = 0; trial < 50; ++trial) {
    float q[Mo::n], qd[Mo::n] = {}, A[Mo::m * Mo::n], b[Mo::m];
    double x = 0, y = 0;
    for (int k = 0; k < 12; ++k) {
      const double th = angle(g);
      x += std::sin(th), y -= std::cos(th);
      q[2 * k] = float(x), q[2 * k + 1] = float(y);
    }
    Mo::constraints(q, qd, 0.f, Mo::Params{}, A, b);
    const Eigen::Map<const Eigen::Matrix<float, Mo::m, Mo::n, Eigen::RowMajor>> B(A);
    const Eigen::JacobiSVD<MatrixXd> svd(B.cast<double>());
    const double kappa = std::pow(svd.singularValues()(0) / svd.singularValues()(Mo::m - 1), 2);
    ASSERT_LT(kappa, 100) << "guard: a well-conditioned chain, trial " << trial;
    kernels::PseudoInverse<Mo::m, Mo::n, float> p;
    p.factor(A, 1e-5f);
    EXPECT_TRUE(p.gram && !p.gram_wide) << "trial " << trial << ", kappa(G) " << kappa;
  }
}

TEST(Kernels, PinvInFloatKeepsDependentRowsOut) {
  // Two proportional rows in float: rank 1 at the float default 1e-5.
  const float B[4] = {0.6f, 0.8f, 0.6f / 0.7f, 0.8f / 0.7f};
  kernels::PseudoInverse<2, 2, float> p;
  p.factor(B, 1e-5f);
  EXPECT_EQ(p.rank, 1);
}

// Chains longer than the built-in ones (planar_chain_24 and _48: the
// workloads W5 and W6 of bench/README, issue 22's crossover study): the
// shared per-system Udwadia–Kalaba kernel agrees with the reference (Eigen,
// dynamic sizes, Jacobi SVD) at random consistent states with damping, in
// double and in float (the float state rounded, the reference in double at
// the rounded state), and keeps the Gram route of its own precision: float
// must not fall back to double or to Jacobi for these well-conditioned
// chains. Measured: relative errors up to 3e-15 in double and 9e-7 in float
// (K = 48); the bounds leave two to three orders of magnitude for other
// compilers' rounding.
template <class T, int K>
void check_long_chain(std::uint64_t seed, double rtol) {
  using Mo = models::PlanarChain<T, K>;
  using Md = models::PlanarChain<double, K>;
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int trial = 0; trial < 10; ++trial) {
    double ic[2 * K], q[Md::n], qd[Md::n];
    for (double& x : ic) x = u(g);
    typename Md::Params pd;
    pd.c = 0.1;
    ASSERT_TRUE(Md::initial_state(ic, pd, q, qd));
    T qt[Mo::n], qdt[Mo::n];
    for (int i = 0; i < Mo::n; ++i) {
      qt[i] = T(q[i]), qdt[i] = T(qd[i]);
      q[i] = double(qt[i]), qd[i] = double(qdt[i]);
    }
    typename Mo::Params p;
    p.c = T(0.1);
    kernels::Accel<Mo> a;
    ASSERT_EQ(kernels::uk_accel<Mo>(qt, qdt, T(0), p, policy::default_rank_rtol<T>(), a), Status::ok);
    EXPECT_EQ(a.rank, K);
    const reference::Result r = reference::evaluate<Md>(pd, Eigen::Map<const Eigen::VectorXd>(q, Md::n),
                                                        Eigen::Map<const Eigen::VectorXd>(qd, Md::n), 0.0);
    ASSERT_EQ(r.status, Status::ok);
    EXPECT_EQ(r.rank, K);
    const auto rel = [](const T* x, const Eigen::VectorXd& y) {
      return (Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(x, y.size()).template cast<double>() - y)
                 .template lpNorm<Eigen::Infinity>() /
             y.template lpNorm<Eigen::Infinity>();
    };
    EXPECT_LT(rel(a.qdd, r.qdd), rtol) << Mo::name << ", trial " << trial;
    EXPECT_LT(rel(a.Qc_ideal, r.Qc_ideal), rtol) << Mo::name << ", trial " << trial;
    EXPECT_LT(rel(a.Qc_nonideal, r.Qc_nonideal), rtol) << Mo::name << ", trial " << trial;
    EXPECT_LT(rel(a.lambda, r.lambda), rtol) << Mo::name << ", trial " << trial;
    // The route: B = A L^{-T} of this state, factored as uk_accel does.
    T L[Mo::n * Mo::n], rd[Mo::n], B[Mo::m * Mo::n], b[Mo::m];
    Mo::mass(qt, T(0), p, L);
    ASSERT_EQ(kernels::cholesky<Mo::n>(L, rd), 0);
    Mo::constraints(qt, qdt, T(0), p, B, b);
    kernels::solve_lower_rows<Mo::n, Mo::m>(L, rd, B);
    kernels::PseudoInverse<Mo::m, Mo::n, T> pinv;
    pinv.factor(B, policy::default_rank_rtol<T>());
    EXPECT_TRUE(pinv.gram && !pinv.gram_wide) << Mo::name << ", trial " << trial;
  }
}

TEST(Kernels, LongChainsAgreeWithTheReferenceOnTheirOwnGramRoute) {
  check_long_chain<double, 24>(81, 1e-12);
  check_long_chain<float, 24>(83, 1e-4);
  // Under the sanitizers the 24-link chain alone: the same code at another
  // size (as for_each_model_template's one model of each kind), and each
  // size's dense 96 x 96 Cholesky and reference is a compile of its own.
  if constexpr (!sanitized) {
    check_long_chain<double, 48>(82, 1e-12);
    check_long_chain<float, 48>(84, 1e-4);
  }
}

// --- Diagonal mass matrices (MassFactor; a model's mass_diagonal): the
// diagonal factor against the dense one of the same matrix, which is the
// truth here: its extra terms are products with exact zeros.

// D (N, the diagonal) through MassFactor<N, T, true> and diag(D) through
// the dense MassFactor: the same result, factor and products (up to the
// sign of a zero, which == does not see).
template <int N>
void check_diagonal_factor(const double* D, const VectorXd& x, const MatrixXd& X, const char* what) {
  kernels::MassFactor<N, double, true> dg;
  kernels::MassFactor<N, double, false> dn;
  for (int i = 0; i < N; ++i) {
    dg.L[i] = D[i];
    for (int j = 0; j < N; ++j) dn.L[i * N + j] = i == j ? D[i] : 0.0;
  }
  EXPECT_EQ(bool(dg.finite()), bool(dn.finite())) << what;
  const int info = dn.factor(kernels::mass_pivot_rtol<N, double>());
  ASSERT_EQ(dg.factor(kernels::mass_pivot_rtol<N, double>()), info) << what;
  if (info != 0) return;
  for (int i = 0; i < N; ++i) {
    EXPECT_EQ(dg.L[i], dn.L[i * N + i]) << what << ", L_" << i;
    EXPECT_EQ(dg.rd[i], dn.rd[i]) << what << ", 1 / L_" << i;
  }
  double a[N], b[N], c[N], d[N], ya[N], yb[N];
  for (int i = 0; i < N; ++i) a[i] = b[i] = c[i] = d[i] = x(i);
  dg.solve(a), dn.solve(b), dg.solve_transpose(c), dn.solve_transpose(d);
  dg.mul(x.data(), ya), dn.mul(x.data(), yb);
  for (int i = 0; i < N; ++i) {
    EXPECT_EQ(a[i], b[i]) << what << ", L^-1 x at " << i;
    EXPECT_EQ(c[i], d[i]) << what << ", L^-T x at " << i;
    EXPECT_EQ(ya[i], yb[i]) << what << ", L x at " << i;
  }
  constexpr int R = 3;
  double Xa[R * N], Xb[R * N];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < N; ++i) Xa[r * N + i] = Xb[r * N + i] = X(r, i);
  dg.template solve_rows<R>(Xa), dn.template solve_rows<R>(Xb);
  for (int k = 0; k < R * N; ++k) EXPECT_EQ(Xa[k], Xb[k]) << what << ", X L^-T at " << k;
}

TEST(Kernels, DiagonalMassFactorIsTheDenseFactorOfTheSameMatrix) {
  Rng rng(91);
  constexpr int N = 7;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (int trial = 0; trial < 200; ++trial) {
    double D[N];
    // Masses over 24 decades; zeros, signs and scales of x mixed.
    for (int i = 0; i < N; ++i) D[i] = std::pow(10.0, rng.uniform(-12, 12));
    VectorXd x = rng.vector(N, -1, 1) * std::pow(10.0, rng.uniform(-6, 6));
    if (trial % 3 == 0) x(trial % N) = 0.0;
    check_diagonal_factor<N>(D, x, rng.matrix(3, N), "positive");
  }
  // A failing pivot at each position, of each kind: the same index.
  const VectorXd x = VectorXd::Ones(N);
  for (const double bad : {0.0, -0.0, -1.0, nan, inf, -inf})
    for (int k = 0; k < N; ++k) {
      double D[N];
      for (int i = 0; i < N; ++i) D[i] = i == k ? bad : 2.0;
      check_diagonal_factor<N>(D, x, MatrixXd::Ones(3, N), "a bad pivot");
    }
}

// The model as it is, with its mass_diagonal (and constraint_columns, which
// needs it) hidden: the kernels then factor all of `mass` and take every
// column of A.
template <class Mo>
struct DenseMass : Mo {
  template <class... A>
  static void mass_diagonal(A...) = delete;
  static constexpr int constraint_columns = 0;
};

// One evaluation of a model and of Ref, the same model with a hook hidden
// (DenseMass; FullRows below): the same status and outputs (up to the
// sign of a zero).
template <class Mo, class Ref = DenseMass<Mo>>
void expect_same_accel(const typename Mo::Scalar* q, const typename Mo::Scalar* qd, typename Mo::Scalar t,
                       const typename Mo::Params& p, const Baumgarte<typename Mo::Scalar>& bg, const std::string& what) {
  using T = typename Mo::Scalar;
  static_assert(!HasDiagonalMass<DenseMass<Mo>> && !HasConstraintColumns<DenseMass<Mo>>);
  kernels::Accel<Mo> a;
  kernels::Accel<Ref> b;
  const Status sa = kernels::uk_accel<Mo>(q, qd, t, p, policy::default_rank_rtol<T>(), a, bg);
  const Status sb = kernels::uk_accel<Ref>(q, qd, t, p, policy::default_rank_rtol<T>(), b, bg);
  ASSERT_EQ(sa, sb) << what;
  if (sa != Status::ok) return;
  EXPECT_EQ(a.rank, b.rank) << what;
  EXPECT_EQ(a.inconsistent, b.inconsistent) << what;
  EXPECT_EQ(a.marginal, b.marginal) << what;
  for (int i = 0; i < Mo::n; ++i) {
    EXPECT_EQ(a.qdd[i], b.qdd[i]) << what << ", q''_" << i;
    EXPECT_EQ(a.Qc_ideal[i], b.Qc_ideal[i]) << what << ", Qc_ideal_" << i;
    EXPECT_EQ(a.Qc_nonideal[i], b.Qc_nonideal[i]) << what << ", Qc_nonideal_" << i;
  }
  for (int i = 0; i < Mo::m; ++i) EXPECT_EQ(a.lambda[i], b.lambda[i]) << what << ", lambda_" << i;
}

// The projection's mass-weighted correction of a random residual, J = A, of
// a model (in double) and of Ref: the same status and dx.
template <class Mo, class Ref = DenseMass<Mo>>
void expect_same_correction(Rng& rng, const Sample<Mo>& s, const std::string& what) {
  constexpr int n = Mo::n, m = Mo::m;
  double J[m * n], Jr[m * n], b[m], e[m], dx[n], dxr[n];
  Mo::constraints(s.q.data(), s.qd.data(), s.t, s.p, J, b);
  for (int k = 0; k < m * n; ++k) Jr[k] = J[k];
  for (int i = 0; i < m; ++i) e[i] = rng.uniform(-1e-3, 1e-3);
  const double rtol = policy::default_rank_rtol<double>();
  const Status ca = kernels::mass_weighted_correction<Mo>(s.q.data(), s.t, s.p, J, e, rtol, dx);
  const Status cb = kernels::mass_weighted_correction<Ref>(s.q.data(), s.t, s.p, Jr, e, rtol, dxr);
  ASSERT_EQ(ca, cb) << what;
  if (ca == Status::ok) {
    for (int k = 0; k < n; ++k) EXPECT_EQ(dx[k], dxr[k]) << what << ", dx_" << k;
  }
}

// Every built-in model that gives M's diagonal: uk_accel and the
// projection's mass-weighted correction as with the dense factor, at
// consistent states and off them, with Baumgarte stabilisation, and where M
// cannot be factored (a mass of 0, -1, NaN).
TEST(Kernels, DiagonalMassModelsEvaluateAsTheirDenseSelves) {
  Rng rng(92);
  int models = 0;
  for_each_model_or_kind([&]<class Mo>() {
    if constexpr (HasDiagonalMass<Mo>) {
      ++models;
      for (int trial = 0; trial < 40; ++trial) {
        Sample<Mo> s = Gen<Mo>::consistent(rng);
        if (trial % 2) s = off_manifold(rng, s);
        const std::string what = std::string(Mo::name) + ", trial " + std::to_string(trial);
        expect_same_accel<Mo>(s.q.data(), s.qd.data(), s.t, s.p, {}, what);
        if constexpr (HasConstraintRows<Mo>)
          expect_same_accel<Mo>(s.q.data(), s.qd.data(), s.t, s.p, {true, 3.0, 4.0, 5.0}, what + ", Baumgarte");
        expect_same_correction<Mo>(rng, s, what);
      }
      // A mass that cannot be factored: the same failure, from either.
      for (const double mass : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
        Sample<Mo> s = Gen<Mo>::consistent(rng);
        int set = 0;
        Mo::visit_params(s.p, [&](const char* name, double& v, const char*) {
          if (std::string(name) == "m") v = mass, ++set;
        });
        ASSERT_EQ(set, 1) << Mo::name << " has a parameter m";
        kernels::Accel<Mo> a;
        const Status st = kernels::uk_accel<Mo>(s.q.data(), s.qd.data(), s.t, s.p, 1e-10, a);
        EXPECT_EQ(st, std::isnan(mass) ? Status::failed_nonfinite : Status::failed_mass_matrix) << Mo::name << ", m = " << mass;
        expect_same_accel<Mo>(s.q.data(), s.qd.data(), s.t, s.p, {}, std::string(Mo::name) + ", m = " + std::to_string(mass));
      }
    }
  });
  EXPECT_EQ(models, sanitized ? 4 : 10)
      << "every built-in model with a diagonal M gives it (all but two_link_arm and rolling_sphere; ModelKinds' but "
         "rolling_sphere under the sanitizers)";
}

// In float too, through the mixed-precision Gram route of the chains.
TEST(Kernels, DiagonalMassModelsEvaluateAsTheirDenseSelvesInFloat) {
  Rng rng(93);
  using Md = models::PlanarChain<double, 6>;
  using Mf = models::PlanarChain<float, 6>;
  for (int trial = 0; trial < 40; ++trial) {
    const Sample<Md> s = trial % 2 ? off_manifold(rng, Gen<Md>::consistent(rng)) : Gen<Md>::consistent(rng);
    float q[Mf::n], qd[Mf::n];
    for (int i = 0; i < Mf::n; ++i) q[i] = float(s.q(i)), qd[i] = float(s.qd(i));
    const Mf::Params p{float(s.p.m), float(s.p.l), float(s.p.g), float(s.p.c)};
    expect_same_accel<Mf>(q, qd, float(s.t), p, {}, "planar_chain_6 in float, trial " + std::to_string(trial));
  }
}

// --- A's zeros (a model's constraint_columns): the products that leave
// them out against the dense products, the truth here (their extra terms
// are products with exact zeros).

// PseudoInverse with a support against the dense one, on a B (R x C) whose
// row i is zero outside Support::row(i): the same route, rank, B^+ y and
// (B B^T)^+ y (up to the sign of a zero).
// routes[0..2] count the Jacobi, Gram and mixed-precision Gram routes.
template <int R, int C, class T, class Support>
void check_support(const T* B, const T* y, const std::string& what, int* routes) {
  kernels::PseudoInverse<R, C, T, Support> sp;
  kernels::PseudoInverse<R, C, T> dn;
  const T rtol = policy::default_rank_rtol<T>();
  sp.factor(B, rtol), dn.factor(B, rtol);
  ASSERT_EQ(bool(sp.gram), bool(dn.gram)) << what;
  ASSERT_EQ(bool(sp.gram_wide), bool(dn.gram_wide)) << what;
  ++routes[sp.gram_wide ? 2 : sp.gram ? 1 : 0];
  EXPECT_EQ(sp.rank, dn.rank) << what;
  T xs[C], xd[C], gs[R], gd[R];
  sp.apply(y, xs), dn.apply(y, xd), sp.apply_gram(y, gs), dn.apply_gram(y, gd);
  for (int k = 0; k < C; ++k) EXPECT_EQ(xs[k], xd[k]) << what << ", B^+ y at " << k;
  for (int i = 0; i < R; ++i) EXPECT_EQ(gs[i], gd[i]) << what << ", (B B^T)^+ y at " << i;
}

// Rows of 4 columns, two coordinates apart (a chain's band), and rows of
// assorted spans (overlapping, nested, disjoint), in double and in float:
// rows scaled apart (which float takes to its mixed-precision Gram route),
// and a zero row (the Jacobi route, rank 5).
struct Band {
  static constexpr bool sparse = true;
  static constexpr ColumnRange row(int i) { return {i > 0 ? 2 * i - 2 : 0, 2 * i + 2}; }
};
struct Spans {
  static constexpr bool sparse = true;
  static constexpr ColumnRange row(int i) {
    constexpr ColumnRange r[6] = {{0, 3}, {2, 9}, {4, 5}, {0, 12}, {7, 8}, {9, 12}};
    return r[i];
  }
};
// Their envelopes, worked out by hand from the rows' overlaps.
static_assert(kernels::GramEnvelope<Band, 6>::firsts == std::array<int, 6>{0, 0, 1, 2, 3, 4});
static_assert(kernels::GramEnvelope<Band, 6>::lasts == std::array<int, 6>{1, 2, 3, 4, 5, 5});
static_assert(kernels::GramEnvelope<Spans, 6>::firsts == std::array<int, 6>{0, 0, 1, 0, 1, 3});
static_assert(kernels::GramEnvelope<Spans, 6>::lasts == std::array<int, 6>{3, 4, 4, 5, 5, 5});

template <class T>
void check_supports(Rng& rng, int trial, int* routes) {
  // Row i random within its span, times 10^(+-spread) (the same for all
  // rows where spread is 0).
  auto fill = [&]<int R, int C, class S>(T* B, double spread) {
    const double scale = std::pow(10.0, rng.uniform(-3, 3));
    for (int i = 0; i < R; ++i) {
      const ColumnRange c = S::row(i);
      const double row = scale * std::pow(10.0, rng.uniform(-spread, spread));
      for (int k = 0; k < C; ++k) B[i * C + k] = k >= c.begin && k < c.end ? T(rng.uniform(-1, 1) * row) : T(0);
    }
  };
  const std::string what = std::string(sizeof(T) == 8 ? "double" : "float") + ", trial " + std::to_string(trial);
  {
    T B[6 * 12], y[6];
    fill.template operator()<6, 12, Band>(B, trial % 2 ? 1.5 : 0.0);
    for (int i = 0; i < 6; ++i) y[i] = T(rng.uniform(-1, 1));
    check_support<6, 12, T, Band>(B, y, "band, " + what, routes);
    // The Gram route does not read B outside its support at all: NaN there
    // changes none of its results (the dense route would be all NaN).
    kernels::PseudoInverse<6, 12, T, Band> clean, poisoned;
    T Bp[6 * 12];
    for (int i = 0; i < 6; ++i)
      for (int k = 0; k < 12; ++k)
        Bp[i * 12 + k] = k >= Band::row(i).begin && k < Band::row(i).end ? B[i * 12 + k] : T(std::nan(""));
    const T rtol = policy::default_rank_rtol<T>();
    clean.factor(B, rtol), poisoned.factor(Bp, rtol);
    if (clean.gram) {
      ASSERT_TRUE(poisoned.gram) << what;
      T xc[12], xp[12], gc[6], gp[6];
      clean.apply(y, xc), poisoned.apply(y, xp), clean.apply_gram(y, gc), poisoned.apply_gram(y, gp);
      for (int k = 0; k < 12; ++k) EXPECT_EQ(xc[k], xp[k]) << what << ", poisoned B^+ y at " << k;
      for (int i = 0; i < 6; ++i) EXPECT_EQ(gc[i], gp[i]) << what << ", poisoned (B B^T)^+ y at " << i;
    }
  }
  {
    T B[6 * 12], y[6];
    fill.template operator()<6, 12, Spans>(B, trial % 2 ? 1.5 : 0.0);
    if (trial % 3 == 0) B[4 * 12 + 7] = T(0);  // row 4 zero
    for (int i = 0; i < 6; ++i) y[i] = T(rng.uniform(-1, 1));
    check_support<6, 12, T, Spans>(B, y, "spans, " + what, routes);
  }
}

TEST(Kernels, PseudoInverseWithASupportIsTheDenseOne) {
  Rng rng(94);
  int routes_d[3] = {}, routes_f[3] = {};
  for (int trial = 0; trial < 200; ++trial) {
    check_supports<double>(rng, trial, routes_d);
    check_supports<float>(rng, trial, routes_f);
  }
  EXPECT_GT(routes_d[0], 20) << "Jacobi in double";
  EXPECT_GT(routes_d[1], 100) << "Gram in double";
  EXPECT_GT(routes_f[0], 20) << "Jacobi in float";
  EXPECT_GT(routes_f[1], 20) << "Gram in float";
  EXPECT_GT(routes_f[2], 20) << "the mixed-precision Gram route in float";
}

// The model as it is, with its constraint_columns hidden: the kernels then
// take every column of A (and still factor M's diagonal).
template <class Mo>
struct FullRows : Mo {
  static constexpr int constraint_columns = 0;
};

// Every built-in model that gives its rows' columns, and the longer chains
// of examples/models/long_chains.hpp (PlanarChain<T, 24>, <T, 48>): uk_accel
// and the projection's correction as with every column, at consistent
// states and off them, with Baumgarte stabilisation; uk_accel in float too.
template <class Mo>
void check_columns_model(Rng& rng, int trials) {
  using Md = models::PlanarChain<double, Mo::n / 2>;
  static_assert(HasConstraintColumns<Mo> && !HasConstraintColumns<FullRows<Mo>> && HasDiagonalMass<FullRows<Mo>>);
  constexpr int n = Mo::n;
  for (int trial = 0; trial < trials; ++trial) {
    Sample<Md> s = Gen<Md>::consistent(rng);
    if (trial % 2) s = off_manifold(rng, s);
    const std::string what = std::string(Mo::name) + (sizeof(typename Mo::Scalar) == 8 ? "" : " in float") +
                             ", trial " + std::to_string(trial);
    if constexpr (std::is_same_v<typename Mo::Scalar, double>) {
      expect_same_accel<Mo, FullRows<Mo>>(s.q.data(), s.qd.data(), s.t, s.p, {}, what);
      expect_same_accel<Mo, FullRows<Mo>>(s.q.data(), s.qd.data(), s.t, s.p, {true, 3.0, 4.0, 5.0}, what + ", Baumgarte");
      expect_same_correction<Mo, FullRows<Mo>>(rng, s, what);
    } else {
      float q[n], qd[n];
      for (int i = 0; i < n; ++i) q[i] = float(s.q(i)), qd[i] = float(s.qd(i));
      const typename Mo::Params p{float(s.p.m), float(s.p.l), float(s.p.g), float(s.p.c)};
      expect_same_accel<Mo, FullRows<Mo>>(q, qd, float(s.t), p, {}, what);
    }
  }
}

TEST(Kernels, ConstraintColumnsModelsEvaluateAsTheirFullRowsSelves) {
  Rng rng(95);
  int models = 0;
  for_each_model_or_kind([&]<class Mo>() {
    if constexpr (HasConstraintColumns<Mo>) {
      ++models;
      check_columns_model<Mo>(rng, 40);
      check_columns_model<models::PlanarChain<float, Mo::n / 2>>(rng, 40);
    }
  });
  EXPECT_EQ(models, sanitized ? 1 : 3)
      << "the built-in chains (3, 6 and 12 links; ModelKinds' 12 under the sanitizers) give their rows' columns";
  check_columns_model<models::PlanarChain<double, 24>>(rng, 10);
  check_columns_model<models::PlanarChain<float, 24>>(rng, 10);
  // 48 links outside the sanitizers (as LongChainsAgreeWithTheReference...).
  if constexpr (!sanitized) check_columns_model<models::PlanarChain<double, 48>>(rng, 4);
}

// The names of a chain of any length, generated at compile time.
TEST(Kernels, LongChainsNameEveryCoordinate) {
  using C = models::PlanarChain<double, 48>;
  EXPECT_STREQ(C::name, "planar_chain_48");
  EXPECT_STREQ(C::coords[0], "x1");
  EXPECT_STREQ(C::coords[19], "y10");
  EXPECT_STREQ(C::coords[95], "y48");
  EXPECT_STREQ(C::initial_names[0], "theta1");
  EXPECT_STREQ(C::initial_names[47], "theta48");
  EXPECT_STREQ(C::initial_names[48], "omega1");
  EXPECT_STREQ(C::initial_names[95], "omega48");
  using One = models::PlanarChain<float, 1>;
  EXPECT_STREQ(One::name, "planar_chain_1");
  EXPECT_STREQ(One::initial_names[1], "omega1");
  EXPECT_STREQ(models::PlanarChain12<double>::coords[22], "x12");
}

// --- Teams of threads per system (team.hpp), emulated on the CPU
// (team_support.hpp). Every size gives the one-thread kernels' bits.

template <class T, std::size_t K>
bool identical_bits(const T (&a)[K], const T (&b)[K]) {
  return std::memcmp(a, b, sizeof a) == 0;
}

template <int N>
void check_team_cholesky(Rng& rng, int size) {
  const MatrixXd X = rng.matrix(N, N);
  const MatrixXd M = X * X.transpose() + 0.1 * MatrixXd::Identity(N, N);
  double one[N * N], team[N * N], rd1[N], rdt[N];
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) one[i * N + j] = team[i * N + j] = M(i, j);
  for (int i = 0; i < N; ++i) rd1[i] = rdt[i] = -1;
  ASSERT_EQ(kernels::cholesky<N>(one, rd1), 0);
  std::vector<int> info(size, -1);
  run_team(size, [&](const ThreadTeam& t) { info[t.rank()] = kernels::team_cholesky<N>(t, team, rdt); });
  for (int r = 0; r < size; ++r) EXPECT_EQ(info[r], 0) << "member " << r;
  EXPECT_TRUE(identical_bits(one, team)) << "N " << N << ", team of " << size;
  EXPECT_TRUE(identical_bits(rd1, rdt)) << "N " << N << ", team of " << size;
  // A pivot that fails (row 5 a copy of row 4 in the factor's terms: M
  // singular there): every member reports the serial kernel's column.
  MatrixXd S = M;
  S.row(5) = S.row(4);
  S.col(5) = S.col(4);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) one[i * N + j] = team[i * N + j] = S(i, j);
  const int want = kernels::cholesky<N>(one, rd1, kernels::mass_pivot_rtol<N, double>());
  ASSERT_EQ(want, 6) << "guard: the singular pivot is found";
  run_team(size, [&](const ThreadTeam& t) {
    info[t.rank()] = kernels::team_cholesky<N>(t, team, rdt, kernels::mass_pivot_rtol<N, double>());
  });
  for (int r = 0; r < size; ++r) EXPECT_EQ(info[r], want) << "member " << r;
}

TEST(Kernels, TeamCholeskyIsTheOneThreadFactorBitForBit) {
  Rng rng(91);
  for (int size : {1, 2, 3, 4, 8, 32}) {
    check_team_cholesky<12>(rng, size);
    check_team_cholesky<24>(rng, size);
    check_team_cholesky<48>(rng, size);
  }
}

// The Gram route's factor of a chain by a team: L = chol(M), B = A L^{-T},
// G = B B^T, chol(G), each step by the team on shared arrays; the same bits
// as the one-thread solve (solve_lower_rows) and as the factor that
// PseudoInverse keeps when it takes the Gram route (its Vrot and inv_s2).
// The chain's M = m I would make L diagonal (a stale read of an
// off-diagonal entry would read 0 either way): M here is the chain's plus
// a dense symmetric positive semi-definite 0.1 X X^T.
template <int K>
void check_team_gram_route(std::uint64_t seed, int size) {
  using Mo = models::PlanarChain<double, K>;
  constexpr int n = Mo::n, m = Mo::m;
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  double ic[2 * K], q[n], qd[n], b[m];
  for (double& x : ic) x = u(g);
  const typename Mo::Params p{};
  ASSERT_TRUE(Mo::initial_state(ic, p, q, qd));
  // Shared by the team: L, B, G and the reciprocals.
  double L[n * n], rd[n], B[m * n], G[m * m], rg[m];
  Mo::mass(q, 0.0, p, L);
  Mo::constraints(q, qd, 0.0, p, B, b);
  Rng rng(seed);
  const MatrixXd X = rng.matrix(n, n);
  const MatrixXd D = 0.1 * X * X.transpose();
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) L[i * n + j] += D(i, j);
  double L1[n * n], rd1[n], B1[m * n];
  std::memcpy(L1, L, sizeof L);
  std::memcpy(B1, B, sizeof B);
  ASSERT_EQ(kernels::cholesky<n>(L1, rd1), 0);
  kernels::solve_lower_rows<n, m>(L1, rd1, B1);
  kernels::PseudoInverse<m, n, double> pinv;
  pinv.factor(B1, policy::default_rank_rtol<double>());
  ASSERT_TRUE(pinv.gram) << "guard: the chain takes the Gram route";
  std::vector<int> info(size, -1);
  run_team(size, [&](const ThreadTeam& t) {
    int bad = kernels::team_cholesky<n>(t, L, rd);
    kernels::team_solve_lower_rows<n, m>(t, L, rd, B);
    kernels::team_gram<m, n>(t, B, G);
    bad = bad * 1000 + kernels::team_cholesky<m>(t, G, rg);
    info[t.rank()] = bad;
  });
  for (int r = 0; r < size; ++r) EXPECT_EQ(info[r], 0) << "member " << r;
  EXPECT_TRUE(identical_bits(L, L1) && identical_bits(rd, rd1)) << Mo::name << ", team of " << size;
  EXPECT_TRUE(identical_bits(B, B1)) << Mo::name << ", team of " << size;
  int differ = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j <= i; ++j) differ += std::memcmp(&G[i * m + j], &pinv.Vrot[i * m + j], sizeof(double)) != 0;
    differ += std::memcmp(&rg[i], &pinv.inv_s2[i], sizeof(double)) != 0;
  }
  EXPECT_EQ(differ, 0) << Mo::name << ", team of " << size;
}

TEST(Kernels, TeamGramRouteFactorIsThePseudoInversesBitForBit) {
  for (int size : {1, 3, 4, 8, 32}) {
    check_team_gram_route<6>(101, size);
    check_team_gram_route<12>(102, size);
    check_team_gram_route<24>(103, size);
  }
}

}  // namespace
}  // namespace ukb::test
