/// @file backend.hpp
/// @brief The cpu backend's entry points (include/ukb/backend.hpp): the
///        shared kernels run by OpenMP threads over the systems, several
///        systems side by side in SIMD lanes (simd.hpp) or one at a time.
#pragma once

#include <algorithm>

#include "ukb/backend.hpp"
#include "ukb/cpu/parallel.hpp"
#include "ukb/cpu/simd.hpp"
#include "ukb/kernels/run.hpp"

namespace ukb::backends::cpu {

template <Model Mo>
void evaluate(const BatchView<Mo>& v, const EvalSettings<typename Mo::Scalar>& s, const EngineOptions& o) {
  ukb::cpu::parallel_for(v.N, o.threads, o.chunk, kernels::EvaluateBody<Mo>{v, s});
}

/// With EngineOptions::simd, every thread integrates systems in the lanes
/// of one pack (kernels::integrate_method: RK4 or Dormand–Prince), refilling a lane as soon as
/// its system is done from the systems the threads share, `chunk` at a time
/// (ukb::cpu::SharedSystems): a pack stays full until the whole batch runs
/// dry, and only the last systems of the call leave lanes idle. Otherwise
/// `chunk` systems at a time, one system after the other.
template <Model Mo>
void integrate(const BatchView<Mo>& v, const RunSettings<typename Mo::Scalar>& s, const EngineOptions& o) {
  using T = typename Mo::Scalar;
  // Packs hold numbers (float, double); a model on another scalar (a Dual:
  // ukb/dual.hpp) runs one system at a time.
  if (std::is_floating_point_v<T> && o.simd) {
    if constexpr (std::is_floating_point_v<T>) {
      constexpr int W = ukb::cpu::lane_width<T, Mo::n>;
      using V = ukb::cpu::Pack<T, W>;
      ukb::cpu::SharedSystems shared(v.N, o.chunk);
      ukb::cpu::parallel_workers(o.threads, [&] {
        ukb::cpu::SharedSystems::Source src(shared);
        kernels::integrate_method<Mo, V>(v, src, s);
      });
    }
  } else {
    ukb::cpu::parallel_for(v.N, o.threads, o.chunk, kernels::IntegrateBody<Mo>{v, s});
  }
}

}  // namespace ukb::backends::cpu

// The built-in models are instantiated once, in the library.
#ifndef UKB_BUILTIN_INSTANCES
#include "ukb/models/all.hpp"
UKB_FOR_EACH_BUILTIN(UKB_EXTERN_CPU)
#endif
