/// @file stabilize.hpp
/// @brief Projection of a state back onto the constraint manifold, shared by
///        every backend (Baumgarte stabilisation lives in uk.hpp, inside the
///        evaluation).
#pragma once

#include "ukb/config.hpp"
#include "ukb/kernels/linalg.hpp"
#include "ukb/kernels/uk.hpp"
#include "ukb/model.hpp"
#include "ukb/settings.hpp"
#include "ukb/status.hpp"

namespace ukb::kernels {

/// Largest absolute entry of x (K).
template <int K, class T>
UKB_HD inline T norm_inf(const T* x) {
  using std::abs;
  T s = T(0);
  for (int i = 0; i < K; ++i) s = abs(x[i]) > s ? abs(x[i]) : s;
  return s;
}

/// The mass-weighted least-squares correction dx = -M^{-1} J^T (J M^{-1} J^T)^+ e
/// = -L^{-T} (J L^{-T})^+ e (J m x n, row-major, overwritten; e m; dx n) with
/// M = M(q, t) = L L^T: the smallest change in the metric of M that removes
/// the linearised residual J dx = -e. J's rows must be zero outside the
/// model's constraint_columns where it gives them (J = A, or A with rows
/// zeroed). Status failed_mass_matrix or failed_nonfinite as uk_accel.
template <Model Mo>
UKB_HD Status mass_weighted_correction(const typename Mo::Scalar* q, typename Mo::Scalar t,
                                       const typename Mo::Params& p, typename Mo::Scalar* J,
                                       const typename Mo::Scalar* e, typename Mo::Scalar rank_rtol,
                                       typename Mo::Scalar* dx) {
  using T = typename Mo::Scalar;
  constexpr int n = Mo::n, m = Mo::m;
  MassFactorOf<Mo> L;
  mass_of<Mo>(q, t, p, L.L);
  if (!L.finite() || !all_finite<m * n>(J) || !all_finite<m>(e)) return Status::failed_nonfinite;
  if (L.factor(mass_pivot_rtol<n, T>()) != 0) return Status::failed_mass_matrix;
  using Rows = ConstraintColumnsOf<Mo>;  // J = A: its zeros
  L.template solve_rows<m, Rows>(J);    // J <- J L^{-T}
  PseudoInverse<m, n, T, Rows> pinv;
  pinv.factor(J, rank_rtol);
  pinv.apply(e, dx);
  L.solve_transpose(dx);
  for (int k = 0; k < n; ++k) dx[k] = -dx[k];
  return all_finite<n>(dx) ? Status::ok : Status::failed_nonfinite;
}

/// Projects (q, q') at time t onto the constraint manifold of the model's
/// rows (`constraint_rows`), positions first, then velocities, each by
/// Gauss–Newton iterations x <- x + dx with the mass-weighted correction:
/// - positions: the holonomic rows' phi(q, t) with J = A(q, q', t) (the
///   nonholonomic rows take no part: their J row and residual are zero);
/// - velocities, at the projected q: every row's phi' (holonomic) or psi
///   (nonholonomic) with J = A(q, q', t).
/// Each level stops after the first correction with |dx|_inf <= tol |x|_inf
/// (x after the correction), or after max_iter corrections; `converged` is
/// false when a level used them all without reaching the tolerance (the
/// last iterate is kept). Status failed_* where M, A or the residuals cannot
/// be used; then q and q' are partly corrected and the caller restores them.
template <Model Mo>
UKB_HD Status project(typename Mo::Scalar* q, typename Mo::Scalar* qd, typename Mo::Scalar t,
                      const typename Mo::Params& p, typename Mo::Scalar rank_rtol,
                      const Projection<typename Mo::Scalar>& pr, bool& converged) {
  using T = typename Mo::Scalar;
  constexpr int n = Mo::n, m = Mo::m;
  converged = true;
  if constexpr (HasConstraintRows<Mo>) {
    for (int level = 0; level < 2; ++level) {
      T* x = level == 0 ? q : qd;
      bool done = false;
      for (int it = 0; it < pr.max_iter && !done; ++it) {
        T phi[m], phid[m], J[m * n], b[m], dx[n];
        Mo::constraint_rows(q, qd, t, p, phi, phid);
        Mo::constraints(q, qd, t, p, J, b);
        T* e = level == 0 ? phi : phid;
        if (level == 0)
          for (int i = 0; i < m; ++i)
            if (!row_is_holonomic<Mo>(i)) {
              e[i] = T(0);
              for (int k = 0; k < n; ++k) J[i * n + k] = T(0);
            }
        const Status st = mass_weighted_correction<Mo>(q, t, p, J, e, rank_rtol, dx);
        if (st != Status::ok) return st;
        for (int k = 0; k < n; ++k) x[k] += dx[k];
        done = norm_inf<n>(dx) <= pr.tol * norm_inf<n>(x);
      }
      converged = converged && done;
    }
  } else {
    (void)q, (void)qd, (void)t, (void)p, (void)rank_rtol, (void)pr;
  }
  return Status::ok;
}

namespace detail {
template <Model Mo>
UKB_NOINLINE UKB_HD Status project_call(typename Mo::Scalar* q, typename Mo::Scalar* qd, typename Mo::Scalar t,
                                        const typename Mo::Params& p, typename Mo::Scalar rank_rtol,
                                        const Projection<typename Mo::Scalar>& pr, bool& converged) {
  return project<Mo>(q, qd, t, p, rank_rtol, pr, converged);
}
}  // namespace detail

/// project() as the run loop calls it: out of line in GPU device code (one
/// copy for both methods' kernels) unless `Inline`, inlined elsewhere;
/// through detail::on_copies (uk.hpp: where detail::inlined_accel<Mo>, the
/// caller's state then stays in registers).
template <Model Mo, bool Inline = false>
UKB_HD UKB_INLINE Status project_step(typename Mo::Scalar* q, typename Mo::Scalar* qd, typename Mo::Scalar t,
                                      const typename Mo::Params& p, typename Mo::Scalar rank_rtol,
                                      const Projection<typename Mo::Scalar>& pr, bool& converged) {
  using T = typename Mo::Scalar;
  return detail::on_copies<Mo>(q, qd, p, pr, [&](T* x, T* v, const typename Mo::Params& px, const Projection<T>& prx) {
    bool conv = true;
    Status st;
#if defined(__CUDA_ARCH__)
    if constexpr (!Inline) st = detail::project_call<Mo>(x, v, t, px, rank_rtol, prx, conv);
    else st = project<Mo>(x, v, t, px, rank_rtol, prx, conv);
#else
    st = project<Mo>(x, v, t, px, rank_rtol, prx, conv);
#endif
    converged = conv;
    return st;
  });
}

}  // namespace ukb::kernels
