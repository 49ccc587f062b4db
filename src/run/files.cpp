// Files written and read safely: see files.hpp.
#include "files.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <streambuf>
#include <vector>

#include "ukb/run.hpp"

namespace ukb::run {

namespace {

// Errors of the medium rather than of the path the user chose.
bool io_failure(int err) { return err == ENOSPC || err == EDQUOT || err == EIO || err == EFBIG; }

std::string errtext(int err) { return err ? std::strerror(err) : "an I/O error"; }

// Whole writes, EINTR retried; returns 0 or the error.
int write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return k < 0 ? errno : EIO;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return 0;
}

void sync_dir(const fs::path& dir) {
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

// ---------------------------------------------------------------- AtomicFile

// Not in an anonymous namespace: the base of AtomicFile::Buf and
// StdoutWriter::Buf, which have external linkage (g++ -Wsubobject-linkage
// in a unity build).
namespace detail {

// A stream buffer on a file descriptor that keeps the first error.
struct FdBuf : std::streambuf {
  int fd;
  int err = 0;
  std::vector<char> b = std::vector<char>(std::size_t(1) << 16);

  explicit FdBuf(int f) : fd(f) { setp(b.data(), b.data() + b.size()); }

  bool drain() {
    if (err) return false;
    err = write_all(fd, pbase(), static_cast<std::size_t>(pptr() - pbase()));
    setp(b.data(), b.data() + b.size());
    return err == 0;
  }
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (n <= epptr() - pptr()) {
      std::memcpy(pptr(), s, static_cast<std::size_t>(n));
      pbump(static_cast<int>(n));
      return n;
    }
    if (!drain()) return 0;
    err = write_all(fd, s, static_cast<std::size_t>(n));
    return err ? 0 : n;
  }
  int sync() override { return drain() ? 0 : -1; }
};

}  // namespace detail

struct AtomicFile::Buf : detail::FdBuf {
  using detail::FdBuf::FdBuf;
};

AtomicFile::AtomicFile(fs::path target, std::string what) : target_(std::move(target)), what_(std::move(what)) {
  struct stat st {};
  if (::stat(target_.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw ConfigError(what_ + ": '" + target_.string() + "' is a directory; expected a file name");
  // A device, a FIFO or a socket (/dev/null, /dev/stdout, a process
  // substitution): written directly, with every write checked; never
  // replaced by a regular file.
  if (::stat(target_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const int fd = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      throw ConfigError(what_ + ": cannot write '" + target_.string() + "' (" + errtext(err) + ")");
    }
    direct_ = true;
    adopt(fd);
    return;
  }
  const fs::path dir = target_.parent_path();
  // Built with append (g++ 12's -Wrestrict misreads chains of operator+).
  std::string base = ".";
  base.append(target_.filename().string()).append(".").append(std::to_string(::getpid()));
  int fd = -1, err = 0;
  for (int k = 0; k < 100 && fd < 0; ++k) {
    std::string name = base;
    if (k) name.append("-").append(std::to_string(k));
    name.append(".tmp");
    tmp_ = dir / name;
    fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    err = fd < 0 ? errno : 0;
    if (fd < 0 && err != EEXIST) break;  // EEXIST: a stale or planted name; take the next
  }
  if (fd < 0) {
    const std::string msg = what_ + ": cannot write '" + target_.string() + "': cannot create a file in '" +
                            (dir.empty() ? "." : dir.string()) + "' (" + errtext(err) + ")";
    tmp_.clear();
    if (io_failure(err)) throw WriteError(msg);
    throw ConfigError(msg);
  }
  adopt(fd);
}

void AtomicFile::adopt(int fd) {
  try {
    buf_ = std::make_unique<Buf>(fd);
    os_ = std::make_unique<std::ostream>(buf_.get());
  } catch (...) {  // no destructor will run: nothing may be left behind
    ::close(fd);
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
    throw;
  }
}

AtomicFile::~AtomicFile() {
  if (buf_ && buf_->fd >= 0) ::close(buf_->fd);
  if (!published_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

std::ostream& AtomicFile::stream() { return *os_; }

void AtomicFile::write(const void* p, std::size_t n) {
  os_->write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
}

void AtomicFile::fail(const std::string& what, int err) {
  failed_ = true;
  if (buf_->fd >= 0) ::close(buf_->fd);
  buf_->fd = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  throw WriteError(what_ + ": " + what + " '" + target_.string() + "' failed (" + errtext(err) + ")");
}

void AtomicFile::close(bool sync) {
  if (closed_) return;
  closed_ = true;
  os_->flush();
  if (buf_->err || !*os_) fail("writing", buf_->err);
  if (sync && !direct_ && ::fsync(buf_->fd) != 0) fail("syncing", errno);
  const int fd = buf_->fd;
  buf_->fd = -1;
  if (::close(fd) != 0) {
    failed_ = true;
    const int err = errno;
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
    tmp_.clear();
    throw WriteError(what_ + ": closing '" + target_.string() + "' failed (" + errtext(err) + ")");
  }
  synced_ = sync;
}

void AtomicFile::publish() {
  close();
  if (failed_) throw std::logic_error("AtomicFile::publish after a failed close");
  if (direct_) {  // written in place
    published_ = true;
    return;
  }
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    tmp_.clear();
    const std::string msg = what_ + ": '" + target_.string() + "' cannot be put in place (" + errtext(err) + ")";
    if (err == EISDIR || err == ENOTDIR || err == EACCES || err == EPERM) throw ConfigError(msg);
    throw WriteError(msg);
  }
  published_ = true;
  if (synced_) sync_dir(target_.parent_path());  // the rename itself is durable
}

// ------------------------------------------------------ files in shared places

std::string private_dir_problem(const fs::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return std::string("it cannot be examined (") + errtext(errno) + ")";
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (st.st_uid != ::geteuid())
    return "it belongs to another user (uid " + std::to_string(st.st_uid) + ", this process is uid " +
           std::to_string(::geteuid()) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("its group or others may write into it (mode ") + mode + ")";
  }
  return "";
}

int open_own_file(const fs::path& file, int flags, unsigned mode, std::string& why) {
  const int fd = ::open(file.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd < 0) {
    const int err = errno;
    why = err == ELOOP ? "it is a symbolic link; ukb does not follow it" : errtext(err);
    errno = err;
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) why = errtext(errno);
  else if (!S_ISREG(st.st_mode)) why = "it is not a regular file";
  else if (st.st_nlink != 1) why = "it has " + std::to_string(st.st_nlink) + " links (a hard link to another file)";
  else if (st.st_uid != ::geteuid()) why = "it belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  else return fd;
  ::close(fd);
  errno = EPERM;
  return -1;
}

// ------------------------------------------------------------------- DirLock

DirLock::DirLock(const fs::path& dir, const std::string& origin) : path_(dir / name) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string why;
    const int fd = open_own_file(path_, O_RDWR | O_CREAT, 0644, why);
    if (fd < 0) {
      if (errno == EPERM || errno == ELOOP)
        throw ConfigError(origin + ": '" + path_.string() + "' is not ukb's lock file of this user: " + why +
                          " (remove it)");
      throw ConfigError(origin + ": cannot write into the output directory '" + dir.string() + "' (" + why + ")");
    }
    struct stat held {};
    if (::fstat(fd, &held) != 0) {
      ::close(fd);
      throw ConfigError(origin + ": '" + path_.string() + "' cannot be examined (remove it)");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char pid[32] = {};
      const ssize_t k = ::pread(fd, pid, sizeof pid - 1, 0);
      ::close(fd);
      std::string holder = k > 0 ? std::string(pid, static_cast<std::size_t>(k)) : "";
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
      if (holder.find_first_not_of("0123456789") != std::string::npos) holder.clear();
      if (err != EWOULDBLOCK)
        throw ConfigError(origin + ": cannot lock the output directory '" + dir.string() + "' (" + errtext(err) + ")");
      throw ConfigError(origin + ": the output directory '" + dir.string() + "' is in use by another ukb run (" +
                        (holder.empty() ? std::string("pid unknown") : "pid " + holder) +
                        "); wait for it to end, or choose another directory");
    }
    // The file may have been removed by its previous holder between our
    // open and our lock: then the lock is on a file nobody else sees.
    struct stat now {};
    if (::stat(path_.c_str(), &now) != 0 || now.st_ino != held.st_ino || now.st_dev != held.st_dev) {
      ::close(fd);
      continue;
    }
    const std::string me = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) == 0) (void)::pwrite(fd, me.data(), me.size(), 0);
    fd_ = fd;
    return;
  }
  throw ConfigError(origin + ": cannot lock the output directory '" + dir.string() + "' (it keeps changing)");
}

DirLock::~DirLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still holding the lock (see the constructor)
  ::close(fd_);
}

// ------------------------------------------------------------------ reading

std::string read_text(const std::string& path, std::uintmax_t cap) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw ConfigError(path + ": is a directory; expected a config file (TOML)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read the config file (" + errtext(errno) + ")");
  std::string text;
  std::vector<char> chunk(std::size_t(1) << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > cap)
      throw ConfigError(path + ": the config file is larger than " + std::to_string(cap >> 20) +
                        " MiB; expected a TOML config (is it the right file?)");
  }
  if (in.bad()) throw ConfigError(path + ": reading the config file failed (" + errtext(errno) + ")");
  return text;
}

// ------------------------------------------------------------------- memory

namespace {

// The value of `key` in a "key value" per line file (memory.stat), or -1.
double read_stat(const fs::path& p, const std::string& key) {
  std::ifstream f(p);
  std::string k;
  double v = 0;
  while (f >> k >> v)
    if (k == key) return v;
  return -1;
}

// A number from a one-line file ("max" and absent files give -1).
double read_number(const fs::path& p) {
  std::ifstream f(p);
  std::string s;
  if (!(f >> s) || s == "max") return -1;
  try {
    return std::stod(s);
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

MemoryLimit available_memory() {
  MemoryLimit best;
  // bytes: what a limit leaves (a limit already exhausted leaves 1 byte).
  auto consider = [&](double bytes, const std::string& what) {
    if (!std::isfinite(bytes)) return;
    bytes = std::max(bytes, 1.0);
    if (best.bytes == 0 || bytes < best.bytes) best = {bytes, what};
  };
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) consider(static_cast<double>(pages) * static_cast<double>(page), "this machine's memory");

  // ulimit -v and -d: the limit less the address space (resp. the data
  // segment) in use already (/proc/self/statm: fields 1 and 6, in pages).
  double used_vm = 0, used_data = 0;
  {
    std::ifstream statm("/proc/self/statm");
    double f[6] = {};
    for (double& x : f) statm >> x;
    if (statm && page > 0) used_vm = f[0] * static_cast<double>(page), used_data = f[5] * static_cast<double>(page);
  }
  struct rlimit r {};
  if (::getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    consider(static_cast<double>(r.rlim_cur) - used_vm, "the address-space limit (ulimit -v)");
  if (::getrlimit(RLIMIT_DATA, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    consider(static_cast<double>(r.rlim_cur) - used_data, "the data-segment limit (ulimit -d)");

  // This process's cgroup and its ancestors: v2 (memory.max) and v1 (the
  // memory controller's memory.limit_in_bytes). What a group uses counts its
  // anonymous memory only: page cache is given back under pressure.
  auto walk = [&](fs::path g, const fs::path& root, const char* limit_file, const char* stat_key) {
    for (int depth = 0; depth < 64; ++depth) {
      const double max = read_number(g / limit_file);
      if (max >= 0 && max < 1e18) {
        const double used = read_stat(g / "memory.stat", stat_key);
        consider(max - std::max(used, 0.0), "the cgroup's memory limit (" + (g / limit_file).string() + ")");
      }
      if (g == root || !g.has_parent_path() || g.parent_path() == g) break;
      g = g.parent_path();
    }
  };
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    const std::size_t c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const fs::path rel = fs::path(line.substr(c2 + 1)).relative_path();
    if (controllers.empty()) walk(fs::path("/sys/fs/cgroup") / rel, "/sys/fs/cgroup", "memory.max", "anon");
    if (controllers == "memory")
      walk(fs::path("/sys/fs/cgroup/memory") / rel, "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "total_rss");
  }
  return best;
}

// ------------------------------------------------------------------- stdout

struct StdoutWriter::Buf : detail::FdBuf {
  using detail::FdBuf::FdBuf;
};

StdoutWriter::StdoutWriter() : buf_(std::make_unique<Buf>(STDOUT_FILENO)), os_(std::make_unique<std::ostream>(buf_.get())) {
  std::cout.flush();  // anything written through std::cout before goes first
}

StdoutWriter::~StdoutWriter() = default;

std::ostream& StdoutWriter::stream() { return *os_; }

void StdoutWriter::finish() {
  os_->flush();
  if (buf_->err || !*os_) throw WriteError("writing to standard output failed (" + errtext(buf_->err) + ")");
}

std::string Fnv::hex() const {
  char t[17];
  std::snprintf(t, sizeof t, "%016llx", static_cast<unsigned long long>(h));
  return t;
}

std::string FnvWords::hex() const {
  FnvWords f = *this;
  if (f.fill_ > 0) {
    std::memset(f.part_ + f.fill_, 0, 8 - f.fill_);
    f.word(f.part_);
  }
  unsigned char count[8];
  std::memcpy(count, &bytes_, 8);
  f.word(count);
  char t[17];
  std::snprintf(t, sizeof t, "%016llx", static_cast<unsigned long long>(f.h));
  return t;
}

}  // namespace ukb::run
