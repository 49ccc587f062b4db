/// @file launch.hpp
/// @brief The indexing of a one-thread-per-system launch of the CUDA
///        backend, shared by the CUDA kernel and its CPU emulation, so that
///        the emulation executes the same index arithmetic and tail guard as
///        the GPU.
#pragma once

#include "ukb/config.hpp"

namespace ukb::cuda {

/// Grid of `grid` blocks of `block` threads covering N systems.
struct LaunchConfig {
  int grid = 0;
  int block = 0;
};

/// The smallest grid of `block`-thread blocks that covers N systems.
UKB_HD inline LaunchConfig launch_config(int N, int block) {
  return {(N + block - 1) / block, block};
}

/// What thread `thread` of block `block_idx` does: system
/// i = block_idx * block_dim + thread, if it exists (the tail of the last
/// block is idle when N is not a multiple of the block size).
template <class Body>
UKB_HD inline void kernel_thread(int block_idx, int block_dim, int thread, int N, const Body& body) {
  const long i = static_cast<long>(block_idx) * block_dim + thread;
  if (i < N) body(static_cast<int>(i));
}

/// Runs every thread of a launch sequentially on the CPU.
template <class Body>
inline void emulate_launch(LaunchConfig c, int N, const Body& body) {
  for (int b = 0; b < c.grid; ++b)
    for (int t = 0; t < c.block; ++t) kernel_thread(b, c.block, t, N, body);
}

}  // namespace ukb::cuda
