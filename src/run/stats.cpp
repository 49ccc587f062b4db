// Statistics of `ukb run`: see stats.hpp.
#include "stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
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
// addition is carried, not lost), each value times `scale`.
double compensated_sum(const std::vector<double>& v, double scale) {
  double s = 0, c = 0;
  for (double x0 : v) {
    const double x = x0 * scale, t = s + x;
    c += std::abs(s) >= std::abs(x) ? (s - t) + x : (x - t) + s;
    s = t;
  }
  return s + c;
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

// The standard deviation with the n - 1 denominator (n > 1): the plain sum
// of the squared deviations, except where a square would overflow (a
// deviation beyond 2^450) or every square underflow (all within 2^-450):
// there the deviations are divided by a power of two near the largest
// first (exact), and the result multiplied by it.
double std_of(const std::vector<double>& v, double mean) {
  double half = 0;  // the largest deviation, halved (no overflow)
  for (double x : v) half = std::max(half, std::abs(x / 2 - mean / 2));
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
  for (double x : v) ss += (x - mean) * (x - mean);
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

nlohmann::json stats(std::span<const double> all, const std::vector<std::size_t>& rows, int bins) {
  std::vector<double> scratch;
  return stats(all, rows, bins, scratch);
}

nlohmann::json stats(std::span<const double> all, const std::vector<std::size_t>& rows, int bins,
                     std::vector<double>& v) {
  v.resize(rows.size());
  std::size_t finite = 0;
  for (std::size_t r : rows) {
    const double x = all[r];
    v[finite] = x;
    finite += std::isfinite(x);
  }
  v.resize(finite);
  nlohmann::json j;
  j["count"] = v.size();
  if (v.empty()) return j;
  // In sample order (the same bytes in every run), before the selection
  // below reorders v: the first of the smallest and the last of the largest
  // (std::minmax_element's choice: between -0 and +0 the position decides).
  double lo = v[0], hi = v[0];
  for (double x : v) {
    lo = x < lo ? x : lo;
    hi = x < hi ? hi : x;
  }
  // Every value equal (a monitor that stayed 0, say): the passes below would
  // give this mean (the clamp to [lo, hi]; a sum of zeros is +0) and a
  // deviation of 0, so they are not taken.
  const bool constant = lo == hi;
  const double mean = constant ? (lo == 0 ? 0.0 : lo) : mean_of(v, lo, hi);
  j["mean"] = mean;
  j["std"] = v.size() > 1 ? jnum(constant ? 0.0 : std_of(v, mean)) : nlohmann::json(nullptr);
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
  if (w == 0) counts[0] = static_cast<std::int64_t>(v.size());  // every value in the first bin (the loop's rule)
  else
    for (double x : v) {
      const double f = w > 0 ? (halves ? (x / 2 - lo / 2) : (x - lo)) / w : 0;
      std::size_t b = f >= static_cast<double>(B) ? B - 1 : f > 0 ? static_cast<std::size_t>(f) : 0;
      // (Where max = min every edge is min, and every value in the first bin.)
      while (w > 0 && b > 0 && x < edges[b]) --b;
      while (w > 0 && b + 1 < B && x >= edges[b + 1]) ++b;
      counts[b]++;
    }
  j["histogram"] = {{"edges", edges}, {"counts", counts}};
  // The order statistics at their positions (the sums and the histogram
  // above are taken; quantile_of reads only these positions).
  const std::vector<double> at_ranks = order_statistics(v, lo, hi, ranks);
  for (std::size_t r = 0; r < ranks.size(); ++r) v[ranks[r]] = at_ranks[r];
  j["min"] = lo;
  j["max"] = hi;
  for (double p : kPercents) {
    char key[8];
    std::snprintf(key, sizeof key, "p%02d", static_cast<int>(p));
    j["quantiles"][key] = quantile_of(v, p);
  }
  return j;
}


nlohmann::json summary(const Config& c, const Table& t, Outcome& result, int threads) {
  std::map<std::int32_t, std::vector<std::size_t>> by_status;
  std::vector<std::size_t> ok_rows;
  for (std::size_t r = 0; r < t.rows(); ++r) {
    by_status[t.status[r]].push_back(r);
    const Status s = static_cast<Status>(t.status[r]);
    if (s == Status::ok || s == Status::at_rest) ok_rows.push_back(r);
  }
  nlohmann::json sum;
  sum["samples"] = c.samples;
  sum["status_counts"] = nlohmann::json::object();
  for (const auto& [s, rows] : by_status) {
    sum["status_counts"][status_name(static_cast<Status>(s))] = rows.size();
    result.status_counts[status_name(static_cast<Status>(s))] = static_cast<long>(rows.size());
  }
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
  for_each_index<Scratch>(static_cast<long>(todo.size()), threads, [&](long k, Scratch& w) {
    const Column& col = *todo[static_cast<std::size_t>(k)];
    if (col.integer) w.converted.assign(col.i.begin(), col.i.end());
    const std::span<const double> v = col.integer ? std::span<const double>(w.converted) : std::span<const double>(col.d);
    nlohmann::json& o = obs[static_cast<std::size_t>(k)];
    o["successful"] = stats(v, ok_rows, c.histogram_bins, w.values);
    for (const auto& [s, rows] : by_status) {
      // A status of the successful ones that every successful sample has
      // (the usual case): the same rows, the same statistics.
      const bool same =
          (s == static_cast<std::int32_t>(Status::ok) || s == static_cast<std::int32_t>(Status::at_rest)) &&
          rows.size() == ok_rows.size();
      o["by_status"][status_name(static_cast<Status>(s))] =
          same ? o["successful"] : stats(v, rows, c.histogram_bins, w.values);
    }
  });
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
    if (headline && obs[k]["successful"].contains("quantiles"))
      result.medians.emplace_back(name, obs[k]["successful"]["quantiles"]["p50"].get<double>());
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
