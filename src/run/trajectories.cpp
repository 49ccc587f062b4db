// The recorded trajectories of `ukb run`: see trajectories.hpp.
#include "trajectories.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "output.hpp"
#include "ukb/kernels/dopri5.hpp"

namespace ukb::run {

namespace {

// The rows of trajectories.csv: the header, then one row per call of row().
class Rows {
 public:
  Rows(const Config& c, Ensemble& e, std::ostream& f) : c_(c), M_(*c.model), e_(e), f_(f) {
    f << "sample,t,status";
    for (const std::string& x : M_.coords) f << ",q_" << x;
    for (const std::string& x : M_.coords) f << ",qd_" << x;
    for (const std::string& x : M_.initial_names) f << ',' << x;
    if (M_.has_potential) f << ",energy";
    f << '\n';
  }

  // A row for system k at time t in state (q, q') with the given status word.
  void row(int k, double t, const double* q, const double* qd, const std::string& status) {
    const int np = static_cast<int>(M_.params.size()), N = e_.size();
    const double* ep = e_.real(Field::params);
    p_.resize(std::size_t(np));
    for (int j = 0; j < np; ++j) p_[std::size_t(j)] = ep[soa(j, k, N)];
    f_ << c_.record[std::size_t(k)] << ',' << g17(t) << ',' << status;
    for (int j = 0; j < M_.n; ++j) f_ << ',' << g17(q[j]);
    for (int j = 0; j < M_.n; ++j) f_ << ',' << g17(qd[j]);
    if (!M_.initial_names.empty()) {
      nat_.resize(M_.initial_names.size());
      M_.natural_state(p_, q, qd, nat_.data());
      for (double x : nat_) f_ << ',' << g17(x);
    }
    if (M_.has_potential) f_ << ',' << g17(M_.energy(p_, q, qd, t));
    f_ << '\n';
  }

  // A row for system k at its current state: "running" while it has work
  // left, else its final status.
  void current(int k) {
    const int n = M_.n, N = e_.size();
    const double *eq = e_.real(Field::q), *eqd = e_.real(Field::qd), *et = e_.real(Field::t);
    const std::int32_t st = e_.i32(Field::status)[k];
    q_.resize(std::size_t(n)), qd_.resize(std::size_t(n));
    for (int j = 0; j < n; ++j) q_[std::size_t(j)] = eq[soa(j, k, N)], qd_[std::size_t(j)] = eqd[soa(j, k, N)];
    row(k, et[k], q_.data(), qd_.data(), running(k) ? std::string("running") : status_name(static_cast<Status>(st)));
  }

  // True while system k has work left (status ok, t_end and max_steps not reached).
  bool running(int k) {
    RunSettings<double> active;  // what run_active needs
    active.dt = c_.run.dt, active.t_end = c_.run.t_end, active.max_steps = c_.run.max_steps;
    return run_active(e_.i32(Field::status)[k], e_.real(Field::t)[k], e_.i64(Field::steps)[k], active);
  }

 private:
  const Config& c_;
  const ModelInfo& M_;
  Ensemble& e_;
  std::ostream& f_;
  std::vector<double> p_, q_, qd_, nat_;
};

// A stop request (checked after each call of the engine).
using Stop = std::function<bool()>;

// The system-steps taken by the ensemble's systems so far.
double steps_of(Ensemble& e) {
  double s = 0;
  const std::int64_t* steps = e.i64(Field::steps);
  for (int k = 0; k < e.size(); ++k) s += static_cast<double>(steps[k]);
  return s;
}

// Rows every record_every steps: after every call, a row for each system
// the call changed.
void every_k_steps(const Config& c, Ensemble& e, const EngineOptions& eo, Rows& rows, const Stop& stop) {
  const int N = e.size();
  std::vector<bool> live(static_cast<std::size_t>(N), true);
  for (;;) {
    const std::int64_t* s0 = e.i64(Field::steps);
    const std::vector<std::int64_t> steps0(s0, s0 + N);
    const std::vector<double> t0(e.real(Field::t), e.real(Field::t) + N);
    const std::vector<std::int32_t> status0(e.i32(Field::status), e.i32(Field::status) + N);
    const Tally left = e.integrate(c.run, c.record_every, eo);
    const std::int64_t* s1 = e.i64(Field::steps);
    const double* t1 = e.real(Field::t);
    const std::int32_t* st1 = e.i32(Field::status);
    bool moved = false;
    for (int k = 0; k < N; ++k) {
      const std::size_t u = std::size_t(k);
      live[u] = s1[k] != steps0[u] || t1[k] != t0[u] || st1[k] != status0[u];
      moved = moved || live[u];
    }
    for (int k = 0; k < N; ++k)
      if (live[std::size_t(k)]) rows.current(k);
    if (left.active == 0 || stop()) break;
    if (!moved) throw std::runtime_error("the recorded run makes no progress (dt too small for t?)");
  }
}

// Rows at t0 + j record_dt (dopri5): every call runs each system until its
// time reaches the earliest next output time (RunOptions::t_pause; the steps
// are those of an unrecorded run), and the output times that its last step
// covered are read off that step's dense output. A system that is done gets
// a last row at its final state, with its status.
void fixed_times(const Config& c, Ensemble& e, const EngineOptions& eo, Rows& rows, const Stop& stop) {
  const ModelInfo& M = *c.model;
  const int N = e.size(), n = M.n;
  e.enable_dense();
  std::vector<long> next(static_cast<std::size_t>(N), 1);  // the index j of each system's next output time
  std::vector<bool> done(static_cast<std::size_t>(N), false);
  auto out_time = [&](long j) { return c.t0 + static_cast<double>(j) * c.record_dt; };
  std::vector<double> q(static_cast<std::size_t>(n)), qd(static_cast<std::size_t>(n)),
      rv(5 * 2 * static_cast<std::size_t>(n));
  RunOptions r = c.run;
  for (;;) {
    double pause = std::numeric_limits<double>::infinity();
    for (int k = 0; k < N; ++k)
      if (!done[std::size_t(k)]) pause = std::min(pause, out_time(next[std::size_t(k)]));
    r.t_pause = pause;
    const double steps_before = steps_of(e);
    const std::vector<double> t_before(e.real(Field::t), e.real(Field::t) + N);
    e.integrate(r, 1000000, eo);
    const double* t = e.real(Field::t);
    const double* dense = e.real(Field::dense);
    bool moved = steps_of(e) != steps_before;
    for (int k = 0; k < N; ++k) {
      const std::size_t u = std::size_t(k);
      if (done[u]) continue;
      moved = moved || t[k] != t_before[u];
      // The output times up to the system's time: on its last step's dense output.
      const double t0 = dense[soa(10 * n, k, N)], h = dense[soa(10 * n + 1, k, N)];
      const bool running = rows.running(k);
      for (; out_time(next[u]) <= t[k]; ++next[u]) {
        const double tj = out_time(next[u]);
        if (!(h > 0)) break;  // no dense output (cannot happen after a step)
        if (!running && tj == t[k]) break;  // the last row, below, is this one (with the status)
        // A handler that moved the time (ukb/friction.hpp's finish_stop)
        // jumped over a stretch that no step covers: no row there. (A step
        // that lands on t_end or t_pause ends there, which t0 + h may miss
        // by its rounding and theta by that of the division.)
        const double theta = (tj - t0) / h;
        if (tj < t0 || (tj > t0 + h && theta > 1 + 1e-9)) continue;
        for (int a = 0; a < 5 * 2 * n; ++a) rv[std::size_t(a)] = dense[soa(a, k, N)];
        kernels::dense_state(rv.data(), n, std::min(1.0, theta), q.data(), qd.data());
        rows.row(k, tj, q.data(), qd.data(), "running");
      }
      if (!running) {
        done[u] = true;
        rows.current(k);
      }
    }
    bool all = true;
    for (bool d : done) all = all && d;
    if (all || stop()) break;
    if (!moved) throw std::runtime_error("the recorded run makes no progress (dt too small for t?)");
  }
}

}  // namespace

double record_trajectories(const Config& c, Ensemble& e, const EngineOptions& eo, std::ostream& f,
                           const std::atomic<int>* stop, bool* stopped) {
  Rows rows(c, e, f);
  for (int k = 0; k < e.size(); ++k) rows.current(k);
  const double before = steps_of(e);
  const Stop asked = [&] {
    const bool s = stop && stop->load() != 0;
    if (s && stopped) *stopped = true;
    return s;
  };
  if (c.record_dt > 0) {
    fixed_times(c, e, eo, rows, asked);
  } else {
    every_k_steps(c, e, eo, rows, asked);
  }
  return steps_of(e) - before;
}

}  // namespace ukb::run
