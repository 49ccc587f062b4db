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

/// The smallest grid of `block`-thread blocks that covers N systems; with
/// block 0 (EngineOptions::cuda_block's "from the occupancy") none yet:
/// the launcher chooses the block (occupancy_block) and then the grid.
UKB_HD inline LaunchConfig launch_config(int N, int block) {
  if (block <= 0) return {0, 0};
  return {(N + block - 1) / block, block};
}

/// The block for N systems of a kernel whose highest occupancy comes with
/// blocks of `best` threads on a device of `sms` multiprocessors: `best`,
/// or, where N systems would not give every multiprocessor a block of that
/// size, N / sms rounded down to whole warps of 32 threads (at least one),
/// so that a small ensemble is spread over the whole device instead of
/// crowding a few of its multiprocessors.
inline int occupancy_block(int N, int best, int sms) {
  if (best < 32 || sms < 1) return best > 0 ? best : 128;
  const long per = (static_cast<long>(N) + sms - 1) / sms;
  const long spread = per / 32 * 32;
  return static_cast<int>(spread < best ? (spread < 32 ? 32 : spread) : best);
}

/// What thread `thread` of block `block_idx` does: system
/// i = block_idx * block_dim + thread, if it exists (the tail of the last
/// block is idle when N is not a multiple of the block size).
template <class Body>
UKB_HD inline void kernel_thread(int block_idx, int block_dim, int thread, int N, const Body& body) {
  const long i = static_cast<long>(block_idx) * block_dim + thread;
  if (i < N) body(static_cast<int>(i));
}

/// A launch of teams of `size` threads (one system per team, the team
/// route of kernels/ukb/kernels/team_run.hpp): `grid` blocks of `teams`
/// teams each, block `teams * size` threads.
struct TeamLaunchConfig {
  int grid = 0;
  int teams = 0;
  int size = 1;
};

/// The smallest grid of blocks of `block` threads, in teams of `size`,
/// that covers N systems: block / size teams a block (at least one); with
/// block 0 none yet (the launcher chooses, as launch_config).
UKB_HD inline TeamLaunchConfig team_launch_config(int N, int block, int size) {
  if (block <= 0) return {0, 0, size};
  const int teams = block >= size ? block / size : 1;
  return {static_cast<int>((static_cast<long>(N) + teams - 1) / teams), teams, size};
}

/// The system of team `team` of block `block_idx` (teams per block), or
/// -1 past N (the whole team is then idle).
UKB_HD inline int team_system(int block_idx, int teams, int team, int N) {
  const long i = static_cast<long>(block_idx) * teams + team;
  return i < N ? static_cast<int>(i) : -1;
}

/// Runs every thread of a launch sequentially on the CPU (a block chosen
/// from the occupancy: as a device of 132 multiprocessors whose best block
/// is 128 threads would).
template <class Body>
inline void emulate_launch(LaunchConfig c, int N, const Body& body) {
  if (c.block <= 0) c = launch_config(N, occupancy_block(N, 128, 132));
  for (int b = 0; b < c.grid; ++b)
    for (int t = 0; t < c.block; ++t) kernel_thread(b, c.block, t, N, body);
}

}  // namespace ukb::cuda
