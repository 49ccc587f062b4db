// The reference backend: plain dynamic-size Eigen, written for clarity. It is
// the oracle of the test suite, so it avoids every shortcut the fast kernels
// take: a full Jacobi SVD of B, explicit pseudo-inverse, no fixed sizes.
#include "ukb/reference/solver.hpp"

#include <cmath>
#include <limits>

#include "ukb/policy.hpp"

namespace ukb::reference {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

bool finite(const MatrixXd& x) { return x.allFinite(); }

// Thin SVD of B truncated at the numerical rank: B ~ U_r S_r V_r^T.
struct TruncatedSvd {
  MatrixXd U, V;  // m x r, n x r
  VectorXd s;     // r
  int rank = 0;
  bool marginal = false;  // a singular value within policy::rank_margin of the cut

  TruncatedSvd(const MatrixXd& B, double rtol) {
    Eigen::JacobiSVD<MatrixXd> svd(B, Eigen::ComputeThinU | Eigen::ComputeThinV);
    const VectorXd& sv = svd.singularValues();  // sorted, decreasing
    const double smax = sv.size() > 0 ? sv(0) : 0.0;
    while (rank < sv.size() && sv(rank) > rtol * smax) ++rank;
    const double cut = rtol * smax;
    for (Eigen::Index i = 0; i < sv.size(); ++i)
      marginal = marginal || (sv(i) > cut / policy::rank_margin && sv(i) <= cut * policy::rank_margin);
    U = svd.matrixU().leftCols(rank);
    V = svd.matrixV().leftCols(rank);
    s = sv.head(rank);
  }
  // B^+ y = V_r S_r^{-1} U_r^T y
  VectorXd pinv_apply(const VectorXd& y) const {
    return V * (U.transpose() * y).cwiseQuotient(s);
  }
  // (B B^T)^+ y = U_r S_r^{-2} U_r^T y
  VectorXd gram_pinv_apply(const VectorXd& y) const {
    return U * (U.transpose() * y).cwiseQuotient(s.cwiseProduct(s));
  }
};

Result failed(Status st, Eigen::Index n, Eigen::Index m) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Result r;
  r.qdd = VectorXd::Constant(n, nan);
  r.Qc_ideal = VectorXd::Constant(n, nan);
  r.Qc_nonideal = VectorXd::Constant(n, nan);
  r.lambda = VectorXd::Constant(m, nan);
  r.rank = 0;
  r.status = st;
  r.constraint_residual = nan;
  return r;
}

}  // namespace

MatrixXd pseudo_inverse(const MatrixXd& B, double rank_rtol, int* rank) {
  const TruncatedSvd svd(B, rank_rtol);
  if (rank) *rank = svd.rank;
  return svd.V * svd.s.cwiseInverse().asDiagonal() * svd.U.transpose();
}

Result solve(const MatrixXd& M, const VectorXd& Q, const MatrixXd& A, const VectorXd& b,
             const NonidealFn& C_of, const Options& opt) {
  const Eigen::Index n = M.rows(), m = A.rows();
  if (!finite(M) || !finite(Q) || !finite(A) || !finite(b))
    return failed(Status::failed_nonfinite, n, m);
  if ((M - M.transpose()).norm() > 1e-12 * M.norm()) return failed(Status::failed_mass_matrix, n, m);
  const Eigen::LLT<MatrixXd> llt(M);
  if (!mass_factor_ok(llt, M)) return failed(Status::failed_mass_matrix, n, m);
  const MatrixXd L = llt.matrixL();

  const VectorXd a = llt.solve(Q);                                      // M^{-1} Q
  const MatrixXd B = L.triangularView<Eigen::Lower>().solve(A.transpose()).transpose();  // A L^{-T}
  const TruncatedSvd svd(B, opt.rank_rtol);
  const VectorXd r = b - A * a;

  Result out;
  out.rank = svd.rank;
  out.marginal = svd.marginal;
  out.Qc_ideal = L * svd.pinv_apply(r);
  out.lambda = svd.gram_pinv_apply(r);

  const VectorXd C = C_of(out.Qc_ideal, out.lambda);
  if (C.size() != n || !finite(C)) return failed(Status::failed_nonfinite, n, m);
  const VectorXd chat = L.triangularView<Eigen::Lower>().solve(C);  // L^{-1} C
  const VectorXd z = chat + svd.pinv_apply(r - B * chat);
  out.qdd = a + L.transpose().triangularView<Eigen::Upper>().solve(z);
  out.Qc_nonideal = L * (chat - svd.pinv_apply(B * chat));
  out.constraint_residual = m > 0 ? (A * out.qdd - b).cwiseAbs().maxCoeff() : 0.0;
  out.inconsistent = m > 0 && is_inconsistent(A, b, a, out.constraint_residual);
  out.status = Status::ok;
  if (!finite(out.qdd) || !finite(out.Qc_ideal) || !finite(out.Qc_nonideal) ||
      !finite(out.lambda))
    return failed(Status::failed_nonfinite, n, m);
  return out;
}

bool is_inconsistent(const MatrixXd& A, const VectorXd& b, const VectorXd& a, double residual) {
  const double scale = (b.cwiseAbs() + (A * a.asDiagonal()).cwiseAbs().rowwise().sum()).maxCoeff();
  return scale > 0 && residual > policy::consistency_rtol<double>() * scale;
}

Status rk4_step(const AccelFn& f, State& s, double dt) {
  // k_i = (q'_i, q''_i) of the stage states.
  const Result k1 = f(s.q, s.qd, s.t);
  if (k1.status != Status::ok) return k1.status;
  const VectorXd q2 = s.q + 0.5 * dt * s.qd, v2 = s.qd + 0.5 * dt * k1.qdd;
  const Result k2 = f(q2, v2, s.t + 0.5 * dt);
  if (k2.status != Status::ok) return k2.status;
  const VectorXd q3 = s.q + 0.5 * dt * v2, v3 = s.qd + 0.5 * dt * k2.qdd;
  const Result k3 = f(q3, v3, s.t + 0.5 * dt);
  if (k3.status != Status::ok) return k3.status;
  const VectorXd q4 = s.q + dt * v3, v4 = s.qd + dt * k3.qdd;
  const Result k4 = f(q4, v4, s.t + dt);
  if (k4.status != Status::ok) return k4.status;
  s.q += dt / 6.0 * (s.qd + 2.0 * v2 + 2.0 * v3 + v4);
  s.qd += dt / 6.0 * (k1.qdd + 2.0 * k2.qdd + 2.0 * k3.qdd + k4.qdd);
  s.t += dt;
  return Status::ok;
}

Status integrate_rk4(const AccelFn& f, State& s, double dt, long steps,
                     const std::function<void(const State&)>& observe) {
  for (long k = 0; k < steps; ++k) {
    const Status st = rk4_step(f, s, dt);
    if (st != Status::ok) return st;
    if (observe) observe(s);
  }
  return Status::ok;
}

}  // namespace ukb::reference
