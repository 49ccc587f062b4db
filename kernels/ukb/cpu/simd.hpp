/// @file simd.hpp
/// @brief The CPU backend's SIMD lanes: the shared kernels instantiated on
///        a pack of W systems (std::experimental::simd, GCC's
///        <experimental/simd>), one system per lane (DESIGN.md section 6).
///
/// The linear algebra (Cholesky, triangular solves, pseudo-inverse) and the
/// RK4 stages run on packs; so do the model's mass, force and constraints
/// where the model gives `rebind` (PackInputs), else they run per lane in
/// scalar code (ModelLanes below), as do the non-ideal force and the
/// decisions around each step (SystemRun: event location, projection,
/// limits, handlers). Every lane
/// computes what the scalar kernels compute for its system, bit for bit
/// (lanes.hpp), which tests/test_simd.cpp checks.
///
/// CPU code only: nvcc never sees this header.
#pragma once

#include <array>
#include <cstddef>
#include <experimental/simd>

#include "ukb/cpu/parallel.hpp"
#include "ukb/kernels/system.hpp"

namespace ukb::cpu {

namespace stdx = std::experimental;

/// W values of T side by side.
template <class T, int W>
using Pack = stdx::fixed_size_simd<T, W>;

/// Systems per pack: one 512-bit register's worth (8 doubles, 16 floats).
template <class T>
inline constexpr int lane_width = 64 / int(sizeof(T));

}  // namespace ukb::cpu

namespace ukb::kernels {

/// The lanes of a pack (lanes.hpp).
template <class T, int W>
struct Lanes<cpu::Pack<T, W>> {
  using V = cpu::Pack<T, W>;
  using Scalar = T;
  using Mask = typename V::mask_type;
  using Int = std::array<int, W>;
  using LaneStatus = std::array<Status, W>;
  static constexpr int width = W;

  static bool any(const Mask& m) { return cpu::stdx::any_of(m); }
  static bool all(const Mask& m) { return cpu::stdx::all_of(m); }
  static V select(const Mask& m, const V& a, const V& b) {
    V r = b;
    cpu::stdx::where(m, r) = a;
    return r;
  }
  static Mask ok(const LaneStatus& s) {
    Mask m(false);
    for (int l = 0; l < W; ++l) m[l] = s[l] == Status::ok;
    return m;
  }
  static void fail(LaneStatus& s, const Mask& m, Status why) {
    for (int l = 0; l < W; ++l)
      if (m[l] && s[l] == Status::ok) s[l] = why;
  }
  static void merge(LaneStatus& s, const LaneStatus& s2) {
    for (int l = 0; l < W; ++l)
      if (s[l] == Status::ok) s[l] = s2[l];
  }
  static void count(Int& r, const Mask& m) {
    for (int l = 0; l < W; ++l) r[l] += m[l] ? 1 : 0;
  }
  static void lower(Int& r, const Mask& m, const Int& x) {
    for (int l = 0; l < W; ++l)
      if (m[l] && x[l] < r[l]) r[l] = x[l];
  }
  static Mask is_zero(const Int& r) {
    Mask m(false);
    for (int l = 0; l < W; ++l) m[l] = r[l] == 0;
    return m;
  }
  static void first(Int& r, const Mask& m, int x) {
    for (int l = 0; l < W; ++l)
      if (m[l] && r[l] == 0) r[l] = x;
  }
};

/// Models whose mass, force, constraints (and constraint rows) run on a
/// pack V directly: those that give `rebind` (model.hpp) whose rebound
/// model meets the Model concept, in double. (In float the models' double
/// literals, such as T(9.81), would not compile: a pack's broadcast
/// constructor takes only conversions that lose nothing, and double to
/// float may.)
template <class Mo, class V>
concept PackInputs = sizeof(typename Mo::Scalar) == 8 && requires {
  typename Mo::template rebind<V>;
  requires Model<typename Mo::template rebind<V>>;
};

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

/// A model's functions on a pack: `mass`, `force` and `constraints` on the
/// pack where the model allows it (PackInputs), else each lane's system in
/// turn in scalar code, through buffers that the packs load from and store
/// to; `nonideal` (friction laws branch) always lane by lane.
template <Model Mo, int W>
struct ModelLanes<Mo, cpu::Pack<typename Mo::Scalar, W>> {
  using T = typename Mo::Scalar;
  using V = cpu::Pack<T, W>;
  static constexpr int n = Mo::n, m = Mo::m;

  /// The parameters of the lanes' systems: one Params per lane and, where
  /// the model runs on packs, the same values as packs (pack()).
  struct Params {
    std::array<typename Mo::Params, W> each;
    typename detail::PackedParams<Mo, V>::type packed;

    /// packed <- each (nothing where the model runs lane by lane).
    void pack() {
      if constexpr (PackInputs<Mo, V>) {
        std::array<V*, std::size_t(param_count<Mo>())> dst{};
        int k = 0;
        Mo::template rebind<V>::visit_params(packed, [&](const char*, V& f, const char*) { dst[std::size_t(k++)] = &f; });
        for (int l = 0; l < W; ++l) {
          k = 0;
          Mo::visit_params(each[std::size_t(l)],
                           [&](const char*, const T& x, const char*) { (*dst[std::size_t(k++)])[l] = x; });
        }
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
    alignas(64) T bM[n * n * W], bQ[n * W], bA[m * n * W], bb[m * W];
    for (int l = 0; l < W; ++l) {
      T ql[n], vl[n], Ml[n * n], Ql[n], Al[m * n], b_l[m];
      lane<n>(q, l, ql);
      lane<n>(qd, l, vl);
      ModelLanes<Mo>::inputs(ql, vl, t[l], p.each[std::size_t(l)], bg, Ml, Ql, Al, b_l);
      put<n * n>(Ml, l, bM);
      put<n>(Ql, l, bQ);
      put<m * n>(Al, l, bA);
      put<m>(b_l, l, bb);
    }
    load<n * n>(bM, M);
    load<n>(bQ, Q);
    load<m * n>(bA, A);
    load<m>(bb, b);
  }

  static void nonideal(const V* q, const V* qd, const V& t, const Params& p, const V* Qc_ideal,
                       const V* lambda, const typename V::mask_type& active, V* C) {
    alignas(64) T bC[n * W];
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

namespace ukb::cpu {

/// IntegrateBody for the W systems [W g, W g + W) of a batch in SIMD lanes:
/// each lane is a kernels::SystemRun that decides, as the scalar body does,
/// whether and how far to step; the RK4 steps of the lanes that step are
/// taken together on packs (lanes that have stopped follow a stepping
/// lane's state, and their results are dropped). A group that the batch
/// does not fill is integrated by the scalar body.
template <Model Mo>
struct IntegrateLanes {
  using T = typename Mo::Scalar;
  static constexpr int W = lane_width<T>, n = Mo::n;
  using V = Pack<T, W>;
  using L = kernels::Lanes<V>;
  BatchView<Mo> v;
  kernels::RunSettings<T> s;

  /// The number of groups of N systems.
  static int groups(int N) { return (N + W - 1) / W; }

  void operator()(int group) const {
    const int i0 = group * W;
    if (i0 + W > v.N) {
      const kernels::IntegrateBody<Mo> scalar{v, s};
      for (int i = i0; i < v.N; ++i) scalar(i);
      return;
    }
    kernels::SystemRun<Mo> r[W];
    bool loaded[W], live[W];
    for (int l = 0; l < W; ++l) loaded[l] = live[l] = r[l].load(v, i0 + l, s);
    typename kernels::ModelLanes<Mo, V>::Params P;
    for (long k = 0; k < s.budget; ++k) {
      int first = -1;
      for (int l = 0; l < W; ++l) {
        if (live[l]) live[l] = r[l].begin(s);
        if (live[l] && first < 0) first = l;
      }
      if (first < 0) break;
      // Gather: a lane that does not step takes the first stepping lane's
      // system, so that the pack computes nothing out of the ordinary.
      alignas(64) T bq[n * W], bqd[n * W], bt[W], bh[W];
      bool checks[W], clean[W];
      T g0[W];
      for (int l = 0; l < W; ++l) {
        const kernels::SystemRun<Mo>& x = r[live[l] ? l : first];
        for (int j = 0; j < n; ++j) bq[j * W + l] = x.q[j], bqd[j * W + l] = x.qd[j];
        bt[l] = x.t, bh[l] = x.h;
        P.each[std::size_t(l)] = x.p;
        checks[l] = live[l] && r[l].checks_event(s);
        g0[l] = x.g;
        clean[l] = true;
      }
      P.pack();
      V q[n], qd[n], t(bt, stdx::element_aligned), h(bh, stdx::element_aligned);
      for (int j = 0; j < n; ++j) {
        q[j].copy_from(bq + j * W, stdx::element_aligned);
        qd[j].copy_from(bqd + j * W, stdx::element_aligned);
      }
      // event_step's check of the stage states, lane by lane.
      auto check = [&](const V* qs, const V* vs, const V& ts) {
        if constexpr (HasEvents<Mo>) {
          for (int l = 0; l < W; ++l) {
            if (!checks[l]) continue;
            T ql[n], vl[n];
            for (int j = 0; j < n; ++j) ql[j] = qs[j][l], vl[j] = vs[j][l];
            if (!kernels::same_side(Mo::event(ql, vl, T(ts[l]), P.each[std::size_t(l)]), g0[l]))
              clean[l] = false;
          }
        } else {
          (void)qs, (void)vs, (void)ts;
        }
      };
      typename L::Int min_rank;
      min_rank.fill(Mo::m);
      typename L::Mask bad_rows(false);
      const kernels::StageSettings<T, V> ss{s.rank_rtol, s.baumgarte, &min_rank, &bad_rows};
      const typename L::LaneStatus st = kernels::rk4_step<Mo, V>(q, qd, t, h, P, ss, check);
      for (int j = 0; j < n; ++j) {
        q[j].copy_to(bq + j * W, stdx::element_aligned);
        qd[j].copy_to(bqd + j * W, stdx::element_aligned);
      }
      t.copy_to(bt, stdx::element_aligned);
      for (int l = 0; l < W; ++l) {
        if (!live[l]) continue;
        kernels::SystemRun<Mo>& x = r[l];
        for (int j = 0; j < n; ++j) x.q[j] = bq[j * W + l], x.qd[j] = bqd[j * W + l];
        x.t = bt[l];
        if constexpr (HasEvents<Mo>) {
          if (checks[l] && st[l] == Status::ok)  // event_step checks the end state too
            if (!kernels::same_side(Mo::event(x.q, x.qd, x.t, x.p), g0[l])) clean[l] = false;
        }
        x.end(s, st[l], clean[l], min_rank[l], bad_rows[l]);
      }
    }
    for (int l = 0; l < W; ++l)
      if (loaded[l]) r[l].store(v, i0 + l, s);
  }
};

/// Integrates every system of v in SIMD lanes, OpenMP over groups of W
/// systems (`chunk` systems handed out at a time, rounded down to packs).
/// Compiled once for the built-in models (src/cpu_lanes.cpp; engine.hpp
/// declares those instantiations extern), where used for other models.
template <Model Mo>
void integrate_lanes(BatchView<Mo> v, const kernels::RunSettings<typename Mo::Scalar>& s, int threads,
                     int chunk) {
  using Body = IntegrateLanes<Mo>;
  parallel_for(Body::groups(v.N), threads, chunk / Body::W > 1 ? chunk / Body::W : 1, Body{v, s});
}

}  // namespace ukb::cpu

/// Declares (X = extern) or defines the instantiation of integrate_lanes
/// for model Mo.
#define UKB_LANES_INSTANTIATION(Mo)                                                       \
  template void ukb::cpu::integrate_lanes<Mo>(::ukb::BatchView<Mo>,                     \
                                              const ::ukb::kernels::RunSettings<typename Mo::Scalar>&, \
                                              int, int);
#define UKB_LANES_EXTERN(Mo) extern UKB_LANES_INSTANTIATION(Mo)
