#pragma once
#include <array>
#include "ukb/model.hpp"
template <class T>
struct Point {
  using Scalar = T;
  static constexpr const char* name = "point";
  static constexpr const char* summary = "a point on a line";
  static constexpr int n = 2;
  static constexpr int m = 1;
  static constexpr std::array<const char*, n> coords{"x", "y"};
  struct Params { T k = T(1); };
  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) { f("k", p.k, "stiffness"); }
  UKB_HD static void mass(const T*, T, const Params&, T* M) { M[0] = M[3] = T(1), M[1] = M[2] = T(0); }
  UKB_HD static void force(const T* q, const T*, T, const Params& p, T* Q) { Q[0] = -p.k * q[0], Q[1] = T(0); }
  UKB_HD static void constraints(const T*, const T*, T, const Params&, T* A, T* b) { A[0] = T(0), A[1] = T(1), b[0] = T(0); }
  UKB_HD static void nonideal(const T*, const T*, T, const Params&, const T*, const T*, T* C) { C[0] = C[1] = T(0); }
  // observable_names without observables: refused, naming both
  static constexpr std::array<const char*, 1> observable_names{"stretch"};
};
UKB_MODEL(Point)  // expect-error: observables need both
