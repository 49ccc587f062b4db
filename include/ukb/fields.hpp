/// @file fields.hpp
/// @brief The table of per-system fields: every array a batch holds, written
///        once. The batch (batch.hpp), the device batch of the CUDA backend,
///        the kernels' load and store of one system, the reference backend's
///        loop, the ensemble's columns and the `ukb run` results table and
///        checkpoint are generated from it (after MuJoCo's mjxmacro.h).
///
/// `UKB_FIELDS(X)` calls `X(name, type, shape, rows, role, init, column, when, doc)`
/// once per field, in storage order:
///
/// | entry  | meaning |
/// |---|---|
/// | name   | member name in BatchView, Batch accessors and local copies |
/// | type   | `real` (the model's scalar), `i32` or `i64` |
/// | shape  | `one`: a value per system; `vec`: `rows` values per system |
/// | rows   | `n`, `m`, `np` (parameters), `dn` (10 n + 2: a dense output) or `1` |
/// | role   | `param` (input), `state` (integrated), `monitor` (counted during a run, reset by set_state), `adaptive` (a monitor of adaptive steps, allocated by the first integration with Method::dopri5), `output` (of `evaluate`, allocated on first use), `dense` (the dense output of adaptive steps, allocated on request) |
/// | init   | value on construction and reset: `zero` or `nan` |
/// | column | the `ukb run` results column (a string), or `nullptr` |
/// | when   | when that column is written: `always`, `monitored` (the model has `residual` and the run monitors), `projecting` (stabilisation by projection), `adaptive` (method dopri5) |
/// | doc    | what the field holds |
///
/// The order of the monitors is the order of their results columns.
/// Component j of system i of a field lives at `f[j * N + i]` (soa()).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ukb/config.hpp"

// clang-format off
#define UKB_FIELDS(X)                                                                                          \
  X(q,            real, vec, n,  state,   zero, nullptr,               always,     "positions (n x N)")         \
  X(qd,           real, vec, n,  state,   zero, nullptr,               always,     "velocities (n x N)")        \
  X(t,            real, one, 1,  state,   zero, nullptr,               always,     "times (N)")                 \
  X(params,       real, vec, np, param,   zero, nullptr,               always,     "parameters (np x N), in visit_params order") \
  X(status,       i32,  one, 1,  state,   zero, nullptr,               always,     "Status of each system (N)") \
  X(t_stop,       real, one, 1,  monitor, nan,  "t_stop",              always,     "at_rest: the time the handler stopped it (the event's, or later where it finished the motion); failed_*: the last good time; else NaN (N)") \
  X(steps,        i64,  one, 1,  monitor, zero, "steps",               always,     "accepted integration steps since set_state (N)") \
  X(events,       i32,  one, 1,  monitor, zero, "events",              always,     "located events since set_state (N)") \
  X(rank_drops,   i64,  one, 1,  monitor, zero, "rank_drops",          always,     "steps with an evaluation where rank(B) < m (N)") \
  X(rank_changes, i64,  one, 1,  monitor, zero, "rank_changes",        always,     "steps whose rank(B) differs from the previous step's, or within the step (N)") \
  X(rank_marginal, i64, one, 1,  monitor, zero, "rank_marginal",       always,     "steps with a marginal rank decision: a singular value within policy::rank_margin of the cut (N)") \
  X(rank_prev,    i32,  one, 1,  monitor, zero, nullptr,               always,     "1 + the smallest rank(B) of the last step; 0 before the first step (N)") \
  X(inconsistent, i64,  one, 1,  monitor, zero, "inconsistent",        always,     "steps with an inconsistent evaluation (N)") \
  X(res_pos,      real, one, 1,  monitor, zero, "res_pos_max",         monitored,  "largest position-level constraint residual seen (N)") \
  X(res_vel,      real, one, 1,  monitor, zero, "res_vel_max",         monitored,  "largest velocity-level constraint residual seen (N)") \
  X(proj_fails,   i64,  one, 1,  monitor, zero, "projection_failures", projecting, "steps whose projection did not converge (N)") \
  X(ctrl,         i32,  one, 1,  monitor, zero, nullptr,               always,     "run bits: 1 the start is done, 2 dopri5: the acceleration at the state is counted, 4 dopri5: the last step was rejected, 8 the last accepted step ended at an event its handler resumed (N)") \
  X(rejected,     i64,  one, 1,  adaptive, zero, "rejected",           adaptive,   "dopri5: steps rejected by the error control (N)") \
  X(rhs_evals,    i64,  one, 1,  adaptive, zero, "rhs_evals",          adaptive,   "evaluations of the acceleration (right-hand side), location trials and the initial step's probe included; dopri5, and RK4 where the batch has these monitors (Batch::allocate_adaptive) (N)") \
  X(h_next,       real, one, 1,  adaptive, zero, nullptr,              always,     "dopri5: the size of the next step the error control chose; 0 before the first (N)") \
  X(err_prev,     real, one, 1,  adaptive, zero, nullptr,              always,     "dopri5: the error norm of the last accepted step (PI control); 0 before the first (N)") \
  X(qdd,          real, vec, n,  output,  nan,  nullptr,               always,     "last evaluated acceleration (n x N)") \
  X(Qc_ideal,     real, vec, n,  output,  nan,  nullptr,               always,     "last evaluated ideal constraint force (n x N)") \
  X(Qc_nonideal,  real, vec, n,  output,  nan,  nullptr,               always,     "last evaluated non-ideal constraint force (n x N)") \
  X(lambda,       real, vec, m,  output,  nan,  nullptr,               always,     "last evaluated multipliers (m x N)") \
  X(rank,         i32,  one, 1,  output,  zero, nullptr,               always,     "last evaluated rank of B (N)") \
  X(dense,        real, vec, dn, dense,   nan,  nullptr,               always,     "dopri5: the dense output of the last accepted step, kernels::DenseStep: r0..r4 (2n each), t0, h ((10n + 2) x N; allocated on request; cpu and cuda: t0 = h = NaN, none, after a step was rejected once its event location had begun, or failed to settle)")
// clang-format on

/// The C++ type of a field's type token, for model scalar T.
#define UKB_FIELD_TYPE(type, T) UKB_FIELD_TYPE_##type(T)
#define UKB_FIELD_TYPE_real(T) T
#define UKB_FIELD_TYPE_i32(T) std::int32_t
#define UKB_FIELD_TYPE_i64(T) std::int64_t

/// Token tests usable in `if constexpr`.
#define UKB_FIELD_IS(token, value) UKB_FIELD_IS_##value##_##token
#define UKB_FIELD_IS_vec_vec true
#define UKB_FIELD_IS_vec_one false
#define UKB_FIELD_IS_param_param true
#define UKB_FIELD_IS_param_state false
#define UKB_FIELD_IS_param_monitor false
#define UKB_FIELD_IS_param_adaptive false
#define UKB_FIELD_IS_param_output false
#define UKB_FIELD_IS_param_dense false
#define UKB_FIELD_IS_state_param false
#define UKB_FIELD_IS_state_state true
#define UKB_FIELD_IS_state_monitor false
#define UKB_FIELD_IS_state_adaptive false
#define UKB_FIELD_IS_state_output false
#define UKB_FIELD_IS_state_dense false
#define UKB_FIELD_IS_monitor_param false
#define UKB_FIELD_IS_monitor_state false
#define UKB_FIELD_IS_monitor_monitor true
#define UKB_FIELD_IS_monitor_adaptive false
#define UKB_FIELD_IS_monitor_output false
#define UKB_FIELD_IS_monitor_dense false
#define UKB_FIELD_IS_adaptive_param false
#define UKB_FIELD_IS_adaptive_state false
#define UKB_FIELD_IS_adaptive_monitor false
#define UKB_FIELD_IS_adaptive_adaptive true
#define UKB_FIELD_IS_adaptive_output false
#define UKB_FIELD_IS_adaptive_dense false
#define UKB_FIELD_IS_output_param false
#define UKB_FIELD_IS_output_state false
#define UKB_FIELD_IS_output_monitor false
#define UKB_FIELD_IS_output_adaptive false
#define UKB_FIELD_IS_output_output true
#define UKB_FIELD_IS_output_dense false
#define UKB_FIELD_IS_dense_param false
#define UKB_FIELD_IS_dense_state false
#define UKB_FIELD_IS_dense_monitor false
#define UKB_FIELD_IS_dense_adaptive false
#define UKB_FIELD_IS_dense_output false
#define UKB_FIELD_IS_dense_dense true

namespace ukb {

/// The fields of the table, by name (Field::q, Field::steps, ...).
enum class Field : int {
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) name,
  UKB_FIELDS(UKB_X)
#undef UKB_X
};

/// How a field is used (see the table above).
enum class FieldRole : int { param, state, monitor, adaptive, output, dense };

/// When a field's results column is written (see the table above).
enum class ColumnWhen : int { always, monitored, projecting, adaptive };

/// What the table says about one field, for code that walks it at run time
/// (the ensemble's columns, the results table, the checkpoint).
struct FieldInfo {
  Field field;
  const char* name;
  bool real;         ///< the model's scalar (else an integer)
  int bytes;         ///< integer size (4 or 8); 0 for real
  bool vec;          ///< rows values per system (else one)
  char rows;         ///< 'n', 'm', 'p' (parameters), 'd' (10 n + 2) or '1'
  FieldRole role;
  bool nan_init;     ///< starts as NaN (else zero)
  const char* column;  ///< results column, or nullptr
  ColumnWhen when;
  const char* doc;
};

namespace detail {
#define UKB_FIELD_ROWS_CHAR_n 'n'
#define UKB_FIELD_ROWS_CHAR_m 'm'
#define UKB_FIELD_ROWS_CHAR_np 'p'
#define UKB_FIELD_ROWS_CHAR_dn 'd'
#define UKB_FIELD_ROWS_CHAR_1 '1'
#define UKB_FIELD_BYTES_real 0
#define UKB_FIELD_BYTES_i32 4
#define UKB_FIELD_BYTES_i64 8
}  // namespace detail

/// Every field, in table order.
inline constexpr FieldInfo field_table[] = {
#define UKB_X(name, type, shape, rows, role, init, column, when, doc)                                   \
  {Field::name, #name, UKB_FIELD_BYTES_##type == 0, UKB_FIELD_BYTES_##type, UKB_FIELD_IS(shape, vec), \
   UKB_FIELD_ROWS_CHAR_##rows, FieldRole::role, UKB_FIELD_INIT_NAN_##init, column,                     \
   ColumnWhen::when, doc},
#define UKB_FIELD_INIT_NAN_zero false
#define UKB_FIELD_INIT_NAN_nan true
    UKB_FIELDS(UKB_X)
#undef UKB_X
};

/// The table's entry of field f.
constexpr const FieldInfo& field_info(Field f) { return field_table[static_cast<int>(f)]; }

/// Index of component j of system i in a field of N systems (structure of
/// arrays: neighbouring systems at neighbouring addresses).
UKB_HD constexpr std::size_t soa(int j, int i, int N) {
  return static_cast<std::size_t>(j) * static_cast<std::size_t>(N) + static_cast<std::size_t>(i);
}

}  // namespace ukb
