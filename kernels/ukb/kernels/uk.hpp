/// @file uk.hpp
/// @brief The Udwadia–Kalaba acceleration of one system and the RK4 step,
///        shared by the CPU and CUDA backends.
#pragma once

#include <type_traits>

#include "ukb/config.hpp"
#include "ukb/kernels/lanes.hpp"
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

/// What one evaluation of a model gives (fixed sizes, lives in registers);
/// V is the model's scalar or a pack of lanes (lanes.hpp).
template <Model Mo, class V = typename Mo::Scalar>
struct Accel {
  V qdd[Mo::n];          ///< q''
  V Qc_ideal[Mo::n];     ///< ideal constraint force A^T lambda
  V Qc_nonideal[Mo::n];  ///< non-ideal constraint force L (I - B^+ B) L^{-1} C
  V lambda[Mo::m];       ///< multipliers (A M^{-1} A^T)^+ (b - A a)
  typename Lanes<V>::Int rank{};         ///< numerical rank of B = A L^{-T}
  MaskOf<V> inconsistent{false};  ///< |A q'' - b| above consistency_rtol (see there)
};

/// How the kernels call a model's functions (mass, force, constraints and
/// Baumgarte's b; the non-ideal force) on the arithmetic type V. For the
/// model's scalar: directly, with one system's Params. Specialised for SIMD
/// packs in kernels/ukb/cpu/simd.hpp: on the pack where the model gives
/// `rebind`, else each lane's system in turn, in scalar code.
template <Model Mo, class V = typename Mo::Scalar>
struct ModelLanes {
  using T = typename Mo::Scalar;
  using Params = typename Mo::Params;  ///< one system's parameters

  /// M (n x n), Q (n), A (m x n) and b (m, Baumgarte-corrected when bg is on).
  UKB_HD static void inputs(const T* q, const T* qd, T t, const Params& p, const Baumgarte<T>& bg,
                            T* M, T* Q, T* A, T* b) {
    Mo::mass(q, t, p, M);
    Mo::force(q, qd, t, p, Q);
    Mo::constraints(q, qd, t, p, A, b);
    baumgarte_rhs<Mo>(q, qd, t, p, bg, b);
  }

  /// C (n) from the ideal parts, for the systems where `active` holds.
  UKB_HD static void nonideal(const T* q, const T* qd, T t, const Params& p, const T* Qc_ideal,
                              const T* lambda, bool active, T* C) {
    if (active) Mo::nonideal(q, qd, t, p, Qc_ideal, lambda, C);
  }
};

/// The parameters of the systems behind V: one Params, or one per lane.
template <Model Mo, class V>
using ParamsOf = typename ModelLanes<Mo, V>::Params;

/// Evaluates the Udwadia–Kalaba equation for one system, or for the
/// systems in V's lanes (DESIGN.md §1):
///     q'' = a + L^{-T} ( c^ + B^+ (r - B c^) ),  Qc_ideal = L B^+ r,
///     Qc_nonideal = L (I - B^+ B) c^,  lambda = (B B^T)^+ r,
/// with M = L L^T, a = M^{-1} Q, B = A L^{-T}, r = b - A a, c^ = L^{-1} C,
/// where C is evaluated after the ideal part. Statuses as the reference:
/// failed_nonfinite for a non-finite M, Q, A, b, C or result;
/// failed_mass_matrix when the Cholesky factorisation of M fails. With
/// Baumgarte stabilisation `bg` on, b is corrected first (baumgarte_rhs).
/// The outputs are meaningful where the status is ok. In a pack the
/// model's functions are also called for lanes whose system has failed (or
/// that follow another lane's system, cpu/simd.hpp); what they give there
/// is dropped.
template <Model Mo, class V = typename Mo::Scalar>
UKB_HD typename Lanes<V>::LaneStatus uk_accel(const V* q, const V* qd, std::type_identity_t<V> t,
                                              const ParamsOf<Mo, V>& p,
                                              typename Mo::Scalar rank_rtol, Accel<Mo, V>& out,
                                              const Baumgarte<typename Mo::Scalar>& bg = {}) {
  using T = typename Mo::Scalar;
  using L = Lanes<V>;
  using Mask = MaskOf<V>;
  constexpr int n = Mo::n, m = Mo::m;
  typename L::LaneStatus st{};
  V Lm[n * n], rd[n], a[n], A[m * n], b[m];
  ModelLanes<Mo, V>::inputs(q, qd, t, p, bg, Lm, a, A, b);
  const Mask finite_in =
      all_finite<n * n>(Lm) && all_finite<n>(a) && all_finite<m * n>(A) && all_finite<m>(b);
  L::fail(st, !finite_in, Status::failed_nonfinite);
  if (!L::any(L::ok(st))) return st;
  L::fail(st, !L::is_zero(cholesky<n>(Lm, rd)), Status::failed_mass_matrix);
  if (!L::any(L::ok(st))) return st;

  // a = M^{-1} Q; r = b - A a; B = A L^{-T}, row by row B_i^T = L^{-1} A_i^T.
  solve_lower<n>(Lm, rd, a);
  solve_lower_transpose<n>(Lm, rd, a);
  using std::abs;
  V r[m], r_scale = V(T(0));  // r_scale: max_i (|b_i| + sum_k |A_ik a_k|)
  for (int i = 0; i < m; ++i) {
    V s = b[i], sa = abs(b[i]);
    for (int k = 0; k < n; ++k) {
      s -= A[i * n + k] * a[k];
      sa += abs(A[i * n + k] * a[k]);
    }
    r[i] = s;
    r_scale = L::select(sa > r_scale, sa, r_scale);
  }
  V* B = A;  // A is not needed any more
  solve_lower_rows<n, m>(Lm, rd, B);
  PseudoInverse<m, n, V> pinv;
  pinv.factor(B, V(rank_rtol));
  out.rank = pinv.rank;

  // Ideal part: z = B^+ r, Qc_ideal = L z, lambda = (B B^T)^+ r.
  V z[n];
  pinv.apply(r, z);
  // A q'' - b = B z - r exactly (B B^+ B = B removes the non-ideal part):
  // the part of r outside the range of B.
  V worst = V(T(0));
  for (int i = 0; i < m; ++i) {
    V s = -r[i];
    for (int k = 0; k < n; ++k) s += B[i * n + k] * z[k];
    worst = L::select(abs(s) > worst, abs(s), worst);
  }
  out.inconsistent = r_scale > V(T(0)) && worst > V(consistency_rtol<T>()) * r_scale;
  mul_lower<n>(Lm, z, out.Qc_ideal);
  pinv.apply_gram(r, out.lambda);

  // Non-ideal part: with w = B^+ B c^ (the part of c^ the constraints
  // take), Qc_nonideal = L (c^ - w) and q'' = a + L^{-T} (c^ + z - w), which
  // equals a + L^{-T} (c^ + B^+ (r - B c^)) by linearity.
  V u[n];
  ModelLanes<Mo, V>::nonideal(q, qd, t, p, out.Qc_ideal, out.lambda, L::ok(st), u);  // u = C
  L::fail(st, !all_finite<n>(u), Status::failed_nonfinite);
  if (!L::any(L::ok(st))) return st;
  solve_lower<n>(Lm, rd, u);  // u = c^
  V y[m], w[n];
  for (int i = 0; i < m; ++i) {
    V s = V(T(0));
    for (int k = 0; k < n; ++k) s += B[i * n + k] * u[k];
    y[i] = s;  // B c^
  }
  pinv.apply(y, w);
  for (int k = 0; k < n; ++k) {
    w[k] = u[k] - w[k];  // (I - B^+ B) c^
    u[k] = w[k] + z[k];  // c^ + z - B^+ B c^
  }
  mul_lower<n>(Lm, w, out.Qc_nonideal);
  solve_lower_transpose<n>(Lm, rd, u);
  for (int k = 0; k < n; ++k) out.qdd[k] = a[k] + u[k];
  const Mask finite = all_finite<n>(out.qdd) && all_finite<n>(out.Qc_ideal) &&
                      all_finite<n>(out.Qc_nonideal) && all_finite<m>(out.lambda);
  L::fail(st, !finite, Status::failed_nonfinite);
  return st;
}

/// Stage observer that does nothing (see rk4_step).
struct NoStageObserver {
  template <class T>
  UKB_HD void operator()(const T*, const T*, T) const {}
};

/// How every evaluation of an RK4 step is done, and what it reports; V is
/// the arithmetic type of the step (the scalar T or a pack of lanes).
template <class T, class V = T>
struct StageSettings {
  T rank_rtol{};         ///< relative rank tolerance of the pseudo-inverse
  Baumgarte<T> bg{};     ///< Baumgarte stabilisation (off by default)
  /// if given: lowered to the smallest rank of B seen (per lane)
  typename Lanes<V>::Int* min_rank = nullptr;
  MaskOf<V>* inconsistent = nullptr;  ///< if given: set where an evaluation is inconsistent
};

/// One classical RK4 step of size h on (q, q', t), for one system or for
/// the systems in V's lanes. On a failed stage the state is left unchanged
/// and that stage's status is returned. `observe` sees the states of stages
/// 2, 3 and 4 (q, q', t) before they are evaluated; it does not change the
/// arithmetic. In a pack, a lane that has failed goes on in lockstep but its
/// state is left unchanged.
template <Model Mo, class V = typename Mo::Scalar, class Observe = NoStageObserver>
UKB_HD typename Lanes<V>::LaneStatus rk4_step(V* q, V* qd, V& t, std::type_identity_t<V> h,
                                              const ParamsOf<Mo, V>& p,
                                              const StageSettings<typename Mo::Scalar, V>& ss,
                                              const Observe& observe = {}) {
  using T = typename Mo::Scalar;
  using L = Lanes<V>;
  constexpr int n = Mo::n;
  Accel<Mo, V> k;
  V qs[n], vs[n], dq[n], dv[n];
  const V half = V(T(0.5)) * h;
  typename L::LaneStatus st{};
  // Evaluates at (x, v, ts); false when no lane is left.
  auto eval = [&](const V* x, const V* v, V ts) {
    const typename L::LaneStatus s = uk_accel<Mo, V>(x, v, ts, p, ss.rank_rtol, k, ss.bg);
    const MaskOf<V> good = L::ok(s) && L::ok(st);
    if (ss.min_rank) L::lower(*ss.min_rank, good, k.rank);
    if (ss.inconsistent) *ss.inconsistent = *ss.inconsistent || (good && k.inconsistent);
    L::merge(st, s);
    return L::any(L::ok(st));
  };
  // Stage 1 at (q, q').
  if (!eval(q, qd, t)) return st;
  for (int i = 0; i < n; ++i) {
    dq[i] = qd[i];
    dv[i] = k.qdd[i];
    qs[i] = q[i] + half * qd[i];
    vs[i] = qd[i] + half * k.qdd[i];
  }
  // Stages 2 and 3 at the midpoint, weights 2.
  for (int stage = 2; stage <= 3; ++stage) {
    observe(qs, vs, V(t + half));
    if (!eval(qs, vs, t + half)) return st;
    const V step = stage == 2 ? half : h;
    for (int i = 0; i < n; ++i) {
      dq[i] += V(T(2)) * vs[i];
      dv[i] += V(T(2)) * k.qdd[i];
      const V v = vs[i];
      qs[i] = q[i] + step * v;
      vs[i] = qd[i] + step * k.qdd[i];
    }
  }
  // Stage 4 at the end point.
  observe(qs, vs, V(t + h));
  if (!eval(qs, vs, t + h)) return st;
  const V sixth = h / V(T(6));
  const MaskOf<V> ok = L::ok(st);
  for (int i = 0; i < n; ++i) {
    q[i] = L::select(ok, q[i] + sixth * (dq[i] + vs[i]), q[i]);
    qd[i] = L::select(ok, qd[i] + sixth * (dv[i] + k.qdd[i]), qd[i]);
  }
  t = L::select(ok, t + h, t);
  return st;
}

}  // namespace ukb::kernels
