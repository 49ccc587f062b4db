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
///   for RK4 (fixed_run.hpp: fixed steps, control.hpp, and the bisection of
///   a located event, events.hpp), AdaptiveRun for Dormand–Prince
///   (adaptive_run.hpp: error control, control.hpp, the event located on
///   the dense output, events.hpp); what they share is run_common.hpp;
/// - integrate_systems (here) takes the steps: for one system at a time, or for the
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
#include "ukb/kernels/adaptive_run.hpp"
#include "ukb/kernels/fixed_run.hpp"
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

/// The evaluations of the pending consultations of a pack's lanes
/// (RunCommon::load): each lane where `pending` at its system's state (the
/// others follow lane `first`'s, their results dropped), with the lanes'
/// parameters set in lanes_p; the status of each lane's evaluation, the
/// bits of uk_eval_rare's on that system alone (lanes.hpp).
template <Model Mo, class V, class Run>
typename Lanes<V>::LaneStatus consult_lanes(const Run* r, const bool* pending, int first, const int* sys,
                                            LaneParams<Mo, V>& lanes_p, const RunSettings<typename Mo::Scalar>& s) {
  using Lane = Lanes<V>;
  using T = typename Mo::Scalar;
  constexpr int W = Lane::width, n = Mo::n;
  const T* q[W];
  const T* qd[W];
  T t[W];
  for (int l = 0; l < W; ++l) {
    const int k = pending[l] ? l : first;
    q[l] = r[k].f.q, qd[l] = r[k].f.qd, t[l] = r[k].f.t;
    lanes_p.set(l, sys[k], r[k].p);
  }
  V x[n], xd[n];
  Lane::template gather<n>(x, q);
  Lane::template gather<n>(xd, qd);
  Accel<Mo, V> a;
  return uk_accel<Mo, V>(x, xd, Lane::gather(t), lanes_p.P, s.rank_rtol, a, s.baumgarte);
}

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
  // In a pack, a system whose start consults its handler stops the search
  // with the consultation pending (r[l].consult: the lanes' evaluations
  // are then made together, consult_lanes).
  auto next = [&](int l) -> bool {
    if (sys[l] >= 0) {
      if (r[l].next(v, s)) return true;
      r[l].store(v, s);
      sys[l] = -1;
    }
    for (int i = src.next(); i >= 0; i = src.next()) {
      if (!r[l].template load<(W > 1)>(v, i, s)) continue;  // not ok: nothing to do
      sys[l] = i;
      if (W > 1 && r[l].consult) return true;
      if (r[l].next(v, s)) return true;
      r[l].store(v, s);
      sys[l] = -1;
    }
    return false;
  };
  for (;;) {
    bool live[W];
    for (int l = 0; l < W; ++l) live[l] = next(l);
    if constexpr (W > 1) {
      // The pending consultations, each lane's evaluation at its state on
      // the pack; a lane whose system has then no step to take goes on to
      // the next system (whose start may consult again).
      for (;;) {
        int first = -1;
        bool pending[W];
        for (int l = 0; l < W; ++l) {
          pending[l] = live[l] && r[l].consult;
          if (pending[l] && first < 0) first = l;
        }
        if (first < 0) break;
        const typename Lane::LaneStatus st = consult_lanes<Mo, V>(r, pending, first, sys, lanes_p, s);
        for (int l = 0; l < W; ++l) {
          if (!pending[l]) continue;
          r[l].consulted(v, Lane::lane(st, l));
          live[l] = next(l);
        }
      }
    }
    int lead = -1, count = 0;
    for (int l = 0; l < W; ++l) {
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
/// carry Dormand–Prince's stages (fewer registers and less stack per
/// thread; bench/kernel_registers.sh prints them).
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
