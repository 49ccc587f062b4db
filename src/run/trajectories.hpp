// The recorded trajectories of `ukb run` (internal to the ukb_run library).
#pragma once

#include <ostream>

#include "ukb/options.hpp"
#include "ukb/registry.hpp"
#include "ukb/run.hpp"

namespace ukb::run {

/// Integrates the recorded samples (system k of `e` is sample c.record[k],
/// set at its initial state) in calls of record_every steps, writing
/// trajectories.csv into f: a row for every recorded sample at its start,
/// and after every call a row for each one the call changed. Leaves their
/// final states in e. Returns the system-steps taken.
double record_trajectories(const Config& c, Ensemble& e, const EngineOptions& eo, std::ostream& f);

}  // namespace ukb::run
