/// @file status.hpp
/// @brief Per-system status codes shared by every backend.
#pragma once

#include <string_view>

#include "ukb/config.hpp"

namespace ukb {

/// Outcome of evaluating (or integrating) one system. A failing system gets
/// its own status; it never aborts a batch. Only a system whose status is ok
/// is integrated further: at_rest, max_steps and the failures are final.
enum class Status : int {
  ok = 0,                  ///< evaluation succeeded
  failed_mass_matrix = 1,  ///< the mass matrix M is not (numerically) positive definite
  failed_nonfinite = 2,    ///< an input or a result is NaN or infinite
  at_rest = 3,             ///< stuck: a located event found the system at rest for good
  max_steps = 4,           ///< the step limit was reached before the end time
  failed_residual = 5,     ///< a constraint residual exceeded RunOptions::residual_limit
  failed_rank = 6,         ///< rank(B) left RunOptions::expected_rank
  failed_step_size = 7,    ///< adaptive steps: the step the error control asks for is below dt_min
  /// an event was located again within event_tol of the instant its handler
  /// had resumed the system (the handler left it where the event is crossed
  /// at once: the time would stand still)
  failed_event_loop = 8,
};

/// True for the statuses of a failed system (failed_*).
UKB_HD constexpr bool is_failure(Status s) {
  return s == Status::failed_mass_matrix || s == Status::failed_nonfinite || s == Status::failed_residual ||
         s == Status::failed_rank || s == Status::failed_step_size || s == Status::failed_event_loop;
}

/// True for the codes of the Status values (a status read from a file is
/// checked with it).
constexpr bool is_valid_status(int code) { return code >= 0 && code <= static_cast<int>(Status::failed_event_loop); }

/// Stable lower-case name of a status (as written to JSON and CSV outputs).
constexpr std::string_view to_string(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::failed_mass_matrix: return "failed_mass_matrix";
    case Status::failed_nonfinite: return "failed_nonfinite";
    case Status::at_rest: return "at_rest";
    case Status::max_steps: return "max_steps";
    case Status::failed_residual: return "failed_residual";
    case Status::failed_rank: return "failed_rank";
    case Status::failed_step_size: return "failed_step_size";
    case Status::failed_event_loop: return "failed_event_loop";
  }
  return "unknown";
}

}  // namespace ukb
