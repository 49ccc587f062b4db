// Statistics of `ukb run`: see stats.hpp.
#include "stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>

#include "threads.hpp"
#include "ukb/status.hpp"

namespace ukb::run {
namespace {

nlohmann::json jnum(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// Puts at each of the ascending positions ranks[a, b) of s[lo, hi) the value a
// sort would put there (every value before it not larger, after it not
// smaller): the middle rank first, then each half on its own side.
void select_ranks(std::vector<double>& s, const std::vector<std::size_t>& ranks, std::size_t a, std::size_t b,
                  std::size_t lo, std::size_t hi) {
  if (a >= b) return;
  const std::size_t m = a + (b - a) / 2, k = ranks[m];
  std::nth_element(s.begin() + static_cast<std::ptrdiff_t>(lo), s.begin() + static_cast<std::ptrdiff_t>(k),
                   s.begin() + static_cast<std::ptrdiff_t>(hi));
  select_ranks(s, ranks, a, m, lo, k);
  select_ranks(s, ranks, m + 1, b, k + 1, hi);
}
void select_ranks(std::vector<double>& s, const std::vector<std::size_t>& ranks) {
  select_ranks(s, ranks, 0, ranks.size(), 0, s.size());
}

// The values at the ascending positions `ranks` of s once select_ranks has
// put them there.
std::vector<double> selected(std::vector<double>& s, const std::vector<std::size_t>& ranks) {
  select_ranks(s, ranks);
  std::vector<double> out(ranks.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) out[r] = s[ranks[r]];
  return out;
}

// The values a sort of v would put at the ascending positions `ranks`, v's
// values lying in [lo, hi]. Counted first: each value falls into one of 2^16
// equal buckets of [lo, hi] (floor((x - lo) * scale): non-decreasing in x,
// so the buckets are in the values' order), and the counts say which bucket
// holds each rank; then only the values of those buckets are gathered and
// selected among, recursively where one bucket still holds many. Two passes
// over v instead of the several of nth_element per rank. v is not changed.
std::vector<double> order_statistics(const std::vector<double>& v, double lo, double hi,
                                     const std::vector<std::size_t>& ranks) {
  constexpr std::size_t kBuckets = std::size_t{1} << 16, kSmall = 4096;
  std::vector<double> out(ranks.size());
  const double width = hi - lo;
  if (lo == hi) {  // every value equal: any one of them (in sample order) at every rank
    for (std::size_t r = 0; r < ranks.size(); ++r) out[r] = v[ranks[r]];
    return out;
  }
  const double scale = static_cast<double>(kBuckets) / width;
  if (v.size() <= kSmall || !std::isfinite(width) || !std::isfinite(scale)) {
    std::vector<double> s = v;
    return selected(s, ranks);
  }
  const auto bucket = [&](double x) {
    return std::min(static_cast<std::size_t>((x - lo) * scale), kBuckets - 1);
  };
  std::vector<std::size_t> count(kBuckets, 0);
  for (double x : v) ++count[bucket(x)];
  // The bucket of each rank, and the rank's position within it.
  std::vector<std::size_t> of(ranks.size()), within(ranks.size());
  std::size_t below = 0, b = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    while (below + count[b] <= ranks[r]) below += count[b++];
    of[r] = b, within[r] = ranks[r] - below;
  }
  std::vector<std::int32_t> slot(kBuckets, -1);
  std::vector<std::vector<double>> gathered;
  for (std::size_t r = 0; r < ranks.size(); ++r)
    if (slot[of[r]] < 0) {
      slot[of[r]] = static_cast<std::int32_t>(gathered.size());
      gathered.emplace_back();
      gathered.back().reserve(count[of[r]]);
    }
  for (double x : v)
    if (const std::int32_t s = slot[bucket(x)]; s >= 0) gathered[static_cast<std::size_t>(s)].push_back(x);
  for (std::size_t g = 0; g < gathered.size(); ++g) {
    std::vector<std::size_t> local, at;  // the ranks in this bucket
    for (std::size_t r = 0; r < ranks.size(); ++r)
      if (slot[of[r]] == static_cast<std::int32_t>(g)) local.push_back(within[r]), at.push_back(r);
    std::vector<double>& e = gathered[g];
    const auto [e_lo, e_hi] = std::minmax_element(e.begin(), e.end());
    // A bucket with all of v in it would not get smaller: select there.
    const std::vector<double> found =
        e.size() < v.size() ? order_statistics(e, *e_lo, *e_hi, local) : selected(e, local);
    for (std::size_t k = 0; k < at.size(); ++k) out[at[k]] = found[k];
  }
  return out;
}

// A power of two near |x|'s magnitude: scaling by it is exact (away from
// subnormals), so a result computed on scaled values and scaled back has the
// bits it would have had where nothing overflowed.
double pow2_near(double x) { return std::ldexp(1.0, std::ilogb(x)); }

// The sum of v (Neumaier's compensated sum: the rounding error of each
// addition is carried, not lost), each value times `scale`. Four sums of
// every fourth value, so that their additions do not wait for each other,
// then theirs and their errors in one more compensated sum.
double compensated_sum(const std::vector<double>& v, double scale) {
  constexpr std::size_t L = 4;
  double s[L] = {}, c[L] = {};
  auto add = [](double& sum, double& err, double x) {
    const double t = sum + x;
    err += std::abs(sum) >= std::abs(x) ? (sum - t) + x : (x - t) + sum;
    sum = t;
  };
  const std::size_t n = v.size(), whole = n / L * L;
  for (std::size_t i = 0; i < whole; i += L)
    for (std::size_t l = 0; l < L; ++l) add(s[l], c[l], v[i + l] * scale);
  for (std::size_t i = whole; i < n; ++i) add(s[i - whole], c[i - whole], v[i] * scale);
  double sum = 0, err = 0;
  for (std::size_t l = 0; l < L; ++l) add(sum, err, s[l]);
  for (std::size_t l = 0; l < L; ++l) add(sum, err, c[l]);
  return sum + err;
}

// The mean of finite values whose min and max are lo and hi: their
// compensated sum over n, within an ulp or so of the exact mean (a plain sum
// was tens of ulps off at 10^4 values), clamped to [lo, hi] (so a constant
// column's mean is its value). Where the sum would overflow, of the values
// scaled by 2^-64 (exact away from subnormals).
double mean_of(const std::vector<double>& v, double lo, double hi) {
  const double n = static_cast<double>(v.size());
  double m = compensated_sum(v, 1) / n;
  if (!std::isfinite(m)) m = compensated_sum(v, 0x1p-64) / n / 0x1p-64;
  return std::clamp(m, lo, hi);
}

// The standard deviation with the n - 1 denominator (n > 1) of finite
// values whose min and max are lo and hi: the plain sum of the squared
// deviations, except where a square would overflow (a deviation beyond
// 2^450) or every square underflow (all within 2^-450): there the
// deviations are divided by a power of two near the largest first (exact),
// and the result multiplied by it. The largest deviation is lo's or hi's
// (x / 2 - mean / 2 rounds monotonically in x).
double std_of(const std::vector<double>& v, double mean, double lo, double hi) {
  const double half = std::max(std::abs(lo / 2 - mean / 2), std::abs(hi / 2 - mean / 2));  // halved: no overflow
  if (half == 0) return 0;
  const double n1 = static_cast<double>(v.size() - 1);
  double ss = 0;
  if (half > 0x1p449) {  // deviation / s, s = 2 pow2_near(half), by halves
    const double s = pow2_near(half);
    for (double x : v) ss += ((x / 2 - mean / 2) / s) * ((x / 2 - mean / 2) / s);
    return std::sqrt(ss / n1) * s * 2;
  }
  if (half < 0x1p-451) {
    const double s = pow2_near(half);
    for (double x : v) ss += ((x - mean) / s) * ((x - mean) / s);
    return std::sqrt(ss / n1) * s;
  }
  // Four partial sums (their additions do not wait for each other).
  double part[4] = {};
  const std::size_t n = v.size(), whole = n / 4 * 4;
  for (std::size_t i = 0; i < whole; i += 4)
    for (std::size_t l = 0; l < 4; ++l) part[l] += (v[i + l] - mean) * (v[i + l] - mean);
  for (std::size_t i = whole; i < n; ++i) part[i - whole] += (v[i] - mean) * (v[i] - mean);
  ss = (part[0] + part[1]) + (part[2] + part[3]);
  return std::sqrt(ss / n1);
}

// The quantile at percent p of the sorted positions of v that select_ranks
// put in place, as numpy.percentile(v, p) computes it (method 'linear'):
// q = p / 100, h = (n - 1) q, then between the order statistics k = floor(h)
// and k + 1 from the nearer one (numpy's _lerp), so that the value is
// numpy's to the last bit. Where their difference would overflow, by halves.
double quantile_of(const std::vector<double>& v, double p) {
  const std::size_t n = v.size();
  const double h = static_cast<double>(n - 1) * (p / 100);
  const auto k = static_cast<std::size_t>(std::floor(h));
  if (k + 1 >= n) return v[n - 1];
  const double g = h - static_cast<double>(k), a = v[k], b = v[k + 1];
  const double diff = b - a;
  if (std::isfinite(diff)) return g >= 0.5 ? b - diff * (1 - g) : a + diff * g;
  const double half = b / 2 - a / 2;
  return 2 * (g >= 0.5 ? b / 2 - half * (1 - g) : a / 2 + half * g);
}

}  // namespace

Intervals Intervals::of(const Config& c) {
  Intervals iv;
  iv.confidence = c.confidence;
  if (c.sampling != Sampling::random) {
    iv.replicates = c.replicates;
    for (const Input* x : c.inputs())
      if (x->dist.is_axis()) iv.points *= x->dist.axis_size();
    // [sensitivity] (no axes there): the d + 2 rows of a base point share its replicate
    if (!c.sensitivity.empty()) iv.points = c.random_inputs() + 2;
  }
  return iv;
}

std::array<double, 2> wilson(long k, long n, double c) {
  if (n <= 0) return {std::nan(""), std::nan("")};
  const double z = normal_quantile((1 + c) / 2), N = static_cast<double>(n), p = static_cast<double>(k) / N;
  const double z2n = z * z / N;
  const double centre = (p + z2n / 2) / (1 + z2n), half = z / (1 + z2n) * std::sqrt(p * (1 - p) / N + z2n / (4 * N));
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

std::array<long, 2> order_ranks(long n, double p, double c) {
  // B ~ Binomial(n, p) counts the values at or below the quantile: the
  // l-th smallest lies at or below it with probability P(B >= l), the u-th
  // at or above with P(B <= u - 1). l: the largest with P(B <= l - 1) <= a,
  // u: the smallest with P(B >= u) <= a, a = (1 - c) / 2 each side.
  const double a = (1 - c) / 2, N = static_cast<double>(n), q = 1 - p, var = N * p * q;
  long l = 0, u = n + 1;
  if (var >= 100) {  // the normal approximation with continuity correction (exact sums would take O(n))
    const double z = normal_quantile(1 - a), sd = std::sqrt(var);
    l = static_cast<long>(std::floor(N * p - z * sd + 0.5));
    u = static_cast<long>(std::ceil(N * p + z * sd + 0.5));
  } else {
    const double odds = std::log(p / q);
    double logpmf = N * std::log1p(-p), cdf = 0;  // P(B = 0)
    for (long k = 0; k <= n; ++k) {
      cdf += std::exp(logpmf);
      if (cdf > a) {
        l = k;  // P(B <= k - 1) <= a < P(B <= k)
        break;
      }
      logpmf += std::log(static_cast<double>(n - k) / static_cast<double>(k + 1)) + odds;
    }
    double sf = 0;
    logpmf = N * std::log(p);  // P(B = n)
    for (long k = n; k >= 0; --k) {
      sf += std::exp(logpmf);
      if (sf > a) {
        u = k + 1;  // P(B >= k + 1) <= a < P(B >= k)
        break;
      }
      logpmf += std::log(static_cast<double>(k) / static_cast<double>(n - k + 1)) - odds;
    }
  }
  return {l < 1 ? 0 : l, u > n ? n + 1 : u};
}

nlohmann::json stats(std::span<const double> all, const std::vector<std::size_t>& rows, int bins,
                     const Intervals& iv) {
  std::vector<double> scratch;
  return stats(all, rows, bins, scratch, iv);
}

nlohmann::json stats(std::span<const double> all, const std::vector<std::size_t>& rows, int bins,
                     std::vector<double>& v, const Intervals& iv) {
  v.resize(rows.size());
  const std::size_t R = static_cast<std::size_t>(iv.replicates), P = static_cast<std::size_t>(iv.points);
  std::vector<std::uint32_t> replicate(R > 0 ? rows.size() : 0);  // of each finite value
  // The finite values, and in sample order (the same bytes in every run),
  // before the selection below reorders v: the first of the smallest and
  // the last of the largest (std::minmax_element's choice: between -0 and
  // +0 the position decides).
  std::size_t finite = 0;
  const double inf = std::numeric_limits<double>::infinity();
  double lo = inf, hi = -inf;
  for (std::size_t r : rows) {
    const double x = all[r];
    v[finite] = x;
    if (R > 0) replicate[finite] = static_cast<std::uint32_t>(r / P % R);
    const bool keep = std::isfinite(x);
    finite += keep;
    lo = keep && x < lo ? x : lo;
    hi = keep && !(x < hi) ? x : hi;
  }
  v.resize(finite);
  replicate.resize(R > 0 ? finite : 0);
  nlohmann::json j;
  j["count"] = v.size();
  if (v.empty()) return j;
  // Every value equal (a monitor that stayed 0, say): the passes below would
  // give this mean (the clamp to [lo, hi]; a sum of zeros is +0) and a
  // deviation of 0, so they are not taken.
  const bool constant = lo == hi;
  const double mean = constant ? (lo == 0 ? 0.0 : lo) : mean_of(v, lo, hi);
  j["mean"] = mean;
  const double sd = v.size() > 1 ? (constant ? 0.0 : std_of(v, mean, lo, hi)) : std::nan("");
  j["std"] = jnum(sd);
  // Quantiles by linear interpolation between order statistics (numpy's
  // default). Only the order statistics they need are selected, not the whole
  // table sorted: a sort of the 10^6 rows of a large run was a quarter of its
  // time after the integration.
  constexpr double kPercents[] = {1.0, 5.0, 25.0, 50.0, 75.0, 95.0, 99.0};
  const std::size_t n = v.size();
  std::vector<std::size_t> ranks{0, n - 1};
  for (double p : kPercents) {
    const auto k = static_cast<std::size_t>(std::floor(static_cast<double>(n - 1) * (p / 100)));
    ranks.push_back(k);
    if (k + 1 < n) ranks.push_back(k + 1);
  }
  // Intervals (docs/outputs.md, "Intervals"). Independent samples: the
  // mean's by the central limit theorem, each quantile's between two order
  // statistics (their ranks join the selection below). The designs: from
  // the spread of the replicates' own means and quantiles (Student's t with
  // R - 1 degrees of freedom), about the estimates over all the values.
  const double z = normal_quantile((1 + iv.confidence) / 2);
  auto interval = [](double from, double to) { return nlohmann::json::array({jnum(from), jnum(to)}); };
  const double none = std::nan("");
  std::vector<std::array<long, 2>> q_ranks;                // independent: per percent, 1-based
  std::vector<double> q_half(std::size(kPercents), none);  // designs: per percent
  if (R == 0) {
    const double h = z * sd / std::sqrt(static_cast<double>(n));  // NaN for one value
    j["mean_interval"] = interval(mean - h, mean + h);
    for (double p : kPercents) {
      const std::array<long, 2> lu = order_ranks(static_cast<long>(n), p / 100, iv.confidence);
      q_ranks.push_back(lu);
      if (lu[0] >= 1) ranks.push_back(static_cast<std::size_t>(lu[0] - 1));
      if (lu[1] <= static_cast<long>(n)) ranks.push_back(static_cast<std::size_t>(lu[1] - 1));
    }
  } else {
    std::vector<std::vector<double>> by(R);
    for (std::size_t i = 0; i < n; ++i) by[replicate[i]].push_back(v[i]);
    std::vector<double> means;
    std::vector<std::vector<double>> quantiles(std::size(kPercents));
    for (std::vector<double>& b : by) {
      if (b.empty()) continue;
      const auto [b_lo, b_hi] = std::minmax_element(b.begin(), b.end());
      means.push_back(mean_of(b, *b_lo, *b_hi));  // (scaled where the sum would overflow)
      std::sort(b.begin(), b.end());
      for (std::size_t k = 0; k < std::size(kPercents); ++k) quantiles[k].push_back(quantile_of(b, kPercents[k]));
    }
    const long Rn = static_cast<long>(means.size());
    auto half_width = [&](const std::vector<double>& e) {
      if (Rn < 2) return none;
      double m = 0, ss = 0;
      for (double x : e) m += x;
      m /= static_cast<double>(Rn);
      for (double x : e) ss += (x - m) * (x - m);
      return t_quantile((1 + iv.confidence) / 2, Rn - 1) * std::sqrt(ss / static_cast<double>(Rn - 1)) /
             std::sqrt(static_cast<double>(Rn));
    };
    const double h = half_width(means);
    j["mean_interval"] = interval(mean - h, mean + h);
    for (std::size_t k = 0; k < std::size(kPercents); ++k) q_half[k] = half_width(quantiles[k]);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  // Histogram: `bins` equal bins over [min, max], the last one closed; the
  // edges as numpy.linspace(min, max, bins + 1) gives them (by halves where
  // max - min overflows), and each value in the bin whose edges hold it
  // (edges[b] <= x < edges[b + 1]), as numpy.histogram counts.
  const std::size_t B = static_cast<std::size_t>(bins);
  std::vector<double> edges(B + 1);
  const bool halves = !std::isfinite(hi - lo);
  const double w = halves ? (hi / 2 - lo / 2) / bins : (hi - lo) / bins;
  for (std::size_t b = 0; b < B; ++b)
    edges[b] = halves ? 2 * (lo / 2 + static_cast<double>(b) * w) : lo + static_cast<double>(b) * w;
  edges[B] = hi;
  std::vector<std::int64_t> counts(B, 0);
  // A first guess of each value's bin by a product (the loops below move
  // it to the bin whose edges hold the value, whatever the guess).
  const double per_w = w > 0 ? 1 / w : 0;
  if (w == 0) counts[0] = static_cast<std::int64_t>(v.size());  // every value in the first bin (the loop's rule)
  else
    for (double x : v) {
      const double f = (halves ? (x / 2 - lo / 2) : (x - lo)) * per_w;
      std::size_t b = f >= static_cast<double>(B) ? B - 1 : f > 0 ? static_cast<std::size_t>(f) : 0;
      // (Where max = min every edge is min, and every value in the first bin.)
      while (w > 0 && b > 0 && x < edges[b]) --b;
      while (w > 0 && b + 1 < B && x >= edges[b + 1]) ++b;
      counts[b]++;
    }
  nlohmann::json fractions = nlohmann::json::array();
  for (std::int64_t k : counts) {
    const std::array<double, 2> f = wilson(static_cast<long>(k), static_cast<long>(v.size()), iv.confidence);
    fractions.push_back(interval(f[0], f[1]));
  }
  j["histogram"] = {{"edges", edges}, {"counts", counts}, {"fraction_intervals", fractions}};
  // The order statistics at their positions (the sums and the histogram
  // above are taken; quantile_of reads only these positions).
  const std::vector<double> at_ranks = order_statistics(v, lo, hi, ranks);
  for (std::size_t r = 0; r < ranks.size(); ++r) v[ranks[r]] = at_ranks[r];
  j["min"] = lo;
  j["max"] = hi;
  for (std::size_t k = 0; k < std::size(kPercents); ++k) {
    char key[8];
    std::snprintf(key, sizeof key, "p%02d", static_cast<int>(kPercents[k]));
    const double q = quantile_of(v, kPercents[k]);
    j["quantiles"][key] = q;
    if (R == 0) {
      const auto [l, u] = q_ranks[k];
      j["quantile_intervals"][key] =
          interval(l >= 1 ? v[static_cast<std::size_t>(l - 1)] : none, u <= static_cast<long>(n) ? v[static_cast<std::size_t>(u - 1)] : none);
    } else {
      j["quantile_intervals"][key] = interval(q - q_half[k], q + q_half[k]);
    }
  }
  return j;
}


std::array<double, 2> stop_statistic(const Config& c, const Table& t, std::size_t n) {
  const double none = std::nan("");
  const Column* col = t.find(c.stop->column);
  if (!col) return {none, none};
  std::vector<double> converted;
  if (col->integer) converted.assign(col->i.begin(), col->i.begin() + static_cast<std::ptrdiff_t>(n));
  const std::span<const double> v = col->integer ? std::span<const double>(converted) : std::span<const double>(col->d.data(), n);
  std::vector<std::size_t> rows;
  for (std::size_t r = 0; r < n; ++r) {
    const Status st = static_cast<Status>(t.status[r]);
    if (st == Status::ok || st == Status::at_rest) rows.push_back(r);
  }
  const nlohmann::json j = stats(v, rows, 1, Intervals::of(c));
  if (!j.contains("mean")) return {none, none};
  char key[8];
  std::snprintf(key, sizeof key, "p%02d", c.stop->percent);
  const double est = c.stop->percent < 0 ? j["mean"].get<double>() : j["quantiles"][key].get<double>();
  const nlohmann::json& iv = c.stop->percent < 0 ? j["mean_interval"] : j["quantile_intervals"][key];
  if (!iv[0].is_number() || !iv[1].is_number()) return {est, none};
  return {est, (iv[1].get<double>() - iv[0].get<double>()) / 2};
}

namespace {

// The Sobol indices of [sensitivity]'s outputs over the random inputs
// (docs/config.md, "Sensitivity indices"): Saltelli's (2010) first-order
// and Jansen's total estimators on the rows A, B and A_B^j of each base
// point, centred on the mean of the A and B rows, with normal bootstrap
// intervals over the base points (1000 resamples from the seed's Philox
// stream, as SALib computes its confidence). A base point counts where all
// its d + 2 rows are successful and finite. Fills `lines` for stdout.
nlohmann::json sensitivity(const Config& c, const Table& t, std::vector<std::string>& lines) {
  std::vector<std::string> names;
  for (const Input* x : c.inputs())
    if (x->dist.is_random()) names.push_back(x->name);
  const std::size_t d = names.size(), G = t.rows() / (d + 2);
  const double z = normal_quantile((1 + c.confidence) / 2);
  nlohmann::json out;
  out["inputs"] = names;
  out["base_points"] = G;
  out["method"] =
      "first order: Saltelli et al. (2010), mean(f_B (f_ABj - f_A)) / V; total: Jansen (1999), mean((f_A - "
      "f_ABj)^2) / (2 V); V the variance of the A and B rows; intervals: +- z times the standard deviation of "
      "1000 bootstrap resamples of the base points";
  constexpr int resamples = 1000;
  // Resample b's k-th base point: a hash of (seed, b, k), the same for every
  // output (made as needed: no table of resamples x base points).
  const std::uint64_t key = mix64(c.seed ^ 0xB0075B0075ULL);
  std::vector<std::uint32_t> pick;
  for (const std::string& y : c.sensitivity) {
    const Column* col = t.find(y);
    if (!col) continue;
    auto value = [&](std::size_t row) { return col->integer ? static_cast<double>(col->i[row]) : col->d[row]; };
    std::vector<double> fa, fb;
    std::vector<std::vector<double>> fab(d);
    for (std::size_t g = 0; g < G; ++g) {
      bool ok = true;
      for (std::size_t r = g * (d + 2); r < (g + 1) * (d + 2) && ok; ++r) {
        const Status st = static_cast<Status>(t.status[r]);
        ok = (st == Status::ok || st == Status::at_rest) && std::isfinite(value(r));
      }
      if (!ok) continue;
      fa.push_back(value(g * (d + 2)));
      fb.push_back(value(g * (d + 2) + 1));
      for (std::size_t j = 0; j < d; ++j) fab[j].push_back(value(g * (d + 2) + 2 + j));
    }
    const std::size_t n = fa.size();
    nlohmann::json& o = out["outputs"][y];
    o["base_points_used"] = n;
    if (n < 2) continue;
    double centre = 0;
    for (std::size_t k = 0; k < n; ++k) centre += fa[k] + fb[k];
    centre /= static_cast<double>(2 * n);
    auto indices = [&](const std::uint32_t* at, std::vector<double>& first, std::vector<double>& total) {
      double m = 0, ss = 0;
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = at ? at[k] : k;
        m += (fa[i] - centre) + (fb[i] - centre);
      }
      m /= static_cast<double>(2 * n);
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = at ? at[k] : k;
        ss += (fa[i] - centre - m) * (fa[i] - centre - m) + (fb[i] - centre - m) * (fb[i] - centre - m);
      }
      const double V = ss / static_cast<double>(2 * n);
      for (std::size_t j = 0; j < d; ++j) {
        double s1 = 0, st = 0;
        for (std::size_t k = 0; k < n; ++k) {
          const std::size_t i = at ? at[k] : k;
          s1 += (fb[i] - centre) * (fab[j][i] - fa[i]);
          st += (fa[i] - fab[j][i]) * (fa[i] - fab[j][i]);
        }
        first[j] = s1 / static_cast<double>(n) / V;
        total[j] = st / static_cast<double>(2 * n) / V;
      }
      return V;
    };
    std::vector<double> first(d), total(d);
    o["variance"] = jnum(indices(nullptr, first, total));
    pick.resize(n);
    std::vector<double> s1(d, 0), s1sq(d, 0), s2(d, 0), s2sq(d, 0), bf(d), bt(d);
    for (std::size_t b = 0; b < static_cast<std::size_t>(resamples); ++b) {
      for (std::size_t k = 0; k < n; ++k)  // uniform on [0, n): the top 53 bits of the hash times n
        pick[k] = static_cast<std::uint32_t>(std::min<double>(
            static_cast<double>(n) - 1,
            std::floor(static_cast<double>(mix64(key + b * n + k) >> 11) * 0x1.0p-53 * static_cast<double>(n))));
      indices(pick.data(), bf, bt);
      for (std::size_t j = 0; j < d; ++j) {
        s1[j] += bf[j], s1sq[j] += bf[j] * bf[j];
        s2[j] += bt[j], s2sq[j] += bt[j] * bt[j];
      }
    }
    char head[96];
    std::snprintf(head, sizeof head, " (first order, total; %g %% intervals):", 100 * c.confidence);
    std::string line = "  sensitivity of " + y + head;
    for (std::size_t j = 0; j < d; ++j) {
      const double B = resamples;
      const double sd1 = std::sqrt(std::max(0.0, (s1sq[j] - s1[j] * s1[j] / B) / (B - 1)));
      const double sd2 = std::sqrt(std::max(0.0, (s2sq[j] - s2[j] * s2[j] / B) / (B - 1)));
      o["first"][names[j]] = jnum(first[j]);
      o["first_interval"][names[j]] = {jnum(first[j] - z * sd1), jnum(first[j] + z * sd1)};
      o["total"][names[j]] = jnum(total[j]);
      o["total_interval"][names[j]] = {jnum(total[j] - z * sd2), jnum(total[j] + z * sd2)};
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s %s %.3g [%.3g, %.3g], %.3g [%.3g, %.3g]", j ? ";" : "", names[j].c_str(),
                    first[j], first[j] - z * sd1, first[j] + z * sd1, total[j], total[j] - z * sd2, total[j] + z * sd2);
      line += buf;
    }
    lines.push_back(line);
  }
  return out;
}

}  // namespace

nlohmann::json summary(const Config& c, const Table& t, Outcome& result, int threads) {
  // The rows of each status, and of the successful ones; counted first, so
  // that each list is allocated once at its size.
  std::map<std::int32_t, std::vector<std::size_t>> by_status;
  std::vector<std::size_t> ok_rows;
  auto successful = [](std::int32_t s) {
    return s == static_cast<std::int32_t>(Status::ok) || s == static_cast<std::int32_t>(Status::at_rest);
  };
  {
    std::map<std::int32_t, std::size_t> count;
    std::size_t* count_of = nullptr;  // of the status of the row before (runs of one status)
    for (std::size_t r = 0; r < t.rows(); ++r) {
      if (r == 0 || t.status[r] != t.status[r - 1]) count_of = &count[t.status[r]];
      ++*count_of;
    }
    std::size_t ok_count = 0;
    for (const auto& [s, k] : count) {
      by_status[s].reserve(k);
      ok_count += successful(s) ? k : 0;
    }
    ok_rows.reserve(ok_count);
  }
  std::vector<std::size_t>* rows_of = nullptr;
  bool ok_of = false;
  for (std::size_t r = 0; r < t.rows(); ++r) {
    if (r == 0 || t.status[r] != t.status[r - 1]) rows_of = &by_status[t.status[r]], ok_of = successful(t.status[r]);
    rows_of->push_back(r);
    if (ok_of) ok_rows.push_back(r);
  }
  nlohmann::json sum;
  sum["samples"] = t.rows();  // c.samples, or fewer where [stop] ended the run
  sum["status_counts"] = nlohmann::json::object();
  const Intervals iv = Intervals::of(c);
  sum["status_intervals"] = nlohmann::json::object();
  for (const auto& [s, rows] : by_status) {
    sum["status_counts"][status_name(static_cast<Status>(s))] = rows.size();
    result.status_counts[status_name(static_cast<Status>(s))] = static_cast<long>(rows.size());
    const std::array<double, 2> w = wilson(static_cast<long>(rows.size()), static_cast<long>(t.rows()), c.confidence);
    sum["status_intervals"][status_name(static_cast<Status>(s))] = {w[0], w[1]};
  }
  const bool design = iv.replicates > 0;
  sum["intervals"] = {
      {"confidence", c.confidence},
      {"sampling", to_string(c.sampling)},
      {"mean", design ? "the replicates' means: Student's t with (replicates - 1) degrees of freedom on their "
                        "standard deviation over sqrt(replicates), about the mean of every value"
                      : "central limit theorem: mean +- z std / sqrt(count)"},
      {"quantiles", design ? "the replicates' quantiles: Student's t on their spread, about the quantile of every value"
                           : "distribution-free: between two order statistics whose ranks the binomial law of "
                             "the count below the quantile gives (null where none reaches the level)"},
      {"fractions", "Wilson's score interval (status_intervals over every sample; a histogram's "
                    "fraction_intervals over its count)"}};
  if (design) sum["intervals"]["replicates"] = iv.replicates;
  if (!c.sensitivity.empty())
    sum["intervals"]["caveat"] =
        "[sensitivity] arranges the samples in rows A, B, A_B^j of base points, which are not independent samples: "
        "read the sensitivity indices from such a run, and the statistics and their intervals from a plain run";
  sum["statistics"] =
      "over the finite values of each observable; 'successful' takes the samples whose status is "
      "finished or at_rest, 'by_status' each status on its own (failed samples report their last "
      "good state); std has the n - 1 denominator; quantiles interpolate linearly between order "
      "statistics; histograms have equal bins over [min, max]";
  // Each observable's statistics by one of `threads` threads, then put
  // together in column order.
  std::vector<const Column*> todo;
  for (const Column& col : t.cols)
    if (col.name != "sample" && !col.input) todo.push_back(&col);
  std::vector<nlohmann::json> obs(todo.size());
  struct Scratch {  // a thread's, reused from column to column
    std::vector<double> converted, values;
  };
  for_each_index<Scratch, true>(static_cast<long>(todo.size()), threads, [&](long k, Scratch& w) {
    const Column& col = *todo[static_cast<std::size_t>(k)];
    if (col.integer) w.converted.assign(col.i.begin(), col.i.end());
    const std::span<const double> v = col.integer ? std::span<const double>(w.converted) : std::span<const double>(col.d);
    nlohmann::json& o = obs[static_cast<std::size_t>(k)];
    o["successful"] = stats(v, ok_rows, c.histogram_bins, w.values, iv);
    for (const auto& [s, rows] : by_status) {
      // A status of the successful ones that every successful sample has
      // (the usual case): the same rows, the same statistics.
      const bool same =
          (s == static_cast<std::int32_t>(Status::ok) || s == static_cast<std::int32_t>(Status::at_rest)) &&
          rows.size() == ok_rows.size();
      o["by_status"][status_name(static_cast<Status>(s))] =
          same ? o["successful"] : stats(v, rows, c.histogram_bins, w.values, iv);
    }
  });
  if (!c.sensitivity.empty()) sum["sensitivity"] = sensitivity(c, t, result.sensitivity);
  // What the end of `ukb run` reports beside the medians (every sample).
  for (const Column& col : t.cols) {
    if (col.name == "res_pos_max" || col.name == "res_vel_max") {
      double& worst = col.name == "res_pos_max" ? result.res_pos_max : result.res_vel_max;
      for (double x : col.d)  // worst starts as NaN; an infinite residual is the largest
        if (!std::isnan(x) && !(x <= worst)) worst = x;
    } else if (col.integer && (col.name == "inconsistent" || col.name == "projection_failures")) {
      long& n = col.name == "inconsistent" ? result.inconsistent_samples : result.projection_failure_samples;
      n = static_cast<long>(std::count_if(col.i.begin(), col.i.end(), [](std::int64_t x) { return x > 0; }));
    }
  }
  for (std::size_t k = 0; k < todo.size(); ++k) {
    const std::string& name = todo[k]->name;
    bool headline = name == "t_stop";
    for (const std::string& nm : c.model->initial_names) headline = headline || name == nm + "_final";
    if (headline && obs[k]["successful"].contains("quantiles")) {
      const nlohmann::json& s = obs[k]["successful"];
      result.medians.emplace_back(name, s["quantiles"]["p50"].get<double>());
      auto side = [](const nlohmann::json& x) { return x.is_number() ? x.get<double>() : std::nan(""); };
      result.median_intervals.push_back({side(s["quantile_intervals"]["p50"][0]), side(s["quantile_intervals"]["p50"][1])});
    }
    sum["observables"][name] = std::move(obs[k]);
  }
  return sum;
}

std::vector<std::string> warnings(const Outcome& o) {
  std::vector<std::string> w;
  const std::string of = " of " + std::to_string(o.samples) + " samples had ";
  if (o.inconsistent_samples > 0)
    w.push_back(std::to_string(o.inconsistent_samples) + of +
                "steps with contradicting constraint rows (column 'inconsistent'): there q'' satisfies A q'' = b only "
                "in the least-squares sense");
  if (o.projection_failure_samples > 0)
    w.push_back(std::to_string(o.projection_failure_samples) + of +
                "projections that did not reach stabilization.tol in max_iter corrections (column "
                "'projection_failures')");
  if (const auto it = o.status_counts.find("failed_event_loop"); it != o.status_counts.end() && it->second > 0)
    w.push_back(std::to_string(it->second) + " of " + std::to_string(o.samples) +
                " samples failed with failed_event_loop: the model's on_event resumed them where their event is "
                "crossed at once; a handler that resumes must set the watched quantity to zero or to its other "
                "side (docs/adding-a-model.md, \"The event contract\")");
  return w;
}

}  // namespace ukb::run
