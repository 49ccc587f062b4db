// Hostile but realistic use of `ukb` (issue 25), by class: two runs on one
// output directory, write errors (a full standard output, a full disk, a
// directory where a file goes), planted symbolic links, memory limits and
// oversized input, names that would drive the terminal, discrete quantities,
// and the smaller misleading messages. Real processes where the class is
// about processes (the lock, rlimits, /dev/full); the file-system layer
// (files.hpp) directly where the attack needs this process's pid.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.hpp"
#include "files.hpp"
#include "ukb/run.hpp"


namespace {

namespace fs = std::filesystem;
using ukb::test::CliRun;
using ukb::test::run_cli;
using ukb::test::slurp;
using ukb::test::unique_path;
using ukb::test::sanitized;

std::string ring_config(long samples, const std::string& seed = "7", const std::string& extra = "") {
  return "model = \"bead_on_ring\"\nsamples = " + std::to_string(samples) + "\nseed = " + seed +
         "\nthreads = 1\n" + extra + "[integrator]\ndt = 0.01\nt_end = 60.0\nchunk = 40\n"
         "[params]\nmu = { dist = \"uniform\", min = 0.05, max = 0.5 }\n[initial]\ntheta = 0.0\nomega = 0.0\n"
         "[output]\ncheckpoint_interval = 0.0\n";
}

std::string write_config(const std::string& leaf, const std::string& text) {
  const std::string p = unique_path(leaf);
  std::ofstream(p) << text;
  return p;
}

// Files in dir whose names end in ".tmp" (left-over temporaries).
std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> t;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.size() >= 4 && n.compare(n.size() - 4, 4, ".tmp") == 0) t.push_back(n);
  }
  return t;
}

// A child process of the CLI: stdout to `out` (a file or /dev/full),
// stderr captured; `limit` applied with setrlimit before exec (SIGXFSZ
// ignored, so that a write beyond RLIMIT_FSIZE fails with EFBIG as on a
// full disk).
struct Child {
  pid_t pid = -1;
  std::string err_file;
};

Child spawn(const std::vector<std::string>& args, const std::string& out = "/dev/null", int resource = -1,
            rlim_t limit = 0) {
  Child c;
  c.err_file = unique_path("child_err_" + std::to_string(std::rand()) + ".txt");
  std::vector<std::string> a = {UKB_CLI_PATH};
  a.insert(a.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int ofd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int efd = ::open(c.err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  c.pid = ::fork();
  if (c.pid == 0) {
    ::dup2(ofd, 1);
    ::dup2(efd, 2);
    ::signal(SIGXFSZ, SIG_IGN);
    if (resource >= 0) {
      struct rlimit r {limit, limit};
      ::setrlimit(resource, &r);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(ofd);
  ::close(efd);
  return c;
}

CliRun finish(const Child& c) {
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, "", slurp(c.err_file)};
}

CliRun run_child(const std::vector<std::string>& args, const std::string& out = "/dev/null", int resource = -1,
                 rlim_t limit = 0) {
  return finish(spawn(args, out, resource, limit));
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---- 1. two runs, one output directory ---------------------------------------

// A second `ukb run` into a directory a live run holds, and a --resume of
// it, are refused with exit 2 naming the holder's pid; the holder's run is
// untouched (its results equal a run alone), and the lock goes with it.
TEST(Hostile, AnOutputDirectoryBelongsToOneRunAtATime) {
  const long samples = sanitized ? 800 : 3000;  // about 1 s (the sanitizers run 10x slower)
  const std::string cfg_a = write_config("a.toml", ring_config(samples, "7"));
  const std::string cfg_b = write_config("b.toml", ring_config(samples, "8"));
  const std::string alone = unique_path("alone"), shared = unique_path("shared");
  fs::remove_all(alone);
  fs::remove_all(shared);
  ASSERT_EQ(run_cli("run " + cfg_a + " --out " + alone + " --quiet").code, 0);

  const Child a = spawn({"run", cfg_a, "--out", shared, "--quiet"});
  // Until the holder has its lock and a first checkpoint (it is running).
  int status = 0;
  bool ended = false;
  while (!(fs::exists(fs::path(shared) / "checkpoint.ukb") && fs::exists(fs::path(shared) / ".ukb.lock")) && !ended) {
    ended = waitpid(a.pid, &status, WNOHANG) == a.pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_FALSE(ended) << "guard: the first run is still running";
  const CliRun b = run_cli("run " + cfg_b + " --out " + shared + " --quiet");
  const CliRun r = run_cli("run --resume " + shared + " --quiet");
  const bool still = waitpid(a.pid, &status, WNOHANG) == 0;
  EXPECT_EQ(b.code, 2) << b.err;
  EXPECT_TRUE(contains(b.err, "in use by another ukb run (pid " + std::to_string(a.pid) + ")")) << b.err;
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "(pid " + std::to_string(a.pid) + ")")) << r.err;
  if (still) {
    ASSERT_EQ(waitpid(a.pid, &status, 0), a.pid);
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(a.err_file);
  EXPECT_EQ(slurp(fs::path(shared) / "results.csv"), slurp(fs::path(alone) / "results.csv"));
  EXPECT_FALSE(fs::exists(fs::path(shared) / ".ukb.lock")) << "the lock goes with its run";
  EXPECT_TRUE(temporaries(shared).empty());
  EXPECT_TRUE(still) << "guard: the refusals came while the first run was alive";
}

// The lock itself, in this process: a second lock on the directory is
// refused with this pid; after release the directory can be locked again.
TEST(Hostile, DirLockNamesItsHolderAndIsReleased) {
  const fs::path dir = unique_path("lockdir");
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    ukb::run::DirLock first(dir, "--out");
    EXPECT_EQ(slurp(dir / ".ukb.lock"), std::to_string(getpid()) + "\n");
    // flock locks belong to the open file: a second open in this process conflicts too.
    try {
      ukb::run::DirLock second(dir, "--out");
      ADD_FAILURE() << "a second lock was granted";
    } catch (const ukb::run::ConfigError& e) {
      EXPECT_TRUE(contains(e.what(), "(pid " + std::to_string(getpid()) + ")")) << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(dir / ".ukb.lock"));
  EXPECT_NO_THROW(ukb::run::DirLock again(dir, "--out"));
}

// ---- 2. write errors on standard output --------------------------------------

TEST(Hostile, AFullStandardOutputFailsWithExitCode4) {
  const std::vector<std::vector<std::string>> cases = {
      {"models"},
      {"models", "--json"},
      {"accel", "--model", "bead_on_ring", "--q", "1,0", "--qd", "0,0"},
      {"trajectory", "--model", "bead_on_ring", "--q", "1,0", "--qd", "0,1", "--dt", "0.01", "--steps", "2000"},
      {"--version"},
      {"--help"},
      {"run", "--help"},
  };
  for (const auto& args : cases) {
    SCOPED_TRACE(args[0]);
    const CliRun r = run_child(args, "/dev/full");
    EXPECT_EQ(r.code, 4) << r.err;
    EXPECT_TRUE(contains(r.err, "writing to standard output failed (No space left on device)")) << r.err;
    // The same command to a file succeeds: the failure is the output's.
    EXPECT_EQ(run_child(args, unique_path("stdout.txt")).code, 0);
  }
  // `ukb run` writes its outputs, then cannot say so.
  const std::string cfg = write_config("r.toml", ring_config(20));
  const std::string dir = unique_path("out");
  fs::remove_all(dir);
  const CliRun r = run_child({"run", cfg, "--out", dir, "--quiet"}, "/dev/full");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_TRUE(contains(r.err, "the run is complete, its outputs are in " + dir)) << r.err;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "results.csv"));
}

// `ukb trajectory ... | head -c 16`: the reader goes after 16 bytes; the
// next write fails with EPIPE (SIGPIPE is ignored), exit 4 with the cause,
// not a silent death by the signal.
TEST(Hostile, AClosedPipeOnStandardOutputFailsWithExitCode4) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  const Child c = spawn({"trajectory", "--model", "bead_on_ring", "--q", "1,0", "--qd", "0,1", "--dt", "0.001",
                         "--steps", "200000"},
                        "/proc/self/fd/" + std::to_string(p[1]));
  ::close(p[1]);
  char buf[16];
  EXPECT_EQ(::read(p[0], buf, sizeof buf), static_cast<ssize_t>(sizeof buf));
  ::close(p[0]);
  const CliRun r = finish(c);
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_TRUE(contains(r.err, "writing to standard output failed (Broken pipe)")) << r.err;
}

// ---- 3. a full disk; a directory where a file goes ---------------------------

// A full disk (RLIMIT_FSIZE: a write beyond it fails with EFBIG as one to a
// full disk fails with ENOSPC) while the outputs are written: exit 4, the
// file and the cause named, no temporary left, and the results kept in the
// checkpoint written before the outputs: --resume writes them, byte for byte
// those of an unhindered run.
TEST(Hostile, AFullDiskWhileWritingOutputsLosesNothing) {
  const std::string cfg = write_config("r.toml", ring_config(400));
  const std::string whole = unique_path("whole"), dir = unique_path("full");
  fs::remove_all(whole);
  fs::remove_all(dir);
  ASSERT_EQ(run_cli("run " + cfg + " --out " + whole + " --quiet").code, 0);
  const std::uintmax_t npy = fs::file_size(fs::path(whole) / "results.npy"),
                       csv = fs::file_size(fs::path(whole) / "results.csv");
  // The checkpoint (8 bytes a cell, 4 a status, the config) fits; the CSV
  // (17 digits a cell) does not.
  const rlim_t limit = static_cast<rlim_t>(npy + npy / 3);
  ASSERT_LT(limit, csv) << "guard: the limit falls between the checkpoint and the CSV";
  const CliRun r = run_child({"run", cfg, "--out", dir, "--quiet"}, "/dev/null", RLIMIT_FSIZE, limit);
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_TRUE(contains(r.err, "results.csv")) << r.err;
  EXPECT_TRUE(contains(r.err, "File too large")) << r.err;
  EXPECT_TRUE(contains(r.err, "continue with `ukb run --resume " + dir + "`")) << r.err;
  EXPECT_TRUE(temporaries(dir).empty());
  EXPECT_FALSE(fs::exists(fs::path(dir) / "results.csv"));
  ASSERT_TRUE(fs::exists(fs::path(dir) / "checkpoint.ukb"));
  const CliRun again = run_cli("run --resume " + dir + " --quiet");
  EXPECT_EQ(again.code, 0) << again.err;
  for (const char* f : {"results.csv", "results.npy", "summary.json"})
    EXPECT_EQ(slurp(fs::path(dir) / f), slurp(fs::path(whole) / f)) << f;

  // A checkpoint interval longer than the run: no checkpoint before the
  // outputs (the run's work is within what the interval may lose), but the
  // failure of the outputs writes it, and --resume finishes the same.
  std::string lazy = ring_config(400);
  const std::string::size_type at = lazy.find("checkpoint_interval = 0.0");
  ASSERT_NE(at, std::string::npos);
  lazy.replace(at, 25, "checkpoint_interval = 3600.0");
  const std::string lazy_cfg = write_config("lazy.toml", lazy);
  const std::string lazy_dir = unique_path("lazy");
  fs::remove_all(lazy_dir);
  const CliRun l = run_child({"run", lazy_cfg, "--out", lazy_dir, "--quiet"}, "/dev/null", RLIMIT_FSIZE, limit);
  EXPECT_EQ(l.code, 4) << l.err;
  EXPECT_TRUE(contains(l.err, "results.csv")) << l.err;
  EXPECT_TRUE(contains(l.err, "continue with `ukb run --resume " + lazy_dir + "`")) << l.err;
  ASSERT_TRUE(fs::exists(fs::path(lazy_dir) / "checkpoint.ukb"));
  EXPECT_EQ(run_cli("run --resume " + lazy_dir + " --quiet").code, 0);
  for (const char* f : {"results.csv", "results.npy"})
    EXPECT_EQ(slurp(fs::path(lazy_dir) / f), slurp(fs::path(whole) / f)) << f;
  // Too full for that checkpoint too: the message says both, and that
  // nothing was kept.
  fs::remove_all(lazy_dir);
  const CliRun both = run_child({"run", lazy_cfg, "--out", lazy_dir, "--quiet"}, "/dev/null", RLIMIT_FSIZE, 6000);
  EXPECT_EQ(both.code, 4) << both.err;
  EXPECT_TRUE(contains(both.err, "the checkpoint could not be written either")) << both.err;
  EXPECT_TRUE(contains(both.err, "nothing was kept")) << both.err;
  EXPECT_TRUE(temporaries(lazy_dir).empty());

  // A disk too full for the first checkpoint (40 samples, about 10 kB) as
  // well: nothing kept, said so. (Not smaller: LLVM's OpenMP runtime sizes
  // a shared-memory file of its own at start-up.)
  fs::remove_all(dir);
  const CliRun none = run_child({"run", cfg, "--out", dir, "--quiet"}, "/dev/null", RLIMIT_FSIZE, 6000);
  EXPECT_EQ(none.code, 4) << none.err;
  EXPECT_TRUE(contains(none.err, "checkpoint")) << none.err;
  EXPECT_TRUE(temporaries(dir).empty());
}

// A message over 4 KiB (an output directory of 1.8 kB, named three times
// in a write error) keeps what failed, the cause and what to do: its
// beginning and its end, the middle left out.
TEST(Hostile, AMessageOverFourKilobytesKeepsItsCauseAndWhatToDo) {
  const std::string cfg = write_config("long.toml", ring_config(400));
  const std::string whole = unique_path("long-whole");
  fs::remove_all(whole);
  ASSERT_EQ(run_cli("run " + cfg + " --out " + whole + " --quiet").code, 0);
  const std::uintmax_t npy = fs::file_size(fs::path(whole) / "results.npy");
  fs::path dir = unique_path("long");
  fs::remove_all(dir);
  for (int k = 0; k < 9; ++k) dir /= std::string(200, char('a' + k));
  // The checkpoint fits, results.csv does not (as in the test above).
  const CliRun r = run_child({"run", cfg, "--out", dir.string(), "--quiet"}, "/dev/null", RLIMIT_FSIZE,
                             static_cast<rlim_t>(npy + npy / 3));
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_GT(r.err.size(), 4000u) << r.err;
  EXPECT_TRUE(contains(r.err, "File too large")) << r.err;
  EXPECT_TRUE(contains(r.err, "bytes left out")) << r.err;
  EXPECT_TRUE(contains(r.err, "continue with `ukb run --resume " + dir.string() + "`")) << r.err;
  fs::remove_all(unique_path("long"));
}

// A run of very many steps, or whose trajectories.csv takes gigabytes, says
// so before it starts (here it then stops at once: --out names a file).
TEST(Hostile, AHugeRunOrHugeTrajectoriesAreAnnouncedBeforeTheRun) {
  const std::string file = unique_path("not_a_dir");
  std::ofstream(file) << "x";
  auto ring = [](const std::string& integrator, const std::string& output) {
    return "model = \"bead_on_ring\"\nsamples = 1000\n[integrator]\n" + integrator +
           "\n[initial]\ntheta = 0.0\nomega = 0.0\n[output]\n" + output + "\n";
  };
  struct Case {
    std::string what, text;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      // 1024 s in steps of 2^-20 s: 2^30 steps a sample, 1000 samples.
      {"rk4", ring("dt = 9.5367431640625e-07\nt_end = 1024.0", ""),
       {"up to 1073741824 steps per sample", "1073741824000 system-steps in all"}},
      {"dopri5 with a tiny dt_max", ring("method = \"dopri5\"\ndt_max = 9.5367431640625e-07\nt_end = 1024.0", ""),
       {"at least 1073741824 steps per sample"}},
      // 100000 s every 2^-10 s: 102400000 rows and the first and last, of
      // 10 columns (sample, t, status, x, y, x', y', theta, omega, energy),
      // 24 bytes each, for 2 samples: 49.2 GB.
      {"record_dt", ring("method = \"dopri5\"\nt_end = 100000.0", "record = [0, 1]\nrecord_dt = 0.0009765625"),
       {"trajectories.csv will take about 49.2 GB", "102400002 rows for each of 2 recorded samples"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const CliRun r = run_cli("run " + write_config("huge.toml", c.text) + " --out " + file + " --quiet");
    EXPECT_EQ(r.code, 2) << r.err;
    for (const std::string& w : c.words) EXPECT_TRUE(contains(r.err, w)) << w << "\n" << r.err;
  }
  // An ordinary run says nothing of the kind.
  const CliRun quiet = run_cli("run " + write_config("small.toml", ring("dt = 0.01\nt_end = 1.0", "record = [0]")) +
                               " --out " + file + " --quiet");
  EXPECT_FALSE(contains(quiet.err, "steps per sample")) << quiet.err;
  EXPECT_FALSE(contains(quiet.err, "trajectories.csv will take")) << quiet.err;
  fs::remove(file);
}

// A config (or model file) named like one of the run's outputs, in the
// output directory: refused before any work, the file untouched, whether
// named by its path or from within the directory (`--out .`).
TEST(Hostile, AnInputNamedLikeAnOutputIsNeverOverwritten) {
  const fs::path dir = unique_path("clash");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string text = ring_config(4);
  for (const char* name : {"results.csv", "run.json", "summary.json", "checkpoint.ukb"}) {
    SCOPED_TRACE(name);
    std::ofstream(dir / name) << text;
    for (const std::string& args : {"run " + (dir / name).string() + " --out " + dir.string() + " --quiet",
                                    "--version >/dev/null; cd " + dir.string() + " && " + UKB_CLI_PATH + " run " +
                                        name + " --out . --quiet"}) {
      const CliRun r = run_cli(args);
      EXPECT_EQ(r.code, 2) << args << ": " << r.err;
      EXPECT_TRUE(contains(r.err, std::string("which the run would overwrite with its ") + name)) << r.err;
      EXPECT_EQ(slurp(dir / name), text) << args;
    }
    fs::remove(dir / name);
  }
  fs::remove_all(dir);
}

TEST(Hostile, TrajectoryOutputFailuresLeaveNothingBehind) {
  const std::vector<std::string> traj = {"trajectory", "--model", "bead_on_ring", "--q", "1,0", "--qd", "0,1",
                                         "--dt",       "0.01",    "--steps",      "5000"};
  // An existing directory as --out: refused, the directory untouched.
  const fs::path dir = unique_path("adir");
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> a = traj;
  a.insert(a.end(), {"--out", dir.string()});
  CliRun r = run_child(a);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "is a directory")) << r.err;
  EXPECT_TRUE(fs::is_empty(dir));
  EXPECT_TRUE(temporaries(dir.parent_path()).empty() ||
              std::none_of(temporaries(dir.parent_path()).begin(), temporaries(dir.parent_path()).end(),
                           [&](const std::string& n) { return contains(n, dir.filename().string()); }));
  // A full disk: exit 4 with the cause, no file and no temporary.
  const fs::path where = unique_path("tdir");
  fs::remove_all(where);
  fs::create_directories(where);
  a = traj;
  a.insert(a.end(), {"--out", (where / "t.csv").string()});
  r = run_child(a, "/dev/null", RLIMIT_FSIZE, 4096);
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_TRUE(contains(r.err, "File too large")) << r.err;
  EXPECT_TRUE(fs::is_empty(where)) << "no output and no temporary";
  // A device as --out is written in place, never replaced by a file.
  a = traj;
  a.insert(a.end(), {"--out", "/dev/null"});
  r = run_child(a);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // Unhindered, the file is complete.
  a = traj;
  a.insert(a.end(), {"--out", (where / "t.csv").string()});
  r = run_child(a);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_GT(fs::file_size(where / "t.csv"), 4096u);
  EXPECT_TRUE(temporaries(where).empty());
}

// ---- 4. planted symbolic links -----------------------------------------------

// Links planted at every name a run writes, or wrote in earlier versions,
// pointing at a file of the user's: the file is never written through.
TEST(Hostile, PlantedSymlinksAreNeverFollowed) {
  const fs::path victim = unique_path("victim.txt");
  std::ofstream(victim) << "precious\n";
  const fs::path dir = unique_path("planted");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string me = std::to_string(getpid());
  for (const std::string& n :
       {std::string(".ukb-write-test.tmp"), std::string("checkpoint.ukb.tmp"), std::string("results.csv.tmp"),
        ".results.csv." + me + ".tmp", ".checkpoint.ukb." + me + ".tmp", ".summary.json." + me + ".tmp"})
    fs::create_symlink(victim, dir / n);
  const ukb::run::Config c = ukb::run::parse_config(ring_config(50), "planted.toml");
  EXPECT_NO_THROW(ukb::run::execute(c, {.out_dir = dir.string()}));
  EXPECT_EQ(slurp(victim), "precious\n");
  EXPECT_TRUE(fs::exists(dir / "results.csv"));
  EXPECT_FALSE(fs::is_symlink(dir / "results.csv"));

  // A link at the lock file: refused, not followed.
  const fs::path d2 = unique_path("planted_lock");
  fs::remove_all(d2);
  fs::create_directories(d2);
  fs::create_symlink(victim, d2 / ".ukb.lock");
  try {
    ukb::run::execute(c, {.out_dir = d2.string()});
    ADD_FAILURE() << "a planted lock link was accepted";
  } catch (const ukb::run::ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "is a symbolic link")) << e.what();
  }
  EXPECT_EQ(slurp(victim), "precious\n");
  // A hard link at the lock file: refused, the other file neither truncated
  // nor written.
  fs::remove(d2 / ".ukb.lock");
  fs::create_hard_link(victim, d2 / ".ukb.lock");
  try {
    ukb::run::execute(c, {.out_dir = d2.string()});
    ADD_FAILURE() << "a hard-linked lock file was written through";
  } catch (const ukb::run::ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "2 links")) << e.what();
  }
  EXPECT_EQ(slurp(victim), "precious\n");

  // AtomicFile alone: a link at its first temporary name is stepped over.
  const fs::path target = dir / "t.txt";
  fs::create_symlink(victim, dir / (".t.txt." + me + ".tmp"));
  {
    ukb::run::AtomicFile f(target, "test");
    EXPECT_NE(f.temporary(), dir / (".t.txt." + me + ".tmp"));
    f.stream() << "new\n";
    f.publish();
  }
  EXPECT_EQ(slurp(target), "new\n");
  EXPECT_EQ(slurp(victim), "precious\n");
}

// ---- 5. memory limits and oversized input ------------------------------------

TEST(Hostile, MemoryLimitsAreRespectedAndNamed) {
  if (sanitized) GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: ulimit -v cannot apply";
  // 30 million samples need some GB for the table: refused under a 1 GB
  // address-space limit, with that limit named.
  const std::string cfg = write_config("big.toml", ring_config(30000000));
  const fs::path dir = unique_path("big");
  fs::remove_all(dir);
  const CliRun r = run_child({"run", cfg, "--out", dir.string(), "--quiet"}, "/dev/null", RLIMIT_AS, rlim_t(1) << 30);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "address-space limit (ulimit -v)")) << r.err;
  EXPECT_FALSE(fs::exists(dir)) << "nothing left behind";
  // The API says the same.
  const ukb::run::MemoryLimit m = ukb::run::available_memory();
  EXPECT_GT(m.bytes, 0);
  EXPECT_FALSE(m.what.empty());
}

TEST(Hostile, ThreadsThatCannotBeCreatedAreRefusedBeforeAnyWork) {
  if (sanitized) GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: ulimit -v cannot apply";
  // 1000 threads' stacks under a 1 GB address-space limit: refused with the
  // key, exit 2, nothing left behind (OpenMP had ended the process with
  // exit 1, no outputs and the lock left). Two threads under the same limit run.
  const std::string cfg = write_config("threads.toml", ring_config(50));
  const fs::path dir = unique_path("threads");
  fs::remove_all(dir);
  CliRun r = run_child({"run", cfg, "--out", dir.string(), "--quiet", "--threads", "1000"}, "/dev/null", RLIMIT_AS,
                       rlim_t(1) << 30);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "key 'threads' (or --threads): 1000 threads take")) << r.err;
  EXPECT_TRUE(contains(r.err, "ulimit -v")) << r.err;
  EXPECT_FALSE(fs::exists(dir)) << "nothing left behind";
  r = run_child({"run", cfg, "--out", dir.string(), "--quiet", "--threads", "2"}, "/dev/null", RLIMIT_AS,
                rlim_t(1) << 30);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "results.npy"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / ".ukb.lock"));
}

TEST(Hostile, OversizedOrSpecialConfigFilesAreRefused) {
  CliRun r = run_cli("run /dev/zero --quiet");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "larger than 16 MiB")) << r.err;
  const fs::path dir = unique_path("cfgdir");
  fs::create_directories(dir);
  r = run_cli("run " + dir.string() + " --quiet");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "is a directory")) << r.err;
}

// ---- 6. huge names; names that would drive the terminal ----------------------

TEST(Hostile, HugeAndHostileNamesGiveShortEscapedMessages) {
  const std::string huge(8 << 20, 'x');
  for (const std::string& cfg :
       {"model = \"" + huge + "\"\n", "model = \"bead_on_ring\"\nsamples = 1\n" + huge + " = 1\n",
        std::string("model = \"\\u001b]0;pwned\\u0007\\u001b[2J\"\n")}) {
    const std::string p = write_config("name.toml", cfg);
    const CliRun r = run_cli("run " + p + " --quiet");
    EXPECT_EQ(r.code, 2) << r.err.substr(0, 300);
    EXPECT_LT(r.err.size(), 2000u) << "the name is shortened";
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << "no raw escape";
    EXPECT_EQ(r.err.find('\x07'), std::string::npos) << "no raw bell";
  }
  const CliRun esc = run_cli("run " + write_config("esc.toml", "model = \"\\u001b]0;pwned\\u0007\"\n") + " --quiet");
  EXPECT_TRUE(contains(esc.err, "\\x1b]0;pwned\\x07")) << esc.err;
  // closest_match never computes a distance a length difference rules out.
  EXPECT_EQ(ukb::closest_match(huge, {"bead_on_ring", "incline_block"}), "");
  EXPECT_EQ(ukb::closest_match("bead_on_rign", {"bead_on_ring", "incline_block"}), "bead_on_ring");
  EXPECT_EQ(ukb::printable(std::string("a\x1b\x7f\xc2\x9b" "b")), "a\\x1b\\x7f\\xc2\\x9bb");
  EXPECT_EQ(ukb::printable(std::string(100, 'y'), 10), std::string(10, 'y') + "... (100 bytes)");
}

// ---- 7. discrete quantities ---------------------------------------------------

TEST(Hostile, ASignOrABranchTakesOnlyItsValues) {
  const std::string base = "model = \"two_link_arm\"\nsamples = 4\n[integrator]\ndt = 0.01\nt_end = 0.1\n[initial]\ntheta1 = 0.3\n";
  for (const char* bad : {"elbow = 0.5", "elbow = 0", "elbow = 3", "elbow = { dist = \"uniform\", min = -1, max = 1 }",
                          "elbow = { dist = \"values\", values = [1, 2] }"}) {
    SCOPED_TRACE(bad);
    try {
      ukb::run::parse_config(base + bad + "\n", "arm.toml");
      ADD_FAILURE() << "accepted";
    } catch (const ukb::run::ConfigError& e) {
      EXPECT_TRUE(contains(e.what(), "one of 1, -1")) << e.what();
      EXPECT_TRUE(contains(e.what(), "initial.elbow")) << e.what();
    }
  }
  // The admissible values, and the default, give the two configurations.
  for (const char* good : {"elbow = -1", "elbow = 1", "elbow = { dist = \"values\", values = [1, -1] }", ""}) {
    SCOPED_TRACE(good);
    EXPECT_NO_THROW(ukb::run::parse_config(base + good + "\n", "arm.toml"));
  }
  const ukb::ModelInfo* arm = ukb::find_model("two_link_arm");
  ASSERT_NE(arm, nullptr);
  ASSERT_EQ(arm->initial.size(), 3u);
  EXPECT_EQ(arm->initial[2].choices, (std::vector<double>{1, -1}));
  EXPECT_EQ(arm->initial[2].default_value, 1);
  EXPECT_FALSE(arm->initial[2].admits(0.5));
}

// ---- 8. the smaller ones ------------------------------------------------------

TEST(Hostile, MisleadingMessagesSayWhatIsWrong) {
  const std::string cfg = write_config("r.toml", ring_config(5));
  CliRun r = run_cli("run " + cfg + " --out '' --quiet");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--out: expected a directory name, got an empty string")) << r.err;
  r = run_cli("run " + cfg + " --threads abc --quiet");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--threads: expected an integer in [0, 4096]")) << r.err;
  EXPECT_TRUE(contains(r.err, "'abc'")) << r.err;
  r = run_cli("accel --model bead_on_ring --q --qd 0,1");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--q")) << r.err;
  EXPECT_TRUE(contains(r.err, "expected a value, got the option '--qd'")) << r.err;
  r = run_cli("accel --model bead_on_ring --q 1,0 --qd 0,1 --rank-rtol -1e-30");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "got -1.0000000000000001e-30")) << r.err;
  // A step that cannot advance the time is refused by trajectory as by run.
  r = run_cli("trajectory --model bead_on_ring --q 1,0 --qd 0,1 --dt 1e-320 --t0 1 --steps 3");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "too small to advance the time")) << r.err;
  // A directory where the checkpoint should be.
  const fs::path dir = unique_path("ckdir");
  fs::remove_all(dir);
  fs::create_directories(dir / "checkpoint.ukb");
  r = run_cli("run --resume " + dir.string() + " --quiet");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "is a directory")) << r.err;
  EXPECT_FALSE(contains(r.err, "Success")) << r.err;
}

// A uniform distribution over nearly the whole double range: its span
// overflows, yet the draws spread over it (independent truth: the uniform
// CDF, here the fraction of draws below 0 near 1/2).
TEST(Hostile, AUniformOverTheWholeRangeDrawsAcrossIt) {
  ukb::run::Dist d;
  d.kind = ukb::run::Dist::Kind::uniform;
  d.a = -1.7e308;
  d.b = 1.7e308;
  std::set<double> seen;
  int below = 0;
  for (std::uint64_t i = 0; i < 2000; ++i) {
    const double x = ukb::run::draw(d, 7, i, 0, 0);
    EXPECT_TRUE(x >= d.a && x < d.b) << x;
    seen.insert(x);
    below += x < 0;
  }
  EXPECT_GT(seen.size(), 1990u);
  EXPECT_NEAR(below / 2000.0, 0.5, 0.05);
}

// A bead of mass 1e-200: the motion does not depend on the mass (every
// force scales with it), so its resting angles are those of a bead of mass
// 1; before, the squares of its forces underflowed and every bead stuck at
// theta = 0.
TEST(Hostile, SubnormalInputsAreRefusedWithTheirKey) {
  // A subnormal mass gave wrong accelerations with status ok (the model's
  // arithmetic had lost its digits): refused by accel, by a config (fixed
  // value or a distribution's bound), and where a draw lands there (a
  // lognormal that underflows), with the key and the sample.
  CliRun r = run_cli("accel --model bead_on_ring --param m=5e-324 --q 1,0 --qd 0,0");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(contains(r.err, "--param m: expected a value > 0")) << r.err;
  EXPECT_TRUE(contains(r.err, "subnormal")) << r.err;
  auto cfg = [](const std::string& m) {
    return "model = \"bead_on_ring\"\nsamples = 200\nseed = 3\n[integrator]\ndt = 0.01\nt_end = 0.1\n"
           "[params]\nm = " + m + "\n[initial]\ntheta = 0.0\nomega = 0.0\n";
  };
  for (const std::string& m : {std::string("1e-310"), std::string("{ dist = \"uniform\", min = 1e-320, max = 1.0 }")}) {
    try {
      ukb::run::parse_config(cfg(m), "sub.toml");
      ADD_FAILURE() << m << ": accepted";
    } catch (const ukb::run::ConfigError& e) {
      EXPECT_TRUE(contains(e.what(), "key 'params.m")) << e.what();
      EXPECT_TRUE(contains(e.what(), "subnormal")) << e.what();
    }
  }
  // Draws of exp(N(-700, 10)): most below 1e-304, some subnormal or 0.
  const ukb::run::Config c = ukb::run::parse_config(cfg("{ dist = \"lognormal\", mean_log = -700.0, sd_log = 10.0 }"), "ln.toml");
  const fs::path dir = unique_path("lognormal_under");
  fs::remove_all(dir);
  try {
    ukb::run::execute(c, {.out_dir = dir.string()});
    ADD_FAILURE() << "an underflowing draw was accepted";
  } catch (const ukb::run::ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "key 'params.m': sample ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "not admitted (m must be > 0)")) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir)) << "nothing left behind";
  // The smallest normal mass is admitted.
  EXPECT_NO_THROW(ukb::run::parse_config(cfg("2.2250738585072014e-308"), "min.toml"));
}

TEST(Hostile, ATinyMassMovesAsAnOrdinaryOne) {
  auto finals = [](const std::string& m) {
    const std::string text = "model = \"bead_on_ring\"\nsamples = 16\nseed = 3\n[integrator]\ndt = 0.01\nt_end = 20.0\n"
                             "[params]\nm = " + m + "\nmu = { dist = \"uniform\", min = 0.05, max = 0.5 }\n"
                             "[initial]\ntheta = 0.0\nomega = 0.0\n";
    const fs::path dir = unique_path("m" + m);
    fs::remove_all(dir);
    ukb::run::execute(ukb::run::parse_config(text, "m.toml"), {.out_dir = dir.string()});
    std::ifstream f(dir / "results.csv");
    std::string header, line;
    std::getline(f, header);
    std::vector<std::string> rows;
    while (std::getline(f, line)) rows.push_back(line);
    return std::pair{header, rows};
  };
  const auto [h1, one] = finals("1.0");
  const auto [h2, tiny] = finals("1e-200");
  // Column of theta_final and status.
  auto col = [](const std::string& header, const std::string& name) {
    std::stringstream s(header);
    std::string c;
    for (int k = 0; std::getline(s, c, ','); ++k)
      if (c == name) return k;
    return -1;
  };
  auto cell = [](const std::string& row, int k) {
    std::stringstream s(row);
    std::string c;
    for (int j = 0; j <= k; ++j) std::getline(s, c, ',');
    return c;
  };
  const int th = col(h1, "theta_final"), st = col(h1, "status");
  ASSERT_GE(th, 0);
  ASSERT_EQ(one.size(), tiny.size());
  int moved = 0;
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(cell(one[i], st), cell(tiny[i], st)) << i;
    const double a = std::stod(cell(one[i], th)), b = std::stod(cell(tiny[i], th));
    EXPECT_NEAR(a, b, 1e-9) << i;
    moved += std::abs(b) > 0.1;
  }
  EXPECT_GT(moved, 8) << "guard: the beads slid away from theta = 0";
}

}  // namespace
