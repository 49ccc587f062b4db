/// @file backend.cuh
/// @brief The cuda backend's entry points (include/ukb/backend.hpp) for
///        nvcc: the launch of a body on the device, the host logic of
///        engine_impl.hpp, and the definitions of ukb::backends::cuda.
///
/// Included by engine.cu, which instantiates the built-in models; a model of
/// one's own is instantiated by a .cu file that includes this header and
/// says `UKB_INSTANTIATE_CUDA(MyModel<double>)` (docs/adding-a-model.md).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "ukb/backend.hpp"
#include "ukb/cuda.hpp"
#include "ukb/cuda/launch.hpp"

namespace ukb::cuda_impl {

template <class Body>
__global__ void body_kernel(Body body, int N) {
  ::ukb::cuda::kernel_thread(blockIdx.x, blockDim.x, threadIdx.x, N, body);
}

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw BackendUnavailable(std::string("cuda backend: ") + what + ": " + cudaGetErrorString(err));
}

// The block of body_kernel<Body> for N systems where none is given
// (EngineOptions::cuda_block 0): the occupancy API's block of the highest
// occupancy for the kernel's registers, queried once per kernel, spread
// over every multiprocessor for small N (cuda::occupancy_block).
template <class Body>
int block_for(int N) {
  static const int best = [] {
    int min_grid = 0, block = 0;
    check(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, body_kernel<Body>, 0, 0), "occupancy query");
    return block;
  }();
  static const int sms = [] {
    int device = 0, count = 0;
    check(cudaGetDevice(&device), "device query");
    check(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device), "device query");
    return count;
  }();
  return ::ukb::cuda::occupancy_block(N, best, sms);
}

template <class Body>
void launch_on_device(::ukb::cuda::LaunchConfig c, int N, const Body& body) {
  if (c.block <= 0 && N > 0) c = ::ukb::cuda::launch_config(N, block_for<Body>(N));
  if (c.grid > 0) body_kernel<<<c.grid, c.block>>>(body, N);
  check(cudaGetLastError(), "kernel launch");
  check(cudaDeviceSynchronize(), "kernel execution");
}

inline void require_device() {
  std::string why;
  if (::ukb::cuda::device_count(&why) == 0) throw BackendUnavailable("the cuda backend is not available: " + why);
}

}  // namespace ukb::cuda_impl

#define UKB_LAUNCH(config, N, body) ::ukb::cuda_impl::launch_on_device(config, N, body)
#include "ukb/cuda/engine_impl.hpp"

namespace ukb::backends::cuda {

template <Model Mo>
void evaluate(const BatchView<Mo>& v, const EvalSettings<typename Mo::Scalar>& s, const EngineOptions& o) {
  cuda_impl::require_device();
  cuda_impl::evaluate<Mo>(v, s, o);
}

template <Model Mo>
void integrate(const BatchView<Mo>& v, const RunSettings<typename Mo::Scalar>& s, const EngineOptions& o) {
  cuda_impl::require_device();
  cuda_impl::integrate<Mo>(v, s, o);
}

template <Model Mo>
std::unique_ptr<DeviceMirror<Mo>> make_mirror(int N) {
  cuda_impl::require_device();
  return std::make_unique<cuda_impl::Mirror<Mo>>(N);
}

}  // namespace ukb::backends::cuda
