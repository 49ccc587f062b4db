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
//   "FNV64WX " + 16 hex digits + "\n": the checksum of everything before
//           (files.hpp: FnvWords; a trailer "FNV1A64 ", FNV-1a over the
//           bytes, is that of an earlier build's checkpoint, still read)
//
// The body is streamed from and to the columns (no copy of the table). The
// file is written under a unique temporary name (files.hpp: AtomicFile,
// never through a planted link), flushed to the disk (fsync) and renamed,
// and the directory is synced: a checkpoint on disk is always complete, and
// an interruption or a failure while writing leaves the previous one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <istream>
#include <span>
#include <string>
#include <vector>

#include "table.hpp"

namespace ukb::run {

/// What a checkpoint says about its run.
struct CheckpointHeader {
  std::string version;          ///< ukb version that wrote it
  std::string config_text;      ///< the config file's text
  std::string config_path;      ///< the config file's path when the run began
  std::string config_dir;       ///< Config::source_dir (empty in checkpoints of ukb before 2026-11-28)
  std::string identity;         ///< the resolved config that fixes the results (JSON)
  long samples = 0;             ///< samples of the run
  long done = 0;                ///< samples whose results are stored
  double system_steps = 0;      ///< RK4 system-steps taken for them
};

/// The content of a checkpoint file.
struct Checkpoint {
  CheckpointHeader header;
  std::vector<Column> cols;          ///< the results table's first `done` rows
  Values<std::int32_t> status;       ///< their statuses
};

/// The file name of the checkpoint in an output directory.
inline const char* checkpoint_name = "checkpoint.ukb";

/// Writes the first h.done rows of `cols` and `status` with header `h` to
/// `file` atomically and durably (a unique temporary, fsync, rename, fsync of
/// the directory). Throws WriteError (or ConfigError for a path that cannot
/// hold a file) when it cannot be written; the previous checkpoint stays.
void write_checkpoint(const std::filesystem::path& file, const CheckpointHeader& h,
                      const std::vector<Column>& cols, std::span<const std::int32_t> status);

/// Reads a checkpoint. Throws ConfigError naming the file and the problem
/// for a missing, truncated, corrupted or foreign file (whatever its bytes),
/// and for one whose checksum holds but whose fields are not those of a
/// run (status codes, negative counters, done > samples, ...).
Checkpoint read_checkpoint(const std::filesystem::path& file);

/// The same from a stream of `size` bytes from its position; `name` begins
/// the messages (the checkpoint fuzz target reads from memory). The
/// checksum is the one the trailer names where the stream can seek, else
/// the one written now.
Checkpoint read_checkpoint(std::istream& in, std::uintmax_t size, const std::string& name);

/// The parts of a config's resolved JSON that fix the results (everything
/// but the file's path, the thread count, the chunk size and the checkpoint
/// interval: results are bitwise the same for any of those).
std::string config_identity(const std::string& config_json);

/// "" where two identities agree, else the first key whose values differ,
/// with both values ("integrator.dt: 0.01 in the checkpoint, 0.02 now").
std::string identity_difference(const std::string& checkpoint, const std::string& now);

}  // namespace ukb::run
