// `--crosscheck`: backends compared under the documented rules, planted
// errors found, the subset reproducible.
#include "run/run_support.hpp"

namespace ukb::test {
namespace {

// A run with a cross-check into a fresh directory; its outcome.
run::Outcome crosscheck_into(const Config& c, Backend other, long K, const fs::path& dir,
                             std::function<void(run::Results&)> tamper = {}) {
  fs::remove_all(dir);
  return run::execute(c, {.out_dir = dir.string(), .crosscheck = other, .crosscheck_samples = K,
                          .crosscheck_tamper = std::move(tamper)});
}

TEST(Crosscheck, CpuAgainstReferencePassesOnTheDemoAndAStabilisedChain) {
  // The run's samples integrated again on the reference backend agree
  // column by column under the documented tolerances: the rough ring
  // (events, statuses at_rest) and a damped 3-link chain with projection.
  const fs::path ring = unique_path("ring");
  const run::Outcome o = crosscheck_into(config(ring_toml(sanitized_shorter(300, 6))), Backend::reference, 40, ring);
  EXPECT_TRUE(o.crosschecked);
  EXPECT_TRUE(o.crosscheck_pass) << o.crosscheck_verdict;
  const nlohmann::json j = nlohmann::json::parse(slurp(ring / "crosscheck.json"));
  EXPECT_EQ(j["samples"].get<long>(), 40);
  EXPECT_TRUE(j["pass"].get<bool>());
  const Csv res(ring / "results.csv");
  ASSERT_EQ(j["columns"].size(), res.names.size()) << "every column of results.csv is compared";
  std::map<std::string, std::string> rule;
  for (const auto& col : j["columns"]) rule[col["column"].get<std::string>()] = col["rule"].get<std::string>();
  EXPECT_EQ(rule["status"], "exact");
  EXPECT_EQ(rule["steps"], "exact");
  EXPECT_EQ(rule["mu"], "exact");
  EXPECT_EQ(rule["t_stop"], "time");
  EXPECT_EQ(rule["theta_final"], "state");
  EXPECT_EQ(nlohmann::json::parse(slurp(ring / "run.json"))["crosscheck"]["pass"], true);
  double differ = 0;  // the samples were integrated again, by the other backend's own arithmetic
  for (const auto& col : j["columns"])
    if (col["max_abs"].is_number()) differ = std::max(differ, col["max_abs"].get<double>());
  EXPECT_GT(differ, 0.0) << "bitwise the same results: was the other backend run at all?";
  EXPECT_LT(differ, 1e-10);

  // Adaptive steps: each backend's own step sizes; the counters within their rule.
  const run::Outcome d = crosscheck_into(config(ring_dopri5_toml(sanitized_shorter(120, 4))), Backend::reference, 30,
                                         unique_path("ring_dopri5"));
  EXPECT_TRUE(d.crosscheck_pass) << d.crosscheck_verdict;

  Config chain = config(R"(model = "planar_chain_3"
samples = 24
seed = 3
[integrator]
dt = 0.002
t_end = 0.5
[stabilization]
method = "projection"
[params]
c = { dist = "uniform", min = 0.0, max = 0.5 }
[initial]
theta1 = { dist = "uniform", min = -1.0, max = 1.0 }
theta2 = 0.3
theta3 = -0.2
omega1 = 0.0
omega2 = 0.5
omega3 = 0.0
)");
  const run::Outcome k = crosscheck_into(chain, Backend::reference, 256, unique_path("chain"));
  EXPECT_TRUE(k.crosscheck_pass) << k.crosscheck_verdict;
  EXPECT_NE(k.crosscheck_verdict.find("on 24 samples"), std::string::npos) << "fewer than K: all of them";
}

TEST(Crosscheck, APlantedErrorFailsNamingTheSampleWithItsOwnExitCode) {
  // An error of 1e-6 in one sample's final position on the other backend
  // (UKB_CROSSCHECK_PERTURB, for testing a CI step): `ukb run` writes its
  // outputs, names the sample on stderr and in crosscheck.json, exits 5.
  const std::string cfg = unique_path("c.toml"), dir = unique_path("o");
  std::ofstream(cfg) << ring_toml(30);
  const CliRun ok = run_cli("run " + cfg + " --out " + dir + " --quiet --crosscheck reference");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.err.find("crosscheck cpu against reference on 30 samples"), std::string::npos) << ok.err;
  EXPECT_NE(ok.err.find("passed"), std::string::npos) << ok.err;
  fs::remove_all(dir);
  setenv("UKB_CROSSCHECK_PERTURB", "17", 1);  // this test's process alone (ctest runs each test in its own)
  const CliRun bad = run_cli("run " + cfg + " --out " + dir + " --quiet --crosscheck reference --crosscheck-samples 30");
  unsetenv("UKB_CROSSCHECK_PERTURB");
  EXPECT_EQ(bad.code, 5) << bad.err;
  EXPECT_NE(bad.err.find("FAILED"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("worst sample 17"), std::string::npos) << bad.err;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "results.csv")) << "the run's own outputs are written";
  const nlohmann::json j = nlohmann::json::parse(slurp(fs::path(dir) / "crosscheck.json"));
  EXPECT_FALSE(j["pass"].get<bool>());
  int failed = 0;
  for (const auto& col : j["columns"]) {
    if (col["pass"].get<bool>()) continue;
    ++failed;
    EXPECT_EQ(col["failures"].get<long>(), 1) << col["column"];
    EXPECT_EQ(col["worst"][0]["sample"].get<long>(), 17) << col["column"];
    EXPECT_TRUE(col["worst"][0]["inputs"].contains("mu")) << "the offender's inputs";
  }
  EXPECT_GE(failed, 1);
  // Bad options: exit code 2 before any work.
  std::vector<std::string> bad_options = {"--crosscheck cpu", "--crosscheck gpu",
                                          "--crosscheck reference --crosscheck-samples 0", "--crosscheck-samples 5"};
  if (cuda::device_count() == 0) bad_options.push_back("--crosscheck cuda");  // found before the run, not after
  for (const std::string& opt : bad_options) {
    const std::string d = unique_path("bad");
    const CliRun r = run_cli("run " + cfg + " --out " + d + " --quiet " + opt);
    EXPECT_EQ(r.code, 2) << opt << ": " << r.err;
    EXPECT_NE(r.err.find("--crosscheck"), std::string::npos) << opt << ": " << r.err;
    EXPECT_FALSE(fs::exists(fs::path(d) / "results.csv")) << opt;
  }
}

TEST(Crosscheck, WorkCountersAreReportedWhileThePhysicsIsJudged) {
  // docs/crosscheck.md: `rejected` and `rhs_evals` count what the method
  // spent and are reported, never a failure. The ring sample of
  // ring_adaptive.toml that raised a false alarm (sample 7901 of its 10 000:
  // a crossing decided within rounding, located by bisection on cpu, 2016
  // evaluations against 1848 on the reference) passes; every column a
  // physical disagreement shows in still fails.
  const std::string toml = R"(model = "bead_on_ring"
samples = 2
seed = 20261122
[integrator]
method = "dopri5"
rtol = 1e-8
atol = 1e-10
t_end = 60.0
event_tol = 1e-10
[params]
mu = 0.134635678449716
[initial]
theta = 0.0
omega = 0.0
)";
  const Config c = config(toml);
  const run::Outcome o = crosscheck_into(c, Backend::reference, 2, unique_path("work"));
  EXPECT_TRUE(o.crosscheck_pass) << o.crosscheck_verdict;
  // Planted on the other side: the work counters far apart pass and are
  // reported with their sample; a resting angle 1e-4 apart (40 times the
  // documented tolerance, tau = 100 rtol = 1e-6 times 1 + |theta| < 2.6), an
  // event more or steps 10 % apart fail.
  auto column = [](run::Results& r, const char* name) -> std::vector<double>& {
    return r.values[static_cast<std::size_t>(std::find(r.names.begin(), r.names.end(), name) - r.names.begin())];
  };
  const fs::path work = unique_path("work2");
  const run::Outcome w = crosscheck_into(c, Backend::reference, 2, work, [&](run::Results& r) {
    column(r, "rhs_evals")[1] *= 2;
    column(r, "rejected")[1] = 1000;
  });
  EXPECT_TRUE(w.crosscheck_pass) << w.crosscheck_verdict;
  const nlohmann::json j = nlohmann::json::parse(slurp(work / "crosscheck.json"));
  for (const auto& col : j["columns"]) {
    const std::string name = col["column"].get<std::string>();
    if (name != "rhs_evals" && name != "rejected") continue;
    EXPECT_EQ(col["rule"], "reported") << name;
    EXPECT_GE(col["max_abs"].get<double>(), 900.0) << name;
    ASSERT_FALSE(col["worst"].empty()) << name;
    EXPECT_EQ(col["worst"][0]["sample"].get<long>(), 1) << name;
  }
  const std::vector<std::pair<const char*, std::function<void(std::vector<double>&)>>> real = {
      {"theta_final", [](std::vector<double>& x) { x[1] += 1e-4; }},
      {"events", [](std::vector<double>& x) { x[1] += 1; }},
      {"steps", [](std::vector<double>& x) { x[1] = std::round(1.1 * x[1]) + 3; }},
  };
  for (const auto& planted : real) {  // (no structured binding: clang 14 cannot capture one)
    const char* name = planted.first;
    const run::Outcome bad = crosscheck_into(c, Backend::reference, 2, unique_path("bad"),
                                             [&](run::Results& r) { planted.second(column(r, name)); });
    EXPECT_FALSE(bad.crosscheck_pass) << name;
    EXPECT_NE(bad.crosscheck_verdict.find(std::string(name) + " (1 sample, worst sample 1"), std::string::npos)
        << bad.crosscheck_verdict;
  }
}

TEST(Crosscheck, TwoResultsFilesCompareInCxxUnderTheSameRules) {
  // The C++ API on the files of two runs (cpu, reference): they pass; a
  // value moved beyond its tolerance fails naming its sample, one within it
  // does not.
  Config c = config(ring_toml(25));
  const run::Results cpu = run::read_results((run_into(c, "cpu") / "results.csv").string());
  c.backend = Backend::reference;
  const run::Results ref = run::read_results((run_into(c, "ref") / "results.csv").string());
  ASSERT_EQ(cpu.rows(), 25u);
  EXPECT_TRUE(run::compare_results(c, cpu, ref, "cpu", "reference").pass);
  run::Results moved = ref;
  std::vector<double>& th = moved.values[static_cast<std::size_t>(
      std::find(moved.names.begin(), moved.names.end(), "theta_final") - moved.names.begin())];
  double largest = 0;
  for (double x : th) largest = std::max(largest, std::abs(x));
  // docs/crosscheck.md's rule ("The tolerances"): tau (1 + max |value| of the
  // column), tau = 1e-9 for RK4; written here as documented, not taken
  // from the code under test.
  const double tol = 1e-9 * (1 + largest);
  th[9] += 0.5 * tol;
  EXPECT_TRUE(run::compare_results(c, cpu, moved).pass) << "within the tolerance";
  th[9] += 2 * tol;
  const run::CrosscheckReport r = run::compare_results(c, cpu, moved);
  EXPECT_FALSE(r.pass);
  EXPECT_NE(r.verdict.find("theta_final (1 sample, worst sample 9"), std::string::npos) << r.verdict;
  moved = ref;
  moved.values[1][3] = std::numeric_limits<double>::quiet_NaN();  // mu of sample 3: an input
  moved.values[static_cast<std::size_t>(std::find(moved.names.begin(), moved.names.end(), "t_stop") -
                                        moved.names.begin())][5] = std::numeric_limits<double>::infinity();
  const run::CrosscheckReport n = run::compare_results(c, cpu, moved);
  EXPECT_NE(n.verdict.find("mu (1 sample, worst sample 3"), std::string::npos) << n.verdict;
  EXPECT_NE(n.verdict.find("t_stop (1 sample, worst sample 5"), std::string::npos) << n.verdict;
  moved = ref;
  moved.status[4] = "failed_nonfinite";
  const run::CrosscheckReport s = run::compare_results(c, cpu, moved);
  EXPECT_FALSE(s.pass);
  EXPECT_NE(s.verdict.find("status (1 sample, worst sample 4"), std::string::npos) << s.verdict;
}

TEST(Crosscheck, TauIsTheDocumentedValue) {
  // docs/crosscheck.md, "The tolerances": tau = 1e-9 for RK4 and max(1e-9, 100 rtol,
  // 100 atol) for dopri5, as numbers.
  Config c = config(ring_toml(5));
  EXPECT_EQ(run::crosscheck_tau(c), 1e-9);
  c.run.method = Method::dopri5;
  c.run.rtol = 1e-8, c.run.atol = {1e-12};
  EXPECT_DOUBLE_EQ(run::crosscheck_tau(c), 1e-6);
  c.run.rtol = 1e-13, c.run.atol = {1e-10, 1e-12};
  EXPECT_DOUBLE_EQ(run::crosscheck_tau(c), 1e-8);
  c.run.rtol = 1e-13, c.run.atol = {1e-14};
  EXPECT_EQ(run::crosscheck_tau(c), 1e-9);
}

TEST(Crosscheck, TheSubsetIsReproducibleAndCoversTheSweepAndTheStatuses) {
  // 5 x 3 sweep points, 400 samples, two statuses alternating per round of
  // the sweep: K = 15 takes one sample per point; K = 30 two per point, one
  // of each status; the same seed gives the same subset, another seed
  // another; K >= samples takes them all.
  Config c = config(ring_toml(400, "", R"({ dist = "grid", min = 0.1, max = 0.5, count = 5 })") );
  c.initial[1].dist = Dist{.kind = Dist::Kind::values, .list = {0.0, 1.0, 2.0}};
  std::vector<std::int32_t> st(400);
  for (std::size_t i = 0; i < st.size(); ++i)
    st[i] = static_cast<std::int32_t>((i / 15) % 2 ? Status::at_rest : Status::ok);
  for (long K : {15L, 30L}) {
    const std::vector<long> s = run::crosscheck_subset(c, st, K);
    ASSERT_EQ(s.size(), static_cast<std::size_t>(K));
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
    EXPECT_EQ(s, run::crosscheck_subset(c, st, K));
    std::map<long, std::set<std::int32_t>> seen;
    for (long i : s) seen[i % 15].insert(st[static_cast<std::size_t>(i)]);
    EXPECT_EQ(seen.size(), 15u) << "every sweep point, K = " << K;
    if (K == 30) {
      for (const auto& [p, sts] : seen) EXPECT_EQ(sts.size(), 2u) << "both statuses at point " << p;
    }
  }
  Config other = c;
  other.seed = 8;
  EXPECT_NE(run::crosscheck_subset(c, st, 30), run::crosscheck_subset(other, st, 30));
  EXPECT_EQ(run::crosscheck_subset(c, st, 400).size(), 400u);
  EXPECT_EQ(run::crosscheck_subset(c, st, 1000).size(), 400u);
  // More points than K: K distinct points chosen by the seed, not the first K.
  c.initial[1].dist = Dist{.kind = Dist::Kind::grid, .a = 0.0, .b = 1.0, .list = {}, .count = 40};  // 5 x 40 points
  const std::vector<long> s = run::crosscheck_subset(c, st, 20);
  std::set<long> pts;
  for (long i : s) pts.insert(i % 200);
  EXPECT_EQ(pts.size(), 20u);
  EXPECT_GT(*pts.rbegin(), 100) << "points from the whole sweep";
  EXPECT_EQ(s, run::crosscheck_subset(c, st, 20));
}

}  // namespace
}  // namespace ukb::test
