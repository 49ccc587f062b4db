/// @file all.hpp
/// @brief Every built-in model, and the list the registry and the tests walk.
#pragma once

#include <type_traits>

#include "ukb/model.hpp"
#include "ukb/models/bead_on_ring.hpp"
#include "ukb/models/incline_block.hpp"
#include "ukb/models/nonholonomic_particle.hpp"
#include "ukb/models/planar_chain.hpp"
#include "ukb/models/redundant_pendulum.hpp"
#include "ukb/models/two_link_arm.hpp"

namespace ukb::models {

/// A compile-time list of model templates, instantiated on demand with a scalar.
template <template <class> class... Ms>
struct ModelList {
  /// Calls `f.template operator()<M<T>>()` for each model, in order.
  template <class T, class F>
  static constexpr void for_each(F&& f) {
    (f.template operator()<Ms<T>>(), ...);
  }
  static constexpr int size = sizeof...(Ms);
  /// True when Mo is one of the listed models (at its own scalar type).
  template <class Mo>
  static constexpr bool contains = (std::is_same_v<Mo, Ms<typename Mo::Scalar>> || ...);
};

/// The built-in models, in the order `ukb models` lists them.
using Builtin = ModelList<BeadOnRing, NonholonomicParticle, InclineBlock, PlanarChain3,
                          PlanarChain6, PlanarChain12, RedundantPendulum, TwoLinkArm>;

static_assert(Model<BeadOnRing<double>> && Model<BeadOnRing<float>>);
static_assert(Model<NonholonomicParticle<double>> && Model<InclineBlock<double>>);
static_assert(Model<PlanarChain12<double>> && Model<RedundantPendulum<double>>);
static_assert(Model<TwoLinkArm<double>> && Model<TwoLinkArm<float>>);

}  // namespace ukb::models
