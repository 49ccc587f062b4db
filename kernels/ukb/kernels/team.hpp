/// @file team.hpp
/// @brief Teams of threads that share one system's linear algebra (issue
///        48, "a team per chain"): the factorisations and products of the
///        Udwadia–Kalaba solve written once against a small Team interface,
///        so that one GPU thread, a tile of a warp (cuda/team.cuh) and a CPU
///        emulation with one host thread per member run the same source.
///
/// A Team has
/// - `rank()` (0 .. size() - 1) and `size()`;
/// - `sync()`: every member waits until every member has arrived; what each
///   wrote before is then visible to all;
/// - `all(m)`: true on every member when m is true on every member;
/// - `max(x)`: the largest x of the members, the same on every member (a
///   NaN only where every x is NaN; -0 and +0 are not told apart).
/// `all` and `max` do not make earlier writes visible: a sync does. They
/// are a rendezvous, though: every member has finished what it read before
/// them when any member goes on (the evaluation overwrites M and C after
/// them).
///
/// The matrices a team works on are shared by its members (a GPU block's
/// shared memory); each member computes its share of the entries (rows
/// i = rank, rank + size, ...) with the same operations in the same order
/// as one thread, so that a team of any size gives the same bits as one
/// thread (SerialTeam, which the one-thread kernels take) where the compiler
/// contracts no multiply-adds (the CPU build; nvcc may fuse the two shapes
/// of a loop differently). What decides the control flow (a pivot, a
/// route, a status) every member decides itself from the shared data, so
/// that all members take the same branches; what is one recurrence (the
/// model's functions, a dense triangular solve, the Gram certificate's
/// bound, Jacobi's rotations) member 0 does in shared memory, and the
/// others wait at the next sync; short read-only recurrences (the solves
/// with the Gram factor into a member's own coefficients) every member
/// does itself. Team
/// functions end with a sync: their results are visible to every member on
/// return. Teams of more than one thread work on scalars (no SIMD packs).
///
/// Every member must call a team function with the same arguments; a
/// member may return early only together with all the others.
#pragma once

#include <cmath>
#include <type_traits>

#include "ukb/config.hpp"
#include "ukb/kernels/dense.hpp"
#include "ukb/kernels/lanes.hpp"

namespace ukb::kernels {

/// One thread alone: the team of the one-thread-per-system kernels (and of
/// the CPU's packs of lanes).
struct SerialTeam {
  UKB_HD static constexpr int rank() { return 0; }
  UKB_HD static constexpr int size() { return 1; }
  UKB_HD static void sync() {}
  template <class M>
  UKB_HD static M all(const M& m) {
    return m;
  }
  template <class T>
  UKB_HD static T max(const T& x) {
    return x;
  }
};

/// Whether Team is one thread (SerialTeam), whose kernels keep the
/// one-thread code (packs of lanes included).
template <class Team>
inline constexpr bool is_serial_team = std::is_same_v<Team, SerialTeam>;

/// Whether the entries of x (K) in this member's share (i = rank, rank +
/// size, ...) are finite; Team::all of the shares says whether every entry
/// is (all_finite for one thread).
template <int K, class T, class Team>
UKB_HD UKB_INLINE MaskOf<T> finite_share(const Team& team, const T* x) {
  if constexpr (is_serial_team<Team>) {
    (void)team;
    return all_finite<K>(x);
  } else {
    bool ok = true;
    for (int i = team.rank(); i < K; i += team.size()) ok = ok && is_finite(x[i]);
    return ok;
  }
}

/// cholesky<N, T, Envelope> by a team, on A shared by its members: the
/// same factor L, reciprocals `rdiag` and result (0, or k + 1 for the first
/// pivot k that is not above rel_pivot times A_kk or not finite) as one
/// thread, bit for bit. Column j: every member forms the pivot from row j
/// (finished in the columns before), then fills its rows i > j of the
/// column; after a sync, member 0 writes the diagonal entry, which no later
/// column reads. N + 1 syncs; on a failed pivot every member syncs and
/// returns at the same column, and A is then as far as it got (the columns
/// before it finished, visible to every member).
template <int N, class T, class Envelope = FullEnvelope<N>, class Team>
UKB_HD int team_cholesky(const Team& team, T* A, T* rdiag, T rel_pivot = T(0)) {
  using std::sqrt;
  const int first = team.rank(), stride = team.size();
  for (int j = 0; j < N; ++j) {
    const T a_jj = A[j * N + j];
    const int fj = Envelope::first(j);
    T d = a_jj;
    for (int k = fj; k < j; ++k) d -= A[j * N + k] * A[j * N + k];
    if (!(d > rel_pivot * a_jj) || !is_finite(d)) {
      team.sync();  // member 0's diagonal entry of the column before, for every member
      return j + 1;
    }
    const T ljj = sqrt(d), r = T(1) / ljj;
    for (int i = j + 1 + first; i <= Envelope::last(j); i += stride) {
      const int fi = Envelope::first(i);
      if (fi > j) continue;  // L_ij = 0
      T s = A[i * N + j];
      for (int k = fi > fj ? fi : fj; k < j; ++k) s -= A[i * N + k] * A[j * N + k];
      A[i * N + j] = s * r;
    }
    team.sync();  // every member has read A_jj and written its rows of column j
    if (first == 0) {
      A[j * N + j] = ljj;
      rdiag[j] = r;
    }
  }
  team.sync();
  return 0;
}

/// The Cholesky factorisation of A (N x N) by a team: one thread's
/// cholesky<N, T, Envelope> (packs of lanes included) for SerialTeam, else
/// team_cholesky, with the same bits; ends with a sync.
template <int N, class T, class Envelope = FullEnvelope<N>, class Team>
UKB_HD UKB_INLINE typename Lanes<T>::Int factor_cholesky(const Team& team, T* A, T* rdiag,
                                                         typename Lanes<T>::Scalar rel_pivot) {
  if constexpr (is_serial_team<Team>) {
    (void)team;
    return cholesky<N, T, Envelope>(A, rdiag, rel_pivot);
  } else {
    return team_cholesky<N, T, Envelope>(team, A, rdiag, T(rel_pivot));
  }
}

/// X <- X L^{-T} for the R rows of X (R x N, shared), each row by one
/// member (solve_lower, as solve_lower_rows does per row); then a sync.
template <int N, int R, class T, class Team>
UKB_HD void team_solve_lower_rows(const Team& team, const T* L, const T* rdiag, T* X) {
  for (int r = team.rank(); r < R; r += team.size()) solve_lower<N>(L, rdiag, X + r * N);
  team.sync();
}

/// G = B B^T (B: Rows x Cols, row-major) into the lower triangle of G
/// (Rows x Rows, row-major; the upper triangle zeroed), row i by member
/// i mod size, each entry summed over k in order (the Gram matrix of
/// PseudoInverse's certificate); then a sync.
template <int Rows, int Cols, class T, class Team>
UKB_HD void team_gram(const Team& team, const T* B, T* G) {
  for (int i = team.rank(); i < Rows; i += team.size()) {
    for (int j = 0; j <= i; ++j) {
      T s = T(0);
      for (int k = 0; k < Cols; ++k) s += B[i * Cols + k] * B[j * Cols + k];
      G[i * Rows + j] = s;
    }
    for (int j = i + 1; j < Rows; ++j) G[i * Rows + j] = T(0);
  }
  team.sync();
}

}  // namespace ukb::kernels
