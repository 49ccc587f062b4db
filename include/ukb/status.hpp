/// @file status.hpp
/// @brief Per-system status codes shared by every backend.
#pragma once

#include <string_view>

namespace ukb {

/// Outcome of evaluating (or integrating) one system. A failing system gets
/// its own status; it never aborts a batch.
enum class Status : int {
  ok = 0,                  ///< evaluation succeeded
  failed_mass_matrix = 1,  ///< the mass matrix M is not (numerically) positive definite
  failed_nonfinite = 2,    ///< an input or a result is NaN or infinite
};

/// Stable lower-case name of a status (as written to JSON and CSV outputs).
constexpr std::string_view to_string(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::failed_mass_matrix: return "failed_mass_matrix";
    case Status::failed_nonfinite: return "failed_nonfinite";
  }
  return "unknown";
}

}  // namespace ukb
