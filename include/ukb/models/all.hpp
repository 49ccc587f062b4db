/// @file all.hpp
/// @brief Every built-in model, and the one list of them (UKB_BUILTIN_MODELS).
#pragma once

#include <type_traits>

#include "ukb/model.hpp"
#include "ukb/models/bead_on_ring.hpp"
#include "ukb/models/chaplygin_sleigh.hpp"
#include "ukb/models/incline_block.hpp"
#include "ukb/models/nonholonomic_particle.hpp"
#include "ukb/models/planar_chain.hpp"
#include "ukb/models/puck_incline.hpp"
#include "ukb/models/redundant_pendulum.hpp"
#include "ukb/models/rolling_disk.hpp"
#include "ukb/models/rolling_sphere.hpp"
#include "ukb/models/two_link_arm.hpp"

/// The built-in models, in the order `ukb models` lists them: the one list
/// from which the registry, the backends' instantiations and the tests'
/// loops over models derive: X(A, Template) for each model template, S()
/// between two entries (A is passed through).
#define UKB_BUILTIN_MODELS(X, S, A)                                                                 \
  X(A, BeadOnRing) S() X(A, NonholonomicParticle) S() X(A, InclineBlock) S() X(A, PuckIncline) S()  \
  X(A, PlanarChain3) S() X(A, PlanarChain6) S() X(A, PlanarChain12) S() X(A, RedundantPendulum) S() \
  X(A, TwoLinkArm) S() X(A, ChaplyginSleigh) S() X(A, RollingDisk) S() X(A, RollingSphere)

namespace ukb::models {

namespace detail {
// One model's call of ModelList::for_each / for_each_template, kept a
// function of its own (noinline): inlined, the calls for every model make
// one function as large as all of them together, whose optimisation and
// code generation cost more than the same code in one function per model
// (clang with the sanitizers most of all).
template <class Mo, class F>
[[gnu::noinline]] constexpr void for_one(F& f) {
  f.template operator()<Mo>();
}
template <template <class> class M, class F>
[[gnu::noinline]] constexpr void for_one_template(F& f) {
  f.template operator()<M>();
}
}  // namespace detail

/// A compile-time list of model templates, instantiated on demand with a scalar.
template <template <class> class... Ms>
struct ModelList {
  /// Calls `f.template operator()<M<T>>()` for each model, in order.
  template <class T, class F>
  static constexpr void for_each(F&& f) {
    (detail::for_one<Ms<T>>(f), ...);
  }
  /// Calls `f.template operator()<M>()` for each model template, in order.
  template <class F>
  static constexpr void for_each_template(F&& f) {
    (detail::for_one_template<Ms>(f), ...);
  }
  static constexpr int size = sizeof...(Ms);
  /// Every listed model meets the Model concept in double and in float.
  static constexpr bool all_models = ((Model<Ms<double>> && Model<Ms<float>>) && ...);
  /// True when Mo is one of the listed models (at its own scalar type).
  template <class Mo>
  static constexpr bool contains = (std::is_same_v<Mo, Ms<typename Mo::Scalar>> || ...);
};

#define UKB_MODEL_NAME_(A, M) M
#define UKB_MODEL_COMMA_() ,
/// The built-in models (UKB_BUILTIN_MODELS).
using Builtin = ModelList<UKB_BUILTIN_MODELS(UKB_MODEL_NAME_, UKB_MODEL_COMMA_, _)>;
#undef UKB_MODEL_NAME_
#undef UKB_MODEL_COMMA_
static_assert(Builtin::all_models, "a built-in model does not meet the Model concept");

}  // namespace ukb::models

#define UKB_MODEL_NOTHING_()
#define UKB_MODEL_BOTH_SCALARS_(X, M) X(::ukb::models::M<double>) X(::ukb::models::M<float>)
/// Applies X to every built-in model type, in double and in float (for
/// explicit instantiations).
#define UKB_FOR_EACH_BUILTIN(X) UKB_BUILTIN_MODELS(UKB_MODEL_BOTH_SCALARS_, UKB_MODEL_NOTHING_, X)
#define UKB_MODEL_DOUBLE_(X, M) X(::ukb::models::M<double>)
/// Applies X to every built-in model type in double.
#define UKB_FOR_EACH_BUILTIN_DOUBLE(X) UKB_BUILTIN_MODELS(UKB_MODEL_DOUBLE_, UKB_MODEL_NOTHING_, X)
#define UKB_MODEL_FLOAT_(X, M) X(::ukb::models::M<float>)
/// Applies X to every built-in model type in float.
#define UKB_FOR_EACH_BUILTIN_FLOAT(X) UKB_BUILTIN_MODELS(UKB_MODEL_FLOAT_, UKB_MODEL_NOTHING_, X)
