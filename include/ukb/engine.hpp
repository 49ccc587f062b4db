/// @file engine.hpp
/// @brief The batched engine: evaluate or integrate every system of a Batch
///        on the reference, CPU or CUDA backend.
///
/// ```cpp
/// ukb::Batch<ukb::models::BeadOnRing<double>> batch(1000);
/// batch.set_params(i, p);  batch.set_state(i, q, qd);       // for each i
/// ukb::step(batch, ukb::Backend::cpu, 1e-3, 5000);          // 5000 RK4 steps
/// double x = batch.q(i, 0);  ukb::Status s = batch.status(i);
/// ```
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ukb/cpu/parallel.hpp"
#include "ukb/cpu/simd.hpp"
#include "ukb/batch.hpp"
#include "ukb/cuda_engine.hpp"
#include "ukb/kernels/system.hpp"
#include "ukb/models/all.hpp"
#include "ukb/reference.hpp"

// The lanes of the built-in models are compiled once, in src/cpu_lanes.cpp.
UKB_FOR_EACH_BUILTIN(UKB_LANES_EXTERN)

namespace ukb {

/// Where a batch is computed.
enum class Backend {
  reference,  ///< the Eigen oracle, one system after the other (double only)
  cpu,        ///< the shared kernels, OpenMP over systems
  cuda,       ///< the shared kernels, one GPU thread per system
};

constexpr std::string_view to_string(Backend b) {
  return b == Backend::reference ? "reference" : b == Backend::cpu ? "cpu" : "cuda";
}

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

/// Engine options.
struct EngineOptions {
  int threads = 0;        ///< CPU threads; 0: OMP_NUM_THREADS or all cores
  int chunk = 64;         ///< systems handed to a CPU thread at a time
  double rank_rtol = -1;  ///< relative rank tolerance; < 0: 1e-10 (double), 1e-5 (float)
  int cuda_block = 128;   ///< threads per CUDA block
  /// CPU backend: integrate cpu::lane_width systems at a time in SIMD lanes
  /// (cpu/simd.hpp; bitwise the same results); false: one at a time.
  bool simd = true;
};

/// How a run keeps the state on the constraint manifold (README,
/// "Constraint drift and stabilisation").
enum class Stabilization {
  none,        ///< the equation as it is: positions and velocities drift
  baumgarte,   ///< every evaluation corrects b (kernels::Baumgarte)
  projection,  ///< every step ends with a projection onto the manifold (kernels::project)
};

constexpr std::string_view to_string(Stabilization s) {
  return s == Stabilization::none ? "none" : s == Stabilization::baumgarte ? "baumgarte" : "projection";
}

/// Parses "none", "baumgarte" or "projection".
inline std::optional<Stabilization> parse_stabilization(std::string_view s) {
  return detail::parse_named(
      s, std::array{Stabilization::none, Stabilization::baumgarte, Stabilization::projection});
}

/// The default Baumgarte rate alpha = beta = gamma, in 1/time units (a drift
/// is critically damped in about 0.1 time units: 0.1 s for the built-in
/// models, which are in SI units). A fixed rate keeps RK4's fourth order: a
/// rate tied to dt would make the stabilised equation change with dt.
inline constexpr double default_baumgarte_rate = 10.0;

/// Baumgarte rates resolved from RunOptions (defaults filled in).
struct BaumgarteRates {
  double alpha, beta, gamma;
  /// The fastest rate of the stabilised drift: its equation
  /// phi'' + 2 alpha phi' + beta^2 phi = 0 has roots of size at most
  /// max(2 alpha, beta); psi' + gamma psi = 0 decays at gamma.
  double fastest() const { return std::max({2 * alpha, beta, gamma}); }
};

/// The default relative tolerance of the projection: 1e-10 in double, 1e-5
/// in float.
template <class T>
constexpr double default_projection_tol() {
  return sizeof(T) >= 8 ? 1e-10 : 1e-5;
}

/// What `advance` does (an ensemble run, `ukb run`).
struct RunOptions {
  double dt = 1e-3;  ///< RK4 step size (> 0)
  double t_end = std::numeric_limits<double>::infinity();  ///< end time (+inf: none)
  long max_steps = std::numeric_limits<long>::max();  ///< accepted steps per system since set_state
  double event_tol = 1e-10;  ///< events: bracket width of the located instant (time units, > 0)
  bool events = true;        ///< locate the model's events (stick-slip), if it has any
  bool monitor = true;       ///< track the model's constraint residuals, if it has any
  /// Keeping the state on the manifold; anything but none needs the model's
  /// `constraint_rows`.
  Stabilization stabilization = Stabilization::none;
  double baumgarte_alpha = -1;  ///< holonomic damping rate (1/time); < 0: default_baumgarte_rate
  double baumgarte_beta = -1;   ///< holonomic stiffness rate (1/time); < 0: alpha
  double baumgarte_gamma = -1;  ///< nonholonomic decay rate (1/time); < 0: alpha
  double projection_tol = -1;   ///< relative, in [4 eps, 1) of the scalar; < 0: default_projection_tol
  int projection_iters = 4;     ///< Gauss–Newton corrections per level at most (>= 1)
  /// A system whose constraint residual (the model's `residual`, position or
  /// velocity level) exceeds this after a step, or is NaN, fails with
  /// Status::failed_residual at its last good state; +inf: no limit (> 0).
  double residual_limit = std::numeric_limits<double>::infinity();

  /// The projection tolerance for scalar T with the default filled in.
  template <class T>
  double projection_tolerance() const {
    return projection_tol < 0 ? default_projection_tol<T>() : projection_tol;
  }

  /// The Baumgarte rates with the defaults filled in.
  BaumgarteRates baumgarte_rates() const {
    const double a = baumgarte_alpha >= 0 ? baumgarte_alpha : default_baumgarte_rate;
    return {a, baumgarte_beta >= 0 ? baumgarte_beta : a, baumgarte_gamma >= 0 ? baumgarte_gamma : a};
  }
};

namespace detail {

template <Model Mo>
typename Mo::Scalar rtol_of(const EngineOptions& o) {
  using T = typename Mo::Scalar;
  return o.rank_rtol < 0 ? kernels::default_rank_rtol<T>() : static_cast<T>(o.rank_rtol);
}

template <Model Mo>
constexpr bool on_cuda = models::Builtin::contains<Mo>;

template <Model Mo>
long count_failed(Batch<Mo>& b) {
  long failed = 0;
  for (int i = 0; i < b.size(); ++i) failed += b.status(i) != Status::ok;
  return failed;
}

// The reference backend on a batch: the oracle, system by system.
template <Model Mo>
void reference_evaluate(Batch<Mo>& b, double rtol) {
  if constexpr (std::is_same_v<typename Mo::Scalar, double>) {
    BatchView<Mo> v = b.view();
    for (int i = 0; i < v.N; ++i) {
      Eigen::VectorXd q(Mo::n), qd(Mo::n);
      for (int j = 0; j < Mo::n; ++j) q(j) = b.q(i, j), qd(j) = b.qd(i, j);
      const reference::Result r = reference::evaluate<Mo>(b.params(i), q, qd, b.t(i), {rtol});
      for (int j = 0; j < Mo::n; ++j) {
        v.qdd[std::size_t(j) * v.N + i] = r.qdd(j);
        v.Qc_ideal[std::size_t(j) * v.N + i] = r.Qc_ideal(j);
        v.Qc_nonideal[std::size_t(j) * v.N + i] = r.Qc_nonideal(j);
      }
      for (int j = 0; j < Mo::m; ++j) v.lambda[std::size_t(j) * v.N + i] = r.lambda(j);
      v.rank[i] = r.rank;
      v.status[i] = static_cast<std::int32_t>(r.status);
    }
  } else {
    (void)b, (void)rtol;
    throw BackendUnavailable("the reference backend computes in double only");
  }
}

// The reference backend's run loop: the same model hooks (event, handler,
// residual, constraint rows) but its own numerics (reference::rk4_step,
// bisection for the event instant, reference::project, Baumgarte through
// reference::Options), so that it checks the kernels' loop, its locator and
// the stabilisation.
template <Model Mo>
void reference_integrate(Batch<Mo>& b, const kernels::RunSettings<double>& s) {
  if constexpr (std::is_same_v<typename Mo::Scalar, double>) {
    BatchView<Mo> v = b.view();
    for (int i = 0; i < v.N; ++i) {
      if (b.status(i) != Status::ok) continue;
      const typename Mo::Params p = b.params(i);
      reference::State x{Eigen::VectorXd(Mo::n), Eigen::VectorXd(Mo::n), b.t(i)};
      for (int j = 0; j < Mo::n; ++j) x.q(j) = b.q(i, j), x.qd(j) = b.qd(i, j);
      // Every evaluation (location trials too) lowers min_rank.
      const reference::AccelFn f0 = reference::accel_fn<Mo>(
          p, {s.rank_rtol, s.baumgarte.on, s.baumgarte.alpha, s.baumgarte.beta, s.baumgarte.gamma});
      int min_rank = Mo::m;
      bool bad_rows = false;
      const reference::AccelFn f = [&](const Eigen::VectorXd& q, const Eigen::VectorXd& qd,
                                       double t) {
        reference::Result r = f0(q, qd, t);
        if (r.status == Status::ok) min_rank = std::min(min_rank, r.rank);
        if (r.status == Status::ok && r.inconsistent) bad_rows = true;
        return r;
      };
      std::int64_t steps = b.steps(i), rank_drops = b.rank_drops(i), proj_fails = b.proj_fails(i),
                   inconsistent = b.inconsistent(i);
      int events = b.events(i);
      double rp = b.res_pos(i), rv = b.res_vel(i);
      auto monitor = [&](const reference::State& y) {
        if constexpr (HasResidual<Mo>) {
          if (!s.monitor) return;
          double a, c;
          Mo::residual(y.q.data(), y.qd.data(), y.t, p, a, c);
          rp = std::isnan(a) ? a : std::max(rp, a);
          rv = std::isnan(c) ? c : std::max(rv, c);
        }
      };
      auto event = [&](const reference::State& y) {
        if constexpr (HasEvents<Mo>) return Mo::event(y.q.data(), y.qd.data(), y.t, p);
        return 0.0;
      };
      auto handler_stops = [&](reference::State& y) {
        if constexpr (HasEvents<Mo>)
          return Mo::on_event(y.q.data(), y.qd.data(), y.t, p) == EventAction::stop;
        return false;
      };
      const bool with_events = HasEvents<Mo> && s.events;
      Status st = Status::ok;
      bool rest = false;
      if (steps == 0) monitor(x);
      double g = with_events ? event(x) : 0.0;
      if (with_events && steps == 0 && g == 0.0) {
        st = f(x.q, x.qd, x.t).status;  // evaluable before the handler is asked
        if (st == Status::ok) {
          ++events;
          rest = handler_stops(x);
          g = event(x);
        }
      }
      for (long k = 0; k < s.budget && !rest && st == Status::ok; ++k) {
        const double remaining = s.t_end - x.t;
        if (!(remaining > s.dt * 1e-9)) break;
        if (steps >= s.max_steps) break;
        const double h = remaining < s.dt * (1 + 1e-9) ? remaining : s.dt;
        if (!(x.t + h > x.t)) break;
        const reference::State x0 = x;
        // An RK4 step that also reports whether the event function kept the
        // sign of g at every stage state and at the end (the stage states
        // are seen through the acceleration function; stage 1 is x0).
        auto checked_step = [&](reference::State& y, double step, bool& clean) {
          clean = true;
          int stage = 0;
          const reference::AccelFn fo = [&](const Eigen::VectorXd& q, const Eigen::VectorXd& qd,
                                            double t) {
            if (stage++ > 0) {
              const reference::State z{q, qd, t};
              const double gz = event(z);
              if (!(gz != 0.0 && (gz > 0) == (g > 0))) clean = false;
            }
            return f(q, qd, t);
          };
          const Status r = reference::rk4_step(fo, y, step);
          const double ge = event(y);
          if (!(ge != 0.0 && (ge > 0) == (g > 0))) clean = false;
          return r;
        };
        bool clean = true;
        min_rank = Mo::m;
        bad_rows = false;
        st = with_events && g != 0.0 ? checked_step(x, h, clean) : reference::rk4_step(f, x, h);
        if (st != Status::ok) break;
        if (with_events && !clean) {
          // Bisection on the step size: the longest clean trial step.
          double lo = 0, hi = h;
          x = x0;
          for (int it = 0; it < 200 && hi - lo > s.event_tol; ++it) {
            const double mid = 0.5 * (lo + hi);
            if (!(mid > lo && mid < hi)) break;
            reference::State y = x0;
            bool c = false;
            st = checked_step(y, mid, c);
            if (st != Status::ok) break;
            if (c) lo = mid, x = y;
            else hi = mid;
          }
        }
        reference::Projected pr;
        if (st == Status::ok && s.projection.on) {
          pr = reference::project<Mo>(p, x, s.projection.tol, s.projection.max_iter, s.rank_rtol);
          st = pr.status;
        }
        if constexpr (HasResidual<Mo>) {
          if (st == Status::ok && std::isfinite(s.residual_limit)) {
            double a, c;
            Mo::residual(x.q.data(), x.qd.data(), x.t, p, a, c);
            if (!(a <= s.residual_limit && c <= s.residual_limit)) st = Status::failed_residual;
          }
        }
        if (st != Status::ok) {  // keep the state before this step
          x = x0;
          break;
        }
        ++steps;
        if (min_rank < Mo::m) ++rank_drops;
        if (bad_rows) ++inconsistent;
        if (!pr.converged) ++proj_fails;
        if (with_events) {
          if (!clean) {
            ++events;
            rest = handler_stops(x);
          }
          g = event(x);
        }
        monitor(x);
      }
      if (rest) {
        st = Status::at_rest;
        v.t_stop[i] = x.t;
      } else if (st == Status::ok && steps >= s.max_steps && std::isfinite(s.t_end) &&
                 s.t_end - x.t > s.dt * 1e-9) {
        st = Status::max_steps;
      } else if (st != Status::ok) {
        v.t_stop[i] = x.t;
      }
      for (int j = 0; j < Mo::n; ++j) v.q[std::size_t(j) * v.N + i] = x.q(j), v.qd[std::size_t(j) * v.N + i] = x.qd(j);
      v.t[i] = x.t;
      v.steps[i] = steps;
      v.rank_drops[i] = rank_drops;
      v.inconsistent[i] = inconsistent;
      v.proj_fails[i] = proj_fails;
      v.events[i] = events;
      v.res_pos[i] = rp;
      v.res_vel[i] = rv;
      v.status[i] = static_cast<std::int32_t>(st);
    }
  } else {
    (void)b, (void)s;
    throw BackendUnavailable("the reference backend computes in double only");
  }
}

inline void check_options(const EngineOptions& o) {
  if (o.threads < 0) throw std::invalid_argument("ukb: threads must be >= 0 (0: OpenMP default)");
  if (o.chunk < 1) throw std::invalid_argument("ukb: chunk must be >= 1");
  if (o.cuda_block < 1 || o.cuda_block > 1024)
    throw std::invalid_argument("ukb: cuda_block must be in [1, 1024]");
  if (!(o.rank_rtol < 1)) throw std::invalid_argument("ukb: rank_rtol must be < 1 (< 0: default)");
}

inline void check_run(const RunOptions& r) {
  if (!(r.dt > 0) || !std::isfinite(r.dt))
    throw std::invalid_argument("ukb: the time step must be finite and > 0");
  if (std::isnan(r.t_end)) throw std::invalid_argument("ukb: the end time must not be NaN");
  if (r.max_steps < 0) throw std::invalid_argument("ukb: the step limit must be >= 0");
  if (!(r.event_tol > 0)) throw std::invalid_argument("ukb: the event tolerance must be > 0");
  for (double rate : {r.baumgarte_alpha, r.baumgarte_beta, r.baumgarte_gamma})
    if (!std::isfinite(rate))
      throw std::invalid_argument("ukb: the Baumgarte rates must be finite (< 0: default)");
  if (r.stabilization == Stabilization::baumgarte && r.baumgarte_rates().fastest() * r.dt > 1)
    throw std::invalid_argument(
        "ukb: Baumgarte rates too fast for the time step: max(2 alpha, beta, gamma) * dt = " +
        std::to_string(r.baumgarte_rates().fastest() * r.dt) +
        " must be <= 1 (the stabilised drift would be stiff for RK4); lower the rates or dt");
  if (r.projection_iters < 1)
    throw std::invalid_argument("ukb: the projection needs at least 1 iteration");
  if (!(r.residual_limit > 0))
    throw std::invalid_argument("ukb: the residual limit must be > 0 (+inf: none)");
}

// The stabilisation settings of a run, resolved (defaults filled in).
template <Model Mo>
void stabilization_settings(const RunOptions& r, kernels::RunSettings<typename Mo::Scalar>& s) {
  using T = typename Mo::Scalar;
  if (r.stabilization != Stabilization::none && !HasConstraintRows<Mo>)
    throw std::invalid_argument(std::string("ukb: stabilization '") +
                                std::string(to_string(r.stabilization)) + "' needs the model's "
                                "constraint_rows, which '" + Mo::name + "' does not state");
  // Below 4 epsilon of the scalar no correction could meet the tolerance.
  const double tol = r.projection_tolerance<T>();
  if (!(tol >= 4 * static_cast<double>(std::numeric_limits<T>::epsilon()) && tol < 1))
    throw std::invalid_argument("ukb: the projection tolerance " + std::to_string(tol) +
                                " must be in [4 epsilon of the scalar type, 1) (< 0: default)");
  const BaumgarteRates rates = r.baumgarte_rates();
  s.baumgarte = {r.stabilization == Stabilization::baumgarte, static_cast<T>(rates.alpha),
                 static_cast<T>(rates.beta), static_cast<T>(rates.gamma)};
  s.projection = {r.stabilization == Stabilization::projection, static_cast<T>(tol),
                  r.projection_iters};
}

template <Model Mo>
long count_active(Batch<Mo>& b, const kernels::RunSettings<typename Mo::Scalar>& s) {
  const BatchView<Mo> v = b.view();
  long active = 0;
  for (int i = 0; i < v.N; ++i) active += kernels::run_active(v.status[i], v.t[i], v.steps[i], s);
  return active;
}

// Runs the shared integration body (or the reference loop) on a backend.
template <Model Mo>
void integrate(Batch<Mo>& b, Backend be, const RunOptions& r, long budget, const EngineOptions& o,
               kernels::RunSettings<typename Mo::Scalar>& s) {
  using T = typename Mo::Scalar;
  check_run(r);
  if (budget < 0) throw std::invalid_argument("ukb: the step count must be >= 0");
  check_options(o);
  s = {static_cast<T>(r.dt), static_cast<T>(r.t_end), r.max_steps, budget,
       static_cast<T>(r.event_tol), rtol_of<Mo>(o), r.events, r.monitor, {}, {},
       static_cast<T>(r.residual_limit)};
  if (!(s.residual_limit > T(0)))
    throw std::invalid_argument("ukb: the residual limit " + std::to_string(r.residual_limit) +
                                " is zero in the scalar type of the model");
  stabilization_settings<Mo>(r, s);
  switch (be) {
    case Backend::reference:
      if constexpr (std::is_same_v<T, double>) {
        reference_integrate(b, s);
      } else {
        throw BackendUnavailable("the reference backend computes in double only");
      }
      return;
    case Backend::cpu:
      if (o.simd) {
        cpu::integrate_lanes<Mo>(b.view(), s, o.threads, o.chunk);
      } else {
        cpu::parallel_for(b.size(), o.threads, o.chunk, kernels::IntegrateBody<Mo>{b.view(), s});
      }
      return;
    case Backend::cuda:
      if constexpr (on_cuda<Mo>) {
        cuda::integrate_batch<Mo>(b.view(), s, o.cuda_block);
        return;
      } else {
        throw BackendUnavailable(std::string("the cuda backend runs the built-in models only; for '") +
                                 Mo::name + "' use the cpu backend");
      }
  }
}

}  // namespace detail

/// Evaluates every system at its current state (outputs qdd, Qc_ideal,
/// Qc_nonideal, lambda, rank and status). Returns the number of failed systems.
template <Model Mo>
long evaluate(Batch<Mo>& b, Backend be, const EngineOptions& o = {}) {
  detail::check_options(o);
  b.allocate_outputs();
  const auto rtol = detail::rtol_of<Mo>(o);
  switch (be) {
    case Backend::reference:
      detail::reference_evaluate(b, rtol);
      return detail::count_failed(b);
    case Backend::cpu: {
      const kernels::EvaluateBody<Mo> body{b.view(), rtol};
      cpu::parallel_for(b.size(), o.threads, o.chunk, body);
      return detail::count_failed(b);
    }
    case Backend::cuda:
      if constexpr (detail::on_cuda<Mo>) {
        return cuda::evaluate_batch<Mo>(b.view(), rtol, o.cuda_block);
      } else {
        throw BackendUnavailable(std::string("the cuda backend runs the built-in models only; for '") +
                                 Mo::name + "' use the cpu backend");
      }
  }
  return 0;
}

/// `steps` RK4 steps of size dt for every system whose status is ok. A
/// system whose step fails keeps its last good state and gets the status.
/// No events are located and no residuals tracked (see `advance`). Returns
/// the number of systems whose status is not ok afterwards.
template <Model Mo>
long step(Batch<Mo>& b, Backend be, typename Mo::Scalar dt, long steps,
          const EngineOptions& o = {}) {
  kernels::RunSettings<typename Mo::Scalar> s;
  detail::integrate(b, be, {.dt = double(dt), .events = false, .monitor = false}, steps, o, s);
  return detail::count_failed(b);
}

/// RK4 steps of size dt until every system reaches t_end (its last step
/// shortened to land on t_end exactly). t_end must be finite. A system whose
/// time is so large that dt no longer advances it stops there. No events,
/// no residuals (see `advance`). Returns the number of systems not ok.
template <Model Mo>
long run_until(Batch<Mo>& b, Backend be, typename Mo::Scalar dt, typename Mo::Scalar t_end,
               const EngineOptions& o = {}) {
  if (!std::isfinite(static_cast<double>(t_end)))
    throw std::invalid_argument("ukb: the end time must be finite");
  kernels::RunSettings<typename Mo::Scalar> s;
  detail::integrate(b, be,
                    {.dt = double(dt), .t_end = double(t_end), .events = false, .monitor = false},
                    std::numeric_limits<long>::max(), o, s);
  return detail::count_failed(b);
}

/// The run of an ensemble: every active system (status ok, t < r.t_end,
/// fewer than r.max_steps steps since set_state) takes RK4 steps, with event
/// location and residual monitoring where the model provides them (see
/// kernels::IntegrateBody), until it is done or has taken `budget` more
/// steps in this call. Splitting a run into calls does not change its
/// outcome. Returns the number of systems still active.
template <Model Mo>
long advance(Batch<Mo>& b, Backend be, const RunOptions& r,
             long budget = std::numeric_limits<long>::max(), const EngineOptions& o = {}) {
  kernels::RunSettings<typename Mo::Scalar> s;
  detail::integrate(b, be, r, budget, o, s);
  return detail::count_active(b, s);
}

}  // namespace ukb
