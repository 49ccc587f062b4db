/// @file run_common.hpp
/// @brief What the runs of run.hpp share: the system's state in local
///        storage (RunState), what happens around a step (RunCommon: the
///        start of a system, the projection, the limits, the counters, the
///        event handler, the residual monitor, the final status), and the
///        inputs of a step taken by a pack's lanes (LaneParams, LaneStart).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "ukb/batch.hpp"
#include "ukb/kernels/stabilize.hpp"
#include "ukb/kernels/tangents.hpp"
#include "ukb/kernels/uk.hpp"
#include "ukb/settings.hpp"

namespace ukb::kernels {

/// What the evaluations of one step found about B (the runs' feed).
struct StepRanks {
  int min = 0, max = 0;       ///< smallest and largest rank(B)
  bool inconsistent = false;  ///< an evaluation was inconsistent
  bool marginal = false;      ///< a rank decision was marginal
};

/// Who projects a run's state after an accepted step (RunCommon::settle):
/// the thread that runs the system, by project_step. A team's run passes a
/// projector of its own instead (team_run.hpp), called as
/// `project(q, qd, t, p, rank_rtol, projection, converged)`.
struct OwnProjection {};

/// Who evaluates the acceleration on a run's rare paths (AdaptiveRun: the
/// acceleration at a step's start where the last stage does not give it,
/// the initial step's probe): the thread that runs the system, by
/// uk_eval_rare. A team's run passes an evaluator of its own (team_run.hpp),
/// called as `evaluate(q, qd, t, use)`, which returns use(status, accel).
struct OwnEvaluation {};

namespace detail {
template <bool InlineRare, Model Mo, class Projector>
UKB_HD UKB_INLINE Status project_with_(const Projector& project, typename Mo::Scalar* q, typename Mo::Scalar* qd,
                                       typename Mo::Scalar t, const typename Mo::Params& p,
                                       typename Mo::Scalar rank_rtol, const Projection<typename Mo::Scalar>& pr,
                                       bool& converged) {
  if constexpr (std::is_same_v<Projector, OwnProjection>) {
    (void)project;
    return project_step<Mo, InlineRare>(q, qd, t, p, rank_rtol, pr, converged);
  } else {
    return project(q, qd, t, p, rank_rtol, pr, converged);
  }
}
}  // namespace detail

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
/// counters are changed there (RunState says why). `InlineRare`: the rare
/// paths (the handler's first consultation, the projection) inlined in GPU
/// device code too (uk_eval_rare, project_step).
template <Model Mo, bool InlineRare = false>
struct RunCommon {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m;
  /// Bits of the `ctrl` field.
  static constexpr std::int32_t started_bit = 1;  ///< the start of the system is done (monitor, handler)
  static constexpr std::int32_t fsal_bit = 2;     ///< dopri5: the acceleration at the state is evaluated and counted
  static constexpr std::int32_t rejected_bit = 4; ///< dopri5: the last step was rejected
  static constexpr std::int32_t resumed_bit = 8;  ///< the last accepted step ended at an event its handler resumed
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
  /// The step crossed the event: the trials that locate it follow (SystemRun:
  /// all by bisection; AdaptiveRun: where the dense output does not show it).
  bool locating = false;

  /// True when the step to take is to be checked for the event (events.hpp).
  UKB_HD bool checked(const RunSettings<T>& s) const {
    if constexpr (HasEvents<Mo>) {
      return locating || (s.events && g != T(0));
    } else {
      (void)s;
      return false;
    }
  }

  /// The start's consultation of the handler waits for consulted() (load
  /// with Defer: the lanes of a pack evaluate theirs together).
  bool consult = false;

  /// Gathers system i; false (and nothing to do) when its status is not ok.
  /// A system at its start is monitored, and with g exactly zero its
  /// handler is consulted once, after one evaluation at the state: here,
  /// or with `Defer` in consulted(), given that evaluation's status (consult
  /// is set until then).
  template <bool Defer = false>
  UKB_HD bool load(const BatchView<Mo>& v, int i, const RunSettings<T>& s) {
    consult = false;
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
          if constexpr (Defer) {
            consult = true;
          } else {
            Accel<Mo> a;
            consulted(v, uk_eval_rare<Mo, InlineRare>(f.q, f.qd, f.t, p, s.rank_rtol, a, s.baumgarte));
          }
        }
      }
    }
    return true;
  }

  /// The start's consultation of the handler (load), given the status `st`
  /// of the evaluation at the state: a system that cannot be evaluated
  /// fails before its handler is asked.
  UKB_HD void consulted(const BatchView<Mo>& v, Status st) {
    if constexpr (HasEvents<Mo>) {
      consult = false;
      add(v.rhs_evals, 1);
      if (st == Status::ok) {
        add(v.events, 1);
        rest = handle();
        g = Mo::event(f.q, f.qd, f.t, p);
        if (!rest && !(g - g == T(0))) f.status = static_cast<std::int32_t>(Status::failed_nonfinite);
      } else {
        f.status = static_cast<std::int32_t>(st);
      }
    } else {
      (void)v, (void)st;
    }
  }

  /// Scatters the system back (into v, at the index load took) with its
  /// final status.
  UKB_HD void store(const BatchView<Mo>& v, const RunSettings<T>& s) {
    if (rest) {
      f.status = static_cast<std::int32_t>(Status::at_rest);
      v.t_stop[sys] = f.t;
    } else if (f.ok() && f.steps >= s.max_steps && s.t_end - s.t_end == T(0) && before_end(f.t, s)) {
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

  template <bool Inline, class Projector>
  UKB_HD static Status project_with(const Projector& project, T* q, T* qd, T t, const typename Mo::Params& p,
                                    T rank_rtol, const Projection<T>& pr, bool& converged) {
    return detail::project_with_<Inline, Mo>(project, q, qd, t, p, rank_rtol, pr, converged);
  }

  // use(status, accel) for the acceleration at (q, q', t), evaluated by
  // `evaluate` (OwnEvaluation: this thread, uk_eval_rare).
  template <bool Inline, class Evaluator, class Use>
  UKB_HD auto evaluate_with(const Evaluator& evaluate, const T* q, const T* qd, T t, const RunSettings<T>& s,
                            const Use& use) const {
    if constexpr (std::is_same_v<Evaluator, OwnEvaluation>) {
      (void)evaluate;
      Accel<Mo> a;
      const Status st = uk_eval_rare<Mo, Inline>(q, qd, t, p, s.rank_rtol, a, s.baumgarte);
      return use(st, static_cast<const Accel<Mo>&>(a));
    } else {
      return evaluate(q, qd, t, use);
    }
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
  // before the step). `converged`: the projection converged. `project`:
  // who projects (OwnProjection: this thread, project_step; a team's run
  // has its team do it, team_run.hpp).
  template <class Projector = OwnProjection>
  UKB_HD Status settle(const RunSettings<T>& s, bool& converged, const Projector& project = {}) {
    converged = true;
    Status st = Status::ok;
    if (s.expected_rank >= 0 && (min_rank != s.expected_rank || max_rank != s.expected_rank))
      st = Status::failed_rank;
    else if (s.projection.on)
      st = project_with<InlineRare>(project, f.q, f.qd, f.t, p, s.rank_rtol, s.projection, converged);
    if (st == Status::ok && !within_limit(s)) st = Status::failed_residual;
    return st;
  }

  // The counters of a settled step from time t_start, then the handler
  // (`located`: the step ended at a located event) and the monitor. A step
  // that follows an event whose handler resumed the system and is located
  // within event_tol of its own start (the handler left the system where
  // the event is crossed at once) fails with failed_event_loop instead, the
  // state kept: it would be located there again and again, the time
  // standing still at the resolution of the location (docs/adding-a-model.md,
  // "The event contract").
  UKB_HD void count(const BatchView<Mo>& v, const RunSettings<T>& s, bool converged, bool located, T t_start) {
    if constexpr (HasEvents<Mo>) {
      if (located && (f.ctrl & resumed_bit) && !(f.t - t_start > s.event_tol)) {
        f.status = static_cast<std::int32_t>(Status::failed_event_loop);
        return;
      }
      f.ctrl = located ? f.ctrl : (f.ctrl & ~resumed_bit);
    } else {
      (void)t_start;
    }
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
          event_tangents<Mo>(f.q, f.qd, f.t, p, s);  // dual numbers only (tangents.hpp)
          add(v.events, 1);
          rest = handle();
          f.ctrl |= resumed_bit;  // (a system at rest takes no more steps)
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

  // The model's handler at the current state: true where it stops the
  // system for good. It may move the time forward (a handler that finishes
  // a motion in closed form, ukb/friction.hpp's finish_stop); a time it
  // leaves NaN, infinite or before the event's fails the system with
  // failed_nonfinite at the event's state, which is kept. A handler that
  // takes the time by value cannot move it (HandlerMovesTime): no snapshot
  // of the state is kept for it, which costs the ring's GPU kernel 4
  // registers.
  UKB_HD bool handle() {
    if constexpr (HasEvents<Mo> && !HandlerMovesTime<Mo>) {
      if (f.t - f.t == T(0)) return Mo::on_event(f.q, f.qd, f.t, p) == EventAction::stop;
      f.status = static_cast<std::int32_t>(Status::failed_nonfinite);  // as below, without calling it
    } else if constexpr (HasEvents<Mo>) {
      T q[n], qd[n];
      const T t_event = f.t;
      for (int j = 0; j < n; ++j) q[j] = f.q[j], qd[j] = f.qd[j];
      const bool stop = Mo::on_event(f.q, f.qd, f.t, p) == EventAction::stop;
      if (f.t >= t_event && f.t - f.t == T(0)) return stop;
      this->set(q, qd, t_event);
      f.status = static_cast<std::int32_t>(Status::failed_nonfinite);
    }
    return false;
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

}  // namespace ukb::kernels
