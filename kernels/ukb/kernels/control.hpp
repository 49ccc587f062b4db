/// @file control.hpp
/// @brief Step-size controllers: which step a system takes next. The
///        stepper (rk4.hpp) takes it; the run loop (run.hpp) decides what
///        happens around it.
#pragma once

#include "ukb/config.hpp"
#include "ukb/policy.hpp"
#include "ukb/settings.hpp"

namespace ukb::kernels {

/// Fixed steps of dt, the last one shortened to land on t_end exactly.
struct FixedStep {
  /// The size h of the next step from time t; false when there is none:
  /// t_end is reached (within dt * policy::end_slack), or t is so large
  /// that a step of dt no longer advances it (the system stops there rather
  /// than loop).
  template <class T>
  UKB_HD static bool next(T t, const RunSettings<T>& s, T& h) {
    const T remaining = s.t_end - t;
    if (!(remaining > s.dt * T(policy::end_slack))) return false;
    h = remaining < s.dt * T(1 + policy::end_slack) ? remaining : s.dt;
    return t + h > t;
  }
};

}  // namespace ukb::kernels
