// The CUDA backend: one thread per system running the shared kernel bodies.
// Only the launch below is CUDA-specific; engine_impl.hpp (device memory,
// upload, download, reductions) is also compiled with g++ and run on the CPU
// by the test suite (tests/cuda_emulation.cpp).
#include <cuda_runtime.h>

#include <string>

#include "ukb/cuda.hpp"
#include "ukb/cuda_engine.hpp"
#include "ukb/kernels/launch.hpp"

namespace ukb::cuda_impl {

template <class Body>
__global__ void body_kernel(Body body, int N) {
  kernels::kernel_thread(blockIdx.x, blockDim.x, threadIdx.x, N, body);
}

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw BackendUnavailable(std::string("cuda backend: ") + what + ": " + cudaGetErrorString(err));
}

template <class Body>
void launch_on_device(kernels::LaunchConfig c, int N, const Body& body) {
  if (c.grid > 0) body_kernel<<<c.grid, c.block>>>(body, N);
  check(cudaGetLastError(), "kernel launch");
  check(cudaDeviceSynchronize(), "kernel execution");
}

}  // namespace ukb::cuda_impl

#define UKB_LAUNCH(config, N, body) ::ukb::cuda_impl::launch_on_device(config, N, body)
#include "engine_impl.hpp"

namespace ukb::cuda {

namespace {
void require_device() {
  std::string why;
  if (device_count(&why) == 0) throw BackendUnavailable("the cuda backend is not available: " + why);
}
}  // namespace

template <Model Mo>
long evaluate_batch(const BatchView<Mo>& v, typename Mo::Scalar rank_rtol, int block) {
  require_device();
  return cuda_impl::evaluate<Mo>(v, rank_rtol, block);
}

template <Model Mo>
void integrate_batch(const BatchView<Mo>& v, const kernels::RunSettings<typename Mo::Scalar>& s,
                     int block) {
  require_device();
  cuda_impl::integrate<Mo>(v, s, block);
}

}  // namespace ukb::cuda

UKB_FOR_EACH_BUILTIN(UKB_CUDA_INSTANTIATE)
