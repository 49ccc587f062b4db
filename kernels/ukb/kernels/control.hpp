/// @file control.hpp
/// @brief Step-size controllers: which step a system takes next (fixed
///        steps for RK4; for Dormand–Prince the step its error control asks
///        for, dopri5.hpp's dopri5_control, fitted to t_end). The steppers
///        (rk4.hpp, dopri5.hpp) take it; the runs (fixed_run.hpp,
///        adaptive_run.hpp) decide what happens around it.
#pragma once

#include <cmath>
#include <limits>

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
    if (!before_end(t, s)) return false;
    const T remaining = s.t_end - t;
    h = remaining < s.dt * T(1 + policy::end_slack) ? remaining : s.dt;
    return t + h > t;
  }
};

/// The step an adaptive run takes from time t where its error control asks
/// for `step` (at most dt_max): the rest of the way to a finite t_end where
/// `step` reaches within 1 % of it and the rest is at most dt_max (the last
/// step lands on t_end), else `step`; its size h and end time t1. False
/// where `step` is below dt_min, or so small against t that it would not
/// advance it by policy::min_step_ulps units in the last place: the system
/// then fails (failed_step_size).
struct AdaptiveStep {
  template <class T>
  UKB_HD static bool next(T t, T step, const RunSettings<T>& s, T& h, T& t1) {
    using std::abs;
    const T remaining = s.t_end - t;
    const T floor = T(policy::min_step_ulps) * std::numeric_limits<T>::epsilon() * abs(t);
    if (remaining - remaining == T(0) && step * T(1.01) >= remaining && remaining <= s.control.dt_max) {
      h = remaining;  // never longer than dt_max
      t1 = s.t_end;
      return true;
    }
    if (step < s.control.dt_min || !(step > floor)) return false;
    h = step;
    t1 = t + step;
    return true;
  }
};

}  // namespace ukb::kernels
