// Included ahead of every C++ source file of ukb's own targets in a
// sanitizer build (UKB_SANITIZE; CMakeLists.txt, ukb_sanitizer_cxx_flags), and
// of the plugins compiled from model files there (toolchain_record.cmake):
// Eigen's own checks of indices and sizes (eigen_assert) are on, although
// NDEBUG is defined. Eigen's code is not instrumented by the sanitizers
// (sanitize_ignore.txt), so a coefficient of a matrix read past its end is
// caught here, and so is one inside its storage but outside its rows or
// columns, which AddressSanitizer cannot see.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <sanitizer/common_interface_defs.h>

/// Reports a failed Eigen check with the stack that led to it, then aborts.
[[noreturn]] inline void ukb_eigen_check_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "Eigen check failed: %s (%s:%d)\n", what, file, line);
  __sanitizer_print_stack_trace();
  std::abort();
}

#define eigen_assert(x) ((x) ? static_cast<void>(0) : ::ukb_eigen_check_failed(#x, __FILE__, __LINE__))
