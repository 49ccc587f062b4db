// Work against precision of RK4 (fixed steps) and Dormand–Prince 5(4)
// (adaptive steps) in one run, on the cpu backend:
//   ring  the demo's beads (examples/ring_friction.toml: released level with
//         the centre, mu ~ U[0.05, 0.5]; N of them): the error in the
//         resting angle and in the time of rest;
//   W2    planar_chain_6 (the workload of bench/README.md, c = 0.1) over 2 s:
//         the error in the final state (q and q', max norm).
// Each error is against a tight solution (dopri5, rtol = 1e-13), as the
// median and the largest over the systems; the work is the evaluations of
// the acceleration per system (rhs_evals: stages, event-location trials and
// the initial step's probe) and the wall time (median of `--repeat` runs).
//
//   build/bin/ukb_work_precision [--ring N] [--w2 N] [--threads T] [--repeat R]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ukb/engine.hpp"
#include "ukb/models/all.hpp"
#include "workloads.hpp"

namespace {

using namespace ukb;
using Clock = std::chrono::steady_clock;
using Ring = models::BeadOnRing<double>;
using Chain = models::PlanarChain6<double>;

struct Setting {
  Method method;
  double x;  // dt (rk4) or rtol (dopri5)
  std::string label() const {
    char b[64];
    std::snprintf(b, sizeof b, method == Method::rk4 ? "rk4, dt = %g" : "dopri5, rtol = %g", x);
    return b;
  }
  RunOptions options(double t_end) const {
    RunOptions r{.method = method, .dt = method == Method::rk4 ? x : 0.0, .t_end = t_end};
    r.rtol = method == Method::dopri5 ? x : policy::default_rtol;
    r.atol = {method == Method::dopri5 ? x * 1e-2 : policy::default_atol};
    return r;
  }
};

// The demo's beads: mu uniform on [0.05, 0.5], at rest level with the centre.
Batch<Ring> ring_batch(int N) {
  Batch<Ring> b(N);
  std::mt19937_64 g(20261125);
  for (int i = 0; i < N; ++i) {
    Ring::Params p{};
    p.mu = std::uniform_real_distribution<double>(0.05, 0.5)(g);
    b.set_params(i, p);
    const double q[2] = {1, 0}, qd[2] = {0, 0};
    b.set_state(i, q, qd);
  }
  b.allocate_adaptive();  // rhs_evals for RK4 too
  return b;
}

Batch<Chain> chain_batch(int N) {
  Batch<Chain> b(N);
  bench::fill_workload(b);
  b.allocate_adaptive();
  return b;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

template <class Mo, class Make, class Err>
void table(const std::string& title, const std::vector<Setting>& settings, double t_end, Make make, Err error, int repeat,
           const EngineOptions& eo) {
  Batch<Mo> truth = make();
  {
    RunOptions r{.method = Method::dopri5, .dt = 0, .t_end = t_end};
    r.rtol = 1e-13;
    r.atol = {1e-15};
    integrate(truth, Backend::cpu, r, std::numeric_limits<long>::max(), eo);
  }
  std::printf("\n%s\n\n| method | rhs evaluations per system | median error | largest error | wall [s] |\n"
              "|---|---|---|---|---|\n",
              title.c_str());
  for (const Setting& s : settings) {
    std::vector<double> walls;
    Batch<Mo> b = make();
    for (int k = 0; k < repeat; ++k) {
      b = make();
      const auto t0 = Clock::now();
      integrate(b, Backend::cpu, s.options(t_end), std::numeric_limits<long>::max(), eo);
      walls.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::vector<double> err, evals;
    for (int i = 0; i < b.size(); ++i) {
      err.push_back(error(b, truth, i));
      evals.push_back(double(b.rhs_evals(i)));
    }
    double sum = 0;
    for (double e : evals) sum += e;
    std::printf("| %s | %.0f | %.2g | %.2g | %.3f |\n", s.label().c_str(), sum / double(evals.size()), median(err),
                *std::max_element(err.begin(), err.end()), median(walls));
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int ring_n = 20000, w2_n = 1000, threads = 0, repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--ring") ring_n = v;
    else if (a == "--w2") w2_n = v;
    else if (a == "--threads") threads = v;
    else if (a == "--repeat") repeat = v;
    else {
      std::fprintf(stderr, "usage: ukb_work_precision [--ring N] [--w2 N] [--threads T] [--repeat R]\n");
      return 2;
    }
  }
  const EngineOptions eo{.threads = threads};
  table<Ring>(
      "Ring (" + std::to_string(ring_n) + " of the demo's beads): error in the resting angle [rad]",
      {{Method::rk4, 0.02}, {Method::rk4, 0.01}, {Method::rk4, 0.005}, {Method::rk4, 0.002}, {Method::rk4, 0.001},
       {Method::dopri5, 1e-4}, {Method::dopri5, 1e-6}, {Method::dopri5, 1e-8}, {Method::dopri5, 1e-10}},
      60.0, [&] { return ring_batch(ring_n); },
      [](const Batch<Ring>& b, const Batch<Ring>& t, int i) {
        return std::abs(std::atan2(b.q(i, 1), b.q(i, 0)) - std::atan2(t.q(i, 1), t.q(i, 0)));
      },
      repeat, eo);
  table<Ring>(
      "Ring: error in the time of rest [s] (one run each)",
      {{Method::rk4, 0.01}, {Method::rk4, 0.001}, {Method::dopri5, 1e-6}, {Method::dopri5, 1e-10}}, 60.0,
      [&] { return ring_batch(ring_n); },
      [](const Batch<Ring>& b, const Batch<Ring>& t, int i) { return std::abs(b.t_stop(i) - t.t_stop(i)); }, 1, eo);
  table<Chain>(
      "W2 (" + std::to_string(w2_n) + " systems of planar_chain_6, c = 0.1, 2 s): error in the final state (max over q, q')",
      {{Method::rk4, 0.01}, {Method::rk4, 0.005}, {Method::rk4, 0.002}, {Method::rk4, 0.001}, {Method::dopri5, 1e-4},
       {Method::dopri5, 1e-6}, {Method::dopri5, 1e-8}, {Method::dopri5, 1e-10}},
      2.0, [&] { return chain_batch(w2_n); },
      [](const Batch<Chain>& b, const Batch<Chain>& t, int i) {
        double d = 0;
        for (int j = 0; j < Chain::n; ++j)
          d = std::max({d, std::abs(b.q(i, j) - t.q(i, j)), std::abs(b.qd(i, j) - t.qd(i, j))});
        return d;
      },
      repeat, eo);
  return 0;
}
