/// @file uk.hpp
/// @brief The Udwadia–Kalaba acceleration of one system (or of the systems
///        in a pack's lanes), shared by the CPU and CUDA backends.
#pragma once

#include <type_traits>

#include "ukb/config.hpp"
#include "ukb/kernels/lanes.hpp"
#include "ukb/kernels/linalg.hpp"
#include "ukb/model.hpp"
#include "ukb/policy.hpp"
#include "ukb/settings.hpp"
#include "ukb/status.hpp"

namespace ukb::kernels {

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

/// The model's M as the kernels factor it (MassFactor): its diagonal (n)
/// where the model gives it (HasDiagonalMass), else all of it (n x n).
template <Model Mo>
UKB_HD UKB_INLINE void mass_of(const typename Mo::Scalar* q, typename Mo::Scalar t, const typename Mo::Params& p,
                               typename Mo::Scalar* M) {
  if constexpr (HasDiagonalMass<Mo>) {
    Mo::mass_diagonal(q, t, p, M);
  } else {
    Mo::mass(q, t, p, M);
  }
}

/// The factor of a model's M on V (MassFactor: diagonal where the model
/// gives the diagonal).
template <Model Mo, class V = typename Mo::Scalar>
using MassFactorOf = MassFactor<Mo::n, V, HasDiagonalMass<Mo>>;

/// Where the rows of a model's A, and of B = A L^{-T}, may be nonzero (the
/// Support of linalg.hpp's products): the model's constraint_columns where
/// it gives them (its M is then diagonal, so B keeps A's zeros), else every
/// column.
template <Model Mo>
struct ConstraintColumnsOf {
  static constexpr bool sparse = HasConstraintColumns<Mo>;
  static_assert(!sparse || HasDiagonalMass<Mo>,
                "ukb model: `constraint_columns` needs `mass_diagonal` (a dense M fills B = A L^{-T} in)");
  static_assert(!sparse || constraint_columns_valid<Mo>(),
                "ukb model: every `constraint_columns` range must have 0 <= begin <= end <= n");
  UKB_HD static constexpr ColumnRange row(int i) {
    if constexpr (sparse) {
      return constraint_columns_of<Mo>(i);
    } else {
      (void)i;
      return {0, Mo::n};
    }
  }
};

/// What one evaluation of a model gives (fixed sizes, lives in registers);
/// V is the model's scalar or a pack of lanes (lanes.hpp).
template <Model Mo, class V = typename Mo::Scalar>
struct Accel {
  V qdd[Mo::n];          ///< q''
  V Qc_ideal[Mo::n];     ///< ideal constraint force A^T lambda
  V Qc_nonideal[Mo::n];  ///< non-ideal constraint force L (I - B^+ B) L^{-1} C
  V lambda[Mo::m];       ///< multipliers (A M^{-1} A^T)^+ (b - A a)
  typename Lanes<V>::Int rank{};         ///< numerical rank of B = A L^{-T}
  MaskOf<V> inconsistent{false};  ///< |A q'' - b| above policy::consistency_rtol (see there)
  MaskOf<V> marginal{false};      ///< the rank decision was marginal (PseudoInverse::marginal)
};

/// How the kernels call a model's functions (mass, force, constraints and
/// Baumgarte's b; the non-ideal force; the event function) on the
/// arithmetic type V. For the
/// model's scalar: directly, with one system's Params. Specialised for SIMD
/// packs in kernels/ukb/cpu/simd.hpp: on the pack where the model gives
/// `rebind`, else each lane's system in turn, in scalar code.
template <Model Mo, class V = typename Mo::Scalar>
struct ModelLanes {
  using T = typename Mo::Scalar;
  using Params = typename Mo::Params;  ///< one system's parameters

  /// M (MassFactorOf<Mo>::entries: its diagonal where the model gives it,
  /// else n x n), Q (n), A (m x n) and b (m, Baumgarte-corrected when bg is on).
  UKB_HD static void inputs(const T* q, const T* qd, T t, const Params& p, const Baumgarte<T>& bg,
                            T* M, T* Q, T* A, T* b) {
    mass_of<Mo>(q, t, p, M);
    Mo::force(q, qd, t, p, Q);
    Mo::constraints(q, qd, t, p, A, b);
    baumgarte_rhs<Mo>(q, qd, t, p, bg, b);
  }

  /// C (n) from the ideal parts, for the systems where `active` holds.
  UKB_HD static void nonideal(const T* q, const T* qd, T t, const Params& p, const T* Qc_ideal,
                              const T* lambda, bool active, T* C) {
    if (active) Mo::nonideal(q, qd, t, p, Qc_ideal, lambda, C);
  }

  /// The event function g at (q, q', t) (models with events).
  UKB_HD static T event(const T* q, const T* qd, T t, const Params& p) { return Mo::event(q, qd, t, p); }
};

/// The parameters of the systems behind V: one Params, or one per lane.
template <Model Mo, class V>
using ParamsOf = typename ModelLanes<Mo, V>::Params;

/// Where one Udwadia–Kalaba evaluation (uk_accel) keeps its matrices and
/// vectors: the factor of M, the pseudo-inverse of B, and arrays of n or m
/// values (A of m x n), wherever they live (UkWorkspace for a team; one
/// thread's own arrays, which a struct of them all would have put in local
/// memory for the chains).
template <Model Mo, class V = typename Mo::Scalar>
struct UkArrays {
  MassFactorOf<Mo, V>& Lm;  ///< M, then its factor L
  PseudoInverse<Mo::m, Mo::n, V, ConstraintColumnsOf<Mo>>& pinv;  ///< of B
  V* a;  ///< n: Q, then a = M^{-1} Q
  V* A;  ///< m x n: A, then B = A L^{-T}
  V* b;  ///< m: b (Baumgarte-corrected)
  V* r;  ///< m: r = b - A a
  V* z;  ///< n: z = B^+ r
  V* u;  ///< n: C, then c^ = L^{-1} C, then L^T (q'' - a)
  V* w;  ///< n: (I - B^+ B) c^
  V* y;  ///< m: B c^
  V* scratch = nullptr;  ///< a team's: PseudoInverse::scratch_size values (factor's `shared`)
};

/// The workspace of one Udwadia–Kalaba evaluation as one object, sized by
/// the model's n and m: sizeof(UkWorkspace<Mo, V>) is what an evaluation
/// needs besides its inputs and its Accel; a team shares it (a GPU block's
/// shared memory). Take the size where the code runs: on the host, a float
/// pseudo-inverse also holds its Gram route in double (Lanes::Wide), on a
/// GPU not.
template <Model Mo, class V = typename Mo::Scalar>
struct UkWorkspace {
  static constexpr int n = Mo::n, m = Mo::m;
  MassFactorOf<Mo, V> Lm;
  PseudoInverse<m, n, V, ConstraintColumnsOf<Mo>> pinv;
  V a[n], A[m * n], b[m], r[m], z[n], u[n], w[n], y[m];
  V scratch[decltype(pinv)::scratch_size];
  UKB_HD UkArrays<Mo, V> arrays() { return {Lm, pinv, a, A, b, r, z, u, w, y, scratch}; }
};

/// Evaluates the Udwadia–Kalaba equation for one system, or for the
/// systems in V's lanes (docs/design.md §1):
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
///
/// By a team (team.hpp) that shares the arrays `ws` and `out`: member 0
/// calls the model's functions, the members split the factorisations and
/// products (linalg.hpp), and every member returns the same status; q, qd,
/// t and p are read by member 0 alone (the model's calls: they may be
/// member 0's own, team_run.hpp's evaluator passes them so). SerialTeam (one thread,
/// or a pack's lanes) gives the bits of any team.
template <Model Mo, class V, class Team>
UKB_HD UKB_INLINE typename Lanes<V>::LaneStatus uk_accel(const Team& team, const UkArrays<Mo, V>& ws, const V* q, const V* qd,
                                              std::type_identity_t<V> t, const ParamsOf<Mo, V>& p,
                                              typename Mo::Scalar rank_rtol, Accel<Mo, V>& out,
                                              const Baumgarte<typename Mo::Scalar>& bg) {
  using T = typename Mo::Scalar;
  using Lane = Lanes<V>;
  using Mask = MaskOf<V>;
  static_assert(is_serial_team<Team> || Lane::width == 1, "a team of threads evaluates one system");
  constexpr int n = Mo::n, m = Mo::m;
  const int first = team.rank(), stride = team.size();
  const bool lead = first == 0;
  typename Lane::LaneStatus st{};
  auto& Lm = ws.Lm;
  V* const a = ws.a;
  if (lead) ModelLanes<Mo, V>::inputs(q, qd, t, p, bg, Lm.L, a, ws.A, ws.b);
  team.sync();
  const Mask finite_in = team.all(finite_share<MassFactorOf<Mo, V>::entries>(team, Lm.L) &&
                                  finite_share<n>(team, a) && finite_share<m * n>(team, ws.A) &&
                                  finite_share<m>(team, ws.b));
  Lane::fail(st, !finite_in, Status::failed_nonfinite);
  if (!Lane::any(Lane::ok(st))) return st;
  Lane::fail(st, !Lane::is_zero(Lm.factor(mass_pivot_rtol<n, T>(), team)), Status::failed_mass_matrix);
  if (!Lane::any(Lane::ok(st))) return st;

  // a = M^{-1} Q; r = b - A a; B = A L^{-T}, row by row B_i^T = L^{-1} A_i^T
  // (row i of r and of B by member i mod size, in place: A is not needed
  // any more). The products with A's rows and B's take the columns of Rows
  // alone (every column, or the model's constraint_columns).
  using Rows = ConstraintColumnsOf<Mo>;
  Lm.solve(a, team);
  Lm.solve_transpose(a, team);
  using std::abs;
  V r_scale = V(T(0));  // max_i (|b_i| + sum_k |A_ik a_k|)
  for (int i = first; i < m; i += stride) {
    V s = ws.b[i], sa = abs(ws.b[i]);
    const ColumnRange c = Rows::row(i);
    for (int k = c.begin; k < c.end; ++k) {
      s -= ws.A[i * n + k] * a[k];
      sa += abs(ws.A[i * n + k] * a[k]);
    }
    ws.r[i] = s;
    r_scale = Lane::select(sa > r_scale, sa, r_scale);
  }
  r_scale = team.max(r_scale);
  V* const B = ws.A;
  Lm.template solve_rows<m, Rows>(B, team);
  auto& pinv = ws.pinv;
  pinv.factor(B, V(rank_rtol), true, team, ws.scratch);
  if (lead) {
    out.rank = pinv.rank;
    out.marginal = pinv.marginal;
  }

  // Ideal part: z = B^+ r, Qc_ideal = L z, lambda = (B B^T)^+ r.
  V* const z = ws.z;
  pinv.apply(ws.r, z, team);
  // A q'' - b = B z - r exactly (B B^+ B = B removes the non-ideal part):
  // the part of r outside the range of B.
  V worst = V(T(0));
  for (int i = first; i < m; i += stride) {
    V s = -ws.r[i];
    const ColumnRange c = Rows::row(i);
    for (int k = c.begin; k < c.end; ++k) s += B[i * n + k] * z[k];
    worst = Lane::select(abs(s) > worst, abs(s), worst);
  }
  worst = team.max(worst);
  if (lead) out.inconsistent = r_scale > V(T(0)) && worst > V(policy::consistency_rtol<T>()) * r_scale;
  Lm.mul(z, out.Qc_ideal, team);
  pinv.apply_gram(ws.r, out.lambda, team);

  // Non-ideal part: with w = B^+ B c^ (the part of c^ the constraints
  // take), Qc_nonideal = L (c^ - w) and q'' = a + L^{-T} (c^ + z - w), which
  // equals a + L^{-T} (c^ + B^+ (r - B c^)) by linearity.
  V* const u = ws.u;
  V* const w = ws.w;
  if (lead) ModelLanes<Mo, V>::nonideal(q, qd, t, p, out.Qc_ideal, out.lambda, Lane::ok(st), u);  // u = C
  team.sync();
  Lane::fail(st, !team.all(finite_share<n>(team, u)), Status::failed_nonfinite);
  if (!Lane::any(Lane::ok(st))) return st;
  Lm.solve(u, team);  // u = c^
  for (int i = first; i < m; i += stride) {
    V s = V(T(0));
    const ColumnRange c = Rows::row(i);
    for (int k = c.begin; k < c.end; ++k) s += B[i * n + k] * u[k];
    ws.y[i] = s;  // B c^
  }
  team.sync();
  pinv.apply(ws.y, w, team);
  for (int k = first; k < n; k += stride) {
    w[k] = u[k] - w[k];  // (I - B^+ B) c^
    u[k] = w[k] + z[k];  // c^ + z - B^+ B c^
  }
  team.sync();
  Lm.mul(w, out.Qc_nonideal, team);
  Lm.solve_transpose(u, team);
  for (int k = first; k < n; k += stride) out.qdd[k] = a[k] + u[k];
  team.sync();
  const Mask finite = team.all(finite_share<n>(team, out.qdd) && finite_share<n>(team, out.Qc_ideal) &&
                               finite_share<n>(team, out.Qc_nonideal) && finite_share<m>(team, out.lambda));
  Lane::fail(st, !finite, Status::failed_nonfinite);
  return st;
}

/// uk_accel by one thread (or on a pack's lanes), its workspace its own.
template <Model Mo, class V = typename Mo::Scalar>
UKB_HD typename Lanes<V>::LaneStatus uk_accel(const V* q, const V* qd, std::type_identity_t<V> t,
                                              const ParamsOf<Mo, V>& p,
                                              typename Mo::Scalar rank_rtol, Accel<Mo, V>& out,
                                              const Baumgarte<typename Mo::Scalar>& bg = {}) {
  constexpr int n = Mo::n, m = Mo::m;
  // In the order the evaluation first uses them.
  MassFactorOf<Mo, V> Lm;
  V a[n], A[m * n], b[m], r[m];
  PseudoInverse<m, n, V, ConstraintColumnsOf<Mo>> pinv;
  V z[n], u[n], y[m], w[n];
  return uk_accel<Mo, V>(SerialTeam{}, UkArrays<Mo, V>{Lm, pinv, a, A, b, r, z, u, w, y}, q, qd, t, p, rank_rtol,
                         out, bg);
}

namespace detail {
template <Model Mo, class V>
UKB_NOINLINE UKB_HD typename Lanes<V>::LaneStatus uk_accel_call(const V* q, const V* qd, V t,
                                                                const ParamsOf<Mo, V>& p,
                                                                typename Mo::Scalar rank_rtol, Accel<Mo, V>& out,
                                                                const Baumgarte<typename Mo::Scalar>& bg) {
  return uk_accel<Mo, V>(q, qd, t, p, rank_rtol, out, bg);
}

/// Whether the run loop's accelerations are inlined in GPU device code (the
/// models with fewer than 8 coordinates; uk_eval). For those, the
/// out-of-line calls of the rare paths (uk_eval_rare, project_step) take
/// copies of their arguments: an out-of-line call takes the addresses of
/// its arguments, and were they the caller's own arrays (the run's state,
/// its parameters) nvcc would keep them in local memory for the whole
/// kernel instead of in registers (bench/kernel_registers.sh prints every
/// kernel's registers, stack and spills). The larger models' state does not
/// fit in the 255 registers anyway: copies there moved their stack down but
/// their spill stores up, so they pass their arrays as they are. Among the small models, those already at 255
/// registers (planar_chain_3, rolling_disk, rolling_sphere) also traded
/// stack for more spill stores; whether any of this is faster on a GPU is
/// not measured yet.
template <Model Mo>
inline constexpr bool inlined_accel = Mo::n < 8;

/// Whether RK4's run inlines its rare paths in GPU device code too
/// (fixed_run.hpp): the models of at most 4 coordinates, whose step then
/// fits in the registers (with 5 and 6 coordinates, rolling_sphere and
/// planar_chain_3, inlining turned stack into spill stores).
template <Model Mo>
inline constexpr bool inlined_rare = Mo::n <= 4;

/// f(q, q', p, s) for the run loop's rare paths (uk_eval_rare,
/// project_step): where inlined_accel<Mo>, on copies of q and q' (n values
/// each), of the parameters p and of the settings s, on every backend (so
/// that the CPU's tests run the copies that the GPU's kernels run), with
/// the copies of q and q' written back when they are writable; else on the
/// arguments themselves (see inlined_accel for why).
template <Model Mo, class Q, class S, class F>
UKB_HD UKB_INLINE auto on_copies(Q* q, Q* qd, const typename Mo::Params& p, const S& s, F&& f) {
  if constexpr (inlined_accel<Mo>) {
    std::remove_const_t<Q> qc[Mo::n], qdc[Mo::n];
    for (int j = 0; j < Mo::n; ++j) qc[j] = q[j], qdc[j] = qd[j];
    const typename Mo::Params pc = p;
    const S sc = s;
    const auto result = f(qc, qdc, pc, sc);
    if constexpr (!std::is_const_v<Q>)
      for (int j = 0; j < Mo::n; ++j) q[j] = qc[j], qd[j] = qdc[j];
    return result;
  } else {
    return f(q, qd, p, s);
  }
}

}  // namespace detail

/// uk_accel as the run loop calls it (every stage, the acceleration at the
/// start of an adaptive step, the initial step, a handler's first
/// consultation): in GPU device code, for models with 8 coordinates or
/// more, one out-of-line copy that every call site calls (inlined at each
/// of them, the chains' kernels made nvcc's compile several times longer);
/// elsewhere inlined. The same operations either way.
template <Model Mo, class V = typename Mo::Scalar>
UKB_HD UKB_INLINE typename Lanes<V>::LaneStatus uk_eval(const V* q, const V* qd, std::type_identity_t<V> t,
                                                        const ParamsOf<Mo, V>& p, typename Mo::Scalar rank_rtol,
                                                        Accel<Mo, V>& out,
                                                        const Baumgarte<typename Mo::Scalar>& bg = {}) {
#if defined(__CUDA_ARCH__)
  if constexpr (!detail::inlined_accel<Mo>) {
    return detail::uk_accel_call<Mo, V>(q, qd, t, p, rank_rtol, out, bg);
  } else {
    return uk_accel<Mo, V>(q, qd, t, p, rank_rtol, out, bg);
  }
#else
  return uk_accel<Mo, V>(q, qd, t, p, rank_rtol, out, bg);
#endif
}

/// uk_accel on the run loop's rare paths (the acceleration at the start of
/// an adaptive step where the last stage does not give it, the initial
/// step's probe, a handler's first consultation): out of line in GPU device
/// code (detail::uk_accel_call: one copy instead of one more inlined body per
/// path) unless `Inline` (the runs choose: fixed_run.hpp), inlined elsewhere.
/// The same operations either way, through detail::on_copies.
template <Model Mo, bool Inline = false>
UKB_HD UKB_INLINE Status uk_eval_rare(const typename Mo::Scalar* q, const typename Mo::Scalar* qd,
                                      typename Mo::Scalar t, const typename Mo::Params& p,
                                      typename Mo::Scalar rank_rtol, Accel<Mo>& out,
                                      const Baumgarte<typename Mo::Scalar>& bg = {}) {
  using T = typename Mo::Scalar;
  return detail::on_copies<Mo>(q, qd, p, bg, [&](const T* x, const T* v, const typename Mo::Params& px,
                                                 const Baumgarte<T>& b) {
#if defined(__CUDA_ARCH__)
    if constexpr (!Inline) return detail::uk_accel_call<Mo, T>(x, v, t, px, rank_rtol, out, b);
#endif
    return uk_accel<Mo, T>(x, v, t, px, rank_rtol, out, b);
  });
}

}  // namespace ukb::kernels
