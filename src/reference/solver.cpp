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

namespace {

// The Dormand–Prince pair as a Butcher tableau: nodes c, stage matrix A,
// fifth-order weights b (= A's last row: FSAL), fourth-order weights bh.
struct Dp54 {
  Eigen::Matrix<double, 7, 1> c, b, bh;
  Eigen::Matrix<double, 7, 7> A;
  Dp54() {
    c << 0, 0.2, 0.3, 0.8, 8.0 / 9.0, 1, 1;
    A.setZero();
    A(1, 0) = 0.2;
    A.row(2).head(2) << 3.0 / 40, 9.0 / 40;
    A.row(3).head(3) << 44.0 / 45, -56.0 / 15, 32.0 / 9;
    A.row(4).head(4) << 19372.0 / 6561, -25360.0 / 2187, 64448.0 / 6561, -212.0 / 729;
    A.row(5).head(5) << 9017.0 / 3168, -355.0 / 33, 46732.0 / 5247, 49.0 / 176, -5103.0 / 18656;
    A.row(6).head(6) << 35.0 / 384, 0, 500.0 / 1113, 125.0 / 192, -2187.0 / 6784, 11.0 / 84;
    b = A.row(6).transpose();
    bh << 5179.0 / 57600, 0, 7571.0 / 16695, 393.0 / 640, -92097.0 / 339200, 187.0 / 2100, 1.0 / 40;
  }
};

}  // namespace

Dopri5Step dopri5_step(const AccelFn& f, const State& s, const Eigen::VectorXd& a0, double h, double t1,
                       const std::function<void(const State&)>& seen) {
  static const Dp54 tab;
  const Eigen::Index n = s.q.size();
  VectorXd y0(2 * n);
  y0 << s.q, s.qd;
  Dopri5Step out;
  out.K.resize(2 * n, 7);
  out.K.col(0) << s.qd, a0;
  VectorXd y = y0;
  for (int st = 1; st < 7; ++st) {
    y = y0 + h * out.K.leftCols(st) * tab.A.row(st).head(st).transpose();
    const double t = st == 6 ? t1 : s.t + tab.c(st) * h;
    const State x{y.head(n), y.tail(n), t};
    if (st < 6 && seen) seen(x);
    const Result r = f(x.q, x.qd, t);
    if (r.status != Status::ok) {
      out.status = r.status;
      return out;
    }
    out.K.col(st) << x.qd, r.qdd;
  }
  out.end = State{y.head(n), y.tail(n), t1};
  out.err = h * out.K * (tab.b - tab.bh);
  return out;
}

Eigen::MatrixXd dopri5_dense(const State& s, const Dopri5Step& step, double h) {
  const Eigen::Index n = s.q.size();
  Eigen::Matrix<double, 7, 1> d;
  d << -12715105075.0 / 11282082432.0, 0, 87487479700.0 / 32700410799.0, -10690763975.0 / 1880347072.0,
      701980252875.0 / 199316789632.0, -1453857185.0 / 822651844.0, 69997945.0 / 29380423.0;
  VectorXd y0(2 * n), y1(2 * n);
  y0 << s.q, s.qd;
  y1 << step.end.q, step.end.qd;
  Eigen::MatrixXd r(2 * n, 5);
  r.col(0) = y0;
  r.col(1) = y1 - y0;
  r.col(2) = h * step.K.col(0) - r.col(1);
  r.col(3) = r.col(1) - h * step.K.col(6) - r.col(2);
  r.col(4) = h * step.K * d;
  return r;
}

State dense_at(const Eigen::MatrixXd& r, double t0, double h, double theta) {
  const Eigen::Index n = r.rows() / 2;
  const double u = 1 - theta;
  const VectorXd y = r.col(0) + theta * (r.col(1) + u * (r.col(2) + theta * (r.col(3) + u * r.col(4))));
  return State{y.head(n), y.tail(n), t0 + theta * h};
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
