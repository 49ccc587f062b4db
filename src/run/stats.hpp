// The statistics of `ukb run` (internal to the ukb_run library): per
// observable over a subset of the samples, and summary.json.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "table.hpp"
#include "ukb/run.hpp"

namespace ukb::run {

// Statistics of the finite values of one column over a subset of samples,
// accumulated in sample order (so they are reproducible).
nlohmann::json stats(std::span<const double> all, const std::vector<std::size_t>& rows, int bins);
// The same with `scratch` for the values (its memory reused from column to
// column).
nlohmann::json stats(std::span<const double> all, const std::vector<std::size_t>& rows, int bins,
                     std::vector<double>& scratch);

/// summary.json of a finished table: the counts per status and the
/// statistics of every observable, each by one of `threads` threads (0: all
/// cores; the same bytes for any count); fills result's status counts,
/// medians, largest residuals and the counts of samples with inconsistent
/// steps and with projection failures.
nlohmann::json summary(const Config& c, const Table& t, Outcome& result, int threads);

}  // namespace ukb::run
