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

}  // namespace ukb
