// Writing the outputs of `ukb run` (internal to the ukb_run library): the
// output directory, whose files are written under temporary names and
// renamed when complete, and the results tables (CSV, NumPy).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "table.hpp"

namespace ukb::run {

namespace fs = std::filesystem;

/// Numbers as written to the outputs: 17 significant digits (they round-
/// trip), nan, inf, -inf.
std::string g17(double v);

/// The files a run writes (each only when asked for).
inline constexpr const char* output_files[] = {"results.csv", "results.npy", "summary.json", "trajectories.csv",
                                               "run.json"};

/// Files written to NAME.tmp, renamed to NAME by commit(); on destruction
/// without commit, the temporaries (and a directory we created) are removed.
class Output {
 public:
  Output(fs::path dir, const std::string& origin) : dir_(std::move(dir)), origin_(origin) {
    std::error_code ec;
    if (!fs::exists(dir_, ec)) {
      fs::path top = dir_;
      while (top.has_parent_path() && !top.parent_path().empty() && !fs::exists(top.parent_path(), ec))
        top = top.parent_path();
      fs::create_directories(dir_, ec);
      if (ec)
        throw ConfigError(origin + ": cannot create the output directory '" + dir_.string() + "' (" +
                          ec.message() + ")");
      created_ = top;
    } else if (!fs::is_directory(dir_, ec)) {
      throw ConfigError(origin + ": the output path '" + dir_.string() + "' exists and is not a directory");
    }
    const fs::path probe = dir_ / ".ukb-write-test.tmp";
    std::ofstream f(probe);
    if (!f) {
      cleanup();
      throw ConfigError(origin + ": cannot write into the output directory '" + dir_.string() + "' (" +
                        std::strerror(errno) + ")");
    }
    f.close();
    fs::remove(probe, ec);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;
  ~Output() {
    if (!committed_) cleanup();
  }

  std::ofstream open(const std::string& name) {
    const fs::path p = dir_ / (name + ".tmp");
    files_.push_back(name);
    std::ofstream f(p, std::ios::binary);
    if (!f) throw ConfigError(origin_ + ": cannot write '" + p.string() + "' (" + std::strerror(errno) + ")");
    return f;
  }

  void close(std::ofstream& f, const std::string& name) {
    f.close();
    if (!f)
      throw ConfigError(origin_ + ": writing '" + (dir_ / (name + ".tmp")).string() +
                        "' failed (disk full?)");
  }

  // Renames every file into place and removes the outputs of an earlier run
  // into the same directory that this run did not write (they would not
  // belong to it).
  void commit() {
    for (const std::string& n : files_) fs::rename(dir_ / (n + ".tmp"), dir_ / n);
    for (const char* n : output_files)
      if (std::find(files_.begin(), files_.end(), n) == files_.end()) fs::remove(dir_ / n);
    remove_checkpoint();  // the run is complete
    committed_ = true;
  }

  // Removes the outputs of an earlier run into the directory: once this
  // run's checkpoint is there, they would seem to belong to it.
  void remove_stale() {
    std::error_code ec;
    for (const char* n : output_files) fs::remove(dir_ / n, ec);
  }

  void remove_checkpoint() {
    fs::remove(dir_ / checkpoint_name);
    std::error_code ec;
    fs::remove(dir_ / (std::string(checkpoint_name) + ".tmp"), ec);
  }

  // The directory holds a checkpoint now: keep it whatever happens.
  void keep() { created_.clear(); }

 private:
  void cleanup() {
    std::error_code ec;
    for (const std::string& n : files_) fs::remove(dir_ / (n + ".tmp"), ec);
    if (!created_.empty()) fs::remove_all(created_, ec);
  }

  fs::path dir_, created_;
  std::string origin_;
  std::vector<std::string> files_;
  bool committed_ = false;
};

/// The table as CSV (header, one row per sample; the status column at its place).
void write_csv(std::ofstream& f, const Table& t);
/// The table as a NumPy structured array (.npy version 1.0).
void write_npy(std::ofstream& f, const Table& t);

}  // namespace ukb::run
