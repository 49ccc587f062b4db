// Bad configs and output directories: refused with exit code 2 and a
// message, nothing left behind.
#include "run/run_support.hpp"

namespace ukb::test {
namespace {

struct BadConfig {
  const char* what;
  std::string toml;
  std::vector<std::string> expect;  // substrings of the message (besides the file name)
};

TEST(BadInput, EachBadConfigIsRefusedWithExitCode2AndLeavesNothing) {
  const std::string base = ring_toml(10);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = base;
    const std::size_t k = s.find(from);
    EXPECT_NE(k, std::string::npos) << from;
    return s.replace(k, from.size(), to);
  };
  const std::vector<BadConfig> cases = {
      {"unknown key", with("seed = 7", "sede = 7"), {"'sede'", "did you mean 'seed'"}},
      {"unknown integrator key", with("dt = 0.01", "dtt = 0.01"), {"integrator.dtt", "did you mean 'dt'"}},
      {"unknown parameter", with("mu = {", "muu = {"), {"params.muu", "did you mean 'mu'"}},
      {"wrong type", with("samples = 10", "samples = \"ten\""), {"'samples'", "expected an integer, got a string"}},
      {"negative samples", with("samples = 10", "samples = -5"), {"'samples'", "expected an integer in [1,"}},
      {"zero samples", with("samples = 10", "samples = 0"), {"'samples'", "expected an integer in [1,"}},
      {"dt = 0", with("dt = 0.01", "dt = 0.0"), {"integrator.dt", "expected a time step > 0"}},
      {"dt < 0", with("dt = 0.01", "dt = -0.01"), {"integrator.dt", "expected a time step > 0"}},
      {"event_tol wider than dt", with("dt = 0.01", "dt = 0.01\nevent_tol = 1e300"),
       {"integrator.event_tol", "expected a tolerance at most integrator.dt = 0.01", "got 1"}},
      {"event_tol wider than dt_max", with("dt = 0.01", "method = \"dopri5\"\ndt_max = 0.5\nevent_tol = 0.75"),
       {"integrator.event_tol", "expected a tolerance at most integrator.dt_max = 0.5"}},
      {"unknown distribution", with("\"uniform\"", "\"unifrom\""), {"params.mu.dist", "did you mean 'uniform'"}},
      {"inverted bounds", with("min = 0.05, max = 0.5", "min = 0.5, max = 0.05"), {"params.mu.max", "expected max > min"}},
      {"unknown model", with("bead_on_ring", "bead_on_rign"), {"'model'", "did you mean 'bead_on_ring'"}},
      {"missing dt", with("dt = 0.01\n", ""), {"integrator.dt", "missing"}},
      {"no end", with("t_end = 60.0", "t_end = inf"), {"integrator", "neither t_end"}},
      {"bad TOML", with("seed = 7", "seed = = 7"), {"not valid TOML", ":3:"}},
      {"normal sd 0", with("{ dist = \"uniform\", min = 0.05, max = 0.5 }", "{ dist = \"normal\", mean = 0.2, sd = 0.0 }"),
       {"params.mu.sd", "expected a standard deviation > 0"}},
      {"empty truncation window", with("{ dist = \"uniform\", min = 0.05, max = 0.5 }",
                                       "{ dist = \"normal\", mean = 0.2, sd = 0.01, min = 0.4, max = 0.5 }"),
       {"params.mu", "expected at least 0.05"}},
      {"grid of one point", with("{ dist = \"uniform\", min = 0.05, max = 0.5 }", "{ dist = \"grid\", min = 0.1, max = 0.2, count = 1 }"),
       {"params.mu.count", "expected an integer in [2,"}},
      {"mixed natural and raw", with("omega = 0.0", "omega = 0.0\nq = [1.0, 0.0]"), {"initial.theta", "cannot be mixed"}},
      {"raw state off the ring", with("theta = 0.0\nomega = 0.0", "q = [1.1, 0.0]\nqd = [0.0, 0.0]"),
       {"sample 0", "position residual 0.1", "initial.tolerance"}},
      {"raw state of wrong length", with("theta = 0.0\nomega = 0.0", "q = [1.0]"), {"initial.q", "expected 2 values"}},
      {"record out of range", base + "[output]\nrecord = [10]\n", {"output.record[0]", "expected an integer in [0, 9]"}},
      {"unknown method", with("dt = 0.01", "dt = 0.01\nmethod = \"euler\""), {"integrator.method", "expected rk4"}},
      {"method misspelt", with("dt = 0.01", "dt = 0.01\nmethod = \"dopri\""), {"integrator.method", "did you mean 'dopri5'"}},
      {"rtol with rk4", with("dt = 0.01", "dt = 0.01\nrtol = 1e-6"), {"integrator.rtol", "dopri5", "only"}},
      {"dt_min with rk4", with("dt = 0.01", "dt = 0.01\ndt_min = 1e-6"), {"integrator.dt_min", "only"}},
      {"rtol out of range", with("dt = 0.01", "method = \"dopri5\"\nrtol = 2.0"), {"integrator.rtol", "expected a relative tolerance in (0, 1)"}},
      {"negative atol", with("dt = 0.01", "method = \"dopri5\"\natol = -1e-9"), {"integrator.atol", "expected an absolute tolerance > 0"}},
      {"zero atol", with("dt = 0.01", "method = \"dopri5\"\natol = [1e-9, 0]"), {"integrator.atol[1]", "expected an absolute tolerance > 0"}},
      {"atol of wrong length", with("dt = 0.01", "method = \"dopri5\"\natol = [1e-9, 1e-9, 1e-9]"),
       {"integrator.atol", "or an array of 2 (one per coordinate of 'bead_on_ring': x, y) or 4", "got 3"}},
      {"atol not a number", with("dt = 0.01", "method = \"dopri5\"\natol = [\"tiny\", 1e-9]"), {"integrator.atol[0]", "expected a number"}},
      {"dt_max below dt_min", with("dt = 0.01", "method = \"dopri5\"\ndt_min = 0.1\ndt_max = 0.01"),
       {"integrator.dt_max", "expected at least integrator.dt_min"}},
      {"zero first step", with("dt = 0.01", "method = \"dopri5\"\ndt = 0.0"), {"integrator.dt", "expected a time step > 0 (with dopri5 the first trial step; to have it chosen automatically leave dt out of a config"}},
      {"record_dt with rk4", base + "[output]\nrecord = [0]\nrecord_dt = 0.1\n", {"output.record_dt", "needs integrator.method = \"dopri5\""}},
      {"record_dt and record_every", with("dt = 0.01", "method = \"dopri5\"") + "[output]\nrecord = [0]\nrecord_dt = 0.1\nrecord_every = 3\n",
       {"output.record_dt", "not both"}},
      {"record_dt zero", with("dt = 0.01", "method = \"dopri5\"") + "[output]\nrecord = [0]\nrecord_dt = 0.0\n",
       {"output.record_dt", "expected a time interval > 0"}},
      {"unknown backend", with("seed = 7", "seed = 7\nbackend = \"gpu\""), {"'backend'", "expected reference, cpu or cuda"}},
      {"dt too small for the time", with("t_end = 60.0", "t_end = 2e17").append("t0 = 1e17\n"),
       {"integrator.dt", "too small to advance the time"}},
      {"max_steps too many for dt", with("t_end = 60.0", "t_end = inf\nmax_steps = 9223372036854775807"),
       {"integrator.max_steps", "no longer advances the time", "fewer steps"}},
      {"unknown format", base + "[output]\nformats = [\"hdf5\"]\n", {"output.formats[0]", "expected csv or npy"}},
      {"unknown stabilization", base + "[stabilization]\nmethod = \"baumgart\"\n",
       {"stabilization.method", "did you mean 'baumgarte'"}},
      {"unknown stabilization key", base + "[stabilization]\nmethod = \"projection\"\ntoll = 1e-9\n",
       {"stabilization.toll", "did you mean 'tol'"}},
      {"Baumgarte rate with projection", base + "[stabilization]\nmethod = \"projection\"\nalpha = 5.0\n",
       {"stabilization.alpha", "applies to stabilization.method = \"baumgarte\" only", "this run's is \"projection\""}},
      {"negative Baumgarte rate", base + "[stabilization]\nmethod = \"baumgarte\"\nbeta = -1.0\n",
       {"stabilization.beta", "expected a rate >= 0"}},
      {"Baumgarte too stiff for dt", base + "[stabilization]\nmethod = \"baumgarte\"\nalpha = 60.0\n",
       {"'stabilization.method'", "too fast", "expected at most 1"}},
      {"projection tolerance 1.5", base + "[stabilization]\nmethod = \"projection\"\ntol = 1.5\n",
       {"stabilization.tol", "expected a relative tolerance in [1e-15, 1)"}},
      {"projection without iterations", base + "[stabilization]\nmethod = \"projection\"\nmax_iter = 0\n",
       {"stabilization.max_iter", "expected an integer in [1, 100]"}},
      // Parameter ranges (the models' descriptions: masses and lengths > 0, mu >= 0).
      {"zero mass", with("mu = {", "m = 0.0\nmu = {"), {"params.m", "expected a value > 0, got 0", "bead mass"}},
      {"negative mu", with("{ dist = \"uniform\", min = 0.05, max = 0.5 }", "-0.1"), {"params.mu", "expected a value >= 0, got -0.1"}},
      {"uniform mu below 0", with("min = 0.05, max = 0.5", "min = -0.05, max = 0.5"), {"params.mu.min", "expected a value >= 0"}},
      {"untruncated normal radius", with("mu = {", "R = { dist = \"normal\", mean = 1.0, sd = 0.1 }\nmu = {"),
       {"params.R", "a normal distribution reaches every value below 0", "truncate it with min"}},
      {"list with a negative radius", with("mu = {", "R = [1.0, -2.0]\nmu = {"), {"params.R[1]", "expected a value > 0, got -2"}},
      {"grid of masses from 0", with("mu = {", "m = { dist = \"grid\", min = 0.0, max = 1.0, count = 3 }\nmu = {"),
       {"params.m.min", "expected a value > 0"}},
      {"values table with a zero mass", with("mu = {", "m = { dist = \"values\", values = [1.0, 0.0] }\nmu = {"),
       {"params.m.values[1]", "expected a value > 0"}},
      {"lognormal that overflows", with("{ dist = \"uniform\", min = 0.05, max = 0.5 }", "{ dist = \"lognormal\", mean_log = 800.0, sd_log = 1.0 }"),
       {"params.mu", "sample 0 drew inf", "narrow its distribution"}},
      {"sweeps of over 1e12 points", with("mu = {", "m = { dist = \"grid\", min = 1.0, max = 2.0, count = 1000000000 }\nR = { dist = \"grid\", min = 1.0, max = 2.0, count = 1000000000 }\nmu = {"),
       {"key 'params.R'", "more than 1e12 points"}},
      {"NUL in output.dir", base + "[output]\ndir = \"a\\u0000b\"\n", {"output.dir", "NUL character"}},
      {"NUL in the model", with("\"bead_on_ring\"", "\"ring\\u0000.hpp\""), {"'model'", "NUL character"}},
      {"rk4 step over 1e9 times the run", with("dt = 0.01", "dt = 1e12"), {"integrator.dt", "over 1e9 times the run", "no step would be taken"}},
      // A natural quantity whose default (0) is outside its range must be given.
      {"rolling_sphere without theta", "model = \"rolling_sphere\"\nsamples = 10\n[integrator]\ndt = 0.01\nt_end = 1.0\n[initial]\nx = 1.0\n",
       {"initial.theta", "required for 'rolling_sphere'", "its default 0 is not admissible", "nutation angle"}},
      // Limits, checkpoints, other types.
      {"residual limit 0", with("dt = 0.01", "dt = 0.01\nresidual_limit = 0.0"), {"integrator.residual_limit", "expected a residual > 0"}},
      {"residual limit as text", with("dt = 0.01", "dt = 0.01\nresidual_limit = \"small\""),
       {"integrator.residual_limit", "expected a number, got a string"}},
      {"negative checkpoint interval", base + "[output]\ncheckpoint_interval = -1.0\n",
       {"output.checkpoint_interval", "expected seconds >= 0"}},
      {"misspelt checkpoint key", base + "[output]\ncheckpoint_intervall = 10.0\n",
       {"output.checkpoint_intervall", "did you mean 'checkpoint_interval'"}},
      {"NaN time step", with("dt = 0.01", "dt = nan"), {"integrator.dt", "expected a finite number"}},
      {"negative threads", with("seed = 7", "seed = 7\nthreads = -1"), {"'threads'", "expected an integer in [0, 4096]"}},
      {"negative seed", with("seed = 7", "seed = -7"), {"'seed'", "expected an integer in [0,"}},
      {"zero histogram bins", base + "[output]\nhistogram_bins = 0\n", {"output.histogram_bins", "expected an integer in [1,"}},
      {"params not a table", "params = 3\n" + with("[params]\nmu = { dist = \"uniform\", min = 0.05, max = 0.5 }\n", ""),
       {"'params'", "expected a table, got an integer"}},
  };
  ASSERT_GE(cases.size(), 30u);
  for (const BadConfig& b : cases) {
    const std::string cfg = unique_path("bad.toml"), dir = unique_path("never");
    std::ofstream(cfg) << b.toml;
    fs::remove_all(dir);
    const CliRun r = run_cli("run " + cfg + " --out " + dir + " --quiet");
    EXPECT_EQ(r.code, 2) << b.what << ": " << r.err;
    EXPECT_NE(r.err.find(cfg), std::string::npos) << b.what << ": " << r.err;
    for (const std::string& e : b.expect) EXPECT_NE(r.err.find(e), std::string::npos) << b.what << ": " << r.err;
    EXPECT_EQ(r.out, "") << b.what;
    EXPECT_FALSE(fs::exists(dir)) << b.what << ": partial output left";
  }
}

TEST(BadInput, UnwritableOutputDirectoryAndMissingConfigAreRefused) {
  const std::string cfg = unique_path("ok.toml"), file = unique_path("a_file");
  std::ofstream(cfg) << ring_toml(10);
  std::ofstream(file) << "x";
  // A directory below a regular file cannot be created (not even by root).
  CliRun r = run_cli("run " + cfg + " --out " + file + "/sub --quiet");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot create the output directory"), std::string::npos) << r.err;
  r = run_cli("run " + cfg + " --out " + file + " --quiet");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is not a directory"), std::string::npos) << r.err;
  r = run_cli("run " + unique_path("missing.toml") + " --quiet");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot read the config file"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(file), "x");
}

// Every check of a run option is written once (ukb/options.hpp's table):
// the library and a config refuse a value just outside an option's range
// with the same words, the config's at the key that gives it.
TEST(RunOptions, AValueOutOfRangeIsRefusedInTheSameWordsByTheLibraryAndAConfig) {
  int checked = 0;
  for (const RunOptionInfo& o : run_option_table()) {
    SCOPED_TRACE(o.name);
    const OptionRange& g = o.range;
    double bad;
    if (std::isfinite(g.hi)) bad = g.hi_open ? g.hi : g.hi + 1;
    else if (std::isfinite(g.lo) && o.unset == OptionUnset::none) bad = g.lo_open ? g.lo : g.lo - 1;
    else continue;  // no value outside the range that the library does not take for "unset"
    RunOptions r;
    std::string integrator = "dt = 0.01\nt_end = 1.0\n", stabilization;
    if (o.only && std::string_view(o.only) == "dopri5") r.method = Method::dopri5, integrator += "method = \"dopri5\"\n";
    if (o.only && std::string_view(o.only) == "baumgarte") r.stabilization = Stabilization::baumgarte;
    if (o.only && std::string_view(o.only) == "projection") r.stabilization = Stabilization::projection;
    if (r.stabilization != Stabilization::none)
      stabilization = "method = \"" + std::string(to_string(r.stabilization)) + "\"\n";
    bool number = false;
    visit_run_options(r, [&](const RunOptionInfo& x, auto& v) {
      using V = std::remove_cvref_t<decltype(v)>;
      if (std::string_view(x.name) != o.name) return;
      if constexpr (std::is_same_v<V, std::vector<double>>) v = {bad}, number = true;
      else if constexpr (std::is_arithmetic_v<V> && !std::is_same_v<V, bool>) v = static_cast<V>(bad), number = true;
    });
    if (!number) continue;
    const std::string words = out_of_range(o, bad);
    ASSERT_FALSE(words.empty());
    try {
      check(r);
      ADD_FAILURE() << "the library took " << bad;
    } catch (const OptionError& e) {
      EXPECT_EQ(e.option, o.name);
      EXPECT_EQ(e.message, words);
    }
    (std::string_view(o.table) == "integrator" ? integrator : stabilization) +=
        std::string(o.key) + " = " + format_number(bad) + "\n";
    const std::string toml = "model = \"bead_on_ring\"\nsamples = 4\n[integrator]\n" + integrator +
                             (stabilization.empty() ? "" : "[stabilization]\n" + stabilization);
    try {
      config(toml);
      ADD_FAILURE() << "the config took " << bad << ":\n" << toml;
    } catch (const run::ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("key '" + std::string(o.table) + "." + o.key + "': " + words), std::string::npos)
          << what << "\nexpected: " << words;
    }
    ++checked;
  }
  EXPECT_GE(checked, 10) << "guard: most options have a bound to step over";
}

// An event_tol wider than the step is refused where it is given (a config,
// ukb.simulate: it would not locate an event within its step), not in the
// library, where it is located to the step; a config without dt says so
// first, whatever else it gives.
TEST(RunOptions, AnEventTolWiderThanTheStepIsRefusedWhereItIsGiven) {
  RunOptions r;
  r.dt = 1e-11;
  EXPECT_NO_THROW(check(r));
  const std::string head = "model = \"bead_on_ring\"\nsamples = 4\n[integrator]\nt_end = 1.0\n";
  EXPECT_NO_THROW(config(head + "dt = 1e-11\n"));
  auto refusal = [&](const std::string& lines) {
    try {
      config(head + lines);
    } catch (const run::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string wide = refusal("dt = 1e-11\nevent_tol = 1e-10\n");
  EXPECT_NE(wide.find("key 'integrator.event_tol': expected a tolerance at most integrator.dt = 1e-11"), std::string::npos)
      << wide;
  const std::string no_dt = refusal("event_tol = 0.01\n");
  EXPECT_NE(no_dt.find("key 'integrator.dt': missing"), std::string::npos) << no_dt;
}

// docs/config.md lists the run options as the table generates them.
TEST(RunOptions, TheDocsListTheTableOfRunOptions) {
  const std::string doc = slurp(std::string(UKB_SOURCE_DIR) + "/docs/config.md");
  const std::string begin = "<!-- run options: begin (generated by ukb::run::run_options_markdown) -->\n";
  const std::size_t a = doc.find(begin), b = doc.find("<!-- run options: end -->");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  EXPECT_EQ(doc.substr(a + begin.size(), b - a - begin.size()), run::run_options_markdown())
      << "paste this between the markers of docs/config.md:\n"
      << run::run_options_markdown();
}

}  // namespace
}  // namespace ukb::test
