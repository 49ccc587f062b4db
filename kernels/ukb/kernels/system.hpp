/// @file system.hpp
/// @brief What one thread (or one loop iteration) does for system i: gather
///        its state into local arrays, evaluate or integrate, scatter back.
///        The bodies are shared by the CPU backend, the CUDA kernel and the
///        CPU emulation of the CUDA launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "ukb/batch.hpp"
#include "ukb/kernels/stabilize.hpp"
#include "ukb/kernels/uk.hpp"

namespace ukb::kernels {

/// Evaluates system i at its current state and stores the outputs.
template <Model Mo>
struct EvaluateBody {
  using T = typename Mo::Scalar;
  BatchView<Mo> v;
  T rank_rtol;

  UKB_HD void operator()(int i) const {
    constexpr int n = Mo::n, m = Mo::m;
    const int N = v.N;
    T q[n], qd[n];
    for (int j = 0; j < n; ++j) {
      q[j] = v.q[std::size_t(j) * N + i];
      qd[j] = v.qd[std::size_t(j) * N + i];
    }
    const typename Mo::Params p = load_params<Mo>(v, i);
    Accel<Mo> a;
    const Status st = uk_accel<Mo>(q, qd, v.t[i], p, rank_rtol, a);
    const T nan = std::numeric_limits<T>::quiet_NaN();
    const bool ok = st == Status::ok;
    for (int j = 0; j < n; ++j) {
      v.qdd[std::size_t(j) * N + i] = ok ? a.qdd[j] : nan;
      v.Qc_ideal[std::size_t(j) * N + i] = ok ? a.Qc_ideal[j] : nan;
      v.Qc_nonideal[std::size_t(j) * N + i] = ok ? a.Qc_nonideal[j] : nan;
    }
    for (int j = 0; j < m; ++j) v.lambda[std::size_t(j) * N + i] = ok ? a.lambda[j] : nan;
    v.rank[i] = ok ? a.rank : 0;
    v.status[i] = static_cast<std::int32_t>(st);
  }
};

/// What one integration call does for every system (see IntegrateBody).
template <class T>
struct RunSettings {
  T dt{};               ///< step size (> 0)
  T t_end{};            ///< end time; +infinity for none
  long max_steps = 0;   ///< limit on the accepted steps since set_state
  long budget = 0;      ///< at most this many steps in this call
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

  /// The settings of the evaluations of one step; `min_rank` collects the
  /// smallest rank of B seen, `inconsistent` whether any evaluation was.
  UKB_HD StageSettings<T> stage(int* min_rank, bool* inconsistent) const {
    return {rank_rtol, baumgarte, min_rank, inconsistent};
  }
};

/// True while a system still has work: status ok, end time not reached
/// (within dt * 1e-9) and fewer than max_steps steps taken.
template <class T>
UKB_HD inline bool run_active(std::int32_t status, T t, std::int64_t steps,
                              const RunSettings<T>& s) {
  return status == static_cast<std::int32_t>(Status::ok) && s.t_end - t > s.dt * T(1e-9) &&
         steps < s.max_steps;
}

/// True when the event function g is on the side of g0 (> 0 or < 0) and
/// not zero: a stage or an end state that does not cross the event.
template <class T>
UKB_HD inline bool same_side(T g, T g0) {
  return g != T(0) && (g > T(0)) == (g0 > T(0));
}

/// One RK4 step of size h from (q, q', t) that also tells whether it is
/// clean: the model's event function keeps the sign of g0 (!= 0) at the
/// states of stages 2, 3 and 4 and at the end. A step that is not clean
/// crosses an event (for Coulomb friction: the sliding velocity reaches zero,
/// where the friction force jumps), and RK4 must not be trusted across it.
template <Model Mo>
UKB_HD Status event_step(typename Mo::Scalar* q, typename Mo::Scalar* qd, typename Mo::Scalar& t,
                         typename Mo::Scalar h, typename Mo::Scalar g0,
                         const typename Mo::Params& p,
                         const StageSettings<typename Mo::Scalar>& ss, bool& clean) {
  using T = typename Mo::Scalar;
  clean = true;
  auto check = [&](const T* qs, const T* vs, T ts) {
    if (!same_side(Mo::event(qs, vs, ts, p), g0)) clean = false;
  };
  const Status st = rk4_step<Mo>(q, qd, t, h, p, ss, check);
  if (st == Status::ok) check(q, qd, t);
  return st;
}

/// Locates the event inside a step of size h from (q0, qd0, t0) whose event
/// function is g0 != 0 at the start and which is not clean (event_step):
/// bisection on the step size between the longest clean trial step (lo,
/// initially 0) and the shortest unclean one (hi, initially h), each trial an
/// RK4 step from the start, until hi - lo <= tol. On return (q, qd, t) hold
/// the state at t0 + lo: the last instant reached without crossing the event,
/// within tol of the first that crosses it. The trial steps' ranks of B
/// lower *min_rank; an inconsistent trial evaluation sets *inconsistent.
template <Model Mo>
UKB_HD Status locate_event(const typename Mo::Scalar* q0, const typename Mo::Scalar* qd0,
                           typename Mo::Scalar t0, typename Mo::Scalar g0, typename Mo::Scalar h,
                           const typename Mo::Params& p, const RunSettings<typename Mo::Scalar>& s,
                           typename Mo::Scalar* q, typename Mo::Scalar* qd,
                           typename Mo::Scalar& t, int* min_rank, bool* inconsistent) {
  using T = typename Mo::Scalar;
  constexpr int n = Mo::n;
  for (int j = 0; j < n; ++j) q[j] = q0[j], qd[j] = qd0[j];
  t = t0;
  T lo = T(0), hi = h;
  for (int it = 0; it < 200 && hi - lo > s.event_tol; ++it) {
    const T x = lo + T(0.5) * (hi - lo);
    if (!(x > lo && x < hi)) break;  // the bracket is at the resolution of T
    T qx[n], vx[n], tx = t0;
    for (int j = 0; j < n; ++j) qx[j] = q0[j], vx[j] = qd0[j];
    bool clean = false;
    const Status st = event_step<Mo>(qx, vx, tx, x, g0, p, s.stage(min_rank, inconsistent), clean);
    if (st != Status::ok) return st;
    if (clean) {
      lo = x;
      for (int j = 0; j < n; ++j) q[j] = qx[j], qd[j] = vx[j];
      t = tx;
    } else {
      hi = x;
    }
  }
  return Status::ok;
}

/// One system's integration within a call of IntegrateBody: its state in
/// local arrays and the decisions around each RK4 step, split so that the
/// step itself can be taken for one system (IntegrateBody) or for several
/// in SIMD lanes (cpu/simd.hpp) with the same decisions per system.
template <Model Mo>
struct SystemRun {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n;
  T q[n], qd[n], t{}, rp{}, rv{};
  std::int64_t steps = 0, rank_drops = 0, proj_fails = 0, inconsistent = 0;
  std::int32_t events = 0;
  typename Mo::Params p{};
  Status st = Status::ok;
  bool rest = false;
  T g = T(0);  ///< the event function at (q, q', t) (with events)
  // The step being taken: its start and size.
  T q0[n], qd0[n], t0{}, h{};

  UKB_HD void monitor(const RunSettings<T>& s) {
    if constexpr (HasResidual<Mo>) {
      if (!s.monitor) return;
      T a, b;
      Mo::residual(q, qd, t, p, a, b);
      rp = a > rp || a != a ? a : rp;  // NaN propagates
      rv = b > rv || b != b ? b : rv;
    } else {
      (void)s;
    }
  }

  // True where the residuals of (q, q', t) are within residual_limit.
  UKB_HD bool within_limit(const RunSettings<T>& s) const {
    if constexpr (HasResidual<Mo>) {
      if (!(s.residual_limit < std::numeric_limits<T>::infinity())) return true;
      T a, b;
      Mo::residual(q, qd, t, p, a, b);
      return a <= s.residual_limit && b <= s.residual_limit;  // false for NaN
    } else {
      (void)s;
      return true;
    }
  }

  /// Gathers system i; false (and nothing to do) when its status is not ok.
  /// A system at its start is monitored, and with g exactly zero its
  /// handler is consulted once (see IntegrateBody).
  UKB_HD bool load(const BatchView<Mo>& v, int i, const RunSettings<T>& s) {
    const int N = v.N;
    if (v.status[i] != static_cast<std::int32_t>(Status::ok)) return false;
    for (int j = 0; j < n; ++j) {
      q[j] = v.q[std::size_t(j) * N + i];
      qd[j] = v.qd[std::size_t(j) * N + i];
    }
    t = v.t[i], rp = v.res_pos[i], rv = v.res_vel[i];
    steps = v.steps[i], rank_drops = v.rank_drops[i], proj_fails = v.proj_fails[i];
    inconsistent = v.inconsistent[i];
    events = v.events[i];
    p = load_params<Mo>(v, i);
    if (steps == 0) monitor(s);
    if constexpr (HasEvents<Mo>) {
      if (s.events) {
        g = Mo::event(q, qd, t, p);
        if (steps == 0 && g == T(0)) {
          // A system that cannot be evaluated fails before its handler is asked.
          Accel<Mo> a;
          st = uk_accel<Mo>(q, qd, t, p, s.rank_rtol, a, s.baumgarte);
          if (st == Status::ok) {
            ++events;
            rest = Mo::on_event(q, qd, t, p) == EventAction::stop;
            g = Mo::event(q, qd, t, p);
          }
        }
      }
    }
    return true;
  }

  /// Whether another step is to be taken; if so, its size h and its start
  /// (q0, qd0, t0) are set.
  UKB_HD bool begin(const RunSettings<T>& s) {
    if (rest || st != Status::ok) return false;
    const T remaining = s.t_end - t;
    if (!(remaining > s.dt * T(1e-9))) return false;  // reached t_end
    if (steps >= s.max_steps) return false;
    h = remaining < s.dt * T(1 + 1e-9) ? remaining : s.dt;  // last step shortened
    if (!(t + h > t)) return false;  // t too large for dt to advance it: stop, never loop
    for (int j = 0; j < n; ++j) q0[j] = q[j], qd0[j] = qd[j];
    t0 = t;
    return true;
  }

  /// True when the step is to be checked for the event (event_step).
  UKB_HD bool checks_event(const RunSettings<T>& s) const {
    if constexpr (HasEvents<Mo>) {
      return s.events && g != T(0);
    } else {
      (void)s;
      return false;
    }
  }

  /// After the RK4 step from (q0, qd0, t0) to (q, q', t) with status
  /// `step`: the event's location, the projection, the residual limit, the
  /// counters, the handler and the monitor. `clean`, `min_rank` and
  /// `bad_rows` come from the step's evaluations (event_step).
  UKB_HD void end(const RunSettings<T>& s, Status step, bool clean, int min_rank, bool bad_rows) {
    st = step;
    if (st != Status::ok) return;  // the failed step left the state as it was
    if constexpr (HasEvents<Mo>) {
      if (s.events && !clean)
        st = locate_event<Mo>(q0, qd0, t0, g, h, p, s, q, qd, t, &min_rank, &bad_rows);
    }
    bool converged = true;
    if (st == Status::ok && s.projection.on)
      st = project<Mo>(q, qd, t, p, s.rank_rtol, s.projection, converged);
    if (st == Status::ok && !within_limit(s)) st = Status::failed_residual;
    if (st != Status::ok) {  // keep the state before this step
      for (int j = 0; j < n; ++j) q[j] = q0[j], qd[j] = qd0[j];
      t = t0;
      return;
    }
    ++steps;
    rank_drops += min_rank < Mo::m ? 1 : 0;
    inconsistent += bad_rows ? 1 : 0;
    proj_fails += converged ? 0 : 1;
    if constexpr (HasEvents<Mo>) {
      if (s.events) {
        if (!clean) {
          ++events;
          rest = Mo::on_event(q, qd, t, p) == EventAction::stop;
        }
        g = Mo::event(q, qd, t, p);
      }
    }
    monitor(s);
  }

  /// Scatters system i back with its final status.
  UKB_HD void store(const BatchView<Mo>& v, int i, const RunSettings<T>& s) {
    const int N = v.N;
    if (rest) {
      st = Status::at_rest;
      v.t_stop[i] = t;
    } else if (st == Status::ok && steps >= s.max_steps && s.t_end - s.t_end == T(0) &&
               s.t_end - t > s.dt * T(1e-9)) {
      st = Status::max_steps;  // the step limit came before a finite t_end
    } else if (st != Status::ok) {
      v.t_stop[i] = t;  // a failure: the time of the last good state
    }
    for (int j = 0; j < n; ++j) {
      v.q[std::size_t(j) * N + i] = q[j];
      v.qd[std::size_t(j) * N + i] = qd[j];
    }
    v.t[i] = t;
    v.steps[i] = steps;
    v.rank_drops[i] = rank_drops;
    v.inconsistent[i] = inconsistent;
    v.proj_fails[i] = proj_fails;
    v.events[i] = events;
    v.res_pos[i] = rp;
    v.res_vel[i] = rv;
    v.status[i] = static_cast<std::int32_t>(st);
  }
};

/// Integrates system i with RK4 (DESIGN.md §2: the state stays in local
/// arrays for the whole call; global memory is read once and written once).
/// Steps of dt, the last one shortened to end exactly at t_end, until the
/// system is no longer run_active or `budget` steps are taken. A system that
/// reaches max_steps before a finite t_end gets the status max_steps.
///
/// With `events` (and a model with events): a step from a state whose event
/// function g is not zero that is not clean (event_step: g changes sign at
/// a stage or at the end) is replaced by the step to the located event
/// (locate_event), and the model's handler then resumes the system or stops
/// it for good (status at_rest, t_stop = the event time). From a state with
/// g exactly zero (a handler has just set the sliding velocity to zero) the
/// next step is taken as it is. A system that starts with g exactly zero
/// consults the handler once first (after one evaluation: a system that
/// cannot be evaluated gets its failed status instead).
/// `steps` counts accepted steps (the trials of the location are not
/// counted), `events` the calls of the handler (located events and the
/// start with g exactly zero). With `monitor` (and a model with
/// `residual`) res_pos and res_vel hold the largest residuals seen at the
/// initial state and after every step.
///
/// Stabilisation: with `baumgarte` on, every evaluation corrects b
/// (baumgarte_rhs); with `projection` on, every accepted step (at the
/// located event, if any, before the handler) is followed by project();
/// `proj_fails` counts the steps whose projection did not converge; the
/// event function is evaluated after the projection, so a sign change due
/// to the projection alone is not located. Every
/// accepted step in which an evaluation (location trials included) found
/// rank(B) < m counts in `rank_drops`, every one with an inconsistent
/// evaluation (Accel::inconsistent) in `inconsistent`.
///
/// A system whose status is not ok is left alone; one whose step (or event
/// location, or projection) fails keeps its last good state and gets the
/// status, and t_stop the time of that state (where the failing step
/// began). With a finite `residual_limit` (and a model with `residual`) a
/// step whose end state has a residual above the limit (or NaN) fails with
/// failed_residual. The outcome does not depend on how the steps are split
/// among calls.
template <Model Mo>
struct IntegrateBody {
  using T = typename Mo::Scalar;
  BatchView<Mo> v;
  RunSettings<T> s;

  UKB_HD void operator()(int i) const {
    SystemRun<Mo> r;
    if (!r.load(v, i, s)) return;
    for (long k = 0; k < s.budget && r.begin(s); ++k) {
      bool clean = true, bad_rows = false;
      int min_rank = Mo::m;
      const StageSettings<T> ss = s.stage(&min_rank, &bad_rows);
      Status step;
      if constexpr (HasEvents<Mo>) {
        if (r.checks_event(s)) {
          step = event_step<Mo>(r.q, r.qd, r.t, r.h, r.g, r.p, ss, clean);
        } else {
          step = rk4_step<Mo>(r.q, r.qd, r.t, r.h, r.p, ss);
        }
      } else {
        step = rk4_step<Mo>(r.q, r.qd, r.t, r.h, r.p, ss);
      }
      r.end(s, step, clean, min_rank, bad_rows);
    }
    r.store(v, i, s);
  }
};

}  // namespace ukb::kernels
