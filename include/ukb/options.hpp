/// @file options.hpp
/// @brief What a user chooses: where a batch is computed (Backend), how it is
///        executed (EngineOptions: never changes a result) and what a run
///        does (RunOptions: the `[integrator]` and `[stabilization]` tables
///        of a `ukb run` config), with their validation and their
///        resolution into the settings a backend receives (settings.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <exception>
#include <new>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
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

/// The values of an enum run option (Method, Stabilization), in order.
template <class E>
constexpr auto option_values() {
  if constexpr (std::is_same_v<E, Method>) return std::array{Method::rk4, Method::dopri5};
  else return std::array{Stabilization::none, Stabilization::baumgarte, Stabilization::projection};
}

/// Parses the name of a value of an enum run option (to_string's).
template <class E>
std::optional<E> parse_option(std::string_view s) {
  return detail::parse_named(s, option_values<E>());
}

/// Parses "none", "baumgarte" or "projection".
inline std::optional<Stabilization> parse_stabilization(std::string_view s) {
  return parse_option<Stabilization>(s);
}

/// Parses "rk4" or "dopri5".
inline std::optional<Method> parse_method(std::string_view s) { return parse_option<Method>(s); }

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

/// How a batch is executed. Nothing here changes a result, bit for bit,
/// but `cuda_teams` on a GPU, where nvcc may contract the team route's
/// multiply-adds otherwise than the thread route's (round-off only).
struct EngineOptions {
  int threads = 0;       ///< CPU threads; 0: OMP_NUM_THREADS or all cores
  int chunk = 64;        ///< systems handed to a CPU thread at a time
  /// Threads per CUDA block; 0: chosen per kernel from its registers and
  /// the device's occupancy (the largest block of the highest occupancy,
  /// smaller where N would not give every multiprocessor a block).
  int cuda_block = 0;
  /// CUDA: integrations of a model with a team (kernels::team_size:
  /// the chains of 8 coordinates or more, or the model's `cuda_team`) run
  /// a team of threads per system, its step in shared memory; false: one
  /// thread per system for every model. The same operations in the same
  /// order either way (docs/cpp-api.md, "Teams").
  bool cuda_teams = true;
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
  double event_tol = policy::default_event_tol;  ///< events: bracket width of the located instant (finite, > 0; a config or ukb.simulate that gives it refuses one wider than the step, dt_max with dopri5; wider than a step here: located to the step)
  bool events = true;   ///< locate the model's events (stick-slip), if it has any
  bool monitor = true;  ///< track the model's constraint residuals, if it has any
  /// Keeping the state on the manifold; anything but none needs the model's
  /// `constraint_rows`.
  Stabilization stabilization = Stabilization::none;
  double baumgarte_alpha = -1;  ///< holonomic damping rate (1/time); < 0: policy::default_baumgarte_rate
  double baumgarte_beta = -1;   ///< holonomic stiffness rate (1/time); < 0: alpha
  double baumgarte_gamma = -1;  ///< nonholonomic decay rate (1/time); < 0: alpha
  double projection_tol = -1;   ///< relative, in [1e-15, 1) and at least 4 eps of the scalar; < 0: policy::default_projection_tol
  int projection_iters = policy::default_projection_iters;  ///< corrections per level at most, in [1, 100]

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
  double safety = policy::step_safety;  ///< the step-size control's safety factor, in (0, 1]
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

// ---------------------------------------------------------------- the table of run options

/// The admissible values of a number option (a bound of +-inf: none).
struct OptionRange {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  bool inf_ok = false;  ///< +inf is admitted (a limit "none")
  bool integer = false;
  /// Whether v is admitted (never NaN).
  bool admits(double v) const {
    if (std::isnan(v)) return false;
    if (std::isinf(v)) return v > 0 ? inf_ok : lo == v;
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  /// "> 0", "in (0, 1)", "in [1, 100]", "> 0 or inf", ... (docs and messages).
  std::string text() const;
};

/// Formats a number as the shortest text that reads back to it ("0.1", "1e+300").
inline std::string format_number(double v) {
  char b[32];
  const auto r = std::to_chars(b, b + sizeof b, v);
  return std::string(b, r.ptr);
}

inline std::string OptionRange::text() const {
  const bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
  std::string t;
  if (has_lo && has_hi)
    t = std::string("in ") + (lo_open ? "(" : "[") + format_number(lo) + ", " + format_number(hi) + (hi_open ? ")" : "]");
  else if (has_lo)
    t = std::string(lo_open ? "> " : ">= ") + format_number(lo);
  else if (has_hi)
    t = std::string(hi_open ? "< " : "<= ") + format_number(hi);
  else
    t = "any number";
  return inf_ok && has_lo ? t + " or inf" : t;
}

/// What a special value of a RunOptions member means in the library and in
/// Python (a config leaves the key out instead).
enum class OptionUnset {
  none,                ///< every value must be in the range
  negative_is_default, ///< a finite value < 0: the default (policy.hpp)
  zero_is_automatic,   ///< with method dopri5, 0: chosen automatically (dt)
  minus_one_is_none,   ///< -1: no such check (expected_rank)
};

/// One row of the table of run options (visit_run_options): the name of
/// the RunOptions member (and of the Python keyword), where a config file
/// gives it, and what it admits and means. The table generates the config's
/// parsing and its "did you mean" lists, the Python keywords, run.json's
/// `config` and the option list of docs/config.md; every check of a value
/// is written once, here (check).
struct RunOptionInfo {
  const char* name;   ///< the RunOptions member and Python keyword: "baumgarte_alpha"
  const char* table;  ///< the config's table: "integrator" or "stabilization"
  const char* key;    ///< the key in that table: "alpha"
  const char* type;   ///< the docs' type: "number", "integer", "string", ...
  const char* what;   ///< what a message says is expected: "a rate"
  OptionRange range;  ///< numbers: the admissible values
  const char* note;   ///< added to a message of the range (nullptr: none)
  /// The option applies only with this method (`integrator.method`:
  /// "dopri5") or stabilisation (`stabilization.method`: "baumgarte",
  /// "projection"); nullptr: always. A config or a Python call that gives
  /// it otherwise is refused (it would be ignored).
  const char* only;
  OptionUnset unset;
  const char* default_text;  ///< the docs' default
  const char* doc;           ///< the docs' meaning
  /// The value in effect where the member is unset (run.json shows it);
  /// nullptr: shown as "default".
  double (*in_effect)(const RunOptions&) = nullptr;
  /// run.json shows the option at its default value too. An option added
  /// later (safety) is shown only where it is set otherwise, so that a run
  /// without it keeps the identity of its checkpoints (config_identity).
  bool shown_at_default = true;
};

namespace detail {
constexpr OptionRange positive{.lo = 0, .lo_open = true};
constexpr OptionRange nonnegative{.lo = 0};
}  // namespace detail

/// Calls f(info, member) for every run option of r (RunOptions, const or
/// not), in the order of the docs. Adding an option: a member of
/// RunOptions, a row here, its use in resolve_run.
template <class R, class F>
  requires std::is_same_v<std::remove_const_t<R>, RunOptions>
void visit_run_options(R& r, F&& f) {
  f(RunOptionInfo{"method", "integrator", "method", "string", "a method", {}, nullptr, nullptr, OptionUnset::none,
                  "`\"rk4\"`",
                  "`rk4`: classical RK4 with a fixed step; `dopri5`: Dormand–Prince 5(4), a step size of its own per "
                  "sample ([Adaptive steps](adaptive.md#adaptive-steps))"},
    r.method);
  f(RunOptionInfo{"dt", "integrator", "dt", "number", "a time step", detail::positive,
                  "with dopri5 the first trial step; to have it chosen automatically leave dt out of a config, or "
                  "give 0 to ukb.simulate",
                  nullptr,
                  OptionUnset::zero_is_automatic, "required with `rk4`",
                  "`rk4`: the time step, the last one shortened to end on `t_end` (a time within `1e-9 dt` of "
                  "`t_end` has reached it, so with a finite `t_end` a `dt` over 1e9 times `t_end - t0` is refused); "
                  "`dopri5`: the first trial step (a longer one than `t_end - t0` is taken as `t_end - t0`; not "
                  "given: chosen automatically, Hairer's initial step)"},
    r.dt);
  f(RunOptionInfo{"rtol", "integrator", "rtol", "number", "a relative tolerance", {.lo = 0, .hi = 1, .lo_open = true, .hi_open = true},
                  nullptr, "dopri5", OptionUnset::none, "`1e-6`", "relative tolerance of the error control"},
    r.rtol);
  f(RunOptionInfo{"atol", "integrator", "atol", "number > 0, or an array of n or 2n", "an absolute tolerance",
                  detail::positive, "a component that is 0, such as a velocity at rest, has no other error scale",
                  "dopri5", OptionUnset::none, "`1e-9`",
                  "absolute tolerance, one for every component, one per coordinate (for `q_j` and `q'_j` alike) or "
                  "2n (`q`, then `q'`)"},
    r.atol);
  f(RunOptionInfo{"dt_min", "integrator", "dt_min", "number", "a step", detail::nonnegative, nullptr, "dopri5",
                  OptionUnset::none, "0",
                  "a step the error control asks for below this ends the sample with `failed_step_size` (0: only a "
                  "step too small to advance the time does)"},
    r.dt_min);
  f(RunOptionInfo{"dt_max", "integrator", "dt_max", "number", "a step", {.lo = 0, .lo_open = true, .inf_ok = true},
                  nullptr, "dopri5", OptionUnset::none, "`inf`", "the largest step; at least `dt_min`"},
    r.dt_max);
  f(RunOptionInfo{"safety", "integrator", "safety", "number", "a factor", {.lo = 0, .hi = 1, .lo_open = true},
                  nullptr, "dopri5", OptionUnset::none, "0.9",
                  "the safety factor of the step-size control: the next step is this times the one whose error "
                  "norm the controller predicts to be 1 (lower: fewer rejected steps, more steps)",
                  nullptr, /*shown_at_default=*/false},
    r.safety);
  f(RunOptionInfo{"t_end", "integrator", "t_end", "number or `inf`", "an end time", {.inf_ok = true}, nullptr, nullptr,
                  OptionUnset::none, "`inf`", "end time (> `t0`)"},
    r.t_end);
  f(RunOptionInfo{"max_steps", "integrator", "max_steps", "integer", "a step count", {.lo = 1, .integer = true},
                  nullptr, nullptr, OptionUnset::none, "none",
                  "steps per sample; at least one of a finite `t_end` and `max_steps` is required"},
    r.max_steps);
  f(RunOptionInfo{"event_tol", "integrator", "event_tol", "number", "a tolerance", detail::positive, nullptr, nullptr,
                  OptionUnset::none, "`1e-10`",
                  "width (in time) to which a stick-slip instant is bracketed; at most `dt` (`dopri5`: `dt_max`)"},
    r.event_tol);
  f(RunOptionInfo{"events", "integrator", "events", "boolean", "true or false", {}, nullptr, nullptr,
                  OptionUnset::none, "true", "locate the model's events (stick-slip)"},
    r.events);
  f(RunOptionInfo{"monitor", "integrator", "monitor", "boolean", "true or false", {}, nullptr, nullptr,
                  OptionUnset::none, "true", "track the constraint residuals"},
    r.monitor);
  f(RunOptionInfo{"rank_rtol", "integrator", "rank_rtol", "number", "a number", {.lo = 0, .hi = 1, .hi_open = true},
                  nullptr, nullptr, OptionUnset::negative_is_default, "1e-10 (float: 1e-5)",
                  "relative rank tolerance of the pseudo-inverse"},
    r.rank_rtol);
  f(RunOptionInfo{"residual_limit", "integrator", "residual_limit", "number", "a residual",
                  {.lo = 0, .lo_open = true, .inf_ok = true}, "model units", nullptr, OptionUnset::none, "`inf`",
                  "a sample whose constraint residual (`res_pos`, `res_vel`: model units) exceeds this after a step "
                  "stops there with `failed_residual` at its last good state (models with a residual: every "
                  "built-in one; refused for a model without one)"},
    r.residual_limit);
  f(RunOptionInfo{"expected_rank", "integrator", "expected_rank", "integer in [0, m]", "a rank",
                  {.lo = 0, .integer = true}, nullptr, nullptr, OptionUnset::minus_one_is_none, "none",
                  "for a model whose `rank(B)` is known (redundant constraints): a step with an evaluation of "
                  "another rank stops the sample with `failed_rank` at its last good state, instead of going on "
                  "with a `q''` of another rank; see [Redundant constraints](stabilisation.md#redundant-constraints)"},
    r.expected_rank);
  f(RunOptionInfo{"stabilization", "stabilization", "method", "string", "a stabilisation", {}, nullptr, nullptr,
                  OptionUnset::none, "`\"none\"`",
                  "`none`, `baumgarte` or `projection` (the last two refused for a model that does not state its "
                  "constraint rows); see [Constraint drift and "
                  "stabilisation](stabilisation.md#constraint-drift-and-stabilisation)"},
    r.stabilization);
  f(RunOptionInfo{"baumgarte_alpha", "stabilization", "alpha", "number", "a rate", detail::nonnegative,
                  "1/time units", "baumgarte", OptionUnset::negative_is_default, "10",
                  "the rate (1/time) of `b <- b - 2 alpha phi' - beta^2 phi` (holonomic rows); with `rk4`, "
                  "`max(2 alpha, beta, gamma) * dt` must be <= 1",
                  [](const RunOptions& o) { return o.baumgarte().alpha; }},
    r.baumgarte_alpha);
  f(RunOptionInfo{"baumgarte_beta", "stabilization", "beta", "number", "a rate", detail::nonnegative,
                  "1/time units", "baumgarte", OptionUnset::negative_is_default, "`alpha`'s value",
                  "the stiffness rate `beta` of the holonomic rows",
                  [](const RunOptions& o) { return o.baumgarte().beta; }},
    r.baumgarte_beta);
  f(RunOptionInfo{"baumgarte_gamma", "stabilization", "gamma", "number", "a rate", detail::nonnegative,
                  "1/time units", "baumgarte", OptionUnset::negative_is_default, "`alpha`'s value",
                  "the rate of `b <- b - gamma psi` (nonholonomic rows)",
                  [](const RunOptions& o) { return o.baumgarte().gamma; }},
    r.baumgarte_gamma);
  f(RunOptionInfo{"projection_tol", "stabilization", "tol", "number", "a relative tolerance",
                  {.lo = 1e-15, .hi = 1, .hi_open = true}, "round-off in double is 1e-16", "projection",
                  OptionUnset::negative_is_default, "`1e-10` (float: 1e-5)",
                  "relative tolerance of the projection (a level stops when its correction is at most `tol` times "
                  "the largest entry of `q`, resp. `q'`)",
                  [](const RunOptions& o) { return o.projection_tolerance<double>(); }},
    r.projection_tol);
  f(RunOptionInfo{"projection_iters", "stabilization", "max_iter", "integer", "an iteration count",
                  {.lo = 1, .hi = 100, .integer = true}, nullptr, "projection", OptionUnset::none, "4",
                  "Gauss–Newton corrections per level at most; more counts a projection failure"},
    r.projection_iters);
}

/// The rows of the table, in order.
inline const std::vector<RunOptionInfo>& run_option_table() {
  static const std::vector<RunOptionInfo> rows = [] {
    std::vector<RunOptionInfo> v;
    const RunOptions r;
    visit_run_options(r, [&](const RunOptionInfo& o, const auto&) { v.push_back(o); });
    return v;
  }();
  return rows;
}

/// The row of the option named `name` (a RunOptions member), or nullptr.
inline const RunOptionInfo* find_run_option(std::string_view name) {
  for (const RunOptionInfo& o : run_option_table())
    if (name == o.name) return &o;
  return nullptr;
}

/// The names of an enum option's values ("rk4", "dopri5").
template <class E>
std::vector<std::string> option_choices() {
  std::vector<std::string> v;
  for (E x : option_values<E>()) v.emplace_back(to_string(x));
  return v;
}

/// A run option out of range, or at odds with another: `option` names it
/// (a RunOptions member), `message` says what was expected and what was
/// given; what() is "ukb: <option as labelled>: <message>".
struct OptionError : std::invalid_argument {
  std::string option, message;
  OptionError(std::string opt, std::string msg, const std::string& label)
      : std::invalid_argument("ukb: " + label + ": " + msg), option(std::move(opt)), message(std::move(msg)) {}
};

/// How messages name an option: the member's name (library, Python) or
/// the config's `table.key`.
using OptionLabel = std::string (*)(std::string_view name);

namespace detail {
inline std::string plain_label(std::string_view name) { return std::string(name); }

[[noreturn]] inline void option_error(std::string_view name, const std::string& msg, OptionLabel label) {
  throw OptionError(std::string(name), msg, label(name));
}

// The row's method condition ("integrator.method" or "stabilization.method"), the chosen value.
inline std::pair<const char*, std::string> option_condition(const RunOptionInfo& o, const RunOptions& r) {
  if (std::string_view(o.only) == "dopri5") return {"method", std::string(to_string(r.method))};
  return {"stabilization", std::string(to_string(r.stabilization))};
}
}  // namespace detail

/// Whether option o takes effect in r (RunOptionInfo::only).
inline bool applies(const RunOptionInfo& o, const RunOptions& r) {
  return !o.only || detail::option_condition(o, r).second == o.only;
}

/// The message for a value of o given where it does not apply (empty where it does).
inline std::string not_applicable(const RunOptionInfo& o, const RunOptions& r,
                                  OptionLabel label = detail::plain_label) {
  if (applies(o, r)) return {};
  const auto [cond, value] = detail::option_condition(o, r);
  return std::string("applies to ") + label(cond) + " = \"" + o.only + "\" only; this run's is \"" + value + "\"";
}

/// The message for option o given (in a config, or to ukb.simulate) where
/// it would be ignored (not_applicable), or an event_tol given wider than
/// the step (dt; dopri5: dt_max): such a bracket would not locate an event
/// within its step. Empty where o may be given.
inline std::string given_error(const RunOptionInfo& o, const RunOptions& r, OptionLabel label = detail::plain_label) {
  std::string m = not_applicable(o, r, label);
  if (m.empty() && std::string_view(o.name) == "event_tol") {
    const bool adaptive = r.method == Method::dopri5;
    const double widest = adaptive ? r.dt_max : r.dt;
    if (!(r.event_tol <= widest))
      m = "expected a tolerance at most " + label(adaptive ? "dt_max" : "dt") + " = " + format_number(widest) +
          " (a wider bracket would not locate an event within its step), got " + format_number(r.event_tol);
  }
  return m;
}

/// The message for value v of number option o out of its range (empty where
/// it is admitted; the unset values of the library are not).
inline std::string out_of_range(const RunOptionInfo& o, double v) {
  if (o.range.admits(v)) return {};
  if (std::isnan(v)) return std::string("expected ") + o.what + ", got NaN";
  const std::string got = v > 0 && std::isinf(v) ? std::string(" (a finite number)") : std::string();
  return std::string("expected ") + (o.range.integer ? "an integer" : o.what) + " " + o.range.text() +
         (o.note ? std::string(" (") + o.note + ")" : std::string()) + got + ", got " + format_number(v);
}

/// Throws OptionError for the options of r that are out of range (whether
/// or not they apply: a value is valid or not), or at odds with each other. `evaluation_only`: only what
/// `evaluate` uses (rank_rtol, the Baumgarte rates).
inline void check(const RunOptions& r, OptionLabel label = detail::plain_label, bool evaluation_only = false) {
  visit_run_options(r, [&](const RunOptionInfo& o, const auto& v) {
    using M = std::remove_cvref_t<decltype(v)>;
    if (evaluation_only && std::string_view(o.name) != "rank_rtol" && std::string_view(o.name).rfind("baumgarte_", 0) != 0)
      return;
    auto one = [&](double x, long element) {
      if (o.unset == OptionUnset::negative_is_default && x < 0 && std::isfinite(x)) return;
      if (o.unset == OptionUnset::zero_is_automatic && x == 0 && r.method == Method::dopri5) return;
      if (o.unset == OptionUnset::minus_one_is_none && x == -1) return;
      std::string m = out_of_range(o, x);
      if (m.empty()) return;
      if (element >= 0) m.insert(0, "value " + std::to_string(element) + ": ");
      detail::option_error(o.name, m, label);
    };
    if constexpr (std::is_same_v<M, std::vector<double>>) {
      if (v.empty() || v.size() > std::size_t(policy::max_atol))
        detail::option_error(o.name, "expected 1, n or 2n values (at most " + std::to_string(policy::max_atol) + ")", label);
      for (std::size_t i = 0; i < v.size(); ++i) one(v[i], v.size() > 1 ? long(i) : -1L);
    } else if constexpr (std::is_arithmetic_v<M> && !std::is_same_v<M, bool>) {
      one(static_cast<double>(v), -1);
    }
  });
  if (evaluation_only) return;
  if (r.method == Method::dopri5 && !(r.dt_min <= r.dt_max))
    detail::option_error("dt_max", "expected at least " + label("dt_min") + " = " + format_number(r.dt_min) +
                                       ", got " + format_number(r.dt_max), label);
  if (r.method == Method::rk4 && r.stabilization == Stabilization::baumgarte && fastest_rate(r.baumgarte()) * r.dt > 1)
    detail::option_error("stabilization",
                         "the Baumgarte rates are too fast for " + label("dt") + " = " + format_number(r.dt) +
                             ": max(2 alpha, beta, gamma) * dt = " + format_number(fastest_rate(r.baumgarte()) * r.dt) +
                             "; expected at most 1 (the stabilised drift would be stiff for RK4; the default rates are " +
                             format_number(policy::default_baumgarte_rate) + "): lower the rates or dt",
                         label);
  if (std::isnan(r.t_pause)) throw std::invalid_argument("ukb: t_pause must not be NaN");
}

/// What check_for_model knows of the model (-1, nullptr: not known).
struct OptionModel {
  const char* name;
  int n = -1;                   ///< coordinates
  int m = -1;                   ///< constraint rows
  bool has_rows = true;         ///< it states its constraint rows
  int has_residual = -1;        ///< it states a residual (1), not (0), not known (-1)
  const std::vector<std::string>* coords = nullptr;
};

/// Throws OptionError for the options of r that the model cannot take: an
/// atol of another count than 1, n or 2n, a stabilisation without the
/// model's constraint rows, a residual limit without its residual, an
/// expected rank above its rows.
inline void check_for_model(const RunOptions& r, const OptionModel& M, OptionLabel label = detail::plain_label) {
  const std::string model = std::string("'") + M.name + "'";
  if (r.method == Method::dopri5 && M.n > 0) {
    const std::size_t k = r.atol.size(), n = static_cast<std::size_t>(M.n);
    if (k != 1 && k != n && k != 2 * n) {
      std::string coords;
      if (M.coords)
        for (const std::string& c : *M.coords) coords += (coords.empty() ? ": " : ", ") + c;
      detail::option_error("atol", "expected one number, or an array of " + std::to_string(n) +
                                       " (one per coordinate of " + model + coords + ") or " + std::to_string(2 * n) +
                                       " (q, then q'), got " + std::to_string(k) + " values", label);
    }
  }
  if (r.stabilization != Stabilization::none && !M.has_rows)
    detail::option_error("stabilization", "\"" + std::string(to_string(r.stabilization)) +
                                              "\" needs the model's constraint_rows, which " + model +
                                              " does not state; expected \"none\"", label);
  if (M.has_residual == 0 && r.residual_limit != std::numeric_limits<double>::infinity())
    detail::option_error("residual_limit", "model " + model + " states no constraint residual to limit; expected no residual_limit", label);
  if (M.m >= 0 && r.expected_rank > M.m)
    detail::option_error("expected_rank", "expected at most the " + std::to_string(M.m) + " constraint rows of " +
                                              model + ", got " + std::to_string(r.expected_rank), label);
}

/// The evaluation settings of r in scalar T. `has_rows`: whether the model
/// states its constraint rows (Baumgarte needs them). Throws
/// std::invalid_argument.
template <class T>
EvalSettings<T> resolve_evaluation(const RunOptions& r, bool has_rows, const char* model) {
  check(r, detail::plain_label, /*evaluation_only=*/true);
  check_for_model(r, {.name = model, .has_rows = has_rows});
  const Baumgarte<double> b = r.baumgarte();
  return {r.rank_tolerance<T>(), {b.on, static_cast<T>(b.alpha), static_cast<T>(b.beta), static_cast<T>(b.gamma)}};
}

/// The settings of an integration call of at most `budget` steps per system
/// (rk4: steps; dopri5: steps tried, rejected ones too), in scalar T, for a
/// model with n coordinates. Throws std::invalid_argument.
template <class T>
RunSettings<T> resolve_run(const RunOptions& r, long budget, bool has_rows, const char* model, int n) {
  check(r);
  check_for_model(r, {.name = model, .n = n, .has_rows = has_rows});
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
    s.control.rtol = static_cast<T>(r.rtol);
    s.control.atol_count = static_cast<int>(k);
    for (std::size_t i = 0; i < k; ++i) s.control.atol[i] = static_cast<T>(r.atol[i]);
    s.control.dt_min = static_cast<T>(r.dt_min);
    s.control.dt_max = static_cast<T>(r.dt_max);
    s.control.safety = static_cast<T>(r.safety);
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
