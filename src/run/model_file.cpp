// Model files (include/ukb/model_file.hpp): a header compiled into a plugin
// with the compilers and flags ukb was built with, cached, and loaded with
// dlopen through the C entry points of ukb/plugin/entry.hpp.
//
// A build runs in a temporary directory of the cache, in two phases:
//  1. check: the header with ukb/model.hpp only, -fsyntax-only, every model
//     function instantiated (detail::touch_model); under --backend cuda also
//     nvcc on the same to PTX (device code: no exceptions, no host calls, no
//     allocation). A second or so; the errors are the user's own.
//  2. build: the generated translation unit (ukb/plugin/host.hpp, then the
//     header) compiled with -MD (every file read, for the manifest), the
//     cuda unit (ukb/cuda/plugin.cuh, then the header) under --backend cuda,
//     linked with libukb.a into plugin.so.
// Then the manifest is written and the directory renamed into place.
#include "ukb/model_file.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <list>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <sstream>

#include "files.hpp"
#include "ukb/config.hpp"
#include "ukb/plugin/entry.hpp"

extern char** environ;

namespace ukb {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& msg) { throw ModelFileError(msg); }

// Appended rather than "'" + string&&: g++ 12 -O3 reports a false -Wrestrict
// on the latter (GCC bug 105329) once the unity build inlines it.
std::string named(const fs::path& p) {
  std::string s(1, '\'');
  s += printable(p.string(), 300);
  s += '\'';
  return s;
}

// Cache keys and content hashes: run::Fnv over the parts, each followed by a
// separator byte, so that ("ab", "c") and ("a", "bc") differ.
struct Hash {
  run::Fnv f;
  Hash& add(std::string_view s) {
    f.add(s.data(), s.size());
    f.add("\xff", 1);
    return *this;
  }
  std::string hex() const { return f.hex(); }
};

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream s;
  s << f.rdbuf();
  if (f.bad()) return std::nullopt;
  return s.str();
}

std::optional<std::string> hash_file(const fs::path& p) {
  const std::optional<std::string> text = read_file(p);
  if (!text) return std::nullopt;
  return Hash{}.add(*text).hex();
}

// ---------------------------------------------------------------- the file

// The absolute, normalised form of a model file's path. An empty path (as
// in the spec ":Name") is refused here: std::filesystem::absolute throws on
// it, which would reach the user as an internal error.
fs::path model_path(const std::string& text) {
  if (text.empty()) fail("model file: an empty path; expected 'path/to/model.hpp' or 'path/to/model.hpp:Name'");
  std::error_code ec;
  fs::path p = fs::absolute(text, ec);
  if (ec) fail("model file " + named(text) + ": cannot make the path absolute (" + ec.message() + ")");
  return fs::weakly_canonical(p, ec);
}

// The text of a model file, with every check that needs no compiler.
std::string read_model_file(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail("model file " + named(path) + ": no such file");
  if (fs::is_directory(st)) fail("model file " + named(path) + ": is a directory; expected a C++ header");
  if (!fs::is_regular_file(st)) fail("model file " + named(path) + ": not a regular file; expected a C++ header");
  std::string text;
  try {
    text = run::read_text(path.string(), 4u << 20);
  } catch (const std::exception& e) {
    fail(std::string("model file ") + e.what());
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    fail("model file " + named(path) + ": is empty; expected a C++ header with a model and a UKB_MODEL(Name) line "
         "(docs/adding-a-model.md)");
  if (text.find('\0') != std::string::npos)
    fail("model file " + named(path) + ": binary data (a NUL byte), not a C++ header");
  return text;
}

// The arguments of the UKB_MODEL(...) lines of a text, outside comments,
// string and character literals, and #define lines; whitespace removed.
std::vector<std::string> scan_models(const std::string& s) {
  std::string code;  // the text with comments and literals blanked
  code.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (s.compare(i, 2, "/*") == 0) {
      const std::size_t e = s.find("*/", i + 2);
      i = e == std::string::npos ? s.size() : e + 2;
      code += ' ';
    } else if (s[i] == '"' || s[i] == '\'') {
      const char q = s[i++];
      while (i < s.size() && s[i] != q && s[i] != '\n') i += s[i] == '\\' ? 2 : 1;
      ++i;
      code += ' ';
    } else {
      code += s[i++];
    }
  }
  std::vector<std::string> ids;
  std::istringstream lines(code);
  std::string line;
  static const std::regex macro(R"((^|[^A-Za-z0-9_])UKB_MODEL\s*\(([^()]*)\))");
  while (std::getline(lines, line)) {
    if (line.find_first_not_of(" \t") != std::string::npos && line[line.find_first_not_of(" \t")] == '#') continue;
    for (std::sregex_iterator it(line.begin(), line.end(), macro), end; it != end; ++it) {
      std::string id = (*it)[2];
      id.erase(std::remove_if(id.begin(), id.end(), [](unsigned char c) { return std::isspace(c); }), id.end());
      if (!id.empty()) ids.push_back(id);
    }
  }
  return ids;
}

// ---------------------------------------------------------------- the toolchain

// What the build recorded (CMakeLists.txt, share/ukb/toolchain.json).
struct Toolchain {
  fs::path file;
  std::string text;  // the record as read: part of every key
  std::string cxx;
  std::vector<std::string> cxx_flags, link_flags, includes, link;
  std::string nvcc;  // "" without CUDA
  std::vector<std::string> cuda_flags, cuda_link;
  std::string abi;
};

fs::path self_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

const Toolchain& toolchain() {
  static const Toolchain tc = [] {
    std::vector<fs::path> tried;
    if (const char* env = std::getenv("UKB_TOOLCHAIN"); env && *env) tried.push_back(env);
    if (const fs::path d = self_dir(); !d.empty()) tried.push_back(d.parent_path() / "share/ukb/toolchain.json");
#ifdef UKB_BUILD_TOOLCHAIN
    tried.push_back(UKB_BUILD_TOOLCHAIN);
#endif
#ifdef UKB_INSTALL_TOOLCHAIN
    tried.push_back(UKB_INSTALL_TOOLCHAIN);
#endif
    for (const fs::path& f : tried) {
      std::error_code ec;
      if (!fs::is_regular_file(f, ec)) continue;
      Toolchain t;
      t.file = fs::weakly_canonical(f, ec);
      t.text = read_file(f).value_or("");
      // "@PREFIX@" in an installed record: the prefix it is installed under
      // (the record is PREFIX/share/ukb/toolchain.json).
      const std::string prefix = t.file.parent_path().parent_path().parent_path().string();
      auto expand = [&](std::string s) {
        for (std::size_t k; (k = s.find("@PREFIX@")) != std::string::npos;) s.replace(k, 8, prefix);
        return s;
      };
      try {
        const nlohmann::json j = nlohmann::json::parse(t.text);
        if (j.at("ukb_version").get<std::string>() != ukb::version)
          fail("the toolchain record " + named(f) + " is of ukb " + j.at("ukb_version").get<std::string>() +
               ", this is ukb " + ukb::version);
        auto list = [&](const char* key) {
          std::vector<std::string> v;
          if (j.contains(key))
            for (const auto& x : j.at(key)) v.push_back(expand(x.get<std::string>()));
          return v;
        };
        t.cxx = j.at("cxx").get<std::string>();
        t.cxx_flags = list("cxx_flags");
        t.link_flags = list("link_flags");
        t.includes = list("includes");
        t.link = list("link");
        t.nvcc = j.value("nvcc", std::string());
        t.cuda_flags = list("cuda_flags");
        t.cuda_link = list("cuda_link");
        Hash abi;
        abi.add(j.at("cxx_id").get<std::string>());
        for (const auto& s : j.at("cxx_flags")) abi.add(s.get<std::string>());
        abi.add(j.value("nvcc_id", std::string()));
        for (const auto& s : j.value("cuda_flags", nlohmann::json::array())) abi.add(s.get<std::string>());
        // The layout of ModelInfo, which a plugin fills: a field added to it
        // must not let a plugin built against the old layout count as fresh.
        t.abi = std::string("ukb-plugin-2 ukb ") + ukb::version + " ModelInfo " + std::to_string(sizeof(ModelInfo)) +
                " " + abi.hex();
      } catch (const nlohmann::json::exception& e) {
        fail("the toolchain record " + named(f) + " is damaged (" + e.what() + "); reinstall ukb");
      }
      return t;
    }
    std::string where;
    for (const fs::path& f : tried) where += (where.empty() ? "" : ", ") + f.string();
    fail("model files cannot be compiled here: ukb's toolchain record (share/ukb/toolchain.json, written when ukb "
         "is built) was not found (looked at: " + where + "); set UKB_TOOLCHAIN to its path");
  }();
  return tc;
}

// ---------------------------------------------------------------- the cache

// A directory made by mkdtemp for this process alone, removed at exit.
struct RunCache {
  fs::path path;
  ~RunCache() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

// The plugin cache: UKB_CACHE_DIR, else $XDG_CACHE_HOME/ukb, else
// $HOME/.cache/ukb, where it can be written and is a private directory of
// this user (private_dir_problem: plugins are loaded from it, so nobody else
// may plant or replace one); else $TMPDIR/ukb-cache-UID made with mode 0700
// and checked the same way (another user may have made that name first:
// as a link, or as a directory of theirs holding a plugin); else a new
// directory of mkdtemp for this process alone, removed at its exit.
fs::path cache_root() {
  static RunCache fresh;
  static const fs::path root = [] {
    fs::path dir;
    if (const char* d = std::getenv("UKB_CACHE_DIR"); d && *d) dir = d;
    else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = fs::path(x) / "ukb";
    else if (const char* h = std::getenv("HOME"); h && *h) dir = fs::path(h) / ".cache/ukb";
    std::error_code ec;
    std::string why = "no HOME";
    if (!dir.empty()) {
      fs::create_directories(dir, ec);
      why = run::private_dir_problem(dir);
      if (why.empty() && ::access(dir.c_str(), W_OK | X_OK) != 0) why = std::string("it cannot be written (") + std::strerror(errno) + ")";
      if (why.empty()) return dir;
    }
    const char* tmp = std::getenv("TMPDIR");
    const fs::path base = tmp && *tmp ? tmp : "/tmp";
    const fs::path shared = base / ("ukb-cache-" + std::to_string(::geteuid()));
    std::string shared_why;
    if (::mkdir(shared.c_str(), 0700) != 0 && errno != EEXIST)
      shared_why = std::string("it cannot be made (") + std::strerror(errno) + ")";
    else
      shared_why = run::private_dir_problem(shared);
    fs::path use = shared;
    if (!shared_why.empty()) {
      std::string templ = (base / ("ukb-cache-" + std::to_string(::geteuid()) + "-XXXXXX")).string();
      if (!::mkdtemp(templ.data()))
        fail("no plugin cache can be made: " + named(dir.empty() ? shared : dir) + " cannot be used (" + why +
             "), nor " + named(shared) + " (" + shared_why + "), nor a new directory in " + named(base) + " (" +
             std::strerror(errno) + "); set UKB_CACHE_DIR to a private directory");
      use = fresh.path = templ;
    }
    std::cerr << "ukb: the plugin cache " << (dir.empty() ? std::string("(no HOME)") : named(dir))
              << " cannot be used (" << why << "); using " << named(use)
              << (shared_why.empty() ? std::string()
                                     : " (a new directory: " + named(shared) + " cannot be trusted, " + shared_why +
                                           "), removed when this process ends")
              << " (set UKB_CACHE_DIR to a private, writable directory)\n";
    return use;
  }();
  return root;
}

// ".build-HOST-": the start of the names of this host's build directories
// (HOST with characters other than letters, digits and '.' as '_').
std::string build_prefix() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string h = host;
  for (char& ch : h)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.') ch = '_';
  return ".build-" + h + "-";
}

// The build directories in `parent` of compiles on this host whose process
// is gone (killed during a compile: a second signal, SIGKILL, a crash),
// this user's own: removed. Others' and live ones stay.
void remove_dead_builds(const fs::path& parent) {
  const std::string prefix = build_prefix();
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::size_t dash = name.find('-', prefix.size());
    const std::string pid_text = name.substr(prefix.size(), dash == std::string::npos ? 0 : dash - prefix.size());
    if (pid_text.empty() || pid_text.size() > 9 ||
        !std::all_of(pid_text.begin(), pid_text.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to ask
    std::error_code rm;
    fs::remove_all(it->path(), rm);
  }
}

// A directory removed with everything in it when the scope ends (if it is
// still there: a published build has been renamed).
struct TempDir {
  fs::path path;
  explicit TempDir(const fs::path& parent) {
    remove_dead_builds(parent);
    std::random_device rd;
    const std::string prefix = build_prefix() + std::to_string(::getpid()) + "-";
    for (int k = 0; k < 100; ++k) {
      const fs::path p = parent / (prefix + std::to_string(rd() % 1000000));
      if (::mkdir(p.c_str(), 0700) == 0) {
        path = p;
        return;
      }
      if (errno != EEXIST) break;
    }
    fail("cannot create a build directory in the plugin cache " + named(parent) + ": " + std::strerror(errno));
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// An exclusive lock (flock) on a cache entry's lock file (".ENTRY.lock" in
// the cache), held while this process checks, builds and loads the entry:
// processes that want the same plugin at once compile it once, the others
// wait and then find it built. Where the file system has no locks nothing
// is held: concurrent builds then each compile, and publish() keeps one.
// flock's lock goes with the process: one that dies leaves no stale lock.
struct EntryLock {
  int fd = -1;
  EntryLock(const fs::path& entry, const std::string& what, bool progress) {
    const fs::path file = entry.parent_path() / ("." + entry.filename().string() + ".lock");
    std::string why;
    fd = run::open_own_file(file, O_RDWR | O_CREAT, 0600, why);
    if (fd < 0) {
      if (errno == EPERM || errno == ELOOP) fail("model file " + what + ": the cache's lock " + named(file) + ": " + why);
      return;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return;
    if (errno != EWOULDBLOCK) {  // no locks here (ENOLCK, EINVAL ...)
      ::close(fd);
      fd = -1;
      return;
    }
    if (progress)
      std::cerr << "ukb: another ukb is compiling the model file " << what << "; waiting for it (lock "
                << named(file) << ") ..." << std::endl;
    if (::flock(fd, LOCK_EX) != 0) {
      const int err = errno;
      ::close(fd);
      fd = -1;
      // EINTR: SIGINT or SIGTERM (ukb run's handlers) while waiting.
      fail("model file " + what + ": " + (err == EINTR ? "interrupted" : std::strerror(err)) +
           " while waiting for another ukb that compiles it (lock " + named(file) + ")");
    }
  }
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;
  ~EntryLock() {
    if (fd >= 0) ::close(fd);
  }
};

// ---------------------------------------------------------------- compiling

struct Ran {
  int code = -1;
  std::string output;  // stdout and stderr
};

Ran run_command(const std::vector<std::string>& argv, const fs::path& log) {
  const bool verbose = std::getenv("UKB_VERBOSE_COMPILE") != nullptr;
  if (verbose) {
    std::cerr << "ukb: running:";
    for (const std::string& a : argv) std::cerr << ' ' << a;
    std::cerr << '\n';
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // The compiler with SIGPIPE at its default (`ukb` ignores it, to report
  // a closed standard output as a write error).
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t dflt;
  sigemptyset(&dflt);
  sigaddset(&dflt, SIGPIPE);
  posix_spawnattr_setsigdefault(&at, &dflt);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, args[0], &fa, &at, args.data(), environ);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) fail("cannot run the compiler '" + argv[0] + "': " + std::strerror(err));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  Ran r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.output = read_file(log).value_or("");
  if (verbose) std::cerr << r.output;
  return r;
}

// The compiler's messages that matter to the author of the model file: each
// error at the user's own file:line (an error inside ukb's headers is shown
// at the line of the user's file that led there: "required from here", "in
// expansion of macro", nvcc's "detected during ... at line N of FILE"), with
// that line of the file; the requirement text of a failed static_assert.
std::string user_messages(const std::string& log, const fs::path& header, const fs::path& build) {
  const fs::path dir = header.parent_path();
  auto is_user = [&](const std::string& f) {
    const fs::path p = fs::path(f).lexically_normal();
    const std::string s = p.string();
    return !f.empty() && s.rfind(build.string(), 0) != 0 && s.rfind("/usr/", 0) != 0 &&
           std::none_of(toolchain().includes.begin(), toolchain().includes.end(),
                        [&](const std::string& inc) { return s.rfind(inc, 0) == 0; }) &&
           (p.is_absolute() || f.find('/') == std::string::npos || s.rfind(dir.string(), 0) == 0);
  };
  static const std::regex gcc(R"(^(.+?):(\d+):(?:(\d+):)? (fatal error|error|warning|note): (.*)$)");
  static const std::regex gcc_from(R"(^(.+?):(\d+):(\d+):\s+required from( here)?)");
  static const std::regex nvcc_err(R"(^(.+?)\((\d+)\): (error|warning)(?: #[0-9A-Za-z-]+)?: (.*)$)");
  static const std::regex nvcc_at(R"(at line (\d+) of (.+)$)");
  std::vector<std::string> lines;
  {
    std::istringstream s(log);
    for (std::string l; std::getline(s, l);) lines.push_back(l);
  }
  struct Diag {
    std::string file, line, col, msg;
  };
  std::vector<Diag> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    Diag d;
    bool nv = false;
    if (std::regex_match(lines[i], m, gcc) && (m[4] == "error" || m[4] == "fatal error")) {
      d = {m[1], m[2], m[3], std::string(m[4]) + ": " + std::string(m[5])};
    } else if (std::regex_match(lines[i], m, nvcc_err) && m[3] == "error") {
      d = {m[1], m[2], "", "error: " + std::string(m[4])};
      nv = true;
    } else {
      continue;
    }
    if (!is_user(d.file)) {
      // Where the user's file led there: backwards to the previous error for
      // "required from", forwards to the next one for macro expansions and
      // nvcc's instantiation context.
      std::optional<Diag> at;
      for (std::size_t k = i; k-- > 0 && !at;) {
        std::smatch c;
        if (std::regex_match(lines[k], c, gcc) && (c[4] == "error" || c[4] == "fatal error")) break;
        if (std::regex_search(lines[k], c, gcc_from) && is_user(c[1])) at = Diag{c[1], c[2], c[3], ""};
      }
      for (std::size_t k = i + 1; k < lines.size() && !at; ++k) {
        std::smatch c;
        if (std::regex_match(lines[k], c, gcc) && c[4] != "note") break;
        if (std::regex_match(lines[k], c, nvcc_err)) break;
        if (std::regex_match(lines[k], c, gcc) && is_user(c[1])) at = Diag{c[1], c[2], c[3], ""};
        if (nv && std::regex_search(lines[k], c, nvcc_at) && is_user(c[2])) at = Diag{c[2], c[1], "", ""};
      }
      if (at) d.file = at->file, d.line = at->line, d.col = at->col;
    }
    out.push_back(d);
  }
  // The closing static_assert of UKB_MODEL repeats what an earlier one said.
  if (out.size() > 1)
    out.erase(std::remove_if(out.begin(), out.end(),
                             [](const Diag& d) { return d.msg.find("see the requirement above") != std::string::npos; }),
              out.end());
  std::string text;
  std::vector<std::string> seen;
  int shown = 0;
  std::map<std::string, std::vector<std::string>> sources;
  for (const Diag& d : out) {
    std::string head = d.file + ":" + d.line + (d.col.empty() ? "" : ":" + d.col) + ": " + d.msg;
    if (std::find(seen.begin(), seen.end(), head) != seen.end()) continue;
    seen.push_back(head);
    if (++shown > 10) {
      text += "(more errors: UKB_VERBOSE_COMPILE=1 shows the compiler's whole output)\n";
      break;
    }
    text += printable(head, 2000) + "\n";
    if (is_user(d.file)) {
      auto& src = sources[d.file];
      if (src.empty()) {
        std::istringstream s(read_file(d.file).value_or(""));
        for (std::string l; std::getline(s, l);) src.push_back(l);
      }
      const long n = std::atol(d.line.c_str());
      if (n >= 1 && n <= static_cast<long>(src.size()))
        text += "  " + std::to_string(n) + " | " + printable(src[n - 1], 200) + "\n";
    }
  }
  if (out.empty()) {  // no message in a known form (a linker error, a crash): the output's end
    const std::size_t from = lines.size() > 30 ? lines.size() - 30 : 0;
    for (std::size_t k = from; k < lines.size(); ++k) text += printable(lines[k], 2000) + "\n";
  }
  return text;
}

void compile(const std::vector<std::string>& argv, const fs::path& header, const fs::path& build,
             const std::string& what) {
  const Ran r = run_command(argv, build / "compiler.log");
  if (r.code == 0) return;
  fail("model file " + named(header) + " " + what + ":\n" + user_messages(r.output, header, build) +
       "(UKB_VERBOSE_COMPILE=1 shows the compiler's commands and whole output)");
}

// The files a compiler read, from its make-style dependency file.
std::vector<std::string> read_depfile(const fs::path& d) {
  std::string s = read_file(d).value_or("");
  std::vector<std::string> files;
  std::string cur;
  bool target = true;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\\' && i + 1 < s.size() && (s[i + 1] == '\n' || s[i + 1] == '\r')) {
      ++i;
      continue;
    }
    if (c == '\\' && i + 1 < s.size() && s[i + 1] == ' ') {
      cur += ' ';
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (!cur.empty()) {
        if (target && cur.back() == ':') target = false;
        else if (!target) files.push_back(cur);
        cur.clear();
      }
      if (c == '\n') target = true;
      continue;
    }
    cur += c;
  }
  if (!cur.empty() && !target) files.push_back(cur);
  return files;
}

// ---------------------------------------------------------------- the manifest

struct Manifest {
  std::string key, abi, so_hash;
  std::vector<std::pair<std::string, std::string>> deps;  // hash, path
};

std::optional<Manifest> read_manifest(const fs::path& file) {
  const std::optional<std::string> text = read_file(file);
  if (!text) return std::nullopt;
  std::istringstream s(*text);
  std::string line;
  if (!std::getline(s, line) || line != "ukb-plugin-manifest 1") return std::nullopt;
  Manifest m;
  while (std::getline(s, line)) {
    const std::size_t sp = line.find(' ');
    if (sp == std::string::npos) return std::nullopt;
    const std::string k = line.substr(0, sp), v = line.substr(sp + 1);
    if (k == "key") m.key = v;
    else if (k == "abi") m.abi = v;
    else if (k == "so") m.so_hash = v;
    else if (k == "dep" && v.size() > 17) m.deps.emplace_back(v.substr(0, 16), v.substr(17));
    else return std::nullopt;
  }
  if (m.key.empty() || m.so_hash.empty() || m.deps.empty()) return std::nullopt;
  return m;
}

// Why the entry cannot be used ("" if it can): missing, damaged, foreign,
// or built from files that have changed since.
std::string stale(const fs::path& entry, const std::string& key) {
  std::error_code ec;
  if (!fs::exists(entry, ec)) return "missing";
  const std::optional<Manifest> m = read_manifest(entry / "manifest");
  if (!m) return "its manifest is missing or damaged";
  if (m->key != key || m->abi != toolchain().abi) return "it was built for another file, ukb or toolchain";
  if (hash_file(entry / "plugin.so") != m->so_hash) return "plugin.so is missing or damaged (checksum)";
  for (const auto& [hash, path] : m->deps)
    if (hash_file(path) != hash) return "'" + printable(path, 300) + "' has changed";
  return "";
}

std::string content_hash(const fs::path& entry) {
  Hash h;
  if (const std::optional<Manifest> m = read_manifest(entry / "manifest"))
    for (const auto& [hash, path] : m->deps) h.add(hash).add(path);
  return h.hex();
}

// ---------------------------------------------------------------- building

std::vector<std::string> concat(std::initializer_list<std::vector<std::string>> parts) {
  std::vector<std::string> v;
  for (const auto& p : parts) v.insert(v.end(), p.begin(), p.end());
  return v;
}

std::string include_line(const fs::path& header) {
  std::string s = header.string();
  std::string esc;
  for (char c : s) {
    if (c == '"' || c == '\\' || c == '\n') fail("model file " + named(header) + ": its path has a '\"', '\\' or newline, "
                                                 "which an #include cannot name; rename it");
    esc += c;
  }
  return "#include \"" + esc + "\"\n";
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  f.close();
  if (!f) fail("cannot write " + named(p) + " in the plugin cache: " + std::strerror(errno));
}

// The build's nvcc flags for the device check, which writes one PTX file:
// nvcc refuses -ptx for several architectures, so the architecture flags
// (--generate-code=..., -arch=...) give way to the PTX of the first
// architecture that names one (nvcc's default where none does: native,
// all, all-major).
std::vector<std::string> ptx_check_flags(const std::vector<std::string>& flags) {
  static const std::regex virt(R"(^--generate-code=arch=(compute_[0-9]+[a-z]?),)");
  std::vector<std::string> out;
  std::string arch;
  std::smatch m;
  for (const std::string& f : flags) {
    if (f.rfind("--generate-code=", 0) == 0 || f.rfind("-arch=", 0) == 0) {
      if (arch.empty() && std::regex_search(f, m, virt)) arch = "-arch=" + m.str(1);
      continue;
    }
    out.push_back(f);
  }
  if (!arch.empty()) out.push_back(arch);
  return out;
}

// Compiles the plugin of `header` into build/plugin.so and writes the manifest.
void build_plugin(const fs::path& header, bool cuda, const std::string& key, const fs::path& build) {
  const Toolchain& tc = toolchain();
  const std::vector<std::string> diag = {"-fdiagnostics-color=never", "-fmax-errors=20"};
  std::vector<std::string> incs;
  for (const std::string& i : tc.includes) incs.push_back("-I" + i);

  // 1. check
  write_text(build / "check.cpp",
             "// ukb: the check of a model file (src/run/model_file.cpp)\n"
             "#define UKB_MODEL_EXTRA_(...) template void ukb::detail::touch_model<UKB_MODEL_TYPE(__VA_ARGS__)>();\n"
             "#include \"ukb/model.hpp\"\n" + include_line(header));
  compile(concat({{tc.cxx}, tc.cxx_flags, incs, diag, {"-fsyntax-only", (build / "check.cpp").string()}}), header,
          build, "does not compile");
  if (cuda) {
    write_text(build / "check.cu",
               "// ukb: the device check of a model file (src/run/model_file.cpp)\n"
               "#define UKB_MODEL_EXTRA_(...) __global__ void UKB_DEVICE_CHECK_(__COUNTER__)() "
               "{ ukb::detail::touch_model<UKB_MODEL_TYPE(__VA_ARGS__)>(); }\n"
               "#define UKB_DEVICE_CHECK2_(k) ukb_device_check_##k\n"
               "#define UKB_DEVICE_CHECK_(k) UKB_DEVICE_CHECK2_(k)\n"
               "#include \"ukb/model.hpp\"\n" + include_line(header));
    compile(concat({{tc.nvcc}, ptx_check_flags(tc.cuda_flags), incs, {"-Werror", "all-warnings", "-ptx", "-o",
                                                     (build / "check.ptx").string(), (build / "check.cu").string()}}),
            header, build, "does not compile for the cuda backend (nvcc, device code)");
    const std::string ptx = read_file(build / "check.ptx").value_or("");
    static const std::regex alloc(R"(\b(malloc|free|vprintf|__cxa_\w+)\b)");
    std::smatch m;
    if (std::regex_search(ptx, m, alloc))
      fail("model file " + named(header) + " does not suit the cuda backend: its device code calls '" + m.str(1) +
           "' (" + (m.str(1) == "vprintf" ? "printf" : "memory allocation: new, std::vector, std::string") +
           "); model functions allocate nothing and print nothing (fixed-size local arrays; model.hpp)");
  }

  // 2. build
  const std::vector<std::string> plugin_defs = {"-fPIC", "-fvisibility=hidden", "-DUKB_PLUGIN_ABI=\"" + tc.abi + "\""};
  write_text(build / "plugin.cpp",
             std::string("// ukb: the plugin of a model file (src/run/model_file.cpp)\n") +
                 (cuda ? "#define UKB_PLUGIN_CUDA 1\n" : "") + "#include \"ukb/plugin/host.hpp\"\n" +
                 include_line(header));
  compile(concat({{tc.cxx}, tc.cxx_flags, plugin_defs, incs, diag,
                  {"-MD", "-MF", (build / "plugin.d").string(), "-c", (build / "plugin.cpp").string(), "-o",
                   (build / "plugin.o").string()}}),
          header, build, "does not compile");
  std::vector<std::string> objects = {(build / "plugin.o").string()};
  std::vector<std::string> deps = read_depfile(build / "plugin.d");
  if (cuda) {
    write_text(build / "cuda.cu", "// ukb: the cuda backend of a model file (src/run/model_file.cpp)\n"
                                  "#include \"ukb/cuda/plugin.cuh\"\n" + include_line(header));
    compile(concat({{tc.nvcc}, tc.cuda_flags, {"-Xcompiler=-fPIC,-fvisibility=hidden"}, incs,
                    {"-MD", "-MF", (build / "cuda.d").string(), "-c", (build / "cuda.cu").string(), "-o",
                     (build / "cuda.o").string()}}),
            header, build, "does not compile for the cuda backend (nvcc)");
    objects.push_back((build / "cuda.o").string());
    for (const std::string& d : read_depfile(build / "cuda.d")) deps.push_back(d);
  }
  compile(concat({{tc.cxx}, tc.link_flags, {"-shared", "-o", (build / "plugin.so").string()}, objects, tc.link,
                  cuda ? tc.cuda_link : std::vector<std::string>{}}),
          header, build, "compiled, but its plugin does not link");

  // The manifest: every file read but the generated ones.
  std::ostringstream m;
  m << "ukb-plugin-manifest 1\nkey " << key << "\nabi " << tc.abi << "\nso "
    << hash_file(build / "plugin.so").value_or("?") << '\n';
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  for (const std::string& d : deps) {
    std::error_code ec;
    const fs::path p = fs::weakly_canonical(fs::absolute(build / d), ec);
    if (ec || p.string().rfind(build.string(), 0) == 0) continue;
    if (const std::optional<std::string> h = hash_file(p)) m << "dep " << *h << ' ' << p.string() << '\n';
  }
  write_text(build / "manifest", m.str());
  for (const char* f : {"check.cpp", "check.cu", "check.ptx", "plugin.cpp", "plugin.o", "plugin.d", "cuda.cu",
                        "cuda.o", "cuda.d", "compiler.log"}) {
    std::error_code ec;
    fs::remove(build / f, ec);
  }
}

// Moves a finished build into place; another process may have done the
// same meanwhile (then its entry, if good, is kept) or left a stale one.
void publish(const fs::path& build, const fs::path& entry, const std::string& key) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (::rename(build.c_str(), entry.c_str()) == 0) return;
    if (errno != EEXIST && errno != ENOTEMPTY)
      fail("cannot move the plugin into the cache " + named(entry) + ": " + std::strerror(errno));
    if (stale(entry, key).empty()) return;  // a concurrent build won
    const fs::path old = entry.string() + ".old-" + std::to_string(::getpid()) + "-" + std::to_string(attempt);
    if (::rename(entry.c_str(), old.c_str()) == 0) {
      std::error_code ec;
      fs::remove_all(old, ec);
    }
  }
  fail("cannot move the plugin into the cache " + named(entry) + ": another process keeps replacing it");
}

// ---------------------------------------------------------------- loading

std::string load_error;

// The models of a plugin, or nullopt (load_error says why).
std::optional<ModelFile> load_plugin(const fs::path& so) {
  void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    load_error = ::dlerror();
    return std::nullopt;
  }
  auto abi = reinterpret_cast<ukb_plugin_abi_v1_fn>(::dlsym(h, "ukb_plugin_abi_v1"));
  auto models = reinterpret_cast<ukb_plugin_models_v1_fn>(::dlsym(h, "ukb_plugin_models_v1"));
  if (!abi || !models || std::strcmp(abi(), toolchain().abi.c_str()) != 0) {
    load_error = abi ? "built for '" + printable(abi(), 200) + "', not '" + toolchain().abi + "'" : "not a ukb plugin";
    ::dlclose(h);
    return std::nullopt;
  }
  // Kept loaded for the life of the process: the registry entries point into it.
  const ukb_plugin_table_v1* t = models();
  ModelFile f;
  for (int i = 0; i < t->count; ++i) {
    f.ids.emplace_back(t->ids[i]);
    f.models.push_back(&t->models[i]);
  }
  return f;
}

std::string stem_of(const fs::path& p) {
  std::string s = p.stem().string();
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '_';
  return s.substr(0, 40);
}

}  // namespace

bool is_model_file(std::string_view name) {
  return name.find('/') != std::string_view::npos || name.find('.') != std::string_view::npos;
}

std::pair<std::string, std::string> split_model_spec(const std::string& spec) {
  std::error_code ec;
  if (fs::exists(spec, ec)) return {spec, ""};
  const std::size_t slash = spec.rfind('/');
  const std::size_t colon = spec.find(':', slash == std::string::npos ? 0 : slash);
  if (colon == std::string::npos) return {spec, ""};
  return {spec.substr(0, colon), spec.substr(colon + 1)};
}

const ModelFile& open_model_file(const std::string& path_text, const ModelFileOptions& o) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<ModelFile>> loaded;
  const std::lock_guard<std::mutex> lock(mutex);
  const fs::path path = model_path(path_text);
  const std::string memo = path.string() + (o.cuda ? "\ncuda" : "\nhost");
  if (auto it = loaded.find(memo); it != loaded.end()) return *it->second;

  const std::string text = read_model_file(path);
  const std::vector<std::string> ids = scan_models(text);
  if (ids.empty())
    fail("model file " + named(path_text) + ": defines no model: name each model with a line `UKB_MODEL(Name)` "
         "after it, at global scope (docs/adding-a-model.md)");
  const Toolchain& tc = toolchain();
  if (o.cuda && tc.nvcc.empty()) fail("model file " + named(path_text) + ": this ukb was built without CUDA: "
                                      "its models run on the reference and cpu backends");

  const std::string key = Hash{}
                              .add("ukb-plugin-2")
                              .add(tc.abi)
                              .add(tc.text)
                              .add(path.string())
                              .add(text)
                              .add(o.cuda ? "variant=cuda" : "variant=host")
                              .add("scalar=double")
                              .hex();
  const fs::path root = cache_root();
  const fs::path entry = root / (stem_of(path) + "-" + key + (o.cuda ? "-cuda" : ""));
  std::string why = stale(entry, key);
  bool compiled = false;
  std::optional<ModelFile> f;
  if (why.empty()) f = load_plugin(entry / "plugin.so");
  std::optional<EntryLock> entry_lock;  // held until the entry is built and loaded
  if (!f) {
    // Another process may be building this entry: its lock, then a second look.
    entry_lock.emplace(entry, named(path_text), o.progress);
    why = stale(entry, key);
    if (why.empty()) f = load_plugin(entry / "plugin.so");
  }
  if (!f) {
    if (o.progress) {
      std::cerr << "ukb: compiling the model file " << named(path_text) << " into a plugin"
                << (o.cuda ? " with the cuda backend (g++ and nvcc)" : "") << " ("
                << (why == "missing" ? "first use" : why.empty() ? "the cached one does not load: " + load_error
                                                                 : "the cached one is stale: " + why)
                << "; cached in " << root.string() << ") ..." << std::endl;
    }
    const auto start = Clock::now();
    {
      TempDir build(root);
      build_plugin(path, o.cuda, key, build.path);
      publish(build.path, entry, key);
    }
    f = load_plugin(entry / "plugin.so");
    if (!f) fail("model file " + named(path_text) + ": its freshly compiled plugin does not load: " + load_error);
    compiled = true;
    if (o.progress)
      std::cerr << "ukb: compiled " << named(path_text) << " in "
                << std::chrono::duration<double>(Clock::now() - start).count() << " s\n";
  }
  f->path = path.string();
  f->plugin = (entry / "plugin.so").string();
  f->content_hash = content_hash(entry);
  f->compiled = compiled;
  if (f->models.empty()) fail("model file " + named(path_text) + ": its plugin has no model");
  return *(loaded[memo] = std::make_unique<ModelFile>(std::move(*f)));
}

const ModelInfo& load_model_file(const std::string& spec, const ModelFileOptions& o) {
  const auto [path, choice] = split_model_spec(spec);
  // Several models and no choice: said before anything is compiled.
  const std::vector<std::string> ids = scan_models(read_model_file(model_path(path)));
  auto names = [&] {
    std::string s;
    for (const std::string& i : ids) s += (s.empty() ? "" : ", ") + i;
    return s;
  };
  if (choice.empty() && ids.size() > 1)
    fail("model file " + named(path) + ": defines " + std::to_string(ids.size()) + " models (" + names() +
         "); name one: '" + printable(path, 300) + ":" + ids.front() + "'");
  const ModelFile& f = open_model_file(path, o);
  // Names that would break the outputs: refused before the model is used.
  // (clang 14 cannot capture a structured binding: the path is passed in.)
  auto checked = [](const ModelInfo& m, const std::string& file) -> const ModelInfo& {
    if (const std::string why = name_problems(m); !why.empty())
      fail("model file " + named(file) + ": model '" + printable(m.name, 80) + "': " + why);
    return m;
  };
  if (choice.empty()) return checked(*f.models.front(), path);
  for (std::size_t i = 0; i < f.ids.size(); ++i)
    if (f.ids[i] == choice || f.models[i]->name == choice) return checked(*f.models[i], path);
  std::vector<std::string> candidates = f.ids;
  for (const ModelInfo* m : f.models) candidates.push_back(m->name);
  const std::string near = closest_match(choice, candidates);
  fail("model file " + named(path) + ": no model '" + printable(choice, 80) + "'" +
       (near.empty() ? "" : " (did you mean '" + near + "'?)") + "; it defines " + names());
}

}  // namespace ukb
