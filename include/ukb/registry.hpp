/// @file registry.hpp
/// @brief Host-side registry of the built-in models: names, coordinates,
///        parameters with defaults, and type-erased entry points.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ukb/engine.hpp"
#include "ukb/reference.hpp"

namespace ukb {

/// One model parameter.
struct ParamInfo {
  std::string name;         ///< as in the config file and `--param KEY=VALUE`
  double default_value = 0; ///< the value of the model's `Params{}`
  std::string description;  ///< meaning, unit and admissible range
  /// The admissible range, from a description ending in "(> x)" or
  /// "(>= x)": values above `lower` (or equal to it when lower_inclusive).
  /// -inf: any finite value.
  double lower = -std::numeric_limits<double>::infinity();
  bool lower_inclusive = true;

  /// True where v is admissible (finite and within the range).
  bool admits(double v) const;
  /// The range as text: "> 0", ">= 0" or "finite".
  std::string range() const;
};

/// A chunk of an ensemble in double precision, structure of arrays (value
/// j of system i at [j * N + i]), handed to ModelInfo::advance. The run
/// monitors (steps, events, t_stop, res_pos, res_vel, rank_drops,
/// proj_fails, inconsistent) carry over between calls, so a run may be split into calls
/// without changing its outcome.
struct EnsembleChunk {
  int N = 0;
  std::vector<double> params;  ///< np x N
  std::vector<double> q, qd;   ///< n x N
  std::vector<double> t;       ///< N
  std::vector<std::int32_t> status;  ///< N (Status)
  std::vector<std::int64_t> steps;   ///< N
  std::vector<std::int32_t> events;  ///< N
  std::vector<double> t_stop, res_pos, res_vel;  ///< N
  std::vector<std::int64_t> rank_drops, proj_fails, inconsistent;  ///< N

  /// N systems of a model with n coordinates and np parameters, every one
  /// ok at t = 0 with zero state and counters (t_stop NaN).
  void reset(int systems, int n, int np);
};

/// One registered model. Parameter values travel as a vector in the order of
/// `params`.
struct ModelInfo {
  std::string name;                 ///< e.g. "bead_on_ring"
  std::string summary;              ///< one line
  int n = 0;                        ///< number of coordinates
  int m = 0;                        ///< number of constraint rows
  std::vector<std::string> coords;  ///< coordinate names (n)
  std::vector<ParamInfo> params;    ///< parameters, in declaration order

  /// Reference acceleration for the parameter values `values` (params.size()).
  reference::AccelFn (*reference_accel)(std::span<const double> values,
                                        const reference::Options& opt) = nullptr;
  /// One system evaluated by a batch backend (cpu or cuda; double), returned
  /// in the reference's Result form. Throws BackendUnavailable.
  reference::Result (*batch_accel)(Backend backend, std::span<const double> values,
                                   const Eigen::VectorXd& q, const Eigen::VectorXd& qd, double t,
                                   double rank_rtol) = nullptr;
  /// Reference terms M, Q, A, b at one state.
  reference::Terms (*reference_terms)(std::span<const double> values, const Eigen::VectorXd& q,
                                      const Eigen::VectorXd& qd, double t) = nullptr;

  /// Natural initial-condition quantities (model's `initial_names`; empty if
  /// the model has none and takes raw q, q' only).
  std::vector<std::string> initial_names;
  bool has_events = false;    ///< the model locates events (stick-slip)
  bool has_potential = false; ///< energy observables are defined
  bool has_residual = false;  ///< constraint residuals are monitored
  bool has_rows = false;      ///< the constraint rows are stated: stabilisation works

  /// The consistent state of the natural quantities `ic` (initial_names
  /// order); false where none exists. nullptr without initial_names.
  bool (*initial_state)(std::span<const double> values, const double* ic, double* q,
                        double* qd) = nullptr;
  /// The natural quantities of a state. nullptr without initial_names.
  void (*natural_state)(std::span<const double> values, const double* q, const double* qd,
                        double* ic) = nullptr;
  /// Position- and velocity-level constraint residuals of a state (NaN
  /// without the model's `residual`).
  void (*residual)(std::span<const double> values, const double* q, const double* qd, double t,
                   double& pos, double& vel) = nullptr;
  /// Total energy 1/2 q'^T M q' + V(q, t) (NaN without the model's `potential`).
  double (*energy)(std::span<const double> values, const double* q, const double* qd,
                   double t) = nullptr;
  /// ukb::advance on a chunk (double). Returns the systems still active.
  long (*advance)(EnsembleChunk& chunk, Backend backend, const RunOptions& run, long budget,
                  const EngineOptions& options) = nullptr;

  /// Index of a parameter in `params`, or -1.
  int param_index(std::string_view key) const;
  /// Default parameter values, in order.
  std::vector<double> defaults() const;
};

/// Every built-in model, in a fixed order.
const std::vector<ModelInfo>& all_models();

/// The model of that name, or nullptr.
const ModelInfo* find_model(std::string_view name);

/// The candidate closest to `word` by edit distance if it is close enough to
/// be a likely typo, else an empty string (for "did you mean" messages).
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

/// Fills a model's Params from values in visit_params order.
template <Model Mo>
typename Mo::Params params_from(std::span<const double> values) {
  typename Mo::Params p{};
  std::size_t k = 0;
  Mo::visit_params(p, [&](const char*, auto& field, const char*) {
    field = static_cast<typename Mo::Scalar>(values[k++]);
  });
  return p;
}

}  // namespace ukb
