/// @file team_run.hpp
/// @brief The team route of the engine (docs/design.md §7, "The team
///        route of the engine"): the run of one system (fixed_run.hpp's
///        SystemRun for RK4, adaptive_run.hpp's AdaptiveRun for
///        Dormand–Prince) by a team of threads (team.hpp) that shares the
///        run, the step's workspace and its state in the team's shared
///        memory, so that a chain's step is not held in one thread's
///        registers and local memory.
///
/// Member 0 leads: it runs the system's run as one thread would (load,
/// next, feed, store: every read and write of the batch, every counter,
/// the handler, the monitor, the dense output), on the copy in shared
/// memory. What is linear algebra the team does together, on the lead's
/// command: the step (rk4_step or dopri5_step by the team, TeamStep), the
/// evaluation of a start that consults the handler, Dormand–Prince's
/// evaluations at a step's start and at its initial step's probe, and the
/// projection after an accepted step (team_project). The
/// others wait for the lead's next command at a sync. Every command ends
/// with a sync, or with a rendezvous (team.hpp's `all`) after which no
/// member reads what the lead writes next, so that its results are visible
/// to every member and the lead may go on; every member reads the command
/// before the lead can write the next one. Only the lead checks for the
/// event (the members' EventCheck is off) and reads a step's outcome.
/// The bits are one thread's (team.hpp): the CudaEmulation tests check
/// them against the cpu backend (CudaEmulation.TeamRoute*: with host
/// threads per member, free and taking turns in either order).
#pragma once

#include <new>
#include <type_traits>

#include "ukb/batch.hpp"
#include "ukb/config.hpp"
#include "ukb/kernels/adaptive_run.hpp"
#include "ukb/kernels/dopri5.hpp"
#include "ukb/kernels/fixed_run.hpp"
#include "ukb/kernels/rk4.hpp"
#include "ukb/kernels/stabilize.hpp"
#include "ukb/kernels/team.hpp"
#include "ukb/kernels/uk.hpp"
#include "ukb/settings.hpp"

namespace ukb::kernels {

namespace detail {
/// The model's own choice of team (a `static constexpr int cuda_team`),
/// where it declares one.
template <class Mo>
concept DeclaresTeam = requires {
  { Mo::cuda_team } -> std::convertible_to<int>;
};
}  // namespace detail

/// Threads per system of the model's integration kernels on the cuda backend
/// (docs/cpp-api.md, "Teams"): the model's `cuda_team` where it declares
/// one (1, 2, 4, 8, 16 or 32), else 1 (one thread per system) for models
/// of fewer than 8 coordinates, whose step fits in one thread's registers;
/// 8 from 8 coordinates (planar_chain_6: its whole RK4 steps took 74
/// registers with teams of 8, 146 with 4, no spills either way, in
/// bench/kernel_registers.sh --team); 16 from 24 (planar_chain_12: 196
/// registers, 186 with 32, at half the threads); 32 from 48 (not measured).
/// Chosen at compile time; no GPU has timed the choices yet.
template <Model Mo>
constexpr int team_size() {
  if constexpr (detail::DeclaresTeam<Mo>) {
    constexpr int s = Mo::cuda_team;
    static_assert(s >= 1 && s <= 32 && (s & (s - 1)) == 0,
                  "ukb model: `cuda_team` must be 1, 2, 4, 8, 16 or 32 (threads per system)");
    return s;
  } else {
    return Mo::n < 8 ? 1 : Mo::n < 24 ? 8 : Mo::n < 48 ? 16 : 32;
  }
}

/// Team projection (stabilize.hpp's project, with its
/// mass_weighted_correction) by a team that shares the evaluation's arrays
/// `ws`, q and q' (p and t the same on every member): member 0 calls the
/// model, the members split the factorisations and products. The same
/// status, iterates and `converged` as one thread's project, bit for bit
/// (team.hpp), on every member.
template <Model Mo, class Team>
UKB_HD Status team_project(const Team& team, const UkArrays<Mo>& ws, typename Mo::Scalar* q,
                           typename Mo::Scalar* qd, typename Mo::Scalar t, const typename Mo::Params& p,
                           typename Mo::Scalar rank_rtol, const Projection<typename Mo::Scalar>& pr,
                           bool& converged) {
  using T = typename Mo::Scalar;
  constexpr int n = Mo::n, m = Mo::m;
  converged = true;
  if constexpr (HasConstraintRows<Mo>) {
    const int first = team.rank(), stride = team.size();
    using Rows = ConstraintColumnsOf<Mo>;
    T* const J = ws.A;
    T* const dx = ws.z;
    for (int level = 0; level < 2; ++level) {
      T* const x = level == 0 ? q : qd;
      T* const e = level == 0 ? ws.r : ws.y;  // phi or its rate
      bool done = false;
      for (int it = 0; it < pr.max_iter && !done; ++it) {
        if (first == 0) {
          Mo::constraint_rows(q, qd, t, p, ws.r, ws.y);
          Mo::constraints(q, qd, t, p, J, ws.b);
          if (level == 0)
            for (int i = 0; i < m; ++i)
              if (!row_is_holonomic<Mo>(i)) {
                e[i] = T(0);
                for (int k = 0; k < n; ++k) J[i * n + k] = T(0);
              }
          mass_of<Mo>(q, t, p, ws.Lm.L);
        }
        team.sync();
        // mass_weighted_correction: dx = -L^{-T} (J L^{-T})^+ e.
        if (!team.all(finite_share<MassFactorOf<Mo>::entries>(team, ws.Lm.L) && finite_share<m * n>(team, J) &&
                      finite_share<m>(team, e)))
          return Status::failed_nonfinite;
        if (ws.Lm.factor(mass_pivot_rtol<n, T>(), team) != 0) return Status::failed_mass_matrix;
        ws.Lm.template solve_rows<m, Rows>(J, team);
        ws.pinv.factor(J, rank_rtol, true, team, ws.scratch);
        ws.pinv.apply(e, dx, team);
        ws.Lm.solve_transpose(dx, team);
        for (int k = first; k < n; k += stride) dx[k] = -dx[k];
        team.sync();
        if (!team.all(finite_share<n>(team, dx))) return Status::failed_nonfinite;
        for (int k = first; k < n; k += stride) x[k] += dx[k];
        team.sync();
        // Every member reads dx and x whole (written again only after
        // the next iteration's first sync, or after the sync below).
        done = norm_inf<n>(dx) <= pr.tol * norm_inf<n>(x);
      }
      converged = converged && done;
    }
    team.sync();  // every member has read q and q': the caller may change them
  } else {
    (void)team, (void)ws, (void)q, (void)qd, (void)t, (void)p, (void)rank_rtol, (void)pr;
  }
  return Status::ok;
}

/// The step of a run on the team route, by the run: what the team shares
/// for it (Space: the evaluation's arrays `uk()` and result `accel()`
/// besides the step's own), how it is taken, and how the lead asks the run
/// for the next one.
template <Model Mo, class Run>
struct TeamStep;

/// RK4 (SystemRun): the step's workspace and its state.
template <Model Mo>
struct TeamStep<Mo, SystemRun<Mo>> {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m;
  struct Space {
    Rk4Workspace<Mo> ws;
    T q[n], qd[n];  ///< the step's state
    UKB_HD UkWorkspace<Mo>& uk() { return ws.uk; }
    UKB_HD Accel<Mo>& accel() { return ws.k; }
  };

  template <class Evaluator>
  UKB_HD static bool next(SystemRun<Mo>& r, const BatchView<Mo>& v, const RunSettings<T>& s, const Evaluator&) {
    return r.next(v, s);
  }

  /// The step the run asked for, from its start (q0, q0', t0) and of its
  /// size, by every member; the lead hands the run the outcome.
  template <class Team, class Projector>
  UKB_HD static void take(const Team& team, Space& sp, SystemRun<Mo>& r, const BatchView<Mo>& v,
                          const RunSettings<T>& s, const Projector& project) {
    for (int j = team.rank(); j < n; j += team.size()) sp.q[j] = r.q0[j], sp.qd[j] = r.qd0[j];
    T t = r.t0;
    const T h = r.size();
    const bool lead = team.rank() == 0;
    StepRanks k{m, 0, false, false};
    bool clean = true;
    const StageSettings<T> ss{s.rank_rtol, s.baumgarte, &k.min, &k.inconsistent, &k.max, &k.marginal};
    const EventCheck<Mo, T> check{&r.p, r.g, lead && r.checked(s), &clean};  // the lead's alone is used
    team.sync();
    const Status st = rk4_step<Mo>(team, sp.ws, sp.q, sp.qd, t, h, r.p, ss, check);
    if (lead) {
      if (st == Status::ok) check(sp.q, sp.qd, t);  // and the end state
      r.feed(v, s, st, sp.q, sp.qd, t, clean, k, project);
    }
  }
};

/// Dormand–Prince (AdaptiveRun): the step's workspace, stages and outputs,
/// and its dense output.
template <Model Mo>
struct TeamStep<Mo, AdaptiveRun<Mo>> {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m;
  struct Space {
    Dopri5Workspace<Mo> ws;
    Dopri5Stages<n, T> k;
    T q1[n], qd1[n], eq[n], ev[n];  ///< the end state and the error estimate
    DenseStep<n, T> dn;
    UKB_HD UkWorkspace<Mo>& uk() { return ws.uk; }
    UKB_HD Accel<Mo>& accel() { return ws.acc; }
  };

  template <class Evaluator>
  UKB_HD static bool next(AdaptiveRun<Mo>& r, const BatchView<Mo>& v, const RunSettings<T>& s,
                          const Evaluator& evaluate) {
    return r.next(v, s, evaluate);
  }

  /// AdaptiveRun::step_one by the team: the stages from the run's start
  /// with its acceleration there (FSAL); the end state's check, the error
  /// norm and the dense output where the run wants it by the lead, which
  /// hands the run the outcome (and then changes the start: the others
  /// read no more of it).
  template <class Team, class Projector>
  UKB_HD static void take(const Team& team, Space& sp, AdaptiveRun<Mo>& r, const BatchView<Mo>& v,
                          const RunSettings<T>& s, const Projector& project) {
    for (int j = team.rank(); j < n; j += team.size()) sp.k.kq[0][j] = r.qd0[j], sp.k.kv[0][j] = r.k1[j];
    const T t1 = r.t1, h = r.h;
    const bool lead = team.rank() == 0;
    StepRanks k{m, 0, false, false};
    bool clean = true;
    const StageSettings<T> ss{s.rank_rtol, s.baumgarte, &k.min, &k.inconsistent, &k.max, &k.marginal};
    const EventCheck<Mo, T> check{&r.p, r.g, lead && r.checked(s), &clean};  // the lead's alone is used
    team.sync();
    const Status st =
        dopri5_step<Mo>(team, sp.ws, r.q0, r.qd0, r.t0, t1, h, r.p, ss, check, sp.k, sp.q1, sp.qd1, sp.eq, sp.ev);
    if (lead) {
      T err = T(0);
      if (st == Status::ok) {
        check(sp.q1, sp.qd1, t1);  // and the end state
        err = dopri5_error<n, T>(r.q0, r.qd0, sp.q1, sp.qd1, sp.eq, sp.ev, s.control);
      }
      const bool dense = st == Status::ok && r.wants_dense(v, s, err, clean);
      if (dense) dopri5_dense<n, T>(r.q0, r.qd0, sp.q1, sp.qd1, sp.k, h, 0, sp.dn);
      r.feed(v, s, st, sp.q1, sp.qd1, err, clean, sp.k.kv[6], k, dense ? &sp.dn : nullptr, project);
    }
  }
};

/// What a team shares for one system on the team route: the run (member
/// 0's), its step's space (TeamStep) and the lead's command. sizeof is the
/// shared memory of one system (take it where the code runs: uk.hpp's
/// UkWorkspace says why).
template <Model Mo, class Run>
struct TeamRunShared {
  Run run;
  typename TeamStep<Mo, Run>::Space step;
  int command;  ///< TeamIntegrateBody::Command
};

/// The run Run (SystemRun: RK4; AdaptiveRun: Dormand–Prince) of system i
/// by a team (the team route's kernel body): every member of the team calls
/// it with the same i and the team's shared TeamRunShared, whose contents
/// it sets up itself. Results, counters and dense output included, bit for
/// bit those of IntegrateBody<Mo, Run> (one thread) where the compiler
/// contracts no multiply-adds (team.hpp).
template <Model Mo, class Run = SystemRun<Mo>>
struct TeamIntegrateBody {
  using T = typename Mo::Scalar;
  using Shared = TeamRunShared<Mo, Run>;
  using Step = TeamStep<Mo, Run>;
  static constexpr int team_threads = team_size<Mo>();  ///< threads per team on the cuda backend
  BatchView<Mo> v;
  RunSettings<T> s;

  /// The lead's commands.
  enum Command : int { stop = 0, step = 1, consult = 2, project = 3, evaluate = 4 };

  /// The lead's projector (RunCommon::settle): the team projects the run's
  /// state (the others are waiting for a command).
  template <class Team>
  struct Projector {
    const Team& team;
    Shared& sh;
    UKB_HD Status operator()(T* q, T* qd, T t, const typename Mo::Params& p, T rank_rtol, const Projection<T>& pr,
                             bool& converged) const {
      if constexpr (HasConstraintRows<Mo>) {
        sh.command = project;
        team.sync();
      }
      return team_project<Mo>(team, sh.step.uk().arrays(), q, qd, t, p, rank_rtol, pr, converged);
    }
  };

  /// The lead's evaluator (RunCommon::evaluate_with): the team evaluates
  /// the acceleration at (q, q', t), which member 0 alone reads (the
  /// model's calls of uk_accel), into the shared result.
  template <class Team>
  struct Evaluator {
    const Team& team;
    Shared& sh;
    const RunSettings<T>& settings;
    template <class Use>
    UKB_HD auto operator()(const T* q, const T* qd, T t, const Use& use) const {
      sh.command = evaluate;
      team.sync();
      const Status st = uk_accel<Mo, T>(team, sh.step.uk().arrays(), q, qd, t, sh.run.p, settings.rank_rtol,
                                        sh.step.accel(), settings.baumgarte);
      return use(st, static_cast<const Accel<Mo>&>(sh.step.accel()));
    }
  };

  template <class Team>
  UKB_HD void operator()(const Team& team, Shared& sh, int i) const {
    const bool lead = team.rank() == 0;
    Run& r = sh.run;
    const Evaluator<Team> evaluator{team, sh, s};
    if (lead) {
      new (&sh) Shared;
      sh.command = stop;
      if (r.template load<true>(v, i, s)) sh.command = r.consult ? consult : advance(r, evaluator);
    }
    for (;;) {
      team.sync();
      const int command = sh.command;
      if (command == stop) return;
      // The commands that a model or run cannot give are not compiled (each
      // is an inlined evaluation or projection more in the kernel).
      if constexpr (HasConstraintRows<Mo>) {
        if (command == project) {  // from the lead's feed: the arguments the lead passes
          bool converged = true;
          team_project<Mo>(team, sh.step.uk().arrays(), r.f.q, r.f.qd, r.f.t, r.p, s.rank_rtol, s.projection,
                           converged);
          continue;
        }
      }
      if constexpr (std::is_same_v<Run, AdaptiveRun<Mo>>) {
        if (command == evaluate) {  // from the lead's run: (q, q', t) are the lead's alone
          uk_accel<Mo, T>(team, sh.step.uk().arrays(), nullptr, nullptr, T(0), r.p, s.rank_rtol, sh.step.accel(),
                          s.baumgarte);
          continue;
        }
      }
      if constexpr (HasEvents<Mo>) {
        if (command == consult) {
          const Status st = uk_accel<Mo, T>(team, sh.step.uk().arrays(), r.f.q, r.f.qd, r.f.t, r.p, s.rank_rtol,
                                            sh.step.accel(), s.baumgarte);
          if (lead) {
            r.consulted(v, st);
            sh.command = advance(r, evaluator);
          }
          continue;
        }
      }
      Step::take(team, sh.step, r, v, s, Projector<Team>{team, sh});
      if (lead) sh.command = advance(r, evaluator);
    }
  }

 private:
  // The lead's next command once a step or consultation is done: the next
  // step, or the system stored and stop.
  template <class Team>
  UKB_HD Command advance(Run& r, const Evaluator<Team>& evaluator) const {
    if (Step::next(r, v, s, evaluator)) return step;
    r.store(v, s);
    return stop;
  }
};

}  // namespace ukb::kernels
