/// @file cuda_engine.hpp
/// @brief Entry points of the CUDA backend for batches of the built-in
///        models. No CUDA header: usable from any translation unit.
#pragma once

#include <stdexcept>

#include "ukb/batch.hpp"
#include "ukb/kernels/system.hpp"
#include "ukb/models/all.hpp"

namespace ukb {

/// Thrown when a backend cannot run here (no CUDA build, no device, a
/// scalar type or a model the backend does not support).
struct BackendUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace cuda {

/// Evaluates every system of a host batch on the GPU (upload, one thread per
/// system, download). Returns the number of systems whose status is not ok.
/// Throws BackendUnavailable without a CUDA build or device.
template <Model Mo>
long evaluate_batch(const BatchView<Mo>& v, typename Mo::Scalar rank_rtol, int block);

/// Integrates every system of a host batch on the GPU with the shared
/// kernels::IntegrateBody (upload, one thread per system, download of the
/// state, status and run monitors). Throws BackendUnavailable without a CUDA
/// build or device.
template <Model Mo>
void integrate_batch(const BatchView<Mo>& v, const kernels::RunSettings<typename Mo::Scalar>& s,
                     int block);
}  // namespace cuda
}  // namespace ukb

/// Applies X to every built-in model type, in double and in float.
#define UKB_FOR_EACH_BUILTIN(X)                                                         \
  X(::ukb::models::BeadOnRing<double>) X(::ukb::models::BeadOnRing<float>)              \
  X(::ukb::models::NonholonomicParticle<double>) X(::ukb::models::NonholonomicParticle<float>) \
  X(::ukb::models::InclineBlock<double>) X(::ukb::models::InclineBlock<float>)          \
  X(::ukb::models::PlanarChain3<double>) X(::ukb::models::PlanarChain3<float>)          \
  X(::ukb::models::PlanarChain6<double>) X(::ukb::models::PlanarChain6<float>)          \
  X(::ukb::models::PlanarChain12<double>) X(::ukb::models::PlanarChain12<float>)        \
  X(::ukb::models::RedundantPendulum<double>) X(::ukb::models::RedundantPendulum<float>) \
  X(::ukb::models::TwoLinkArm<double>) X(::ukb::models::TwoLinkArm<float>)

/// Explicit instantiation of the CUDA entry points for one model.
#define UKB_CUDA_INSTANTIATE(Mo)                                                          \
  template long ukb::cuda::evaluate_batch<Mo>(const ::ukb::BatchView<Mo>&,              \
                                              typename Mo::Scalar, int);                \
  template void ukb::cuda::integrate_batch<Mo>(                                          \
      const ::ukb::BatchView<Mo>&, const ::ukb::kernels::RunSettings<typename Mo::Scalar>&, int);
