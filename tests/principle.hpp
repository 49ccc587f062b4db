// The properties every solution of the Udwadia–Kalaba equation must have
// (docs/design.md section 1), measured as relative violations so that a test can
// assert them small and a negative control can assert them large.
#pragma once

#include "support.hpp"

namespace ukb::test {

// null_space and sym_sqrt are here, not in support.hpp: the engine,
// emulation and ukb_tests units include support.hpp, and each then
// instantiated Eigen's JacobiSVD for these two inline functions, used by the
// principle tests alone.

/// Orthonormal basis of null(A) (columns), from a full SVD.
inline MatrixXd null_space(const MatrixXd& A, double rtol = 1e-10) {
  Eigen::JacobiSVD<MatrixXd> svd(A, Eigen::ComputeFullV);
  const VectorXd& s = svd.singularValues();
  int rank = 0;
  while (rank < s.size() && s(rank) > rtol * s(0)) ++rank;
  return svd.matrixV().rightCols(A.cols() - rank);
}

/// Symmetric positive definite square root of a symmetric positive definite
/// M, from its SVD M = V S V^T (the SVD of null_space: one decomposition
/// fewer for the compiler than an eigensolver).
/// For an indefinite M this would be |M|^(1/2): the callers pass mass
/// matrices, positive definite.
inline MatrixXd sym_sqrt(const MatrixXd& M) {
  Eigen::JacobiSVD<MatrixXd> svd(M, Eigen::ComputeFullV);
  return svd.matrixV() * svd.singularValues().cwiseSqrt().asDiagonal() * svd.matrixV().transpose();
}

/// One problem: M q'' = Q + Qc, A q'' = b, with the non-ideal force C.
struct Problem {
  MatrixXd M, A;
  VectorXd Q, b, C;
};

/// Relative violations of the properties by a candidate acceleration.
struct Violations {
  double constraint = 0;  ///< |A q'' - b|, if the constraints are consistent
  double normal = 0;      ///< |A^T (A q'' - b)| (least squares; always)
  double work = 0;        ///< max |v^T (M q'' - Q - C)| over an orthonormal basis v of null(A)
  double minimum = 0;     ///< > 0 when some q'' + v (A v = 0) has a smaller G
  double sqrt_inv = 0;    ///< |q'' - q''(symmetric square root of M)|
  double inverse_inv = 0; ///< |q'' - q''(another {1,4}-inverse of B)|, if consistent
  double worst() const {  // a NaN among them is the worst (worst_of)
    double w = 0;
    for (const double e : {constraint, normal, work, minimum, sqrt_inv, inverse_inv}) worst_of(w, e);
    return w;
  }
};

/// Moore–Penrose pseudo-inverse by Eigen's complete orthogonal
/// decomposition: a second, independent algorithm (the reference solver
/// uses a Jacobi SVD), so the checks do not share the solver's code.
inline MatrixXd test_pinv(const MatrixXd& B) {
  Eigen::CompleteOrthogonalDecomposition<MatrixXd> cod;
  cod.setThreshold(1e-10);
  cod.compute(B);
  return cod.pseudoInverse();
}

/// The inverse of a square matrix by a fully pivoted LU (the tests' one
/// route to an inverse: MatrixXd::inverse() would instantiate a second LU).
inline MatrixXd lu_inverse(const MatrixXd& X) { return Eigen::FullPivLU<MatrixXd>(X).inverse(); }

/// The Udwadia–Kalaba acceleration written with a given square root S of M
/// (M = S S^T) and a given generalized inverse G(B) of B = A S^{-T}.
template <class GInv>
VectorXd uk_formula(const Problem& p, const MatrixXd& S, GInv&& ginv) {
  const MatrixXd Sinv = lu_inverse(S);
  const VectorXd a = p.M.fullPivLu().solve(p.Q);
  const MatrixXd B = p.A * Sinv.transpose();
  const MatrixXd G = ginv(B);
  const VectorXd c = Sinv * p.C;
  return a + Sinv.transpose() * (c + G * (p.b - p.A * a - B * c));
}

/// True when b - A a lies in range(A): then A q'' = b has solutions.
inline bool consistent(const Problem& p) {
  const VectorXd r = p.b - p.A * p.M.llt().solve(p.Q);
  const MatrixXd Ap = test_pinv(p.A);
  return (r - p.A * (Ap * r)).norm() <= 1e-9 * (1 + r.norm());
}

inline Violations check_principle(const Problem& p, const VectorXd& qdd, Rng& rng) {
  Violations v;
  const VectorXd res = p.A * qdd - p.b;
  const double scale_c = p.A.norm() * qdd.norm() + p.b.norm() + 1e-300;
  const bool cons = consistent(p);
  if (cons) v.constraint = res.norm() / scale_c;
  v.normal = (p.A.transpose() * res).norm() / (p.A.norm() * scale_c);

  const VectorXd force = p.M * qdd - p.Q - p.C;  // Qc - C
  const double scale_f = (p.M * qdd).norm() + p.Q.norm() + p.C.norm() + 1e-300;
  const MatrixXd N = null_space(p.A);
  for (int j = 0; j < N.cols(); ++j)
    worst_of(v.work, std::abs(N.col(j).dot(force)) / scale_f);

  // Gauss's function of the non-ideal principle, G(x) = (Mx-Q-C)^T M^{-1} (Mx-Q-C).
  const auto llt = p.M.llt();
  auto G = [&](const VectorXd& x) {
    const VectorXd e = p.M * x - p.Q - p.C;
    return e.dot(llt.solve(e));
  };
  const double g0 = G(qdd);
  for (int trial = 0; trial < 8 && N.cols() > 0; ++trial) {
    const VectorXd dir = N * rng.vector(static_cast<int>(N.cols()), -1, 1);
    const VectorXd step = dir.normalized() * rng.uniform(1e-3, 1.0) * (1 + qdd.norm());
    const double dg = G(qdd + step) - g0;  // must be > 0
    if (!(dg > 0)) worst_of(v.minimum, -dg / (g0 + 1e-300) + 1e-300);
  }

  const MatrixXd S = sym_sqrt(p.M);
  const VectorXd q_sym = uk_formula(p, S, [](const MatrixXd& B) { return test_pinv(B); });
  v.sqrt_inv = rel_err(qdd, q_sym);
  if (cons) {
    // Another {1,4}-inverse: G = B^+ + Y (I - B B^+) for a random Y.
    const MatrixXd L = p.M.llt().matrixL();
    const VectorXd q_14 = uk_formula(p, L, [&](const MatrixXd& B) {
      const MatrixXd Bp = test_pinv(B);
      const MatrixXd Y = rng.matrix(static_cast<int>(B.cols()), static_cast<int>(B.rows()), -3, 3);
      return MatrixXd(Bp + Y * (MatrixXd::Identity(B.rows(), B.rows()) - B * Bp));
    });
    v.inverse_inv = rel_err(qdd, q_14);
  }
  return v;
}

/// The problem of a model at a sample, with the non-ideal force the model
/// gives at the reference's ideal constraint force, and the reference result.
template <class Mo>
std::pair<Problem, reference::Result> model_problem(const Sample<Mo>& s) {
  const reference::Terms k = reference::terms<Mo>(s.p, s.q, s.qd, s.t);
  Problem pb{k.M, k.A, k.Q, k.b, VectorXd()};
  reference::Result r = reference::solve(
      k.M, k.Q, k.A, k.b,
      [&](const VectorXd& Qc, const VectorXd& lam) {
        pb.C.resize(Mo::n);
        Mo::nonideal(s.q.data(), s.qd.data(), s.t, s.p, Qc.data(), lam.data(), pb.C.data());
        return pb.C;
      });
  return {pb, r};
}

}  // namespace ukb::test
