// Included ahead of every source file of the sanitizer build (UKB_SANITIZE;
// CMakeLists.txt, ukb_target_options): Eigen's own checks of indices and
// sizes (eigen_assert) are on there, although NDEBUG is defined. Eigen's
// code is not instrumented by the sanitizers (sanitize_ignore.txt), so a
// coefficient read past a matrix's end from ukb's code is caught here, and
// so is one inside the matrix's storage but outside its rows or columns,
// which AddressSanitizer cannot see.
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
