/// @file common.hpp
/// @brief Small building blocks shared by the built-in models.
#pragma once

#include <cmath>

#include "ukb/config.hpp"

namespace ukb::models::detail {

/// M = m I (n x n, row-major).
template <int N, class T>
UKB_HD inline void scalar_mass(T mass, T* M) {
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) M[i * N + j] = i == j ? mass : T(0);
}

/// Coulomb sliding friction C = -mu |Qc_ideal| v/|v| (C = 0 when v = 0): the
/// friction force opposes the sliding velocity v and its magnitude is mu
/// times the normal force, here the ideal constraint force Qc_ideal (N).
template <int N, class T>
UKB_HD inline void coulomb_sliding(const T* v, const T* Qc_ideal, T mu, T* C) {
  using std::sqrt;
  T v2 = T(0), n2 = T(0);
  for (int i = 0; i < N; ++i) {
    v2 += v[i] * v[i];
    n2 += Qc_ideal[i] * Qc_ideal[i];
  }
  const T speed = sqrt(v2);
  const T k = speed > T(0) ? -mu * sqrt(n2) / speed : T(0);
  for (int i = 0; i < N; ++i) C[i] = k * v[i];
}

/// Velocity-proportional damping C = -c v (N).
template <int N, class T>
UKB_HD inline void linear_damping(const T* v, T c, T* C) {
  for (int i = 0; i < N; ++i) C[i] = -c * v[i];
}

}  // namespace ukb::models::detail
