/// @file model_check.hpp
/// @brief `UKB_MODEL(Name)`: names a model of a model file and checks it
///        requirement by requirement, each failure a `static_assert` whose
///        text states the expected declaration. Included by model.hpp.
///
/// ```cpp
/// template <class T> struct Sleigh { ... };   // the model (model.hpp)
/// UKB_MODEL(Sleigh)                           // at global scope, after it
/// ```
/// `Name` is a class template on the scalar type (`Sleigh` stands for
/// `Sleigh<double>`) or a class (with `using Scalar = double`); a name in a
/// namespace is written qualified (`UKB_MODEL(mech::Sleigh)`). In any
/// program the line checks the model; when ukb compiles the file into a
/// plugin (`ukb run` with `model = "sleigh.hpp"`) it also registers the
/// model there. An optional hook (model.hpp) whose name is present but
/// whose declaration does not match is an error, not a hook silently
/// ignored.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <type_traits>

namespace ukb::detail {

/// The model type UKB_MODEL names: `X<double>` for a template X, X for a class.
template <template <class> class X>
X<double> model_type_of();
template <class X>
X model_type_of();

// Whether a class has a member of a name, whatever it is (function, data,
// type, template): the name is ambiguous in a class derived from the model
// and from a class that has it.
#define UKB_DETAIL_MEMBER_PROBE_(member)                                            \
  struct MemberFallback_##member {                                                  \
    int member;                                                                     \
  };                                                                                \
  template <class Mo>                                                               \
  struct MemberProbe_##member : Mo, MemberFallback_##member {};                     \
  template <class Mo>                                                               \
  concept has_member_##member = std::is_class_v<Mo> && !std::is_final_v<Mo> &&      \
                                !requires { &MemberProbe_##member<Mo>::member; };
UKB_DETAIL_MEMBER_PROBE_(residual)
UKB_DETAIL_MEMBER_PROBE_(row_kinds)
UKB_DETAIL_MEMBER_PROBE_(constraint_rows)
UKB_DETAIL_MEMBER_PROBE_(potential)
UKB_DETAIL_MEMBER_PROBE_(initial_names)
UKB_DETAIL_MEMBER_PROBE_(initial_docs)
UKB_DETAIL_MEMBER_PROBE_(initial_state)
UKB_DETAIL_MEMBER_PROBE_(natural_state)
UKB_DETAIL_MEMBER_PROBE_(event)
UKB_DETAIL_MEMBER_PROBE_(on_event)
UKB_DETAIL_MEMBER_PROBE_(mass_diagonal)
UKB_DETAIL_MEMBER_PROBE_(constraint_columns)
UKB_DETAIL_MEMBER_PROBE_(observable_names)
UKB_DETAIL_MEMBER_PROBE_(observables)
#undef UKB_DETAIL_MEMBER_PROBE_

/// Checks a model against the concept (model.hpp) one requirement at a
/// time, and every optional hook whose name it has against the hook's
/// declaration; returns true where all hold (UKB_MODEL static_asserts each).
template <class Mo>
constexpr bool check_model() {
  constexpr bool types = requires {
    typename Mo::Scalar;
    typename Mo::Params;
  };
  static_assert(requires { typename Mo::Scalar; },
                "ukb model: needs `using Scalar = T;` (the scalar type: double, or float)");
  static_assert(requires { typename Mo::Params; },
                "ukb model: needs `struct Params { T name = default; ... };` (the parameters)");
  static_assert(requires { { Mo::name } -> std::convertible_to<const char*>; },
                "ukb model: needs `static constexpr const char* name = \"my_model\";`");
  static_assert(requires { { Mo::summary } -> std::convertible_to<const char*>; },
                "ukb model: needs `static constexpr const char* summary = \"one line\";`");
  static_assert(requires { { Mo::n } -> std::convertible_to<int>; },
                "ukb model: needs `static constexpr int n = ...;` (number of coordinates)");
  static_assert(requires { { Mo::m } -> std::convertible_to<int>; },
                "ukb model: needs `static constexpr int m = ...;` (number of constraint rows)");
  if constexpr (requires { { Mo::n } -> std::convertible_to<int>; }) {
    static_assert(Mo::n >= 1, "ukb model: n (the number of coordinates) must be >= 1");
    if constexpr (Mo::n >= 1)
      static_assert(requires {
        requires std::same_as<std::remove_cvref_t<decltype(Mo::coords)>,
                              std::array<const char*, static_cast<std::size_t>(Mo::n)>>;
      }, "ukb model: needs `static constexpr std::array<const char*, n> coords{...};` (one name per coordinate)");
  }
  if constexpr (requires { { Mo::m } -> std::convertible_to<int>; })
    static_assert(Mo::m >= 1, "ukb model: m (the number of constraint rows) must be >= 1");
  if constexpr (types) {
    using T = typename Mo::Scalar;
    using P = typename Mo::Params;
    static_assert(std::default_initializable<P>,
                  "ukb model: Params must be default-constructible (every field with a default value)");
    static_assert(requires(P& p, const P& cp) {
      Mo::visit_params(p, ParamProbe<T>{});
      Mo::visit_params(cp, ParamProbe<T>{});
    }, "ukb model: needs `template <class P, class F> UKB_HD static constexpr void visit_params(P& p, F&& f)` "
       "calling f(\"name\", p.field, \"description\") for every field of Params (fields of type Scalar)");
    static_assert(requires(const T* q, T t, const P& p, T* M) { Mo::mass(q, t, p, M); },
                  "ukb model: needs `UKB_HD static void mass(const T* q, T t, const Params& p, T* M)` "
                  "(M: n x n, row-major)");
    static_assert(requires(const T* q, T t, const P& p, T* Q) { Mo::force(q, q, t, p, Q); },
                  "ukb model: needs `UKB_HD static void force(const T* q, const T* qd, T t, const Params& p, T* Q)`");
    static_assert(requires(const T* q, T t, const P& p, T* A) { Mo::constraints(q, q, t, p, A, A); },
                  "ukb model: needs `UKB_HD static void constraints(const T* q, const T* qd, T t, const Params& p, "
                  "T* A, T* b)` (A: m x n, row-major; A q'' = b)");
    static_assert(requires(const T* q, T t, const P& p, T* C) { Mo::nonideal(q, q, t, p, q, q, C); },
                  "ukb model: needs `UKB_HD static void nonideal(const T* q, const T* qd, T t, const Params& p, "
                  "const T* Qc_ideal, const T* lambda, T* C)` (write zeros for ideal constraints)");

    // The optional hooks: a name that is there must have the hook's form.
    if constexpr (has_member_residual<Mo>)
      static_assert(HasResidual<Mo>, "ukb model: `residual` must be `UKB_HD static void residual(const T* q, "
                                     "const T* qd, T t, const Params& p, T& pos, T& vel)`");
    if constexpr (has_member_row_kinds<Mo> || has_member_constraint_rows<Mo>)
      static_assert(HasConstraintRows<Mo>,
                    "ukb model: stabilisation needs both `static constexpr std::array<ukb::RowKind, m> row_kinds` and "
                    "`UKB_HD static void constraint_rows(const T* q, const T* qd, T t, const Params& p, T* phi, "
                    "T* phid)`");
    if constexpr (has_member_potential<Mo>)
      static_assert(HasPotential<Mo>,
                    "ukb model: `potential` must be `UKB_HD static T potential(const T* q, T t, const Params& p)`");
    if constexpr (has_member_initial_names<Mo> || has_member_initial_state<Mo> || has_member_natural_state<Mo>)
      static_assert(HasInitialState<Mo>,
                    "ukb model: natural initial quantities need all of `static constexpr std::array<const char*, K> "
                    "initial_names`, `UKB_HD static bool initial_state(const T* ic, const Params& p, T* q, T* qd)` and "
                    "`UKB_HD static void natural_state(const T* q, const T* qd, const Params& p, T* ic)`");
    if constexpr (has_member_initial_docs<Mo> && HasInitialState<Mo>)
      static_assert(requires {
        requires std::same_as<std::remove_cvref_t<decltype(Mo::initial_docs)>,
                              std::array<const char*, Mo::initial_names.size()>>;
      }, "ukb model: `initial_docs` must be `static constexpr std::array<const char*, K>`, one per initial_names");
    if constexpr (has_member_observable_names<Mo> || has_member_observables<Mo>) {
      static_assert(HasObservables<Mo>,
                    "ukb model: observables need both `static constexpr std::array<const char*, K> observable_names` "
                    "and `UKB_HD static void observables(const T* q, const T* qd, T t, const Params& p, T* out)`");
      if constexpr (HasObservables<Mo>)
        static_assert(Mo::observable_names.size() >= 1, "ukb model: `observable_names` must name at least one");
    }
    if constexpr (has_member_mass_diagonal<Mo>)
      static_assert(HasDiagonalMass<Mo>, "ukb model: `mass_diagonal` must be `UKB_HD static void mass_diagonal(const "
                                         "T* q, T t, const Params& p, T* d)` (d: the n diagonal entries of M)");
    if constexpr (has_member_constraint_columns<Mo>) {
      static_assert(HasConstraintColumns<Mo>, "ukb model: `constraint_columns` must be `static constexpr "
                                              "std::array<ukb::ColumnRange, m>` (row i: columns [begin, end))");
      if constexpr (HasConstraintColumns<Mo>) {
        static_assert(constraint_columns_valid<Mo>(),
                      "ukb model: every `constraint_columns` range must have 0 <= begin <= end <= n");
        static_assert(HasDiagonalMass<Mo>, "ukb model: `constraint_columns` needs `mass_diagonal` (with a dense M, "
                                           "B = A L^-T is not zero where A is)");
      }
    }
    if constexpr (has_member_event<Mo> || has_member_on_event<Mo>)
      static_assert(HasEvents<Mo>, "ukb model: events need both `UKB_HD static T event(const T* q, const T* qd, T t, "
                                   "const Params& p)` and `UKB_HD static ukb::EventAction on_event(T* q, T* qd, T t, "
                                   "const Params& p)` (or `T& t`: a handler that moves the time)");
  }
  return Model<Mo>;
}

/// Calls every function of a model once (the hooks it has included), so
/// that their bodies are compiled: the check phase of a model file, on the
/// host and, under nvcc, in device code.
template <class Mo>
UKB_HD void touch_model() {
  if constexpr (Model<Mo>) {
    using T = typename Mo::Scalar;
    constexpr int n = Mo::n, m = Mo::m;
    T q[n] = {}, qd[n] = {}, M[n * n], Q[n], A[m * n], b[m], C[n], lambda[m] = {}, t = T(0);
    typename Mo::Params p{};
    Mo::visit_params(p, [](const char*, T& field, const char*) { field = T(0); });
    Mo::mass(q, t, p, M);
    if constexpr (HasDiagonalMass<Mo>) Mo::mass_diagonal(q, t, p, M);
    Mo::force(q, qd, t, p, Q);
    Mo::constraints(q, qd, t, p, A, b);
    Mo::nonideal(q, qd, t, p, Q, lambda, C);
    if constexpr (HasResidual<Mo>) Mo::residual(q, qd, t, p, t, t);
    if constexpr (HasConstraintRows<Mo>) Mo::constraint_rows(q, qd, t, p, b, lambda);
    if constexpr (HasPotential<Mo>) t = Mo::potential(q, t, p);
    if constexpr (HasInitialState<Mo>) {
      T ic[Mo::initial_names.size() + 1] = {};
      (void)Mo::initial_state(ic, p, q, qd);
      Mo::natural_state(q, qd, p, ic);
    }
    if constexpr (HasEvents<Mo>) {
      t = Mo::event(q, qd, t, p);
      (void)Mo::on_event(q, qd, t, p);
    }
  }
}

}  // namespace ukb::detail

/// The model type that `UKB_MODEL(X)` names.
#define UKB_MODEL_TYPE(...) decltype(::ukb::detail::model_type_of<__VA_ARGS__>())

namespace ukb {
template <class Mo>
struct CudaInstance;  // engine.hpp
}

/// Declares that the cuda backend is instantiated for the model type Mo
/// (UKB_INSTANTIATE_CUDA in a .cu file of the program, or ukb_add_model):
/// ukb::CudaInstance<Mo> is true, and the engine dispatches cuda calls for Mo.
#define UKB_CUDA_MODEL(...) \
  template <>               \
  struct ukb::CudaInstance<__VA_ARGS__> : std::true_type {};

// What a plugin build adds to UKB_MODEL (defined by ukb's plugin headers
// before this one); in a program built with ukb_add_model (UKB_CUDA_MODELS),
// the declaration that the cuda backend is instantiated for the model;
// nothing in other programs.
#ifndef UKB_MODEL_EXTRA_
#ifdef UKB_CUDA_MODELS
#define UKB_MODEL_EXTRA_(...) UKB_CUDA_MODEL(UKB_MODEL_TYPE(__VA_ARGS__))
#else
#define UKB_MODEL_EXTRA_(...)
#endif
#endif

/// Names (in a model file) and checks a model; see this file's documentation.
#define UKB_MODEL(...)                                                         \
  static_assert(::ukb::detail::check_model<UKB_MODEL_TYPE(__VA_ARGS__)>(),   \
                "ukb model " #__VA_ARGS__ ": see the requirement above");      \
  UKB_MODEL_EXTRA_(__VA_ARGS__)
