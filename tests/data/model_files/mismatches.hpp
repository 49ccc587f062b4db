// Two models that contradict their own declarations; `ukb run` and `ukb
// accel` must refuse each (the cpu and cuda backends would integrate
// another system than the reference). One file, so that the test compiles
// one plugin.
//  - DiagonalSlider: mass_diagonal does not give the diagonal of mass:
//    M = diag(m, 2 m), mass_diagonal (m, m).
//  - ColumnsSlider: A has a nonzero outside the columns its
//    constraint_columns declare: row 0 is (x, 1) but declared [0, 1), so
//    A[0][1] = 1 lies outside (the cpu and cuda backends would drop it).
//  - CommaSlider: a coordinate named "y,1", which would shift results.csv's
//    header against its rows: refused when the model is loaded.
//  - ThrowingSlider: its force throws std::domain_error beyond x = edge:
//    run and accel end with the model's message, exit 2, never with
//    std::terminate or an "internal error".
#pragma once
#include <array>
#include <stdexcept>
#include "ukb/model.hpp"
template <class T>
struct DiagonalSlider {
  using Scalar = T;
  static constexpr const char* name = "diagonal_slider";
  static constexpr const char* summary = "a point on the line y = 0";
  static constexpr int n = 2;
  static constexpr int m = 1;
  static constexpr std::array<const char*, n> coords{"x", "y"};
  struct Params { T m = T(1); };
  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) { f("m", p.m, "mass (> 0)"); }
  UKB_HD static void mass(const T*, T, const Params& p, T* M) { M[0] = p.m, M[3] = T(2) * p.m, M[1] = M[2] = T(0); }
  UKB_HD static void mass_diagonal(const T*, T, const Params& p, T* d) { d[0] = d[1] = p.m; }
  UKB_HD static void force(const T*, const T*, T, const Params&, T* Q) { Q[0] = T(1), Q[1] = T(0); }
  UKB_HD static void constraints(const T*, const T*, T, const Params&, T* A, T* b) { A[0] = T(0), A[1] = T(1), b[0] = T(0); }
  UKB_HD static void nonideal(const T*, const T*, T, const Params&, const T*, const T*, T* C) { C[0] = C[1] = T(0); }
};
template <class T>
struct ColumnsSlider {
  using Scalar = T;
  static constexpr const char* name = "columns_slider";
  static constexpr const char* summary = "a point under x x'' + y'' = 0";
  static constexpr int n = 2;
  static constexpr int m = 1;
  static constexpr std::array<const char*, n> coords{"x", "y"};
  struct Params { T m = T(1); };
  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) { f("m", p.m, "mass (> 0)"); }
  UKB_HD static void mass(const T*, T, const Params& p, T* M) { M[0] = p.m, M[3] = p.m, M[1] = M[2] = T(0); }
  UKB_HD static void mass_diagonal(const T*, T, const Params& p, T* d) { d[0] = d[1] = p.m; }
  static constexpr std::array<ukb::ColumnRange, m> constraint_columns{{{0, 1}}};
  UKB_HD static void force(const T*, const T*, T, const Params&, T* Q) { Q[0] = T(1), Q[1] = T(0); }
  UKB_HD static void constraints(const T* q, const T*, T, const Params&, T* A, T* b) { A[0] = q[0], A[1] = T(1), b[0] = T(0); }
  UKB_HD static void nonideal(const T*, const T*, T, const Params&, const T*, const T*, T* C) { C[0] = C[1] = T(0); }
};
template <class T>
struct CommaSlider : ColumnsSlider<T> {
  static constexpr const char* name = "comma_slider";
  static constexpr std::array<const char*, 2> coords{"x", "y,1"};
};
template <class T>
struct ThrowingSlider {
  using Scalar = T;
  static constexpr const char* name = "throwing_slider";
  static constexpr const char* summary = "a point on the line y = 0 that throws beyond x = 0.25";
  static constexpr int n = 2;
  static constexpr int m = 1;
  static constexpr std::array<const char*, n> coords{"x", "y"};
  struct Params { T m = T(1); };
  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) { f("m", p.m, "mass (> 0)"); }
  UKB_HD static void mass(const T*, T, const Params& p, T* M) { M[0] = p.m, M[3] = p.m, M[1] = M[2] = T(0); }
  UKB_HD static void force(const T* q, const T*, T, const Params&, T* Q) {
    if (q[0] > T(0.25)) throw std::domain_error("x is beyond the edge of the table");
    Q[0] = T(0), Q[1] = T(0);
  }
  UKB_HD static void constraints(const T*, const T*, T, const Params&, T* A, T* b) { A[0] = T(0), A[1] = T(1), b[0] = T(0); }
  UKB_HD static void nonideal(const T*, const T*, T, const Params&, const T*, const T*, T* C) { C[0] = C[1] = T(0); }
};
UKB_MODEL(DiagonalSlider)
UKB_MODEL(ColumnsSlider)
UKB_MODEL(CommaSlider)
UKB_MODEL(ThrowingSlider)
