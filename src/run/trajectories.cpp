// The recorded trajectories of `ukb run`: see trajectories.hpp.
#include "trajectories.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "output.hpp"

namespace ukb::run {

double record_trajectories(const Config& c, Ensemble& e, const EngineOptions& eo, std::ostream& f) {
  const ModelInfo& M = *c.model;
  const int n = M.n, np = static_cast<int>(M.params.size()), N = e.size();
  const bool natural = !M.initial_names.empty();
  f << "sample,t,status";
  for (const std::string& x : M.coords) f << ",q_" << x;
  for (const std::string& x : M.coords) f << ",qd_" << x;
  for (const std::string& x : M.initial_names) f << ',' << x;
  if (M.has_potential) f << ",energy";
  f << '\n';
  RunSettings<double> active;  // what run_active needs
  active.dt = c.run.dt, active.t_end = c.run.t_end, active.max_steps = c.run.max_steps;
  std::vector<bool> live(static_cast<std::size_t>(N), true);
  std::vector<double> p(static_cast<std::size_t>(np)), q(static_cast<std::size_t>(n)), qd(static_cast<std::size_t>(n)),
      nat(M.initial_names.size());
  double steps_total = 0;
  auto rows = [&] {
    const double *eq = e.real(Field::q), *eqd = e.real(Field::qd), *et = e.real(Field::t),
                 *ep = e.real(Field::params);
    const std::int32_t* st = e.i32(Field::status);
    const std::int64_t* steps = e.i64(Field::steps);
    for (int k = 0; k < N; ++k) {
      if (!live[std::size_t(k)]) continue;
      for (int j = 0; j < np; ++j) p[std::size_t(j)] = ep[soa(j, k, N)];
      for (int j = 0; j < n; ++j) q[std::size_t(j)] = eq[soa(j, k, N)], qd[std::size_t(j)] = eqd[soa(j, k, N)];
      // A sample still on its way is "running"; otherwise its final status.
      const bool running = run_active(st[k], et[k], steps[k], active);
      f << c.record[std::size_t(k)] << ',' << g17(et[k]) << ','
        << (running ? std::string("running") : status_name(static_cast<Status>(st[k])));
      for (double x : q) f << ',' << g17(x);
      for (double x : qd) f << ',' << g17(x);
      if (natural) {
        M.natural_state(p, q.data(), qd.data(), nat.data());
        for (double x : nat) f << ',' << g17(x);
      }
      if (M.has_potential) f << ',' << g17(M.energy(p, q.data(), qd.data(), et[k]));
      f << '\n';
    }
  };
  rows();
  for (;;) {
    // What each call changed: a row for those systems.
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
      steps_total += static_cast<double>(s1[k] - steps0[u]);
    }
    rows();
    if (left.active == 0) break;
    if (!moved) throw std::runtime_error("the recorded run makes no progress (dt too small for t?)");
  }
  return steps_total;
}

}  // namespace ukb::run
