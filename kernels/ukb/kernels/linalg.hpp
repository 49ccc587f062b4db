/// @file linalg.hpp
/// @brief The factorisations of the Udwadia–Kalaba solve, shared by every
///        backend: the factor of a mass matrix (MassFactor) and the
///        pseudo-inverse of a wide matrix (PseudoInverse: certified
///        Gram–Cholesky, else one-sided Jacobi), for one thread (or a pack's
///        lanes) and for a team of threads that shares one system (team.hpp).
///
/// Fixed sizes, row-major arrays, no allocation, no exceptions: `UKB_HD`
/// code that runs in a GPU thread and on a CPU core alike.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "ukb/config.hpp"
#include "ukb/policy.hpp"
#include "ukb/kernels/dense.hpp"
#include "ukb/kernels/lanes.hpp"
#include "ukb/kernels/team.hpp"

namespace ukb::kernels {

/// The factor L of a mass matrix M = L L^T (N x N) and the products with
/// it that the Udwadia–Kalaba solve takes, for one system or the systems in
/// a pack's lanes. Dense (`Diagonal` false): `L` holds M (row-major) and
/// then the Cholesky factor, with cholesky, solve_lower and its kin. For a
/// diagonal M (`Diagonal` true, a model with HasDiagonalMass): `L` holds the
/// diagonal of M and then sqrt(M_jj), and every operation is the dense
/// one's with its terms of the zero entries left out, which for finite
/// values changes nothing but the sign of a zero result (x - 0 * y = x,
/// 0 + x = x): the same factor, the same failed pivot, the same solves, in
/// O(N) instead of O(N^3) and O(N^2). Bit for bit where products are rounded
/// before they are added (the CPU build's -ffp-contract=off); nvcc's fused
/// multiply-adds may round the two routes differently.
template <int N, class T, bool Diagonal>
struct MassFactor {
  static constexpr int entries = Diagonal ? N : N * N;  ///< values of M the mass function writes
  T L[entries];  ///< M as given (all of it, or its diagonal), then L
  T rd[N];       ///< 1 / L_jj after factor()

  /// Whether every entry of M is finite (per lane).
  UKB_HD MaskOf<T> finite() const { return all_finite<entries>(L); }

  // Every operation below takes the team that shares this factor (team.hpp;
  // SerialTeam, one thread, by default) and ends with a sync: x and y must
  // then be shared by the team too. A team splits the entries that are
  // independent of each other among its members; a recurrence (a triangular
  // solve of a dense L) member 0 computes alone.

  /// M = L L^T in place: 0 on success, else k + 1 for the first pivot k
  /// that fails (cholesky's rule and result).
  template <class Team = SerialTeam>
  UKB_HD typename Lanes<T>::Int factor(typename Lanes<T>::Scalar rel_pivot, const Team& team = {}) {
    if constexpr (Diagonal) {
      using Lane = Lanes<T>;
      using std::sqrt;
      if constexpr (!is_serial_team<Team>) {
        // Every member finds the first failing pivot; the members then take
        // the square roots of the pivots before it.
        int info = 0;
        for (int j = 0; j < N && info == 0; ++j)
          if (!(L[j] > T(rel_pivot) * L[j]) || !is_finite(L[j])) info = j + 1;
        team.sync();  // every member has read M
        for (int j = team.rank(); j < (info ? info - 1 : N); j += team.size()) {
          const T ljj = sqrt(L[j]), r = T(1) / ljj;
          L[j] = ljj;
          rd[j] = r;
        }
        team.sync();
        return info;
      } else {
        typename Lane::Int info{};
        MaskOf<T> ok(true);
        for (int j = 0; j < N; ++j) {
          const T d = L[j];
          const MaskOf<T> bad = !(d > T(rel_pivot) * d) || !is_finite(d);
          Lane::first(info, bad, j + 1);
          ok = ok && !bad;
          if (!Lane::any(ok)) return info;
          const T ljj = sqrt(d), r = T(1) / ljj;
          L[j] = ljj;
          rd[j] = r;
        }
        return info;
      }
    } else {
      return factor_cholesky<N>(team, L, rd, rel_pivot);
    }
  }
  /// x <- L^{-1} x.
  template <class Team = SerialTeam>
  UKB_HD void solve(T* x, const Team& team = {}) const {
    if constexpr (Diagonal) {
      for (int i = team.rank(); i < N; i += team.size()) x[i] = x[i] * rd[i];
    } else {
      if (team.rank() == 0) solve_lower<N>(L, rd, x);
    }
    team.sync();
  }
  /// x <- L^{-T} x.
  template <class Team = SerialTeam>
  UKB_HD void solve_transpose(T* x, const Team& team = {}) const {
    if constexpr (Diagonal) {
      for (int i = team.rank(); i < N; i += team.size()) x[i] = x[i] * rd[i];
    } else {
      if (team.rank() == 0) solve_lower_transpose<N>(L, rd, x);
    }
    team.sync();
  }
  /// X <- X L^{-T} for the R rows of X (R x N, row-major), whose nonzeros
  /// lie in Support (AllColumns; a narrower one only for a diagonal L, which
  /// keeps X's zeros where they are). Row r by member r mod size.
  template <int R, class Support = AllColumns<N>, class Team = SerialTeam>
  UKB_HD void solve_rows(T* X, const Team& team = {}) const {
    static_assert(Diagonal || !Support::sparse, "a dense L^{-T} fills the rows in");
    if constexpr (Diagonal) {
      for (int r = team.rank(); r < R; r += team.size()) {
        const ColumnRange c = Support::row(r);
        for (int i = c.begin; i < c.end; ++i) X[r * N + i] = X[r * N + i] * rd[i];
      }
      team.sync();
    } else if constexpr (is_serial_team<Team>) {
      solve_lower_rows<N, R>(L, rd, X);
    } else {
      team_solve_lower_rows<N, R>(team, L, rd, X);
    }
  }
  /// y <- L x.
  template <class Team = SerialTeam>
  UKB_HD void mul(const T* x, T* y, const Team& team = {}) const {
    for (int i = team.rank(); i < N; i += team.size()) {
      if constexpr (Diagonal) {
        y[i] = L[i] * x[i];
      } else {
        y[i] = mul_lower_row<N>(L, x, i);
      }
    }
    team.sync();
  }
};

/// Pseudo-inverse of a wide matrix B (Rows x Cols, here M x N) for the Udwadia–Kalaba
/// solve, with B^+ y and (B B^T)^+ y applied to vectors. Two routes:
///
/// - **Gram–Cholesky (fast path).** G = B B^T = L L^T (M x M). Taken only
///   when a bound certifies that G is well conditioned:
///       kappa(G) <= trace(G) ||L^{-1}||_F^2 <= about eps^{-1/3}
///   (1.6e5 in double, 200 in float; trace(G) >= lambda_max and
///   ||L^{-1}||_F^2 = trace(G^{-1}) >= 1/lambda_min), or, where that fails,
///       kappa(G) <= min(trace(G), ||L||_1 ||L||_inf)
///                   * min(||L^{-1}||_F^2, ||L^{-1}||_1 ||L^{-1}||_inf)
///   (lambda_max = ||L||_2^2 and 1/lambda_min = ||L^{-1}||_2^2, and
///   ||X||_2^2 <= ||X||_1 ||X||_inf). The trace and the Frobenius norm
///   overestimate by up to Rows each; the 1- and inf-norms follow the band
///   of a chain's G: a 12-link chain, kappa(G) about 12, is bounded by about
///   250 with the first bound (above float's 200) and 22 with the second
///   (bench/README.md); and that no singular
///   value is near the rank cut (the same bound against 1/rtol^2). Then B
///   has full rank M, B^+ = B^T G^{-1} and (B B^T)^+ = G^{-1}, with relative
///   errors of order kappa(G) eps <= eps^{2/3}, in a few hundred flops where
///   Jacobi takes thousands (bench/README.md). In float, a lane that the
///   float bound does not certify tries again in double (mixed precision:
///   G of the float B exactly, its factor and the solves in double,
///   certified to 1.6e5), so that longer chains keep the fast route.
/// - **One-sided Jacobi SVD (Hestenes), otherwise.** Plane rotations V make
///   the columns of W = B^T V (N x M) mutually orthogonal, so that
///   B = V S U^T with W = U S and
///       B^+ = W S^{-2} V^T,   (B B^T)^+ = V S^{-2} V^T.
///   Singular values s_i at or below rtol * s_max are dropped; their count
///   is the rank. One-sided Jacobi computes singular values to high
///   relative accuracy, so exactly dependent rows give s_i near
///   eps * s_max, which the relative rule drops (the Gram matrix, with its
///   squared condition number, could not tell them from a rank of 1e-8:
///   that is why the fast path needs its certificate).
///
/// Both routes decide the rank as the reference backend does (JacobiSVD
/// with the same relative rule): the fast path only where rank M is certain.
///
/// `Support` (AllColumns, or a model's ConstraintColumnsOf in uk.hpp) says
/// where B's rows may be nonzero: the Gram matrix and B^+ y on the Gram
/// route leave out the other columns' terms, exact zeros (the Jacobi route's
/// rotations fill W in: it takes every term).
template <int Rows, int Cols, class T, class Support = AllColumns<Cols>>
struct PseudoInverse {
  using Lane = Lanes<T>;
  using Mask = MaskOf<T>;
  /// The envelope of G and of its factor (GramEnvelope where B's rows have
  /// a narrower Support).
  using Envelope = std::conditional_t<Support::sparse, GramEnvelope<Support, Rows>, FullEnvelope<Rows>>;
  T W[Cols * Rows];     // B^T V (Jacobi) or B^T (Gram), Cols x Rows, row-major
  T Vrot[Rows * Rows];  // the rotations V (Jacobi) or L with G = L L^T (Gram), row-major
  T inv_s2[Rows];  // Jacobi: 1 / s_i^2, or 0 for a dropped singular value; Gram: 1 / L_ii
  typename Lane::Int rank{};
  int sweeps = 0;     // Jacobi sweeps used (the most of any lane that took Jacobi, or of
                      // any lane at all where some took Gram); 40 (max_sweeps): not converged
  Mask gram{false};   // true: the Gram–Cholesky route was taken (per lane)
  /// The rank decision was marginal: a singular value within a factor
  /// policy::rank_margin of the cut rtol * s_max (either side). Never on the
  /// Gram route, which is certified with that margin.
  Mask marginal{false};

  /// Mixed precision (T float): the lanes whose Gram matrix the float
  /// certificate cannot vouch for (cond(G) bound above 200) form G, factor
  /// it and solve in double, certified as in double (1.6e5): the squared
  /// condition number then costs no float digits. `gram_wide` marks them
  /// (always false in double).
  using Wide = typename Lane::Wide;
  static constexpr bool mixed = !std::is_same_v<Wide, T>;
  Mask gram_wide{false};

  /// Largest certified condition bound of G for the Gram route in the
  /// arithmetic U, about eps^{-1/3}: 1.6e5 in double, 200 in float.
  template <class U>
  UKB_HD static constexpr typename Lanes<U>::Scalar gram_kappa_max() {
    using S = typename Lanes<U>::Scalar;
    return sizeof(S) >= 8 ? S(1.6e5) : S(200);
  }

  /// Mixed precision: B^T in double, and the double Gram route's L and
  /// 1 / L_ii. L and rdiag zeroed: only the lanes of `gram_wide` are ever
  /// read, but g++ 12 cannot see that through the inlined route and warns
  /// (-Wmaybe-uninitialized) without it.
  struct WideGram {
    Wide Bt[Cols * Rows];
    Wide scratch[3 * Rows + 1];
    Wide L[Rows * Rows]{};
    Wide rdiag[Rows]{};
  };
  struct NoWideGram {};
  std::conditional_t<mixed, WideGram, NoWideGram> wide;

  /// Factorises B (Rows x Cols, row-major) with relative rank tolerance rtol;
  /// `allow_gram` = false forces the Jacobi route (studies, tests). In a
  /// pack, each lane takes its own route: the lanes that the Gram route
  /// cannot certify are factorised by Jacobi on copies and merged.
  ///
  /// Here and in apply and apply_gram, `team` (team.hpp; one thread by
  /// default) is the team that shares this object, B, y and x: its members
  /// split the transposition, the Gram matrix, its factor and the products;
  /// member 0 forms the certificate's bound, from which every member
  /// decides the route; member 0 alone runs the Jacobi route. Each ends
  /// with a sync. A team passes factor `shared`, scratch_size values of
  /// scratch it shares.
  static constexpr int scratch_size = 3 * Rows + 1;
  template <class Team = SerialTeam>
  UKB_HD void factor(const T* B, T rtol, bool allow_gram = true, const Team& team = {}, T* shared = nullptr) {
    for (int k = team.rank(); k < Cols; k += team.size())
      for (int i = 0; i < Rows; ++i) W[k * Rows + i] = B[i * Cols + k];
    team.sync();
    const bool lead = team.rank() == 0;
    // One row: Jacobi has nothing to rotate and is as cheap as the bound.
    Mask g(false), g_wide(false);
    if (allow_gram && Rows > 1) g = try_gram(rtol, g_wide, team, shared);
    if (lead) {
      sweeps = 0;
      gram = g;
      gram_wide = g_wide;
      marginal = Mask(false);
    }
    if (Lane::all(g)) {
      if (lead) {
        rank = typename Lane::Int{};
        for (int i = 0; i < Rows; ++i) Lane::count(rank, g);
      }
      team.sync();
      return;
    }
    if constexpr (Lane::width > 1) {
      if (Lane::any(gram)) {  // some lanes certified: Jacobi for the others on copies
        T Wj[Cols * Rows], Vj[Rows * Rows], sj[Rows];
        for (int k = 0; k < Cols * Rows; ++k) Wj[k] = W[k];
        sweeps = jacobi(Wj, Vj, sj, rtol, rank, marginal);
        marginal = marginal && !gram;
        for (int k = 0; k < Cols * Rows; ++k) W[k] = Lane::select(gram, W[k], Wj[k]);
        for (int k = 0; k < Rows * Rows; ++k) Vrot[k] = Lane::select(gram, Vrot[k], Vj[k]);
        for (int i = 0; i < Rows; ++i) inv_s2[i] = Lane::select(gram, inv_s2[i], sj[i]);
        for (int l = 0; l < Lane::width; ++l) rank[l] = gram[l] ? Rows : rank[l];
        return;
      }
    }
    team.sync();  // every member is done with W, Vrot and inv_s2 before Jacobi writes them
    if (lead) sweeps = jacobi(W, Vrot, inv_s2, rtol, rank, marginal);
    team.sync();
  }

  /// x <- B^+ y  (y: Rows, x: Cols).
  template <class Team = SerialTeam>
  UKB_HD void apply(const T* y, T* x, const Team& team = {}) const {
    T z[Rows];
    coefficients(y, z);
    if constexpr (Support::sparse) {
      if (Lane::all(gram)) {  // W = B^T: x_k sums over the rows i that reach column k, i in order
        if constexpr (is_serial_team<Team>) {
          for (int k = 0; k < Cols; ++k) x[k] = T(0);
          for (int i = 0; i < Rows; ++i) {
            const ColumnRange c = Support::row(i);
            for (int k = c.begin; k < c.end; ++k) x[k] += W[k * Rows + i] * z[i];
          }
        } else {  // a member per column k, its sum in the same order
          for (int k = team.rank(); k < Cols; k += team.size()) {
            T s = T(0);
            for (int i = 0; i < Rows; ++i) {
              const ColumnRange c = Support::row(i);
              if (c.begin <= k && k < c.end) s += W[k * Rows + i] * z[i];
            }
            x[k] = s;
          }
        }
        team.sync();
        return;
      }
    }
    for (int k = team.rank(); k < Cols; k += team.size()) {
      T s = T(0);
      for (int i = 0; i < Rows; ++i) s += W[k * Rows + i] * z[i];
      x[k] = s;
    }
    team.sync();
  }

  /// x <- (B B^T)^+ y  (y, x: Rows).
  template <class Team = SerialTeam>
  UKB_HD void apply_gram(const T* y, T* x, const Team& team = {}) const {
    T z[Rows];
    coefficients(y, z);
    if (Lane::all(gram)) {
      for (int i = team.rank(); i < Rows; i += team.size()) x[i] = z[i];  // G^{-1} y
      team.sync();
      return;
    }
    for (int k = team.rank(); k < Rows; k += team.size()) {
      T s = T(0);
      for (int i = 0; i < Rows; ++i) s += Vrot[k * Rows + i] * z[i];
      x[k] = Lane::select(gram, z[k], s);
    }
    team.sync();
  }

 private:
  // The Gram route, per lane: G = W^T W, its Cholesky factor and the
  // certificate in T (L into Vrot, 1 / L_ii into inv_s2); in float, for the
  // lanes it cannot certify, the same in double (wide; those lanes in
  // `wide_lanes`).
  template <class Team>
  UKB_HD Mask try_gram(T rtol, Mask& wide_lanes, const Team& team, T* shared) {
    wide_lanes = Mask(false);
    if constexpr (mixed) {
      Mask own(false), worth_wide(true);
      // kappa(G) >= max_i G_ii / min_i G_ii (lambda_max >= G_ii >= lambda_min),
      // so a lane whose diagonal spreads beyond the float limit cannot pass
      // the float certificate: it goes to double at once, as does a lane
      // whose G_ii are not finite in float (overflow: double may still
      // hold them). The float attempt is made where some lane can pass it,
      // and counts only in those lanes (a lane's route depends on its own
      // B alone).
      T dmax = T(0), dmin = T(0);
      Mask finite(true);
      for (int i = 0; i < Rows; ++i) {
        T d = T(0);
        const ColumnRange c = Support::row(i);
        for (int k = c.begin; k < c.end; ++k) d += W[k * Rows + i] * W[k * Rows + i];
        finite = finite && is_finite(d);
        dmax = i == 0 ? d : Lane::select(d > dmax, d, dmax);
        dmin = i == 0 ? d : Lane::select(d < dmin, d, dmin);
      }
      const Mask hope = finite && dmax <= T(gram_kappa_max<T>()) * dmin;
      if (Lane::any(hope)) {
        // A lane whose float G could not be factored, or whose bound is
        // beyond 1/eps of float, is far past the double route's 1.6e5
        // (redundant rows, a near-singular B): Jacobi, without the
        // attempt in double.
        T bound;
        own = certify<T>(W, rtol, Vrot, inv_s2, team, shared, &bound) && hope;
        const T hopeless = T(1) / std::numeric_limits<typename Lane::Scalar>::epsilon();
        worth_wide = !own && !(hope && !(bound <= hopeless));
      }
      if (!Lane::any(worth_wide)) return own;
      for (int k = team.rank(); k < Cols; k += team.size())
        for (int i = 0; i < Rows; ++i) wide.Bt[k * Rows + i] = Lane::widen(W[k * Rows + i]);
      team.sync();
      wide_lanes =
          Lane::narrow(certify<Wide>(wide.Bt, Lane::widen(rtol), wide.L, wide.rdiag, team, wide.scratch)) &&
          worth_wide;
      return own || wide_lanes;
    } else {
      return certify<T>(W, rtol, Vrot, inv_s2, team, shared);
    }
  }

  // G = Bt^T Bt (Bt: Cols x Rows) into G's lower triangle, its Cholesky
  // factor (rd: 1 / L_ii) and whether the bound certifies it (per lane),
  // all in the arithmetic U. G_ij sums over the columns where both rows
  // may be nonzero (Support), k in order. A team's members split G's rows
  // and its factor; member 0 forms the certificate's bound in `shared`
  // (3 Rows + 1 values of the team's scratch), and every member decides
  // from it.
  template <class U, class Team>
  UKB_HD static MaskOf<U> certify(const U* Bt, U rtol, U* G, U* rd, const Team& team, U* shared,
                                  U* bound_out = nullptr) {
    using UL = Lanes<U>;
    for (int i = team.rank(); i < Rows; i += team.size()) {
      const ColumnRange ci = Support::row(i);
      for (int j = 0; j <= i; ++j) {
        const ColumnRange o = overlap(ci, Support::row(j));
        U s = U(0);
        for (int k = o.begin; k < o.end; ++k) s += Bt[k * Rows + i] * Bt[k * Rows + j];
        G[i * Rows + j] = s;
      }
      // The upper triangle is not used, but a pack that mixes routes
      // selects whole matrices: it must not read indeterminate values.
      for (int j = i + 1; j < Rows; ++j) G[i * Rows + j] = U(0);
    }
    team.sync();
    U trace = U(0);
    for (int i = 0; i < Rows; ++i) trace += G[i * Rows + i];
    using std::abs;
    const MaskOf<U> factored = UL::is_zero(factor_cholesky<Rows, U, Envelope>(team, G, rd, 0));
    if (bound_out) *bound_out = U(std::numeric_limits<typename UL::Scalar>::quiet_NaN());
    if (!UL::any(factored)) return factored;
    // Rank cut: s_min > rtol s_max with a margin of policy::rank_margin = 100
    // (in s^2: 1e4; 1 / 100^2 rounds as the literal 1e-4 does).
    using S = typename UL::Scalar;
    auto certified = [&](const U& bound) {
      return factored && is_finite(bound) && bound <= U(gram_kappa_max<U>()) &&
             bound * rtol * rtol < U(S(1) / (S(policy::rank_margin) * S(policy::rank_margin)));
    };
    // The bound. Its arrays (Rows values each: a column x of L^{-1}, the
    // row sums of |L^{-1}| and the column sums of |L|) are one thread's
    // own, where they were always declared; a team's member 0 takes them
    // from the team's scratch (an array of a team member's own is on its
    // stack in GPU code).
    constexpr bool own = is_serial_team<Team>;
    auto bound_in = [&]() {
      // ||L^{-1}||_F^2 = trace(G^{-1}) >= 1 / lambda_min, column by column of
      // L^{-1} (lower triangular); with `sums`, also the largest column and
      // row sums of |L^{-1}| (their product >= ||L^{-1}||_2^2 = 1 / lambda_min).
      auto inverse_norms = [&](U& frob, U& col_max, U& row_max, bool sums) {
        U row_sum_own[own ? Rows : 1];
        U* const row_sum = own ? row_sum_own : shared + Rows;
        frob = col_max = row_max = U(0);
        for (int i = 0; i < Rows; ++i) row_sum[i] = U(0);
        for (int j = 0; j < Rows; ++j) {
          U x_own[own ? Rows : 1];
          U* const x = own ? x_own : shared;
          U col = U(0);
          for (int i = 0; i < Rows; ++i) x[i] = i == j ? U(1) : U(0);
          for (int i = j; i < Rows; ++i) {
            U s = x[i];
            const int fi = Envelope::first(i);
            for (int k = fi > j ? fi : j; k < i; ++k) s -= G[i * Rows + k] * x[k];
            x[i] = s * rd[i];
            frob += x[i] * x[i];
            if (sums) col += abs(x[i]), row_sum[i] += abs(x[i]);
          }
          if (sums) col_max = UL::select(col > col_max, col, col_max);
        }
        for (int i = 0; i < Rows; ++i) row_max = UL::select(row_sum[i] > row_max, row_sum[i], row_max);
      };
      U frob, c1, r1;
      inverse_norms(frob, c1, r1, false);
      U bound = trace * frob;  // >= kappa(G) = (s_max / s_min)^2
      if (UL::any(factored && !certified(bound))) {
        // Where that bound fails, the sharper one: lambda_max = ||L||_2^2 <=
        // ||L||_1 ||L||_inf and 1 / lambda_min <= ||L^{-1}||_1 ||L^{-1}||_inf,
        // each taken where it is below the first bound's factor (a select:
        // a NaN of the first stays). Never larger, so the lanes the first
        // bound certified stay certified: a lane's route depends on its own
        // B alone.
        U col_sum_own[own ? Rows : 1];
        U* const col_sum = own ? col_sum_own : shared + 2 * Rows;
        U row_norm = U(0), col_norm = U(0);
        for (int j = 0; j < Rows; ++j) col_sum[j] = U(0);
        for (int i = 0; i < Rows; ++i) {
          U r = U(0);
          for (int j = Envelope::first(i); j <= i; ++j) r += abs(G[i * Rows + j]), col_sum[j] += abs(G[i * Rows + j]);
          row_norm = UL::select(r > row_norm, r, row_norm);
        }
        for (int j = 0; j < Rows; ++j) col_norm = UL::select(col_sum[j] > col_norm, col_sum[j], col_norm);
        const U lmax = row_norm * col_norm;
        inverse_norms(frob, c1, r1, true);
        const U inv = c1 * r1;
        bound = UL::select(lmax < trace, lmax, trace) * UL::select(inv < frob, inv, frob);
      }
      return bound;
    };
    U bound;
    if constexpr (own) {
      bound = bound_in();
    } else {  // member 0 in the team's scratch, which every member then reads the bound from
      if (team.rank() == 0) shared[3 * Rows] = bound_in();
      team.sync();
      bound = shared[3 * Rows];  // written again in the next factor(), many syncs later
    }
    const MaskOf<U> ok = certified(bound);
    if (bound_out) *bound_out = UL::select(factored, bound, *bound_out);
    return ok;
  }

  // Gram: z = G^{-1} y, each lane in its route's arithmetic.
  UKB_HD void gram_coefficients(const T* y, T* z) const {
    if constexpr (mixed) {
      if (Lane::any(gram_wide)) {
        Wide x[Rows];
        for (int i = 0; i < Rows; ++i) x[i] = Lane::widen(y[i]);
        solve_lower<Rows, Wide, Envelope>(wide.L, wide.rdiag, x);
        solve_lower_transpose<Rows, Wide, Envelope>(wide.L, wide.rdiag, x);
        if (Lane::all(gram_wide)) {
          for (int i = 0; i < Rows; ++i) z[i] = Lane::narrow(x[i]);
          return;
        }
        for (int i = 0; i < Rows; ++i) z[i] = y[i];
        solve_lower<Rows, T, Envelope>(Vrot, inv_s2, z);
        solve_lower_transpose<Rows, T, Envelope>(Vrot, inv_s2, z);
        for (int i = 0; i < Rows; ++i) z[i] = Lane::select(gram_wide, Lane::narrow(x[i]), z[i]);
        return;
      }
    }
    for (int i = 0; i < Rows; ++i) z[i] = y[i];
    solve_lower<Rows, T, Envelope>(Vrot, inv_s2, z);
    solve_lower_transpose<Rows, T, Envelope>(Vrot, inv_s2, z);
  }

  // Jacobi: z = S^{-2} V^T y.
  UKB_HD void jacobi_coefficients(const T* y, T* z) const {
    for (int i = 0; i < Rows; ++i) {
      T s = T(0);
      for (int k = 0; k < Rows; ++k) s += Vrot[k * Rows + i] * y[k];
      z[i] = s * inv_s2[i];
    }
  }

  // The coefficients z of x = W z, each lane by its route.
  UKB_HD void coefficients(const T* y, T* z) const {
    if (Lane::all(gram)) return gram_coefficients(y, z);
    jacobi_coefficients(y, z);
    if (!Lane::any(gram)) return;
    T zg[Rows];
    gram_coefficients(y, zg);
    for (int i = 0; i < Rows; ++i) z[i] = Lane::select(gram, zg[i], z[i]);
  }

  // One-sided Jacobi on W (Cols x Rows): rot (Rows x Rows) the rotations V, inv (Rows) 1 / s_i^2
  // or 0 for a dropped singular value, rank the kept ones; returns the
  // sweeps; marginal where a singular value lies within policy::rank_margin
  // of the cut. A lane whose pair needs no rotation keeps its columns as they
  // are (select), so every lane rotates exactly as a scalar would.
  UKB_HD static int jacobi(T* W, T* rot, T* inv, T rtol, typename Lane::Int& rank, Mask& marginal) {
    using std::abs;
    using std::sqrt;
    for (int i = 0; i < Rows; ++i)
      for (int j = 0; j < Rows; ++j) rot[i * Rows + j] = i == j ? T(1) : T(0);
    // Columns count as orthogonal when |cos angle| <= sqrt(Cols) eps, the
    // rounding level of a length-Cols dot product (as LAPACK's dgesvj).
    using S = typename Lane::Scalar;
    const T tol = T(sqrt(S(Cols)) * std::numeric_limits<S>::epsilon());
    constexpr int max_sweeps = 40;
    bool rotated = Rows > 1;
    int sweeps = 0;
    for (; rotated && sweeps < max_sweeps; ++sweeps) {
      rotated = false;
      for (int p = 0; p < Rows - 1; ++p) {
        for (int q = p + 1; q < Rows; ++q) {
          T alpha = T(0), beta = T(0), gamma = T(0);
          for (int k = 0; k < Cols; ++k) {
            alpha += W[k * Rows + p] * W[k * Rows + p];
            beta += W[k * Rows + q] * W[k * Rows + q];
            gamma += W[k * Rows + p] * W[k * Rows + q];
          }
          const Mask turn = abs(gamma) > tol * (sqrt(alpha) * sqrt(beta));
          if (!Lane::any(turn)) continue;
          rotated = true;
          // Rotation that zeroes the (p, q) entry of W^T W.
          const T zeta = (beta - alpha) / (T(2) * gamma);
          const T t = Lane::select(zeta >= T(0), T(1), T(-1)) / (abs(zeta) + sqrt(T(1) + zeta * zeta));
          const T c = T(1) / sqrt(T(1) + t * t), s = c * t;
          for (int k = 0; k < Cols; ++k) {
            const T wp = W[k * Rows + p], wq = W[k * Rows + q];
            W[k * Rows + p] = Lane::select(turn, c * wp - s * wq, wp);
            W[k * Rows + q] = Lane::select(turn, s * wp + c * wq, wq);
          }
          for (int k = 0; k < Rows; ++k) {
            const T vp = rot[k * Rows + p], vq = rot[k * Rows + q];
            rot[k * Rows + p] = Lane::select(turn, c * vp - s * vq, vp);
            rot[k * Rows + q] = Lane::select(turn, s * vp + c * vq, vq);
          }
        }
      }
    }
    T s2[Rows];
    T s2_max = T(0);
    for (int i = 0; i < Rows; ++i) {
      s2[i] = T(0);
      for (int k = 0; k < Cols; ++k) s2[i] += W[k * Rows + i] * W[k * Rows + i];
      s2_max = Lane::select(s2[i] > s2_max, s2[i], s2_max);
    }
    rank = typename Lane::Int{};
    const T cut = rtol * rtol * s2_max;  // s_i > rtol s_max  <=>  s_i^2 > rtol^2 s_max^2
    const T margin2 = T(S(policy::rank_margin) * S(policy::rank_margin));
    marginal = Mask(false);
    for (int i = 0; i < Rows; ++i) {
      const Mask keep = s2[i] > cut && s2[i] > T(0);
      inv[i] = Lane::select(keep, T(1) / s2[i], T(0));
      Lane::count(rank, keep);
      marginal = marginal || (s2[i] * margin2 > cut && s2[i] <= cut * margin2);
    }
    return sweeps;
  }
};

}  // namespace ukb::kernels
