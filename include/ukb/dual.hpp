/// @file dual.hpp
/// @brief Forward-mode dual numbers: a value and K tangents, so that the
///        shared kernels, written once on their scalar type, carry the
///        derivatives of every result with respect to K chosen inputs
///        (issue 52's forward sensitivities, first part).
///
/// A `Dual<T, K>` x stands for x.v + sum_k x.d[k] eps_k with eps_k eps_l = 0:
/// each operation applies the chain rule to the tangents. Seed an input with
/// `Dual<T, K>::variable(value, k)` (tangent 1 in slot k); every result's
/// `d[k]` is then its derivative with respect to that input, through the
/// same operations that compute its value (the value's bits are those of T
/// alone). Comparisons look at values only: a decision (a pivot, a rank, a
/// step accepted, an event located) is taken as for T and its derivative
/// is that of the branch taken. A decision that moves with the inputs (a
/// located event's time) therefore carries no derivative of its own: the
/// derivative of a result at such a decision is that of the result at the
/// decision held fixed (docs/design.md, "Forward sensitivities").
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "ukb/config.hpp"

namespace ukb {

template <class T, int K>
struct Dual {
  // float: the tolerances the kernels choose by the scalar's size
  // (policy.hpp) and the Gram route's wide arithmetic would take a
  // Dual<float, K> for a double; not yet.
  static_assert(std::is_same_v<T, double> && K >= 1, "ukb::Dual: a double value and K >= 1 tangents");
  using value_type = T;                ///< the type of the value and of each tangent
  static constexpr int tangents = K;   ///< the number of tangents
  T v{};     ///< the value
  T d[K]{};  ///< the tangents: d[k] = d v / d (input k)

  UKB_HD constexpr Dual() = default;
  /// A constant (every tangent 0).
  template <class U>
    requires std::is_arithmetic_v<U>
  UKB_HD constexpr Dual(U x) : v(static_cast<T>(x)) {}
  /// The value alone, as a number (static_cast: the tangents are dropped).
  template <class U>
    requires std::is_arithmetic_v<U>
  UKB_HD constexpr explicit operator U() const {
    return static_cast<U>(v);
  }
  /// Input k with the value x (tangent 1 in slot k, 0 elsewhere).
  UKB_HD static constexpr Dual variable(T x, int k) {
    Dual r(x);
    r.d[k] = T(1);
    return r;
  }

  UKB_HD friend constexpr Dual operator+(const Dual& a) { return a; }
  UKB_HD friend constexpr Dual operator-(const Dual& a) {
    Dual r(-a.v);
    for (int k = 0; k < K; ++k) r.d[k] = -a.d[k];
    return r;
  }
  UKB_HD friend constexpr Dual operator+(const Dual& a, const Dual& b) {
    Dual r(a.v + b.v);
    for (int k = 0; k < K; ++k) r.d[k] = a.d[k] + b.d[k];
    return r;
  }
  UKB_HD friend constexpr Dual operator-(const Dual& a, const Dual& b) {
    Dual r(a.v - b.v);
    for (int k = 0; k < K; ++k) r.d[k] = a.d[k] - b.d[k];
    return r;
  }
  UKB_HD friend constexpr Dual operator*(const Dual& a, const Dual& b) {
    Dual r(a.v * b.v);
    for (int k = 0; k < K; ++k) r.d[k] = a.d[k] * b.v + a.v * b.d[k];
    return r;
  }
  /// (a / b)' = (a' - (a / b) b') / b.
  UKB_HD friend constexpr Dual operator/(const Dual& a, const Dual& b) {
    Dual r(a.v / b.v);
    for (int k = 0; k < K; ++k) r.d[k] = (a.d[k] - r.v * b.d[k]) / b.v;
    return r;
  }
  UKB_HD constexpr Dual& operator+=(const Dual& b) { return *this = *this + b; }
  UKB_HD constexpr Dual& operator-=(const Dual& b) { return *this = *this - b; }
  UKB_HD constexpr Dual& operator*=(const Dual& b) { return *this = *this * b; }
  UKB_HD constexpr Dual& operator/=(const Dual& b) { return *this = *this / b; }

  UKB_HD friend constexpr bool operator==(const Dual& a, const Dual& b) { return a.v == b.v; }
  UKB_HD friend constexpr bool operator!=(const Dual& a, const Dual& b) { return a.v != b.v; }
  UKB_HD friend constexpr bool operator<(const Dual& a, const Dual& b) { return a.v < b.v; }
  UKB_HD friend constexpr bool operator<=(const Dual& a, const Dual& b) { return a.v <= b.v; }
  UKB_HD friend constexpr bool operator>(const Dual& a, const Dual& b) { return a.v > b.v; }
  UKB_HD friend constexpr bool operator>=(const Dual& a, const Dual& b) { return a.v >= b.v; }

  /// f(a) with f(a.v) = fv and f'(a.v) = slope.
  /// A tangent of a that is 0 stays 0 where the slope is infinite (sqrt at
  /// 0): an input that does not move moves nothing.
  UKB_HD static constexpr Dual chain(const Dual& a, T fv, T slope) {
    Dual r(fv);
    for (int k = 0; k < K; ++k) r.d[k] = a.d[k] == T(0) ? T(0) : slope * a.d[k];
    return r;
  }
  /// sqrt: a moving input at 0 has infinite tangents (no derivative there).
  UKB_HD friend Dual sqrt(const Dual& a) {
    using std::sqrt;
    const T s = sqrt(a.v);
    return chain(a, s, T(0.5) / s);
  }
  /// |a|: the derivative of the branch taken (+1 at 0; |-0| is +0, as std::abs).
  UKB_HD friend Dual abs(const Dual& a) {
    using std::abs;
    Dual r = a.v < T(0) ? -a : a;
    r.v = abs(a.v);
    return r;
  }
  UKB_HD friend Dual fabs(const Dual& a) { return abs(a); }
  UKB_HD friend Dual sin(const Dual& a) {
    using std::cos;
    using std::sin;
    return chain(a, sin(a.v), cos(a.v));
  }
  UKB_HD friend Dual cos(const Dual& a) {
    using std::cos;
    using std::sin;
    return chain(a, cos(a.v), -sin(a.v));
  }
  UKB_HD friend Dual exp(const Dual& a) {
    using std::exp;
    const T e = exp(a.v);
    return chain(a, e, e);
  }
  UKB_HD friend Dual log(const Dual& a) {
    using std::log;
    return chain(a, log(a.v), T(1) / a.v);
  }
  /// a^b: (a^b)' = b a^(b-1) a' + a^b log(a) b' (each term only where its
  /// tangent moves: a constant exponent allows a <= 0).
  UKB_HD friend Dual pow(const Dual& a, const Dual& b) {
    using std::log;
    using std::pow;
    Dual r(pow(a.v, b.v));
    for (int k = 0; k < K; ++k) {
      const T from_a = a.d[k] == T(0) ? T(0) : b.v * pow(a.v, b.v - T(1)) * a.d[k];
      const T from_b = b.d[k] == T(0) ? T(0) : r.v * log(a.v) * b.d[k];
      r.d[k] = from_a + from_b;
    }
    return r;
  }
  /// acos: -a' / sqrt(1 - a^2) (infinite at |a| = 1 for a moving input).
  UKB_HD friend Dual acos(const Dual& a) {
    using std::acos;
    using std::sqrt;
    return chain(a, acos(a.v), T(-1) / sqrt(T(1) - a.v * a.v));
  }
  /// atan2(y, x)' = (x y' - y x') / (x^2 + y^2), with x and y divided by
  /// max(|x|, |y|) first (no overflow or underflow of the squares); 0 where
  /// neither moves.
  UKB_HD friend Dual atan2(const Dual& y, const Dual& x) {
    using std::abs;
    using std::atan2;
    Dual r(atan2(y.v, x.v));
    const T s = abs(x.v) > abs(y.v) ? abs(x.v) : abs(y.v), xs = x.v / s, ys = y.v / s;
    for (int k = 0; k < K; ++k)
      r.d[k] = x.d[k] == T(0) && y.d[k] == T(0) ? T(0) : (xs * y.d[k] - ys * x.d[k]) / (xs * xs + ys * ys) / s;
    return r;
  }
  /// Whether the value and every tangent are finite (the one test that
  /// looks at the tangents: the kernels' own finiteness checks are x - x ==
  /// 0, on values).
  UKB_HD friend bool isfinite(const Dual& a) {
    using std::isfinite;
    bool ok = isfinite(a.v);
    for (int k = 0; k < K; ++k) ok = ok && isfinite(a.d[k]);
    return ok;
  }
};

/// x without its tangents (x itself for a number): a quantity whose
/// derivative is not wanted, such as an adaptive step's size (the steps are
/// held fixed, as CVODES and diffrax do, rather than the step-size
/// control's decisions differentiated).
template <class T>
UKB_HD constexpr T without_tangents(const T& x) {
  return x;
}
template <class T, int K>
UKB_HD constexpr Dual<T, K> without_tangents(const Dual<T, K>& x) {
  return Dual<T, K>(x.v);
}

/// Whether T is a Dual.
template <class T>
inline constexpr bool is_dual = false;
template <class T, int K>
inline constexpr bool is_dual<Dual<T, K>> = true;

}  // namespace ukb

/// The limits of a Dual are those of its value (constants: no tangents).
template <class T, int K>
class std::numeric_limits<ukb::Dual<T, K>> : public std::numeric_limits<T> {
 public:
  static constexpr ukb::Dual<T, K> min() noexcept { return std::numeric_limits<T>::min(); }
  static constexpr ukb::Dual<T, K> max() noexcept { return std::numeric_limits<T>::max(); }
  static constexpr ukb::Dual<T, K> lowest() noexcept { return std::numeric_limits<T>::lowest(); }
  static constexpr ukb::Dual<T, K> epsilon() noexcept { return std::numeric_limits<T>::epsilon(); }
  static constexpr ukb::Dual<T, K> infinity() noexcept { return std::numeric_limits<T>::infinity(); }
  static constexpr ukb::Dual<T, K> quiet_NaN() noexcept { return std::numeric_limits<T>::quiet_NaN(); }
  static constexpr ukb::Dual<T, K> signaling_NaN() noexcept { return std::numeric_limits<T>::signaling_NaN(); }
  static constexpr ukb::Dual<T, K> denorm_min() noexcept { return std::numeric_limits<T>::denorm_min(); }
  static constexpr ukb::Dual<T, K> round_error() noexcept { return std::numeric_limits<T>::round_error(); }
};
