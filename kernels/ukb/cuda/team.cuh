/// @file cuda/team.cuh
/// @brief A team of team.hpp on the GPU: a tile of S threads of a warp
///        (cooperative groups), its sync, vote and shuffles the tile's.
#pragma once

#include <cooperative_groups.h>

// The team route's lead and members reach the same syncs and votes from
// different places in the code: independent thread scheduling (sm_70 on).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "ukb's teams of threads (cuda/team.cuh) need sm_70 or later: set UKB_CUDA_ARCHITECTURES"
#endif

namespace ukb::cuda {

/// S threads of one warp (S a power of 2 up to 32) that own one system.
template <int S>
struct TileTeam {
  static_assert(S >= 1 && S <= 32 && (S & (S - 1)) == 0, "a tile is 1, 2, 4, 8, 16 or 32 threads");
  cooperative_groups::thread_block_tile<S> tile;
  __device__ int rank() const { return static_cast<int>(tile.thread_rank()); }
  __device__ static constexpr int size() { return S; }
  __device__ void sync() const { tile.sync(); }
  __device__ bool all(bool m) const { return tile.all(m); }
  /// The members' largest x by a butterfly of shuffles: every member ends
  /// with the same value (a NaN only where every x is NaN).
  template <class T>
  __device__ T max(T x) const {
    for (int o = S / 2; o > 0; o /= 2) {
      const T v = tile.shfl_xor(x, o);
      x = (v > x || x != x) ? v : x;
    }
    return x;
  }
};

/// The tile of S threads that the calling thread belongs to.
template <int S>
__device__ TileTeam<S> this_tile() {
  return {cooperative_groups::tiled_partition<S>(cooperative_groups::this_thread_block())};
}

}  // namespace ukb::cuda
