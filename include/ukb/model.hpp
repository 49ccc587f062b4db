/// @file model.hpp
/// @brief The model concept: what a constrained mechanical system provides.
///
/// A model is a struct (usually a template on the scalar type `T`: `double`
/// or `float`; the CPU backend may also use it on SIMD packs, see `rebind`)
/// with
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
/// | `visit_params(p, f)` | calls `f(name, field, description)` for each field, in order; a description ending in `(> x)` or `(>= x)` states the admissible range, which `ukb run`, `ukb accel` and `ukb trajectory` enforce |
/// | `mass(q, t, p, M)` | `M` (n x n, row-major), symmetric positive definite |
/// | `force(q, qd, t, p, Q)` | impressed force `Q` (n) |
/// | `constraints(q, qd, t, p, A, b)` | `A` (m x n, row-major) and `b` (m) of `A q'' = b` |
/// | `nonideal(q, qd, t, p, Qc_ideal, lambda, C)` | non-ideal force `C` (n), may use the ideal constraint force `Qc_ideal` (n) and the multipliers `lambda` (m) |
///
/// The four physics functions are `UKB_HD`, static, allocate nothing, throw
/// nothing, and write every entry of their outputs. Under every virtual
/// displacement `v` (`A v = 0`) the constraint force does the work `v^T C`.
///
/// Optional members (detected at compile time; each adds a feature of
/// `ukb run`, none is needed by the solver):
///
/// | member | enables |
/// |---|---|
/// | `residual(q, qd, t, p, pos, vel)` | constraint-drift monitoring: `pos` = max abs of the undifferentiated holonomic constraints `phi(q,t)` (in length units), `vel` = max abs of their rates and of the nonholonomic constraints `psi(q,q',t)` |
/// | `row_kinds` (std::array<RowKind, m>) + `constraint_rows(q, qd, t, p, phi, phid)` | stabilisation (Baumgarte, projection): the undifferentiated constraint of every row of A, see below |
/// | `potential(q, t, p)` | energy observables: E = 1/2 q'^T M q' + V(q, t) |
/// | `initial_names` (std::array) + `initial_state(ic, p, q, qd)` | natural initial quantities (e.g. an angle and a rate) mapped to a consistent state; returns false where no consistent state exists. Optional `initial_docs` (std::array, one per name): their descriptions, ending like a parameter's in "(> x)", "(>= x)" or "(one of a, b)", which `ukb run` enforces |
/// | `natural_state(q, qd, p, ic)` | the inverse map, reported for final states (e.g. the resting angle) |
/// | `observable_names` (std::array<const char*, K>) + `observables(q, qd, t, p, out)` | results columns of the model's choosing: `out` (K) computed from each sample's final state and parameters, on every backend, with their statistics in summary.json |
/// | `event(q, qd, t, p)` + `on_event(q, qd, t, p)` | events: a sign change of `event` inside a step is located in time; `on_event` may change q and q' (and, taking `T& t`, move the time forward: a handler that finishes a motion in closed form) and returns EventAction::stop (the system is at rest for good) or EventAction::resume. Coulomb friction in any dimension: ukb/friction.hpp's `stop_event` and `finish_stop` |
/// | `template <class U> using rebind = MyModel<U>` | speed: the CPU backend calls `mass` (or `mass_diagonal`), `force`, `constraints`, `nonideal` (and `constraint_rows` under Baumgarte stabilisation, and `event` where the model has events) of `rebind<pack>` on SIMD packs of systems in double (and in float where the model also declares `static constexpr bool rebind_float = true`, its non-integer literals written `ukb::lit<T>(x)`), instead of lane by lane. Give it only where those functions are branch-free on values: choices through `ukb::pick(cond, a, b)` (per lane; both computed) instead of `if`, `?:` or `std::max` on state or parameters (`ukb::all_lanes(cond)` may skip work no lane needs), sines and cosines through `ukb::math::sin`/`cos` (lane by lane on a pack: transcendental functions of a pack and of a scalar may differ in the last bit), other arithmetic + - * / and `sqrt` only, so that a lane rounds as a scalar (`Simd.*` tests check the built-in models bit for bit). `rebind<pack>` must itself meet the Model concept and `rebind<Scalar>` must be the model itself (a model derived from another inherits a `rebind` that names the base), or the backend calls the model lane by lane |
/// | `mass_diagonal(q, t, p, d)` | speed: the model's M is diagonal at every state and `d` (n) is its diagonal, the same values `mass` puts there (`mass` stays required: the reference backend, so `ukb trajectory`, and the energies use it). The cpu and cuda backends then factor M = L L^T as L = diag(sqrt(d)), in O(n) instead of O(n^3), and apply L^{-1} and L^{-T} in O(n) instead of O(n^2): the same results as the dense factor of the same M (whose extra terms are exact zeros): on the CPU bit for bit up to the sign of a zero; on a GPU, where nvcc fuses multiply-adds, within the usual rounding differences. `ukb run` and `ukb accel` refuse a model whose `mass` and `mass_diagonal` disagree at a sample's initial state or at `--q` |
/// | `constraint_columns` (std::array<ColumnRange, m>) | speed, with `mass_diagonal`: row i of A is zero outside the columns [begin, end) of `constraint_columns[i]` at every state (a chain's link touches the coordinates of its two ends). With a diagonal M, B = A L^{-T} has the same zeros, and the cpu and cuda backends leave out the products with them: in A a, B c^, B z, B^+ y on the Gram route, the Gram matrix G = B B^T itself (for the 12-link chain, 68 products instead of 1 872), and the Cholesky factor of G and the solves with it, which keep G's envelope (linalg.hpp, GramEnvelope), with the same results as the dense operations, on the CPU bit for bit up to the sign of a zero. `constraints` must still write every entry of A, the zeros included. A model with it must give `mass_diagonal` (compile error otherwise); a model derived from one with it inherits it, so one that changes `constraints` must change or hide it too. `ukb run` and `ukb accel` refuse a model whose A has a nonzero outside its rows' columns at a sample's initial state or at `--q`, `--qd` |
///
/// **Pure functions.** The CPU backend steps 8 (16) systems in lockstep and
/// may call `mass`, `force`, `constraints`, `nonideal` and `event` for a
/// system that has already failed (with a NaN or meaningless state) or on
/// behalf of one that has stopped, and drop the result: the functions must
/// have no side effects and must not trap on such input (for instance, no
/// unchecked conversion of a state to an integer index).
///
/// **Constraint rows.** `constraint_rows` states, row by row of A, the
/// constraint that the row differentiates, scaled exactly as the row:
/// - a holonomic row i (`row_kinds[i] == RowKind::holonomic`) writes
///   `phi[i]` = phi_i(q, t) with `A_i = d phi_i / d q`, and `phid[i]` =
///   phi_i' = A_i q' + d phi_i / d t; so that phi_i'' = (A q'' - b)_i along
///   every motion;
/// - a nonholonomic row i writes `phi[i] = 0` and `phid[i]` = psi_i(q, q', t)
///   with `A_i = d psi_i / d q'`; so that psi_i' = (A q'' - b)_i.
/// For example, the ring's row A = [x, y], b = -(x'^2 + y'^2) comes from
/// phi = (x^2 + y^2 - R^2) / 2 with phi' = x x' + y y'.
#pragma once

#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <type_traits>

#include "ukb/config.hpp"

namespace ukb {

namespace detail {
template <class T>
struct ScalarOf {
  using type = T;
};
template <class T>
  requires requires { typename T::value_type; }
struct ScalarOf<T> {
  using type = typename T::value_type;
};
}  // namespace detail

/// The element type of a model's arithmetic type: T itself for a scalar,
/// its element type for a SIMD pack.
template <class T>
using scalar_of = typename detail::ScalarOf<T>::type;

/// A literal in a model's arithmetic type T: T(x) where T takes a double
/// (numbers, packs of doubles), else the value converted to T's scalar
/// first (a pack of floats refuses a double in its broadcast constructor). Bitwise T(x) of
/// the scalar type either way. Models that give `rebind` write their
/// non-integer literals with it (`lit<T>(0.5)`, `T g = lit<T>(9.81)`), so
/// that they also run on float packs.
template <class T>
UKB_HD constexpr T lit(double x) {
  if constexpr (std::is_constructible_v<T, double>) {
    return T(x);
  } else {
    return T(static_cast<scalar_of<T>>(x));
  }
}

/// How `pick` and `ukb::math` act on a model's arithmetic type V. This
/// primary template is the scalar case (`double`, `float`, on the host and
/// in device code); kernels/ukb/cpu/simd.hpp specialises it for SIMD packs:
/// `pick` per lane, and `sin`/`cos` lane by lane through the scalar
/// function, so that every lane rounds exactly as the scalar code does (a
/// pack's own vectorised sin may differ in the last bit).
template <class V>
struct Arith {
  UKB_HD static V pick(bool c, const V& a, const V& b) { return c ? a : b; }
  UKB_HD static V sin(const V& x) {
    using std::sin;
    return sin(x);
  }
  UKB_HD static V cos(const V& x) {
    using std::cos;
    return cos(x);
  }
};

/// A decision on values, written so that it also runs on SIMD packs: `a`
/// where `c` holds, else `b`, per lane (`c ? a : b` for a scalar). Models
/// that give `rebind` write their value-dependent choices with it instead of
/// `if`, `?:` or `std::max` (`pick(v2 > T(0), x, y)`); both `a` and `b` are
/// computed, so neither may trap (a division by zero in the one not taken
/// is fine: its infinity or NaN is dropped).
template <class M, class V>
UKB_HD V pick(const M& c, const V& a, const V& b) {
  return Arith<V>::pick(c, a, b);
}

/// Whether every lane of a decision holds (the decision itself for a
/// scalar): lets pack-aware code skip work that no lane needs, as scalar
/// code skips a branch not taken.
UKB_HD inline bool all_lanes(bool c) { return c; }
template <class M>
bool all_lanes(const M& c) {
  return all_of(c);  // a pack's mask: its library's all_of
}

/// Transcendental functions for models that give `rebind`: on a scalar the
/// standard function, on a pack that function lane by lane (bitwise the
/// scalar result). Call them qualified (`math::sin(q[0])`): an unqualified
/// `sin` of a pack finds the pack library's own.
namespace math {
/// sin(x), per lane on a pack.
template <class V>
UKB_HD V sin(const V& x) {
  return Arith<V>::sin(x);
}
/// cos(x), per lane on a pack.
template <class V>
UKB_HD V cos(const V& x) {
  return Arith<V>::cos(x);
}
}  // namespace math

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

/// What a model's event handler decides at a located event.
enum class EventAction : int {
  resume = 0,  ///< integrate on from the (possibly changed) state
  stop = 1,    ///< the system is at rest for good (status at_rest)
};

/// The model monitors its undifferentiated constraints (`residual`).
template <class Mo>
concept HasResidual = requires(const typename Mo::Scalar* x, typename Mo::Scalar t,
                               const typename Mo::Params& p, typename Mo::Scalar& r) {
  Mo::residual(x, x, t, p, r, r);
};

/// Kind of a constraint row (see `constraint_rows` in this file's documentation).
enum class RowKind : int {
  holonomic = 0,     ///< phi(q, t) = 0, differentiated twice
  nonholonomic = 1,  ///< psi(q, q', t) = 0, differentiated once
};

/// The model states the undifferentiated constraint of each row of A
/// (`row_kinds`, `constraint_rows`), which stabilisation needs.
template <class Mo>
concept HasConstraintRows =
    requires(const typename Mo::Scalar* x, typename Mo::Scalar* y, typename Mo::Scalar t,
             const typename Mo::Params& p) {
      requires std::same_as<std::remove_cvref_t<decltype(Mo::row_kinds)>,
                            std::array<RowKind, static_cast<std::size_t>(Mo::m)>>;
      Mo::constraint_rows(x, x, t, p, y, y);
    };

/// Whether row i of a model with constraint rows is holonomic. Usable in
/// device code: the kinds are read from a local copy of `row_kinds` (a
/// static member of the model, which device code cannot access).
template <class Mo>
  requires HasConstraintRows<Mo>
UKB_HD constexpr bool row_is_holonomic(int i) {
  constexpr std::array<RowKind, static_cast<std::size_t>(Mo::m)> kinds = Mo::row_kinds;
  return kinds[static_cast<std::size_t>(i)] == RowKind::holonomic;
}

/// The columns [begin, end) of a row of A outside which the row is zero
/// (`constraint_columns`, see the table in this file's documentation).
struct ColumnRange {
  int begin = 0;  ///< first column that may be nonzero
  int end = 0;    ///< one past the last
};

/// The model states, row by row of A, the columns outside which the row is
/// zero (`constraint_columns`, see the table in this file's documentation).
template <class Mo>
concept HasConstraintColumns = requires {
  requires std::same_as<std::remove_cvref_t<decltype(Mo::constraint_columns)>,
                        std::array<ColumnRange, static_cast<std::size_t>(Mo::m)>>;
};

/// Row i's columns of a model with constraint columns. Usable in device
/// code, as row_is_holonomic: there read from a local copy of the static
/// member; on the host from the member itself (g++ 12 -O3 builds the local
/// copy on the stack at every call).
template <class Mo>
  requires HasConstraintColumns<Mo>
UKB_HD constexpr ColumnRange constraint_columns_of(int i) {
#if defined(__CUDA_ARCH__)
  constexpr std::array<ColumnRange, static_cast<std::size_t>(Mo::m)> columns = Mo::constraint_columns;
  return table_at(columns, i);
#else
  return Mo::constraint_columns[static_cast<std::size_t>(i)];
#endif
}

/// Whether every row's columns lie within [0, n) in order (begin <= end);
/// true for a model without constraint columns.
template <class Mo>
constexpr bool constraint_columns_valid() {
  if constexpr (HasConstraintColumns<Mo>) {
    for (const ColumnRange& c : Mo::constraint_columns)
      if (!(0 <= c.begin && c.begin <= c.end && c.end <= Mo::n)) return false;
  }
  return true;
}

/// The model's mass matrix is diagonal and the model gives its diagonal
/// (`mass_diagonal`, see the table in this file's documentation).
template <class Mo>
concept HasDiagonalMass = requires(const typename Mo::Scalar* x, typename Mo::Scalar t, const typename Mo::Params& p,
                                   typename Mo::Scalar* d) { Mo::mass_diagonal(x, t, p, d); };

/// The model has a potential energy (`potential`).
template <class Mo>
concept HasPotential = requires(const typename Mo::Scalar* x, typename Mo::Scalar t,
                                const typename Mo::Params& p) {
  { Mo::potential(x, t, p) } -> std::convertible_to<typename Mo::Scalar>;
};

/// The model maps natural initial quantities to consistent states and back.
template <class Mo>
concept HasInitialState = requires(const typename Mo::Scalar* x, typename Mo::Scalar* y,
                                   const typename Mo::Params& p) {
  { Mo::initial_names.size() } -> std::convertible_to<std::size_t>;
  { Mo::initial_state(x, p, y, y) } -> std::convertible_to<bool>;
  Mo::natural_state(x, x, p, y);
};

/// The model names quantities of a final state of its own (results columns).
template <class Mo>
concept HasObservables = requires(const typename Mo::Scalar* x, typename Mo::Scalar* y,
                                  typename Mo::Scalar t, const typename Mo::Params& p) {
  { Mo::observable_names.size() } -> std::convertible_to<std::size_t>;
  Mo::observables(x, x, t, p, y);
};

/// The model has an event function and a handler (e.g. stick-slip).
template <class Mo>
concept HasEvents = requires(const typename Mo::Scalar* x, typename Mo::Scalar* y,
                             typename Mo::Scalar t, const typename Mo::Params& p) {
  { Mo::event(x, x, t, p) } -> std::convertible_to<typename Mo::Scalar>;
  { Mo::on_event(y, y, t, p) } -> std::same_as<EventAction>;
};

/// The model's handler may move the time (it takes `T& t`, like
/// ukb/friction.hpp's finish_stop). Only one declared
/// `on_event(T* q, T* qd, T t, const Params& p)`, the time by value (a
/// template deducing it by value too), cannot: the run loops skip the check
/// of the time it leaves (and the copy of the state that check needs). A
/// reference of any kind (`T&`, `const T&`, a forwarding reference) counts
/// as moving it.
template <class Mo>
concept HandlerMovesTime =
    HasEvents<Mo> && !requires {
      static_cast<EventAction (*)(typename Mo::Scalar*, typename Mo::Scalar*, typename Mo::Scalar,
                                  const typename Mo::Params&)>(&Mo::on_event);
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

#include "ukb/model_check.hpp"  // UKB_MODEL
