// The statistics of `ukb run` (internal to the ukb_run library): per
// observable over a subset of the samples, and summary.json.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "table.hpp"
#include "ukb/run.hpp"

namespace ukb::run {

// What the intervals of the statistics rest on: the confidence level and,
// for the designs sobol and lhs, the replicates (row r, which is sample r,
// belongs to replicate (r / points) mod replicates; docs/config.md);
// replicates 0: independent samples.
struct Intervals {
  double confidence = 0.95;
  long replicates = 0;
  long points = 1;  // of the sweep
  static Intervals of(const Config& c);
};

// Statistics of the finite values of one column over a subset of samples,
// accumulated in sample order (so they are reproducible), with their
// intervals (docs/outputs.md, "Intervals").
nlohmann::json stats(std::span<const double> all, const std::vector<std::size_t>& rows, int bins,
                     const Intervals& iv = {});
// The same with `scratch` for the values (its memory reused from column to
// column).
nlohmann::json stats(std::span<const double> all, const std::vector<std::size_t>& rows, int bins,
                     std::vector<double>& scratch, const Intervals& iv = {});

// SplitMix64's finaliser (sampling.cpp): a bijection of 64-bit words that
// mixes every bit, for hashes of counters.
std::uint64_t mix64(std::uint64_t z);

// Wilson's score interval of a proportion k / n at confidence c.
std::array<double, 2> wilson(long k, long n, double c);

// The 1-based ranks [l, u] of the order statistics whose interval covers
// the p-quantile of n independent values with probability at least c
// (binomial; 0 for no lower one, n + 1 for no upper one).
std::array<long, 2> order_ranks(long n, double p, double c);

// [stop]'s statistic over the successful rows among the first n of the
// table: {its estimate, the half-width of its interval} (NaN where it has
// none).
std::array<double, 2> stop_statistic(const Config& c, const Table& t, std::size_t n);

/// summary.json of a finished table: the counts per status and the
/// statistics of every observable, each by one of `threads` threads (0: all
/// cores; the same bytes for any count); fills result's status counts,
/// medians, largest residuals and the counts of samples with inconsistent
/// steps and with projection failures.
nlohmann::json summary(const Config& c, const Table& t, Outcome& result, int threads);

}  // namespace ukb::run
