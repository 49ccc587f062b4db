// Whether this test build runs under the sanitizers (tests/CMakeLists.txt
// defines UKB_TEST_SANITIZED to 0 or 1 for every test executable).
#pragma once

#ifndef UKB_TEST_SANITIZED
#error "UKB_TEST_SANITIZED is defined (0 or 1) by tests/CMakeLists.txt"
#endif

namespace ukb::test {

/// True in the sanitizer build (scripts/test.sh: build-san/, where the code
/// runs 5-20x slower). There the longest numeric tests integrate fewer
/// steps: the same code paths and the same assertions (a memory error or
/// undefined behaviour shows in the first steps), a shorter run.
inline constexpr bool sanitized = UKB_TEST_SANITIZED;

/// `full` in the main build; `full / divisor` (at least 1) under the sanitizers.
constexpr long sanitized_shorter(long full, long divisor) {
  return sanitized ? (full / divisor > 0 ? full / divisor : 1) : full;
}

}  // namespace ukb::test
