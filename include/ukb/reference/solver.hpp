/// @file solver.hpp
/// @brief The reference backend: a plain, dynamic-size Eigen implementation of
///        the Udwadia–Kalaba equation with non-ideal constraints.
///
/// It is written for clarity, independently of the fast per-system kernels,
/// and is the oracle every other backend is tested against. Host only.
///
/// With M = L L^T (Cholesky), a = M^{-1} Q, B = A L^{-T}, c^ = L^{-1} C and
/// r = b - A a:
///
///     q''         = a + L^{-T} ( c^ + B^+ (r - B c^) )
///     Qc_ideal    = L B^+ r = A^T lambda,   lambda = (A M^{-1} A^T)^+ r
///     Qc_nonideal = L (I - B^+ B) c^
///
/// B^+ is the Moore–Penrose pseudo-inverse from a Jacobi SVD of B; singular
/// values at or below `rank_rtol * sigma_max` are treated as zero, and the
/// number of the others is the reported rank. C is evaluated after the ideal
/// part, because non-ideal forces such as Coulomb friction depend on it.
#pragma once

#include <Eigen/Dense>
#include <functional>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>

#include "ukb/model.hpp"
#include "ukb/policy.hpp"
#include "ukb/settings.hpp"
#include "ukb/status.hpp"

namespace ukb::reference {

/// Default relative rank tolerance (policy::default_rank_rtol): singular
/// values of B at or below 1e-10 * sigma_max count as zero. Round-off in
/// redundant constraint rows leaves singular values near 1e-16 sigma_max,
/// far below; any constraint set conditioned better than 1e10 keeps its full
/// rank.
inline constexpr double default_rank_rtol = policy::default_rank_rtol<double>();

/// Solver options: the relative rank tolerance for B^+ (>= 0) and Baumgarte
/// stabilisation (evaluate() only; needs the model's constraint_rows):
/// b_i <- b_i - 2 alpha phi_i' - beta^2 phi_i on holonomic rows,
/// b_i <- b_i - gamma psi_i on nonholonomic rows.
using Options = EvalSettings<double>;

/// Everything one evaluation returns. On a failed status the vectors hold NaN.
struct Result {
  Eigen::VectorXd qdd;          ///< generalized acceleration q'' (n)
  Eigen::VectorXd Qc_ideal;     ///< ideal constraint force L B^+ r = A^T lambda (n)
  Eigen::VectorXd Qc_nonideal;  ///< non-ideal constraint force L (I - B^+ B) c^ (n)
  Eigen::VectorXd lambda;       ///< multipliers (A M^{-1} A^T)^+ r (m)
  int rank = 0;                 ///< numerical rank of B
  Status status = Status::ok;   ///< ok, failed_mass_matrix or failed_nonfinite
  /// max_i |(A q'' - b)_i|: zero up to round-off when the constraints are
  /// consistent, the least-squares residual when they are not.
  double constraint_residual = 0;
  /// constraint_residual above policy::consistency_rtol<double>() times
  /// max_i (|b_i| + sum_k |A_ik a_k|) > 0, a = M^{-1} Q: the rows contradict
  /// each other (the definition the batch backends count; they compute the
  /// residual as B B^+ r - r, this backend as A q'' - b).
  bool inconsistent = false;
  /// A singular value of B within a factor policy::rank_margin of the cut
  /// rank_rtol * sigma_max, either side: the rank decision was marginal.
  bool marginal = false;
};

/// The inconsistency rule of Result::inconsistent: `residual` = max|A q'' - b|
/// above policy::consistency_rtol<double>() times max_i (|b_i| + sum_k
/// |A_ik a_k|) > 0, with a = M^{-1} Q.
bool is_inconsistent(const Eigen::MatrixXd& A, const Eigen::VectorXd& b, const Eigen::VectorXd& a,
                     double residual);

/// The non-ideal force C (n) as a function of Qc_ideal (n) and lambda (m).
using NonidealFn =
    std::function<Eigen::VectorXd(const Eigen::VectorXd& Qc_ideal, const Eigen::VectorXd& lambda)>;

/// True when the Cholesky factor of M shows M numerically positive
/// definite: the factorisation succeeded and every pivot L_jj^2 is above
/// n eps M_jj (a smaller pivot has lost every digit to cancellation: M is
/// singular to working precision, as the rolling sphere's at sin theta = 0).
inline bool mass_factor_ok(const Eigen::LLT<Eigen::MatrixXd>& llt, const Eigen::MatrixXd& M) {
  if (llt.info() != Eigen::Success) return false;
  const double floor = double(M.rows()) * std::numeric_limits<double>::epsilon();
  const Eigen::MatrixXd& L = llt.matrixLLT();  // L in the lower triangle
  for (Eigen::Index j = 0; j < M.rows(); ++j)
    if (!(L(j, j) * L(j, j) > floor * M(j, j))) return false;
  return true;
}

/// Solves the Udwadia–Kalaba equation for given M (n x n, symmetric), Q (n),
/// A (m x n), b (m) and non-ideal force C. Status failed_nonfinite if an
/// input or result is not finite, failed_mass_matrix if M is not symmetric
/// (relative asymmetry above 1e-12) or not numerically positive definite
/// (mass_factor_ok).
Result solve(const Eigen::MatrixXd& M, const Eigen::VectorXd& Q, const Eigen::MatrixXd& A,
             const Eigen::VectorXd& b, const NonidealFn& C, const Options& opt = {});

/// Moore–Penrose pseudo-inverse of B (m x n) with the rank rule of solve().
/// Writes the numerical rank to `*rank` when given.
Eigen::MatrixXd pseudo_inverse(const Eigen::MatrixXd& B, double rank_rtol = default_rank_rtol,
                               int* rank = nullptr);

/// The model's terms at one state, as dynamic Eigen objects.
struct Terms {
  Eigen::MatrixXd M;  ///< mass matrix (n x n)
  Eigen::VectorXd Q;  ///< impressed force (n)
  Eigen::MatrixXd A;  ///< constraint matrix (m x n)
  Eigen::VectorXd b;  ///< constraint right-hand side (m)
};

/// Evaluates M, Q, A, b of a double-precision model at (q, q', t).
template <Model Mo>
  requires std::same_as<typename Mo::Scalar, double>
Terms terms(const typename Mo::Params& p, const Eigen::VectorXd& q, const Eigen::VectorXd& qd,
            double t) {
  using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  RowMat M(Mo::n, Mo::n), A(Mo::m, Mo::n);
  Terms out{Eigen::MatrixXd(), Eigen::VectorXd(Mo::n), Eigen::MatrixXd(), Eigen::VectorXd(Mo::m)};
  Mo::mass(q.data(), t, p, M.data());
  Mo::force(q.data(), qd.data(), t, p, out.Q.data());
  Mo::constraints(q.data(), qd.data(), t, p, A.data(), out.b.data());
  out.M = M;
  out.A = A;
  return out;
}

/// The undifferentiated constraints of the rows of A (model.hpp: the
/// model's `constraint_rows`): phi (holonomic rows; 0 for the others) and
/// phid (phi' or psi), with the rows' kinds.
struct Rows {
  Eigen::VectorXd phi, phid;  ///< (m) each
  Eigen::Array<bool, Eigen::Dynamic, 1> holonomic;  ///< (m)
};

/// The rows' constraints of a double-precision model at (q, q', t). Throws
/// std::invalid_argument for a model without `constraint_rows`.
template <Model Mo>
  requires std::same_as<typename Mo::Scalar, double>
Rows constraint_rows(const typename Mo::Params& p, const Eigen::VectorXd& q,
                     const Eigen::VectorXd& qd, double t) {
  if constexpr (HasConstraintRows<Mo>) {
    Rows r{Eigen::VectorXd(Mo::m), Eigen::VectorXd(Mo::m), {}};
    r.holonomic.resize(Mo::m);
    Mo::constraint_rows(q.data(), qd.data(), t, p, r.phi.data(), r.phid.data());
    for (int i = 0; i < Mo::m; ++i) r.holonomic(i) = Mo::row_kinds[i] == RowKind::holonomic;
    return r;
  } else {
    (void)p, (void)q, (void)qd, (void)t;
    throw std::invalid_argument(std::string("model '") + Mo::name +
                                "' does not state its constraint rows (constraint_rows), "
                                "which stabilisation needs");
  }
}

/// Evaluates one system of a double-precision model with the reference solver.
/// q and qd must have Mo::n entries.
template <Model Mo>
  requires std::same_as<typename Mo::Scalar, double>
Result evaluate(const typename Mo::Params& p, const Eigen::VectorXd& q, const Eigen::VectorXd& qd,
                double t, const Options& opt = {}) {
  Terms k = terms<Mo>(p, q, qd, t);
  if (opt.baumgarte.on) {
    const Baumgarte<double>& bg = opt.baumgarte;
    const Rows r = constraint_rows<Mo>(p, q, qd, t);
    const Eigen::VectorXd holonomic = 2 * bg.alpha * r.phid + bg.beta * bg.beta * r.phi;
    k.b -= r.holonomic.select(holonomic, bg.gamma * r.phid);
  }
  return solve(k.M, k.Q, k.A, k.b,
               [&](const Eigen::VectorXd& Qc_ideal, const Eigen::VectorXd& lambda) {
                 Eigen::VectorXd C(Mo::n);
                 Mo::nonideal(q.data(), qd.data(), t, p, Qc_ideal.data(), lambda.data(), C.data());
                 return C;
               },
               opt);
}

/// The acceleration of a system as a function of its state.
using AccelFn =
    std::function<Result(const Eigen::VectorXd& q, const Eigen::VectorXd& qd, double t)>;

/// The reference acceleration of a model with fixed parameters.
template <Model Mo>
  requires std::same_as<typename Mo::Scalar, double>
AccelFn accel_fn(const typename Mo::Params& p, const Options& opt = {}) {
  return [p, opt](const Eigen::VectorXd& q, const Eigen::VectorXd& qd, double t) {
    return evaluate<Mo>(p, q, qd, t, opt);
  };
}

/// State of one system.
struct State {
  Eigen::VectorXd q;   ///< position (n)
  Eigen::VectorXd qd;  ///< velocity (n)
  double t = 0;        ///< time
};

/// One classical fourth-order Runge–Kutta step of size dt on (q, q').
/// On a failed stage the state is left unchanged and that stage's status is
/// returned.
Status rk4_step(const AccelFn& f, State& s, double dt);

/// What dopri5_step() gives.
struct Dopri5Step {
  Status status = Status::ok;  ///< a failed stage's status (the rest is then meaningless)
  State end;                   ///< the fifth-order solution at the end time
  Eigen::VectorXd err;         ///< the error estimate y5 - y4 (2n: q, then q')
  Eigen::MatrixXd K;           ///< the stage derivatives (2n x 7), column s of stage s + 1
};

/// One Dormand–Prince 5(4) step of size h from s (Hairer, Norsett and
/// Wanner, Table II.5.2), landing at time t1 (s.t + h, or an end time);
/// a0 the acceleration at s (the first stage, given). `seen` (optional) is
/// called with the states of stages 2 to 6.
Dopri5Step dopri5_step(const AccelFn& f, const State& s, const Eigen::VectorXd& a0, double h, double t1,
                       const std::function<void(const State&)>& seen = {});

/// The coefficients r0..r4 (2n x 5) of the dense output of a Dormand–Prince
/// step (Hairer's contd5): y(s.t + theta h) = r0 + theta (r1 + (1 - theta)
/// (r2 + theta (r3 + (1 - theta) r4))).
Eigen::MatrixXd dopri5_dense(const State& s, const Dopri5Step& step, double h);

/// The state of a dense output r (dopri5_dense) at theta in [0, 1].
State dense_at(const Eigen::MatrixXd& r, double t0, double h, double theta);

/// What project() did.
struct Projected {
  Status status = Status::ok;  ///< failed_* where M, A or the rows could not be used
  bool converged = true;       ///< false: a level used max_iter corrections without reaching tol
};

/// Projects s.q, then s.qd, onto the constraint manifold by Gauss–Newton
/// corrections of least mass-weighted size, dx = -L^{-T} (J L^{-T})^+ e
/// (M = L L^T at s.q): positions with e = phi and J = A on the holonomic
/// rows (the others zero), velocities with e = (phi' or psi) and J = A on
/// every row. A level stops after the first correction with
/// |dx|_inf <= tol |x|_inf, or after max_iter corrections.
template <Model Mo>
  requires std::same_as<typename Mo::Scalar, double>
Projected project(const typename Mo::Params& p, State& s, double tol, int max_iter,
                  double rank_rtol) {
  Projected out;
  for (int level = 0; level < 2; ++level) {
    Eigen::VectorXd& x = level == 0 ? s.q : s.qd;
    bool done = false;
    for (int it = 0; it < max_iter && !done; ++it) {
      const Rows r = constraint_rows<Mo>(p, s.q, s.qd, s.t);
      const Terms k = terms<Mo>(p, s.q, s.qd, s.t);
      Eigen::MatrixXd J = k.A;
      Eigen::VectorXd e = level == 0 ? r.phi : r.phid;
      for (int i = 0; i < Mo::m && level == 0; ++i)
        if (!r.holonomic(i)) J.row(i).setZero(), e(i) = 0;
      if (!k.M.allFinite() || !J.allFinite() || !e.allFinite())
        return {Status::failed_nonfinite, false};
      const Eigen::LLT<Eigen::MatrixXd> llt(k.M);
      if (!mass_factor_ok(llt, k.M)) return {Status::failed_mass_matrix, false};
      const Eigen::MatrixXd L = llt.matrixL();
      const Eigen::MatrixXd B = L.triangularView<Eigen::Lower>().solve(J.transpose()).transpose();
      const Eigen::VectorXd dx =
          -L.transpose().triangularView<Eigen::Upper>().solve(pseudo_inverse(B, rank_rtol) * e);
      if (!dx.allFinite()) return {Status::failed_nonfinite, false};
      x += dx;
      done = dx.lpNorm<Eigen::Infinity>() <= tol * x.lpNorm<Eigen::Infinity>();
    }
    out.converged = out.converged && done;
  }
  return out;
}

/// `steps` RK4 steps of size dt. `observe(state)` (optional) is called after
/// every step. Stops early at the first failed step and returns its status.
Status integrate_rk4(const AccelFn& f, State& s, double dt, long steps,
                     const std::function<void(const State&)>& observe = {});

}  // namespace ukb::reference
