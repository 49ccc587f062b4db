/// @file model.hpp
/// @brief The model concept: what a constrained mechanical system provides.
///
/// A model is a struct template on the scalar type `T` (`double`, `float`, or
/// later a SIMD pack) with
///
/// | member | meaning |
/// |---|---|
/// | `using Scalar = T` | scalar type |
/// | `static constexpr const char* name` | registry name, e.g. `"bead_on_ring"` |
/// | `static constexpr const char* summary` | one line for `ukb models` |
/// | `static constexpr int n` | number of generalized coordinates (>= 1) |
/// | `static constexpr int m` | number of constraint rows (>= 1, rank may be lower) |
/// | `static constexpr std::array<const char*, n> coords` | coordinate names |
/// | `struct Params` | aggregate of `T` fields with default member initialisers |
/// | `visit_params(p, f)` | calls `f(name, field, description)` for each field, in order |
/// | `mass(q, t, p, M)` | `M` (n x n, row-major), symmetric positive definite |
/// | `force(q, qd, t, p, Q)` | impressed force `Q` (n) |
/// | `constraints(q, qd, t, p, A, b)` | `A` (m x n, row-major) and `b` (m) of `A q'' = b` |
/// | `nonideal(q, qd, t, p, Qc_ideal, lambda, C)` | non-ideal force `C` (n), may use the ideal constraint force `Qc_ideal` (n) and the multipliers `lambda` (m) |
///
/// The four physics functions are `UKB_HD`, static, allocate nothing, throw
/// nothing, and write every entry of their outputs. Under every virtual
/// displacement `v` (`A v = 0`) the constraint force does the work `v^T C`.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>

#include "ukb/config.hpp"

namespace ukb {

namespace detail {
/// Visitor used only to check that `visit_params` accepts a callable.
template <class T>
struct ParamProbe {
  constexpr void operator()(const char*, T&, const char*) const {}
  constexpr void operator()(const char*, const T&, const char*) const {}
};
}  // namespace detail

/// The requirements on a model (see the table in this file's documentation).
/// A type that misses one fails with the name of the unmet requirement.
template <class Mo>
concept Model =
    requires {
      typename Mo::Scalar;
      typename Mo::Params;
      { Mo::name } -> std::convertible_to<const char*>;
      { Mo::summary } -> std::convertible_to<const char*>;
      { Mo::n } -> std::convertible_to<int>;
      { Mo::m } -> std::convertible_to<int>;
      requires Mo::n >= 1 && Mo::m >= 1;
      requires std::same_as<std::remove_cvref_t<decltype(Mo::coords)>,
                            std::array<const char*, static_cast<std::size_t>(Mo::n)>>;
      requires std::default_initializable<typename Mo::Params>;
    } &&
    requires(typename Mo::Params& p, const typename Mo::Params& cp, const typename Mo::Scalar* in,
             typename Mo::Scalar* out, typename Mo::Scalar t) {
      Mo::visit_params(p, detail::ParamProbe<typename Mo::Scalar>{});
      Mo::visit_params(cp, detail::ParamProbe<typename Mo::Scalar>{});
      Mo::mass(in, t, cp, out);
      Mo::force(in, in, t, cp, out);
      Mo::constraints(in, in, t, cp, out, out);
      Mo::nonideal(in, in, t, cp, in, in, out);
    };

/// Number of parameters of a model (counted through `visit_params`).
template <Model Mo>
constexpr int param_count() {
  typename Mo::Params p{};
  int k = 0;
  Mo::visit_params(p, [&k](const char*, auto&, const char*) { ++k; });
  return k;
}

}  // namespace ukb
