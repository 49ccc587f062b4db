// Floating-point operations of one RK4 step per workload, counted by running
// the shared kernels (the code every backend runs) with a scalar type that
// counts its arithmetic: + - * (1 each), / and sqrt (1 each, listed apart
// because they cost 4-16x an add on a CPU), sin, cos and other functions
// (listed apart). Comparisons and copies are not counted. The count depends
// on the data (Jacobi sweeps, friction branches): it is averaged over the
// workload's first 1000 systems (100 and 20 for W5 and W6), each at its
// initial state.
//
//   build/bin/ukb_flops            # a markdown table
//   build/bin/ukb_flops --json     # the same as JSON (bench/report.py reads it)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "ukb/kernels/rk4.hpp"
#include "workloads.hpp"

namespace flops {

struct Tally {
  long add = 0, mul = 0, div = 0, sqrt = 0, fn = 0;
  long arithmetic() const { return add + mul + div + sqrt; }
};
inline Tally tally;

/// A double that counts the operations done on it.
struct Counted {
  double v = 0;
  Counted() = default;
  constexpr Counted(double x) : v(x) {}  // NOLINT: literals like T(2) construct it
  explicit operator double() const { return v; }
  friend Counted operator+(Counted a, Counted b) { ++tally.add; return a.v + b.v; }
  friend Counted operator-(Counted a, Counted b) { ++tally.add; return a.v - b.v; }
  friend Counted operator*(Counted a, Counted b) { ++tally.mul; return a.v * b.v; }
  friend Counted operator/(Counted a, Counted b) { ++tally.div; return a.v / b.v; }
  friend Counted operator-(Counted a) { return -a.v; }
  Counted& operator+=(Counted b) { return *this = *this + b; }
  Counted& operator-=(Counted b) { return *this = *this - b; }
  Counted& operator*=(Counted b) { return *this = *this * b; }
  Counted& operator/=(Counted b) { return *this = *this / b; }
  friend bool operator<(Counted a, Counted b) { return a.v < b.v; }
  friend bool operator>(Counted a, Counted b) { return a.v > b.v; }
  friend bool operator<=(Counted a, Counted b) { return a.v <= b.v; }
  friend bool operator>=(Counted a, Counted b) { return a.v >= b.v; }
  friend bool operator==(Counted a, Counted b) { return a.v == b.v; }
  friend bool operator!=(Counted a, Counted b) { return a.v != b.v; }
  friend Counted sqrt(Counted a) { ++tally.sqrt; return std::sqrt(a.v); }
  friend Counted abs(Counted a) { return std::abs(a.v); }
  friend Counted sin(Counted a) { ++tally.fn; return std::sin(a.v); }
  friend Counted cos(Counted a) { ++tally.fn; return std::cos(a.v); }
  friend Counted atan2(Counted a, Counted b) { ++tally.fn; return std::atan2(a.v, b.v); }
  friend Counted acos(Counted a) { ++tally.fn; return std::acos(a.v); }
  friend bool isfinite(Counted a) { return std::isfinite(a.v); }
};

}  // namespace flops

template <>
struct std::numeric_limits<flops::Counted> {
  static constexpr bool is_specialized = true;
  static constexpr flops::Counted epsilon() { return std::numeric_limits<double>::epsilon(); }
  static constexpr flops::Counted quiet_NaN() { return std::numeric_limits<double>::quiet_NaN(); }
  static constexpr flops::Counted infinity() { return std::numeric_limits<double>::infinity(); }
  static constexpr flops::Counted max() { return std::numeric_limits<double>::max(); }
};

namespace {

using flops::Counted;

struct Row {
  const char* id;
  const char* model;
  int n, m;
  double add, mul, div, sqrt, fn;
};

// The chains beyond 12 links are counted on fewer systems (their count,
// Gram route throughout, hardly depends on the state; one RK4 step of the
// 48-link chain is about 4.7e6 counted operations).
template <class Mo>
Row count() {
  constexpr int systems = Mo::n <= 24 ? 1000 : Mo::n <= 48 ? 100 : 20;
  flops::tally = {};
  for (int i = 0; i < systems; ++i) {
    typename Mo::Params p;
    Counted q[Mo::n], qd[Mo::n], t = 0;
    ukb::bench::workload_system<Mo>(1, i, p, q, qd);
    const ukb::kernels::StageSettings<Counted> ss{ukb::policy::default_rank_rtol<double>(), {}, nullptr};
    ukb::kernels::rk4_step<Mo>(q, qd, t, Counted(ukb::bench::workload_dt), p, ss);
  }
  // initial_state's sin and cos ran outside rk4_step: count the step alone.
  const flops::Tally all = flops::tally;
  flops::tally = {};
  for (int i = 0; i < systems; ++i) {
    typename Mo::Params p;
    Counted q[Mo::n], qd[Mo::n];
    ukb::bench::workload_system<Mo>(1, i, p, q, qd);
  }
  const flops::Tally init = flops::tally;
  const double s = systems;
  return {ukb::bench::Workload<Mo>::id, Mo::name, Mo::n, Mo::m,
          (all.add - init.add) / s, (all.mul - init.mul) / s, (all.div - init.div) / s,
          (all.sqrt - init.sqrt) / s, (all.fn - init.fn) / s};
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ukb::models;
  const bool json = argc > 1 && std::strcmp(argv[1], "--json") == 0;
  const Row rows[] = {count<BeadOnRing<Counted>>(), count<PlanarChain6<Counted>>(),
                      count<PlanarChain12<Counted>>(), count<RedundantPendulum<Counted>>(),
                      count<PlanarChain<Counted, 24>>(), count<PlanarChain<Counted, 48>>()};
  if (json) {
    std::printf("[\n");
    for (std::size_t k = 0; k < std::size(rows); ++k) {
      const Row& r = rows[k];
      std::printf("  {\"workload\": \"%s\", \"model\": \"%s\", \"n\": %d, \"m\": %d, \"add\": %.1f, "
                  "\"mul\": %.1f, \"div\": %.1f, \"sqrt\": %.1f, \"functions\": %.1f, "
                  "\"flops_per_step\": %.1f}%s\n",
                  r.id, r.model, r.n, r.m, r.add, r.mul, r.div, r.sqrt, r.fn,
                  r.add + r.mul + r.div + r.sqrt, k + 1 < std::size(rows) ? "," : "");
    }
    std::printf("]\n");
    return 0;
  }
  std::printf("| workload | model | n | m | add/sub | mul | div | sqrt | sin/cos/atan2 | flops per RK4 step |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %d | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", r.id, r.model, r.n,
                r.m, r.add, r.mul, r.div, r.sqrt, r.fn, r.add + r.mul + r.div + r.sqrt);
  return 0;
}
