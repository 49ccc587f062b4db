/// @file adaptive_run.hpp
/// @brief The run of Dormand–Prince with adaptive steps (AdaptiveRun): the
///        error control's choice of the next step (control.hpp's
///        AdaptiveStep), the event located on the dense output or by
///        bisection (events.hpp), and what follows a step (run_common.hpp).
#pragma once

#include <limits>

#include "ukb/kernels/control.hpp"
#include "ukb/kernels/dopri5.hpp"
#include "ukb/kernels/events.hpp"
#include "ukb/kernels/run_common.hpp"

namespace ukb::kernels {

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
  using Base::f, Base::p, Base::rest, Base::g, Base::begun, Base::locating;
  using Base::fsal_bit, Base::rejected_bit;
  // The step being taken: its start, end time and size, and how it went.
  T q0[n], qd0[n], t0{}, t1{}, h{};
  T k1[n];               ///< the acceleration at the state, when k1_ok
  bool k1_ok = false;
  bool clean = true;     ///< the step crossed no event
  Bisection<T> bisection{};
  T err_lo{};            ///< the error norm of the longest clean trial so far (NaN: none)
  T h_next{};            ///< the `h_next` field: the size the control chose for the next step (0: none yet)
  T err_prev{};          ///< the `err_prev` field: the error norm of the last accepted step

  template <bool Defer = false>
  UKB_HD bool load(const BatchView<Mo>& v, int i, const RunSettings<T>& s) {
    k1_ok = false;
    locating = false;
    h_next = v.h_next ? v.h_next[i] : T(0);
    err_prev = v.err_prev ? v.err_prev[i] : T(0);
    return Base::template load<Defer>(v, i, s);
  }

  /// Scatters the system back (RunCommon::store) with the control's state.
  UKB_HD void store(const BatchView<Mo>& v, const RunSettings<T>& s) {
    if (v.h_next) v.h_next[this->sys] = h_next;
    if (v.err_prev) v.err_prev[this->sys] = err_prev;
    Base::store(v, s);
  }

  /// Whether another step is to be taken in this call (as SystemRun::next).
  template <class Evaluator = OwnEvaluation>
  UKB_HD bool next(const BatchView<Mo>& v, const RunSettings<T>& s, const Evaluator& evaluate = {}) {
    if (locating) return true;  // the bisection's next trial (h and t1 set)
    if (begun >= s.budget || !begin(v, s, evaluate)) return false;
    ++begun;
    clean = true;
    return true;
  }

  UKB_HD T size() const { return h; }


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
  template <class Projector = OwnProjection>
  UKB_HD void feed(const BatchView<Mo>& v, const RunSettings<T>& s, Status st, const T* q, const T* qd, T err,
                   bool step_clean, const T* a1, const StepRanks& k, const DenseStep<n, T>* dn,
                   const Projector& project = {}) {
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
        dopri5_control(bisection.lo, err_lo, e_prev, was_rejected, h_new, s.control.safety);
        reject(v, h_new);
        return;
      }
      k1_ok = false;
      finish(v, s, true, project);  // located: the state is at t0 + bisection.lo
      return;
    }
    if (!(err == err)) {  // a NaN error norm: the step's end state is not finite
      f.status = static_cast<std::int32_t>(Status::failed_nonfinite);
      return;
    }
    T e_prev = err_prev, h_new;
    bool was_rejected = (f.ctrl & rejected_bit) != 0;
    const bool accepted = dopri5_control(h, err, e_prev, was_rejected, h_new, s.control.safety);
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
      finish(v, s, true, project);
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
    finish(v, s, crossed, project);
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
  template <class Evaluator>
  UKB_HD bool begin(const BatchView<Mo>& v, const RunSettings<T>& s, const Evaluator& evaluate) {
    if (rest || !f.ok() || f.steps >= s.max_steps || !(f.t < s.t_pause)) return false;
    if (!before_end(f.t, s)) return false;
    // What B does in this step's evaluations (a rejected step's are not
    // counted; the location trials of an accepted one are).
    this->reset_ranks();
    if (!k1_ok) {
      const bool ok = this->template evaluate_with<false>(
          evaluate, f.q, f.qd, f.t, s, [&](Status st, const Accel<Mo>& a) {
            if (!(f.ctrl & fsal_bit)) {  // a new evaluation (else that of the last step's last stage again)
              this->add(v.rhs_evals, 1);
              if (st == Status::ok) this->add_ranks(StepRanks{a.rank, a.rank, a.inconsistent, a.marginal});
            }
            if (st != Status::ok) {
              f.status = static_cast<std::int32_t>(st);
              return false;
            }
            for (int j = 0; j < n; ++j) k1[j] = a.qdd[j];
            return true;
          });
      if (!ok) return false;
      k1_ok = true;
      f.ctrl |= fsal_bit;
    }
    T step = h_next;
    if (!(step > T(0))) {  // the first step: a guess, within [dt_min, dt_max]
      step = s.dt > T(0) ? s.dt : initial_step(v, s, evaluate);
      if (!(step - step == T(0))) {  // NaN or infinite: the state or its acceleration is not finite
        f.status = static_cast<std::int32_t>(Status::failed_nonfinite);
        return false;
      }
      step = step > s.control.dt_min ? step : s.control.dt_min;
    }
    step = without_tangents(step < s.control.dt_max ? step : s.control.dt_max);  // dual numbers: held fixed
    if (!AdaptiveStep::next(f.t, step, s, h, t1)) {
      f.status = static_cast<std::int32_t>(Status::failed_step_size);
      return false;
    }
    h_next = step;
    for (int j = 0; j < n; ++j) q0[j] = f.q[j], qd0[j] = f.qd[j];
    t0 = f.t;
    return true;
  }

  // The first step where dt is 0 (dopri5_initial_step), one evaluation more.
  template <class Evaluator>
  UKB_HD T initial_step(const BatchView<Mo>& v, const RunSettings<T>& s, const Evaluator& evaluate) {
    T f0[2 * n];
    for (int j = 0; j < n; ++j) f0[j] = f.qd[j], f0[n + j] = k1[j];
    this->add(v.rhs_evals, 1);
    auto accel = [&](const T* q, const T* qd, T t, T* out) {
      return this->template evaluate_with<false>(evaluate, q, qd, t, s, [&](Status st, const Accel<Mo>& a) {
        if (st != Status::ok) return false;
        for (int j = 0; j < n; ++j) out[j] = a.qdd[j];
        return true;
      });
    };
    return dopri5_initial_step<n, T>(f.q, f.qd, f.t, f0, s.control, accel);
  }

  // After an accepted step (or a located event): the projection, the
  // residual limit, the counters, the handler and the monitor; whether the
  // acceleration at the state is known (FSAL) goes to ctrl.
  template <class Projector>
  UKB_HD void finish(const BatchView<Mo>& v, const RunSettings<T>& s, bool located, const Projector& project) {
    bool converged = true;
    const Status ss = this->settle(s, converged, project);
    if (ss != Status::ok) {  // keep the state before this step
      f.status = static_cast<std::int32_t>(ss);
      this->set(q0, qd0, t0);
      drop_dense(v);
      return;
    }
    if (s.projection.on) k1_ok = false;
    this->count(v, s, converged, located, t0);
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

  // The first crossing of the event on the dense output dn (locate_on_dense): theta in [0, 1)
  // with g on the start's side, within event_tol / h of a theta across it;
  // false where no sampled point of the dense output crosses.
  UKB_HD bool locate(const RunSettings<T>& s, const DenseStep<n, T>& dn, T& theta) const {
    if constexpr (HasEvents<Mo>) {
      auto G = [&](T th) {
        T q[n], qd[n];
        dense_state(dn.r[0], n, th, q, qd);
        return Mo::event(q, qd, t0 + th * h, p);
      };
      return locate_on_dense(G, g, h, s.event_tol, theta);
    } else {
      (void)s, (void)dn, (void)theta;
      return false;
    }
  }
};

}  // namespace ukb::kernels
