// The recorded trajectories of `ukb run` (internal to the ukb_run library).
#pragma once

#include <atomic>
#include <ostream>

#include "ukb/options.hpp"
#include "ukb/registry.hpp"
#include "ukb/run.hpp"

namespace ukb::run {

/// Integrates the recorded samples (system k of `e` is sample c.record[k],
/// set at its initial state), writing trajectories.csv into f: a row for
/// every recorded sample at its start, then either (record_every) a row
/// after every call of record_every steps for each one the call changed,
/// or (record_dt, dopri5) a row at every t0 + j record_dt up to its end,
/// read off the dense output of the step that covers it, and a last row at
/// its final state. Leaves their final states in e. Returns the
/// system-steps taken. Where `stop` is given and becomes nonzero, returns
/// after the current call of the engine with *stopped set (the file and
/// the final states are then incomplete).
double record_trajectories(const Config& c, Ensemble& e, const EngineOptions& eo, std::ostream& f,
                           const std::atomic<int>* stop = nullptr, bool* stopped = nullptr);

}  // namespace ukb::run
