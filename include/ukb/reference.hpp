/// @file reference.hpp
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
#include <span>

#include "ukb/model.hpp"
#include "ukb/status.hpp"

namespace ukb::reference {

/// Default relative rank tolerance: singular values of B at or below
/// 1e-10 * sigma_max count as zero. Round-off in redundant constraint rows
/// leaves singular values near 1e-16 sigma_max, far below; any constraint
/// set conditioned better than 1e10 keeps its full rank.
inline constexpr double default_rank_rtol = 1e-10;

/// Solver options.
struct Options {
  double rank_rtol = default_rank_rtol;  ///< relative rank tolerance for B^+ (>= 0)
};

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
};

/// The non-ideal force C (n) as a function of Qc_ideal (n) and lambda (m).
using NonidealFn =
    std::function<Eigen::VectorXd(const Eigen::VectorXd& Qc_ideal, const Eigen::VectorXd& lambda)>;

/// Solves the Udwadia–Kalaba equation for given M (n x n, symmetric), Q (n),
/// A (m x n), b (m) and non-ideal force C. Status failed_nonfinite if an
/// input or result is not finite, failed_mass_matrix if M is not symmetric
/// (relative asymmetry above 1e-12) or its Cholesky factorisation fails.
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

/// Evaluates one system of a double-precision model with the reference solver.
/// q and qd must have Mo::n entries.
template <Model Mo>
  requires std::same_as<typename Mo::Scalar, double>
Result evaluate(const typename Mo::Params& p, const Eigen::VectorXd& q, const Eigen::VectorXd& qd,
                double t, const Options& opt = {}) {
  const Terms k = terms<Mo>(p, q, qd, t);
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

/// `steps` RK4 steps of size dt. `observe(state)` (optional) is called after
/// every step. Stops early at the first failed step and returns its status.
Status integrate_rk4(const AccelFn& f, State& s, double dt, long steps,
                     const std::function<void(const State&)>& observe = {});

}  // namespace ukb::reference
