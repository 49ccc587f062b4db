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

/// With EngineOptions::simd, every thread takes `chunk` systems at a time
/// (at least one pack's worth) and integrates them in the lanes of one pack,
/// refilling a lane as soon as its system is done
/// (kernels::integrate_systems); otherwise `chunk` systems one at a time.
template <Model Mo>
void integrate(const BatchView<Mo>& v, const RunSettings<typename Mo::Scalar>& s, const EngineOptions& o) {
  using T = typename Mo::Scalar;
  if (o.simd) {
    constexpr int W = ukb::cpu::lane_width<T>;
    using V = ukb::cpu::Pack<T, W>;
    const int per = std::max(o.chunk, W);
    const int tasks = (v.N + per - 1) / per;
    ukb::cpu::parallel_for(tasks, o.threads, 1, [&](int k) {
      kernels::integrate_systems<Mo, V>(v, k * per, std::min(v.N, (k + 1) * per), s);
    });
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
