// Reproducible sampling: every draw of sample i is a pure function of
// (seed, i, quantity, distribution) through the counter-based generator
// Philox4x32-10 (Random123), and with the designs sobol and lhs of the
// samples' place in their replicate too. The conversions to doubles and the
// distributions are written here, so that they are the same wherever ukb
// runs.
#include <Random123/philox.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

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

const char* to_string(Sampling s) {
  switch (s) {
    case Sampling::random: return "random";
    case Sampling::sobol: return "sobol";
    case Sampling::lhs: return "lhs";
  }
  return "random";
}

std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

namespace {
#include "sobol_directions.inc"

constexpr int sobol_bits_count = 52;

// Direction numbers V_k (k = 0 .. 51) of every dimension as 52-bit
// integers: m_k << (52 - k - 1) with m_k from Joe and Kuo's initial values
// and, past the polynomial's degree s, the recurrence of Bratley and Fox
// (Joe and Kuo's notes, eq. (5)):
//   m_k = 2 a_1 m_{k-1} ^ 4 a_2 m_{k-2} ^ ... ^ 2^{s-1} a_{s-1} m_{k-s+1} ^ 2^s m_{k-s} ^ m_{k-s},
// a_j the polynomial's coefficient of x^{s-j}.
using Directions = std::vector<std::array<std::uint64_t, sobol_bits_count>>;
const Directions& directions() {
  static const Directions V = [] {
    Directions v(sobol_dims);
    for (int d = 0; d < sobol_dims; ++d) {
      const std::uint32_t poly = sobol_poly[d];
      int s = 0;
      while ((poly >> (s + 1)) != 0) ++s;
      std::array<std::uint64_t, sobol_bits_count> m{};
      for (int k = 0; k < sobol_bits_count; ++k) {
        if (d == 0) {
          m[std::size_t(k)] = 1;
        } else if (k < s) {
          m[std::size_t(k)] = sobol_m[d][k];
        } else {
          std::uint64_t x = m[std::size_t(k - s)] ^ (m[std::size_t(k - s)] << s);
          for (int j = 1; j < s; ++j)
            if ((poly >> (s - j)) & 1u) x ^= m[std::size_t(k - j)] << j;
          m[std::size_t(k)] = x;
        }
        v[std::size_t(d)][std::size_t(k)] = m[std::size_t(k)] << (sobol_bits_count - 1 - k);
      }
    }
    return v;
  }();
  return V;
}

// The tags of the designs' keys (the Philox block's last word; a random
// draw's is the attempt number, below 1000).
constexpr std::uint32_t sobol_tag = 0x50B01u, lhs_tag = 0x1A5E5u;
// The Philox block of the random base points of [sensitivity] (per base
// point and dimension; a plain draw's block is its attempt, below 1000).
constexpr std::uint32_t saltelli_block = 0x5A17u;

// The key of a design's scramble or permutation of dimension `dim` in
// replicate r of a run with `seed`.
std::uint64_t design_key(std::uint64_t seed, std::uint64_t replicate, int dim, std::uint32_t design) {
  const auto r = block(seed, replicate, static_cast<std::uint32_t>(dim), design);
  return (std::uint64_t(r[0]) << 32) | r[1];
}

// A bijection of [0, n) keyed by `key`: a 4-round Feistel network on the
// smallest even number of bits 2h with 2^(2h) >= n, walked along its cycle
// until it lands in [0, n) (cycle walking: a bijection of [0, n) again).
std::uint64_t permute(std::uint64_t x, std::uint64_t n, std::uint64_t key) {
  int h = 1;
  while ((std::uint64_t(1) << (2 * h)) < n) ++h;
  const std::uint64_t mask = (std::uint64_t(1) << h) - 1;
  do {
    std::uint64_t L = x >> h, R = x & mask;
    for (std::uint64_t round = 0; round < 4; ++round) {
      const std::uint64_t F = mix64(key ^ (R | (round << 40))) & mask;
      const std::uint64_t next = L ^ F;
      L = R;
      R = next;
    }
    x = (L << h) | R;
  } while (x >= n);
  return x;
}

// Phi(x) and 1 - Phi(x), each without cancellation.
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }
double normal_sf(double x) { return 0.5 * std::erfc(x / std::numbers::sqrt2); }

}  // namespace

// The standard normal's quantile at p in (0, 1): Acklam's rational
// approximation (relative error below 1.2e-9), then one step of Halley's
// method on Phi(x) - p with Phi from erfc, which leaves it within an ulp or
// two; the upper half by symmetry (1 - p is exact there).
double normal_quantile(double p) {
  if (p > 0.5) return -normal_quantile(1 - p);
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01,  -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double e = 0.5 * std::erfc(-x / std::numbers::sqrt2) - p;
  const double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

namespace {

// Student's t CDF at t >= 0 for an integer number of degrees of freedom, by
// the finite sums of Abramowitz and Stegun 26.7.3-4 in theta = atan(t /
// sqrt(dof)): P(|T| <= t) = (2 / pi) (theta + sin(theta) (cos(theta) + 2/3
// cos^3 + ... + (2 4 .. (dof - 3)) / (1 3 .. (dof - 2)) cos^(dof-2))) for
// odd dof, sin(theta) (1 + 1/2 cos^2 + 1 3 / (2 4) cos^4 + ... ) for even.
double t_cdf(double t, long dof) {
  const double theta = std::atan(t / std::sqrt(static_cast<double>(dof)));
  const double s = std::sin(theta), c = std::cos(theta), c2 = c * c;
  double a;
  if (dof % 2 == 1) {
    double term = c, sum = dof > 1 ? c : 0;
    for (long k = 1; 2 * k + 1 <= dof - 2; ++k) {
      term *= c2 * static_cast<double>(2 * k) / static_cast<double>(2 * k + 1);
      sum += term;
    }
    a = 2 / std::numbers::pi * (theta + s * sum);
  } else {
    double term = 1, sum = 1;
    for (long k = 1; 2 * k <= dof - 2; ++k) {
      term *= c2 * static_cast<double>(2 * k - 1) / static_cast<double>(2 * k);
      sum += term;
    }
    a = s * sum;
  }
  return (1 + a) / 2;
}

}  // namespace

double t_quantile(double p, long dof) {
  if (dof == 1) return std::tan(std::numbers::pi * (p - 0.5));
  if (dof == 2) return (2 * p - 1) / std::sqrt(2 * p * (1 - p));
  // The Cornish-Fisher expansion about the normal quantile (A&S 26.7.5),
  // then Newton's method on the exact CDF (for up to 1000 degrees of
  // freedom; beyond, the expansion's error is below 1e-12 relative).
  const double z = normal_quantile(p), z2 = z * z, n = static_cast<double>(dof);
  const double g1 = (z2 + 1) * z / 4;
  const double g2 = ((5 * z2 + 16) * z2 + 3) * z / 96;
  const double g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384;
  const double g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160;
  double t = z + (g1 + (g2 + (g3 + g4 / n) / n) / n) / n;
  if (dof > 1000 || !(t > 0)) return t;
  const double norm = std::exp(std::lgamma((n + 1) / 2) - std::lgamma(n / 2)) / std::sqrt(n * std::numbers::pi);
  for (int k = 0; k < 4; ++k) {
    const double density = norm * std::pow(1 + t * t / n, -(n + 1) / 2);
    t -= (t_cdf(t, dof) - p) / density;
  }
  return t;
}

int sobol_dimensions() { return sobol_dims; }

std::uint64_t sobol_bits(std::uint64_t index, int dim) {
  const auto& V = directions()[static_cast<std::size_t>(dim)];
  std::uint64_t g = index ^ (index >> 1), x = 0;
  for (int k = 0; g != 0; ++k, g >>= 1)
    if (g & 1u) x ^= V[std::size_t(k)];
  return x;
}

std::uint64_t owen_scramble(std::uint64_t x, std::uint64_t key) {
  std::uint64_t y = x;
  for (int l = 0; l < 32; ++l) {
    const std::uint64_t above = l == 0 ? 0 : x >> (sobol_bits_count - l);  // the l bits above bit l
    y ^= (mix64(key ^ ((above << 6) | std::uint64_t(l))) >> 63) << (sobol_bits_count - 1 - l);
  }
  // The hash inputs above have bit 5 clear; this one has it set.
  y ^= mix64(key ^ (((x >> 20) << 6) | 32u)) & ((std::uint64_t(1) << 20) - 1);
  return y;
}

double sobol_unit(std::uint64_t seed, std::uint64_t replicate, std::uint64_t index, int dim) {
  const std::uint64_t x = owen_scramble(sobol_bits(index, dim), design_key(seed, replicate, dim, sobol_tag));
  return (static_cast<double>(x) + 0.5) * 0x1.0p-52;
}

double from_unit(const Dist& d, double u) {
  switch (d.kind) {
    case Dist::Kind::uniform: {
      const double x = between(d.a, d.b, u);
      return x < d.b ? x : d.a;  // as draw: [min, max)
    }
    case Dist::Kind::normal: {
      const double lo = (d.lo - d.a) / d.b, hi = (d.hi - d.a) / d.b;
      double z;
      if (lo >= 0) {  // the window in the upper tail: by the survival function
        const double slo = normal_sf(lo), shi = normal_sf(hi);
        z = -normal_quantile(slo - u * (slo - shi));
      } else {
        const double clo = normal_cdf(lo), chi = normal_cdf(hi);
        z = normal_quantile(clo + u * (chi - clo));
      }
      return std::clamp(d.a + d.b * z, d.lo, d.hi);
    }
    case Dist::Kind::lognormal: return std::exp(d.a + d.b * normal_quantile(u));
    case Dist::Kind::fixed:
    case Dist::Kind::values:
    case Dist::Kind::grid: break;
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
    const bool placed = (c.sampling != Sampling::random || !c.sensitivity.empty()) && in[k]->dist.is_random();
    if (!placed) out[k] = draw(in[k]->dist, c.seed, sample, static_cast<std::uint32_t>(k), axis_index);
  }
  if (!c.sensitivity.empty()) {
    // Saltelli's rows (docs/config.md, "Sensitivity indices"): sample i is
    // row i mod (d + 2) of base point g = i / (d + 2), whose two points A and
    // B are dimensions 0 .. d - 1 and d .. 2d - 1 of a 2d-dimensional
    // design (random: Philox uniforms of g; sobol: point g / R of replicate
    // g mod R). Row 0 takes A, row 1 B, row 2 + j A with input j from B.
    std::uint64_t d = 0;
    for (const Input* x : in) d += x->dist.is_random();
    const std::uint64_t g = sample / (d + 2), row = sample % (d + 2), R = std::max<std::uint64_t>(1, c.replicates);
    std::uint64_t j = 0;
    for (std::size_t k = 0; k < in.size(); ++k) {
      if (!in[k]->dist.is_random()) continue;
      const bool from_b = row == 1 || row == 2 + j;
      const int dim = static_cast<int>(from_b ? d + j : j);
      const double u = c.sampling == Sampling::sobol ? sobol_unit(c.seed, g % R, g / R, dim)
                                                     : uniform01(c.seed, g, static_cast<std::uint32_t>(dim), saltelli_block, 0);
      out[k] = from_unit(in[k]->dist, u);
      ++j;
    }
    return;
  }
  if (c.sampling == Sampling::random) return;
  // The designs: sample i is number j = i / total among the samples of its
  // sweep point (i mod total), point k = j / R of replicate r = j mod R. The
  // random inputs are the design's dimensions, in canonical order.
  const std::uint64_t P = static_cast<std::uint64_t>(total), R = static_cast<std::uint64_t>(c.replicates);
  const std::uint64_t j = sample / P, r = j % R, point = j / R;
  // LHS: the replicate's size at this sweep point.
  const std::uint64_t S = std::max(static_cast<std::uint64_t>(c.samples), sample + 1);
  const std::uint64_t at_point = (S - sample % P + P - 1) / P;
  const std::uint64_t size = (at_point - r + R - 1) / R;
  int dim = 0;
  for (std::size_t k = 0; k < in.size(); ++k) {
    const Dist& d = in[k]->dist;
    if (!d.is_random()) continue;
    double u;
    if (c.sampling == Sampling::sobol) {
      u = sobol_unit(c.seed, r, point, dim);
    } else {  // lhs: stratum permute(point) of `size`, a uniform place within it
      const std::uint64_t stratum = permute(point, size, design_key(c.seed, r, dim, lhs_tag));
      const double within = uniform01(c.seed, sample, static_cast<std::uint32_t>(k), 0, 0);
      u = std::min((static_cast<double>(stratum) + within) / static_cast<double>(size), std::nextafter(1.0, 0.0));
    }
    out[k] = from_unit(d, u);
    ++dim;
  }
}

std::string Config::input_key(std::size_t k) const {
  if (k < params.size()) return "params." + params[k].name;
  const std::size_t j = k - params.size(), n = model ? static_cast<std::size_t>(model->n) : 0;
  if (!raw_initial) return "initial." + initial[j].name;
  return j < n ? "initial.q[" + std::to_string(j) + "]" : "initial.qd[" + std::to_string(j - n) + "]";
}

long Config::random_inputs() const {
  long d = 0;
  for (const Input* x : inputs()) d += x->dist.is_random();
  return d;
}

std::vector<const Input*> Config::inputs() const {
  std::vector<const Input*> v;
  for (const Input& x : params) v.push_back(&x);
  for (const Input& x : initial) v.push_back(&x);
  return v;
}

}  // namespace ukb::run
