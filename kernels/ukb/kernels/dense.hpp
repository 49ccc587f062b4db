/// @file dense.hpp
/// @brief Small dense linear algebra for one system, shared by every backend:
///        Cholesky factorisation and triangular solves on fixed-size
///        row-major arrays (one system, or the systems in a pack's lanes),
///        with the sparsity patterns (Support, Envelope) they may skip.
///
/// Fixed sizes, row-major arrays, no allocation, no exceptions: `UKB_HD`
/// code that runs in a GPU thread and on a CPU core alike.
#pragma once

#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ukb/config.hpp"
#include "ukb/model.hpp"
#include "ukb/kernels/lanes.hpp"

namespace ukb::kernels {

/// True (per lane) when x is neither NaN nor infinite (valid without
/// -ffast-math).
template <class T>
UKB_HD UKB_INLINE MaskOf<T> is_finite(const T& x) {
  return x - x == T(0);
}

/// True (per lane) when every entry of x (K) is finite.
template <int K, class T>
UKB_HD UKB_INLINE MaskOf<T> all_finite(const T* x) {
  MaskOf<T> ok(true);
  for (int i = 0; i < K; ++i) ok = ok && is_finite(x[i]);
  return ok;
}

/// The pivot floor, relative to the pivot's own diagonal entry, below which
/// a mass matrix is not numerically positive definite: N eps (the size of
/// LAPACK's pivoted-Cholesky default tolerance, dpstrf, which measures it
/// against the largest diagonal entry instead). A pivot that small has
/// lost every digit to cancellation: M is singular to working precision (the
/// rolling sphere's M at the Euler angles' gimbal lock, where the exact
/// pivot is 0 and the computed one a rounding error of either sign).
template <int N, class S>
UKB_HD constexpr S mass_pivot_rtol() {
  return S(N) * std::numeric_limits<S>::epsilon();
}

/// Where the rows of a Rows x Cols matrix may be nonzero (the `Support` of
/// the products below): in every column. A model's constraint_columns
/// give a narrower support (ConstraintColumnsOf in uk.hpp); a support must
/// hold for the values it is used with: the products leave out the terms of
/// the columns outside it, which are then exact zeros, so that the results
/// are the dense products' (for finite values, up to the sign of a zero).
template <int Cols>
struct AllColumns {
  static constexpr bool sparse = false;
  UKB_HD static constexpr ColumnRange row(int /*i*/) { return {0, Cols}; }
};

/// The columns where two rows' supports meet, [begin, end) (none where
/// begin >= end): the terms of their product that can be nonzero.
UKB_HD constexpr ColumnRange overlap(ColumnRange a, ColumnRange b) {
  return {a.begin > b.begin ? a.begin : b.begin, a.end < b.end ? a.end : b.end};
}

/// Where the rows of a lower triangle (N x N) may be nonzero (the `Envelope`
/// of the factorisation and the solves below): row i from column first(i)
/// on, and so column j down to row last(j). Everywhere: the dense routines.
template <int N>
struct FullEnvelope {
  UKB_HD static constexpr int first(int /*i*/) { return 0; }
  UKB_HD static constexpr int last(int /*j*/) { return N - 1; }
};

/// The envelope of G = B B^T (Rows x Rows) for B's rows in Support (as
/// AllColumns): G_ij is a sum over the columns where rows i and j may both
/// be nonzero, so row i of G is zero left of the first row j whose columns
/// meet row i's (i itself where none does). The Cholesky factor of G keeps
/// that envelope (L_ij, j < first(i), is a sum of products with its zeros),
/// and so do the solves with it: a chain's G is tridiagonal, its L
/// bidiagonal.
template <class Support, int Rows>
struct GramEnvelope {
  static constexpr std::array<int, Rows> firsts = [] {
    std::array<int, Rows> f{};
    for (int i = 0; i < Rows; ++i) {
      f[i] = i;
      for (int j = 0; j < i; ++j) {
        const ColumnRange o = overlap(Support::row(i), Support::row(j));
        if (o.begin < o.end) {
          f[i] = j;
          break;
        }
      }
    }
    return f;
  }();
  static constexpr std::array<int, Rows> lasts = [] {
    std::array<int, Rows> l{};
    for (int j = 0; j < Rows; ++j) {
      l[j] = j;
      for (int k = j + 1; k < Rows; ++k)
        if (firsts[k] <= j) l[j] = k;
    }
    return l;
  }();
  // Device code reads a local copy of the tables (static members are host
  // variables there) through table_at (config.hpp: no copy on the stack),
  // the host the tables themselves (as constraint_columns_of in model.hpp).
  UKB_HD static constexpr int first(int i) {
#if defined(__CUDA_ARCH__)
    constexpr std::array<int, Rows> t = firsts;
    return table_at(t, i);
#else
    return firsts[static_cast<std::size_t>(i)];
#endif
  }
  UKB_HD static constexpr int last(int j) {
#if defined(__CUDA_ARCH__)
    constexpr std::array<int, Rows> t = lasts;
    return table_at(t, j);
#else
    return lasts[static_cast<std::size_t>(j)];
#endif
  }
};

/// In-place Cholesky factorisation A = L L^T of a symmetric N x N matrix
/// (row-major; only the lower triangle is read). On success the lower
/// triangle holds L, `rdiag` (N) the reciprocals 1 / L_jj, and the result
/// is 0; otherwise the result is k + 1 for the first pivot k that is not
/// above `rel_pivot` times its diagonal entry A_kk (0: not positive), or
/// not finite, per lane. The reciprocals turn the divisions of
/// the factorisation and of every later triangular solve into
/// multiplications: a division sits on the critical path of each row's
/// recurrence and costs several times a multiplication's latency. A lane
/// that fails goes on with NaN until every lane has failed. With an
/// Envelope (GramEnvelope) A must be zero outside it; the terms of its
/// zeros are left out and the entries outside it left as they are (zeros):
/// the dense factor's values up to the sign of a zero.
template <int N, class T, class Envelope = FullEnvelope<N>>
UKB_HD inline typename Lanes<T>::Int cholesky(T* A, T* rdiag, typename Lanes<T>::Scalar rel_pivot = 0) {
  using Lane = Lanes<T>;
  using std::sqrt;
  typename Lane::Int info{};
  MaskOf<T> ok(true);
  for (int j = 0; j < N; ++j) {
    const T a_jj = A[j * N + j];
    const int fj = Envelope::first(j);
    T d = a_jj;
    for (int k = fj; k < j; ++k) d -= A[j * N + k] * A[j * N + k];
    const MaskOf<T> bad = !(d > T(rel_pivot) * a_jj) || !is_finite(d);
    Lane::first(info, bad, j + 1);
    ok = ok && !bad;
    if (!Lane::any(ok)) return info;
    const T ljj = sqrt(d), r = T(1) / ljj;
    A[j * N + j] = ljj;
    rdiag[j] = r;
    for (int i = j + 1; i <= Envelope::last(j); ++i) {
      const int fi = Envelope::first(i);
      if (fi > j) continue;  // L_ij = 0 (a GramEnvelope's rows need not be monotone)
      T s = A[i * N + j];
      for (int k = fi > fj ? fi : fj; k < j; ++k) s -= A[i * N + k] * A[j * N + k];
      A[i * N + j] = s * r;
    }
  }
  return info;
}

/// cholesky(A, rdiag) without the reciprocals.
template <int N, class T>
UKB_HD inline typename Lanes<T>::Int cholesky(T* A) {
  T rdiag[N];
  return cholesky<N>(A, rdiag);
}

/// x <- L^{-1} x (forward substitution; L lower triangular, N x N row-major,
/// rdiag the reciprocals of its diagonal from cholesky; zero outside the
/// Envelope, whose terms are left out).
template <int N, class T, class Envelope = FullEnvelope<N>>
UKB_HD inline void solve_lower(const T* L, const T* rdiag, T* x) {
  for (int i = 0; i < N; ++i) {
    T s = x[i];
    for (int k = Envelope::first(i); k < i; ++k) s -= L[i * N + k] * x[k];
    x[i] = s * rdiag[i];
  }
}

/// X <- X L^{-T} for R rows of X (R x N row-major): every row forward
/// substituted as solve_lower does, row i of L at a time for all rows of
/// X, so that the R recurrences run side by side instead of one after the
/// other (the same operations in the same order per row).
template <int N, int R, class T>
UKB_HD inline void solve_lower_rows(const T* L, const T* rdiag, T* X) {
  for (int i = 0; i < N; ++i)
    for (int r = 0; r < R; ++r) {
      T s = X[r * N + i];
      for (int k = 0; k < i; ++k) s -= L[i * N + k] * X[r * N + k];
      X[r * N + i] = s * rdiag[i];
    }
}

/// x <- L^{-T} x (back substitution with the transpose of L; zero outside
/// the Envelope, as solve_lower).
template <int N, class T, class Envelope = FullEnvelope<N>>
UKB_HD inline void solve_lower_transpose(const T* L, const T* rdiag, T* x) {
  for (int i = N - 1; i >= 0; --i) {
    T s = x[i];
    for (int k = i + 1; k <= Envelope::last(i); ++k) s -= L[k * N + i] * x[k];
    x[i] = s * rdiag[i];
  }
}

/// (L x)_i for L lower triangular (N x N row-major).
template <int N, class T>
UKB_HD inline T mul_lower_row(const T* L, const T* x, int i) {
  T s = T(0);
  for (int k = 0; k <= i; ++k) s += L[i * N + k] * x[k];
  return s;
}

/// y <- L x (L lower triangular, N x N row-major).
template <int N, class T>
UKB_HD inline void mul_lower(const T* L, const T* x, T* y) {
  for (int i = 0; i < N; ++i) y[i] = mul_lower_row<N>(L, x, i);
}

}  // namespace ukb::kernels
