/// @file options.hpp
/// @brief What a user chooses: where a batch is computed (Backend), how it is
///        executed (EngineOptions: never changes a result) and what a run
///        does (RunOptions: the `[integrator]` and `[stabilization]` tables
///        of a `ukb run` config), with their validation and their
///        resolution into the settings a backend receives (settings.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <exception>
#include <new>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ukb/policy.hpp"
#include "ukb/settings.hpp"

namespace ukb {

/// Where a batch is computed.
enum class Backend {
  reference,  ///< the Eigen oracle, one system after the other (double only)
  cpu,        ///< the shared kernels, OpenMP over systems, SIMD lanes
  cuda,       ///< the shared kernels, one GPU thread per system
};

constexpr std::string_view to_string(Backend b) {
  return b == Backend::reference ? "reference" : b == Backend::cpu ? "cpu" : "cuda";
}

/// How a run keeps the state on the constraint manifold (docs/stabilisation.md).
enum class Stabilization {
  none,        ///< the equation as it is: positions and velocities drift
  baumgarte,   ///< every evaluation corrects b (Baumgarte)
  projection,  ///< every step ends with a projection onto the manifold
};

constexpr std::string_view to_string(Stabilization s) {
  return s == Stabilization::none ? "none" : s == Stabilization::baumgarte ? "baumgarte" : "projection";
}

constexpr std::string_view to_string(Method m) { return m == Method::dopri5 ? "dopri5" : "rk4"; }

namespace detail {
// The value of `all` whose to_string is s.
template <class E, std::size_t K>
std::optional<E> parse_named(std::string_view s, const std::array<E, K>& all) {
  for (E x : all)
    if (s == to_string(x)) return x;
  return std::nullopt;
}
}  // namespace detail

/// Parses "reference", "cpu" or "cuda".
inline std::optional<Backend> parse_backend(std::string_view s) {
  return detail::parse_named(s, std::array{Backend::reference, Backend::cpu, Backend::cuda});
}

/// Parses "none", "baumgarte" or "projection".
inline std::optional<Stabilization> parse_stabilization(std::string_view s) {
  return detail::parse_named(
      s, std::array{Stabilization::none, Stabilization::baumgarte, Stabilization::projection});
}

/// Parses "rk4" or "dopri5".
inline std::optional<Method> parse_method(std::string_view s) {
  return detail::parse_named(s, std::array{Method::rk4, Method::dopri5});
}

/// Thrown when a backend cannot run here (no CUDA build, no device, a
/// scalar type or a model the backend does not support).
struct BackendUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Thrown when a model's own code throws (on the cpu and reference backends;
/// device code cannot throw): what() names the model, what it was doing and
/// the model's message. The model's exception is nested
/// (std::rethrow_if_nested gives it back).
struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {

/// Calls f(); an exception that f lets out (model code that throws) becomes
/// a ModelError naming `model` and `doing` ("integrating", ...) with the
/// original nested; std::bad_alloc and a ModelError pass unchanged.
template <class F>
decltype(auto) as_model_error(const char* model, const char* doing, F&& f) {
  try {
    return f();
  } catch (const ModelError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    std::throw_with_nested(ModelError(std::string("model '") + model + "' threw an exception while " + doing + ": " +
                                      e.what()));
  } catch (...) {
    std::throw_with_nested(ModelError(std::string("model '") + model + "' threw an exception while " + doing +
                                      " (not a std::exception, so without a message)"));
  }
}

}  // namespace detail

/// How a batch is executed. Nothing here changes a result, bit for bit.
struct EngineOptions {
  int threads = 0;       ///< CPU threads; 0: OMP_NUM_THREADS or all cores
  int chunk = 64;        ///< systems handed to a CPU thread at a time
  /// Threads per CUDA block; 0: chosen per kernel from its registers and
  /// the device's occupancy (the largest block of the highest occupancy,
  /// smaller where N would not give every multiprocessor a block).
  int cuda_block = 0;
  /// CPU backend: integrate several systems at a time in SIMD lanes
  /// (kernels/ukb/cpu/simd.hpp; bitwise the same results); false: one at a time.
  bool simd = true;
};

/// What an evaluation or an integration does: the `[integrator]` and
/// `[stabilization]` tables of a `ukb run` config (docs/config.md). `evaluate`
/// uses rank_rtol and the Baumgarte settings only.
struct RunOptions {
  Method method = Method::rk4;  ///< integration method
  double dt = 1e-3;             ///< rk4: the step size (> 0); dopri5: the first trial step (0: automatic)
  double t_end = std::numeric_limits<double>::infinity();  ///< end time (+inf: none)
  long max_steps = std::numeric_limits<long>::max();  ///< accepted steps per system since set_state
  double event_tol = policy::default_event_tol;  ///< events: bracket width of the located instant (finite, > 0; wider than a step: located to the step)
  bool events = true;   ///< locate the model's events (stick-slip), if it has any
  bool monitor = true;  ///< track the model's constraint residuals, if it has any
  /// Keeping the state on the manifold; anything but none needs the model's
  /// `constraint_rows`.
  Stabilization stabilization = Stabilization::none;
  double baumgarte_alpha = -1;  ///< holonomic damping rate (1/time); < 0: policy::default_baumgarte_rate
  double baumgarte_beta = -1;   ///< holonomic stiffness rate (1/time); < 0: alpha
  double baumgarte_gamma = -1;  ///< nonholonomic decay rate (1/time); < 0: alpha
  double projection_tol = -1;   ///< relative, in [4 eps, 1) of the scalar; < 0: policy::default_projection_tol
  int projection_iters = policy::default_projection_iters;  ///< corrections per level at most (>= 1)

  /// Relative rank tolerance of the pseudo-inverse, in [0, 1); < 0: the
  /// default of the scalar type (policy::default_rank_rtol).
  double rank_rtol = -1;
  /// A system whose constraint residual (the model's `residual`, position or
  /// velocity level) exceeds this after a step, or is NaN, fails with
  /// Status::failed_residual at its last good state; +inf: no limit (> 0).
  double residual_limit = std::numeric_limits<double>::infinity();
  /// For systems whose rank is known (redundant constraints): a step with an
  /// evaluation whose rank(B) differs from this fails with
  /// Status::failed_rank at its last good state, instead of going on with a
  /// q'' of another rank; -1: no check. The counters rank_changes and
  /// rank_marginal are kept either way.
  int expected_rank = -1;

  // Adaptive steps (method dopri5; docs/adaptive.md). `dt` is the
  // first trial step there, 0: chosen automatically (Hairer's initial step).
  double rtol = policy::default_rtol;  ///< relative tolerance (> 0)
  /// Absolute tolerance: one value, n (q_j and q'_j alike) or 2n (q, then
  /// q'); each finite and > 0 (a component that is 0, a velocity at rest, has no other error scale).
  std::vector<double> atol = {policy::default_atol};
  double dt_min = 0;  ///< a step the error control asks for below this fails the system (failed_step_size)
  double dt_max = std::numeric_limits<double>::infinity();  ///< largest step (> 0)
  /// A call ends for a system once its time reaches t_pause (after the
  /// step that reaches it; the steps do not change): how `ukb run` records
  /// at fixed output times. +inf: never.
  double t_pause = std::numeric_limits<double>::infinity();

  /// The projection tolerance for scalar T with the default filled in.
  template <class T>
  double projection_tolerance() const {
    return projection_tol < 0 ? policy::default_projection_tol<T>() : projection_tol;
  }

  /// The Baumgarte settings with the defaults filled in (on when
  /// stabilization is baumgarte).
  Baumgarte<double> baumgarte() const {
    const double a = baumgarte_alpha >= 0 ? baumgarte_alpha : policy::default_baumgarte_rate;
    return {stabilization == Stabilization::baumgarte, a, baumgarte_beta >= 0 ? baumgarte_beta : a,
            baumgarte_gamma >= 0 ? baumgarte_gamma : a};
  }

  /// The rank tolerance for scalar T with the default filled in.
  template <class T>
  T rank_tolerance() const {
    return rank_rtol < 0 ? policy::default_rank_rtol<T>() : static_cast<T>(rank_rtol);
  }
};

/// Throws std::invalid_argument for execution options out of range.
inline void check(const EngineOptions& o) {
  if (o.threads < 0) throw std::invalid_argument("ukb: threads must be >= 0 (0: OpenMP default)");
  if (o.chunk < 1) throw std::invalid_argument("ukb: chunk must be >= 1");
  if (o.cuda_block < 0 || o.cuda_block > 1024)
    throw std::invalid_argument("ukb: cuda_block must be in [0, 1024] (0: chosen from the kernel's occupancy)");
}

/// Throws std::invalid_argument for the evaluation options out of range
/// (what `evaluate` uses of RunOptions).
inline void check_evaluation(const RunOptions& r) {
  if (!(r.rank_rtol < 1)) throw std::invalid_argument("ukb: rank_rtol must be < 1 (< 0: default)");
  for (double rate : {r.baumgarte_alpha, r.baumgarte_beta, r.baumgarte_gamma})
    if (!std::isfinite(rate))
      throw std::invalid_argument("ukb: the Baumgarte rates must be finite (< 0: default)");
}

/// Throws std::invalid_argument for run options out of range.
inline void check(const RunOptions& r) {
  check_evaluation(r);
  if (r.method == Method::dopri5) {
    if (!(r.dt >= 0) || !std::isfinite(r.dt))
      throw std::invalid_argument("ukb: the first trial step dt must be finite and >= 0 (0: automatic)");
    if (!(r.rtol > 0) || !std::isfinite(r.rtol) || !(r.rtol < 1))
      throw std::invalid_argument("ukb: rtol must be in (0, 1)");
    if (r.atol.empty() || r.atol.size() > std::size_t(policy::max_atol))
      throw std::invalid_argument("ukb: atol must have 1, n or 2n values (at most " +
                                  std::to_string(policy::max_atol) + ")");
    for (double a : r.atol)
      if (!(a > 0) || !std::isfinite(a))
        throw std::invalid_argument("ukb: every atol must be finite and > 0 (a component that is 0 has no other error scale)");
    if (!(r.dt_min >= 0) || !std::isfinite(r.dt_min))
      throw std::invalid_argument("ukb: dt_min must be finite and >= 0");
    if (!(r.dt_max > 0) || std::isnan(r.dt_max)) throw std::invalid_argument("ukb: dt_max must be > 0");
    if (!(r.dt_min <= r.dt_max)) throw std::invalid_argument("ukb: dt_min must be <= dt_max");
  } else if (!(r.dt > 0) || !std::isfinite(r.dt)) {
    throw std::invalid_argument("ukb: the time step must be finite and > 0");
  }
  if (std::isnan(r.t_pause)) throw std::invalid_argument("ukb: t_pause must not be NaN");
  if (std::isnan(r.t_end)) throw std::invalid_argument("ukb: the end time must not be NaN");
  if (r.max_steps < 0) throw std::invalid_argument("ukb: the step limit must be >= 0");
  if (!(r.event_tol > 0) || !std::isfinite(r.event_tol))
    throw std::invalid_argument("ukb: the event tolerance must be finite and > 0");
  if (r.method == Method::rk4 && r.stabilization == Stabilization::baumgarte && fastest_rate(r.baumgarte()) * r.dt > 1)
    throw std::invalid_argument(
        "ukb: Baumgarte rates too fast for the time step: max(2 alpha, beta, gamma) * dt = " +
        std::to_string(fastest_rate(r.baumgarte()) * r.dt) +
        " must be <= 1 (the stabilised drift would be stiff for RK4); lower the rates or dt");
  if (r.projection_iters < 1) throw std::invalid_argument("ukb: the projection needs at least 1 iteration");
  if (!(r.residual_limit > 0))
    throw std::invalid_argument("ukb: the residual limit must be > 0 (+inf: none)");
  if (r.expected_rank < -1) throw std::invalid_argument("ukb: the expected rank must be >= 0 (-1: none)");
}

/// The evaluation settings of r in scalar T. `has_rows`: whether the model
/// states its constraint rows (Baumgarte needs them). Throws
/// std::invalid_argument.
template <class T>
EvalSettings<T> resolve_evaluation(const RunOptions& r, bool has_rows, const char* model) {
  check_evaluation(r);
  if (r.stabilization != Stabilization::none && !has_rows)
    throw std::invalid_argument(std::string("ukb: stabilization '") + std::string(to_string(r.stabilization)) +
                                "' needs the model's constraint_rows, which '" + model + "' does not state");
  const Baumgarte<double> b = r.baumgarte();
  return {r.rank_tolerance<T>(), {b.on, static_cast<T>(b.alpha), static_cast<T>(b.beta), static_cast<T>(b.gamma)}};
}

/// The settings of an integration call of at most `budget` steps per system
/// (rk4: steps; dopri5: steps tried, rejected ones too), in scalar T, for a
/// model with n coordinates. Throws std::invalid_argument.
template <class T>
RunSettings<T> resolve_run(const RunOptions& r, long budget, bool has_rows, const char* model, int n) {
  check(r);
  if (budget < 0) throw std::invalid_argument("ukb: the step count must be >= 0");
  const EvalSettings<T> e = resolve_evaluation<T>(r, has_rows, model);
  // Below 4 epsilon of the scalar no correction could meet the tolerance.
  const double tol = r.projection_tolerance<T>();
  if (!(tol >= 4 * static_cast<double>(std::numeric_limits<T>::epsilon()) && tol < 1))
    throw std::invalid_argument("ukb: the projection tolerance " + std::to_string(tol) +
                                " must be in [4 epsilon of the scalar type, 1) (< 0: default)");
  RunSettings<T> s;
  s.dt = static_cast<T>(r.dt);
  s.t_end = static_cast<T>(r.t_end);
  s.max_steps = r.max_steps;
  s.budget = budget;
  s.event_tol = static_cast<T>(r.event_tol);
  s.rank_rtol = e.rank_rtol;
  s.events = r.events;
  s.monitor = r.monitor;
  s.baumgarte = e.baumgarte;
  s.projection = {r.stabilization == Stabilization::projection, static_cast<T>(tol), r.projection_iters};
  s.residual_limit = static_cast<T>(r.residual_limit);
  s.expected_rank = r.expected_rank;
  s.method = r.method;
  s.t_pause = static_cast<T>(r.t_pause);
  if (r.method == Method::dopri5) {
    const std::size_t k = r.atol.size();
    if (k != 1 && k != std::size_t(n) && k != 2 * std::size_t(n))
      throw std::invalid_argument("ukb: atol has " + std::to_string(k) + " values; expected 1, " +
                                  std::to_string(n) + " (one per coordinate) or " + std::to_string(2 * n) +
                                  " (q, then q') for '" + model + "'");
    s.control.rtol = static_cast<T>(r.rtol);
    s.control.atol_count = static_cast<int>(k);
    for (std::size_t i = 0; i < k; ++i) s.control.atol[i] = static_cast<T>(r.atol[i]);
    s.control.dt_min = static_cast<T>(r.dt_min);
    s.control.dt_max = static_cast<T>(r.dt_max);
    for (std::size_t i = 0; i < 2 * std::size_t(n); ++i)
      if (!(s.control.atol_of(int(i), n) + s.control.rtol > T(0)))
        throw std::invalid_argument("ukb: atol and rtol are zero in the scalar type of the model");
  }
  if (!(s.residual_limit > T(0)))
    throw std::invalid_argument("ukb: the residual limit " + std::to_string(r.residual_limit) +
                                " is zero in the scalar type of the model");
  return s;
}

}  // namespace ukb
