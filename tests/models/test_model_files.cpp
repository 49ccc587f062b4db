// Model files (include/ukb/model_file.hpp) through the `ukb` executable: the
// examples of examples/models against closed forms and the reference
// backend, the plugin cache (reuse, edits, damage, concurrency), and bad
// files, each with the user's file:line and the failed requirement.
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "ukb/cuda.hpp"
#include "worst.hpp"

namespace ukb::test {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = UKB_SOURCE_DIR;
const fs::path kModels = kSource / "examples/models";
const fs::path kBad = kSource / "tests/data/model_files";

// A fresh directory for this test.
fs::path fresh_dir(const std::string& leaf) {
  const fs::path d = unique_path(leaf);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string sh(const fs::path& p) { return "'" + p.string() + "'"; }

// `ukb ARGS` with the plugin cache in `cache` (run_cli runs `ukb` with its
// arguments in a shell: a first harmless command, then ours).
// `env`: more variables for ukb, "NAME=VALUE " each.
CliRun ukb_with_cache(const fs::path& cache, const std::string& args, const std::string& env = "") {
  return run_cli("--version >/dev/null; " + env + "UKB_CACHE_DIR=" + sh(cache) + " " + std::string(UKB_CLI_PATH) + " " +
                 args);
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

// The example config with the model file given by its absolute path, fewer
// samples, and the backend.
fs::path example_config(const fs::path& dir, const std::string& name, long samples, const std::string& backend) {
  std::string text = slurp(kModels / (name + ".toml"));
  text = std::regex_replace(text, std::regex(R"(model = "[^"]*")"), "model = \"" + (kModels / (name + ".hpp")).string() + "\"");
  text = std::regex_replace(text, std::regex(R"(samples = \d+)"), "samples = " + std::to_string(samples) +
                                                                     "\nbackend = \"" + backend + "\"");
  const fs::path cfg = dir / (name + "-" + backend + ".toml");
  write(cfg, text);
  return cfg;
}

// One shared cache for the examples (they are compiled once for the suite),
// in the build tree (tests/CMakeLists.txt).
fs::path example_cache() { return UKB_TEST_MODEL_CACHE; }

// "UKB_TOOLCHAIN=PATH ": the build's toolchain record with `level` in place
// of -O1/-O2/-O3/-Os among the C++ compiler's flags (cxx_flags; a record
// without one, as a Debug build's, stays as it is; nvcc's flags stay as
// they are), written to dir/toolchain.json. For the tests of what ukb does
// with a model file (its cache, its refusals, its results against a closed
// form), not of how fast its plugin runs: -O1 compiles the plugins
// fastest (faster than -O0 too). The released flags are checked by
// scripts/test.sh, whose installed `ukb run` compiles
// examples/models/rotating_hoop.hpp with them, and by the spring block's
// test below.
std::string toolchain_at(const fs::path& dir, const char* level) {
  const fs::path record = fs::path(UKB_CLI_PATH).parent_path().parent_path() / "share/ukb/toolchain.json";
  EXPECT_TRUE(fs::exists(record)) << record;
  nlohmann::json j = nlohmann::json::parse(slurp(record));
  for (auto& flag : j.at("cxx_flags"))
    if (std::regex_match(flag.get<std::string>(), std::regex("-O[123s]"))) flag = level;
  write(dir / "toolchain.json", j.dump(2));
  return "UKB_TOOLCHAIN=" + sh(dir / "toolchain.json") + " ";
}

TEST(ModelFiles, SleighRunsOnCpuAndReferenceAsTheClosedFormSays) {
  if (sanitized) GTEST_SKIP() << "compiling a plugin under the sanitizers takes minutes; the main build runs it";
  // The Chaplygin sleigh: m v' = m a w^2, J w' = -m a v w (J = I + m a^2), so
  // m v^2 + J w^2 = 2E stays and v(t) = V tanh(a m V t / J + atanh(v0 / V)),
  // V = sqrt(2E / m): the speed of the knife edge along the heading.
  const fs::path dir = fresh_dir("sleigh");
  const std::string env = toolchain_at(dir, "-O1");  // the results under test, not the speed
  // The reference backend (9 s for 64 samples) runs the first 16: sample i
  // is drawn from (seed, i) alone, the same in either run.
  std::map<std::string, std::vector<std::map<std::string, std::string>>> rows;
  const std::map<std::string, std::size_t> samples = {{"cpu", 64}, {"reference", 16}};
  for (const auto& [be, count] : samples) {
    const CliRun r = ukb_with_cache(example_cache(), "run " + sh(example_config(dir, "sleigh", long(count), be)) +
                                                         " --out " + sh(dir / be) + " --quiet", env);
    ASSERT_EQ(r.code, 0) << r.err;
    rows[be] = read_csv(dir / be / "results.csv");
    ASSERT_EQ(rows[be].size(), count);
  }
  double worst = 0, worst_ref = 0;
  for (std::size_t i = 0; i < 64; ++i) {
    const auto& row = rows["cpu"][i];
    const double m = 1, I = 0.1, a = std::stod(row.at("a")), w0 = std::stod(row.at("qd_theta")), v0 = 1, t = 10;
    const double J = I + m * a * a, V = std::sqrt((m * v0 * v0 + J * w0 * w0) / m);
    const double v = V * std::tanh(a * m * V * t / J + std::atanh(v0 / V));
    const double th = std::stod(row.at("q_theta_final"));
    const double speed = std::cos(th) * std::stod(row.at("qd_x_final")) + std::sin(th) * std::stod(row.at("qd_y_final"));
    worst_of(worst, std::abs(speed - v));
    if (i < rows["reference"].size())
      for (const char* col : {"q_x_final", "q_y_final", "q_theta_final", "qd_x_final", "qd_theta_final"})
        worst_of(worst_ref, std::abs(std::stod(row.at(col)) - std::stod(rows["reference"][i].at(col))));
  }
  EXPECT_LT(worst, 1e-9) << "final speed against the closed form (RK4, dt = 1e-3)";
  EXPECT_LT(worst_ref, 1e-9) << "cpu against the reference backend";
}

TEST(ModelFiles, SpringBlockRestsWhereTheClosedFormSays) {
  if (sanitized) GTEST_SKIP() << "compiling a plugin under the sanitizers takes minutes; the main build runs it";
  // Half swings about x = -+D (D = mu m g / k, the centre opposite to the
  // motion) until a turning point within |x| <= D: there it sticks.
  const fs::path dir = fresh_dir("spring");
  // With the released flags (not toolchain_at): Python.model_file, which
  // ctest runs after this test, finds its plugin in the shared cache instead
  // of compiling it again.
  // The reference backend (11 s for 200 samples) runs the first 40: sample i
  // is drawn from (seed, i) alone, the same in either run.
  std::map<std::string, std::vector<std::map<std::string, std::string>>> rows;
  const std::map<std::string, std::size_t> samples = {{"cpu", 200}, {"reference", 40}};
  for (const auto& [be, count] : samples) {
    const CliRun r = ukb_with_cache(example_cache(), "run " + sh(example_config(dir, "spring_block", long(count), be)) +
                                                         " --out " + sh(dir / be) + " --quiet");
    ASSERT_EQ(r.code, 0) << r.err;
    rows[be] = read_csv(dir / be / "results.csv");
    ASSERT_EQ(rows[be].size(), count);
  }
  const double k = 10, m = 1, g = 9.81, w = std::sqrt(k / m);
  double worst = 0, worst_ref = 0;
  for (std::size_t i = 0; i < 200; ++i) {
    const auto& row = rows["cpu"][i];
    ASSERT_EQ(row.at("status"), "at_rest") << "sample " << i;
    const double D = std::stod(row.at("mu")) * m * g / k;
    const double x0 = 1, v0 = 0.5;
    double c = -D, turn = c + std::hypot(x0 - c, v0 / w);
    while (std::abs(turn) > D) c = turn > 0 ? D : -D, turn = 2 * c - turn;
    worst_of(worst, std::abs(std::stod(row.at("x_final")) - turn));
    // The model's own column (observable_names): the spring's pull -k x at
    // the end, which static friction holds (|k x| <= mu m g), on both
    // backends.
    for (const auto& [be, table] : rows) {
      if (i >= table.size()) continue;
      const double x = std::stod(table[i].at("x_final")), pull = std::stod(table[i].at("spring_force"));
      EXPECT_EQ(pull, -k * x) << be << " sample " << i;
      EXPECT_LE(std::abs(pull), std::stod(table[i].at("mu")) * m * g * (1 + 1e-12)) << be << " sample " << i;
    }
    if (i < rows["reference"].size())
      worst_of(worst_ref, std::abs(std::stod(row.at("x_final")) - std::stod(rows["reference"][i].at("x_final"))));
  }
  EXPECT_LT(worst, 1e-9);
  EXPECT_LT(worst_ref, 1e-9);
  const nlohmann::json sum = nlohmann::json::parse(slurp(dir / "cpu" / "summary.json"));
  EXPECT_EQ(sum["observables"]["spring_force"]["successful"]["count"].get<long>(), 200) << "with its statistics";
}

TEST(ModelFiles, AHandlerThatResumesInPlaceFailsTheSampleNotTheRun) {
  if (sanitized) GTEST_SKIP() << "compiling a plugin under the sanitizers takes minutes; the main build runs it";
  // The spring block whose on_event resumes without leaving the event
  // (tests/data/model_files/resume_in_place.hpp), run as its example
  // config (no max_steps): each sample fails with failed_event_loop at its
  // first turning point, after one call of the handler, and the run ends
  // (it used to call the handler for ever, the time standing still, deaf
  // to SIGTERM), saying what to change. The closed form of the first half
  // swing (about x = -D, D = mu m g / k): turning point c + hypot(x0 - c,
  // v0 / w) at t = atan2(v0 / w, x0 - c) / w, c = -D.
  const fs::path dir = fresh_dir("resume_in_place");
  for (const std::string be : {"cpu", "reference"}) {
    SCOPED_TRACE(be);
    std::string text = slurp(example_config(dir, "spring_block", 20, be));
    text = std::regex_replace(text, std::regex(R"(model = "[^"]*")"),
                              "model = \"" + (kBad / "resume_in_place.hpp").string() + "\"");
    write(dir / "c.toml", text);
    const CliRun r = ukb_with_cache(example_cache(), "run " + sh(dir / "c.toml") + " --out " + sh(dir / be));
    EXPECT_EQ(r.code, 1) << r.err;  // samples failed
    EXPECT_NE((r.out + r.err).find("20 failed_event_loop"), std::string::npos) << r.out << r.err;
    EXPECT_NE(r.err.find("ukb run: warning: 20 of 20 samples failed with failed_event_loop"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("The event contract"), std::string::npos) << r.err;
    const auto rows = read_csv(dir / be / "results.csv");
    ASSERT_EQ(rows.size(), 20u);
    const double k = 10, m = 1, g = 9.81, w = std::sqrt(k / m), x0 = 1, v0 = 0.5;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& row = rows[i];
      EXPECT_EQ(row.at("status"), "failed_event_loop") << i;
      EXPECT_EQ(row.at("events"), "1") << i;
      const double c = -std::stod(row.at("mu")) * m * g / k;
      EXPECT_NEAR(std::stod(row.at("x_final")), c + std::hypot(x0 - c, v0 / w), 1e-9) << i;
      EXPECT_NEAR(std::stod(row.at("t_stop")), std::atan2(v0 / w, x0 - c) / w, 1e-8) << i;
    }
  }
}

TEST(ModelFiles, CacheReusesRebuildsAndNeverLoadsADamagedPlugin) {
  if (sanitized) GTEST_SKIP() << "compiling plugins under the sanitizers takes minutes; the main build runs it";
  const fs::path dir = fresh_dir("cache"), cache = dir / "cache";
  // The cache's decisions are under test, not the plugin's speed.
  const std::string env = toolchain_at(dir, "-O1");
  // A model file that includes a file of its own.
  write(dir / "stiffness.hpp", "#pragma once\ninline constexpr double kDefault = 1.0;\n");
  std::string model = slurp(kBad / "two_models.hpp");
  model = std::regex_replace(model, std::regex(R"(T k = T\(1\))"), "T k = T(kDefault)");
  model = std::regex_replace(model, std::regex(R"(UKB_MODEL\(Point2\)\n)"), "");
  model = std::regex_replace(model, std::regex("#pragma once\n"), "#pragma once\n#include \"stiffness.hpp\"\n");
  write(dir / "point.hpp", model);
  const std::string describe = "models --json --file " + sh(dir / "point.hpp");
  auto compiled = [](const CliRun& r) { return r.err.find("ukb: compiling the model file") != std::string::npos; };
  auto default_k = [](const CliRun& r) {
    const std::smatch m = [&] {
      std::smatch s;
      std::regex_search(r.out, s, std::regex(R"("default": ([0-9.]+))"));
      return s;
    }();
    return m.empty() ? -1.0 : std::stod(m[1]);
  };

  // Two runs at once on an empty cache: both succeed, one compiles (the
  // other waits for its lock, or starts after it, and loads its plugin),
  // one entry results.
  {
    const fs::path e1 = dir / "e1.txt", e2 = dir / "e2.txt", o1 = dir / "o1.txt", o2 = dir / "o2.txt";
    const std::string one = env + "UKB_CACHE_DIR=" + sh(cache) + " " + UKB_CLI_PATH + " " + describe;
    const CliRun both = run_cli("--version >/dev/null; (" + one + " >" + sh(o1) + " 2>" + sh(e1) + "; echo $? >" +
                                sh(dir / "c1")+ ") & (" + one + " >" + sh(o2) + " 2>" + sh(e2) + "; echo $? >" +
                                sh(dir / "c2") + ") & wait");
    EXPECT_EQ(slurp(dir / "c1"), "0\n") << slurp(e1);
    EXPECT_EQ(slurp(dir / "c2"), "0\n") << slurp(e2);
    EXPECT_NE(slurp(o1).find("\"point\""), std::string::npos);
    EXPECT_EQ(slurp(o1), slurp(o2));
    const std::string err1 = slurp(e1), err2 = slurp(e2);
    EXPECT_NE(err1.find("ukb: compiling the model file") == std::string::npos,
              err2.find("ukb: compiling the model file") == std::string::npos)
        << "exactly one compiles:\n" << err1 << "\n" << err2;
    int entries = 0;
    for (const auto& e : fs::directory_iterator(cache)) entries += e.path().filename().string()[0] != '.';
    EXPECT_EQ(entries, 1) << "one cache entry, nothing half-built left";
  }
  // Found in the cache: not compiled again.
  CliRun r = ukb_with_cache(cache, describe, env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(compiled(r)) << r.err;
  EXPECT_EQ(default_k(r), 1.0);
  // An included file edited: rebuilt, with the new value.
  const std::string stiffness = "#pragma once\ninline constexpr double kDefault = 2.5;\n";
  write(dir / "stiffness.hpp", stiffness);
  r = ukb_with_cache(cache, describe, env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(compiled(r));
  EXPECT_NE(r.err.find("stiffness.hpp' has changed"), std::string::npos) << r.err;
  EXPECT_EQ(default_k(r), 2.5);
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(cache))
    if (e.path().filename().string()[0] != '.') entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u) << "the rebuild replaced the stale entry";
  const fs::path entry = entries[0];

  // What follows is what ukb decides before it compiles: which entry a file
  // has, and whether its plugin may be loaded. A rebuild that ukb starts
  // fails at once (the first step, g++ -fsyntax-only, a second): a line of
  // stiffness.hpp does not compile. The successful rebuild of a stale entry
  // is the step above (about 13 s a compile). With stiffness.hpp changed,
  // each case below is told apart by its own reason in ukb's message:
  // stale() (src/run/model_file.cpp) looks at the manifest's key and the
  // plugin's checksum before the files it was built from.
  const std::string marker = "ukb test: a compile was started";
  write(dir / "stiffness.hpp", stiffness + "static_assert(false, \"" + marker + "\");\n");
  auto started_and_failed = [&](const CliRun& run) {
    EXPECT_EQ(run.code, 2) << run.err;
    EXPECT_TRUE(compiled(run)) << run.err;
    EXPECT_NE(run.err.find(marker), std::string::npos) << run.err;
  };
  // Build directories of compiles killed on the way (".build-HOST-PID-N",
  // HOST's characters other than letters, digits and '.' as '_'): the one
  // of a process that is gone is removed by the next compile, that of a
  // live process (this one) stays.
  std::string host(256, '\0');
  ASSERT_EQ(::gethostname(host.data(), host.size() - 1), 0);
  host.resize(std::strlen(host.c_str()));
  for (char& ch : host)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.') ch = '_';
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  const fs::path dead = cache / (".build-" + host + "-" + std::to_string(gone) + "-1"),
                 live = cache / (".build-" + host + "-" + std::to_string(::getpid()) + "-1");
  for (const fs::path& d : {dead, live}) {
    fs::create_directories(d);
    write(d / "plugin.o", "half-built");
  }
  // The header itself edited: a new entry ("first use"), not the old one.
  write(dir / "point.hpp", model + "// an edit\n");
  r = ukb_with_cache(cache, describe, env);
  started_and_failed(r);
  EXPECT_NE(r.err.find("first use"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dead)) << "the build directory of a process that is gone is removed";
  EXPECT_TRUE(fs::exists(live)) << "that of a live process stays";
  fs::remove_all(live);
  write(dir / "point.hpp", model);
  // A damaged plugin is not loaded: a rebuild is started.
  const std::string so = slurp(entry / "plugin.so");
  {
    std::fstream f(entry / "plugin.so", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64);
    f.write("damaged!", 8);
  }
  r = ukb_with_cache(cache, describe, env);
  started_and_failed(r);
  EXPECT_NE(r.err.find("plugin.so is missing or damaged"), std::string::npos) << r.err;
  write(entry / "plugin.so", so);
  // A plugin whose manifest names another file's key (as another entry's
  // would) is not loaded: a rebuild is started.
  const std::string manifest = slurp(entry / "manifest");
  std::smatch key;
  ASSERT_TRUE(std::regex_search(manifest, key, std::regex("\nkey ([0-9a-f])"))) << manifest;
  write(entry / "manifest", manifest.substr(0, std::size_t(key.position(1))) + (key.str(1) == "0" ? "1" : "0") +
                                manifest.substr(std::size_t(key.position(1)) + 1));
  r = ukb_with_cache(cache, describe, env);
  started_and_failed(r);
  EXPECT_NE(r.err.find("built for another file"), std::string::npos) << r.err;
  write(entry / "manifest", manifest);
  // Every file as it was: the entry is used again, untouched by the failed
  // rebuilds, and nothing else is left in the cache but lock files.
  write(dir / "stiffness.hpp", stiffness);
  r = ukb_with_cache(cache, describe, env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(compiled(r)) << r.err;
  EXPECT_EQ(default_k(r), 2.5);
  std::string left;
  for (const auto& e : fs::directory_iterator(cache)) {
    const std::string name = e.path().filename().string();
    if (e.path() != entry && !(name[0] == '.' && name.ends_with(".lock"))) left += name + " ";
  }
  EXPECT_EQ(left, "") << "nothing left behind by the failed rebuilds";
}

TEST(ModelFiles, BadFilesSayWhereAndWhat) {
  // Each file marks the line the message must name with "// expect-error:
  // TEXT"; the message must have FILE:LINE and TEXT, the exit code is 2, and
  // nothing is left in the cache but the entries' empty lock files.
  const fs::path cache = fresh_dir("bad") / "cache";
  int checked = 0;
  for (const auto& e : fs::directory_iterator(kBad)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("bad_", 0) != 0) continue;
    std::istringstream text(slurp(e.path()));
    std::string line, expect;
    int at = 0;
    for (int k = 1; std::getline(text, line); ++k)
      if (const std::size_t p = line.find("// expect-error: "); p != std::string::npos) at = k, expect = line.substr(p + 17);
    ASSERT_GT(at, 0) << name << " has no expect-error mark";
    SCOPED_TRACE(name);
    const CliRun r = ukb_with_cache(cache, "models --file " + sh(e.path()));
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(name + ":" + std::to_string(at) + ":"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("required from"), std::string::npos) << "no template backtrace: " << r.err;
    ++checked;
  }
  EXPECT_GE(checked, 14);
  // Through a config (`ukb run`, and so ukb.run's ConfigError): the
  // compiler's diagnostics keep their lines, each beginning with FILE:LINE,
  // under the config's location of the key.
  {
    const fs::path cfg = fresh_dir("bad_run") / "c.toml";
    std::ofstream(cfg) << "model = " << std::quoted((kBad / "bad_syntax.hpp").string()) << "\nsamples = 1\n";
    const CliRun r = ukb_with_cache(cache, "run " + sh(cfg) + " --out " + sh(cfg.parent_path() / "o"));
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("c.toml:1:9: key 'model': model file"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("does not compile:\n" + (kBad / "bad_syntax.hpp").string() + ":"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("\\x0a"), std::string::npos) << "newlines escaped: " << r.err;
  }
  // Nothing but the entries' lock files (empty, ".NAME.lock").
  std::string left;
  if (fs::exists(cache))
    for (const auto& e : fs::directory_iterator(cache)) {
      const std::string name = e.path().filename().string();
      if (!(name[0] == '.' && name.ends_with(".lock") && fs::is_regular_file(e.path()) && fs::file_size(e.path()) == 0))
        left += name + " ";
    }
  EXPECT_EQ(left, "") << "nothing left behind";
}

TEST(ModelFiles, APluginCacheOthersCouldWriteIsNeverUsed) {
  // The cache ukb is pointed at is writable by others (mode 0777): not
  // used. Its fallback in TMPDIR, ukb-cache-UID, made first by "another
  // user" as a link to a directory of theirs: neither followed nor chmod-ed;
  // a new private directory of mkdtemp instead, gone when ukb ends. Each run
  // compiles a file that fails at once (bad_syntax.hpp): the cache is chosen
  // before.
  const fs::path dir = fresh_dir("shared_cache"), shared = dir / "shared", tmp = dir / "tmp", theirs = dir / "theirs";
  fs::create_directories(shared);
  fs::create_directories(tmp);
  fs::create_directories(theirs);
  fs::permissions(shared, fs::perms::all);
  fs::permissions(theirs, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  const fs::path fallback = tmp / ("ukb-cache-" + std::to_string(::geteuid()));
  fs::create_directory_symlink(theirs, fallback);
  auto run = [&] { return ukb_with_cache(shared, "models --file " + sh(kBad / "bad_syntax.hpp"), "TMPDIR=" + sh(tmp) + " "); };
  CliRun r = run();
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("cannot be used (its group or others may write into it (mode 0777))"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot be trusted, it is a symbolic link"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("removed when this process ends"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(theirs)) << "nothing written through the link";
  EXPECT_EQ(fs::status(theirs).permissions(), fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  EXPECT_TRUE(fs::is_empty(shared)) << "nothing written into the shared cache";
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(tmp)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{fallback.filename().string()}) << "the run's own directory is gone";
  // The fallback a directory of another user: not used either (as root, a
  // directory handed to `nobody`; otherwise one that others may write).
  fs::remove(fallback);
  fs::create_directory(fallback);
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown(fallback.c_str(), 65534, 65534), 0);
  } else {
    fs::permissions(fallback, fs::perms::all);
  }
  r = run();
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(root ? "it belongs to another user (uid 65534" : "its group or others may write into it"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::is_empty(fallback));
  // No fallback yet: made private (0700) and used.
  fs::remove(fallback);
  r = run();
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("; using '" + fallback.string() + "' (set UKB_CACHE_DIR"), std::string::npos) << r.err;
  ASSERT_TRUE(fs::is_directory(fallback));
  EXPECT_EQ(fs::status(fallback).permissions(), fs::perms::owner_all);
}

TEST(ModelFiles, ARunOfABareConfigNameResumesFromAnyDirectory) {
  // `cd DIR; ukb run sleigh.toml --out s`, stopped (SIGTERM: a background
  // job of a shell ignores SIGINT), then `ukb run --resume DIR/s` from
  // another directory, as ukb's own message says: the model file is found
  // where the run found it. The config beside a link to the example's model
  // file (the example cache's plugin: the cache keys the file's real path).
  const fs::path dir = fresh_dir("bare_name");
  fs::create_symlink(kModels / "sleigh.hpp", dir / "sleigh.hpp");
  std::string text = slurp(kModels / "sleigh.toml");
  text = std::regex_replace(text, std::regex(R"(samples = \d+)"), "samples = 4000");
  text = std::regex_replace(text, std::regex(R"(t_end = [0-9.]+)"), "t_end = 2.0\nchunk = 100");
  text += "checkpoint_interval = 0.0\n";
  write(dir / "sleigh.toml", text);
  const std::string ukb = std::string(UKB_CLI_PATH), cache = "UKB_CACHE_DIR=" + sh(example_cache()) + " ";
  const CliRun stopped = run_cli("--version >/dev/null; cd " + sh(dir) + " && { " + cache + ukb +
                                 " run sleigh.toml --out s --quiet & p=$!; k=0; while [ ! -e s/checkpoint.ukb ] && "
                                 "[ $k -lt 2400 ]; do sleep 0.05; k=$((k+1)); done; kill -TERM $p; wait $p; }");
  ASSERT_EQ(stopped.code, 143) << stopped.err;
  ASSERT_TRUE(fs::exists(dir / "s" / "checkpoint.ukb"));
  EXPECT_NE(stopped.err.find("continue with: ukb run --resume s"), std::string::npos) << stopped.err;
  const CliRun resumed = run_cli("--version >/dev/null; cd / && " + cache + ukb + " run --resume " + sh(dir / "s") + " --quiet");
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_TRUE(fs::exists(dir / "s" / "results.npy"));
  EXPECT_FALSE(fs::exists(dir / "s" / "checkpoint.ukb"));
}

TEST(ModelFiles, FilesThatAreNoModelsAreRefusedBeforeCompiling) {
  const fs::path dir = fresh_dir("none"), cache = dir / "cache";
  fs::create_directories(dir / "a_directory.hpp");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"models --file " + sh(kBad / "empty.hpp"), "is empty"},
      {"models --file " + sh(kBad / "not_cpp.hpp"), "defines no model: name each model with a line `UKB_MODEL(Name)`"},
      {"models --file " + sh(kBad / "binary.hpp"), "binary data"},
      {"models --file " + sh(dir / "a_directory.hpp"), "is a directory"},
      {"models --file " + sh(dir / "missing.hpp"), "no such file"},
      {"accel --model " + sh(kBad / "two_models.hpp") + " --q 0,0 --qd 0,0",
       "defines 2 models (Point, Point2); name one: '"},
      {"models --file " + sh(kModels / "sleigh.hpp") + " --backend warp", "unknown backend 'warp'"},
      // "path:Name" with no path (std::filesystem::absolute throws on "": an
      // internal error before, found by fuzz_accel).
      {"accel --model :x.hpp --q 0,0 --qd 0,0", "an empty path"},
      {"models --file :Point", "an empty path"},
      // The same in a config read from the working directory (its directory
      // is then "", so the model file's path stays empty).
      {"--version >/dev/null && cd " + sh(dir) + " && printf 'model = \":a.hpp\"\\n' >colon.toml && UKB_CACHE_DIR=" +
           sh(cache) + " " + UKB_CLI_PATH + " run colon.toml",
       "colon.toml:1:9: key 'model': model file: an empty path"},
  };
  for (const auto& [args, expect] : cases) {
    const CliRun r = ukb_with_cache(cache, args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.err.find("compiling"), std::string::npos) << args << ": refused before compiling";
  }
  EXPECT_FALSE(fs::exists(cache) && !fs::is_empty(cache)) << "nothing written";
}

TEST(ModelFiles, ModelsThatContradictTheirOwnDeclarationsAreRefused) {
  if (sanitized) GTEST_SKIP() << "compiling a plugin under the sanitizers takes minutes; the main build runs it";
  // Refused at the first sample's initial state, before any work: the
  // checks precede the backend, here cpu and reference; and by ukb accel.
  // Both models are in one file: one plugin compile for the two.
  const fs::path dir = fresh_dir("mismatches");
  const fs::path cache = example_cache();  // the record's text is part of the key
  const std::string env = toolchain_at(dir, "-O1");  // the refusals under test, not the speed
  const fs::path file = kBad / "mismatches.hpp";
  struct Case {
    std::string id, run, accel;
  };
  const std::vector<Case> cases = {
      // mass gives diag(m, 2 m), mass_diagonal (m, m): the cpu backend would
      // integrate another system than the reference.
      {"DiagonalSlider",
       "model 'diagonal_slider': mass and mass_diagonal disagree at the initial state of sample 0: mass gives "
       "M[1][1] = 2, mass_diagonal gives d[1] = 1",
       "mass and mass_diagonal disagree at --q: mass gives M[1][1] = 2, mass_diagonal gives d[1] = 1"},
      // Row 0 of A is (x, 1), declared to lie in column 0 alone: the cpu
      // backend would drop the term of y. x = 0 at the initial state: only
      // the undeclared entry is nonzero.
      {"ColumnsSlider",
       "model 'columns_slider': constraints and constraint_columns disagree at the initial state of sample 0: "
       "constraints gives A[0][1] = 1, outside row 0's constraint_columns [0, 1) (A must be zero outside each row's "
       "constraint_columns)",
       "constraints and constraint_columns disagree at --q, --qd: constraints gives A[0][1] = 1, outside row 0's "
       "constraint_columns [0, 1) (A must be zero outside each row's constraint_columns)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.id);
    const std::string spec = file.string() + ":" + c.id;
    write(dir / "run.toml", "model = \"" + spec + "\"\nsamples = 4\n[integrator]\ndt = 1e-3\nt_end = 0.01\n" +
                                "[initial]\nq = [0.0, 0.0]\nqd = [1.0, 0.0]\n");
    for (const std::string be : {"cpu", "reference"}) {
      const fs::path out = dir / (c.id + "-" + be);
      const CliRun r = ukb_with_cache(cache, "run " + sh(dir / "run.toml") + " --backend " + be + " --out " + sh(out) +
                                         " --quiet", env);
      EXPECT_EQ(r.code, 2) << be << ": " << r.err;
      EXPECT_NE(r.err.find(spec + ": " + c.run), std::string::npos) << be << ": " << r.err;
      EXPECT_FALSE(fs::exists(out / "results.csv")) << be << ": nothing written";
    }
    const CliRun r = ukb_with_cache(cache, "accel --model " + sh(spec) + " --q 0,0 --qd 1,0 --backend cpu", env);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(c.accel), std::string::npos) << r.err;
  }
  // A name that would break the outputs (a comma in a coordinate): refused
  // when the model is loaded, by run and accel alike, the others of the file
  // still usable.
  const std::string comma = file.string() + ":CommaSlider";
  write(dir / "comma.toml", "model = \"" + comma + "\"\nsamples = 4\n[integrator]\ndt = 1e-3\nt_end = 0.01\n" +
                                "[initial]\nq = [0.0, 0.0]\nqd = [1.0, 0.0]\n");
  for (const std::string& args : {"run " + sh(dir / "comma.toml") + " --out " + sh(dir / "comma") + " --quiet",
                                   "accel --model " + sh(comma) + " --q 0,0 --qd 1,0"}) {
    const CliRun r = ukb_with_cache(cache, args, env);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find("model 'comma_slider': the coordinate 'y,1' has a character other than ASCII letters"),
              std::string::npos)
        << args << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "comma" / "results.npy"));
  // A model whose force throws (beyond x = 0.25, reached at t = 0.25):
  // the model's message, exit 2, on every backend of the CPU and with
  // several threads, never std::terminate (abort, 134) or an "internal
  // error" (3).
  const std::string thrower = file.string() + ":ThrowingSlider";
  write(dir / "throw.toml", "model = \"" + thrower + "\"\nsamples = 40\n[integrator]\ndt = 1e-3\nt_end = 0.5\n" +
                                "[initial]\nq = [0.0, 0.0]\nqd = [1.0, 0.0]\n");
  for (const std::string be : {"cpu", "reference"}) {
    const fs::path out = dir / ("throw-" + be);
    const CliRun r = ukb_with_cache(
        cache, "run " + sh(dir / "throw.toml") + " --backend " + be + " --threads 2 --out " + sh(out) + " --quiet", env);
    EXPECT_EQ(r.code, 2) << be << ": " << r.err;
    EXPECT_NE(r.err.find(thrower + ": model 'throwing_slider' threw an exception while integrating: x is beyond the "
                                   "edge of the table (in one of the samples 0 to "),
              std::string::npos)
        << be << ": " << r.err;
    EXPECT_FALSE(fs::exists(out / "results.csv")) << be;
    EXPECT_FALSE(fs::exists(out / ".ukb.lock")) << be << ": the lock is released";
    const CliRun a = ukb_with_cache(cache, "accel --model " + sh(thrower) + " --q 0.5,0 --qd 1,0 --backend " + be, env);
    EXPECT_EQ(a.code, 2) << be << ": " << a.err;
    EXPECT_NE(a.err.find("model 'throwing_slider' threw an exception while evaluating: x is beyond the edge of the "
                         "table"),
              std::string::npos)
        << be << ": " << a.err;
    EXPECT_EQ(a.out, "") << be;
  }
}

TEST(ModelFiles, ReadmeShowsTheSleighModelFileVerbatim) {
  // The documentation's smallest complete header is the tested example.
  EXPECT_NE(slurp(kSource / "docs" / "adding-a-model.md").find(slurp(kModels / "sleigh.hpp")), std::string::npos);
}

TEST(ModelFiles, CudaWithoutADeviceIsRefusedBeforeAnyCompile) {
  // `ukb accel --backend cuda` of a model file where there is no device:
  // refused at once (a cuda plugin takes half a minute to compile), saying
  // that there is no device rather than suggesting a driver upgrade.
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is here: nothing to refuse";
  const fs::path cache = fresh_dir("no_device") / "cache";
  const CliRun r =
      ukb_with_cache(cache, "accel --model " + sh(kModels / "sleigh.hpp") + " --q 0,0,0 --qd 1,0,0 --backend cuda");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--backend cuda: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("use --backend cpu or reference"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("compiling"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(cache) && !fs::is_empty(cache)) << "nothing compiled into the cache";
}

TEST(ModelFiles, CudaPluginCompilesAndItsDeviceCodeIsChecked) {
#ifndef UKB_HAVE_CUDA
  GTEST_SKIP() << "this ukb is built without CUDA: no nvcc to compile a model file's cuda backend";
#else
  if (sanitized) GTEST_SKIP() << "the sanitizer build has no CUDA";
  const fs::path cache = example_cache();
  // The device check writes one PTX file, which nvcc refuses for several
  // architectures: checked with the build's toolchain record naming one
  // more (as UKB_CUDA_ARCHITECTURES="80;90" would), on the files it
  // refuses, so that the message must be the user's error, not nvcc's.
  const fs::path dir = fresh_dir("cuda");
  const fs::path record = fs::path(UKB_CLI_PATH).parent_path().parent_path() / "share/ukb/toolchain.json";
  ASSERT_TRUE(fs::exists(record)) << record;
  const std::string one = slurp(record);
  const std::string two = std::regex_replace(one, std::regex(R"("--generate-code=)"),
                                             R"("--generate-code=arch=compute_80,code=[compute_80,sm_80]", $&)",
                                             std::regex_constants::format_first_only);
  ASSERT_NE(two, one) << "the record names an architecture";
  write(dir / "toolchain.json", two);
  const std::string env = "UKB_TOOLCHAIN=" + sh(dir / "toolchain.json") + " ";
  for (const char* name : {"device_throw.hpp", "device_alloc.hpp"}) {
    SCOPED_TRACE(name);
    std::istringstream text(slurp(kBad / name));
    std::string line, expect;
    int at = 0;
    for (int k = 1; std::getline(text, line); ++k)
      if (const std::size_t p = line.find("// expect-error: "); p != std::string::npos) at = k, expect = line.substr(p + 17);
    const CliRun r = ukb_with_cache(cache, "models --file " + sh(kBad / name) + " --backend cuda", env);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
    if (std::string(name) == "device_throw.hpp") {  // nvcc's message, at the user's line
      EXPECT_NE(r.err.find(std::string(name) + ":" + std::to_string(at) + ":"), std::string::npos) << r.err;
    }
    // (On the cpu the same files compile: device code is checked for cuda
    // only. Not run here: each is a plugin compile of ~10 s.)
  }
  // The example compiles for cuda (its host code at -O1, toolchain_at; its
  // device code with the build's own nvcc flags).
  fs::create_directories(dir / "o1");
  const CliRun r = ukb_with_cache(cache, "models --file " + sh(kModels / "sleigh.hpp") + " --backend cuda",
                                  toolchain_at(dir / "o1", "-O1"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("sleigh"), std::string::npos);
  // Where there is a GPU, the cuda plugin runs the example against cpu.
  const CliRun probe = run_cli("accel --model bead_on_ring --q 1,0 --qd 0,1 --backend cuda");
  if (probe.code != 0) GTEST_SKIP() << "compiled; not run: no GPU here (" << probe.err << ")";
  for (const std::string be : {"cpu", "cuda"}) {
    const CliRun run = ukb_with_cache(cache, "run " + sh(example_config(dir, "spring_block", 1000, be)) + " --out " +
                                                 sh(dir / be) + " --quiet");
    ASSERT_EQ(run.code, 0) << run.err;
  }
  const auto cpu = read_csv(dir / "cpu/results.csv"), gpu = read_csv(dir / "cuda/results.csv");
  ASSERT_EQ(cpu.size(), gpu.size());
  double worst = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i)
    worst_of(worst, std::abs(std::stod(cpu[i].at("x_final")) - std::stod(gpu[i].at("x_final"))));
  EXPECT_LT(worst, 1e-9);
#endif
}

}  // namespace
}  // namespace ukb::test
