/// @file run.hpp
/// @brief The run loop shared by every backend but the reference: what one
///        GPU thread does for its system, and what a CPU thread does for a
///        range of systems, one at a time or several side by side in SIMD
///        lanes.
///
/// Three parts, after Boost.Odeint's split of stepper, controller and
/// integrate loop:
/// - the stepper (rk4.hpp) takes one step from a state;
/// - SystemRun decides, per system, which step to take next (the controller,
///   control.hpp, and the bisection of a located event, events.hpp) and what
///   follows it (projection, residual limit, counters, the event handler);
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

/// One system's integration within a call: its fields in local storage and
/// the decisions around each step. The loop asks next() for the step to
/// take (from (q0, qd0, t0), of size size(), checked for the event where
/// checked()), takes it, and hands the outcome to feed().
///
/// What a call does for the system (RunSettings): steps of the controller
/// until the system is no longer run_active or `budget` steps are begun. A
/// system that reaches max_steps before a finite t_end gets the status
/// max_steps.
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
/// What the evaluations of one step found about B (SystemRun::feed).
struct StepRanks {
  int min = 0, max = 0;       ///< smallest and largest rank(B)
  bool inconsistent = false;  ///< an evaluation was inconsistent
  bool marginal = false;      ///< a rank decision was marginal
};

template <Model Mo, class Control = FixedStep>
struct SystemRun {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m;
  SystemFields<Mo> f;            ///< the system's state and monitors
  typename Mo::Params p{};
  bool rest = false;             ///< the handler stopped the system for good
  T g = T(0);                    ///< the event function at (q, q', t) (with events)
  // The step being taken: its start, its size, and what its evaluations found.
  T q0[n], qd0[n], t0{}, h{};
  bool clean = true;             ///< the step crossed no event
  int min_rank = m;              ///< smallest rank of B in its evaluations (trials included)
  int max_rank = 0;              ///< largest rank of B in its evaluations (trials included)
  bool bad_rows = false;         ///< one of its evaluations was inconsistent
  bool marginal = false;         ///< one of its rank decisions was marginal
  bool locating = false;         ///< it crossed the event: bisection trials follow
  Bisection<T> bisection{};
  T trial{};                     ///< the size of the trial being taken
  long begun = 0;                ///< steps begun in this call (the budget)

  /// Gathers system i; false (and nothing to do) when its status is not ok.
  /// A system at its start is monitored, and with g exactly zero its
  /// handler is consulted once.
  UKB_HD bool load(const BatchView<Mo>& v, int i, const RunSettings<T>& s) {
    f.load(v, i);
    if (!f.ok()) return false;
    p = load_params<Mo>(v, i);
    rest = false;
    locating = false;
    begun = 0;
    g = T(0);
    if (f.steps == 0) monitor(s);
    if constexpr (HasEvents<Mo>) {
      if (s.events) {
        g = Mo::event(f.q, f.qd, f.t, p);
        if (f.steps == 0 && g == T(0)) {
          // A system that cannot be evaluated fails before its handler is asked.
          Accel<Mo> a;
          const Status st = uk_accel<Mo>(f.q, f.qd, f.t, p, s.rank_rtol, a, s.baumgarte);
          if (st == Status::ok) {
            ++f.events;
            rest = Mo::on_event(f.q, f.qd, f.t, p) == EventAction::stop;
            g = Mo::event(f.q, f.qd, f.t, p);
          } else {
            f.status = static_cast<std::int32_t>(st);
          }
        }
      }
    }
    return true;
  }

  /// Whether another step is to be taken in this call; if so, its start
  /// (q0, qd0, t0), size() and checked() are set.
  UKB_HD bool next(const RunSettings<T>& s) {
    if (locating) return true;  // the bisection's next trial
    if (begun >= s.budget || !begin(s)) return false;
    ++begun;
    clean = true;
    min_rank = m;
    max_rank = 0;
    bad_rows = false;
    marginal = false;
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
  UKB_HD void feed(const RunSettings<T>& s, Status st, const T* q, const T* qd, T t, bool step_clean,
                   const StepRanks& k) {
    if (st != Status::ok) {  // keep the state before the step
      f.status = static_cast<std::int32_t>(st);
      restore();
      locating = false;
      return;
    }
    min_rank = k.min < min_rank ? k.min : min_rank;
    max_rank = k.max > max_rank ? k.max : max_rank;
    bad_rows = bad_rows || k.inconsistent;
    marginal = marginal || k.marginal;
    if (locating) {  // a trial: the bracket narrows
      bisection.record(trial, step_clean);
      if (step_clean) set(q, qd, t);
    } else if (s.events && !step_clean) {  // crossed the event: locate it from the start
      clean = false;
      locating = true;
      bisection = Bisection<T>::over(h);
    } else {
      set(q, qd, t);
    }
    if (locating) {
      if (bisection.next(s.event_tol, trial)) return;  // another trial
      locating = false;  // located: the state is at t0 + bisection.lo
    }
    finish(s);  // its one call: the projection is inlined once
  }

  /// Scatters system i back with its final status.
  UKB_HD void store(const BatchView<Mo>& v, int i, const RunSettings<T>& s) {
    if (rest) {
      f.status = static_cast<std::int32_t>(Status::at_rest);
      f.t_stop = f.t;
    } else if (f.ok() && f.steps >= s.max_steps && s.t_end - s.t_end == T(0) &&
               s.t_end - f.t > s.dt * T(policy::end_slack)) {
      f.status = static_cast<std::int32_t>(Status::max_steps);  // the step limit came before a finite t_end
    } else if (!f.ok()) {
      f.t_stop = f.t;  // a failure: the time of the last good state
    }
    f.store(v, i);
  }

 private:
  // A step is to be taken: its size h, and its start is the current state.
  UKB_HD bool begin(const RunSettings<T>& s) {
    if (rest || !f.ok() || f.steps >= s.max_steps) return false;
    if (!Control::next(f.t, s, h)) return false;
    for (int j = 0; j < n; ++j) q0[j] = f.q[j], qd0[j] = f.qd[j];
    t0 = f.t;
    return true;
  }

  UKB_HD void set(const T* q, const T* qd, T t) {
    for (int j = 0; j < n; ++j) f.q[j] = q[j], f.qd[j] = qd[j];
    f.t = t;
  }

  UKB_HD void restore() { set(q0, qd0, t0); }

  // After an accepted step (or a located event): the projection, the
  // residual limit, the counters, the handler and the monitor.
  UKB_HD void finish(const RunSettings<T>& s) {
    bool converged = true;
    Status st = Status::ok;
    if (s.expected_rank >= 0 && (min_rank != s.expected_rank || max_rank != s.expected_rank))
      st = Status::failed_rank;
    else if (s.projection.on) st = project<Mo>(f.q, f.qd, f.t, p, s.rank_rtol, s.projection, converged);
    if (st == Status::ok && !within_limit(s)) st = Status::failed_residual;
    if (st != Status::ok) {  // keep the state before this step
      f.status = static_cast<std::int32_t>(st);
      restore();
      return;
    }
    ++f.steps;
    f.rank_drops += min_rank < m ? 1 : 0;
    const bool changed = max_rank != min_rank || (f.rank_prev != 0 && f.rank_prev != min_rank + 1);
    f.rank_changes += changed ? 1 : 0;
    f.rank_prev = min_rank + 1;
    f.rank_marginal += marginal ? 1 : 0;
    f.inconsistent += bad_rows ? 1 : 0;
    f.proj_fails += converged ? 0 : 1;
    if constexpr (HasEvents<Mo>) {
      if (s.events) {
        if (!clean) {
          ++f.events;
          rest = Mo::on_event(f.q, f.qd, f.t, p) == EventAction::stop;
        }
        g = Mo::event(f.q, f.qd, f.t, p);
      }
    }
    monitor(s);
  }

  UKB_HD void monitor(const RunSettings<T>& s) {
    if constexpr (HasResidual<Mo>) {
      if (!s.monitor) return;
      T a, b;
      Mo::residual(f.q, f.qd, f.t, p, a, b);
      f.res_pos = a > f.res_pos || a != a ? a : f.res_pos;  // NaN propagates
      f.res_vel = b > f.res_vel || b != b ? b : f.res_vel;
    } else {
      (void)s;
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

/// Takes the step that r asked for (SystemRun::next) for one system, in
/// scalar code, and hands r the outcome.
template <Model Mo, class Stepper, class Run>
UKB_HD void step_one(Run& r, const RunSettings<typename Mo::Scalar>& s) {
  using T = typename Mo::Scalar;
  constexpr int n = Mo::n;
  T q[n], qd[n], t = r.t0;
  for (int j = 0; j < n; ++j) q[j] = r.q0[j], qd[j] = r.qd0[j];
  StepRanks k{Mo::m, 0, false, false};
  bool clean = true;
  const StageSettings<T> ss{s.rank_rtol, s.baumgarte, &k.min, &k.inconsistent, &k.max, &k.marginal};
  const EventCheck<Mo, T> check{&r.p, r.g, r.checked(s), &clean};
  const Status st = Stepper::template step<Mo, T>(q, qd, t, r.size(), r.p, ss, check);
  if (st == Status::ok) check(q, qd, t);  // and the end state
  r.feed(s, st, q, qd, t, clean, k);
}

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

/// Integrates systems [first, last) of v (SystemRun documents what happens
/// to each), Lanes<V>::width at a time: one system at a time for a scalar
/// V, a pack's lanes in lockstep otherwise. A lane whose system is done
/// (finished, at rest, failed, budget spent) stores it and takes the next
/// pending one, so that the pack stays full until the range runs dry; a
/// lane without a system follows another lane's step (its result is
/// dropped), and the last system left steps alone in scalar code.
template <Model Mo, class V = typename Mo::Scalar, class Stepper = Rk4, class Control = FixedStep>
UKB_HD void integrate_systems(const BatchView<Mo>& v, int first, int last,
                              const RunSettings<typename Mo::Scalar>& s) {
  using T = typename Mo::Scalar;
  using Lane = Lanes<V>;
  using Run = SystemRun<Mo, Control>;
  constexpr int W = Lane::width, n = Mo::n;
  Run r[W];
  int sys[W];  // the system in each lane, or -1
  for (int l = 0; l < W; ++l) sys[l] = -1;
  int pending = first;
  // Packs: the lanes' parameters as the step takes them, set again only in
  // the lanes whose system changes.
  [[maybe_unused]] std::conditional_t<(W > 1), LaneParams<Mo, V>, NoLaneParams> lanes_p;
  // Lane l's next step: of its system, or of the next pending systems
  // until one has a step to take; false when the range has none left.
  auto next = [&](int l) -> bool {
    if (sys[l] >= 0) {
      if (r[l].next(s)) return true;
      r[l].store(v, sys[l], s);
      sys[l] = -1;
    }
    while (pending < last) {
      const int i = pending++;
      if (!r[l].load(v, i, s)) continue;  // not ok: nothing to do
      if (r[l].next(s)) {
        sys[l] = i;
        return true;
      }
      r[l].store(v, i, s);
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
      if (count == 1 && pending >= last) {
        step_one<Mo, Stepper>(r[lead], s);
        continue;
      }
      // Gather the lanes' steps; a lane without one follows the lead lane's.
      const T* q0[W];
      const T* qd0[W];
      T t0[W], h[W], g0[W];
      bool checks[W];
      for (int l = 0; l < W; ++l) {
        const Run& x = r[live[l] ? l : lead];
        q0[l] = x.q0, qd0[l] = x.qd0, t0[l] = x.t0, h[l] = x.size(), g0[l] = x.g;
        checks[l] = live[l] && r[l].checked(s);
        lanes_p.set(l, sys[live[l] ? l : lead], x.p);
      }
      const ParamsOf<Mo, V>& P = lanes_p.P;
      V q[n], qd[n];
      Lane::template gather<n>(q, q0);
      Lane::template gather<n>(qd, qd0);
      V t = Lane::gather(t0);
      const V hv = Lane::gather(h);
      typename Lane::Int min_rank, max_rank;
      for (int l = 0; l < W; ++l) min_rank[l] = Mo::m, max_rank[l] = 0;
      MaskOf<V> bad_rows(false), marginal(false), clean(true);
      const StageSettings<T, V> ss{s.rank_rtol, s.baumgarte, &min_rank, &bad_rows, &max_rank, &marginal};
      const EventCheck<Mo, V> check{&P, Lane::gather(g0), Lane::mask(checks), &clean};
      const typename Lane::LaneStatus st = Stepper::template step<Mo, V>(q, qd, t, hv, P, ss, check);
      check(q, qd, t);  // and the end states (failed lanes: dropped by feed)
      // Hand each lane its outcome.
      T qe[W][n], qde[W][n], te[W];
      T* qe_l[W];
      T* qde_l[W];
      for (int l = 0; l < W; ++l) qe_l[l] = qe[l], qde_l[l] = qde[l];
      Lane::template scatter<n>(q, qe_l);
      Lane::template scatter<n>(qd, qde_l);
      Lane::scatter(t, te);
      for (int l = 0; l < W; ++l)
        if (live[l])
          r[l].feed(s, st[l], qe[l], qde[l], te[l], clean[l],
                    StepRanks{min_rank[l], max_rank[l], bool(bad_rows[l]), bool(marginal[l])});
    } else {
      step_one<Mo, Stepper>(r[0], s);
    }
  }
}

/// What one GPU thread does: integrate system i (integrate_systems).
template <Model Mo>
struct IntegrateBody {
  using T = typename Mo::Scalar;
  BatchView<Mo> v;
  RunSettings<T> s;

  UKB_HD void operator()(int i) const { integrate_systems<Mo>(v, i, i + 1, s); }
};

}  // namespace ukb::kernels
