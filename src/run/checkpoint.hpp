// Checkpoints of `ukb run` (internal to the ukb_run library; the tests
// include it to build damaged checkpoints on purpose).
//
// A checkpoint holds the per-sample results of the first `done` samples,
// everything needed to continue the run with results bitwise identical to an
// uninterrupted run: the config text, its resolved form (which a resumed run
// must match), the backend and the ukb version. File layout:
//
//   "UKB-CHECKPOINT 1\n"
//   header length in bytes (decimal) "\n"
//   header: JSON (version, config, counts, column names and kinds)
//   body:   every column's `done` values (8 bytes each, little endian:
//           double or int64), then `done` statuses (int32)
//   "FNV1A64 " + 16 hex digits + "\n": the checksum of everything before
//
// It is written to NAME.tmp and renamed, so a checkpoint on disk is always
// complete: an interruption while writing leaves the previous one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ukb::run {

/// One column of the results table, in sample order.
struct Column {
  std::string name;
  bool integer = false;
  bool input = false;
  std::vector<double> d;        ///< values of a double column
  std::vector<std::int64_t> i;  ///< values of an integer column
};

/// The content of a checkpoint file.
struct Checkpoint {
  std::string version;          ///< ukb version that wrote it
  std::string config_text;      ///< the config file's text
  std::string config_path;      ///< the config file's path when the run began
  std::string identity;         ///< the resolved config that fixes the results (JSON)
  long samples = 0;             ///< samples of the run
  long done = 0;                ///< samples whose results are stored
  double system_steps = 0;      ///< RK4 system-steps taken for them
  std::vector<Column> cols;     ///< the results table's first `done` rows
  std::vector<std::int32_t> status;  ///< their statuses
};

/// The file name of the checkpoint in an output directory.
inline const char* checkpoint_name = "checkpoint.ukb";

/// Writes `k` to `file` atomically (file.tmp, then rename). Throws
/// ConfigError when it cannot be written.
void write_checkpoint(const std::filesystem::path& file, const Checkpoint& k);

/// Reads a checkpoint. Throws ConfigError naming the file and the problem
/// for a missing, truncated, corrupted or foreign file.
Checkpoint read_checkpoint(const std::filesystem::path& file);

/// The parts of a config's resolved JSON that fix the results (everything
/// but the file's path, the thread count, the chunk size and the checkpoint
/// interval: results are bitwise the same for any of those).
std::string config_identity(const std::string& config_json);

/// "" where two identities agree, else the first key whose values differ,
/// with both values ("integrator.dt: 0.01 in the checkpoint, 0.02 now").
std::string identity_difference(const std::string& checkpoint, const std::string& now);

}  // namespace ukb::run
