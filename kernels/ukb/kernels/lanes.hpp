/// @file lanes.hpp
/// @brief How the shared kernels see their arithmetic type: one system (a
///        scalar: a GPU thread, a CPU loop iteration) or several systems side
///        by side in SIMD lanes (a pack, kernels/ukb/cpu/simd.hpp).
///
/// The kernels are written once on a type V. Decisions that can differ per
/// system are masks (`Lanes<V>::Mask`), combined with `select`, `any` and
/// `all`; per-system integers and statuses are `Lanes<V>::Int` and
/// `Lanes<V>::LaneStatus`. For a scalar a mask is a bool, `select` is `?:`,
/// and `if (!Lane::any(ok)) return` is the early return of scalar code, so a
/// scalar instantiation does the same operations as code written for one
/// system. A pack computes every lane in lockstep and keeps a lane's result
/// only where its mask says so: every lane's arithmetic is that of the
/// scalar instantiation, operation for operation (IEEE operations round the
/// same in a lane as in a scalar register, and the build contracts none into
/// an FMA: -ffp-contract=off), so a pack gives the scalar results bit for
/// bit (tests/kernels/test_simd.cpp checks it).
#pragma once

#include <type_traits>

#include "ukb/config.hpp"
#include "ukb/status.hpp"

namespace ukb::kernels {

/// The scalar case: one lane. Specialised for SIMD packs in
/// kernels/ukb/cpu/simd.hpp (CPU code only).
template <class V>
struct Lanes {
  using Scalar = V;           ///< the element type
  using Mask = bool;          ///< a yes/no per lane
  using Int = int;            ///< an integer per lane
  using LaneStatus = Status;  ///< a status per lane
  static constexpr int width = 1;
  /// The arithmetic of the pseudo-inverse's Gram route (linalg.hpp): double
  /// for float too (a Gram matrix squares B's condition number), V itself
  /// for double. In GPU device code V itself (FP64 runs at 1/2 to 1/64 of
  /// FP32 on GPUs, where on the CPU a double pack costs twice a float one):
  /// the float Gram route there certifies in float, as before.
#if defined(__CUDA_ARCH__)
  using Wide = V;
#else
  using Wide = std::conditional_t<(sizeof(V) < sizeof(double)), double, V>;
#endif
  UKB_HD static Wide widen(const V& x) { return Wide(x); }
  /// x rounded to V.
  UKB_HD static V narrow(const Wide& x) { return V(x); }
  /// A mask of Wide values as a mask of V values.
  UKB_HD static bool narrow(bool m) { return m; }

  UKB_HD static bool any(bool m) { return m; }
  UKB_HD static bool all(bool m) { return m; }
  /// a where m, else b.
  UKB_HD static V select(bool m, const V& a, const V& b) { return m ? a : b; }
  /// True where the status is ok.
  UKB_HD static bool ok(Status s) { return s == Status::ok; }
  /// Sets s to `why` where m holds and s is still ok (the first failure stays).
  UKB_HD static void fail(Status& s, bool m, Status why) {
    if (m && s == Status::ok) s = why;
  }
  /// Where s is ok, s <- s2 (the first failure stays).
  UKB_HD static void merge(Status& s, Status s2) {
    if (s == Status::ok) s = s2;
  }
  /// r += 1 where m.
  UKB_HD static void count(int& r, bool m) { r += m ? 1 : 0; }
  /// r <- x where m and x < r.
  UKB_HD static void lower(int& r, bool m, int x) {
    if (m && x < r) r = x;
  }
  /// r <- x where m and x > r.
  UKB_HD static void raise(int& r, bool m, int x) {
    if (m && x > r) r = x;
  }
  /// True where r == 0.
  UKB_HD static bool is_zero(int r) { return r == 0; }
  /// r <- x where m and r == 0 (the first nonzero value stays).
  UKB_HD static void first(int& r, bool m, int x) {
    if (m && r == 0) r = x;
  }

  /// Lane l of a mask, an integer, a status.
  UKB_HD static bool lane(bool m, int) { return m; }
  UKB_HD static int lane(int r, int) { return r; }
  UKB_HD static Status lane(Status s, int) { return s; }
  /// Lane l of x.
  UKB_HD static V lane(const V& x, int) { return x; }

  /// x[k] <- the vectors src[l] side by side, k < K (src[l]: K values of lane l).
  template <int K>
  UKB_HD static void gather(V* x, const V* const* src) {
    for (int k = 0; k < K; ++k) x[k] = src[0][k];
  }
  /// The vectors dst[l] <- lane l of x[k], k < K.
  template <int K>
  UKB_HD static void scatter(const V* x, V* const* dst) {
    for (int k = 0; k < K; ++k) dst[0][k] = x[k];
  }
  /// One value per lane, side by side.
  UKB_HD static V gather(const V* values) { return values[0]; }
  /// The lanes of x into values.
  UKB_HD static void scatter(const V& x, V* values) { values[0] = x; }
  /// The mask of one boolean per lane.
  UKB_HD static bool mask(const bool* b) { return b[0]; }
};

/// The mask type of V.
template <class V>
using MaskOf = typename Lanes<V>::Mask;

}  // namespace ukb::kernels
