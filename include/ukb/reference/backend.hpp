/// @file backend.hpp
/// @brief The reference backend's entry points (include/ukb/backend.hpp):
///        the Eigen oracle (solver.hpp), system after system, with a run
///        loop of its own.
///
/// The loop makes the same decisions as the shared kernels' (the model's
/// event, handler, residual and constraint rows; the rules of policy.hpp)
/// with numerics of its own: reference::rk4_step and dopri5_step,
/// bisection for the event instant (of RK4 steps, or on the dense output),
/// its own step-size control, reference::project, Baumgarte through
/// reference::evaluate. It
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

namespace detail {

/// One system's run on the reference backend, what both methods share: its
/// fields, its state as Eigen vectors, the evaluations (tracking what B
/// does), the event function and handler, the residual monitor, what follows
/// an accepted step (rank check, projection, residual limit, counters) and
/// the final status. The methods' loops are integrate_rk4 and
/// integrate_adaptive below.
template <Model Mo>
struct RefRun {
  static constexpr int n = Mo::n;
  static constexpr std::int32_t started = 1;  // bits of ctrl, as kernels::RunCommon's
  static constexpr std::int32_t resumed = 8;  // the last accepted step ended at an event that was resumed
  const RunSettings<double>& s;
  SystemFields<Mo> y;
  typename Mo::Params p{};
  ukb::reference::State x;
  ukb::reference::AccelFn f0;  // untracked
  ukb::reference::AccelFn f;   // tracked in the fields below
  int min_rank = Mo::m, max_rank = 0;
  bool bad_rows = false, marginal = false;
  bool with_events = false, rest = false;
  Status st = Status::ok;
  double g = 0;  // the event function at x

  RefRun(const BatchView<Mo>& v, int i, const RunSettings<double>& settings) : s(settings) {
    y.load(v, i);
    p = load_params<Mo>(v, i);
    x = {Eigen::VectorXd(n), Eigen::VectorXd(n), y.t};
    for (int j = 0; j < n; ++j) x.q(j) = y.q[j], x.qd(j) = y.qd[j];
    f0 = ukb::reference::accel_fn<Mo>(p, s.eval());
    f = [this](const Eigen::VectorXd& q, const Eigen::VectorXd& qd, double t) {
      ukb::reference::Result r = f0(q, qd, t);
      if (r.status == Status::ok) {
        min_rank = std::min(min_rank, r.rank);
        max_rank = std::max(max_rank, r.rank);
        bad_rows = bad_rows || r.inconsistent;
        marginal = marginal || r.marginal;
      }
      return r;
    };
    with_events = HasEvents<Mo> && s.events;
  }

  bool ok() const { return y.ok(); }

  void monitor(const ukb::reference::State& z) {
    if constexpr (HasResidual<Mo>) {
      if (!s.monitor) return;
      double a, c;
      Mo::residual(z.q.data(), z.qd.data(), z.t, p, a, c);
      y.res_pos = std::isnan(a) ? a : std::max(y.res_pos, a);
      y.res_vel = std::isnan(c) ? c : std::max(y.res_vel, c);
    } else {
      (void)z;
    }
  }
  double event(const ukb::reference::State& z) const {
    if constexpr (HasEvents<Mo>) return Mo::event(z.q.data(), z.qd.data(), z.t, p);
    (void)z;
    return 0.0;
  }
  // True where gz is not on the side of g (or zero): the event is crossed.
  bool crosses(double gz) const { return !(gz != 0.0 && (gz > 0) == (g > 0)); }
  // The handler, which may move the time forward; a time it leaves NaN,
  // infinite or before the event's fails the system (failed_nonfinite, at
  // the event's state, which is kept).
  bool handler_stops(ukb::reference::State& z) {
    if constexpr (HasEvents<Mo>) {
      const ukb::reference::State at_event = z;
      const bool stop = Mo::on_event(z.q.data(), z.qd.data(), z.t, p) == EventAction::stop;
      if (std::isfinite(z.t) && z.t >= at_event.t) return stop;
      z = at_event;
      st = Status::failed_nonfinite;
    }
    (void)z;
    return false;
  }
  void reset_ranks() { min_rank = Mo::m, max_rank = 0, bad_rows = false, marginal = false; }

  // The start of a system: the monitor, and with g exactly zero one
  // consultation of the handler (after an evaluation: a system that cannot
  // be evaluated fails first).
  void start() {
    const bool first = y.steps == 0 && !(y.ctrl & started);
    y.ctrl |= started;
    if (first) monitor(x);
    g = with_events ? event(x) : 0.0;
    if (with_events && !std::isfinite(g)) {  // no step could be checked against it
      st = Status::failed_nonfinite;
      return;
    }
    if (with_events && first && g == 0.0) {
      st = f(x.q, x.qd, x.t).status;
      ++y.rhs_evals;
      if (st == Status::ok) {
        ++y.events;
        rest = handler_stops(x);
        g = event(x);
        if (!rest && !std::isfinite(g)) st = Status::failed_nonfinite;
      }
    }
  }

  // After an accepted step from x0 to x: the rank check, the projection and
  // the residual limit; false (st set, x back at x0) when one fails. `pr`:
  // what the projection did.
  bool settle(const ukb::reference::State& x0, ukb::reference::Projected& pr) {
    if (st == Status::ok && s.expected_rank >= 0 && (min_rank != s.expected_rank || max_rank != s.expected_rank))
      st = Status::failed_rank;
    if (st == Status::ok && s.projection.on) {
      pr = ukb::reference::project<Mo>(p, x, s.projection.tol, s.projection.max_iter, s.rank_rtol);
      st = pr.status;
    }
    if constexpr (HasResidual<Mo>) {
      if (st == Status::ok && std::isfinite(s.residual_limit)) {
        double a, c;
        Mo::residual(x.q.data(), x.qd.data(), x.t, p, a, c);
        if (!(a <= s.residual_limit && c <= s.residual_limit)) st = Status::failed_residual;
      }
    }
    if (st != Status::ok) x = x0;  // keep the state before this step
    return st == Status::ok;
  }

  // The counters of a settled step from x0, the handler where it ended at
  // an event, the event function and the monitor; false (st set, x kept)
  // where the step followed a resumed event and its event is located within
  // event_tol of x0: the handler would be called there for ever.
  bool count(const ukb::reference::Projected& pr, bool located, const ukb::reference::State& x0) {
    if (with_events && located && (y.ctrl & resumed) && !(x.t - x0.t > s.event_tol)) {
      st = Status::failed_event_loop;
      return false;
    }
    if (!located) y.ctrl &= ~resumed;
    ++y.steps;
    if (min_rank < Mo::m) ++y.rank_drops;
    // A change against the previous step (rank_prev holds 1 + its rank) or within this one.
    if (max_rank != min_rank || (y.rank_prev != 0 && y.rank_prev != min_rank + 1)) ++y.rank_changes;
    y.rank_prev = min_rank + 1;
    if (marginal) ++y.rank_marginal;
    if (bad_rows) ++y.inconsistent;
    if (!pr.converged) ++y.proj_fails;
    if (with_events) {
      if (located) {
        ++y.events;
        rest = handler_stops(x);
        y.ctrl |= resumed;
      }
      g = event(x);
      if (!rest && !std::isfinite(g)) st = Status::failed_nonfinite;  // NaN or infinite: fails here
    }
    monitor(x);
    return true;
  }

  // The final status and the fields back into system i.
  void store(const BatchView<Mo>& v, int i) {
    if (rest) {
      st = Status::at_rest;
      y.t_stop = x.t;
    } else if (st == Status::ok && y.steps >= s.max_steps && std::isfinite(s.t_end) &&
               s.t_end - x.t > s.dt * policy::end_slack) {
      st = Status::max_steps;
    } else if (st != Status::ok) {
      y.t_stop = x.t;
    }
    for (int j = 0; j < n; ++j) y.q[j] = x.q(j), y.qd[j] = x.qd(j);
    y.t = x.t;
    y.status = static_cast<std::int32_t>(st);
    y.store(v, i);
  }
};

/// RK4 with fixed steps (kernels::SystemRun's rules): events located by
/// bisection on the step size, with trial steps checked at every stage.
template <Model Mo>
void integrate_rk4(const BatchView<Mo>& v, const RunSettings<double>& s, int i) {
  namespace ref = ukb::reference;
  RefRun<Mo> R(v, i, s);
  if (!R.ok()) return;
  ref::State& x = R.x;
  R.start();
  for (long k = 0; k < s.budget && !R.rest && R.st == Status::ok; ++k) {
    if (!(x.t < s.t_pause)) break;
    const double remaining = s.t_end - x.t;
    if (!(remaining > s.dt * policy::end_slack)) break;
    if (R.y.steps >= s.max_steps) break;
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
        if (stage++ > 0 && R.crosses(R.event(ref::State{q, qd, t}))) clean = false;
        return R.f(q, qd, t);
      };
      const Status r = ref::rk4_step(fo, z, step);
      if (R.crosses(R.event(z))) clean = false;
      return r;
    };
    bool clean = true;
    R.reset_ranks();  // every evaluation of the step (location trials too)
    R.st = R.with_events && R.g != 0.0 ? checked_step(x, h, clean) : ref::rk4_step(R.f, x, h);
    R.y.rhs_evals += 4;
    if (R.st != Status::ok) break;
    if (R.with_events && !clean) {
      // Bisection on the step size: the longest clean trial step.
      double lo = 0, hi = h;
      x = x0;
      for (int it = 0; it < policy::max_bisections && hi - lo > s.event_tol; ++it) {
        const double mid = 0.5 * (lo + hi);
        if (!(mid > lo && mid < hi)) break;
        ref::State z = x0;
        bool c = false;
        R.st = checked_step(z, mid, c);
        R.y.rhs_evals += 4;
        if (R.st != Status::ok) break;
        if (c) lo = mid, x = z;
        else hi = mid;
      }
    }
    ref::Projected pr;
    if (!R.settle(x0, pr)) break;
    if (!R.count(pr, !clean, x0)) break;
  }
  R.store(v, i);
}

/// Dormand–Prince with adaptive steps (kernels::AdaptiveRun's rules,
/// policy.hpp: the error norm, the PI controller, the step limits; events
/// on the dense output, else by trial steps), written again with its own
/// numerics: reference::dopri5_step (a Butcher array), its own controller
/// code, and a plain bisection on the dense output for the event instant.
template <Model Mo>
void integrate_adaptive(const BatchView<Mo>& v, const RunSettings<double>& s, int i) {
  namespace ref = ukb::reference;
  constexpr int n = Mo::n;
  constexpr std::int32_t fsal = 2, rejected_last = 4;
  RefRun<Mo> R(v, i, s);
  if (!R.ok()) return;
  SystemFields<Mo>& y = R.y;
  ref::State& x = R.x;
  R.start();
  Eigen::VectorXd a(n);  // the acceleration at x
  bool a_known = false;
  const ErrorControl<double>& ec = s.control;
  auto scale = [&](int k, double y0, double y1) {
    return ec.atol_of(k, n) + ec.rtol * std::max(std::abs(y0), std::abs(y1));
  };
  // The error norm of a step from x0 to x1 with estimate e.
  auto norm = [&](const ref::State& x0, const ref::State& x1, const Eigen::VectorXd& e) {
    double sum = 0;
    for (int c = 0; c < 2 * n; ++c) {
      const double y0 = c < n ? x0.q(c) : x0.qd(c - n), y1 = c < n ? x1.q(c) : x1.qd(c - n);
      sum += std::pow(e(c) / scale(c, y0, y1), 2);
    }
    return std::sqrt(sum / (2 * n));
  };
  for (long k = 0; k < s.budget && !R.rest && R.st == Status::ok; ++k) {
    if (y.steps >= s.max_steps || !(x.t < s.t_pause)) break;
    const double remaining = s.t_end - x.t;
    if (!(remaining > s.dt * policy::end_slack)) break;
    R.reset_ranks();  // this step's evaluations (a rejected step's are not counted)
    if (!a_known) {
      const ref::Result r = (y.ctrl & fsal) ? R.f0(x.q, x.qd, x.t) : R.f(x.q, x.qd, x.t);
      if (!(y.ctrl & fsal)) ++y.rhs_evals;
      if (r.status != Status::ok) {
        R.st = r.status;
        break;
      }
      a = r.qdd;
      a_known = true;
      y.ctrl |= fsal;
    }
    double hn = y.h_next;
    if (!(hn > 0)) {
      if (s.dt > 0) {
        hn = s.dt;
      } else {  // Hairer's initial step, written out again
        Eigen::VectorXd y0(2 * n), f_0(2 * n), sk(2 * n);
        y0 << x.q, x.qd;
        f_0 << x.qd, a;
        for (int c = 0; c < 2 * n; ++c) sk(c) = ec.atol_of(c, n) + ec.rtol * std::abs(y0(c));
        const double dnf = (f_0.array() / sk.array()).square().sum(), dny = (y0.array() / sk.array()).square().sum();
        double h0 = dnf <= 1e-10 || dny <= 1e-10 ? 1e-6 : std::sqrt(dny / dnf) * 0.01;
        h0 = std::min(h0, ec.dt_max);
        const Eigen::VectorXd y1 = y0 + h0 * f_0;
        ++y.rhs_evals;
        const ref::Result r1 = R.f0(y1.head(n), y1.tail(n), x.t + h0);
        if (r1.status != Status::ok) {
          hn = h0;
        } else {
          Eigen::VectorXd f_1(2 * n);
          f_1 << y1.tail(n), r1.qdd;
          const double der2 = std::sqrt(((f_1 - f_0).array() / sk.array()).square().sum()) / h0;
          const double der12 = std::max(der2, std::sqrt(dnf));
          const double h1 = der12 <= 1e-15 ? std::max(1e-6, h0 * 1e-3) : std::pow(0.01 / der12, 0.2);
          hn = std::min({100 * h0, h1, ec.dt_max});
        }
      }
      if (!std::isfinite(hn)) {
        R.st = Status::failed_nonfinite;
        break;
      }
      hn = std::max(hn, ec.dt_min);
    }
    hn = std::min(hn, ec.dt_max);
    double h, t1;
    if (std::isfinite(remaining) && hn * 1.01 >= remaining && remaining <= ec.dt_max) {
      h = remaining, t1 = s.t_end;
    } else if (hn < ec.dt_min ||
               !(hn > policy::min_step_ulps * std::numeric_limits<double>::epsilon() * std::abs(x.t))) {
      R.st = Status::failed_step_size;
      break;
    } else {
      h = hn, t1 = x.t + hn;
    }
    y.h_next = hn;
    bool clean = true;
    // A stage observer that clears *c where a stage state crosses the event.
    auto checked = [&R](bool* c) {
      return [&R, c](const ref::State& z) {
        if (R.with_events && R.g != 0.0 && R.crosses(R.event(z))) *c = false;
      };
    };
    const ref::Dopri5Step step = ref::dopri5_step(R.f, x, a, h, t1, checked(&clean));
    y.rhs_evals += 6;
    if (step.status != Status::ok) {
      R.st = step.status;
      break;
    }
    if (R.with_events && R.g != 0.0 && R.crosses(R.event(step.end))) clean = false;
    const double err = norm(x, step.end, step.err);
    if (std::isnan(err)) {
      R.st = Status::failed_nonfinite;
      break;
    }
    // The PI control (policy.hpp): what follows the step if accepted, and
    // the shorter step if rejected.
    const double expo = 0.2 - 0.75 * policy::pi_beta;
    auto rejected_step = [&](double size, double e) {
      return size / std::min(1 / policy::step_shrink_min, std::pow(e, expo) / ec.safety);
    };
    auto reject = [&](double h_try) {
      y.h_next = h_try;
      ++y.rejected;
      y.ctrl |= rejected_last;
    };
    auto commit = [&] {
      const double prev = y.err_prev > 0 ? y.err_prev : policy::err_floor;
      const double fac = std::clamp(std::pow(err, expo) / std::pow(prev, policy::pi_beta) / ec.safety,
                                    1 / policy::step_grow_max, 1 / policy::step_shrink_min);
      double h_new = h / fac;
      if ((y.ctrl & rejected_last) && h_new > h) h_new = h;
      y.err_prev = std::max(err, policy::err_floor);
      y.h_next = h_new;
      y.ctrl &= ~rejected_last;
    };
    const bool accepted = err <= 1;
    const bool crossed = R.with_events && !clean;
    if (!accepted && !crossed) {
      reject(rejected_step(h, err));
      continue;
    }
    const ref::State x0 = x;
    bool located = false;
    // The dense output left in the batch: this step's, or the last clean trial's.
    Eigen::MatrixXd r_out = ref::dopri5_dense(x0, step, h);
    double h_out = h;
    bool dense_out = accepted;
    if (!crossed) {
      commit();
      x = step.end;
      a = step.K.col(6).tail(n);
    } else {
      // An accepted step: the first crossing of its dense output among
      // theta = j/8, then a bisection on the dense output.
      double lo = 0, hi = -1;
      for (int j = 1; accepted && j <= 8 && hi < 0; ++j) {
        if (R.crosses(R.event(ref::dense_at(r_out, x0.t, h, j / 8.0)))) hi = j / 8.0;
        else lo = j / 8.0;
      }
      accepted ? commit() : reject(rejected_step(h, err));
      if (hi >= 0) {
        while ((hi - lo) * h > s.event_tol) {
          const double mid = 0.5 * (lo + hi);
          if (!(mid > lo && mid < hi)) break;
          (R.crosses(R.event(ref::dense_at(r_out, x0.t, h, mid))) ? hi : lo) = mid;
        }
        x = ref::dense_at(r_out, x0.t, h, lo);
        if (lo == 0) x.t = x0.t;
      } else {
        // Else the longest clean step from x0, by bisection on its size
        // (checked trial steps); rejected if its own error is above 1.
        double a_lo = 0, a_hi = h, err_lo = std::numeric_limits<double>::quiet_NaN();
        x = x0;
        dense_out = false;
        for (int it = 0; it < policy::max_bisections && a_hi - a_lo > s.event_tol; ++it) {
          const double mid = 0.5 * (a_lo + a_hi);
          if (!(mid > a_lo && mid < a_hi)) break;
          bool ok = true;
          const ref::Dopri5Step trial = ref::dopri5_step(R.f, x0, a, mid, x0.t + mid, checked(&ok));
          y.rhs_evals += 6;
          if (trial.status != Status::ok) {
            R.st = trial.status;
            break;
          }
          if (ok && R.crosses(R.event(trial.end))) ok = false;
          if (ok) {
            a_lo = mid;
            x = trial.end;
            err_lo = norm(x0, x, trial.err);
            r_out = ref::dopri5_dense(x0, trial, mid);
            h_out = mid;
            dense_out = true;
          } else {
            a_hi = mid;
          }
        }
        if (R.st != Status::ok) {
          x = x0;
          break;
        }
        if (a_lo > 0 && !(err_lo <= 1)) {  // not accurate enough: a shorter step approaches the event
          x = x0;
          reject(rejected_step(a_lo, err_lo));
          continue;
        }
      }
      located = true;
      a_known = false;
    }
    ref::Projected pr;
    if (!R.settle(x0, pr)) break;
    if (s.projection.on) a_known = false;
    if (v.dense && dense_out) {
      for (int c = 0; c < 5; ++c)
        for (int j = 0; j < 2 * n; ++j) v.dense[soa(c * 2 * n + j, i, v.N)] = r_out(j, c);
      v.dense[soa(10 * n, i, v.N)] = x0.t;
      v.dense[soa(10 * n + 1, i, v.N)] = h_out;
    }
    if (!R.count(pr, located, x0)) break;
    if (located) a_known = false;  // the handler may have changed the state
    if (!a_known) y.ctrl &= ~fsal;
  }
  R.store(v, i);
}

}  // namespace detail

template <Model Mo>
void integrate(const BatchView<Mo>& v, const RunSettings<typename Mo::Scalar>& s, const EngineOptions&) {
  static_assert(std::is_same_v<typename Mo::Scalar, double>, "the reference backend computes in double only");
  for (int i = 0; i < v.N; ++i) {
    if (s.method == Method::dopri5) {
      detail::integrate_adaptive<Mo>(v, s, i);
    } else {
      detail::integrate_rk4<Mo>(v, s, i);
    }
  }
}

}  // namespace ukb::backends::reference

// The built-in models are instantiated once, in the library.
#ifndef UKB_BUILTIN_INSTANCES
#include "ukb/models/all.hpp"
UKB_FOR_EACH_BUILTIN_DOUBLE(UKB_EXTERN_REFERENCE)
#endif
