/// @file team_run.hpp
/// @brief The team route of the engine (docs/design.md §7, "Teams per
///        system"): RK4's run of one system (fixed_run.hpp's SystemRun) by
///        a team of threads (team.hpp) that shares the run, the step's
///        workspace and the state in the team's shared memory, so that a
///        chain's step is not held in one thread's registers and local
///        memory.
///
/// Member 0 leads: it runs the system's SystemRun as one thread would
/// (load, next, feed, store: every read and write of the batch, every
/// counter, the handler, the monitor), on the copy in shared memory. What
/// is linear algebra the team does together, on the lead's command: the
/// step (rk4_step by the team), the evaluation of a start that consults the
/// handler, and the projection after an accepted step (team_project). The
/// others wait for the lead's next command at a sync. Every command ends
/// with a sync, so that its results are visible to every member, and
/// every member reads the command before the lead can write the next one.
/// The bits are one thread's (team.hpp): Kernels.TeamRun* and
/// CudaEmulation.TeamRoute* check them against one thread and the cpu
/// backend.
#pragma once

#include <new>
#include <type_traits>

#include "ukb/batch.hpp"
#include "ukb/config.hpp"
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

/// Threads per system of the model's RK4 kernels on the cuda backend
/// (docs/cpp-api.md, "Teams"): the model's `cuda_team` where it declares
/// one (1, 2, 4, 8, 16 or 32), else 1 (one thread per system) for models
/// of fewer than 8 coordinates, whose step fits in one thread's registers,
/// 8 from 8 coordinates (planar_chain_6), 16 from 24 (planar_chain_12),
/// 32 from 48: the smallest teams whose whole RK4 steps needed no spill
/// stores and at most 256 B of stack in bench/kernel_registers.sh --team.
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
        // the next iteration's first sync).
        done = norm_inf<n>(dx) <= pr.tol * norm_inf<n>(x);
      }
      converged = converged && done;
    }
  } else {
    (void)team, (void)ws, (void)q, (void)qd, (void)t, (void)p, (void)rank_rtol, (void)pr;
  }
  return Status::ok;
}

/// What a team shares for one system on the team route: the run (member
/// 0's), the step's workspace and state, and the lead's command. sizeof is
/// the shared memory of one system (take it where the code runs: uk.hpp's
/// UkWorkspace says why).
template <Model Mo>
struct TeamRunShared {
  using T = typename Mo::Scalar;
  SystemRun<Mo> run;
  Rk4Workspace<Mo> ws;
  T q[Mo::n], qd[Mo::n];  ///< the step's state
  int command;            ///< TeamIntegrateBody::Command
};

/// RK4's run of system i by a team (the team route's kernel body): every
/// member of the team calls it with the same i and the team's shared
/// TeamRunShared, whose contents it sets up itself. Results, counters
/// included, bit for bit those of IntegrateBody<Mo, SystemRun<Mo>> (one
/// thread) where the compiler contracts no multiply-adds (team.hpp).
template <Model Mo>
struct TeamIntegrateBody {
  using T = typename Mo::Scalar;
  using Shared = TeamRunShared<Mo>;
  static constexpr int team_threads = team_size<Mo>();  ///< threads per team on the cuda backend
  static constexpr int n = Mo::n, m = Mo::m;
  BatchView<Mo> v;
  RunSettings<T> s;

  /// The lead's commands.
  enum Command : int { stop = 0, step = 1, consult = 2, project = 3 };

  /// The lead's projector (RunCommon::settle): the team projects the run's
  /// state (the others are waiting for a command).
  template <class Team>
  struct Projector {
    const Team& team;
    Shared& sh;
    UKB_HD Status operator()(T* q, T* qd, T t, const typename Mo::Params& p, T rank_rtol, const Projection<T>& pr,
                             bool& converged) const {
      sh.command = project;
      team.sync();
      return team_project<Mo>(team, sh.ws.uk.arrays(), q, qd, t, p, rank_rtol, pr, converged);
    }
  };

  template <class Team>
  UKB_HD void operator()(const Team& team, Shared& sh, int i) const {
    const bool lead = team.rank() == 0;
    SystemRun<Mo>& r = sh.run;
    if (lead) {
      new (&sh) Shared;
      sh.command = stop;
      if (r.template load<true>(v, i, s)) sh.command = r.consult ? consult : advance(r);
    }
    for (;;) {
      team.sync();
      const int command = sh.command;
      if (command == stop) return;
      if (command == project) {  // from the lead's feed: arguments as the lead passes them
        bool converged = true;
        team_project<Mo>(team, sh.ws.uk.arrays(), r.f.q, r.f.qd, r.f.t, r.p, s.rank_rtol, s.projection, converged);
        continue;
      }
      if (command == consult) {
        const Status st = uk_accel<Mo, T>(team, sh.ws.uk.arrays(), r.f.q, r.f.qd, r.f.t, r.p, s.rank_rtol,
                                          sh.ws.k, s.baumgarte);
        if (lead) {
          r.consulted(v, st);
          sh.command = advance(r);
        }
        continue;
      }
      // A step: from the run's start (q0, q0', t0), of its size.
      for (int j = team.rank(); j < n; j += team.size()) sh.q[j] = r.q0[j], sh.qd[j] = r.qd0[j];
      T t = r.t0;
      const T h = r.size();
      StepRanks k{m, 0, false, false};
      bool clean = true;
      const StageSettings<T> ss{s.rank_rtol, s.baumgarte, &k.min, &k.inconsistent, &k.max, &k.marginal};
      const EventCheck<Mo, T> check{&r.p, r.g, r.checked(s), &clean};
      team.sync();
      const Status st = rk4_step<Mo>(team, sh.ws, sh.q, sh.qd, t, h, r.p, ss, check);
      if (st == Status::ok) check(sh.q, sh.qd, t);  // and the end state
      if (lead) {
        r.feed(v, s, st, sh.q, sh.qd, t, clean, k, Projector<Team>{team, sh});
        sh.command = advance(r);
      }
    }
  }

 private:
  // The lead's next command once a step or consultation is done: the next
  // step, or the system stored and stop.
  UKB_HD Command advance(SystemRun<Mo>& r) const {
    if (r.next(v, s)) return step;
    r.store(v, s);
    return stop;
  }
};

}  // namespace ukb::kernels
