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

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ukb/backend.hpp"
#include "ukb/cuda.hpp"
#include "ukb/cuda/launch.hpp"
#include "ukb/cuda/team.cuh"

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

// The team route (kernels/ukb/kernels/team_run.hpp): team k of the block
// (Body::team_threads threads, a tile of a warp) runs system team_system(...) with
// its share of the block's dynamic shared memory.
extern __shared__ __align__(16) unsigned char team_shared[];
template <class Body>
__global__ void team_kernel(Body body, int N, int teams, unsigned stride) {
  constexpr int S = Body::team_threads;
  const int k = static_cast<int>(threadIdx.x) / S;
  const int i = ::ukb::cuda::team_system(blockIdx.x, teams, k, N);
  if (i < 0) return;  // the whole team
  body(::ukb::cuda::this_tile<S>(), *reinterpret_cast<typename Body::Shared*>(team_shared + std::size_t(k) * stride),
       i);
}

// sizeof(X) in device code, which may differ from the host's (uk.hpp's
// UkWorkspace: a float pseudo-inverse holds a double route on the host).
template <class X>
__global__ void sizeof_kernel(unsigned* out) {
  *out = sizeof(X);
}
template <class X>
unsigned device_sizeof() {
  unsigned* d = nullptr;
  check(cudaMalloc(&d, sizeof(unsigned)), "device allocation");
  sizeof_kernel<X><<<1, 1>>>(d);
  cudaError_t e = cudaGetLastError();
  unsigned h = 0;
  if (e == cudaSuccess) e = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
  cudaFree(d);
  check(e, "device query");
  if (h == 0) throw BackendUnavailable("cuda backend: the device query of a team's shared memory gave 0 bytes");
  return h;
}

// Launches team_kernel<Body> for N systems in blocks of `block` threads
// (0: the occupancy API's block of the highest occupancy for the kernel's
// registers and shared memory, spread over every multiprocessor for small
// N); false, launching nothing, where one system's shared memory exceeds
// what a block may have (the caller runs the thread route).
template <class Body>
bool launch_team_on_device(int block, int N, const Body& body) {
  constexpr int S = Body::team_threads;
  static_assert(alignof(typename Body::Shared) <= 16, "a team's shared memory is aligned to 16 B");
  // The kernel's geometry on the current device (each device its own: the
  // kernel's shared memory attribute is set per device).
  struct Geometry {
    unsigned stride = 0;  // one team's shared memory in bytes, a multiple of 16
    int most = 0;         // a block's largest dynamic shared memory for this kernel
    int best = 0;         // the block of the highest occupancy
    int sms = 0;
  };
  int device = 0;
  check(cudaGetDevice(&device), "device query");
  static std::mutex mutex;
  static std::map<int, Geometry> geometries;
  Geometry g;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto known = geometries.find(device);
    if (known != geometries.end()) {
      g = known->second;
    } else {
      g.stride = (device_sizeof<typename Body::Shared>() + 15u) / 16u * 16u;
      int optin = 0;
      check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "device query");
      check(cudaDeviceGetAttribute(&g.sms, cudaDevAttrMultiProcessorCount, device), "device query");
      cudaFuncAttributes a{};
      check(cudaFuncGetAttributes(&a, team_kernel<Body>), "kernel query");
      g.most = optin - static_cast<int>(a.sharedSizeBytes);
      if (g.stride <= static_cast<unsigned>(g.most)) {
        check(cudaFuncSetAttribute(team_kernel<Body>, cudaFuncAttributeMaxDynamicSharedMemorySize, g.most),
              "kernel attribute");
        int min_grid = 0;
        const unsigned stride = g.stride;
        check(cudaOccupancyMaxPotentialBlockSizeVariableSMem(
                  &min_grid, &g.best, team_kernel<Body>,
                  [stride](int threads) { return std::size_t(threads / S) * stride; }),
              "occupancy query");
      }
      geometries[device] = g;
    }
  }
  if (g.stride > static_cast<unsigned>(g.most)) return false;
  if (N <= 0) return true;
  if (block <= 0) {
    const long long threads = static_cast<long long>(N) * S;
    block = ::ukb::cuda::occupancy_block(threads < (1LL << 30) ? static_cast<int>(threads) : (1 << 30), g.best, g.sms);
  }
  ::ukb::cuda::TeamLaunchConfig c = ::ukb::cuda::team_launch_config(N, block, S);
  const int fit = g.most / static_cast<int>(g.stride);  // teams whose shared memory a block holds (>= 1)
  if (c.teams > fit) c = ::ukb::cuda::team_launch_config(N, fit * S, S);
  team_kernel<Body><<<c.grid, c.teams * S, std::size_t(c.teams) * g.stride>>>(body, N, c.teams, g.stride);
  check(cudaGetLastError(), "kernel launch");
  check(cudaDeviceSynchronize(), "kernel execution");
  return true;
}

inline void require_device() {
  std::string why;
  if (::ukb::cuda::device_count(&why) == 0) throw BackendUnavailable("the cuda backend is not available: " + why);
}

}  // namespace ukb::cuda_impl

#define UKB_LAUNCH(config, N, body) ::ukb::cuda_impl::launch_on_device(config, N, body)
#define UKB_LAUNCH_TEAM(block, N, body) ::ukb::cuda_impl::launch_team_on_device(block, N, body)
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
