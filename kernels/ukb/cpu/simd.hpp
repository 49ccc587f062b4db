/// @file simd.hpp
/// @brief The CPU backend's SIMD lanes: the shared kernels instantiated on
///        a pack of W systems (std::experimental::simd, GCC's
///        <experimental/simd>), one system per lane (docs/design.md section 6).
///
/// The linear algebra (Cholesky, triangular solves, pseudo-inverse), the
/// steps and the event checks run on packs; so do the model's mass, force,
/// constraints and event function where the model gives `rebind`
/// (PackInputs), else they run per lane in scalar code (ModelLanes below),
/// as do the non-ideal force and the decisions around each step
/// (kernels::SystemRun: event location, projection, limits, handlers). The
/// loop that drives the lanes is kernels::integrate_systems. Every lane
/// computes what the scalar kernels compute for its system, bit for bit
/// (lanes.hpp), which tests/kernels/test_simd.cpp checks.
///
/// CPU code only: nvcc never sees this header.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <experimental/simd>
#include <type_traits>

#include "ukb/kernels/uk.hpp"

namespace ukb::cpu {

namespace stdx = std::experimental;

/// W values of T side by side: the target's own vector type where one holds
/// exactly W values (AVX-512's 8 doubles or 16 floats, AVX2's 4 or 8, SSE2's
/// 2 or 4; stdx::simd_abi::deduce_t), whose operations g++ inlines
/// (libstdc++ marks them always_inline), else a fixed_size pack of several
/// registers, whose operations g++ may call out of line. The same
/// operations either way, so the same results, and faster with the native
/// pack (bench/results/2026-11-26/NOTES.md, "Native packs and a sharper
/// Gram certificate").
template <class T, int W>
using Pack = stdx::simd<T, stdx::simd_abi::deduce_t<T, W>>;

/// Systems per pack for a model with n coordinates. Small models (n < 8):
/// one of the widest vector registers the code is compiled for
/// (std::experimental::native_simd: 8 doubles or 16 floats with AVX-512, 4
/// or 8 with AVX2, 2 or 4 with SSE2, the x86-64 baseline); larger ones: at
/// least 64 bytes (8 doubles, 16 floats: two AVX2 registers, four SSE2).
/// Measured on AVX2 and SSE2 (bench/results/2026-11-22/NOTES.md, "Shared
/// systems, register-wide packs"): with n = 2 a pack of several registers
/// ran slower (g++ calls, rather than inlines, its operations, and there is
/// little work per operation), with n = 12 and 24 faster (the latency-bound
/// recurrences of the triangular solves run side by side). Every width gives the same results.
template <class T, int n = 1>
inline constexpr int lane_width = n >= 8 && int(stdx::native_simd<T>::size()) < 64 / int(sizeof(T))
                                      ? 64 / int(sizeof(T))
                                      : int(stdx::native_simd<T>::size());

}  // namespace ukb::cpu

namespace ukb::kernels {

/// The lanes of a pack (lanes.hpp).
template <class T, class Abi>
struct Lanes<cpu::stdx::simd<T, Abi>> {
  using V = cpu::stdx::simd<T, Abi>;
  static constexpr int W = int(V::size());
  using Scalar = T;
  using Mask = typename V::mask_type;
  using Int = std::array<int, W>;
  using LaneStatus = std::array<Status, W>;
  static constexpr int width = W;
  /// The Gram route's arithmetic (lanes.hpp): W doubles.
  using Wide = cpu::Pack<double, W>;
  static Wide widen(const V& x) {
    if constexpr (std::is_same_v<Wide, V>) {
      return x;
    } else {
      return cpu::stdx::static_simd_cast<Wide>(x);
    }
  }
  static V narrow(const Wide& x) {
    if constexpr (std::is_same_v<Wide, V>) {
      return x;
    } else {
      return cpu::stdx::static_simd_cast<V>(x);
    }
  }
  static Mask narrow(const typename Wide::mask_type& m) {
    if constexpr (std::is_same_v<Wide, V>) {
      return m;
    } else {
      bool b[W];
      m.copy_to(b, cpu::stdx::element_aligned);
      return from_bools(b);
    }
  }

  static bool any(const Mask& m) { return cpu::stdx::any_of(m); }
  static bool all(const Mask& m) { return cpu::stdx::all_of(m); }
  [[gnu::always_inline, gnu::flatten]] static V select(const Mask& m, const V& a, const V& b) {
#if defined(__clang__)
    // clang (14) with libstdc++'s <experimental/simd>: a masked assignment
    // `where(m, r) = a` leaves r unchanged where the mask is an AVX-512
    // bitmask (g++ is right); a masked load is compiled right (Simd.* tests
    // check every lane against the scalar code).
    alignas(cpu::stdx::memory_alignment_v<V>) T buf[W];
    a.copy_to(buf, cpu::stdx::vector_aligned);
    V r = b;
    cpu::stdx::where(m, r).copy_from(buf, cpu::stdx::vector_aligned);
    return r;
#else
    V r = b;
    cpu::stdx::where(m, r) = a;
    return r;
#endif
  }
  // Masks to and from arrays of W booleans: a vector compare or move each
  // (element by element, an AVX-512 bitmask is set one bit at a time), so
  // that the loops over lanes below are plain array loops g++ vectorises.
  static Mask from_bools(const bool* b) { return Mask(b, cpu::stdx::element_aligned); }
  struct Bools {
    bool b[W];
    explicit Bools(const Mask& m) { m.copy_to(b, cpu::stdx::element_aligned); }
  };

  static Mask ok(const LaneStatus& s) {
    bool b[W];
    for (int l = 0; l < W; ++l) b[l] = s[l] == Status::ok;
    return from_bools(b);
  }
  static void fail(LaneStatus& s, const Mask& m, Status why) {
    const Bools b(m);
    for (int l = 0; l < W; ++l) s[l] = b.b[l] && s[l] == Status::ok ? why : s[l];
  }
  static void merge(LaneStatus& s, const LaneStatus& s2) {
    for (int l = 0; l < W; ++l) s[l] = s[l] == Status::ok ? s2[l] : s[l];
  }
  static void count(Int& r, const Mask& m) {
    const Bools b(m);
    for (int l = 0; l < W; ++l) r[l] += b.b[l] ? 1 : 0;
  }
  static void lower(Int& r, const Mask& m, const Int& x) {
    const Bools b(m);
    for (int l = 0; l < W; ++l) r[l] = b.b[l] && x[l] < r[l] ? x[l] : r[l];
  }
  static void raise(Int& r, const Mask& m, const Int& x) {
    const Bools b(m);
    for (int l = 0; l < W; ++l) r[l] = b.b[l] && x[l] > r[l] ? x[l] : r[l];
  }
  static Mask is_zero(const Int& r) {
    bool b[W];
    for (int l = 0; l < W; ++l) b[l] = r[l] == 0;
    return from_bools(b);
  }
  static void first(Int& r, const Mask& m, int x) {
    const Bools b(m);
    for (int l = 0; l < W; ++l) r[l] = b.b[l] && r[l] == 0 ? x : r[l];
  }

  /// Lane l of a mask, an integer, a status, a pack.
  static bool lane(const Mask& m, int l) { return m[l]; }
  static int lane(const Int& r, int l) { return r[std::size_t(l)]; }
  static Status lane(const LaneStatus& s, int l) { return s[std::size_t(l)]; }
  static T lane(const V& x, int l) { return x[l]; }
  /// The mask of W booleans.
  static Mask mask(const bool* b) { return from_bools(b); }

  /// x[k] <- the vectors src[l] side by side, k < K (src[l]: K values of lane l).
  template <int K>
  static void gather(V* x, const T* const* src) {
    alignas(cpu::stdx::memory_alignment_v<V>) T buf[W];
    for (int k = 0; k < K; ++k) {
      for (int l = 0; l < W; ++l) buf[l] = src[l][k];
      x[k].copy_from(buf, cpu::stdx::vector_aligned);
    }
  }
  /// The vectors dst[l] <- lane l of x[k], k < K.
  template <int K>
  static void scatter(const V* x, T* const* dst) {
    alignas(cpu::stdx::memory_alignment_v<V>) T buf[W];
    for (int k = 0; k < K; ++k) {
      x[k].copy_to(buf, cpu::stdx::vector_aligned);
      for (int l = 0; l < W; ++l) dst[l][k] = buf[l];
    }
  }
  /// One value per lane, side by side.
  static V gather(const T* values) { return V(values, cpu::stdx::element_aligned); }
  /// The lanes of x into values (W).
  static void scatter(const V& x, T* values) { x.copy_to(values, cpu::stdx::element_aligned); }
};

}  // namespace ukb::kernels

namespace ukb {

/// `pick` and `ukb::math` on a pack (model.hpp): a select per lane, and the
/// scalar sin and cos lane by lane, so that a lane rounds as the scalar.
template <class T, class Abi>
struct Arith<cpu::stdx::simd<T, Abi>> {
  using V = cpu::stdx::simd<T, Abi>;
  static V pick(const typename V::mask_type& c, const V& a, const V& b) {
    return kernels::Lanes<V>::select(c, a, b);
  }
  static V sin(const V& x) {
    return V([&](auto l) { return std::sin(x[l]); });
  }
  static V cos(const V& x) {
    return V([&](auto l) { return std::cos(x[l]); });
  }
};

}  // namespace ukb

namespace ukb::kernels {

/// Models whose mass, force, constraints (and constraint rows) run on a
/// pack V directly: those that give `rebind` (model.hpp) whose rebound
/// model meets the Model concept, and whose `rebind` at their own scalar is
/// the model itself (a model derived from another inherits its `rebind`,
/// which names the base: such a model runs lane by lane); in double, and in
/// float where the model also says `static constexpr bool rebind_float =
/// true` (its non-integer literals written with `ukb::lit<T>(x)`, model.hpp:
/// a float pack's broadcast constructor refuses a double such as 9.81).
template <class Mo, class V>
concept PackInputs = (sizeof(typename Mo::Scalar) == 8 || requires { requires Mo::rebind_float; }) && requires {
  typename Mo::template rebind<V>;
  requires Model<typename Mo::template rebind<V>>;
  requires std::same_as<typename Mo::template rebind<typename Mo::Scalar>, Mo>;
  requires HasDiagonalMass<typename Mo::template rebind<V>> == HasDiagonalMass<Mo>;  // the same layout of M
};

/// Models whose event function also runs on a pack V: those with PackInputs
/// (the `rebind` contract covers `event`, model.hpp).
template <class Mo, class V>
concept PackEvents = PackInputs<Mo, V> && HasEvents<Mo> && HasEvents<typename Mo::template rebind<V>>;

namespace detail {
template <class Mo, class V, bool = PackInputs<Mo, V>>
struct PackedParams {
  struct type {};  // the model is called lane by lane
};
template <class Mo, class V>
struct PackedParams<Mo, V, true> {
  using type = typename Mo::template rebind<V>::Params;  // a pack per parameter
};
}  // namespace detail

/// A model's functions on a pack: `mass`, `force`, `constraints` and
/// `nonideal` on the pack where the model allows it (PackInputs), else each
/// lane's system in turn in scalar code, through buffers that the packs load
/// from and store to.
template <Model Mo, class Abi>
struct ModelLanes<Mo, cpu::stdx::simd<typename Mo::Scalar, Abi>> {
  using T = typename Mo::Scalar;
  using V = cpu::stdx::simd<T, Abi>;
  static constexpr int W = int(V::size());
  static constexpr int n = Mo::n, m = Mo::m;

  /// The parameters of the lanes' systems: one Params per lane and, where
  /// the model runs on packs, the same values as packs.
  struct Params {
    std::array<typename Mo::Params, W> each;
    typename detail::PackedParams<Mo, V>::type packed;

    /// Lane l's parameters <- x (in each and in packed).
    void set(int l, const typename Mo::Params& x) {
      each[std::size_t(l)] = x;
      if constexpr (PackInputs<Mo, V>) {
        std::array<V*, std::size_t(param_count<Mo>())> dst{};
        int k = 0;
        Mo::template rebind<V>::visit_params(packed, [&](const char*, V& f, const char*) { dst[std::size_t(k++)] = &f; });
        k = 0;
        Mo::visit_params(x, [&](const char*, const T& v, const char*) { (*dst[std::size_t(k++)])[l] = v; });
      }
    }
  };

  // lane l of x (K packs) into y (K scalars).
  template <int K>
  static void lane(const V* x, int l, T* y) {
    for (int k = 0; k < K; ++k) y[k] = x[k][l];
  }
  // buf (K x W scalars, lane-minor) into K packs.
  template <int K>
  static void load(const T* buf, V* x) {
    for (int k = 0; k < K; ++k) x[k].copy_from(buf + std::size_t(k) * W, cpu::stdx::element_aligned);
  }
  // Column l of a K x W buffer from y (K).
  template <int K>
  static void put(const T* y, int l, T* buf) {
    for (int k = 0; k < K; ++k) buf[std::size_t(k) * W + l] = y[k];
  }

  static void inputs(const V* q, const V* qd, const V& t, const Params& p, const Baumgarte<T>& bg,
                     V* M, V* Q, V* A, V* b) {
    if constexpr (PackInputs<Mo, V>) {
      using R = typename Mo::template rebind<V>;
      const Baumgarte<V> bgv{bg.on, V(bg.alpha), V(bg.beta), V(bg.gamma)};
      ModelLanes<R>::inputs(q, qd, t, p.packed, bgv, M, Q, A, b);
      return;
    }
    constexpr int nM = MassFactorOf<Mo>::entries;  // M, or its diagonal (mass_of)
    alignas(cpu::stdx::memory_alignment_v<V>) T bM[nM * W], bQ[n * W], bA[m * n * W], bb[m * W];
    for (int l = 0; l < W; ++l) {
      T ql[n], vl[n], Ml[nM], Ql[n], Al[m * n], b_l[m];
      lane<n>(q, l, ql);
      lane<n>(qd, l, vl);
      ModelLanes<Mo>::inputs(ql, vl, t[l], p.each[std::size_t(l)], bg, Ml, Ql, Al, b_l);
      put<nM>(Ml, l, bM);
      put<n>(Ql, l, bQ);
      put<m * n>(Al, l, bA);
      put<m>(b_l, l, bb);
    }
    load<nM>(bM, M);
    load<n>(bQ, Q);
    load<m * n>(bA, A);
    load<m>(bb, b);
  }

  /// The event function g of every lane (models with events): on the pack
  /// where the model allows it (PackEvents), else lane by lane.
  static V event(const V* q, const V* qd, const V& t, const Params& p) {
    if constexpr (PackEvents<Mo, V>) {
      return Mo::template rebind<V>::event(q, qd, t, p.packed);
    } else {
      alignas(cpu::stdx::memory_alignment_v<V>) T g[W];
      for (int l = 0; l < W; ++l) {
        T ql[n], vl[n];
        lane<n>(q, l, ql);
        lane<n>(qd, l, vl);
        g[l] = Mo::event(ql, vl, t[l], p.each[std::size_t(l)]);
      }
      return V(g, cpu::stdx::vector_aligned);
    }
  }

  static void nonideal(const V* q, const V* qd, const V& t, const Params& p, const V* Qc_ideal,
                       const V* lambda, const typename V::mask_type& active, V* C) {
    if constexpr (PackInputs<Mo, V>) {
      Mo::template rebind<V>::nonideal(q, qd, t, p.packed, Qc_ideal, lambda, C);
      for (int k = 0; k < n; ++k) C[k] = Lanes<V>::select(active, C[k], V(T(0)));
      return;
    }
    alignas(cpu::stdx::memory_alignment_v<V>) T bC[n * W];
    for (int l = 0; l < W; ++l) {
      T Cl[n];
      for (int k = 0; k < n; ++k) Cl[k] = T(0);
      if (active[l]) {
        T ql[n], vl[n], Ql[n], ll[m];
        lane<n>(q, l, ql);
        lane<n>(qd, l, vl);
        lane<n>(Qc_ideal, l, Ql);
        lane<m>(lambda, l, ll);
        Mo::nonideal(ql, vl, t[l], p.each[std::size_t(l)], Ql, ll, Cl);
      }
      put<n>(Cl, l, bC);
    }
    load<n>(bC, C);
  }
};

}  // namespace ukb::kernels
