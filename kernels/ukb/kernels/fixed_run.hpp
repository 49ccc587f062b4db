/// @file fixed_run.hpp
/// @brief The run of RK4 with fixed steps (SystemRun): which step a system
///        takes next (control.hpp's FixedStep), the bisection that locates
///        an event inside a step (events.hpp), and what follows a step
///        (run_common.hpp).
#pragma once

#include "ukb/kernels/control.hpp"
#include "ukb/kernels/events.hpp"
#include "ukb/kernels/rk4.hpp"
#include "ukb/kernels/run_common.hpp"

namespace ukb::kernels {

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
/// at_rest, t_stop = the time it leaves: the event's, or later where it
/// finished a motion, RunCommon::handle). From a state with g exactly zero (a
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
///
/// On a GPU its kernel inlines the rare paths for the smallest models
/// (detail::inlined_rare): an out-of-line call kept arrays of the step in
/// local memory, stored to at every stage and never read there, and the
/// registers of the step above the 168 at which 12 warps fit on a
/// multiprocessor (bench/README.md, "Registers of the run loop").
/// Dormand–Prince's run, whose stages hold 14 n values, keeps them out of
/// line (inlined, its kernel needed more registers).
template <Model Mo, class Control = FixedStep>
struct SystemRun : RunCommon<Mo, detail::inlined_rare<Mo>> {
  using Base = RunCommon<Mo, detail::inlined_rare<Mo>>;
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m;
  using Base::f, Base::p, Base::rest, Base::g, Base::begun, Base::locating;
  // The step being taken: its start, its size, and how it went.
  T q0[n], qd0[n], t0{}, h{};
  bool clean = true;             ///< the step crossed no event
  Bisection<T> bisection{};
  T trial{};                     ///< the size of the trial being taken

  template <bool Defer = false>
  UKB_HD bool load(const BatchView<Mo>& v, int i, const RunSettings<T>& s) {
    locating = false;
    return Base::template load<Defer>(v, i, s);
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


  /// The outcome of the step next() asked for: its status, its end state
  /// (q, q', t), whether it stayed clean (checked steps; true otherwise),
  /// and what its evaluations found about B. `project`: who projects the
  /// state after an accepted step (RunCommon::settle).
  template <class Projector = OwnProjection>
  UKB_HD void feed(const BatchView<Mo>& v, const RunSettings<T>& s, Status st, const T* q, const T* qd, T t,
                   bool step_clean, const StepRanks& k, const Projector& project = {}) {
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
    finish(v, s, project);  // its one call: the projection is inlined once
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
  template <class Projector>
  UKB_HD void finish(const BatchView<Mo>& v, const RunSettings<T>& s, const Projector& project) {
    bool converged = true;
    const Status st = this->settle(s, converged, project);
    if (st != Status::ok) {  // keep the state before this step
      f.status = static_cast<std::int32_t>(st);
      restore();
      return;
    }
    this->count(v, s, converged, !clean, t0);
  }
};

}  // namespace ukb::kernels
