#pragma once
#include <array>
#include "ukb/model.hpp"
template <class T>
struct Point {
  using Scalar = T;
  static constexpr const char* name = "point";
  static constexpr const char* summary = "a point on a line";
  static constexpr int n = 0;
  static constexpr int m = 1;
  static constexpr std::array<const char*, 0> coords{};
  struct Params { T k = T(1); };
  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) { f("k", p.k, "stiffness"); }
  UKB_HD static void mass(const T*, T, const Params&, T*) {}
  UKB_HD static void force(const T*, const T*, T, const Params&, T*) {}
  UKB_HD static void constraints(const T*, const T*, T, const Params&, T*, T* b) { b[0] = T(0); }
  UKB_HD static void nonideal(const T*, const T*, T, const Params&, const T*, const T*, T*) {}
};
UKB_MODEL(Point)  // expect-error: n (the number of coordinates) must be >= 1
