// Reproducible sampling: every draw of sample i is a pure function of
// (seed, i, quantity, distribution) through the counter-based generator
// Philox4x32-10 (Random123). The conversions to doubles and the
// distributions are written here, so that they are the same wherever ukb runs.
#include <Random123/philox.h>

#include <cmath>
#include <numbers>

#include "ukb/run.hpp"

namespace ukb::run {
namespace {

// Truncated normals are drawn by rejection; a draw gives up (and the config
// check makes sure this never matters in practice: the window holds at least
// 5 % of the mass, so all attempts fail with probability below 1e-22).
constexpr std::uint32_t max_attempts = 1000;

r123::Philox4x32::ctr_type block(std::uint64_t seed, std::uint64_t sample, std::uint32_t quantity,
                                 std::uint32_t j) {
  r123::Philox4x32 rng;
  const r123::Philox4x32::key_type key = {
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const r123::Philox4x32::ctr_type ctr = {{static_cast<std::uint32_t>(sample),
                                           static_cast<std::uint32_t>(sample >> 32), quantity, j}};
  return rng(ctr, key);
}

// 53 bits (32 of the first word, the top 21 of the second) to the midpoint
// of one of 2^53 equal cells of (0, 1): never 0, never 1.
double to_unit(std::uint32_t w0, std::uint32_t w1) {
  const std::uint64_t bits = (std::uint64_t(w0) << 21) | (w1 >> 11);
  return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

// Standard normal by Box-Muller (cosine branch) from one Philox block.
double standard_normal(std::uint64_t seed, std::uint64_t sample, std::uint32_t quantity,
                       std::uint32_t j) {
  const auto r = block(seed, sample, quantity, j);
  const double u1 = to_unit(r[0], r[1]), u2 = to_unit(r[2], r[3]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace

double uniform01(std::uint64_t seed, std::uint64_t sample, std::uint32_t quantity,
                 std::uint32_t j, int half) {
  const auto r = block(seed, sample, quantity, j);
  return half == 0 ? to_unit(r[0], r[1]) : to_unit(r[2], r[3]);
}

long Dist::axis_size() const {
  return kind == Kind::values ? static_cast<long>(list.size()) : kind == Kind::grid ? count : 1;
}

namespace {

// a + (b - a) u for u in [0, 1]; where b - a overflows (a range of +-1.7e308)
// the same point as a (1 - u) + b u, which cannot.
double between(double a, double b, double u) {
  const double span = b - a;
  return span - span == 0 ? a + span * u : a * (1 - u) + b * u;
}

}  // namespace

double Dist::axis_point(long k) const {
  if (kind == Kind::values) return list[static_cast<std::size_t>(k)];
  if (k == count - 1) return b;  // the last point is max exactly
  const double span = b - a;
  if (span - span == 0) return a + span * static_cast<double>(k) / static_cast<double>(count - 1);
  return between(a, b, static_cast<double>(k) / static_cast<double>(count - 1));  // b - a overflows
}

double draw(const Dist& d, std::uint64_t seed, std::uint64_t sample, std::uint32_t quantity,
            long axis_index) {
  switch (d.kind) {
    case Dist::Kind::fixed: return d.a;
    case Dist::Kind::uniform: {
      const double x = between(d.a, d.b, uniform01(seed, sample, quantity, 0, 0));
      return x < d.b ? x : d.a;  // [min, max): a rounding up to max folds back to min
    }
    case Dist::Kind::normal: {
      for (std::uint32_t j = 0; j < max_attempts; ++j) {
        const double x = d.a + d.b * standard_normal(seed, sample, quantity, j);
        if (x >= d.lo && x <= d.hi) return x;
      }
      return std::clamp(d.a, d.lo, d.hi);
    }
    case Dist::Kind::lognormal:
      return std::exp(d.a + d.b * standard_normal(seed, sample, quantity, 0));
    case Dist::Kind::values:
    case Dist::Kind::grid: return d.axis_point(axis_index);
  }
  return d.a;
}

std::vector<double> draw_inputs(const Config& c, std::uint64_t sample) {
  const std::vector<const Input*> in = c.inputs();
  std::vector<double> out(in.size());
  draw_inputs(c, in, sample, out.data());
  return out;
}

void draw_inputs(const Config& c, const std::vector<const Input*>& in, std::uint64_t sample, double* out) {
  // Sweep axes form a Cartesian product, the first axis varying fastest;
  // sample i takes the point (i mod the product) of it.
  long total = 1;
  for (const Input* x : in)
    if (x->dist.is_axis()) total *= x->dist.axis_size();
  long rest = static_cast<long>(sample % static_cast<std::uint64_t>(total));
  for (std::size_t k = 0; k < in.size(); ++k) {
    long axis_index = 0;
    if (in[k]->dist.is_axis()) {
      axis_index = rest % in[k]->dist.axis_size();
      rest /= in[k]->dist.axis_size();
    }
    out[k] = draw(in[k]->dist, c.seed, sample, static_cast<std::uint32_t>(k), axis_index);
  }
}

std::string Config::input_key(std::size_t k) const {
  if (k < params.size()) return "params." + params[k].name;
  const std::size_t j = k - params.size(), n = model ? static_cast<std::size_t>(model->n) : 0;
  if (!raw_initial) return "initial." + initial[j].name;
  return j < n ? "initial.q[" + std::to_string(j) + "]" : "initial.qd[" + std::to_string(j - n) + "]";
}

std::vector<const Input*> Config::inputs() const {
  std::vector<const Input*> v;
  for (const Input& x : params) v.push_back(&x);
  for (const Input& x : initial) v.push_back(&x);
  return v;
}

}  // namespace ukb::run
