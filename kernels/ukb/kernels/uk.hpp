/// @file uk.hpp
/// @brief The Udwadia–Kalaba acceleration of one system and the RK4 step,
///        shared by the CPU and CUDA backends.
#pragma once

#include "ukb/config.hpp"
#include "ukb/kernels/linalg.hpp"
#include "ukb/model.hpp"
#include "ukb/status.hpp"

namespace ukb::kernels {

/// Default relative rank tolerance of the pseudo-inverse per scalar type:
/// 1e-10 in double (as the reference backend), 1e-5 in float, where the
/// round-off of dependent rows reaches ~1e-7 of the largest singular value.
template <class T>
UKB_HD constexpr T default_rank_rtol() {
  return sizeof(T) >= 8 ? T(1e-10) : T(1e-5);
}

/// Baumgarte stabilisation of the constraint rows (DESIGN.md section 1 with
/// a corrected right-hand side): with the rows' constraints of the model
/// (`constraint_rows`),
///     b_i <- b_i - 2 alpha phi_i' - beta^2 phi_i   (holonomic rows),
///     b_i <- b_i - gamma psi_i                      (nonholonomic rows),
/// so that a drifted constraint obeys phi'' + 2 alpha phi' + beta^2 phi = 0
/// (psi' + gamma psi = 0) instead of phi'' = 0. alpha, beta and gamma are
/// rates (1/time); alpha = beta is critical damping.
template <class T>
struct Baumgarte {
  bool on = false;  ///< off: b is used as the model gives it
  T alpha{};        ///< damping rate of holonomic rows (1/time, >= 0)
  T beta{};         ///< stiffness rate of holonomic rows (1/time, >= 0)
  T gamma{};        ///< decay rate of nonholonomic rows (1/time, >= 0)
};

/// Applies Baumgarte stabilisation to b (m) at (q, q', t); nothing when it is
/// off or the model does not state its constraint rows (the host refuses
/// that combination before any work).
template <Model Mo>
UKB_HD inline void baumgarte_rhs(const typename Mo::Scalar* q, const typename Mo::Scalar* qd,
                                 typename Mo::Scalar t, const typename Mo::Params& p,
                                 const Baumgarte<typename Mo::Scalar>& bg,
                                 typename Mo::Scalar* b) {
  using T = typename Mo::Scalar;
  if constexpr (HasConstraintRows<Mo>) {
    if (!bg.on) return;
    T phi[Mo::m], phid[Mo::m];
    Mo::constraint_rows(q, qd, t, p, phi, phid);
    for (int i = 0; i < Mo::m; ++i)
      b[i] -= row_is_holonomic<Mo>(i)
                  ? T(2) * bg.alpha * phid[i] + bg.beta * bg.beta * phi[i]
                  : bg.gamma * phid[i];
  } else {
    (void)q, (void)qd, (void)t, (void)p, (void)bg, (void)b;
  }
}

/// Relative tolerance of the consistency check of the constraints:
/// sqrt(epsilon) of T (1.5e-8 in double, 3.5e-4 in float). An evaluation is
/// *inconsistent* where max_i |(A q'' - b)_i| exceeds this times the scale
/// max_i (|b_i| + sum_k |A_ik a_k|) of the right-hand side r = b - A a
/// (and that scale is not 0: then r = 0, which every A meets): no
/// acceleration meets every row, and q'' is the least-squares compromise.
/// Round-off, even with cond(B) ~ 1e7, stays well below it.
template <class T>
UKB_HD constexpr T consistency_rtol() {
  return sizeof(T) >= 8 ? T(1.4901161193847656e-8) : T(3.4526698e-4);
}

/// What one evaluation of a model gives (fixed sizes, lives in registers).
template <Model Mo>
struct Accel {
  using T = typename Mo::Scalar;
  T qdd[Mo::n];          ///< q''
  T Qc_ideal[Mo::n];     ///< ideal constraint force A^T lambda
  T Qc_nonideal[Mo::n];  ///< non-ideal constraint force L (I - B^+ B) L^{-1} C
  T lambda[Mo::m];       ///< multipliers (A M^{-1} A^T)^+ (b - A a)
  int rank = 0;          ///< numerical rank of B = A L^{-T}
  bool inconsistent = false;  ///< |A q'' - b| above consistency_rtol (see there)
};

/// Evaluates the Udwadia–Kalaba equation for one system (DESIGN.md §1):
///     q'' = a + L^{-T} ( c^ + B^+ (r - B c^) ),  Qc_ideal = L B^+ r,
///     Qc_nonideal = L (I - B^+ B) c^,  lambda = (B B^T)^+ r,
/// with M = L L^T, a = M^{-1} Q, B = A L^{-T}, r = b - A a, c^ = L^{-1} C,
/// where C is evaluated after the ideal part. Statuses as the reference:
/// failed_nonfinite for a non-finite M, Q, A, b, C or result;
/// failed_mass_matrix when the Cholesky factorisation of M fails. With
/// Baumgarte stabilisation `bg` on, b is corrected first (baumgarte_rhs).
template <Model Mo>
UKB_HD Status uk_accel(const typename Mo::Scalar* q, const typename Mo::Scalar* qd,
                       typename Mo::Scalar t, const typename Mo::Params& p,
                       typename Mo::Scalar rank_rtol, Accel<Mo>& out,
                       const Baumgarte<typename Mo::Scalar>& bg = {}) {
  using T = typename Mo::Scalar;
  constexpr int n = Mo::n, m = Mo::m;
  T L[n * n], rd[n], a[n], A[m * n], b[m];
  Mo::mass(q, t, p, L);
  Mo::force(q, qd, t, p, a);
  Mo::constraints(q, qd, t, p, A, b);
  baumgarte_rhs<Mo>(q, qd, t, p, bg, b);
  if (!all_finite<n * n>(L) || !all_finite<n>(a) || !all_finite<m * n>(A) || !all_finite<m>(b))
    return Status::failed_nonfinite;
  if (cholesky<n>(L, rd) != 0) return Status::failed_mass_matrix;

  // a = M^{-1} Q; r = b - A a; B = A L^{-T}, row by row B_i^T = L^{-1} A_i^T.
  solve_lower<n>(L, rd, a);
  solve_lower_transpose<n>(L, rd, a);
  using std::abs;
  T r[m], r_scale = T(0);  // r_scale: max_i (|b_i| + sum_k |A_ik a_k|)
  for (int i = 0; i < m; ++i) {
    T s = b[i], sa = abs(b[i]);
    for (int k = 0; k < n; ++k) {
      s -= A[i * n + k] * a[k];
      sa += abs(A[i * n + k] * a[k]);
    }
    r[i] = s;
    r_scale = sa > r_scale ? sa : r_scale;
  }
  T* B = A;  // A is not needed any more
  solve_lower_rows<n, m>(L, rd, B);
  PseudoInverse<m, n, T> pinv;
  pinv.factor(B, rank_rtol);
  out.rank = pinv.rank;

  // Ideal part: z = B^+ r, Qc_ideal = L z, lambda = (B B^T)^+ r.
  T z[n];
  pinv.apply(r, z);
  // A q'' - b = B z - r exactly (B B^+ B = B removes the non-ideal part):
  // the part of r outside the range of B.
  T worst = T(0);
  for (int i = 0; i < m; ++i) {
    T s = -r[i];
    for (int k = 0; k < n; ++k) s += B[i * n + k] * z[k];
    worst = abs(s) > worst ? abs(s) : worst;
  }
  out.inconsistent = r_scale > T(0) && worst > consistency_rtol<T>() * r_scale;
  mul_lower<n>(L, z, out.Qc_ideal);
  pinv.apply_gram(r, out.lambda);

  // Non-ideal part: with w = B^+ B c^ (the part of c^ the constraints
  // take), Qc_nonideal = L (c^ - w) and q'' = a + L^{-T} (c^ + z - w), which
  // equals a + L^{-T} (c^ + B^+ (r - B c^)) by linearity.
  T u[n];
  Mo::nonideal(q, qd, t, p, out.Qc_ideal, out.lambda, u);  // u = C
  if (!all_finite<n>(u)) return Status::failed_nonfinite;
  solve_lower<n>(L, rd, u);  // u = c^
  T y[m], w[n];
  for (int i = 0; i < m; ++i) {
    T s = T(0);
    for (int k = 0; k < n; ++k) s += B[i * n + k] * u[k];
    y[i] = s;  // B c^
  }
  pinv.apply(y, w);
  for (int k = 0; k < n; ++k) {
    w[k] = u[k] - w[k];  // (I - B^+ B) c^
    u[k] = w[k] + z[k];  // c^ + z - B^+ B c^
  }
  mul_lower<n>(L, w, out.Qc_nonideal);
  solve_lower_transpose<n>(L, rd, u);
  for (int k = 0; k < n; ++k) out.qdd[k] = a[k] + u[k];
  const bool finite = all_finite<n>(out.qdd) && all_finite<n>(out.Qc_ideal) &&
                      all_finite<n>(out.Qc_nonideal) && all_finite<m>(out.lambda);
  return finite ? Status::ok : Status::failed_nonfinite;
}

/// Stage observer that does nothing (see rk4_step).
struct NoStageObserver {
  template <class T>
  UKB_HD void operator()(const T*, const T*, T) const {}
};

/// How every evaluation of an RK4 step is done, and what it reports.
template <class T>
struct StageSettings {
  T rank_rtol{};         ///< relative rank tolerance of the pseudo-inverse
  Baumgarte<T> bg{};     ///< Baumgarte stabilisation (off by default)
  int* min_rank = nullptr;  ///< if given: lowered to the smallest rank of B seen
  bool* inconsistent = nullptr;  ///< if given: set when an evaluation is inconsistent
};

/// One classical RK4 step of size h on (q, q', t). On a failed stage the
/// state is left unchanged and that stage's status is returned. `observe`
/// sees the states of stages 2, 3 and 4 (q, q', t) before they are
/// evaluated; it does not change the arithmetic.
template <Model Mo, class Observe = NoStageObserver>
UKB_HD Status rk4_step(typename Mo::Scalar* q, typename Mo::Scalar* qd, typename Mo::Scalar& t,
                       typename Mo::Scalar h, const typename Mo::Params& p,
                       const StageSettings<typename Mo::Scalar>& ss, const Observe& observe = {}) {
  using T = typename Mo::Scalar;
  constexpr int n = Mo::n;
  Accel<Mo> k;
  T qs[n], vs[n], dq[n], dv[n];
  const T half = T(0.5) * h;
  auto eval = [&](const T* x, const T* v, T ts) {
    const Status s = uk_accel<Mo>(x, v, ts, p, ss.rank_rtol, k, ss.bg);
    if (ss.min_rank && s == Status::ok && k.rank < *ss.min_rank) *ss.min_rank = k.rank;
    if (ss.inconsistent && s == Status::ok && k.inconsistent) *ss.inconsistent = true;
    return s;
  };
  // Stage 1 at (q, q').
  Status st = eval(q, qd, t);
  if (st != Status::ok) return st;
  for (int i = 0; i < n; ++i) {
    dq[i] = qd[i];
    dv[i] = k.qdd[i];
    qs[i] = q[i] + half * qd[i];
    vs[i] = qd[i] + half * k.qdd[i];
  }
  // Stages 2 and 3 at the midpoint, weights 2.
  for (int stage = 2; stage <= 3; ++stage) {
    observe(qs, vs, t + half);
    st = eval(qs, vs, t + half);
    if (st != Status::ok) return st;
    const T step = stage == 2 ? half : h;
    for (int i = 0; i < n; ++i) {
      dq[i] += T(2) * vs[i];
      dv[i] += T(2) * k.qdd[i];
      const T v = vs[i];
      qs[i] = q[i] + step * v;
      vs[i] = qd[i] + step * k.qdd[i];
    }
  }
  // Stage 4 at the end point.
  observe(qs, vs, t + h);
  st = eval(qs, vs, t + h);
  if (st != Status::ok) return st;
  const T sixth = h / T(6);
  for (int i = 0; i < n; ++i) {
    q[i] += sixth * (dq[i] + vs[i]);
    qd[i] += sixth * (dv[i] + k.qdd[i]);
  }
  t += h;
  return Status::ok;
}

}  // namespace ukb::kernels
