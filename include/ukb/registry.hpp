/// @file registry.hpp
/// @brief Host-side registry of the built-in models: names, coordinates,
///        parameters with defaults, and type-erased entry points.
#pragma once

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
  double default_value;     ///< the value of the model's `Params{}`
  std::string description;  ///< meaning, unit and admissible range
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
