/// @file crosscheck.hpp
/// @brief Cross-checking backends: the per-sample results of one backend
///        compared with another's under tolerances that ukb derives per
///        kind of quantity (`ukb run --crosscheck BACKEND`; docs/crosscheck.md).
///
/// ```cpp
/// ukb::run::Config c = ukb::run::load_config("study.toml");
/// ukb::run::Results a = ukb::run::read_results("on_gpu/results.csv");
/// ukb::run::Results b = ukb::run::read_results("on_cpu/results.csv");
/// ukb::run::CrosscheckReport r = ukb::run::compare_results(c, a, b);
/// if (!r.pass) std::cerr << r.verdict << '\n';
/// ```
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ukb/run.hpp"

namespace ukb::run {

/// Per-sample results: the columns of a results table (results.csv), the
/// status as text ("finished", "at_rest", "failed_..."), one row per sample.
struct Results {
  std::vector<std::string> names;           ///< numeric columns, "sample" first, in file order
  std::vector<std::vector<double>> values;  ///< values[column][row]
  std::vector<std::string> status;          ///< per row
  std::size_t rows() const { return status.size(); }
  /// The column of that name, or null.
  const std::vector<double>* column(const std::string& name) const;
};

/// Reads a results.csv written by `ukb run`. Throws ConfigError naming the
/// file, line and column where it is not such a table.
Results read_results(const std::string& csv_path);

/// How a column is compared (docs/crosscheck.md).
enum class CrossRule {
  exact,    ///< sample, the inputs, status, RK4's counters: equal
  one,      ///< RK4's projection_failures: |a - b| <= 1 (a threshold decision on differently rounded corrections)
  steps,    ///< dopri5's counters (steps, rank_*, ...): |a - b| <= 2 + 1 % of max(a, b)
  reported, ///< the work counters rejected and rhs_evals: differences reported, never a failure
  time,     ///< t_final, t_stop: |a - b| <= 2 event_tol + tau (1 + |b|) (|b| = 0 where not finite)
  state,    ///< every other real: |a - b| <= tau (1 + max |b| over the compared samples)
};

/// The state tolerance tau of a config: RK4 1e-9 (both backends take the
/// same steps; their results differ by rounding, amplified along the
/// trajectory); dopri5 max(1e-9, 100 rtol, 100 atol) (each backend's error
/// control takes steps of its own, so the two differ by their global
/// errors).
double crosscheck_tau(const Config& c);

/// The rule for a column of a run of c.
CrossRule crosscheck_rule(const Config& c, const std::string& column);

/// One sample where a column differs most (relative to its tolerance).
struct CrossOffender {
  long sample = 0;
  double a = 0, b = 0;  ///< the two values (exact columns: status compared as an index into Results::status)
  double tol = 0;
  std::string status_a, status_b;
  std::vector<std::pair<std::string, double>> inputs;  ///< the sample's varying inputs
};

/// The comparison of one column.
struct CrossColumn {
  std::string name;
  CrossRule rule = CrossRule::exact;
  double max_abs = 0;    ///< largest |a - b| (NaN against a number: inf)
  double max_rel = 0;    ///< largest |a - b| / |b| (|b| = 0: |a - b|)
  double worst = 0;      ///< largest |a - b| / tol (exact: 0 or inf)
  long failures = 0;     ///< samples out of tolerance
  bool pass = true;
  std::vector<CrossOffender> offenders;  ///< up to 3, the worst first
};

/// The comparison of two results of the same samples.
struct CrosscheckReport {
  std::string backend_a, backend_b;
  long samples = 0;  ///< rows compared
  double tau = 0;
  double event_tol = 0;
  bool pass = true;
  std::vector<CrossColumn> columns;
  /// One line: what was compared and the outcome, with the worst column.
  std::string verdict;
  /// The report as JSON text (crosscheck.json).
  std::string to_json() const;
};

/// Compares results a and b of the same samples of a run of c (rows matched
/// by the `sample` column; every sample of b must be in a): every column of
/// b by crosscheck_rule. Samples whose statuses differ fail the `status`
/// column and are left out of the others; so are, with dopri5, samples
/// that stopped early (max_steps, failed_*: each backend stops at its own
/// time). A value that is not finite on one side only is out of any
/// tolerance; NaN equals NaN. Throws ConfigError where the tables do not
/// have the same columns.
CrosscheckReport compare_results(const Config& c, const Results& a, const Results& b,
                                 const std::string& backend_a = "a", const std::string& backend_b = "b");

/// The samples a cross-check of K samples integrates again, in sample
/// order: a function of the seed, the sweep and the statuses only. All
/// samples where there are at most K; else round by round one sample from
/// each point of the sweep (every point where there are at most K points;
/// else K points chosen by a hash of (seed, point)), the statuses found at
/// a point taken in turn from one chosen by that hash, the samples of a
/// status in the order of a hash of (seed, sample). Memory: about K times
/// the number of distinct statuses entries, whatever the sample count.
std::vector<long> crosscheck_subset(const Config& c, std::span<const std::int32_t> status, long K);

}  // namespace ukb::run
