/// @file settings.hpp
/// @brief What a backend receives: the settings of one evaluation or
///        integration call, resolved from the user's options (options.hpp)
///        with every default filled in, in the model's scalar type. Plain
///        structs usable in device code; shared by every backend, the
///        reference included.
#pragma once

#include <cstdint>
#include <limits>

#include "ukb/config.hpp"
#include "ukb/policy.hpp"
#include "ukb/status.hpp"

namespace ukb {

/// Baumgarte stabilisation of the constraint rows (docs/design.md section 1 with
/// a corrected right-hand side): with the rows' constraints of the model
/// (`constraint_rows`),
///     b_i <- b_i - 2 alpha phi_i' - beta^2 phi_i   (holonomic rows),
///     b_i <- b_i - gamma psi_i                      (nonholonomic rows),
/// so that a drifted constraint obeys phi'' + 2 alpha phi' + beta^2 phi = 0
/// (psi' + gamma psi = 0) instead of phi'' = 0. alpha, beta and gamma are
/// rates (1/time); alpha = beta is critical damping.
template <class T>
struct Baumgarte {
  bool on = false;  ///< off: b is used as the model gives it
  T alpha{};        ///< damping rate of holonomic rows (1/time, >= 0)
  T beta{};         ///< stiffness rate of holonomic rows (1/time, >= 0)
  T gamma{};        ///< decay rate of nonholonomic rows (1/time, >= 0)
};

/// The fastest rate of a Baumgarte-stabilised drift: its equation
/// phi'' + 2 alpha phi' + beta^2 phi = 0 has roots of size at most
/// max(2 alpha, beta); psi' + gamma psi = 0 decays at gamma.
template <class T>
UKB_HD constexpr T fastest_rate(const Baumgarte<T>& b) {
  const T x = T(2) * b.alpha > b.beta ? T(2) * b.alpha : b.beta;
  return x > b.gamma ? x : b.gamma;
}

/// Projection onto the constraint manifold after every step (off when `on`
/// is false).
template <class T>
struct Projection {
  bool on = false;
  T tol{};           ///< relative: stop when |dx|_inf <= tol |x|_inf (x = q or q')
  int max_iter = 0;  ///< Gauss–Newton iterations at most, per level (>= 1)
};

/// How every evaluation is done.
template <class T>
struct EvalSettings {
  T rank_rtol = policy::default_rank_rtol<T>();  ///< relative rank tolerance of B^+
  Baumgarte<T> baumgarte{};                      ///< Baumgarte-corrected b (off by default)
};

/// The integration method.
enum class Method : int {
  rk4 = 0,     ///< classical fourth-order Runge–Kutta with a fixed step
  dopri5 = 1,  ///< Dormand–Prince 5(4): adaptive steps per system, error control, dense output
};

/// The error control of adaptive steps (Method::dopri5).
template <class T>
struct ErrorControl {
  T rtol{};            ///< relative tolerance (> 0)
  /// Absolute tolerances: 1 value for every component, n (q_j and q'_j
  /// alike) or 2n (q, then q'); at most policy::max_atol.
  int atol_count = 1;
  T atol[policy::max_atol]{};
  T dt_min{};          ///< smallest step the control may ask for (>= 0)
  T dt_max{};          ///< largest step (> 0, +infinity: none)
  T safety = T(policy::step_safety);  ///< the step-size control's safety factor, in (0, 1]

  /// The absolute tolerance of component k (k < n: q_k; else q'_{k-n}).
  /// The host never sets atol_count = 2n above policy::max_atol (options.hpp,
  /// the config); the index is bounded for the compiler all the same, which
  /// otherwise sees an access past the array in the loops over 2n > 128
  /// components (planar_chain_48: g++ 12, -Waggressive-loop-optimizations).
  UKB_HD T atol_of(int k, int n) const {
    const int i = atol_count == 1 ? 0 : atol_count == n ? (k < n ? k : k - n) : k;
    return atol[i < policy::max_atol ? i : 0];
  }
};

/// What one integration call does for every system (kernels/ukb/kernels/run.hpp).
template <class T>
struct RunSettings {
  T dt{};               ///< rk4: the step size (> 0); dopri5: the first trial step (0: chosen automatically)
  T t_end{};            ///< end time; +infinity for none
  long max_steps = 0;   ///< limit on the accepted steps since set_state
  long budget = 0;      ///< at most this many steps per system in this call
  T event_tol{};        ///< events: width of the final time bracket (> 0)
  T rank_rtol{};        ///< relative rank tolerance of the pseudo-inverse
  bool events = false;  ///< locate events and call the model's handler
  bool monitor = false; ///< track the model's constraint residuals
  Baumgarte<T> baumgarte{};    ///< Baumgarte stabilisation in every evaluation
  Projection<T> projection{};  ///< projection onto the manifold after every step
  /// A step after which a constraint residual (the model's `residual`, either
  /// level) exceeds this, or is NaN, fails with failed_residual; +infinity:
  /// no limit.
  T residual_limit = std::numeric_limits<T>::infinity();
  /// A step with an evaluation of another rank(B) fails with failed_rank;
  /// -1: no check.
  int expected_rank = -1;
  Method method = Method::rk4;  ///< the stepper and its controller
  /// dopri5: rtol, atol, dt_min, dt_max.
  ErrorControl<T> control{};
  /// A call also ends for a system once its time has reached t_pause
  /// (after the step that reaches it: the steps are not changed); +infinity:
  /// never. Recording at fixed output times (the dense output) uses it.
  T t_pause = std::numeric_limits<T>::infinity();

  /// The settings of every evaluation of a step.
  UKB_HD EvalSettings<T> eval() const { return {rank_rtol, baumgarte}; }
};

/// Whether time t is still before t_end: more than dt * policy::end_slack
/// short of it (a time within that slack has reached t_end; a NaN time has
/// not work left either). The kernels' one rule (the reference backend
/// writes its own).
template <class T>
UKB_HD inline bool before_end(T t, const RunSettings<T>& s) {
  return s.t_end - t > s.dt * T(policy::end_slack);
}

/// True while a system still has work: status ok, end time not reached
/// (before_end) and fewer than max_steps steps taken.
template <class T>
UKB_HD inline bool run_active(std::int32_t status, T t, std::int64_t steps, const RunSettings<T>& s) {
  return status == static_cast<std::int32_t>(Status::ok) && before_end(t, s) && steps < s.max_steps;
}

/// What an integration call leaves behind (every integrating entry point
/// returns it).
struct Tally {
  long active = 0;  ///< systems with work left: status ok, t_end not reached, max_steps not taken
  long failed = 0;  ///< systems whose status is failed_*
  /// The `steps` field summed over every system: the steps taken since each
  /// system's set_state (on cuda reduced on the device, so that a caller
  /// counting the progress of a run need not bring the ensemble back).
  std::int64_t steps = 0;
};

UKB_HD inline Tally operator+(const Tally& a, const Tally& b) {
  return {a.active + b.active, a.failed + b.failed, a.steps + b.steps};
}

/// One system's share of a Tally (the host's count and the cuda backend's
/// device reduction both sum these).
template <class T>
UKB_HD inline Tally tally_of(std::int32_t status, T t, std::int64_t steps, const RunSettings<T>& s) {
  return {run_active(status, t, steps, s) ? 1L : 0L, is_failure(static_cast<Status>(status)) ? 1L : 0L, steps};
}

}  // namespace ukb
