// Writing the outputs of `ukb run` (internal to the ukb_run library): the
// output directory, locked for the run, whose files are written under
// temporary names and renamed when complete, and the results tables (CSV,
// NumPy).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "files.hpp"
#include "table.hpp"

namespace ukb::run {

namespace fs = std::filesystem;

/// Numbers as written to the outputs: 17 significant digits (they round-
/// trip), nan, inf, -inf.
std::string g17(double v);

/// The outputs of the completed ukb run whose run.json is in dir: the
/// files its "outputs" lists (every output name for a run.json of a build
/// before that list); none where dir holds no such run.json.
std::vector<std::string> earlier_outputs(const fs::path& dir);

/// The files a run writes (each only when asked for).
inline constexpr const char* output_files[] = {"results.csv", "results.npy", "summary.json", "trajectories.csv", "crosscheck.json",
                                               "run.json"};

/// A write error after the run's outputs are in place (nothing to resume).
struct CompleteRunError : WriteError {
  using WriteError::WriteError;
};

/// A file of the output directory that cannot be created although the
/// directory passed Output's checks when the run started (it was removed,
/// or a directory put under an output's name, during the run): a write
/// error (exit code 4), not bad input.
template <class F>
decltype(auto) as_write_error(F&& f) {
  try {
    return f();
  } catch (const ConfigError& e) {
    throw WriteError(e.what());
  }
}

/// The output directory of one run: locked for the run's life (DirLock:
/// a second run, or a --resume of a live run, is refused naming the
/// holder's pid), its files written under unique temporary names
/// (AtomicFile) and renamed into place by commit(); on destruction without
/// commit, the temporaries (and a directory this run created, unless it
/// holds a checkpoint) are removed.
class Output {
 public:
  /// `inputs`: the run's own files (its config, its model file), which
  /// must not be among the files it writes.
  Output(fs::path dir, const std::string& origin, const std::vector<fs::path>& inputs = {})
      : dir_(std::move(dir)), origin_(origin) {
    std::error_code ec;
    fs::path created;
    // An input under an output's name would be overwritten by the run.
    if (fs::is_directory(dir_, ec))
      for (const fs::path& in : inputs) {
        auto clash = [&](const char* n) { return fs::equivalent(in, dir_ / n, ec) && !ec; };
        const char* hit = clash(checkpoint_name) ? checkpoint_name : nullptr;
        for (const char* n : output_files)
          if (!hit && clash(n)) hit = n;
        if (hit)
          throw ConfigError(origin + ": '" + printable(in.string(), 300) + "' is '" + (dir_ / hit).string() +
                            "', which the run would overwrite with its " + hit +
                            ": rename the file, or choose another directory");
      }
    if (!fs::exists(fs::symlink_status(dir_, ec))) {
      fs::path top = dir_;
      while (top.has_parent_path() && !top.parent_path().empty() && !fs::exists(top.parent_path(), ec))
        top = top.parent_path();
      fs::create_directories(dir_, ec);
      if (ec)
        throw ConfigError(origin + ": cannot create the output directory '" + dir_.string() + "' (" +
                          ec.message() + ")");
      created = top;
    } else if (!fs::is_directory(dir_, ec)) {
      throw ConfigError(origin + ": the output path '" + dir_.string() + "' exists and is not a directory");
    }
    // The lock file is also the test that the directory can be written. A
    // directory whose lock another run holds is that run's: never removed.
    try {
      lock_ = std::make_unique<DirLock>(dir_, origin);
    } catch (...) {
      remove_created(created);
      throw;
    }
    created_ = created;
    remove_stale_temporaries();
    // A directory (or anything but a file) under one of the output names
    // would be found only when the outputs are written, after the work.
    for (const char* n : output_files) {
      const fs::file_status st = fs::symlink_status(dir_ / n, ec);
      if (fs::exists(st) && !fs::is_regular_file(st) && !fs::is_symlink(st)) {
        lock_.reset();
        remove_created(created);
        throw ConfigError(origin + ": '" + (dir_ / n).string() + "' is " +
                          (fs::is_directory(st) ? "a directory" : "not a regular file") +
                          ", under the name of one of ukb's output files: remove or rename it, or choose another "
                          "directory");
      }
    }
    // The outputs of an earlier run into this directory are removed where
    // this run does not write them (they would seem to belong to it): those
    // its run.json lists. Other files of those names are the user's, and stay.
    earlier_ = earlier_outputs(dir_);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;
  ~Output() {
    if (!committed_) cleanup();
  }

  /// A new output file NAME (written to a temporary until commit()).
  AtomicFile& open(const std::string& name) {
    files_.push_back(as_write_error([&] { return std::make_unique<AtomicFile>(dir_ / name, name); }));
    return *files_.back();
  }

  // Renames every file into place (synced to the disk first, and the
  // directory after: the checkpoint removed next is then no longer needed
  // even after a power cut) and removes the outputs of an earlier run into
  // the same directory that this run did not write (they would not belong
  // to it).
  void commit() {
    for (auto& f : files_) f->close(/*sync=*/true);
    for (auto& f : files_) f->publish();
    std::error_code ec;
    for (const std::string& n : earlier_)
      if (std::none_of(files_.begin(), files_.end(), [&](const auto& f) { return f->target().filename() == n; }))
        fs::remove(dir_ / n, ec);  // a stale file left is harmless: every file of this run is in place
    committed_ = true;
    remove_checkpoint();  // the run is complete
  }

  // Removes the outputs of an earlier run into the directory: once this
  // run's checkpoint is there, they would seem to belong to it.
  void remove_stale() {
    std::error_code ec;
    for (const std::string& n : earlier_) fs::remove(dir_ / n, ec);
    earlier_.clear();  // (this run's own outputs are written at its end)
  }

  /// The names of the files opened so far (run.json lists them).
  std::vector<std::string> opened() const {
    std::vector<std::string> v;
    for (const auto& f : files_) v.push_back(f->target().filename().string());
    return v;
  }

  void remove_checkpoint() {
    std::error_code ec;
    fs::remove(dir_ / checkpoint_name, ec);
    if (ec)  // it would make the directory look unfinished
      throw CompleteRunError("'" + (dir_ / checkpoint_name).string() + "' cannot be removed (" + ec.message() +
                             "); the run is complete and its outputs are in place: delete it by hand");
  }

  // The directory holds a checkpoint now: keep it whatever happens.
  void keep() { created_.clear(); }

 private:
  // Temporaries of our files left by a process killed while writing them
  // (".results.csv.PID.tmp"): with the lock held, none is being written.
  // unlink never follows a link.
  void remove_stale_temporaries() {
    std::error_code ec, rm;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (n.size() < 6 || n[0] != '.' || n.compare(n.size() - 4, 4, ".tmp") != 0) continue;
      bool ours = n.rfind(std::string(".") + checkpoint_name + ".", 0) == 0;
      for (const char* o : output_files) ours = ours || n.rfind(std::string(".") + o + ".", 0) == 0;
      if (ours) fs::remove(it->path(), rm);
    }
  }

  // The directories this run created, from dir_ up to `top`, each removed
  // only if empty (rmdir, never recursive): another run that has taken the
  // directory in the meantime keeps it and everything in it.
  void remove_created(const fs::path& top) {
    if (top.empty()) return;
    std::error_code ec;
    fs::path d = dir_.lexically_normal();
    if (!d.has_filename()) d = d.parent_path();  // "out/" -> "out"
    for (;; d = d.parent_path()) {
      if (!fs::remove(d, ec) || ec) return;  // not empty (or gone): stop
      if (d == top || !d.has_parent_path() || d.parent_path() == d) return;
    }
  }

  void cleanup() {
    files_.clear();  // their temporaries are removed, under the lock
    if (!created_.empty()) {
      lock_.reset();  // the lock file goes; the directories then only if empty
      remove_created(created_);
    }
  }

  fs::path dir_, created_;
  std::string origin_;
  std::unique_ptr<DirLock> lock_;
  std::vector<std::unique_ptr<AtomicFile>> files_;
  bool committed_ = false;
  std::vector<std::string> earlier_;  ///< the outputs of a completed run found in the directory
};

/// The table as CSV (header, one row per sample; the status column at its
/// place), the rows formatted by `threads` threads (0: OpenMP's default).
void write_csv(std::ostream& f, const Table& t, int threads = 0);
/// The table as a NumPy structured array (.npy version 1.0).
void write_npy(std::ostream& f, const Table& t);

}  // namespace ukb::run
