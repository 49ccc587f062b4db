#pragma once
#include <array>
#include "ukb/model.hpp"
template <class T>
struct Point {
  using Scalar = T;
  static constexpr const char* name = "point";
  static constexpr const char* summary = "a point on a line";
  static constexpr int n = 2;
  static constexpr int m = 1  // expect-error: expected
  static constexpr std::array<const char*, n> coords{"x", "y"};
};
UKB_MODEL(Point)
