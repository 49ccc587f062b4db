// Files written and read by ukb in a way a hostile or unlucky environment
// cannot turn against the user (internal to the ukb_run library; the CLI
// uses it too):
//  - AtomicFile: an output written under a temporary name that is unique to
//    this process and created with O_CREAT|O_EXCL|O_NOFOLLOW (never opened
//    through a planted symbolic link, never another process's temporary),
//    every write checked, then renamed onto its target; removed on every
//    failure path.
//  - DirLock: an advisory lock (flock) on DIR/.ukb.lock held for the life of
//    a run, so that an output directory belongs to one run at a time; the
//    lock file opened by open_own_file.
//  - private_dir_problem, open_own_file: what ukb creates or trusts in a
//    place others can write (the plugin cache's fallback in the temporary
//    directory, lock files): a directory of this user alone, a file that is
//    ours alone (no symbolic link followed, no hard link written through).
//  - read_text: a config file read with a size cap (not a directory, not
//    /dev/zero).
//  - available_memory: the memory a run may use: physical memory, the
//    address-space limit (ulimit -v) and the cgroup's limit, whichever is
//    smallest, with its name for messages.
//  - StdoutWriter: standard output with every write checked.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>

namespace ukb::run {

namespace fs = std::filesystem;

/// A file written under a unique temporary name in its target's directory
/// and renamed onto the target by publish(). The destructor removes the
/// temporary unless it was published. A target that exists and is a device,
/// a FIFO or a socket (/dev/null, /dev/stdout, a process substitution) is
/// written in place instead. Failures throw WriteError (an I/O
/// error: the message names the file and the cause) or ConfigError (the
/// target is a directory, or the directory cannot be written).
class AtomicFile {
 public:
  /// `what` begins every message (e.g. "--out" or "results.csv").
  AtomicFile(fs::path target, std::string what);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  /// The stream to write to (binary; its failures are reported by close()).
  std::ostream& stream();
  /// Writes raw bytes (a checked write, for binary formats).
  void write(const void* p, std::size_t n);
  /// Flushes, syncs to the disk when `sync`, and closes; throws WriteError
  /// on any failure of a write, of the sync or of the close.
  void close(bool sync = false);
  /// Renames the closed temporary onto the target (the directory synced when
  /// close(true) was used).
  void publish();

  const fs::path& target() const { return target_; }
  const fs::path& temporary() const { return tmp_; }

 private:
  struct Buf;
  [[noreturn]] void fail(const std::string& what, int err);
  void adopt(int fd);

  fs::path target_, tmp_;
  std::string what_;
  std::unique_ptr<Buf> buf_;
  std::unique_ptr<std::ostream> os_;
  bool closed_ = false, synced_ = false, published_ = false, failed_ = false;
  bool direct_ = false;  ///< a device or FIFO target, written in place
};

/// Why `dir` is not a private directory of this user (empty where it is):
/// it must be a directory itself, not a symbolic link to one (lstat),
/// owned by this process's effective user, and not writable by its group or
/// by others. A plugin is loaded only from such a directory.
std::string private_dir_problem(const fs::path& dir);

/// Opens `file` with `flags` (O_CREAT among them where it may be created,
/// with `mode`), never through a symbolic link (O_NOFOLLOW) and only where
/// the file is ours alone: a regular file owned by this process's effective
/// user with one link (a hard link to another file would be written
/// through). Returns the descriptor, or -1 with `why` saying what is wrong
/// (the file is then not touched: never truncated here).
int open_own_file(const fs::path& file, int flags, unsigned mode, std::string& why);

/// An exclusive advisory lock on DIR/.ukb.lock (flock), which holds the
/// holder's pid; released (and the file removed) on destruction. Throws
/// ConfigError naming the holder's pid where another process holds it.
class DirLock {
 public:
  DirLock(const fs::path& dir, const std::string& origin);
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();

  static constexpr const char* name = ".ukb.lock";

 private:
  fs::path path_;
  int fd_ = -1;
};

/// FNV-1a, 64 bits, fed piece by piece: the checksum of checkpoints written
/// by earlier builds (FnvWords now) and the keys and content hashes of the
/// model-file cache (not a defence against
/// someone who can write those files).
struct Fnv {
  std::uint64_t h = 1469598103934665603ULL;
  void add(const void* p, std::size_t n) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) {
      h ^= c[i];
      h *= 1099511628211ULL;
    }
  }
  /// 16 lower-case hex digits.
  std::string hex() const;
};

/// FNV-1a's step on the little-endian 64-bit words of the bytes fed (fed
/// piece by piece; the last word zero-padded), then on their count, each
/// step followed by h ^= h >> 32: the checksum checkpoints are written with
/// (trailer "FNV64WX "; those of Fnv over the bytes, trailer "FNV1A64 ",
/// are still read). One multiply per 8 bytes instead of per byte (byte by
/// byte, the checksum of a large run's checkpoint took a noticeable share of
/// its time). The shift carries a difference in a word's high bits down to the
/// low ones, which the next multiply spreads up again: without it, a
/// multiply only carries differences upwards, and flipping the sign bits of
/// two doubles left the sum unchanged. Not a CRC: some patterns of three
/// flipped bits in consecutive words still cancel (the top bit of a word,
/// then bits 63 and 31 of the next); it guards against truncation and
/// damage, not against every small error.
struct FnvWords {
  std::uint64_t h = 1469598103934665603ULL;
  void add(const void* p, std::size_t n) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    bytes_ += n;
    for (; fill_ > 0 && fill_ < 8 && n > 0; --n) part_[fill_++] = *c++;
    if (fill_ == 8) {
      word(part_);
      fill_ = 0;
    }
    for (; n >= 8; n -= 8, c += 8) word(c);
    for (; n > 0; --n) part_[fill_++] = *c++;
  }
  /// 16 lower-case hex digits of the checksum of everything fed.
  std::string hex() const;

 private:
  void word(const unsigned char* b) {
    std::uint64_t w;
    std::memcpy(&w, b, 8);
    h ^= w;
    h *= 1099511628211ULL;
    h ^= h >> 32;
  }
  unsigned char part_[8] = {};
  std::size_t fill_ = 0;
  std::uint64_t bytes_ = 0;
};

/// The largest config file read (bytes).
inline constexpr std::uintmax_t max_config_bytes = 16u << 20;

/// The text of the file at `path`, at most `cap` bytes; throws ConfigError
/// (starting with `path`) for a directory, an unreadable file or a longer one.
std::string read_text(const std::string& path, std::uintmax_t cap);

/// The memory this process may use, and what limits it ("this machine's
/// memory", "the address-space limit (ulimit -v)", "the cgroup's memory
/// limit"), with what it already uses subtracted for the last two.
struct MemoryLimit {
  double bytes = 0;  ///< 0 where nothing is known
  std::string what;
};
MemoryLimit available_memory();

/// Standard output as a stream whose every write is checked: finish()
/// flushes it and throws WriteError with the cause where a write failed
/// (a full disk, /dev/full). The commands write their results through it.
class StdoutWriter {
 public:
  StdoutWriter();
  StdoutWriter(const StdoutWriter&) = delete;
  StdoutWriter& operator=(const StdoutWriter&) = delete;
  ~StdoutWriter();
  std::ostream& stream();
  void finish();

 private:
  struct Buf;
  std::unique_ptr<Buf> buf_;
  std::unique_ptr<std::ostream> os_;
};

}  // namespace ukb::run
