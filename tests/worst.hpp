// The largest of a test's errors, kept so that a NaN error fails its bound.
#pragma once

namespace ukb::test {

/// worst = max(worst, d), except that a NaN d is kept: std::max(worst, NaN)
/// is worst, so a NaN result would pass the `EXPECT_LT(worst, tol)` after
/// the loop; `!(d <= worst)` is true for NaN, and NaN then fails that bound.
inline void worst_of(double& worst, double d) {
  if (!(d <= worst)) worst = d;
}

}  // namespace ukb::test
