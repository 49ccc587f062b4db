/// @file run.hpp
/// @brief The run loop shared by every backend but the reference: what one
///        GPU thread does for its system, and what a CPU thread does for a
///        range of systems, one at a time or several side by side in SIMD
///        lanes.
///
/// Three parts, after Boost.Odeint's split of stepper, controller and
/// integrate loop:
/// - the steppers (rk4.hpp, dopri5.hpp) take one step from a state;
/// - a run per system decides which step to take next and what follows it
///   (projection, residual limit, counters, the event handler): SystemRun
///   for RK4 (fixed steps, control.hpp, and the bisection of a located
///   event, events.hpp), AdaptiveRun for Dormand–Prince (error control, the
///   event located on the dense output);
/// - integrate_systems takes the steps: for one system at a time, or for the
///   systems in a pack's lanes in lockstep, a lane taking the next pending
///   system as soon as its own is done. Every lane computes what the scalar
///   code computes for its system, bit for bit (lanes.hpp), so results do
///   not depend on which systems share a pack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ukb/batch.hpp"
#include "ukb/kernels/control.hpp"
#include "ukb/kernels/dopri5.hpp"
#include "ukb/kernels/events.hpp"
#include "ukb/kernels/rk4.hpp"
#include "ukb/kernels/stabilize.hpp"
#include "ukb/kernels/uk.hpp"
#include "ukb/settings.hpp"

namespace ukb::kernels {

/// Evaluates system i at its current state and stores the outputs of
/// `evaluate` (NaN where the status is not ok).
template <Model Mo>
struct EvaluateBody {
  using T = typename Mo::Scalar;
  BatchView<Mo> v;
  EvalSettings<T> s;

  UKB_HD void operator()(int i) const {
    constexpr int n = Mo::n, m = Mo::m;
    const int N = v.N;
    T q[n], qd[n];
    for (int j = 0; j < n; ++j) {
      q[j] = v.q[soa(j, i, N)];
      qd[j] = v.qd[soa(j, i, N)];
    }
    const typename Mo::Params p = load_params<Mo>(v, i);
    Accel<Mo> a;
    const Status st = uk_accel<Mo>(q, qd, v.t[i], p, s.rank_rtol, a, s.baumgarte);
    const T nan = std::numeric_limits<T>::quiet_NaN();
    const bool ok = st == Status::ok;
    for (int j = 0; j < n; ++j) {
      v.qdd[soa(j, i, N)] = ok ? a.qdd[j] : nan;
      v.Qc_ideal[soa(j, i, N)] = ok ? a.Qc_ideal[j] : nan;
      v.Qc_nonideal[soa(j, i, N)] = ok ? a.Qc_nonideal[j] : nan;
    }
    for (int j = 0; j < m; ++j) v.lambda[soa(j, i, N)] = ok ? a.lambda[j] : nan;
    v.rank[i] = ok ? a.rank : 0;
    v.status[i] = static_cast<std::int32_t>(st);
  }
};

/// What the evaluations of one step found about B (the runs' feed).
struct StepRanks {
  int min = 0, max = 0;       ///< smallest and largest rank(B)
  bool inconsistent = false;  ///< an evaluation was inconsistent
  bool marginal = false;      ///< a rank decision was marginal
};

/// What a run holds of its system in local storage (registers on a GPU):
/// the fields that every step reads or writes. The counters and maxima that
/// change rarely (events, the rank counters, inconsistent steps, projection
/// failures, rejected steps, evaluations, the largest residuals, t_stop)
/// stay in the batch and are changed there, where they change: carried
/// through every step they took a GPU thread's registers from the step's
/// own arithmetic (bench/README.md, "Registers of the run loop").
template <Model Mo>
struct RunState {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n;
  T q[n];                   ///< positions
  T qd[n];                  ///< velocities
  T t;                      ///< time
  std::int32_t status;      ///< Status
  std::int32_t ctrl;        ///< the run bits of the `ctrl` field
  std::int32_t rank_prev;   ///< 1 + the smallest rank(B) of the last step; 0 before the first
  std::int64_t steps;       ///< accepted steps since set_state

  UKB_HD void load(const BatchView<Mo>& v, int i) {
    for (int j = 0; j < n; ++j) q[j] = v.q[soa(j, i, v.N)], qd[j] = v.qd[soa(j, i, v.N)];
    t = v.t[i];
    status = v.status[i];
    ctrl = v.ctrl[i];
    rank_prev = v.rank_prev[i];
    steps = v.steps[i];
  }
  UKB_HD void store(const BatchView<Mo>& v, int i) const {
    for (int j = 0; j < n; ++j) v.q[soa(j, i, v.N)] = q[j], v.qd[soa(j, i, v.N)] = qd[j];
    v.t[i] = t;
    v.status[i] = status;
    v.ctrl[i] = ctrl;
    v.rank_prev[i] = rank_prev;
    v.steps[i] = steps;
  }
  /// True while the status is ok.
  UKB_HD bool ok() const { return status == static_cast<std::int32_t>(Status::ok); }
};

/// What SystemRun and AdaptiveRun share: the system's state in local
/// storage (RunState), its parameters, and what happens around a step (the
/// start of a system, the projection, the limits, the counters, the event
/// handler, the residual monitor, the final status). The batch view `v`
/// given to load, feed and store is the one the system lives in; the
/// counters are changed there (RunState says why).
template <Model Mo>
struct RunCommon {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m;
  /// Bits of the `ctrl` field.
  static constexpr std::int32_t started_bit = 1;  ///< the start of the system is done (monitor, handler)
  static constexpr std::int32_t fsal_bit = 2;     ///< dopri5: the acceleration at the state is evaluated and counted
  static constexpr std::int32_t rejected_bit = 4; ///< dopri5: the last step was rejected
  RunState<Mo> f;                ///< the system's state
  int sys = -1;                  ///< the system's index in the batch
  typename Mo::Params p{};
  bool rest = false;             ///< the handler stopped the system for good
  T g = T(0);                    ///< the event function at (q, q', t) (with events)
  // What the evaluations since the last accepted step found about B.
  int min_rank = m;              ///< smallest rank of B (trials included)
  int max_rank = 0;              ///< largest rank of B (trials included)
  bool bad_rows = false;         ///< an evaluation was inconsistent
  bool marginal = false;         ///< a rank decision was marginal
  long begun = 0;                ///< steps begun in this call (the budget)

  /// Gathers system i; false (and nothing to do) when its status is not ok.
  /// A system at its start is monitored, and with g exactly zero its
  /// handler is consulted once.
  UKB_HD bool load(const BatchView<Mo>& v, int i, const RunSettings<T>& s) {
    f.load(v, i);
    if (!f.ok()) return false;
    sys = i;
    p = load_params<Mo>(v, i);
    rest = false;
    begun = 0;
    g = T(0);
    const bool start = f.steps == 0 && !(f.ctrl & started_bit);
    f.ctrl |= started_bit;
    if (start) monitor(v, s);
    if constexpr (HasEvents<Mo>) {
      if (s.events) {
        g = Mo::event(f.q, f.qd, f.t, p);
        if (!(g - g == T(0))) {  // NaN or infinite: no step could be checked against it
          f.status = static_cast<std::int32_t>(Status::failed_nonfinite);
          return true;
        }
        if (start && g == T(0)) {
          // A system that cannot be evaluated fails before its handler is asked.
          Accel<Mo> a;
          const Status st = uk_eval_rare<Mo>(f.q, f.qd, f.t, p, s.rank_rtol, a, s.baumgarte);
          add(v.rhs_evals, 1);
          if (st == Status::ok) {
            add(v.events, 1);
            rest = Mo::on_event(f.q, f.qd, f.t, p) == EventAction::stop;
            g = Mo::event(f.q, f.qd, f.t, p);
            if (!rest && !(g - g == T(0))) f.status = static_cast<std::int32_t>(Status::failed_nonfinite);
          } else {
            f.status = static_cast<std::int32_t>(st);
          }
        }
      }
    }
    return true;
  }

  /// Scatters the system back (into v, at the index load took) with its
  /// final status.
  UKB_HD void store(const BatchView<Mo>& v, const RunSettings<T>& s) {
    if (rest) {
      f.status = static_cast<std::int32_t>(Status::at_rest);
      v.t_stop[sys] = f.t;
    } else if (f.ok() && f.steps >= s.max_steps && s.t_end - s.t_end == T(0) &&
               s.t_end - f.t > s.dt * T(policy::end_slack)) {
      f.status = static_cast<std::int32_t>(Status::max_steps);  // the step limit came before a finite t_end
    } else if (!f.ok()) {
      v.t_stop[sys] = f.t;  // a failure: the time of the last good state
    }
    f.store(v, sys);
  }

 protected:
  // Adds k to the system's entry of a counter of the batch (none where the
  // batch does not have it: the monitors of adaptive steps).
  template <class I>
  UKB_HD void add(I* counter, int k) const {
    if (counter) counter[sys] += k;
  }

  UKB_HD void reset_ranks() {
    min_rank = m;
    max_rank = 0;
    bad_rows = false;
    marginal = false;
  }

  UKB_HD void add_ranks(const StepRanks& k) {
    min_rank = k.min < min_rank ? k.min : min_rank;
    max_rank = k.max > max_rank ? k.max : max_rank;
    bad_rows = bad_rows || k.inconsistent;
    marginal = marginal || k.marginal;
  }

  UKB_HD void set(const T* q, const T* qd, T t) {
    for (int j = 0; j < n; ++j) f.q[j] = q[j], f.qd[j] = qd[j];
    f.t = t;
  }

  // What follows an accepted step (or a located event) whose end state is
  // in f: the rank check, the projection and the residual limit; a status
  // other than ok when one of them fails (the caller restores the state
  // before the step). `converged`: the projection converged.
  UKB_HD Status settle(const RunSettings<T>& s, bool& converged) {
    converged = true;
    Status st = Status::ok;
    if (s.expected_rank >= 0 && (min_rank != s.expected_rank || max_rank != s.expected_rank))
      st = Status::failed_rank;
    else if (s.projection.on) st = project_step<Mo>(f.q, f.qd, f.t, p, s.rank_rtol, s.projection, converged);
    if (st == Status::ok && !within_limit(s)) st = Status::failed_residual;
    return st;
  }

  // The counters of a settled step, then the handler (`located`: the step
  // ended at a located event) and the monitor.
  UKB_HD void count(const BatchView<Mo>& v, const RunSettings<T>& s, bool converged, bool located) {
    ++f.steps;
    const bool changed = max_rank != min_rank || (f.rank_prev != 0 && f.rank_prev != min_rank + 1);
    f.rank_prev = min_rank + 1;
    if (min_rank < m) add(v.rank_drops, 1);
    if (changed) add(v.rank_changes, 1);
    if (marginal) add(v.rank_marginal, 1);
    if (bad_rows) add(v.inconsistent, 1);
    if (!converged) add(v.proj_fails, 1);
    if constexpr (HasEvents<Mo>) {
      if (s.events) {
        if (located) {
          add(v.events, 1);
          rest = Mo::on_event(f.q, f.qd, f.t, p) == EventAction::stop;
        }
        g = Mo::event(f.q, f.qd, f.t, p);
        // An event function that is NaN or infinite at the new state (0/0 in
        // floating point) would make every step after it look like a
        // crossing located at its start: the system fails there instead.
        if (!rest && !(g - g == T(0))) f.status = static_cast<std::int32_t>(Status::failed_nonfinite);
      }
    } else {
      (void)located;
    }
    monitor(v, s);
  }

  // The largest residuals seen, in the batch (a NaN stays).
  UKB_HD void monitor(const BatchView<Mo>& v, const RunSettings<T>& s) {
    if constexpr (HasResidual<Mo>) {
      if (!s.monitor) return;
      T a, b;
      Mo::residual(f.q, f.qd, f.t, p, a, b);
      if (a > v.res_pos[sys] || a != a) v.res_pos[sys] = a;
      if (b > v.res_vel[sys] || b != b) v.res_vel[sys] = b;
    } else {
      (void)v, (void)s;
    }
  }

  // True where the residuals of the state are within residual_limit.
  UKB_HD bool within_limit(const RunSettings<T>& s) const {
    if constexpr (HasResidual<Mo>) {
      if (!(s.residual_limit < std::numeric_limits<T>::infinity())) return true;
      T a, b;
      Mo::residual(f.q, f.qd, f.t, p, a, b);
      return a <= s.residual_limit && b <= s.residual_limit;  // false for NaN
    } else {
      (void)s;
      return true;
    }
  }
};

/// The parameters of a pack's lanes (ParamsOf) and the system each lane's
/// are from (-1: none yet), so that a lane's are set only when it changes.
template <Model Mo, class V>
struct LaneParams {
  ParamsOf<Mo, V> P{};
  int of[Lanes<V>::width];
  LaneParams() {
    for (int& x : of) x = -1;
  }
  /// Lane l takes the parameters p of system i.
  void set(int l, int i, const typename Mo::Params& p) {
    if (of[l] == i) return;
    P.set(l, p);
    of[l] = i;
  }
};
struct NoLaneParams {};

/// The inputs of a pack's step, gathered from the lanes' runs (a lane
/// without a system takes the lead lane's): the start (q, q', t), the step
/// size and the event function at the start, and which lanes are checked.
template <Model Mo, class V>
struct LaneStart {
  using Lane = Lanes<V>;
  using T = typename Mo::Scalar;
  static constexpr int W = Lane::width, n = Mo::n;
  V q[n], qd[n], t, h, g0;
  MaskOf<V> checks;

  template <class Run>
  LaneStart(const Run* r, const bool* live, int lead, const RunSettings<T>& s) {
    const T* q0[W];
    const T* qd0[W];
    T t0[W], hs[W], gs[W];
    bool c[W];
    for (int l = 0; l < W; ++l) {
      const Run& x = r[live[l] ? l : lead];
      q0[l] = x.q0, qd0[l] = x.qd0, t0[l] = x.t0, hs[l] = x.size(), gs[l] = x.g;
      c[l] = live[l] && r[l].checked(s);
    }
    Lane::template gather<n>(q, q0);
    Lane::template gather<n>(qd, qd0);
    t = Lane::gather(t0);
    h = Lane::gather(hs);
    g0 = Lane::gather(gs);
    checks = Lane::mask(c);
  }
};

/// RK4 with fixed steps (FixedStep) for one system within a call: the loop
/// asks next() for the step to take (from (q0, qd0, t0), of size size(),
/// checked for the event where checked()), takes it, and hands the outcome
/// to feed().
///
/// What a call does for the system (RunSettings): steps of the controller
/// until the system is no longer run_active, `budget` steps are begun or
/// its time has reached t_pause. A system that reaches max_steps before a
/// finite t_end gets the status max_steps.
///
/// With `events` (and a model with events): a step from a state whose event
/// function g is not zero that is not clean (events.hpp: g changes sign at a
/// stage or at the end) is replaced by the step to the located event (the
/// bisection's trials, each a checked step from the same start), and the
/// model's handler then resumes the system or stops it for good (status
/// at_rest, t_stop = the event time). From a state with g exactly zero (a
/// handler has just set the sliding velocity to zero) the next step is taken
/// as it is. A system that starts with g exactly zero consults the handler
/// once first (after one evaluation: a system that cannot be evaluated gets
/// its failed status instead). `steps` counts accepted steps (the trials of
/// the location are not counted), `events` the calls of the handler. With
/// `monitor` (and a model with `residual`) res_pos and res_vel hold the
/// largest residuals seen at the initial state and after every step.
///
/// Stabilisation: with `baumgarte` on, every evaluation corrects b; with
/// `projection` on, every accepted step (at the located event, if any,
/// before the handler) is followed by project(); `proj_fails` counts the
/// steps whose projection did not converge; the event function is evaluated
/// after the projection, so a sign change due to the projection alone is
/// not located. Every accepted step in which an evaluation (location trials
/// included) found rank(B) < m counts in `rank_drops`, every one with an
/// inconsistent evaluation in `inconsistent`; every one whose smallest
/// rank differs from the previous step's, or whose evaluations disagree on
/// the rank, in `rank_changes`; every one with a marginal rank decision (a
/// singular value within policy::rank_margin of the cut) in
/// `rank_marginal`. With `expected_rank` >= 0, a step with an evaluation of
/// another rank fails with failed_rank (the state before it is kept).
///
/// A system whose status is not ok is left alone; one whose step (or event
/// location, or projection) fails keeps its last good state and gets the
/// status, and t_stop the time of that state (where the failing step
/// began). With a finite `residual_limit` (and a model with `residual`) a
/// step whose end state has a residual above the limit (or NaN) fails with
/// failed_residual. The outcome does not depend on how the steps are split
/// among calls.
template <Model Mo, class Control = FixedStep>
struct SystemRun : RunCommon<Mo> {
  using Base = RunCommon<Mo>;
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m;
  using Base::f, Base::p, Base::rest, Base::g, Base::begun;
  // The step being taken: its start, its size, and how it went.
  T q0[n], qd0[n], t0{}, h{};
  bool clean = true;             ///< the step crossed no event
  bool locating = false;         ///< it crossed the event: bisection trials follow
  Bisection<T> bisection{};
  T trial{};                     ///< the size of the trial being taken

  UKB_HD bool load(const BatchView<Mo>& v, int i, const RunSettings<T>& s) {
    locating = false;
    return Base::load(v, i, s);
  }

  /// Whether another step is to be taken in this call; if so, its start
  /// (q0, qd0, t0), size() and checked() are set.
  UKB_HD bool next(const BatchView<Mo>& /*v*/, const RunSettings<T>& s) {
    if (locating) return true;  // the bisection's next trial
    if (begun >= s.budget || !begin(s)) return false;
    ++begun;
    clean = true;
    this->reset_ranks();
    return true;
  }

  /// The size of the step to take.
  UKB_HD T size() const { return locating ? trial : h; }

  /// True when the step is to be checked for the event (events.hpp).
  UKB_HD bool checked(const RunSettings<T>& s) const {
    if constexpr (HasEvents<Mo>) {
      return locating || (s.events && g != T(0));
    } else {
      (void)s;
      return false;
    }
  }

  /// The outcome of the step next() asked for: its status, its end state
  /// (q, q', t), whether it stayed clean (checked steps; true otherwise),
  /// and what its evaluations found about B.
  UKB_HD void feed(const BatchView<Mo>& v, const RunSettings<T>& s, Status st, const T* q, const T* qd, T t,
                   bool step_clean, const StepRanks& k) {
    this->add(v.rhs_evals, Rk4::stages);  // kept where the batch has the monitors of adaptive steps
    if (st != Status::ok) {  // keep the state before the step
      f.status = static_cast<std::int32_t>(st);
      restore();
      locating = false;
      return;
    }
    this->add_ranks(k);
    if (locating) {  // a trial: the bracket narrows
      bisection.record(trial, step_clean);
      if (step_clean) this->set(q, qd, t);
    } else if (s.events && !step_clean) {  // crossed the event: locate it from the start
      clean = false;
      locating = true;
      bisection = Bisection<T>::over(h);
    } else {
      this->set(q, qd, t);
    }
    if (locating) {
      if (bisection.next(s.event_tol, trial)) return;  // another trial
      locating = false;  // located: the state is at t0 + bisection.lo
    }
    finish(v, s);  // its one call: the projection is inlined once
  }

  /// Takes the step that r asked for (next), in scalar code, and hands r
  /// the outcome.
  UKB_HD static void step_one(SystemRun& r, const BatchView<Mo>& v, const RunSettings<T>& s) {
    T q[n], qd[n], t = r.t0;
    for (int j = 0; j < n; ++j) q[j] = r.q0[j], qd[j] = r.qd0[j];
    StepRanks k{m, 0, false, false};
    bool clean = true;
    const StageSettings<T> ss{s.rank_rtol, s.baumgarte, &k.min, &k.inconsistent, &k.max, &k.marginal};
    const EventCheck<Mo, T> check{&r.p, r.g, r.checked(s), &clean};
    const Status st = Rk4::template step<Mo, T>(q, qd, t, r.size(), r.p, ss, check);
    if (st == Status::ok) check(q, qd, t);  // and the end state
    r.feed(v, s, st, q, qd, t, clean, k);
  }

  /// Takes the steps of the live lanes of r (W runs; a lane that is not
  /// live follows the lead lane's step, its result dropped) on a pack with
  /// the lanes' parameters P, and hands each live lane its outcome.
  template <class V>
  static void step_lanes(SystemRun* r, const bool* live, int lead, const ParamsOf<Mo, V>& P,
                         const BatchView<Mo>& v, const RunSettings<T>& s) {
    using Lane = Lanes<V>;
    constexpr int W = Lane::width;
    LaneStart<Mo, V> in(r, live, lead, s);
    typename Lane::Int min_rank, max_rank;
    for (int l = 0; l < W; ++l) min_rank[l] = m, max_rank[l] = 0;
    MaskOf<V> bad_rows(false), marginal(false), clean(true);
    const StageSettings<T, V> ss{s.rank_rtol, s.baumgarte, &min_rank, &bad_rows, &max_rank, &marginal};
    const EventCheck<Mo, V> check{&P, in.g0, in.checks, &clean};
    const typename Lane::LaneStatus st = Rk4::template step<Mo, V>(in.q, in.qd, in.t, in.h, P, ss, check);
    check(in.q, in.qd, in.t);  // and the end states (failed lanes: dropped by feed)
    // Hand each lane its outcome.
    T qe[W][n], qde[W][n], te[W];
    T* qe_l[W];
    T* qde_l[W];
    for (int l = 0; l < W; ++l) qe_l[l] = qe[l], qde_l[l] = qde[l];
    Lane::template scatter<n>(in.q, qe_l);
    Lane::template scatter<n>(in.qd, qde_l);
    Lane::scatter(in.t, te);
    for (int l = 0; l < W; ++l)
      if (live[l])
        r[l].feed(v, s, st[l], qe[l], qde[l], te[l], clean[l],
                  StepRanks{min_rank[l], max_rank[l], bool(bad_rows[l]), bool(marginal[l])});
  }

 private:
  // A step is to be taken: its size h, and its start is the current state.
  UKB_HD bool begin(const RunSettings<T>& s) {
    if (rest || !f.ok() || f.steps >= s.max_steps || !(f.t < s.t_pause)) return false;
    if (!Control::next(f.t, s, h)) return false;
    for (int j = 0; j < n; ++j) q0[j] = f.q[j], qd0[j] = f.qd[j];
    t0 = f.t;
    return true;
  }

  UKB_HD void restore() { this->set(q0, qd0, t0); }

  // After an accepted step (or a located event): the projection, the
  // residual limit, the counters, the handler and the monitor.
  UKB_HD void finish(const BatchView<Mo>& v, const RunSettings<T>& s) {
    bool converged = true;
    const Status st = this->settle(s, converged);
    if (st != Status::ok) {  // keep the state before this step
      f.status = static_cast<std::int32_t>(st);
      restore();
      return;
    }
    this->count(v, s, converged, !clean);
  }
};

/// Dormand–Prince 5(4) with adaptive steps (dopri5.hpp) for one system
/// within a call, with the interface of SystemRun (next, feed). Each step
/// from (q0, q'0, t0) of size h (the error control's choice, at most dt_max
/// and the time left to t_end, the last one landing on t_end exactly) is
/// accepted when its error norm is at most 1 (policy.hpp), else tried again
/// shorter (`rejected` counts those); h_next, err_prev and the bits of
/// `ctrl` carry the controller's state between calls, so that how the steps
/// are split among calls changes nothing. The first step is dt, or the
/// initial step of Hairer's DOPRI5 where dt is 0. The acceleration at the
/// start of a step is the last stage of the step before (FSAL), evaluated
/// again only after a projection, a located event or a handler changed the
/// state; `rhs_evals` counts the evaluations (6 per step, 7 without FSAL).
/// A step size the control asks for below dt_min (or below
/// policy::min_step_ulps units in the last place of t) ends the system with
/// failed_step_size at its last good state; a step whose error norm is NaN
/// (its end state is not finite), or a first step that is not finite, with
/// failed_nonfinite.
///
/// With events: an accepted step that is not clean (g changes sign at a
/// stage or at the end) ends at the event, located on the step's dense
/// output: the first crossing among theta = 1/8, 2/8, ..., 1 brackets it
/// and the Illinois method narrows the bracket to `event_tol`; the state is
/// the dense output at the bracket's lower end (the last instant without
/// the crossing). A step that crosses but is rejected by the error control,
/// or whose dense output shows no crossing at the sampled points (a
/// discontinuous right-hand side, as Coulomb friction at a stick, can pull
/// the end of a step back to the start's side), has its event located as
/// SystemRun locates it: the longest clean step from the same start, by
/// bisection on its size (trial steps, not counted in `steps`); if that
/// step's own error norm is above 1, it is rejected instead (a shorter step
/// approaches the event). Projection, residual
/// limit, rank checks, counters, the handler and monitoring follow every
/// accepted step as with SystemRun; the rank counters count the
/// evaluations of the accepted steps (their location trials too), not
/// those of rejected ones. Where the batch has a `dense` field
/// (Batch::allocate_dense), every accepted step leaves its dense output
/// there (for a located event: valid up to the event).
template <Model Mo>
struct AdaptiveRun : RunCommon<Mo> {
  using Base = RunCommon<Mo>;
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m;
  using Base::f, Base::p, Base::rest, Base::g, Base::begun;
  using Base::fsal_bit, Base::rejected_bit;
  // The step being taken: its start, end time and size, and how it went.
  T q0[n], qd0[n], t0{}, t1{}, h{};
  T k1[n];               ///< the acceleration at the state, when k1_ok
  bool k1_ok = false;
  bool clean = true;     ///< the step crossed no event
  bool locating = false; ///< it crossed the event, not shown by an accepted dense output: bisection trials follow
  Bisection<T> bisection{};
  T err_lo{};            ///< the error norm of the longest clean trial so far (NaN: none)
  T h_next{};            ///< the `h_next` field: the size the control chose for the next step (0: none yet)
  T err_prev{};          ///< the `err_prev` field: the error norm of the last accepted step

  UKB_HD bool load(const BatchView<Mo>& v, int i, const RunSettings<T>& s) {
    k1_ok = false;
    locating = false;
    h_next = v.h_next ? v.h_next[i] : T(0);
    err_prev = v.err_prev ? v.err_prev[i] : T(0);
    return Base::load(v, i, s);
  }

  /// Scatters the system back (RunCommon::store) with the control's state.
  UKB_HD void store(const BatchView<Mo>& v, const RunSettings<T>& s) {
    if (v.h_next) v.h_next[this->sys] = h_next;
    if (v.err_prev) v.err_prev[this->sys] = err_prev;
    Base::store(v, s);
  }

  /// Whether another step is to be taken in this call (as SystemRun::next).
  UKB_HD bool next(const BatchView<Mo>& v, const RunSettings<T>& s) {
    if (locating) return true;  // the bisection's next trial (h and t1 set)
    if (begun >= s.budget || !begin(v, s)) return false;
    ++begun;
    clean = true;
    return true;
  }

  UKB_HD T size() const { return h; }

  UKB_HD bool checked(const RunSettings<T>& s) const {
    if constexpr (HasEvents<Mo>) {
      return locating || (s.events && g != T(0));
    } else {
      (void)s;
      return false;
    }
  }

  /// Whether feed needs the step's dense output: an accepted step that
  /// crossed the event, or any accepted step (or clean trial) of a batch
  /// that keeps them.
  UKB_HD bool wants_dense(const BatchView<Mo>& v, const RunSettings<T>& s, T err, bool step_clean) const {
    if (locating) return v.dense != nullptr && step_clean;
    return err <= T(1) && (v.dense != nullptr || (s.events && !step_clean));
  }

  /// The outcome of the step next() asked for: its status, the fifth-order
  /// end state (q, q'), its error norm, whether it stayed clean, the
  /// acceleration at the end (a1), what its evaluations found about B, and
  /// its dense output where wants_dense.
  UKB_HD void feed(const BatchView<Mo>& v, const RunSettings<T>& s, Status st, const T* q, const T* qd, T err,
                   bool step_clean, const T* a1, const StepRanks& k, const DenseStep<n, T>* dn) {
    this->add(v.rhs_evals, Dopri5Tableau::stages - 1);
    if (st != Status::ok) {  // the state before the step
      f.status = static_cast<std::int32_t>(st);
      if (locating) this->set(q0, qd0, t0);
      locating = false;
      return;
    }
    this->add_ranks(k);
    if (locating) {  // a trial: the bracket narrows
      bisection.record(h, step_clean);
      if (step_clean) {
        this->set(q, qd, t1);
        err_lo = err;
        write_dense(v, dn);
      }
      T trial;
      if (bisection.next(s.event_tol, trial)) {
        h = trial;
        t1 = t0 + trial;
        return;
      }
      locating = false;
      if (bisection.lo > T(0) && !(err_lo <= T(1))) {
        // The longest clean step is not accurate enough: a shorter step
        // (the control's choice after that error) approaches the event.
        this->set(q0, qd0, t0);
        drop_dense(v);  // the trials' were written: none of them is accepted
        T e_prev = err_prev, h_new;
        bool was_rejected = true;
        dopri5_control(bisection.lo, err_lo, e_prev, was_rejected, h_new);
        reject(v, h_new);
        return;
      }
      k1_ok = false;
      finish(v, s, true);  // located: the state is at t0 + bisection.lo
      return;
    }
    if (!(err == err)) {  // a NaN error norm: the step's end state is not finite
      f.status = static_cast<std::int32_t>(Status::failed_nonfinite);
      return;
    }
    T e_prev = err_prev, h_new;
    bool was_rejected = (f.ctrl & rejected_bit) != 0;
    const bool accepted = dopri5_control(h, err, e_prev, was_rejected, h_new);
    bool crossed = false;
    if constexpr (HasEvents<Mo>) crossed = s.events && !step_clean;
    T theta = T(1);
    if (crossed && !(accepted && locate(s, *dn, theta))) {
      // The dense output is not to be trusted (the step is not accepted) or
      // does not show the crossing (a discontinuous right-hand side can pull
      // the step back to the start's side): the longest clean step from the
      // start, by bisection on its size.
      if (accepted) {
        err_prev = e_prev;
        h_next = h_new;
        f.ctrl &= ~rejected_bit;
      } else {
        reject(v, h_new);
      }
      locating = true;
      err_lo = std::numeric_limits<T>::quiet_NaN();
      bisection = Bisection<T>::over(h);
      T trial;
      if (bisection.next(s.event_tol, trial)) {
        h = trial;
        t1 = t0 + trial;
        return;
      }
      locating = false;  // a step within event_tol: the event is at its start
      k1_ok = false;
      finish(v, s, true);
      return;
    }
    if (!accepted) {
      reject(v, h_new);
      return;
    }
    err_prev = e_prev;
    h_next = h_new;
    f.ctrl &= ~rejected_bit;
    if (crossed) {  // located on the dense output
      T qe[n], qde[n];
      dense_state(dn->r[0], n, theta, qe, qde);
      this->set(qe, qde, theta == T(0) ? t0 : t0 + theta * h);
      k1_ok = false;
    } else {
      this->set(q, qd, t1);
      for (int j = 0; j < n; ++j) k1[j] = a1[j];  // FSAL
      k1_ok = true;
    }
    write_dense(v, dn);
    finish(v, s, crossed);
  }

  /// Takes the step that r asked for (next), in scalar code, and hands r
  /// the outcome.
  UKB_HD static void step_one(AdaptiveRun& r, const BatchView<Mo>& v, const RunSettings<T>& s) {
    Dopri5Stages<n, T> k;
    for (int j = 0; j < n; ++j) k.kq[0][j] = r.qd0[j], k.kv[0][j] = r.k1[j];
    T q[n], qd[n], eq[n], ev[n];
    StepRanks ranks{m, 0, false, false};
    bool clean = true;
    const StageSettings<T> ss{s.rank_rtol, s.baumgarte, &ranks.min, &ranks.inconsistent, &ranks.max, &ranks.marginal};
    const EventCheck<Mo, T> check{&r.p, r.g, r.checked(s), &clean};
    const Status st = dopri5_step<Mo, T>(r.q0, r.qd0, r.t0, r.t1, r.h, r.p, ss, check, k, q, qd, eq, ev);
    T err = T(0);
    if (st == Status::ok) {
      check(q, qd, r.t1);  // and the end state
      err = dopri5_error<n, T>(r.q0, r.qd0, q, qd, eq, ev, s.control);
    }
    DenseStep<n, T> dn;
    const bool dense = st == Status::ok && r.wants_dense(v, s, err, clean);
    if (dense) dopri5_dense<n, T>(r.q0, r.qd0, q, qd, k, r.h, 0, dn);
    r.feed(v, s, st, q, qd, err, clean, k.kv[6], ranks, dense ? &dn : nullptr);
  }

  /// The steps of the live lanes of r on a pack (as SystemRun::step_lanes).
  template <class V>
  static void step_lanes(AdaptiveRun* r, const bool* live, int lead, const ParamsOf<Mo, V>& P,
                         const BatchView<Mo>& v, const RunSettings<T>& s) {
    using Lane = Lanes<V>;
    constexpr int W = Lane::width;
    LaneStart<Mo, V> in(r, live, lead, s);
    // The acceleration at the start (FSAL) and the end time of each lane.
    Dopri5Stages<n, V> k;
    V t1;
    {
      const T* a[W];
      T te[W];
      for (int l = 0; l < W; ++l) a[l] = r[live[l] ? l : lead].k1, te[l] = r[live[l] ? l : lead].t1;
      Lane::template gather<n>(k.kv[0], a);
      for (int j = 0; j < n; ++j) k.kq[0][j] = in.qd[j];
      t1 = Lane::gather(te);
    }
    typename Lane::Int min_rank, max_rank;
    for (int l = 0; l < W; ++l) min_rank[l] = m, max_rank[l] = 0;
    MaskOf<V> bad_rows(false), marginal(false), clean(true);
    const StageSettings<T, V> ss{s.rank_rtol, s.baumgarte, &min_rank, &bad_rows, &max_rank, &marginal};
    const EventCheck<Mo, V> check{&P, in.g0, in.checks, &clean};
    V q[n], qd[n], eq[n], ev[n];
    const typename Lane::LaneStatus st =
        dopri5_step<Mo, V>(in.q, in.qd, in.t, t1, in.h, P, ss, check, k, q, qd, eq, ev);
    if (!Lane::any(Lane::ok(st))) {
      // Every lane failed at a stage: the step stopped there, its end state
      // and the later stages were never written (feed reads none of them).
      for (int l = 0; l < W; ++l)
        if (live[l])
          r[l].feed(v, s, st[l], nullptr, nullptr, T(0), false, nullptr,
                    StepRanks{min_rank[l], max_rank[l], false, false}, nullptr);
      return;
    }
    check(q, qd, t1);  // and the end states (failed lanes: dropped by feed)
    T err[W];
    Lane::scatter(dopri5_error<n, V>(in.q, in.qd, q, qd, eq, ev, s.control), err);
    T qe[W][n], qde[W][n], ae[W][n];
    T* qe_l[W];
    T* qde_l[W];
    T* ae_l[W];
    for (int l = 0; l < W; ++l) qe_l[l] = qe[l], qde_l[l] = qde[l], ae_l[l] = ae[l];
    Lane::template scatter<n>(q, qe_l);
    Lane::template scatter<n>(qd, qde_l);
    Lane::template scatter<n>(k.kv[6], ae_l);
    for (int l = 0; l < W; ++l) {
      if (!live[l]) continue;
      DenseStep<n, T> dn;
      const bool dense = st[l] == Status::ok && r[l].wants_dense(v, s, err[l], bool(clean[l]));
      if (dense) dopri5_dense<n, V>(in.q, in.qd, q, qd, k, in.h, l, dn);
      r[l].feed(v, s, st[l], qe[l], qde[l], err[l], bool(clean[l]), ae[l],
                StepRanks{min_rank[l], max_rank[l], bool(bad_rows[l]), bool(marginal[l])}, dense ? &dn : nullptr);
    }
  }

 private:
  // A step is to be taken: the acceleration at the state (evaluated where
  // it is not known), the step's size h and end time t1; false where there
  // is none (or the system fails here).
  UKB_HD bool begin(const BatchView<Mo>& v, const RunSettings<T>& s) {
    if (rest || !f.ok() || f.steps >= s.max_steps || !(f.t < s.t_pause)) return false;
    const T remaining = s.t_end - f.t;
    if (!(remaining > s.dt * T(policy::end_slack))) return false;
    // What B does in this step's evaluations (a rejected step's are not
    // counted; the location trials of an accepted one are).
    this->reset_ranks();
    if (!k1_ok) {
      Accel<Mo> a;
      const Status st = uk_eval_rare<Mo>(f.q, f.qd, f.t, p, s.rank_rtol, a, s.baumgarte);
      if (!(f.ctrl & fsal_bit)) {  // a new evaluation (else that of the last step's last stage again)
        this->add(v.rhs_evals, 1);
        if (st == Status::ok) this->add_ranks(StepRanks{a.rank, a.rank, a.inconsistent, a.marginal});
      }
      if (st != Status::ok) {
        f.status = static_cast<std::int32_t>(st);
        return false;
      }
      for (int j = 0; j < n; ++j) k1[j] = a.qdd[j];
      k1_ok = true;
      f.ctrl |= fsal_bit;
    }
    T step = h_next;
    if (!(step > T(0))) {  // the first step: a guess, within [dt_min, dt_max]
      step = s.dt > T(0) ? s.dt : initial_step(v, s);
      if (!(step - step == T(0))) {  // NaN or infinite: the state or its acceleration is not finite
        f.status = static_cast<std::int32_t>(Status::failed_nonfinite);
        return false;
      }
      step = step > s.control.dt_min ? step : s.control.dt_min;
    }
    step = step < s.control.dt_max ? step : s.control.dt_max;
    using std::abs;
    const T floor = T(policy::min_step_ulps) * std::numeric_limits<T>::epsilon() * abs(f.t);
    if (remaining - remaining == T(0) && step * T(1.01) >= remaining && remaining <= s.control.dt_max) {
      // the last step lands on t_end (never longer than dt_max)
      h = remaining;
      t1 = s.t_end;
    } else if (step < s.control.dt_min || !(step > floor)) {
      f.status = static_cast<std::int32_t>(Status::failed_step_size);
      return false;
    } else {
      h = step;
      t1 = f.t + step;
    }
    h_next = step;
    for (int j = 0; j < n; ++j) q0[j] = f.q[j], qd0[j] = f.qd[j];
    t0 = f.t;
    return true;
  }

  // The first step where dt is 0 (dopri5_initial_step), one evaluation more.
  UKB_HD T initial_step(const BatchView<Mo>& v, const RunSettings<T>& s) {
    T f0[2 * n];
    for (int j = 0; j < n; ++j) f0[j] = f.qd[j], f0[n + j] = k1[j];
    this->add(v.rhs_evals, 1);
    auto accel = [&](const T* q, const T* qd, T t, T* out) {
      Accel<Mo> a;
      if (uk_eval_rare<Mo>(q, qd, t, p, s.rank_rtol, a, s.baumgarte) != Status::ok) return false;
      for (int j = 0; j < n; ++j) out[j] = a.qdd[j];
      return true;
    };
    return dopri5_initial_step<n, T>(f.q, f.qd, f.t, f0, s.control, accel);
  }

  // After an accepted step (or a located event): the projection, the
  // residual limit, the counters, the handler and the monitor; whether the
  // acceleration at the state is known (FSAL) goes to ctrl.
  UKB_HD void finish(const BatchView<Mo>& v, const RunSettings<T>& s, bool located) {
    bool converged = true;
    const Status ss = this->settle(s, converged);
    if (ss != Status::ok) {  // keep the state before this step
      f.status = static_cast<std::int32_t>(ss);
      this->set(q0, qd0, t0);
      drop_dense(v);
      return;
    }
    if (s.projection.on) k1_ok = false;
    this->count(v, s, converged, located);
    if (located) k1_ok = false;  // the handler may have changed the state
    f.ctrl = k1_ok ? (f.ctrl | fsal_bit) : (f.ctrl & ~fsal_bit);
  }

  // The dense output of the step just taken into the batch's, where it has one.
  UKB_HD void write_dense(const BatchView<Mo>& v, const DenseStep<n, T>* dn) const {
    if (!v.dense || !dn) return;
    const int i = this->sys;
    for (int r = 0; r < 5; ++r)
      for (int y = 0; y < 2 * n; ++y) v.dense[soa(r * 2 * n + y, i, v.N)] = dn->r[r][y];
    v.dense[soa(10 * n, i, v.N)] = t0;
    v.dense[soa(10 * n + 1, i, v.N)] = h;
  }

  // No dense output (t0 = h = NaN): the one written was of a step that is
  // not accepted after all (its event location's trials, or it failed to
  // settle), and the accepted step before it has been overwritten.
  UKB_HD void drop_dense(const BatchView<Mo>& v) const {
    if (!v.dense) return;
    v.dense[soa(10 * n, this->sys, v.N)] = std::numeric_limits<T>::quiet_NaN();
    v.dense[soa(10 * n + 1, this->sys, v.N)] = std::numeric_limits<T>::quiet_NaN();
  }

  // A rejected step: the state stays, the next try has size h_new.
  UKB_HD void reject(const BatchView<Mo>& v, T h_new) {
    this->add(v.rejected, 1);
    h_next = h_new;
    f.ctrl |= rejected_bit;
  }

  // The first crossing of the event on the dense output dn: theta in [0, 1)
  // with g on the start's side, within event_tol / h of a theta across it;
  // false where no sampled point of the dense output crosses.
  UKB_HD bool locate(const RunSettings<T>& s, const DenseStep<n, T>& dn, T& theta) const {
    if constexpr (HasEvents<Mo>) {
      auto G = [&](T th) {
        T q[n], qd[n];
        dense_state(dn.r[0], n, th, q, qd);
        return Mo::event(q, qd, t0 + th * h, p);
      };
      T lo = T(0), glo = g, hi = T(-1), ghi = T(0);
      for (int j = 1; j <= 8; ++j) {
        const T th = T(j) / T(8), gt = G(th);
        if (!same_side(gt, g)) {
          hi = th, ghi = gt;
          break;
        }
        lo = th, glo = gt;
      }
      if (hi < T(0)) return false;
      // Illinois: regula falsi whose retained end has its value halved when
      // it is retained twice; a bisection where the secant leaves the bracket.
      int side = 0;
      for (int it = 0; it < policy::max_bisections && (hi - lo) * h > s.event_tol; ++it) {
        T th = (lo * ghi - hi * glo) / (ghi - glo);
        if (!(th > lo && th < hi)) th = lo + T(0.5) * (hi - lo);
        if (!(th > lo && th < hi)) break;  // the bracket is at the resolution of T
        const T gt = G(th);
        if (same_side(gt, g)) {
          lo = th, glo = gt;
          if (side == -1) ghi *= T(0.5);
          side = -1;
        } else {
          hi = th, ghi = gt;
          if (side == 1) glo *= T(0.5);
          side = 1;
        }
      }
      theta = lo;
      return true;
    } else {
      (void)s, (void)dn, (void)theta;
      return false;
    }
  }
};

/// The systems [first, last), in order: the source of systems of one call
/// of integrate_systems (a GPU thread's one system, a test's range). A
/// source gives `next()`, the next system or -1 when none is left, and
/// `done()`, true when next() would give -1; cpu/parallel.hpp has one that
/// threads share.
struct SystemRange {
  int first, last;
  UKB_HD int next() { return first < last ? first++ : -1; }
  UKB_HD bool done() const { return first >= last; }
};

/// Integrates the systems that `src` gives (SystemRange) with the run Run
/// (SystemRun: RK4; AdaptiveRun: Dormand–Prince; each documents what
/// happens to a system), Lanes<V>::width at a time: one system at a time for
/// a scalar V, a pack's lanes in lockstep otherwise. A lane whose system is
/// done (finished, at rest, failed, budget spent) stores it and takes the
/// next system of the source, so that the pack stays full until the source
/// runs dry; a lane without a system follows another lane's step (its
/// result is dropped), and the last system left steps alone in scalar code.
/// Which systems share a pack changes no result.
template <Model Mo, class V, class Run, class Source>
UKB_HD void integrate_systems(const BatchView<Mo>& v, Source& src, const RunSettings<typename Mo::Scalar>& s) {
  using Lane = Lanes<V>;
  constexpr int W = Lane::width;
  Run r[W];
  int sys[W];  // the system in each lane, or -1
  for (int l = 0; l < W; ++l) sys[l] = -1;
  // Packs: the lanes' parameters as the step takes them, set again only in
  // the lanes whose system changes.
  [[maybe_unused]] std::conditional_t<(W > 1), LaneParams<Mo, V>, NoLaneParams> lanes_p;
  // Lane l's next step: of its system, or of the next pending systems
  // until one has a step to take; false when the source has none left.
  auto next = [&](int l) -> bool {
    if (sys[l] >= 0) {
      if (r[l].next(v, s)) return true;
      r[l].store(v, s);
      sys[l] = -1;
    }
    for (int i = src.next(); i >= 0; i = src.next()) {
      if (!r[l].load(v, i, s)) continue;  // not ok: nothing to do
      if (r[l].next(v, s)) {
        sys[l] = i;
        return true;
      }
      r[l].store(v, s);
    }
    return false;
  };
  for (;;) {
    bool live[W];
    int lead = -1, count = 0;
    for (int l = 0; l < W; ++l) {
      live[l] = next(l);
      if (live[l]) {
        if (lead < 0) lead = l;
        ++count;
      }
    }
    if (count == 0) return;
    if constexpr (W > 1) {
      if (count == 1 && src.done()) {
        Run::step_one(r[lead], v, s);
        continue;
      }
      for (int l = 0; l < W; ++l) lanes_p.set(l, sys[live[l] ? l : lead], r[live[l] ? l : lead].p);
      Run::template step_lanes<V>(r, live, lead, lanes_p.P, v, s);
    } else {
      Run::step_one(r[0], v, s);
    }
  }
}

/// Integrates the systems of src with the run of s.method (integrate_systems).
template <Model Mo, class V, class Source>
UKB_HD void integrate_method(const BatchView<Mo>& v, Source& src, const RunSettings<typename Mo::Scalar>& s) {
  if (s.method == Method::dopri5) {
    integrate_systems<Mo, V, AdaptiveRun<Mo>>(v, src, s);
  } else {
    integrate_systems<Mo, V, SystemRun<Mo>>(v, src, s);
  }
}

/// Integrates system i, one system at a time: what one GPU thread does.
/// Run: the run of s.method (integrate_method) where void, else that run
/// alone (SystemRun: RK4, AdaptiveRun: Dormand–Prince). The CUDA backend
/// launches the kernel of s.method's run, so that an RK4 thread does not
/// carry Dormand–Prince's stages (nvcc 13.0 -Xptxas -v, sm_90, -O3: the
/// ring in double had 238 registers and a 2368-byte stack frame per thread
/// in the kernel of both runs, 202 and 1832 bytes with RK4 alone; the
/// 6-link chain 12224 bytes of stack, 8192 with RK4 alone).
template <Model Mo, class Run = void>
struct IntegrateBody {
  using T = typename Mo::Scalar;
  BatchView<Mo> v;
  RunSettings<T> s;

  UKB_HD void operator()(int i) const {
    SystemRange one{i, i + 1};
    if constexpr (std::is_void_v<Run>) {
      integrate_method<Mo, T>(v, one, s);
    } else {
      integrate_systems<Mo, T, Run>(v, one, s);
    }
  }
};

}  // namespace ukb::kernels
