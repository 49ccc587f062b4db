/// @file planar_chain.hpp
/// @brief K point masses in the vertical plane joined by rigid massless links,
///        the first pinned to the origin, with velocity-proportional
///        non-ideal damping.
#pragma once

#include <array>

#include "ukb/config.hpp"
#include "ukb/models/common.hpp"

namespace ukb::models {

namespace detail {
/// The names of PlanarChain<T, K> as null-terminated strings in one array:
/// "planar_chain_K", then x1, y1, ..., xK, yK, then theta1..thetaK and
/// omega1..omegaK, each at a fixed offset (`at`).
template <int K>
struct ChainNames {
  static constexpr int digits(int v) { return v >= 10 ? 1 + digits(v / 10) : 1; }
  // Characters of "<prefix><v>\0".
  static constexpr int size(int prefix, int v) { return prefix + digits(v) + 1; }
  static constexpr int name_size = size(13, K);  // "planar_chain_" + K
  static constexpr int total = [] {
    int t = name_size;
    for (int k = 1; k <= K; ++k) t += 2 * size(1, k) + size(5, k) + size(5, k);
    return t;
  }();
  std::array<char, total> chars{};
  std::array<int, 4 * K + 1> at{};  // name, x1, y1, ..., xK, yK, theta1.., omega1..

  constexpr ChainNames() {
    int pos = 0, idx = 0;
    auto put = [&](const char* prefix, int v) {
      at[idx++] = pos;
      for (const char* c = prefix; *c; ++c) chars[pos++] = *c;
      const int d = digits(v);
      for (int i = d - 1; i >= 0; --i) {
        chars[pos + i] = char('0' + v % 10);
        v /= 10;
      }
      pos += d;
      chars[pos++] = '\0';
    };
    put("planar_chain_", K);
    for (int k = 1; k <= K; ++k) put("x", k), put("y", k);
    for (int k = 1; k <= K; ++k) put("theta", k);
    for (int k = 1; k <= K; ++k) put("omega", k);
  }
};
template <int K>
inline constexpr ChainNames<K> chain_names{};
}  // namespace detail

/// K point masses of mass `m` in the vertical plane, gravity `g` along -y;
/// mass 1 is joined to the origin and mass k to mass k-1 by rigid massless
/// links of length `l`; non-ideal damping C = -c q'.
///
/// - q = (x1, y1, ..., xK, yK); M = m I (2K x 2K); Q_yk = -m g.
/// - Constraint k (k = 1..K) with d_k = p_k - p_{k-1}, p_0 = 0:
///   |d_k|^2 = l^2, differentiated twice: d_k . (p_k'' - p_{k-1}'') = -|d_k'|^2.
///   Row k of A holds d_k in the columns of p_k and -d_k in those of p_{k-1}.
/// - Non-ideal force C = -c q' (Udwadia & Kalaba 2001, section 2.2).
///
/// Monitoring and `ukb run`: residuals max_k ||d_k| - l| and
/// max_k |d_k . d_k'| / |d_k|; row k's constraint (stabilisation)
/// phi_k = (|d_k|^2 - l^2) / 2; V = m g sum_k y_k; natural quantities
/// theta1..thetaK (angle of link k from the downward vertical,
/// d_k = l (sin theta_k, -cos theta_k)) and omega1..omegaK (their rates).
template <class T, int K>
struct PlanarChain {
  static_assert(K >= 1, "planar_chain needs at least one mass");
  using Scalar = T;
  /// The same model on another arithmetic type: its mass, force,
  /// constraints and constraint_rows are branch-free and use + - * / and
  /// sqrt only, so the CPU backend calls them on SIMD packs (model.hpp).
  template <class U>
  using rebind = PlanarChain<U, K>;
  static constexpr bool rebind_float = true;  ///< literals through lit<T>: float packs too
  static constexpr const char* name = detail::chain_names<K>.chars.data();  ///< "planar_chain_K"
  static constexpr const char* summary =
      "K point masses in the vertical plane joined by rigid links of length l, the first "
      "pinned to the origin, gravity along -y, damping C = -c q'";
  static constexpr int n = 2 * K;  // q = (x1, y1, ..., xK, yK)
  static constexpr int m = K;      // one length constraint per link
  static constexpr std::array<const char*, n> coords = [] {
    std::array<const char*, n> a{};
    for (int i = 0; i < n; ++i) a[i] = detail::chain_names<K>.chars.data() + detail::chain_names<K>.at[1 + i];
    return a;
  }();
  static constexpr std::array<const char*, 2 * K> initial_names = [] {
    std::array<const char*, 2 * K> a{};
    for (int k = 0; k < K; ++k) {
      a[k] = detail::chain_names<K>.chars.data() + detail::chain_names<K>.at[1 + n + k];
      a[K + k] = detail::chain_names<K>.chars.data() + detail::chain_names<K>.at[1 + n + K + k];
    }
    return a;
  }();
  static constexpr std::array<const char*, 2 * K> initial_docs = [] {
    std::array<const char*, 2 * K> a{};
    for (int k = 0; k < K; ++k) {
      a[k] = "angle of this link (1: the one at the pin) from the downward vertical (rad)";
      a[K + k] = "angular velocity of this link (rad/s)";
    }
    return a;
  }();

  struct Params {
    T m = T(1);     // mass of each point
    T l = T(1);     // length of each link
    T g = lit<T>(9.81);  // gravitational acceleration
    T c = T(0);     // damping coefficient
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "mass of each point (> 0)");
    f("l", p.l, "length of each link (> 0)");
    f("g", p.g, "gravitational acceleration along -y");
    f("c", p.c, "damping coefficient of C = -c q' (>= 0)");
  }

  UKB_HD static void mass(const T* /*q*/, T /*t*/, const Params& p, T* M) {
    detail::scalar_mass<n>(p.m, M);
  }
  /// M = m I is diagonal: the kernels factor its diagonal alone (model.hpp).
  UKB_HD static void mass_diagonal(const T* /*q*/, T /*t*/, const Params& p, T* d) {
    detail::scalar_mass_diagonal<n>(p.m, d);
  }

  /// Row k of A (0-based: link k + 1) touches p_{k-1} and p_k alone (0-based
  /// masses): columns 2k - 2 .. 2k + 1 (2k .. 2k + 1 for the first link). The kernels leave out the rest of
  /// each row (model.hpp).
  static constexpr std::array<ColumnRange, m> constraint_columns = [] {
    std::array<ColumnRange, m> a{};
    for (int k = 0; k < K; ++k) a[k] = {k > 0 ? 2 * k - 2 : 0, 2 * k + 2};
    return a;
  }();

  UKB_HD static void force(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& p, T* Q) {
    for (int k = 0; k < K; ++k) {
      Q[2 * k] = T(0);
      Q[2 * k + 1] = -p.m * p.g;
    }
  }

  /// Link k: d = p_k - p_{k-1} and its rate u (p_{-1} = the pivot, at rest).
  UKB_HD static void link(const T* q, const T* qd, int k, T& dx, T& dy, T& ux, T& uy) {
    dx = q[2 * k], dy = q[2 * k + 1], ux = qd[2 * k], uy = qd[2 * k + 1];
    if (k > 0) {
      dx -= q[2 * k - 2];
      dy -= q[2 * k - 1];
      ux -= qd[2 * k - 2];
      uy -= qd[2 * k - 1];
    }
  }

  UKB_HD static void constraints(const T* q, const T* qd, T /*t*/, const Params& /*p*/, T* A,
                                 T* b) {
    for (int i = 0; i < m * n; ++i) A[i] = T(0);
    for (int k = 0; k < K; ++k) {
      T dx, dy, ux, uy;
      link(q, qd, k, dx, dy, ux, uy);
      if (k > 0) {
        A[k * n + 2 * k - 2] = -dx;
        A[k * n + 2 * k - 1] = -dy;
      }
      A[k * n + 2 * k] = dx;
      A[k * n + 2 * k + 1] = dy;
      b[k] = -(ux * ux + uy * uy);
    }
  }

  UKB_HD static void nonideal(const T* /*q*/, const T* qd, T /*t*/, const Params& p,
                              const T* /*Qc_ideal*/, const T* /*lambda*/, T* C) {
    detail::linear_damping<n>(qd, p.c, C);
  }

  UKB_HD static void residual(const T* q, const T* qd, T /*t*/, const Params& p, T& pos,
                              T& vel) {
    using std::abs;
    using std::sqrt;
    pos = T(0);
    vel = T(0);
    for (int k = 0; k < K; ++k) {
      T dx, dy, ux, uy;
      link(q, qd, k, dx, dy, ux, uy);
      const T len = sqrt(dx * dx + dy * dy);
      const T e = abs(len - p.l), ev = abs(dx * ux + dy * uy) / len;
      pos = e > pos ? e : pos;
      vel = ev > vel ? ev : vel;
    }
  }

  static constexpr std::array<RowKind, m> row_kinds = [] {
    std::array<RowKind, m> a{};
    for (int k = 0; k < m; ++k) a[k] = RowKind::holonomic;
    return a;
  }();

  /// Row k: phi_k = (|d_k|^2 - l^2) / 2, phi_k' = d_k . d_k'.
  UKB_HD static void constraint_rows(const T* q, const T* qd, T /*t*/, const Params& p, T* phi,
                                     T* phid) {
    for (int k = 0; k < K; ++k) {
      T dx, dy, ux, uy;
      link(q, qd, k, dx, dy, ux, uy);
      phi[k] = lit<T>(0.5) * ((dx * dx + dy * dy) - p.l * p.l);
      phid[k] = dx * ux + dy * uy;
    }
  }

  UKB_HD static T potential(const T* q, T /*t*/, const Params& p) {
    T y = T(0);
    for (int k = 0; k < K; ++k) y += q[2 * k + 1];
    return p.m * p.g * y;
  }

  UKB_HD static bool initial_state(const T* ic, const Params& p, T* q, T* qd) {
    using std::cos;
    using std::sin;
    T x = T(0), y = T(0), u = T(0), w = T(0);
    for (int k = 0; k < K; ++k) {
      const T s = sin(ic[k]), c = cos(ic[k]);
      x += p.l * s;
      y -= p.l * c;
      u += p.l * ic[K + k] * c;
      w += p.l * ic[K + k] * s;
      q[2 * k] = x;
      q[2 * k + 1] = y;
      qd[2 * k] = u;
      qd[2 * k + 1] = w;
    }
    return true;
  }

  UKB_HD static void natural_state(const T* q, const T* qd, const Params& /*p*/, T* ic) {
    using std::atan2;
    for (int k = 0; k < K; ++k) {
      T dx = q[2 * k], dy = q[2 * k + 1], ux = qd[2 * k], uy = qd[2 * k + 1];
      if (k > 0) {
        dx -= q[2 * k - 2];
        dy -= q[2 * k - 1];
        ux -= qd[2 * k - 2];
        uy -= qd[2 * k - 1];
      }
      ic[k] = atan2(dx, -dy);
      ic[K + k] = (dx * uy - dy * ux) / (dx * dx + dy * dy);
    }
  }
};

template <class T>
using PlanarChain3 = PlanarChain<T, 3>;
template <class T>
using PlanarChain6 = PlanarChain<T, 6>;
template <class T>
using PlanarChain12 = PlanarChain<T, 12>;

}  // namespace ukb::models
