/// @file registry.hpp
/// @brief Host-side registry of the models: names, coordinates, parameters
///        with defaults and ranges, the optional hooks a model has, and
///        type-erased entry points (one evaluation; a resident ensemble).
///        Everything in double precision. No Eigen, OpenMP, SIMD or CUDA
///        header.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ukb/fields.hpp"
#include "ukb/model.hpp"
#include "ukb/options.hpp"
#include "ukb/text.hpp"  // closest_match, printable
#include "ukb/status.hpp"

namespace ukb {

/// One model parameter.
struct ParamInfo {
  std::string name;          ///< as in the config file and `--param KEY=VALUE`
  double default_value = 0;  ///< the value of the model's `Params{}`
  std::string description;   ///< meaning, unit and admissible range
  /// The admissible range, from a description ending in "(> x)" or
  /// "(>= x)": values above `lower` (or equal to it when lower_inclusive).
  /// -inf: any finite value.
  double lower = -std::numeric_limits<double>::infinity();
  bool lower_inclusive = true;
  /// A choice, from a description ending in "(one of a, b, ...)": only
  /// these values are admissible (a sign, a branch). Empty: a range.
  std::vector<double> choices;

  /// True where v is admissible: finite, not subnormal (0 < |v| below the
  /// smallest normal double, 2.2e-308: a mass or length there gives wrong
  /// accelerations with status ok, the model's arithmetic having lost its
  /// digits), and within the range or a choice.
  bool admits(double v) const;
  /// The range as text: "> 0", ">= 0", "finite" or "one of -1, 1".
  std::string range() const;
};

/// "" for a value that is not subnormal; else the reason it is refused, to
/// append to a message about v ("; ...").
std::string subnormal_note(double v);

/// One evaluation of one system: the outputs of `ukb accel`. On a failed
/// status the vectors hold NaN.
struct Evaluation {
  std::vector<double> qdd;          ///< the acceleration q'' (n)
  std::vector<double> Qc_ideal;     ///< the ideal constraint force A^T lambda (n)
  std::vector<double> Qc_nonideal;  ///< the non-ideal constraint force (n)
  std::vector<double> lambda;       ///< the multipliers (m)
  int rank = 0;                     ///< numerical rank of B = A L^{-T}
  Status status = Status::ok;
  /// max_i |(A q'' - b)_i| with the model's A and b at the state (NaN on a
  /// failed status).
  double constraint_residual = std::numeric_limits<double>::quiet_NaN();
  /// constraint_residual above the consistency rule (policy::consistency_rtol).
  bool inconsistent = false;
};

/// A model's terms at one state (row-major).
struct Terms {
  std::vector<double> M;  ///< mass matrix (n x n)
  std::vector<double> Q;  ///< impressed force (n)
  std::vector<double> A;  ///< constraint matrix (m x n)
  std::vector<double> b;  ///< constraint right-hand side (m)
};

/// N systems of one model in double precision that stay where they are
/// computed across calls: host memory on the reference and cpu backends,
/// device memory on cuda (uploaded when systems were set, downloaded when a
/// field is read). What `ukb run` integrates chunk by chunk.
class Ensemble {
 public:
  virtual ~Ensemble() = default;
  /// The number of systems.
  virtual int size() const = 0;
  /// The backend that integrates it.
  virtual Backend backend() const = 0;
  /// Sets system i: its parameter values (ModelInfo::params order), state
  /// (q, q': n values each) and time; status ok, run monitors reset. Calls
  /// for distinct systems may run at once on several threads (none of them
  /// at once with another member): the threads that fill an ensemble are
  /// the first to touch most of its memory (its zero-initialised fields).
  virtual void set(int i, std::span<const double> params, const double* q, const double* qd, double t) = 0;
  /// Integrates every active system by at most `budget` more steps
  /// (ukb::integrate). Returns the systems still active and the failed ones.
  virtual Tally integrate(const RunOptions& r, long budget, const EngineOptions& o) = 0;
  /// Keeps the dense output of every system's last accepted step from now
  /// on (Batch::allocate_dense; method dopri5), readable as real(Field::dense).
  /// On cuda the ensemble then moves to and from the device at every call.
  virtual void enable_dense() = 0;
  /// A field of every system (fields.hpp), read-only: value j of system i at
  /// soa(j, i, size()). The pointer stays valid until the next call that is
  /// not a read. Throws std::logic_error for a field of another type and for
  /// the outputs of `evaluate`.
  virtual const double* real(Field f) = 0;
  virtual const std::int64_t* i64(Field f) = 0;
  virtual const std::int32_t* i32(Field f) = 0;
  /// Value j of field f of system i, whatever its type, as a double.
  double value(Field f, int i, int j = 0);
};

/// One model: what `ukb models` lists and the entry points that `ukb
/// accel`, `ukb trajectory` and `ukb run` use. Parameter values travel as a
/// vector in the order of `params`.
struct ModelInfo {
  std::string name;                 ///< e.g. "bead_on_ring"
  std::string summary;              ///< one line
  int n = 0;                        ///< number of coordinates
  int m = 0;                        ///< number of constraint rows
  std::vector<std::string> coords;  ///< coordinate names (n)
  std::vector<ParamInfo> params;    ///< parameters, in declaration order

  /// Natural initial-condition quantities (model's `initial_names`; empty if
  /// the model has none and takes raw q, q' only).
  std::vector<std::string> initial_names;
  /// The same with their descriptions and admissible values (from the
  /// model's optional `initial_docs`, parsed as parameter descriptions;
  /// default_value is 0, or the first choice where 0 is not one).
  std::vector<ParamInfo> initial;
  bool has_events = false;     ///< the model locates events (stick-slip)
  bool has_potential = false;  ///< energy observables are defined
  bool has_residual = false;   ///< constraint residuals are monitored
  bool has_rows = false;       ///< the constraint rows are stated: stabilisation works
  bool has_rebind = false;     ///< `rebind` declared: the cpu backend computes SIMD packs of systems
  bool has_diagonal_mass = false;  ///< `mass_diagonal` declared: the cpu and cuda backends factor M's diagonal alone
  bool has_constraint_columns = false;  ///< `constraint_columns` declared: the cpu and cuda backends skip A's zeros

  /// One system evaluated on a backend (ukb::evaluate on a batch of one;
  /// throws BackendUnavailable).
  Evaluation (*evaluate)(Backend backend, std::span<const double> values, const double* q, const double* qd,
                         double t, double rank_rtol) = nullptr;
  /// The model's M, Q, A and b at one state.
  Terms (*terms)(std::span<const double> values, const double* q, const double* qd, double t) = nullptr;
  /// Where the model gives the diagonal of M (`mass_diagonal`, model.hpp):
  /// an empty string where `mass` and `mass_diagonal` agree at (q, t) (M
  /// diagonal, its diagonal the same values), else the first entry that
  /// differs and what is expected, in words (the message of `ukb run` and
  /// `ukb accel`). nullptr for the other models.
  std::string (*mass_diagonal_mismatch)(std::span<const double> values, const double* q, double t) = nullptr;
  /// Where the model states its rows' columns (`constraint_columns`,
  /// model.hpp): an empty string where A(q, q', t) is zero outside them,
  /// else the first entry that is not, in words (the message of `ukb run`
  /// and `ukb accel`). nullptr for the other models.
  std::string (*constraint_columns_mismatch)(std::span<const double> values, const double* q, const double* qd,
                                             double t) = nullptr;
  /// The consistent state of the natural quantities `ic` (initial_names
  /// order); false where none exists. nullptr without initial_names.
  bool (*initial_state)(std::span<const double> values, const double* ic, double* q, double* qd) = nullptr;
  /// The natural quantities of a state. nullptr without initial_names.
  void (*natural_state)(std::span<const double> values, const double* q, const double* qd, double* ic) = nullptr;
  /// The names of the model's own quantities of a final state (its
  /// `observable_names`; empty without them): results columns.
  std::vector<std::string> observable_names;
  /// Those quantities at (q, q', t), into out (observable_names' order).
  /// nullptr without observable_names.
  void (*observables)(std::span<const double> values, const double* q, const double* qd, double t,
                      double* out) = nullptr;
  /// Position- and velocity-level constraint residuals of a state (NaN
  /// without the model's `residual`).
  void (*residual)(std::span<const double> values, const double* q, const double* qd, double t, double& pos,
                   double& vel) = nullptr;
  /// Total energy 1/2 q'^T M q' + V(q, t) (NaN without the model's `potential`).
  double (*energy)(std::span<const double> values, const double* q, const double* qd, double t) = nullptr;
  /// A resident ensemble of N systems on a backend, every system with the
  /// default parameters, zero state and status ok (throws
  /// BackendUnavailable where the backend cannot run the model).
  std::unique_ptr<Ensemble> (*ensemble)(int N, Backend backend) = nullptr;

  /// Index of a parameter in `params`, or -1.
  int param_index(std::string_view key) const;
  /// Default parameter values, in order.
  std::vector<double> defaults() const;
};

/// What is wrong with the names of M's coordinates, parameters and natural
/// quantities (empty where nothing is): each must be 1 to 64 ASCII letters,
/// digits and underscores, not starting with a digit (they become config
/// keys, CSV and NumPy column names and JSON keys, and name columns such as
/// `q_<coord>_final`); coordinate names distinct, and parameter and natural
/// quantity names distinct from each other (both become input columns).
/// Model files are refused with this text when loaded; `ukb run` also
/// refuses a results table two of whose columns would share a name.
std::string name_problems(const ModelInfo& M);

/// Whether the results columns of kind `when` (fields.hpp: a field's
/// `when`) are written for a run of model M with options r: always;
/// `monitored` where M has `residual` and r monitors; `projecting` with
/// stabilisation by projection; `adaptive` with dopri5.
bool column_written(const ModelInfo& M, const RunOptions& r, ColumnWhen when);

/// Every built-in model, in a fixed order.
const std::vector<ModelInfo>& all_models();

/// The model of that name, or nullptr.
const ModelInfo* find_model(std::string_view name);

/// A parameter's description and range (from a description ending in
/// "(> x)", "(>= x)" or "(one of a, b, ...)").
ParamInfo param_info(const char* name, double value, const char* description);

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
