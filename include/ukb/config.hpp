/// @file config.hpp
/// @brief Compile-time configuration shared by host and device code.
///
/// `UKB_HD` marks functions that run per system on every backend: it expands
/// to `__host__ __device__` under nvcc and to nothing elsewhere, so the same
/// source compiles with g++ (CPU backends, tests) and nvcc (CUDA backend).
/// This header includes no CUDA header and may be used everywhere.
#pragma once

#if defined(__CUDACC__)
#define UKB_HD __host__ __device__
#else
#define UKB_HD
#endif

/// `UKB_INLINE` asks for a small kernel helper to be inlined even into a
/// large caller (g++ and clang otherwise give up on the SIMD packs' deep
/// operator templates and call them, which costs more than the work).
#if defined(__CUDACC__)
#define UKB_INLINE __forceinline__
#elif defined(__GNUC__)
#define UKB_INLINE [[gnu::always_inline]] inline
#else
#define UKB_INLINE inline
#endif

/// `UKB_NOINLINE` keeps a function out of line (one copy, called).
#if defined(__CUDACC__)
#define UKB_NOINLINE __noinline__
#elif defined(__GNUC__)
#define UKB_NOINLINE [[gnu::noinline]]
#else
#define UKB_NOINLINE
#endif

namespace ukb {

/// Library version, also printed by `ukb --version` and written to outputs.
inline constexpr const char* version = "0.1.0";


/// Entry i of a constant table (a constexpr std::array local to the
/// caller) without the table in memory: in device code a runtime index
/// into a local array puts the array on the thread's stack, stored at every
/// call; a chain of selects on the table's constants keeps it in the
/// instructions (and folds away where i is known).
template <class Table>
UKB_HD constexpr auto table_at(const Table& t, int i) {
  auto r = t[0];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int k = 1; k < static_cast<int>(t.size()); ++k) r = k == i ? t[static_cast<decltype(t.size())>(k)] : r;
  return r;
}

}  // namespace ukb
