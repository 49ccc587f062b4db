/// @file backend.hpp
/// @brief The reference backend's entry points (include/ukb/backend.hpp):
///        the Eigen oracle (solver.hpp), system after system, with a run
///        loop of its own.
///
/// The loop makes the same decisions as the shared kernels' (the model's
/// event, handler, residual and constraint rows; the rules of policy.hpp)
/// with numerics of its own: reference::rk4_step, bisection for the event
/// instant, reference::project, Baumgarte through reference::evaluate. It
/// includes nothing of kernels/, so that it checks the kernels' loop, their
/// locator and their stabilisation rather than repeating them. Double only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ukb/backend.hpp"
#include "ukb/batch.hpp"
#include "ukb/policy.hpp"
#include "ukb/reference/solver.hpp"

namespace ukb::backends::reference {

template <Model Mo>
void evaluate(const BatchView<Mo>& v, const EvalSettings<typename Mo::Scalar>& s, const EngineOptions&) {
  static_assert(std::is_same_v<typename Mo::Scalar, double>, "the reference backend computes in double only");
  for (int i = 0; i < v.N; ++i) {
    Eigen::VectorXd q(Mo::n), qd(Mo::n);
    for (int j = 0; j < Mo::n; ++j) q(j) = v.q[soa(j, i, v.N)], qd(j) = v.qd[soa(j, i, v.N)];
    const ukb::reference::Result r = ukb::reference::evaluate<Mo>(load_params<Mo>(v, i), q, qd, v.t[i], s);
    for (int j = 0; j < Mo::n; ++j) {
      v.qdd[soa(j, i, v.N)] = r.qdd(j);
      v.Qc_ideal[soa(j, i, v.N)] = r.Qc_ideal(j);
      v.Qc_nonideal[soa(j, i, v.N)] = r.Qc_nonideal(j);
    }
    for (int j = 0; j < Mo::m; ++j) v.lambda[soa(j, i, v.N)] = r.lambda(j);
    v.rank[i] = r.rank;
    v.status[i] = static_cast<std::int32_t>(r.status);
  }
}

template <Model Mo>
void integrate(const BatchView<Mo>& v, const RunSettings<typename Mo::Scalar>& s, const EngineOptions&) {
  static_assert(std::is_same_v<typename Mo::Scalar, double>, "the reference backend computes in double only");
  namespace ref = ukb::reference;
  for (int i = 0; i < v.N; ++i) {
    SystemFields<Mo> y;
    y.load(v, i);
    if (!y.ok()) continue;
    const typename Mo::Params p = load_params<Mo>(v, i);
    ref::State x{Eigen::VectorXd(Mo::n), Eigen::VectorXd(Mo::n), y.t};
    for (int j = 0; j < Mo::n; ++j) x.q(j) = y.q[j], x.qd(j) = y.qd[j];
    // Every evaluation (location trials too) lowers min_rank.
    const ref::AccelFn f0 = ref::accel_fn<Mo>(p, s.eval());
    int min_rank = Mo::m, max_rank = 0;
    bool bad_rows = false, marginal = false;
    const ref::AccelFn f = [&](const Eigen::VectorXd& q, const Eigen::VectorXd& qd, double t) {
      ref::Result r = f0(q, qd, t);
      if (r.status == Status::ok) {
        min_rank = std::min(min_rank, r.rank);
        max_rank = std::max(max_rank, r.rank);
        bad_rows = bad_rows || r.inconsistent;
        marginal = marginal || r.marginal;
      }
      return r;
    };
    auto monitor = [&](const ref::State& z) {
      if constexpr (HasResidual<Mo>) {
        if (!s.monitor) return;
        double a, c;
        Mo::residual(z.q.data(), z.qd.data(), z.t, p, a, c);
        y.res_pos = std::isnan(a) ? a : std::max(y.res_pos, a);
        y.res_vel = std::isnan(c) ? c : std::max(y.res_vel, c);
      }
    };
    auto event = [&](const ref::State& z) {
      if constexpr (HasEvents<Mo>) return Mo::event(z.q.data(), z.qd.data(), z.t, p);
      return 0.0;
    };
    auto handler_stops = [&](ref::State& z) {
      if constexpr (HasEvents<Mo>) return Mo::on_event(z.q.data(), z.qd.data(), z.t, p) == EventAction::stop;
      return false;
    };
    const bool with_events = HasEvents<Mo> && s.events;
    Status st = Status::ok;
    bool rest = false;
    if (y.steps == 0) monitor(x);
    double g = with_events ? event(x) : 0.0;
    if (with_events && y.steps == 0 && g == 0.0) {
      st = f(x.q, x.qd, x.t).status;  // evaluable before the handler is asked
      if (st == Status::ok) {
        ++y.events;
        rest = handler_stops(x);
        g = event(x);
      }
    }
    for (long k = 0; k < s.budget && !rest && st == Status::ok; ++k) {
      const double remaining = s.t_end - x.t;
      if (!(remaining > s.dt * policy::end_slack)) break;
      if (y.steps >= s.max_steps) break;
      const double h = remaining < s.dt * (1 + policy::end_slack) ? remaining : s.dt;
      if (!(x.t + h > x.t)) break;
      const ref::State x0 = x;
      // An RK4 step that also reports whether the event function kept the
      // sign of g at every stage state and at the end (the stage states are
      // seen through the acceleration function; stage 1 is x0).
      auto checked_step = [&](ref::State& z, double step, bool& clean) {
        clean = true;
        int stage = 0;
        const ref::AccelFn fo = [&](const Eigen::VectorXd& q, const Eigen::VectorXd& qd, double t) {
          if (stage++ > 0) {
            const double gz = event(ref::State{q, qd, t});
            if (!(gz != 0.0 && (gz > 0) == (g > 0))) clean = false;
          }
          return f(q, qd, t);
        };
        const Status r = ref::rk4_step(fo, z, step);
        const double ge = event(z);
        if (!(ge != 0.0 && (ge > 0) == (g > 0))) clean = false;
        return r;
      };
      bool clean = true;
      min_rank = Mo::m;
      max_rank = 0;
      bad_rows = false;
      marginal = false;
      st = with_events && g != 0.0 ? checked_step(x, h, clean) : ref::rk4_step(f, x, h);
      if (st != Status::ok) break;
      if (with_events && !clean) {
        // Bisection on the step size: the longest clean trial step.
        double lo = 0, hi = h;
        x = x0;
        for (int it = 0; it < policy::max_bisections && hi - lo > s.event_tol; ++it) {
          const double mid = 0.5 * (lo + hi);
          if (!(mid > lo && mid < hi)) break;
          ref::State z = x0;
          bool c = false;
          st = checked_step(z, mid, c);
          if (st != Status::ok) break;
          if (c) lo = mid, x = z;
          else hi = mid;
        }
      }
      ref::Projected pr;
      if (st == Status::ok && s.expected_rank >= 0 && (min_rank != s.expected_rank || max_rank != s.expected_rank))
        st = Status::failed_rank;
      if (st == Status::ok && s.projection.on) {
        pr = ref::project<Mo>(p, x, s.projection.tol, s.projection.max_iter, s.rank_rtol);
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
      ++y.steps;
      if (min_rank < Mo::m) ++y.rank_drops;
      // A change against the previous step (rank_prev holds 1 + its rank) or within this one.
      if (max_rank != min_rank || (y.rank_prev != 0 && y.rank_prev != min_rank + 1)) ++y.rank_changes;
      y.rank_prev = min_rank + 1;
      if (marginal) ++y.rank_marginal;
      if (bad_rows) ++y.inconsistent;
      if (!pr.converged) ++y.proj_fails;
      if (with_events) {
        if (!clean) {
          ++y.events;
          rest = handler_stops(x);
        }
        g = event(x);
      }
      monitor(x);
    }
    if (rest) {
      st = Status::at_rest;
      y.t_stop = x.t;
    } else if (st == Status::ok && y.steps >= s.max_steps && std::isfinite(s.t_end) &&
               s.t_end - x.t > s.dt * policy::end_slack) {
      st = Status::max_steps;
    } else if (st != Status::ok) {
      y.t_stop = x.t;
    }
    for (int j = 0; j < Mo::n; ++j) y.q[j] = x.q(j), y.qd[j] = x.qd(j);
    y.t = x.t;
    y.status = static_cast<std::int32_t>(st);
    y.store(v, i);
  }
}

}  // namespace ukb::backends::reference

// The built-in models are instantiated once, in the library.
#ifndef UKB_BUILTIN_INSTANCES
#include "ukb/models/all.hpp"
UKB_FOR_EACH_BUILTIN_DOUBLE(UKB_EXTERN_REFERENCE)
#endif
