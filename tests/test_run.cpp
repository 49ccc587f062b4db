// Monte Carlo runs (`ukb run`): the sampling against closed-form
// distributions, reproducibility, stick-slip against analytic solutions and
// an independent integrator of the bead's polar-angle equation, the output
// files against each other, and bad configs.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.hpp"
#include "worst.hpp"

#include "ukb/engine.hpp"
#include "ukb/models/all.hpp"
#include "checkpoint.hpp"
#include "files.hpp"
#include "output.hpp"
#include "stats.hpp"
#include "ukb/crosscheck.hpp"
#include "ukb/cuda.hpp"
#include "ukb/run.hpp"

namespace ukb::test {
namespace {

namespace fs = std::filesystem;
using run::Config;
using run::Dist;

constexpr double kG = 9.81;

// A CSV file by column name.
struct Csv {
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> rows;
  explicit Csv(const fs::path& p) {
    std::ifstream f(p);
    std::string line;
    bool header = true;
    while (std::getline(f, line)) {
      std::vector<std::string> cells;
      std::stringstream ss(line);
      std::string c;
      while (std::getline(ss, c, ',')) cells.push_back(c);
      if (header) names = cells, header = false;
      else rows.push_back(cells);
    }
  }
  std::size_t at(const std::string& name) const {
    const auto it = std::find(names.begin(), names.end(), name);
    EXPECT_NE(it, names.end()) << "no column " << name;
    return static_cast<std::size_t>(it - names.begin());
  }
  std::vector<std::string> text(const std::string& name) const {
    std::vector<std::string> v;
    const std::size_t k = at(name);
    for (const auto& r : rows) v.push_back(r[k]);
    return v;
  }
  std::vector<double> num(const std::string& name) const {
    std::vector<double> v;
    for (const std::string& s : text(name)) v.push_back(std::strtod(s.c_str(), nullptr));
    return v;
  }
};

Config config(const std::string& toml) { return run::parse_config(toml, "test.toml"); }

// Runs a config into a fresh directory of this test; returns the directory.
fs::path run_into(const Config& c, const std::string& leaf) {
  const fs::path dir = unique_path(leaf);
  fs::remove_all(dir);
  run::execute(c, {.out_dir = dir.string()});
  return dir;
}

std::string ring_toml(long samples, const std::string& extra_integrator = "",
                      const std::string& mu = R"({ dist = "uniform", min = 0.05, max = 0.5 })") {
  return "model = \"bead_on_ring\"\nsamples = " + std::to_string(samples) +
         "\nseed = 7\n[integrator]\ndt = 0.01\nt_end = 60.0\n" + extra_integrator +
         "\n[params]\nmu = " + mu + "\n[initial]\ntheta = 0.0\nomega = 0.0\n";
}

// ---- sampling --------------------------------------------------------------

// Kolmogorov-Smirnov distance of the draws from a CDF.
template <class Cdf>
double ks_distance(std::vector<double> x, Cdf cdf) {
  std::sort(x.begin(), x.end());
  const double n = static_cast<double>(x.size());
  double d = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double F = cdf(x[i]);
    worst_of(d, F - static_cast<double>(i) / n);
    worst_of(d, static_cast<double>(i + 1) / n - F);
  }
  return d;
}

// The 0.1 % critical value of the KS distance for n draws (asymptotic):
// a correct sampler exceeds it with probability 1e-3; the seeds are fixed,
// so the outcome is fixed too.
double ks_critical(std::size_t n) { return 1.95 / std::sqrt(static_cast<double>(n)); }

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

std::vector<double> draws(const Dist& d, std::size_t n, std::uint64_t seed) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = run::draw(d, seed, i, 3, 0);
  return v;
}

TEST(Sampling, PhiloxKnownAnswerAndTheConversionToDoubles) {
  // Random123's known-answer vector for Philox4x32-10 with counter 0 and key
  // 0 (kat_vectors): 6627e8d5 e169c58d bc57ac4c 9b00dbd8. Seed 0, sample 0,
  // quantity 0, block 0 is that counter and key; a double takes 32 bits of
  // the first word and the top 21 of the second, at the middle of its cell.
  const std::uint64_t w0 = 0x6627e8d5u, w1 = 0xe169c58du, w2 = 0xbc57ac4cu, w3 = 0x9b00dbd8u;
  EXPECT_EQ(run::uniform01(0, 0, 0, 0, 0), (double((w0 << 21) | (w1 >> 11)) + 0.5) / 9007199254740992.0);
  EXPECT_EQ(run::uniform01(0, 0, 0, 0, 1), (double((w2 << 21) | (w3 >> 11)) + 0.5) / 9007199254740992.0);
  // Every coordinate of the counter and the key changes the stream.
  const double u = run::uniform01(5, 9, 2, 0, 0);
  EXPECT_NE(u, run::uniform01(6, 9, 2, 0, 0));
  EXPECT_NE(u, run::uniform01(5 + (1ull << 32), 9, 2, 0, 0));
  EXPECT_NE(u, run::uniform01(5, 10, 2, 0, 0));
  EXPECT_NE(u, run::uniform01(5, 9 + (1ull << 32), 2, 0, 0));
  EXPECT_NE(u, run::uniform01(5, 9, 3, 0, 0));
  EXPECT_NE(u, run::uniform01(5, 9, 2, 1, 0));
}

TEST(Sampling, UniformHasItsRangeMomentsAndDistribution) {
  Dist d;
  d.kind = Dist::Kind::uniform;
  d.a = 0.05, d.b = 0.5;
  const std::size_t n = 200000;
  const std::vector<double> x = draws(d, n, 11);
  double sum = 0, sq = 0;
  for (double v : x) {
    ASSERT_GE(v, d.a);
    ASSERT_LT(v, d.b);
    sum += v;
  }
  const double mean = sum / n, w = d.b - d.a;
  for (double v : x) sq += (v - mean) * (v - mean);
  // Mean within 5 standard errors; variance w^2/12 within 5 of its errors
  // (the variance of the sample variance of a uniform is w^4/180/n).
  EXPECT_NEAR(mean, 0.5 * (d.a + d.b), 5 * w / std::sqrt(12.0 * n));
  EXPECT_NEAR(sq / (n - 1), w * w / 12, 5 * w * w / std::sqrt(180.0 * n));
  EXPECT_LT(ks_distance(x, [&](double v) { return (v - d.a) / w; }), ks_critical(n));
}

TEST(Sampling, NormalAndLognormalHaveTheirMomentsAndDistribution) {
  const std::size_t n = 200000;
  Dist d;
  d.kind = Dist::Kind::normal;
  d.a = 2.0, d.b = 0.3;
  std::vector<double> x = draws(d, n, 12);
  double sum = 0, sq = 0;
  for (double v : x) sum += v;
  const double mean = sum / n;
  for (double v : x) sq += (v - mean) * (v - mean);
  EXPECT_NEAR(mean, d.a, 5 * d.b / std::sqrt(double(n)));
  // The sample variance of a normal has standard error sigma^2 sqrt(2/(n-1)).
  EXPECT_NEAR(sq / (n - 1), d.b * d.b, 5 * d.b * d.b * std::sqrt(2.0 / (n - 1)));
  EXPECT_LT(ks_distance(x, [&](double v) { return normal_cdf((v - d.a) / d.b); }), ks_critical(n));

  Dist l;
  l.kind = Dist::Kind::lognormal;
  l.a = -1.0, l.b = 0.5;
  x = draws(l, n, 13);
  for (double& v : x) {
    ASSERT_GT(v, 0);
    v = std::log(v);
  }
  EXPECT_LT(ks_distance(x, [&](double v) { return normal_cdf((v - l.a) / l.b); }), ks_critical(n));
}

TEST(Sampling, TruncatedNormalStaysInItsWindowAndFollowsTheTruncatedLaw) {
  const std::size_t n = 100000;
  Dist d;
  d.kind = Dist::Kind::normal;
  d.a = 0.2, d.b = 0.1, d.lo = 0.05, d.hi = 0.5;
  const std::vector<double> x = draws(d, n, 14);
  for (double v : x) {
    ASSERT_GE(v, d.lo);
    ASSERT_LE(v, d.hi);
  }
  const double Flo = normal_cdf((d.lo - d.a) / d.b), Fhi = normal_cdf((d.hi - d.a) / d.b);
  EXPECT_LT(ks_distance(x, [&](double v) { return (normal_cdf((v - d.a) / d.b) - Flo) / (Fhi - Flo); }),
            ks_critical(n));
}

TEST(Sampling, SweepAxesFormACartesianProductFirstAxisFastest) {
  const Config c = config(R"(model = "incline_block"
samples = 13
[integrator]
dt = 0.01
t_end = 1.0
[params]
mu = [0.1, 0.2, 0.3]
alpha = { dist = "grid", min = 0.0, max = 0.4, count = 2 }
g = { dist = "uniform", min = 9.0, max = 10.0 }
)");
  // Canonical order: the model's parameters (m, alpha, g, mu), then s, v.
  ASSERT_EQ(c.params[1].name, "alpha");
  ASSERT_EQ(c.params[3].name, "mu");
  for (std::uint64_t i = 0; i < 13; ++i) {
    const std::vector<double> in = run::draw_inputs(c, i);
    const std::uint64_t k = i % 6;  // 2 alphas x 3 mus
    EXPECT_EQ(in[1], k % 2 == 0 ? 0.0 : 0.4) << i;
    EXPECT_EQ(in[3], (std::vector<double>{0.1, 0.2, 0.3})[k / 2]) << i;
    EXPECT_GE(in[2], 9.0);
    EXPECT_LT(in[2], 10.0);
  }
}

// ---- reproducibility ---------------------------------------------------------

TEST(Run, SameSeedGivesIdenticalResultsAcrossRunsThreadsAndChunks) {
  Config c = config(ring_toml(1500));
  c.threads = 1, c.chunk = 4096;
  const std::string a = slurp(run_into(c, "a") / "results.csv");
  const std::string b = slurp(run_into(c, "b") / "results.csv");
  c.threads = 2, c.chunk = 77;
  const std::string d = slurp(run_into(c, "d") / "results.csv");
  c.threads = 2, c.chunk = 1000;
  const std::string e = slurp(run_into(c, "e") / "results.csv");
  ASSERT_GT(a.size(), 1000u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, d);
  EXPECT_EQ(a, e);
  c.seed = 8;
  EXPECT_NE(a, slurp(run_into(c, "f") / "results.csv"));
}

TEST(Run, WithoutAChunkKeyTheBackendsDefaultIsUsedAndRunJsonRecordsItAndThePhases) {
  // docs/config.md: 65536 samples at a time on cpu, 2^20 on cuda (issue 22: at
  // least 1e5, so that a chunk fills a GPU). The results do not depend on it.
  Config c = config(ring_toml(300));
  EXPECT_EQ(c.chunk, 0);
  const fs::path dir = run_into(c, "default");
  const nlohmann::json rj = nlohmann::json::parse(slurp(dir / "run.json"));
  EXPECT_EQ(rj["config"]["integrator"]["chunk"].get<long>(), 65536);
  // Where the wall time went: each phase of this run once, together within
  // the wall time.
  double phases = 0;
  for (const char* p : {"setup", "samples", "checkpoint", "results_csv", "results_npy", "summary"}) {
    ASSERT_TRUE(rj["phase_seconds"].contains(p)) << p;
    EXPECT_GE(rj["phase_seconds"][p].get<double>(), 0.0) << p;
    phases += rj["phase_seconds"][p].get<double>();
  }
  EXPECT_EQ(rj["phase_seconds"].size(), 6u);
  EXPECT_LE(phases, rj["wall_seconds"].get<double>());
  c.chunk = 7;
  EXPECT_EQ(slurp(dir / "results.csv"), slurp(run_into(c, "seven") / "results.csv"));
  const Config g = config("backend = \"cuda\"\n" + ring_toml(300));
  EXPECT_EQ(nlohmann::json::parse(g.to_json())["integrator"]["chunk"].get<long>(), 1L << 20);
  const Config h = config("backend = \"cuda\"\n" + ring_toml(300, "chunk = 4096\n"));
  EXPECT_EQ(nlohmann::json::parse(h.to_json())["integrator"]["chunk"].get<long>(), 4096);
}

TEST(Run, ABadInitialStateIsReportedForTheFirstSuchSampleWithAnyThreadCount) {
  // Raw initial states on the unit ring: x = 0.5 (off the ring) at positions
  // 3 and 7 of an axis of 8, so samples 3, 7, 11, ... are bad; the samples
  // are checked by the run's threads before any work, and the message names
  // sample 3 whichever thread meets a bad one first.
  const std::string toml =
      "model = \"bead_on_ring\"\nsamples = 4000\nseed = 1\n[integrator]\ndt = 0.01\nt_end = 0.1\n"
      "[params]\nmu = 0.2\n[initial]\nq = [{ dist = \"values\", values = [1.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0, 0.5] }, "
      "0.0]\nqd = [0.0, 0.0]\n";
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    Config c = config(toml);
    c.threads = threads;
    const fs::path dir = unique_path("bad" + std::to_string(threads));
    try {
      run::execute(c, {.out_dir = dir.string()});
      ADD_FAILURE() << "no error";
    } catch (const run::ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("sample 3: the raw initial state violates the constraints"), std::string::npos) << what;
    }
    EXPECT_FALSE(fs::exists(dir / "results.csv"));
  }
}

TEST(Run, SampleIOfNSamplesEqualsSampleIOf2NSamples) {
  const Csv small(run_into(config(ring_toml(300)), "n") / "results.csv");
  const Csv large(run_into(config(ring_toml(600)), "2n") / "results.csv");
  ASSERT_EQ(small.rows.size(), 300u);
  ASSERT_EQ(large.rows.size(), 600u);
  for (std::size_t i = 0; i < small.rows.size(); ++i) EXPECT_EQ(small.rows[i], large.rows[i]) << i;
}

TEST(Run, CpuAndReferenceBackendsAgree) {
  Config c = config(ring_toml(60));
  const Csv cpu(run_into(c, "cpu") / "results.csv");
  c.backend = Backend::reference;
  const Csv ref(run_into(c, "ref") / "results.csv");
  EXPECT_EQ(cpu.text("status"), ref.text("status"));
  for (const char* col : {"theta_final", "t_stop", "energy_dissipated"}) {
    const std::vector<double> x = cpu.num(col), y = ref.num(col);
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-9) << col << " sample " << i;
  }
}

// The ring config with adaptive steps instead of dt = 0.01.
std::string ring_dopri5_toml(long samples, const std::string& extra = "") {
  std::string s = ring_toml(samples);
  const std::string from = "dt = 0.01\n";
  return s.replace(s.find(from), from.size(), "method = \"dopri5\"\nrtol = 1e-9\natol = 1e-11\n" + extra);
}

TEST(Run, AdaptiveStepsGiveTheSameResultsAcrossThreadsChunksAndBackendsAgree) {
  // dopri5 under `ukb run`: bitwise the same over threads and chunks; its
  // columns rejected and rhs_evals; resting angles and times as RK4's at a
  // small step and as the reference backend's.
  Config c = config(ring_dopri5_toml(sanitized_shorter(400, 40)));
  c.threads = 1, c.chunk = 4096;
  const fs::path a = run_into(c, "a");
  c.threads = 2, c.chunk = 37;
  const fs::path b = run_into(c, "b");
  EXPECT_EQ(slurp(a / "results.csv"), slurp(b / "results.csv"));
  const Csv dp(a / "results.csv");
  for (const std::string& x : dp.text("rejected")) EXPECT_GE(std::stol(x), 0);
  const std::vector<double> steps = dp.num("steps"), evals = dp.num("rhs_evals");
  for (std::size_t i = 0; i < steps.size(); ++i) EXPECT_GE(evals[i], 6 * steps[i]) << "6 evaluations a step at least";
  Config r = config(ring_toml(sanitized_shorter(400, 40)));
  r.run.dt = 1e-4;
  const Csv rk(run_into(r, "rk4") / "results.csv");
  EXPECT_EQ(dp.text("status"), rk.text("status"));
  EXPECT_EQ(dp.text("events"), rk.text("events"));
  for (const char* col : {"theta_final", "t_stop"}) {
    const std::vector<double> x = dp.num(col), y = rk.num(col);
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-8) << col << " sample " << i;
  }
  c.backend = Backend::reference;
  c.samples = std::min(30L, c.samples);
  const Csv ref(run_into(c, "ref") / "results.csv");
  for (const char* col : {"theta_final", "t_stop"}) {
    const std::vector<double> x = dp.num(col), y = ref.num(col);
    for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-8) << col << " sample " << i;
  }
}

TEST(Run, AdaptiveStepsRecordTrajectoriesAtFixedTimesFromTheDenseOutput) {
  // record_dt: a row at every multiple of 0.05 s up to the rest, each the
  // state of the bead then (against RK4 at dt = 1e-4 run to that time),
  // then a row at the final state; the recorded samples' results are those
  // of the unrecorded run.
  Config c = config(ring_dopri5_toml(6) + "[output]\nrecord = [1, 4]\nrecord_dt = 0.05\n");
  const fs::path dir = run_into(c, "rec");
  Config plain = config(ring_dopri5_toml(6));
  EXPECT_EQ(slurp(dir / "results.csv"), slurp(run_into(plain, "plain") / "results.csv"));
  const Csv tr(dir / "trajectories.csv");
  const Csv res(dir / "results.csv");
  using Mo = models::BeadOnRing<double>;
  int checked = 0;
  for (long s : {1L, 4L}) {
    std::vector<double> ts, xs, ys;
    std::string last;
    for (const auto& row : tr.rows) {
      if (std::stol(row[tr.at("sample")]) != s) continue;
      ts.push_back(std::strtod(row[tr.at("t")].c_str(), nullptr));
      xs.push_back(std::strtod(row[tr.at("q_x")].c_str(), nullptr));
      ys.push_back(std::strtod(row[tr.at("q_y")].c_str(), nullptr));
      last = row[tr.at("status")];
    }
    const double t_stop = res.num("t_stop")[std::size_t(s)];
    ASSERT_GT(t_stop, 1.0);
    // Rows at 0, 0.05, ..., the last multiple before the rest, then the rest.
    const long k_last = long(std::floor(t_stop / 0.05));
    ASSERT_EQ(ts.size(), std::size_t(k_last + 2)) << "sample " << s;
    EXPECT_EQ(last, "at_rest");
    EXPECT_EQ(ts.back(), t_stop);
    for (long k = 0; k <= k_last; ++k) EXPECT_EQ(ts[std::size_t(k)], 0.05 * double(k)) << k;
    // The bead's state at some of those times, integrated there with RK4.
    Batch<Mo> one(1);
    Mo::Params p{};
    p.mu = res.num("mu")[std::size_t(s)];
    one.set_params(0, p);
    const double q0[2] = {1, 0}, v0[2] = {0, 0};
    one.set_state(0, q0, v0);
    for (long k : {3L, k_last / 2, k_last}) {
      Batch<Mo> b = one;
      integrate(b, Backend::cpu, {.dt = 1e-4, .t_end = ts[std::size_t(k)]});
      if (b.status(0) != Status::ok) continue;  // a rest before that time in RK4: no comparison
      EXPECT_NEAR(xs[std::size_t(k)], b.q(0, 0), 1e-7) << "sample " << s << " t " << ts[std::size_t(k)];
      EXPECT_NEAR(ys[std::size_t(k)], b.q(0, 1), 1e-7) << "sample " << s << " t " << ts[std::size_t(k)];
      ++checked;
    }
  }
  EXPECT_GE(checked, 4);
  // A run that ends on an output time (t_end = 0.5 = 10 x 0.05, before
  // either bead rests): one row there, the last, with the final status; not
  // a running row and then the same state again.
  Config ends = c;
  ends.run.t_end = 0.5;
  const Csv te(run_into(ends, "rec_ends") / "trajectories.csv");
  for (long s : {1L, 4L}) {
    std::vector<std::string> times, status;
    for (const auto& row : te.rows)
      if (std::stol(row[te.at("sample")]) == s) times.push_back(row[te.at("t")]), status.push_back(row[te.at("status")]);
    ASSERT_EQ(times.size(), 11u) << "sample " << s << ": rows at 0, 0.05, ..., 0.5";
    EXPECT_EQ(times.back(), "0.5");
    EXPECT_EQ(std::set<std::string>(times.begin(), times.end()).size(), times.size()) << "a time twice";
    EXPECT_EQ(status.back(), "finished");
    for (std::size_t k = 0; k + 1 < status.size(); ++k) EXPECT_EQ(status[k], "running") << k;
  }
}

TEST(Run, AnEventFunctionThatIsNaNFailsTheSampleOnEveryBackend) {
  // A ring of radius 1e-200: x^2 + y^2 underflows to 0 and the bead's event
  // function (its sliding velocity, divided by the radius) is 0/0. Each
  // sample fails at its start with failed_nonfinite, on cpu (RK4 and
  // Dormand-Prince) as on the reference backend; it used to take steps of
  // length 0 on cpu, one located "event" after another, until max_steps
  // (here the bound that keeps a regression from hanging).
  const std::string toml = ring_toml(3, "max_steps = 2000\n");
  std::string tiny = toml;
  tiny.replace(tiny.find("mu = "), 0, "R = 1e-200\n");
  for (const std::string& method : {std::string("rk4"), std::string("dopri5")}) {
    for (Backend be : {Backend::cpu, Backend::reference}) {
      SCOPED_TRACE(method + " on " + std::string(to_string(be)));
      std::string text = tiny;
      if (method == "dopri5") text.replace(text.find("dt = 0.01\n"), 10, "method = \"dopri5\"\n");
      Config c = config(text);
      c.backend = be;
      const Csv res(run_into(c, "nan_event_" + method + "_" + std::string(to_string(be))) / "results.csv");
      for (std::size_t i = 0; i < res.rows.size(); ++i) {
        EXPECT_EQ(res.text("status")[i], "failed_nonfinite") << i;
        EXPECT_EQ(res.num("t_final")[i], 0.0) << i;
        EXPECT_EQ(res.num("steps")[i], 0.0) << i;
      }
    }
  }
}

TEST(Run, ADormandPrinceFirstStepLongerThanTheRunStillEndsOnTEnd) {
  // A time within dt * 1e-9 of t_end counts as t_end: with the first trial
  // step dt = 1e8 over a run of 0.5 the samples used to end 'finished' near
  // t = 0.4; the first step is taken as t_end - t0 now.
  std::string text = ring_toml(4);
  text.replace(text.find("dt = 0.01\n"), 10, "method = \"dopri5\"\ndt = 1e8\n");
  text.replace(text.find("t_end = 60.0"), 12, "t_end = 0.5");
  const Csv res(run_into(config(text), "dopri5_long_first") / "results.csv");
  ASSERT_EQ(res.rows.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(res.text("status")[i], "finished") << i;
    EXPECT_EQ(res.num("t_final")[i], 0.5) << i;
  }
}

TEST(Run, TheStepLimitStatusDoesNotDependOnHowTheRunIsSplit) {
  // max_steps = 40 steps of 0.01 before t_end = 1: status max_steps whether
  // the 40 steps come in one call, in calls of 20, or of 7.
  using Mo = models::BeadOnRing<double>;
  for (Backend be : {Backend::cpu, Backend::reference}) {
    for (long budget : {1000L, 20L, 7L}) {
      Batch<Mo> b(2);
      const double q[2] = {1, 0}, qd[2] = {0, 0};
      for (int i = 0; i < 2; ++i) b.set_state(i, q, qd);
      const RunOptions r{.dt = 0.01, .t_end = 1.0, .max_steps = 40};
      while (integrate(b, be, r, budget).active > 0) {
      }
      for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(b.status(i), Status::max_steps) << to_string(be) << " budget " << budget;
        EXPECT_EQ(b.steps(i), 40);
        EXPECT_NEAR(b.t(i), 0.4, 1e-12);
      }
    }
  }
}

// ---- cross-checks (ukb run --crosscheck) -------------------------------------

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

TEST(Docs, EveryDocumentedDefaultAndRuleIsTheCodes) {
  // What the user's documentation (README.md and docs/) states, as written
  // there, against the constants the backends share (policy.hpp): the number
  // in the text and the number in the code, each a literal here, not one
  // derived from the other.
  std::string docs = slurp(std::filesystem::path(UKB_SOURCE_DIR) / "README.md");
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(UKB_SOURCE_DIR) / "docs"))
    if (entry.path().extension() == ".md") docs += slurp(entry.path());
  const std::vector<std::pair<std::string, bool>> said = {
      {"| `rtol` | number in (0, 1) | `1e-6` |", policy::default_rtol == 1e-6},
      {"| `atol` | number > 0, or an array of n or 2n | `1e-9` |", policy::default_atol == 1e-9},
      {"| `event_tol` | number > 0, at most `dt` (dopri5: `dt_max`) | `1e-10` |", policy::default_event_tol == 1e-10},
      {"| `rank_rtol` | number in [0, 1) | 1e-10 |", policy::default_rank_rtol<double>() == 1e-10},
      {"| `alpha`, `beta`, `gamma` | numbers >= 0 | `alpha`: 10;", policy::default_baumgarte_rate == 10.0},
      {"| `tol` | number in [1e-15, 1) | `1e-10` |", policy::default_projection_tol<double>() == 1e-10},
      {"| `max_iter` | integer in [1, 100] | 4 |", policy::default_projection_iters == 4},
      {"within `1e-9 dt` of `t_end` has reached it", policy::end_slack == 1e-9},
      {"a singular value of `B` within a factor 100, `policy::rank_margin`", policy::rank_margin == 100.0},
      {"above `sqrt(eps)` (1.5e-8)",
       policy::consistency_rtol<double>() == std::sqrt(std::numeric_limits<double>::epsilon())},
      // Hairer's PI controller: err^(0.2 - 0.75 beta) = err^0.17 with beta
      // 0.04, safety 0.9, steps between h / 5 and 10 h.
      {"h_new = h / clamp(err^0.17 / err_prev^0.04 / 0.9, 1/10,",
       policy::pi_beta == 0.04 && policy::step_safety == 0.9 && policy::step_grow_max == 10.0 &&
           policy::step_shrink_min == 0.2},
  };
  for (const auto& [text, code] : said) {
    EXPECT_NE(docs.find(text), std::string::npos) << "the documentation no longer says: " << text;
    EXPECT_TRUE(code) << "the code no longer does what the documentation says: " << text;
  }
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

// ---- stick-slip --------------------------------------------------------------

std::string incline_toml(double alpha, double mu, const std::string& v, double t_end,
                         const std::string& backend = "cpu") {
  std::ostringstream s;
  s.precision(17);
  s << "model = \"incline_block\"\nsamples = 4\nbackend = \"" << backend << "\"\n[integrator]\ndt = 0.01\nt_end = "
    << t_end << "\nevent_tol = 1e-10\n[params]\nalpha = " << alpha << "\nmu = " << mu
    << "\n[initial]\ns = 0.0\nv = " << v << "\n";
  return s.str();
}

TEST(StickSlip, InclineBlockSticksAtTheAnalyticPointAndTime) {
  // tan(alpha) < mu: sliding down, the block decelerates at
  // a = g (mu cos alpha - sin alpha) and sticks at t = v0/a, s = v0^2/(2a).
  const double alpha = 0.3, mu = 0.5, a = kG * (mu * std::cos(alpha) - std::sin(alpha));
  for (const char* backend : {"cpu", "reference"}) {
    const Csv r(run_into(config(incline_toml(alpha, mu, "[0.5, 1.0, 2.0, 3.0]", 10.0, backend)), backend) /
                "results.csv");
    const std::vector<double> v0 = r.num("v"), ts = r.num("t_stop"), s = r.num("s_final"), v = r.num("v_final");
    for (std::size_t i = 0; i < v0.size(); ++i) {
      EXPECT_EQ(r.text("status")[i], "at_rest");
      // The instant is bracketed to event_tol; RK4 is exact for a constant
      // acceleration, so the position error is a * tol * (t - t_stop) at most.
      EXPECT_NEAR(ts[i], v0[i] / a, 1e-10 + 1e-13) << backend << " v0 = " << v0[i];
      EXPECT_NEAR(s[i], v0[i] * v0[i] / (2 * a), 1e-12) << backend << " v0 = " << v0[i];
      EXPECT_EQ(v[i], 0.0);
      EXPECT_EQ(r.text("events")[i], "1");
    }
  }
}

TEST(StickSlip, InclineBlockWithTanAlphaAboveMuNeverSticks) {
  // tan(alpha) > mu: released at rest it slides down at once with
  // a_down = g (sin alpha - mu cos alpha) (friction at rest opposes the
  // impending motion); sent up the slope at v0 < 0 it decelerates at
  // a_up = g (sin alpha + mu cos alpha), turns at t1 = -v0/a_up (one event)
  // and slides down from rest.
  const double alpha = 0.5, mu = 0.2, T = 3.0;
  const double a_dn = kG * (std::sin(alpha) - mu * std::cos(alpha));
  const double a_up = kG * (std::sin(alpha) + mu * std::cos(alpha));
  const Csv r(run_into(config(incline_toml(alpha, mu, "[0.0, -1.0, -2.0, 1.0]", T)), "slide") / "results.csv");
  const std::vector<double> v0 = r.num("v"), s = r.num("s_final"), v = r.num("v_final");
  for (std::size_t i = 0; i < v0.size(); ++i) {
    EXPECT_EQ(r.text("status")[i], "finished");
    double s_exp, v_exp;
    int events;
    if (v0[i] < 0) {
      const double t1 = -v0[i] / a_up, s1 = -v0[i] * v0[i] / (2 * a_up);
      s_exp = s1 + 0.5 * a_dn * (T - t1) * (T - t1);
      v_exp = a_dn * (T - t1);
      events = 1;
    } else {
      s_exp = v0[i] * T + 0.5 * a_dn * T * T;
      v_exp = v0[i] + a_dn * T;
      events = v0[i] == 0 ? 1 : 0;  // a system released at rest consults its handler once
    }
    EXPECT_NEAR(s[i], s_exp, 1e-8) << "v0 = " << v0[i];
    EXPECT_NEAR(v[i], v_exp, 1e-8) << "v0 = " << v0[i];
    EXPECT_EQ(r.text("events")[i], std::to_string(events)) << "v0 = " << v0[i];
  }
}

// The bead's polar angle th (from +x, counter-clockwise) on a ring of
// radius R: R th'' = -g cos th - mu sgn(th') |g sin th - R th'^2| (the normal
// force per mass is g sin th - R th'^2). Integrated independently of ukb:
// RK4 with a tiny step and the sliding direction frozen over each step (so
// the field is smooth), the zero of th' located on the cubic Hermite
// interpolant of the step; at rest the bead sticks where |cot th| <= mu, else
// it slides off towards the bottom.
struct Rest {
  double theta, t;
};

Rest ring_reference(double mu, double R, double th, double w) {
  const double h = 1e-4;
  double t = 0;
  auto f = [&](double a, double b, double s) {
    return (-kG * std::cos(a) - mu * s * std::abs(kG * std::sin(a) - R * b * b)) / R;
  };
  for (int guard = 0; guard < 10000000; ++guard) {
    double s = w > 0 ? 1 : w < 0 ? -1 : 0;
    if (s == 0) {
      if (std::abs(std::cos(th)) <= mu * std::abs(std::sin(th))) return {th, t};
      s = -std::cos(th) > 0 ? 1 : -1;  // the impending motion
    }
    const double k1a = w, k1b = f(th, w, s);
    const double k2a = w + 0.5 * h * k1b, k2b = f(th + 0.5 * h * k1a, w + 0.5 * h * k1b, s);
    const double k3a = w + 0.5 * h * k2b, k3b = f(th + 0.5 * h * k2a, w + 0.5 * h * k2b, s);
    const double k4a = w + h * k3b, k4b = f(th + h * k3a, w + h * k3b, s);
    const double th1 = th + h / 6 * (k1a + 2 * k2a + 2 * k3a + k4a);
    const double w1 = w + h / 6 * (k1b + 2 * k2b + 2 * k3b + k4b);
    if (w1 * s > 0) {
      th = th1, w = w1, t += h;
      continue;
    }
    // Hermite cubic through (w, w') at both ends; its zero by bisection.
    const double d0 = f(th, w, s), d1 = f(th1, w1, s);
    auto herm = [&](double y0, double y1, double m0, double m1, double x) {
      const double u = x / h, u2 = u * u, u3 = u2 * u;
      return (2 * u3 - 3 * u2 + 1) * y0 + (u3 - 2 * u2 + u) * h * m0 + (-2 * u3 + 3 * u2) * y1 +
             (u3 - u2) * h * m1;
    };
    double lo = 0, hi = h;
    for (int it = 0; it < 80; ++it) {
      const double mid = 0.5 * (lo + hi);
      (herm(w, w1, d0, d1, mid) * s > 0 ? lo : hi) = mid;
    }
    th = herm(th, th1, w, w1, lo);
    w = 0;
    t += lo;
  }
  ADD_FAILURE() << "the reference bead never came to rest";
  return {th, t};
}

// The beads of a ring run released level with the centre (R = 1) rest at
// the independent integrator's angle and time to within tol, where static
// friction holds them (|cot theta| <= mu).
void expect_rests_as_the_independent_integrator(const Csv& r, double tol) {
  const std::vector<double> mu = r.num("mu"), th = r.num("theta_final"), ts = r.num("t_stop");
  for (std::size_t i = 0; i < mu.size(); ++i) {
    ASSERT_EQ(r.text("status")[i], "at_rest") << mu[i];
    const Rest ref = ring_reference(mu[i], 1.0, 0.0, 0.0);
    EXPECT_NEAR(th[i], ref.theta, tol) << "mu = " << mu[i];
    EXPECT_NEAR(ts[i], ref.t, tol) << "mu = " << mu[i];
    EXPECT_LE(std::abs(std::cos(th[i])), mu[i] * std::abs(std::sin(th[i])));
  }
}

TEST(StickSlip, RingRestingAngleAndTimeMatchAnIndependentIntegrator) {
  Config c = config(ring_toml(6, "", "[0.05, 0.1, 0.2, 0.3, 0.4, 0.5]"));
  c.run.dt = 0.001;
  expect_rests_as_the_independent_integrator(Csv(run_into(c, "ring") / "results.csv"), 1e-9);
}

TEST(StickSlip, RingRestingAngleAndTimeWithAdaptiveStepsMatchTheIndependentIntegrator) {
  // The same beads with dopri5 (events on the dense output, or by trial
  // steps): to 1e-8 at rtol = 1e-12 (the angles are within 1e-10; an
  // instant of rest moves by the velocity's error over the deceleration).
  std::string toml = ring_toml(6, "", "[0.05, 0.1, 0.2, 0.3, 0.4, 0.5]");
  toml.replace(toml.find("dt = 0.01\n"), 10, "method = \"dopri5\"\nrtol = 1e-12\natol = 1e-14\n");
  expect_rests_as_the_independent_integrator(Csv(run_into(config(toml), "ring_dopri5") / "results.csv"), 1e-8);
}

TEST(StickSlip, ABeadReleasedAtRestStaysWhereStaticFrictionHoldsIt) {
  // Released at rest: where |cot theta| <= mu the handler keeps the bead
  // there for good (at_rest at t = 0, nothing moved); elsewhere it slides.
  using Mo = models::BeadOnRing<double>;
  const double thetas[4] = {-1.4, -1.7, -2.0, -0.9};  // |cot| = 0.17, 0.13, 0.46, 0.79
  Batch<Mo> b(4);
  for (int i = 0; i < 4; ++i) {
    Mo::Params p{};
    p.mu = 0.5;
    b.set_params(i, p);
    const double q[2] = {std::cos(thetas[i]), std::sin(thetas[i])}, qd[2] = {0, 0};
    b.set_state(i, q, qd);
  }
  for (Backend be : {Backend::cpu, Backend::reference}) {
    Batch<Mo> c = b;
    EXPECT_EQ(integrate(c, be, {.dt = 0.01, .t_end = 0.5}).active, 0);
    for (int i = 0; i < 4; ++i) {
      const bool holds = std::abs(std::cos(thetas[i])) <= 0.5 * std::abs(std::sin(thetas[i]));
      EXPECT_EQ(c.status(i), holds ? Status::at_rest : Status::ok) << thetas[i];
      EXPECT_EQ(c.events(i), 1) << thetas[i];
      if (holds) {
        EXPECT_EQ(c.t_stop(i), 0.0);
        EXPECT_EQ(c.q(i, 0), b.q(i, 0));
        EXPECT_EQ(c.q(i, 1), b.q(i, 1));
        EXPECT_EQ(c.steps(i), 0);
      } else {
        EXPECT_GT(std::abs(c.q(i, 0) - b.q(i, 0)), 1e-3) << "slides";
      }
    }
  }
}

// ---- outputs -------------------------------------------------------------------

TEST(Outputs, TablesSummaryAndTrajectoriesAgreeWithEachOther) {
  Config c = config(ring_toml(400) + "[output]\nrecord = [0, 3, 399]\nrecord_every = 7\nhistogram_bins = 9\n");
  const fs::path dir = run_into(c, "out");
  for (const char* f : {"results.csv", "results.npy", "summary.json", "trajectories.csv", "run.json"}) {
    EXPECT_TRUE(fs::exists(dir / f)) << f;
    EXPECT_FALSE(fs::exists(dir / (std::string(f) + ".tmp"))) << f;
  }
  const Csv res(dir / "results.csv");
  ASSERT_EQ(res.rows.size(), 400u);

  // summary.json: counts per status and the statistics of theta_final,
  // recomputed here from the table.
  const nlohmann::json sum = nlohmann::json::parse(slurp(dir / "summary.json"));
  std::map<std::string, long> counts;
  for (const std::string& s : res.text("status")) counts[s]++;
  for (const auto& [s, k] : counts) EXPECT_EQ(sum["status_counts"][s].get<long>(), k) << s;
  std::vector<double> th = res.num("theta_final");
  std::sort(th.begin(), th.end());
  const nlohmann::json& st = sum["observables"]["theta_final"]["successful"];
  EXPECT_EQ(st["count"].get<std::size_t>(), th.size());
  EXPECT_DOUBLE_EQ(st["quantiles"]["p50"].get<double>(), 0.5 * (th[199] + th[200]));
  EXPECT_DOUBLE_EQ(st["min"].get<double>(), th.front());
  EXPECT_DOUBLE_EQ(st["max"].get<double>(), th.back());
  long hist = 0;
  for (const auto& k : st["histogram"]["counts"]) hist += k.get<long>();
  EXPECT_EQ(hist, 400);
  EXPECT_EQ(st["histogram"]["counts"].size(), 9u);
  // by_status: the statistics of each status's own rows; here every sample
  // is at rest (the rows of "successful"), and with t_end = 3 some are
  // finished and some at rest (each status's own rows).
  auto by_status_agrees = [](const fs::path& d) {
    const Csv t(d / "results.csv");
    const nlohmann::json js = nlohmann::json::parse(slurp(d / "summary.json"));
    const std::vector<std::string> status = t.text("status");
    const std::vector<double> theta = t.num("theta_final");
    const std::set<std::string> seen(status.begin(), status.end());
    for (const std::string& s : seen) {
      std::vector<double> own;
      for (std::size_t i = 0; i < theta.size(); ++i)
        if (status[i] == s && std::isfinite(theta[i])) own.push_back(theta[i]);
      std::sort(own.begin(), own.end());
      const nlohmann::json& b = js["observables"]["theta_final"]["by_status"][s];
      EXPECT_EQ(b["count"].get<std::size_t>(), own.size()) << s;
      if (own.empty() || b["count"].get<std::size_t>() != own.size()) continue;
      EXPECT_DOUBLE_EQ(b["min"].get<double>(), own.front()) << s;
      EXPECT_DOUBLE_EQ(b["max"].get<double>(), own.back()) << s;
      const double h = (static_cast<double>(own.size()) - 1) / 2;
      const auto m = static_cast<std::size_t>(h);
      EXPECT_DOUBLE_EQ(b["quantiles"]["p50"].get<double>(),
                       m + 1 < own.size() ? own[m] + (h - static_cast<double>(m)) * (own[m + 1] - own[m]) : own[m])
          << s;
    }
    return seen.size();
  };
  EXPECT_EQ(by_status_agrees(dir), 1u);
  Config shorter = c;
  shorter.run.t_end = 3.0;
  EXPECT_EQ(by_status_agrees(run_into(shorter, "out_t3")), 2u) << "finished and at_rest";

  // trajectories.csv: each recorded sample starts at the initial state and
  // ends exactly where results.csv says (a run split into calls of
  // record_every steps is the same run).
  const Csv tr(dir / "trajectories.csv");
  for (long sample : {0L, 3L, 399L}) {
    std::vector<std::size_t> rows;
    for (std::size_t i = 0; i < tr.rows.size(); ++i)
      if (tr.rows[i][tr.at("sample")] == std::to_string(sample)) rows.push_back(i);
    ASSERT_GE(rows.size(), 3u) << sample;
    EXPECT_EQ(tr.rows[rows.front()][tr.at("t")], "0");
    const auto& last = tr.rows[rows.back()];
    const auto& final = res.rows[static_cast<std::size_t>(sample)];
    EXPECT_EQ(last[tr.at("t")], final[res.at("t_final")]) << sample;
    EXPECT_EQ(last[tr.at("theta")], final[res.at("theta_final")]) << sample;
    EXPECT_EQ(last[tr.at("q_x")], final[res.at("q_x_final")]) << sample;
    EXPECT_EQ(last[tr.at("status")], final[res.at("status")]) << sample;
  }

  // results.npy: a structured array with the table's columns and rows.
  const std::string npy = slurp(dir / "results.npy");
  ASSERT_EQ(npy.substr(0, 6), "\x93NUMPY");
  const std::size_t hlen = static_cast<unsigned char>(npy[8]) + 256u * static_cast<unsigned char>(npy[9]);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  const std::string header = npy.substr(10, hlen);
  for (const std::string& name : res.names) EXPECT_NE(header.find("('" + name + "'"), std::string::npos) << name;
  EXPECT_NE(header.find("'shape': (400,)"), std::string::npos);
  const std::size_t record = (npy.size() - 10 - hlen) / 400;
  EXPECT_EQ((npy.size() - 10 - hlen) % 400, 0u);
  // sample (int64), mu (double), status (bytes), t_final (double): check row 5.
  const char* row = npy.data() + 10 + hlen + 5 * record;
  std::int64_t idx;
  double mu;
  std::memcpy(&idx, row, 8);
  std::memcpy(&mu, row + 8, 8);
  EXPECT_EQ(idx, 5);
  EXPECT_EQ(mu, res.num("mu")[5]);

  const nlohmann::json rj = nlohmann::json::parse(slurp(dir / "run.json"));
  EXPECT_EQ(rj["seed"].get<std::uint64_t>(), 7u);
  EXPECT_EQ(rj["version"].get<std::string>(), ukb::version);
  EXPECT_EQ(rj["config"]["params"]["mu"]["dist"].get<std::string>(), "uniform");
  EXPECT_EQ(rj["config"]["output"]["dir"].get<std::string>(), dir.string()) << "where the run wrote";
  EXPECT_GT(rj["wall_seconds"].get<double>(), 0.0);
}

TEST(Outputs, SummaryStatisticsAreThoseOfTheSortedValues) {
  // summary.json's min, max and quantiles (numpy's linear interpolation
  // between order statistics) against a full sort, for every size up to 300
  // and a subset of the rows: values with and without ties, non-finite ones left out.
  std::mt19937_64 rng(11);
  for (std::size_t n = 1; n <= 300; ++n) {
    std::vector<double> all(n + 7);
    // Odd sizes: continuous values (no ties); even: half-integers (many
    // ties); multiples of 4: small integers (more ties), of 12: integers
    // over a wide range.
    for (double& x : all) {
      x = std::normal_distribution<double>(0.0, 3.0)(rng);
      if (n % 2 == 0) x = std::round(x) / 2;
      if (n % 4 == 0) x = std::round(x * (n % 12 == 0 ? 1e5 : 1.0)) + 0.0;
    }
    all[n % all.size()] = std::numeric_limits<double>::quiet_NaN();
    all[(n * 7) % all.size()] = -std::numeric_limits<double>::infinity();
    std::vector<std::size_t> rows;
    for (std::size_t r = 0; r < all.size(); ++r)
      if (r % 5 != 3) rows.push_back(r);
    std::vector<double> s;
    for (std::size_t r : rows)
      if (std::isfinite(all[r])) s.push_back(all[r]);
    const nlohmann::json j = run::stats(all, rows, 6);
    ASSERT_EQ(j["count"].get<std::size_t>(), s.size()) << n;
    if (s.empty()) continue;
    std::sort(s.begin(), s.end());
    EXPECT_EQ(j["min"].get<double>(), s.front()) << n;
    EXPECT_EQ(j["max"].get<double>(), s.back()) << n;
    for (const auto& [key, p] : std::vector<std::pair<std::string, double>>{
             {"p01", 1}, {"p05", 5}, {"p25", 25}, {"p50", 50}, {"p75", 75}, {"p95", 95}, {"p99", 99}}) {
      // numpy.percentile's arithmetic (numpy 1.22 on, method 'linear'): the
      // fraction p / 100 first, then from the nearer order statistic.
      const double h = (static_cast<double>(s.size()) - 1) * (p / 100);
      const auto k = static_cast<std::size_t>(h);
      const double g = h - static_cast<double>(k);
      const double want = k + 1 >= s.size() ? s[k]
                          : g >= 0.5        ? s[k + 1] - (s[k + 1] - s[k]) * (1 - g)
                                            : s[k] + (s[k + 1] - s[k]) * g;
      EXPECT_EQ(j["quantiles"][key].get<double>(), want) << "n = " << n << ", " << key;
    }
    // The mean within an ulp or so of the exact one (a long double sum of
    // at most 300 values is exact to far below a double's ulp here), and in
    // [min, max].
    long double exact = 0;
    for (double x : s) exact += x;
    exact /= static_cast<long double>(s.size());
    const double mean = j["mean"].get<double>();
    EXPECT_LE(std::abs(static_cast<long double>(mean) - exact), 2.0L * std::numeric_limits<double>::epsilon() *
                                                                      std::max(1.0L, std::abs(exact)))
        << n;
    EXPECT_TRUE(mean >= s.front() && mean <= s.back()) << n;
    // Each value in the bin whose edges hold it: edges[b] <= x < edges[b + 1],
    // the last bin closed; the edges as numpy.linspace(min, max, 7).
    const auto edges = j["histogram"]["edges"].get<std::vector<double>>();
    const auto counts = j["histogram"]["counts"].get<std::vector<long>>();
    ASSERT_EQ(edges.size(), 7u);
    ASSERT_EQ(counts.size(), 6u);
    const double w = (s.back() - s.front()) / 6;
    for (std::size_t b = 0; b < 6; ++b) EXPECT_EQ(edges[b], s.front() + static_cast<double>(b) * w) << n;
    EXPECT_EQ(edges[6], s.back());
    if (w > 0) {
      for (std::size_t b = 0; b < 6; ++b) {
        const long own = std::count_if(s.begin(), s.end(), [&](double x) {
          return x >= edges[b] && (b == 5 ? x <= edges[6] : x < edges[b + 1]);
        });
        EXPECT_EQ(counts[b], own) << "n = " << n << ", bin " << b;
      }
    } else {
      EXPECT_EQ(counts[0], static_cast<long>(s.size())) << n;  // one value: every one in the first bin
    }
  }
}

TEST(Outputs, QuantilesOfLargeColumnsAreThoseOfTheSortedValues) {
  // Columns large enough for the counted order statistics (more than 4096
  // values): spread evenly, over many decades, with a far outlier that puts
  // nearly every value into one bucket, with many ties, integers, and
  // nearly all equal; each quantile against a full sort, bit for bit.
  std::mt19937_64 rng(12);
  std::normal_distribution<double> z(0.0, 1.0);
  const std::vector<std::pair<std::string, std::function<double(std::size_t)>>> kinds = {
      {"normal", [&](std::size_t) { return z(rng); }},
      {"lognormal over decades", [&](std::size_t) { return std::exp(8 * z(rng)); }},
      {"one far outlier", [&](std::size_t i) { return i == 17 ? 1e300 : z(rng) * 1e-6; }},
      {"ties", [&](std::size_t) { return std::round(z(rng) * 20) / 100; }},
      {"integers", [&](std::size_t) { return std::round(std::abs(z(rng)) * 3); }},
      {"nearly all equal", [&](std::size_t i) { return i % 1000 == 5 ? 2.5 : 0.125; }},
  };
  for (const std::size_t n : {4097u, 100000u, 262147u})
    for (const auto& [kind, draw] : kinds) {
      std::vector<double> all(n);
      for (std::size_t i = 0; i < n; ++i) all[i] = draw(i);
      std::vector<std::size_t> rows(n);
      std::iota(rows.begin(), rows.end(), std::size_t{0});
      const nlohmann::json j = run::stats(all, rows, 10);
      std::vector<double> s = all;
      std::sort(s.begin(), s.end());
      EXPECT_EQ(j["min"].get<double>(), s.front()) << kind << ", n = " << n;
      EXPECT_EQ(j["max"].get<double>(), s.back()) << kind << ", n = " << n;
      for (const auto& [key, p] : std::vector<std::pair<std::string, double>>{
               {"p01", 1}, {"p05", 5}, {"p25", 25}, {"p50", 50}, {"p75", 75}, {"p95", 95}, {"p99", 99}}) {
        const double h = (static_cast<double>(n) - 1) * (p / 100);
        const auto k = static_cast<std::size_t>(h);
        const double g = h - static_cast<double>(k);
        const double want = k + 1 >= n ? s[k]
                            : g >= 0.5 ? s[k + 1] - (s[k + 1] - s[k]) * (1 - g)
                                       : s[k] + (s[k + 1] - s[k]) * g;
        EXPECT_EQ(j["quantiles"][key].get<double>(), want) << kind << ", n = " << n << ", " << key;
      }
    }
}

TEST(Outputs, SummaryStatisticsOfValuesOnEdgesConstantColumnsAndExtremes) {
  auto of = [](const std::vector<double>& v, int bins) {
    std::vector<std::size_t> rows(v.size());
    std::iota(rows.begin(), rows.end(), std::size_t{0});
    return run::stats(v, rows, bins);
  };
  // A sweep's grid on the edges: 0.7 lies below the edge 35 * 0.02 =
  // 0.70000000000000007 and 0.82 below 41 * 0.02; numpy.histogram counts
  // 0.58 in bin 29, 0.7 in bin 34 and 0.82 in bin 40 (bin 28 holds
  // [0.56, 0.58)).
  const nlohmann::json grid = of({0.0, 0.58, 0.7, 0.82, 1.0}, 50);
  const auto counts = grid["histogram"]["counts"].get<std::vector<long>>();
  ASSERT_EQ(counts.size(), 50u);
  for (std::size_t b = 0; b < 50; ++b)
    EXPECT_EQ(counts[b], b == 0 || b == 29 || b == 34 || b == 40 || b == 49 ? 1 : 0) << b;
  // A constant column: its value as the mean, to the last bit, and std 0 (a
  // plain sum of 20000 copies of 0.65000000000000013 was 1600 ulps below).
  const nlohmann::json flat = of(std::vector<double>(20000, 0.6500000000000001), 10);
  EXPECT_EQ(flat["mean"].get<double>(), 0.6500000000000001);
  EXPECT_EQ(flat["std"].get<double>(), 0.0);
  EXPECT_EQ(flat["histogram"]["counts"][0].get<long>(), 20000);
  // Values near the largest double: the sum, the squares and max - min
  // overflow, the statistics do not.
  const nlohmann::json huge = of({-1e308, 1e308, 0.5, 1.0}, 4);
  EXPECT_EQ(huge["mean"].get<double>(), 0.375);
  EXPECT_NEAR(huge["std"].get<double>() / (1e308 * std::sqrt(2.0 / 3.0)), 1.0, 1e-15);
  EXPECT_EQ(huge["histogram"]["edges"].get<std::vector<double>>(),
            (std::vector<double>{-1e308, -5e307, 0.0, 5e307, 1e308}));
  EXPECT_EQ(huge["histogram"]["counts"].get<std::vector<long>>(), (std::vector<long>{1, 0, 2, 1}));
  EXPECT_EQ(huge["quantiles"]["p50"].get<double>(), 0.75);
  // A sum that overflows (the values do not cancel): the mean of the
  // values scaled down.
  const double big = std::numeric_limits<double>::max();
  const nlohmann::json over = of({big, big, 1.0}, 3);
  EXPECT_NEAR(over["mean"].get<double>() / (big / 3 * 2), 1.0, 1e-15);
  // Tiny values: their squared deviations underflow, the std does not.
  const nlohmann::json tiny = of({1e-300, 3e-300}, 2);
  EXPECT_NEAR(tiny["std"].get<double>() / (std::sqrt(2.0) * 1e-300), 1.0, 1e-15);
  EXPECT_EQ(tiny["mean"].get<double>(), 2e-300);
}

TEST(Outputs, ANpyOfThousandsOfColumnsTakesTheFourByteHeaderOfFormat2) {
  // The NPY format (numpy.lib.format): version 1.0 has a 2-byte header
  // length, so a header over 65535 bytes (a model file with thousands of
  // columns) needs version 2.0, with 4 bytes; the data start 64-byte aligned
  // in both. Two tables, 2 rows each: 3 columns and 4000.
  for (const std::size_t ncols : {std::size_t{3}, std::size_t{4000}}) {
    run::Table t;
    t.status = {static_cast<std::int32_t>(Status::ok), static_cast<std::int32_t>(Status::at_rest)};
    t.status_at = 1;
    for (std::size_t k = 0; k < ncols; ++k) {
      run::Column col;
      col.name = "column_with_a_long_name_" + std::to_string(k);
      col.d = {static_cast<double>(k), -static_cast<double>(k) - 0.5};
      t.cols.push_back(col);
    }
    std::ostringstream os;
    run::write_npy(os, t);
    const std::string npy = os.str();
    ASSERT_EQ(npy.substr(0, 6), "\x93NUMPY");
    const bool v2 = ncols > 1000;
    EXPECT_EQ(npy[6], v2 ? 2 : 1) << ncols;
    EXPECT_EQ(npy[7], 0);
    std::size_t hlen = 0, at = v2 ? 12 : 10;
    for (std::size_t b = 0; b < at - 8; ++b) hlen |= std::size_t(static_cast<unsigned char>(npy[8 + b])) << (8 * b);
    EXPECT_EQ((at + hlen) % 64, 0u) << ncols;
    EXPECT_EQ(npy[at + hlen - 1], '\n');
    const std::string header = npy.substr(at, hlen);
    EXPECT_NE(header.find("'shape': (2,)"), std::string::npos);
    EXPECT_NE(header.find("('column_with_a_long_name_" + std::to_string(ncols - 1) + "', '<f8')"), std::string::npos);
    // Each row: the first column, the status (|S8: "finished", "at_rest" and a zero byte), the others.
    const std::size_t record = 8 * ncols + 8;
    ASSERT_EQ(npy.size(), at + hlen + 2 * record) << ncols;
    double last;
    std::memcpy(&last, npy.data() + at + hlen + record + record - 8, 8);
    EXPECT_EQ(last, -static_cast<double>(ncols - 1) - 0.5);
    EXPECT_EQ(npy.substr(at + hlen + record + 8, 7), "at_rest");
  }
}

TEST(Outputs, NumbersAreWrittenAsPrintfWritesThemWith17Digits) {
  // run::g17 (every real of results.csv, trajectories.csv and messages)
  // writes a double as printf("%.17g") does, which round-trips it: any bit
  // pattern, subnormals, the extremes, signed zeros, then NaN and infinities
  // as words.
  std::mt19937_64 g(17);
  std::vector<double> xs = {0.0, -0.0, 0.1, -2.5, 1e21, 1e-5, 123456789012345678.0,
                            std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::min(),
                            std::numeric_limits<double>::max(), -std::numeric_limits<double>::max()};
  while (xs.size() < 200000) {
    const std::uint64_t bits = g();
    double x;
    std::memcpy(&x, &bits, sizeof x);
    if (std::isfinite(x)) xs.push_back(x);
    xs.push_back(std::uniform_real_distribution<double>(-10, 10)(g));
  }
  int differ = 0;
  for (double x : xs) {
    char want[40];
    std::snprintf(want, sizeof want, "%.17g", x);
    const std::string got = run::g17(x);
    differ += got != want;
    if (got != want && differ < 5) ADD_FAILURE() << got << " vs printf's " << want;
    if (differ == 0 && std::strtod(got.c_str(), nullptr) != x) ADD_FAILURE() << got << " does not read back as " << want;
  }
  EXPECT_EQ(differ, 0);
  EXPECT_EQ(run::g17(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(run::g17(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(run::g17(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(Outputs, NoProgressLineWhenStderrIsNotATerminal) {
  const std::string cfg = unique_path("c.toml"), dir = unique_path("o");
  std::ofstream(cfg) << ring_toml(50);
  const CliRun r = run_cli("run " + cfg + " --out " + dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("50 at_rest"), std::string::npos) << r.out;
}

// A model with many natural quantities (planar_chain_12: 24) prints the
// medians of the first 12 on stdout, each as summary.json has it, and says
// how many more summary.json holds.
TEST(Outputs, StdoutShowsTheFirstTwelveMediansAndCountsTheRest) {
  const std::string cfg = unique_path("c.toml"), dir = unique_path("o");
  std::ofstream(cfg) << "model = \"planar_chain_12\"\nsamples = 3\n[integrator]\ndt = 0.01\nt_end = 0.05\n"
                        "[initial]\ntheta1 = [0.1, 0.2, 0.3]\n";
  const CliRun r = run_cli("run " + cfg + " --out " + dir + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json sum = nlohmann::json::parse(slurp(fs::path(dir) / "summary.json"));
  std::istringstream lines(r.out);
  std::vector<std::string> shown;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("  median ", 0) == 0) shown.push_back(line.substr(9));
  ASSERT_EQ(shown.size(), 12u) << r.out;
  for (int k = 0; k < 12; ++k) {
    const std::string name = "theta" + std::to_string(k + 1) + "_final";
    ASSERT_EQ(shown[k].rfind(name + " = ", 0), 0u) << shown[k];
    const double want = sum["observables"][name]["successful"]["quantiles"]["p50"].get<double>();
    EXPECT_NEAR(std::stod(shown[k].substr(name.size() + 3)), want, 1e-8 * std::max(1.0, std::abs(want))) << name;
  }
  for (int k = 1; k <= 12; ++k)
    EXPECT_TRUE(sum["observables"]["omega" + std::to_string(k) + "_final"]["successful"].contains("quantiles"));
  EXPECT_NE(r.out.find("  (12 more medians in summary.json)\n"), std::string::npos) << r.out;
}

TEST(Outputs, TheEndShowsTheLargestResidualsAndWarnsOfUnconvergedProjections) {
  // The line "largest constraint residuals" gives the largest res_pos_max
  // and res_vel_max of results.csv; a warning on stderr counts the samples
  // with projection failures, and there is none where no sample has one.
  // The ring with projection at tol = 1e-15 and one correction per level:
  // no correction reaches that tolerance; at the defaults every one does
  // (StabilisedRunsRecord... below).
  auto largest = [](const std::string& out) {
    const std::string head = "  largest constraint residuals: position ";
    const std::size_t at = out.find(head);
    EXPECT_NE(at, std::string::npos) << out;
    if (at == std::string::npos) return std::pair{-1.0, -1.0};
    std::size_t used = 0;
    const double pos = std::stod(out.substr(at + head.size()), &used);
    const std::size_t v = out.find(", velocity ", at + head.size() + used);
    EXPECT_EQ(v, at + head.size() + used) << out;
    return std::pair{pos, std::stod(out.substr(v + 11))};
  };
  auto max_of = [](const std::vector<double>& v) {
    double m = 0;
    for (double x : v) worst_of(m, x);
    return m;
  };
  for (const std::string tol : {"1e-15", ""}) {
    SCOPED_TRACE(tol.empty() ? "defaults" : "tol = " + tol);
    const std::string cfg = unique_path("c" + tol + ".toml"), dir = unique_path("o" + tol);
    std::string stab = "[stabilization]\nmethod = \"projection\"\n";
    if (!tol.empty()) stab += "tol = " + tol + "\nmax_iter = 1\n";
    std::ofstream(cfg) << ring_toml(6) + stab;
    const CliRun r = run_cli("run " + cfg + " --out " + dir + " --quiet");
    ASSERT_EQ(r.code, 0) << r.err;
    const Csv f(fs::path(dir) / "results.csv");
    const auto [pos, vel] = largest(r.out);
    EXPECT_NEAR(pos, max_of(f.num("res_pos_max")), 1e-8 * max_of(f.num("res_pos_max"))) << r.out;
    EXPECT_NEAR(vel, max_of(f.num("res_vel_max")), 1e-8 * max_of(f.num("res_vel_max"))) << r.out;
    long failing = 0;
    for (double x : f.num("projection_failures")) failing += x > 0;
    if (tol.empty()) {
      EXPECT_EQ(failing, 0);
      EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
    } else {
      EXPECT_EQ(failing, 6);
      EXPECT_NE(r.err.find("ukb run: warning: 6 of 6 samples had projections that did not reach stabilization.tol"),
                std::string::npos)
          << r.err;
    }
  }
  // A coarse step drifts off the ring (RK4 without stabilisation: the
  // residual grows like dt^4): the line shows it, taken over every sample
  // (here none is successful: all stop at max_steps, still swinging).
  const std::string cfg = unique_path("coarse.toml"), dir = unique_path("coarse");
  const std::string fine = ring_toml(4, "", "0.05");
  std::string text = fine;
  text.replace(text.find("dt = 0.01"), 9, "dt = 0.2\nmax_steps = 40");
  std::ofstream(cfg) << text;
  const CliRun coarse = run_cli("run " + cfg + " --out " + dir + " --quiet");
  ASSERT_EQ(coarse.code, 0) << coarse.err;
  const Csv c(fs::path(dir) / "results.csv");
  EXPECT_EQ(c.text("status"), std::vector<std::string>(4, "max_steps"));
  EXPECT_NEAR(largest(coarse.out).first, max_of(c.num("res_pos_max")), 1e-8 * max_of(c.num("res_pos_max")))
      << coarse.out;
  const std::string cfg_fine = unique_path("fine.toml");
  std::ofstream(cfg_fine) << fine;
  const CliRun small = run_cli("run " + cfg_fine + " --out " + dir + "-fine --quiet");
  ASSERT_EQ(small.code, 0) << small.err;
  EXPECT_GT(largest(coarse.out).first, 1e3 * largest(small.out).first) << coarse.out << small.out;
}

TEST(Outputs, ContradictingConstraintRowsAreCountedAndWarnedOf) {
  // The redundant pendulum's rows, x x'' + y y'' = -(x'^2 + y'^2) and
  // (x x'' + y y'') / r = -(x'^2 + y'^2 - r'^2) / r, agree exactly where the
  // radial velocity r' is zero. Released off the ring with r' = 0.89 (the
  // raw state admitted by initial.tolerance), every step's evaluations find
  // them contradicting over 50 steps: the column counts each step, and a
  // warning names the samples. On the ring with a tangential velocity
  // (r' = 0): no count, no warning.
  for (const bool off : {true, false}) {
    SCOPED_TRACE(off ? "off the ring, r' = 0.89" : "on the ring, r' = 0");
    const std::string cfg = unique_path(off ? "off.toml" : "on.toml"), dir = unique_path(off ? "off" : "on");
    std::ofstream(cfg) << "model = \"redundant_pendulum\"\nsamples = 4\n[integrator]\ndt = 1e-3\nt_end = 0.05\n"
                       << (off ? "[initial]\nq = [0.3, -1.3]\nqd = [0.5, -0.8]\ntolerance = 10.0\n"
                               : "[initial]\nq = [0.6, -0.8]\nqd = [0.8, 0.6]\n");
    const CliRun r = run_cli("run " + cfg + " --out " + dir + " --quiet");
    ASSERT_EQ(r.code, 0) << r.err;
    const Csv f(fs::path(dir) / "results.csv");
    EXPECT_EQ(f.text("status"), std::vector<std::string>(4, "finished"));
    EXPECT_EQ(f.num("steps"), std::vector<double>(4, 50.0));
    EXPECT_EQ(f.num("inconsistent"), std::vector<double>(4, off ? 50.0 : 0.0));
    if (off) {
      EXPECT_NE(r.err.find("ukb run: warning: 4 of 4 samples had steps with contradicting constraint rows (column "
                           "'inconsistent')"),
                std::string::npos)
          << r.err;
    } else {
      EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
    }
  }
}

TEST(Outputs, FilesOfOutputNamesAreRemovedOnlyWhereAnEarlierRunWroteThem) {
  // A directory of the user's holding files named as outputs this run does
  // not write (trajectories.csv, crosscheck.json): they stay. A directory
  // holding a completed run (its run.json): its outputs that the new run
  // does not write go (they would seem to belong to it).
  const fs::path mine = unique_path("users_dir");
  fs::remove_all(mine);
  fs::create_directories(mine);
  std::ofstream(mine / "trajectories.csv") << "the user's data\n";
  std::ofstream(mine / "crosscheck.json") << "{}\n";
  Config c = config(ring_toml(20));
  run::execute(c, {.out_dir = mine.string()});
  EXPECT_EQ(slurp(mine / "trajectories.csv"), "the user's data\n");
  EXPECT_EQ(slurp(mine / "crosscheck.json"), "{}\n");
  EXPECT_TRUE(fs::exists(mine / "results.npy") && fs::exists(mine / "run.json"));
  // Now it holds a run, whose run.json lists what it wrote: a CSV-only run
  // removes that run's results.npy, and still not the user's files.
  const nlohmann::json first = nlohmann::json::parse(slurp(mine / "run.json"));
  EXPECT_EQ(first["outputs"], nlohmann::json({"results.csv", "results.npy", "summary.json", "run.json"}));
  c.write_npy = false;
  run::execute(c, {.out_dir = mine.string()});
  EXPECT_FALSE(fs::exists(mine / "results.npy"));
  EXPECT_TRUE(fs::exists(mine / "results.csv"));
  EXPECT_EQ(slurp(mine / "trajectories.csv"), "the user's data\n");
  EXPECT_EQ(slurp(mine / "crosscheck.json"), "{}\n");
  // A directory under an output's name is refused before any work, and
  // neither it nor anything else is touched.
  const fs::path taken = unique_path("taken_dir");
  fs::remove_all(taken);
  fs::create_directories(taken / "summary.json" / "x");
  fs::create_directories(taken / "results.npy");
  try {
    run::execute(c, {.out_dir = taken.string()});
    ADD_FAILURE() << "no error";
  } catch (const run::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("results.npy' is a directory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(taken / "summary.json" / "x"));
  EXPECT_TRUE(fs::is_directory(taken / "results.npy"));
  EXPECT_FALSE(fs::exists(taken / "checkpoint.ukb"));
  EXPECT_FALSE(fs::exists(taken / "results.csv"));
}

TEST(Outputs, ResultsWithTwoColumnsOfOneNameAreRefusedBeforeAnyWork) {
  // Names that pass name_problems one by one but whose columns meet: a
  // natural quantity 'q_x' (its column q_x_final) beside the coordinate x.
  Config c = config(ring_toml(10));
  ModelInfo M = *c.model;
  M.initial_names = {"q_x", "omega"};
  c.model = &M;
  const fs::path dir = unique_path("two_columns");
  fs::remove_all(dir);
  try {
    run::execute(c, {.out_dir = dir.string()});
    ADD_FAILURE() << "no error";
  } catch (const run::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("would have two columns named 'q_x_final'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir)) << "nothing left behind";
}

TEST(Outputs, TheTextTableIsWrittenByDefaultUpToItsSampleLimitAndWhenAsked) {
  // One step each (t_end = dt), so that 10^5 samples take a fraction of a second.
  const long at = run::csv_default_samples;
  auto toml = [](long samples, const std::string& output) {
    return "model = \"bead_on_ring\"\nsamples = " + std::to_string(samples) +
           "\nseed = 7\nthreads = 2\n[integrator]\ndt = 0.01\nt_end = 0.01\n[params]\nmu = 0.3\n"
           "[initial]\ntheta = 0.0\nomega = 0.0\n" + output;
  };
  Config c = config(toml(at, ""));
  EXPECT_TRUE(c.write_csv && c.write_npy && !c.formats_given);
  c = config(toml(at + 1, ""));
  EXPECT_FALSE(c.write_csv);
  EXPECT_TRUE(c.write_npy);
  c = config(toml(at + 1, "[output]\nformats = [\"csv\", \"npy\"]\n"));
  EXPECT_TRUE(c.write_csv && c.write_npy && c.formats_given);
  c = config(toml(3, "[output]\nformats = [\"npy\"]\n"));
  EXPECT_FALSE(c.write_csv);
  // What a run above the limit writes, and what it says.
  const std::string cfg = unique_path("big.toml");
  std::ofstream(cfg) << toml(at + 1, "");
  const fs::path dir = unique_path("big_out");
  fs::remove_all(dir);
  const CliRun r = run_cli("run " + cfg + " --out " + dir.string() + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir / "results.csv"));
  EXPECT_TRUE(fs::exists(dir / "results.npy"));
  EXPECT_NE(r.out.find("no results.csv by default above " + std::to_string(at) + " samples"), std::string::npos)
      << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(dir / "run.json"));
  EXPECT_EQ(j["config"]["output"]["formats"], nlohmann::json({"npy"}));
  EXPECT_EQ(j["outputs"], nlohmann::json({"results.npy", "summary.json", "run.json"}));
  // run.json says where the samples phase went: each part within it.
  double parts = 0;
  for (const char* k : {"record", "states", "integrate", "rows", "merge"}) {
    ASSERT_TRUE(j["samples_seconds"].contains(k)) << k;
    EXPECT_GE(j["samples_seconds"][k].get<double>(), 0.0) << k;
    parts += j["samples_seconds"][k].get<double>();
  }
  EXPECT_LE(parts, j["phase_seconds"]["samples"].get<double>() + 1e-9);
  EXPECT_GT(j["samples_seconds"]["integrate"].get<double>(), 0.0);
}

TEST(Outputs, StepLimitAndFailedSamplesHaveTheirStatusAndStayOutOfTheStatistics) {
  // A ring bead released at omega = 50 drifts off the ring by about 1e-3
  // in 50 steps of 0.01 (omega 0 and 5: below 1e-6): with residual_limit =
  // 1e-3 it fails, alone, at its last step within the limit; the others keep
  // their results. With a finite t_end that is not reached in max_steps
  // steps, the status is max_steps; without a finite t_end, max_steps steps
  // is a finished run.
  const std::string cfg = unique_path("c.toml"), dir = unique_path("o");
  std::ofstream(cfg) << "model = \"bead_on_ring\"\nsamples = 6\n[integrator]\ndt = 0.01\nt_end = 10.0\n"
                        "max_steps = 50\nresidual_limit = 1e-3\n[params]\nmu = 0.05\n"
                        "[initial]\ntheta = 0.0\nomega = [0.0, 50.0, 5.0]\n"
                        "[output]\nformats = [\"npy\"]\n";
  const CliRun r = run_cli("run " + cfg + " --out " + dir + " --quiet");
  EXPECT_EQ(r.code, 1) << r.err;  // some sample failed; the outputs are written
  EXPECT_FALSE(fs::exists(fs::path(dir) / "results.csv"));
  ASSERT_TRUE(fs::exists(fs::path(dir) / "results.npy"));
  const nlohmann::json sum = nlohmann::json::parse(slurp(fs::path(dir) / "summary.json"));
  EXPECT_EQ(sum["status_counts"]["failed_residual"].get<int>(), 2);
  EXPECT_EQ(sum["status_counts"]["max_steps"].get<int>(), 4);
  // max_steps is neither finished nor at_rest: no successful sample.
  EXPECT_EQ(sum["observables"]["t_final"]["successful"]["count"].get<int>(), 0);
  EXPECT_NEAR(sum["observables"]["t_final"]["by_status"]["max_steps"]["min"].get<double>(), 0.5, 1e-12);
  // The failed samples stopped before 0.5 with their largest residual
  // within the limit, and t_stop is the time of that last good state.
  const nlohmann::json& failed = sum["observables"];
  EXPECT_LT(failed["t_final"]["by_status"]["failed_residual"]["max"].get<double>(), 0.5);
  EXPECT_GT(failed["t_final"]["by_status"]["failed_residual"]["min"].get<double>(), 0.0);
  EXPECT_EQ(failed["t_stop"]["by_status"]["failed_residual"]["max"], failed["t_final"]["by_status"]["failed_residual"]["max"]);
  EXPECT_LE(failed["res_vel_max"]["by_status"]["failed_residual"]["max"].get<double>(), 1e-3);
  EXPECT_LE(failed["res_pos_max"]["by_status"]["failed_residual"]["max"].get<double>(), 1e-3);

  Config c = config(ring_toml(3) + "");
  c.run.t_end = std::numeric_limits<double>::infinity();
  c.run.max_steps = 20;
  c.params[3].dist = Dist{};  // mu = 0: never at rest
  const Csv f(run_into(c, "inf") / "results.csv");
  EXPECT_EQ(f.text("status"), (std::vector<std::string>{"finished", "finished", "finished"}));
  EXPECT_EQ(f.text("steps"), (std::vector<std::string>{"20", "20", "20"}));
}

TEST(Outputs, StabilisedRunsRecordTheirSettingsAndCountersAndAgreeWithTheUnstabilisedRun) {
  // The demo's ring with each stabilisation: the resting angles agree with
  // the run without (to the integration error), projection failures and
  // rank drops are counted (none here), run.json states the resolved settings.
  const Csv plain(run_into(config(ring_toml(20)), "none") / "results.csv");
  EXPECT_EQ(plain.text("rank_drops"), std::vector<std::string>(20, "0"));
  EXPECT_EQ(std::find(plain.names.begin(), plain.names.end(), "projection_failures"), plain.names.end());
  for (const char* method : {"baumgarte", "projection"}) {
    SCOPED_TRACE(method);
    const fs::path dir =
        run_into(config(ring_toml(20) + "[stabilization]\nmethod = \"" + method + "\"\n"), method);
    const Csv f(dir / "results.csv");
    EXPECT_EQ(f.text("status"), std::vector<std::string>(20, "at_rest"));
    for (std::size_t r = 0; r < 20; ++r)
      EXPECT_NEAR(std::stod(f.text("theta_final")[r]), std::stod(plain.text("theta_final")[r]), 1e-6);
    EXPECT_EQ(f.text("rank_drops"), std::vector<std::string>(20, "0"));
    const nlohmann::json run = nlohmann::json::parse(slurp(dir / "run.json"));
    const nlohmann::json& s = run["config"]["stabilization"];
    EXPECT_EQ(s["method"], method);
    if (std::string(method) == "projection") {
      EXPECT_EQ(f.text("projection_failures"), std::vector<std::string>(20, "0"));
      EXPECT_EQ(s["tol"].get<double>(), policy::default_projection_tol<double>());
      EXPECT_EQ(s["max_iter"].get<int>(), 4);
      for (const std::string& x : f.text("res_pos_max")) EXPECT_LT(std::stod(x), 1e-12);
    } else {
      EXPECT_EQ(s["alpha"].get<double>(), policy::default_baumgarte_rate);
      EXPECT_EQ(s["gamma"].get<double>(), policy::default_baumgarte_rate);
    }
  }
}

TEST(Outputs, TheExampleConfigsAreValid) {
  int found = 0;
  for (const auto& e : fs::directory_iterator(fs::path(UKB_SOURCE_DIR) / "examples")) {
    if (e.path().extension() != ".toml") continue;
    ++found;
    const Config c = run::load_config(e.path().string());
    EXPECT_GE(c.samples, 1) << e.path();
  }
  EXPECT_GE(found, 2);
}

TEST(Outputs, PlotScriptDrawsHistogramsScattersAndTrajectories) {
  if (std::system("/usr/bin/python3 -c 'import numpy, matplotlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3-numpy and python3-matplotlib are missing (scripts/install_deps.sh installs them)";
  Config c = config(ring_toml(200) + "[output]\nrecord = [0, 1]\nrecord_every = 10\n");
  const fs::path dir = run_into(c, "plots");
  const std::string cmd = "/usr/bin/python3 " + std::string(UKB_SOURCE_DIR) + "/scripts/plot.py " +
                          dir.string() + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  for (const char* png : {"hist_theta_final.png", "hist_t_stop.png", "scatter_theta_final_vs_mu.png",
                          "scatter_t_stop_vs_mu.png", "trajectories.png"}) {
    const std::string bytes = slurp(dir / "plots" / png);
    EXPECT_GT(bytes.size(), 1000u) << png;
    EXPECT_EQ(bytes.substr(0, 4), "\x89PNG") << png;
  }
}

// ---- bad input -------------------------------------------------------------------

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
      {"zero first step", with("dt = 0.01", "method = \"dopri5\"\ndt = 0.0"), {"integrator.dt", "expected a first trial step > 0"}},
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
       {"stabilization.alpha", "applies to method = \"baumgarte\" only"}},
      {"negative Baumgarte rate", base + "[stabilization]\nmethod = \"baumgarte\"\nbeta = -1.0\n",
       {"stabilization.beta", "expected a rate >= 0"}},
      {"Baumgarte too stiff for dt", base + "[stabilization]\nmethod = \"baumgarte\"\nalpha = 60.0\n",
       {"'stabilization'", "too fast", "expected at most 1"}},
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

// ---- checkpoints and resume ------------------------------------------------

// A ring run of `samples` samples in chunks of 40, checkpointing after every
// chunk, with sweep axes and a recorded sample (so every output is made).
std::string resumable_toml(long samples, const std::string& top = "") {
  return top + ring_toml(samples, "chunk = 40\n") +
         "[output]\ncheckpoint_interval = 0.0\nrecord = [3]\nrecord_every = 500\n";
}

TEST(Resume, AnInterruptedRunResumesToBitwiseTheSameOutputs) {
  const Config c = config(resumable_toml(300));
  const fs::path whole = run_into(c, "whole");
  const std::string csv = slurp(whole / "results.csv"), npy = slurp(whole / "results.npy"),
                    sum = slurp(whole / "summary.json"), traj = slurp(whole / "trajectories.csv");
  ASSERT_GT(csv.size(), 1000u);
  EXPECT_FALSE(fs::exists(whole / "checkpoint.ukb")) << "a complete run removes its checkpoint";
  // Stop after 1, 3 and 7 chunks (40 samples each); resume with other
  // threads and chunk sizes, which do not change the results.
  for (long stop_after : {1L, 3L, 7L}) {
    SCOPED_TRACE("stop after " + std::to_string(stop_after) + " chunks");
    const fs::path dir = unique_path("part" + std::to_string(stop_after));
    fs::remove_all(dir);
    std::atomic<int> stop{0};
    long chunks = 0;
    const run::Outcome o = run::execute(
        c, {.out_dir = dir.string(), .stop = &stop, .after_chunk = [&](long) { stop = ++chunks >= stop_after ? 1 : 0; }});
    ASSERT_TRUE(o.interrupted);
    EXPECT_EQ(o.done, 40 * stop_after);
    EXPECT_TRUE(fs::exists(dir / "checkpoint.ukb"));
    EXPECT_FALSE(fs::exists(dir / "results.csv")) << "an interrupted run writes only its checkpoint";
    const run::Checkpoint k = run::read_checkpoint(dir / "checkpoint.ukb");
    EXPECT_EQ(k.header.done, 40 * stop_after);
    Config again = c;
    again.threads = 2, again.chunk = 17 * stop_after;
    const run::Outcome r = run::execute(again, {.out_dir = dir.string(), .resume = true});
    EXPECT_FALSE(r.interrupted);
    EXPECT_EQ(slurp(dir / "results.csv"), csv);
    EXPECT_EQ(slurp(dir / "results.npy"), npy);
    EXPECT_EQ(slurp(dir / "summary.json"), sum);
    EXPECT_EQ(slurp(dir / "trajectories.csv"), traj);
    EXPECT_FALSE(fs::exists(dir / "checkpoint.ukb"));
  }
  // Interrupted twice: the second run continues the first checkpoint and
  // writes its own.
  const fs::path dir = unique_path("twice");
  fs::remove_all(dir);
  std::atomic<int> stop{0};
  const auto once = [&](long) { stop = 1; };
  EXPECT_TRUE(run::execute(c, {.out_dir = dir.string(), .stop = &stop, .after_chunk = once}).interrupted);
  stop = 0;
  const run::Outcome second = run::execute(c, {.out_dir = dir.string(), .resume = true, .stop = &stop, .after_chunk = once});
  EXPECT_TRUE(second.interrupted);
  EXPECT_EQ(second.done, 80);
  run::execute(c, {.out_dir = dir.string(), .resume = true});
  EXPECT_EQ(slurp(dir / "results.csv"), csv);
}

TEST(Resume, AStopWhileTheRecordedSamplesRunKeepsACheckpointAndResumes) {
  // The recorded samples run first; a stop request there (here before the
  // run starts: seen after the first call of record_every steps) ends the
  // run with a checkpoint of nothing done, no trajectories.csv, and a resume
  // gives the files of an uninterrupted run.
  Config c = config(ring_toml(40) + "[output]\nrecord = [0, 5]\nrecord_every = 10\n");
  const fs::path whole = run_into(c, "rec_whole");
  const fs::path cut = unique_path("rec_cut");
  fs::remove_all(cut);
  std::atomic<int> stop{1};
  const run::Outcome o = run::execute(c, {.out_dir = cut.string(), .stop = &stop});
  EXPECT_TRUE(o.interrupted);
  EXPECT_EQ(o.done, 0);
  EXPECT_TRUE(fs::exists(cut / "checkpoint.ukb"));
  EXPECT_FALSE(fs::exists(cut / "trajectories.csv"));
  EXPECT_FALSE(fs::exists(cut / "results.csv"));
  run::execute(c, {.out_dir = cut.string(), .resume = true});
  for (const char* f : {"results.csv", "results.npy", "summary.json", "trajectories.csv"})
    EXPECT_EQ(slurp(cut / f), slurp(whole / f)) << f;
}

TEST(Resume, AnInterruptedAdaptiveRunResumesToBitwiseTheSameOutputs) {
  // dopri5 with trajectories at fixed times: stopped after 2 chunks of 40,
  // resumed with other threads and chunks, the files of the whole run.
  const Config c = config(ring_dopri5_toml(200, "chunk = 40\n") +
                          "[output]\ncheckpoint_interval = 0.0\nrecord = [3]\nrecord_dt = 0.25\n");
  const fs::path whole = run_into(c, "whole");
  const fs::path dir = unique_path("part");
  fs::remove_all(dir);
  std::atomic<int> stop{0};
  long chunks = 0;
  ASSERT_TRUE(run::execute(c, {.out_dir = dir.string(), .stop = &stop, .after_chunk = [&](long) {
                             stop = ++chunks >= 2 ? 1 : 0;
                           }}).interrupted);
  Config again = c;
  again.threads = 2, again.chunk = 33;
  EXPECT_FALSE(run::execute(again, {.out_dir = dir.string(), .resume = true}).interrupted);
  for (const char* f : {"results.csv", "results.npy", "summary.json", "trajectories.csv"})
    EXPECT_EQ(slurp(dir / f), slurp(whole / f)) << f;
}

// examples/sleigh_heading.toml (fewer samples) runs: every sample
// finishes on the blade (its sideways speed stays at round-off), starts with
// the energy of its natural initial quantities, E = m (v^2 + a^2 w^2)/2 +
// I w^2/2, and loses energy only to the blade's resistance (none without it).
TEST(Examples, TheSleighConfigRunsAndItsEnergyGoesOnlyToTheBlade) {
  Config c = run::load_config(std::string(UKB_SOURCE_DIR) + "/examples/sleigh_heading.toml");
  c.samples = 200;
  const auto rows = read_csv(run_into(c, "sleigh") / "results.csv");
  const double m = 1, I = 0.1, a = 0.2, v = 0.2, w = 3;
  const double E0 = 0.5 * m * (v * v + a * a * w * w) + 0.5 * I * w * w;
  int resisted = 0;
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("status"), "finished");
    const double start = std::stod(row.at("energy_start")), end = std::stod(row.at("energy_end"));
    const double lost = std::stod(row.at("energy_dissipated")), cr = std::stod(row.at("c"));
    EXPECT_NEAR(start, E0, 1e-14);
    EXPECT_NEAR(start - end, lost, 1e-14);
    EXPECT_LE(end, start + 1e-12);
    if (cr > 0.05) {
      EXPECT_GT(lost, 0.1 * E0) << "c = " << cr;
    }
    resisted += cr > 0.05;
    EXPECT_LT(std::stod(row.at("res_vel_max")), 1e-8);
  }
  EXPECT_EQ(rows.size(), 200u);
  EXPECT_GT(resisted, 150);
}

// The demo's config (fewer samples, smaller chunks): stopped after its second
// chunk and resumed, it gives the uninterrupted run's results.csv.
// The demo config's outputs on the cpu backend's SIMD lanes (lanes refilled
// as samples come to rest, events located in the pack) are those of the
// scalar path, one sample at a time, byte for byte.
TEST(Examples, TheDemoConfigGivesTheSameFilesOnPacksAsOneSampleAtATime) {
  Config c = run::load_config(std::string(UKB_SOURCE_DIR) + "/examples/ring_friction.toml");
  c.samples = sanitized_shorter(3000, 10), c.chunk = 1000, c.threads = 2;
  const fs::path packs = unique_path("packs"), one = unique_path("one");
  run::execute(c, {.out_dir = packs.string()});
  run::execute(c, {.out_dir = one.string(), .simd = false});
  for (const char* f : {"results.csv", "trajectories.csv"}) {
    const std::string a = slurp(packs / f);
    ASSERT_GT(a.size(), 1000u) << f;
    EXPECT_EQ(a, slurp(one / f)) << f;
  }
  const Csv r(packs / "results.csv");
  const std::vector<double> steps = r.num("steps"), events = r.num("events");
  EXPECT_GT(*std::max_element(steps.begin(), steps.end()), 2 * *std::min_element(steps.begin(), steps.end()))
      << "guard: samples of very different lengths";
  EXPECT_GT(*std::max_element(events.begin(), events.end()), 2) << "guard: located events";
}

TEST(Resume, TheDemoConfigInterruptedAndResumedGivesTheSameResults) {
  Config c = run::load_config(std::string(UKB_SOURCE_DIR) + "/examples/ring_friction.toml");
  c.samples = 2000, c.chunk = 300, c.record = {0, 1};
  const std::string csv = slurp(run_into(c, "whole") / "results.csv");
  const fs::path dir = unique_path("part");
  fs::remove_all(dir);
  std::atomic<int> stop{0};
  long chunks = 0;
  const run::Outcome o =
      run::execute(c, {.out_dir = dir.string(), .stop = &stop, .after_chunk = [&](long) { stop = ++chunks == 2 ? 1 : 0; }});
  ASSERT_TRUE(o.interrupted);
  EXPECT_EQ(o.done, 600);
  run::execute(c, {.out_dir = dir.string(), .resume = true});
  EXPECT_EQ(slurp(dir / "results.csv"), csv);
}

// Signals at random instants, by the CLI: SIGINT or SIGTERM finishes the
// chunk, writes the checkpoint and exits 130 / 143 saying how to continue;
// `ukb run --resume DIR` then gives the uninterrupted run's results.csv.
// The process is spawned directly (a shell would start a background job
// with SIGINT ignored), and each signal comes a random 0-0.3 s after its
// first checkpoint exists (checkpoint_interval = 0), so that it lands in the
// run whatever the machine's speed.
TEST(Resume, SignalsAtRandomInstantsThenResumeGiveTheSameResults) {
  const std::string cfg = unique_path("c.toml");
  // About 1 s in a Release build (a quarter of the samples under the
  // sanitizers, which run 10x slower).
  std::ofstream(cfg) << resumable_toml(sanitized ? 1000 : 4000, "threads = 1\n");
  const std::string whole = unique_path("whole");
  fs::remove_all(whole);
  ASSERT_EQ(run_cli("run " + cfg + " --out " + whole + " --quiet").code, 0);
  const std::string csv = slurp(fs::path(whole) / "results.csv");
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int> delay_ms(0, 300);
  int interrupted = 0, trial = 0;
  for (int sig : {SIGINT, SIGTERM, SIGINT, SIGTERM}) {
    const std::string dir = unique_path("sig" + std::to_string(trial++));
    fs::remove_all(dir);
    const std::string err = unique_path("err.txt");
    std::vector<std::string> args = {UKB_CLI_PATH, "run", cfg, "--out", dir, "--quiet"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, UKB_CLI_PATH, &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    // Until the first checkpoint (or the end of the process).
    int status = 0;
    bool ended = false;
    while (!fs::exists(fs::path(dir) / "checkpoint.ukb") && !ended) {
      ended = waitpid(pid, &status, WNOHANG) == pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const int ms = delay_ms(rng);
    if (!ended) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      kill(pid, sig);
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
    }
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << ": " << slurp(err);
    const int code = WEXITSTATUS(status);
    SCOPED_TRACE(std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + " " + std::to_string(ms) +
                 " ms after the first checkpoint: exit " + std::to_string(code));
    if (code == 0) {  // finished before the signal came
      EXPECT_EQ(slurp(fs::path(dir) / "results.csv"), csv);
      continue;
    }
    ++interrupted;
    EXPECT_EQ(code, sig == SIGINT ? 130 : 143) << slurp(err);
    EXPECT_NE(slurp(err).find("continue with: ukb run --resume " + dir), std::string::npos) << slurp(err);
    EXPECT_NE(slurp(err).find("stopping: finishing the current chunk, then writing a checkpoint"), std::string::npos)
        << "the first signal says what it does: " << slurp(err);
    EXPECT_FALSE(fs::exists(fs::path(dir) / "results.csv"));
    const CliRun r = run_cli("run --resume " + dir + " --quiet");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(slurp(fs::path(dir) / "results.csv"), csv);
  }
  EXPECT_GE(interrupted, 2) << "guard: the signals land in the runs";
}

// FNV-1a 64 of a byte string, written here independently of the checkpoint
// code, to forge checkpoints whose checksum is right.
std::string fnv_trailer(const std::string& bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  char t[32];
  std::snprintf(t, sizeof t, "FNV1A64 %016llx\n", static_cast<unsigned long long>(h));
  return t;
}

// The trailer of checkpoints since FNV64WX: FNV-1a's step on the
// little-endian 64-bit words of the bytes (the last one zero-padded), then
// on the byte count, each step followed by h ^= h >> 32; written here
// independently of the checkpoint code.
std::string fnv_words_trailer(const std::string& bytes) {
  std::string b = bytes;
  b.resize((b.size() + 7) / 8 * 8, '\0');
  std::uint64_t h = 1469598103934665603ULL;
  auto word = [&](std::uint64_t w) {
    h = (h ^ w) * 1099511628211ULL;
    h ^= h >> 32;
  };
  for (std::size_t i = 0; i < b.size(); i += 8) {
    std::uint64_t w = 0;
    for (int k = 7; k >= 0; --k) w = (w << 8) | static_cast<unsigned char>(b[i + static_cast<std::size_t>(k)]);
    word(w);
  }
  word(bytes.size());
  char t[32];
  std::snprintf(t, sizeof t, "FNV64WX %016llx\n", static_cast<unsigned long long>(h));
  return t;
}

TEST(Resume, HangupAndCpuLimitSignalsStopWithACheckpointToo) {
  // SIGHUP (a closed terminal) and SIGXCPU (a CPU-time limit) as SIGTERM:
  // the chunk finishes, a checkpoint, exit 128 + the signal, the signal
  // named; the resumed run completes. SIGXCPU is sent twice (the kernel
  // repeats it): the second does not end the process.
  const std::string cfg = unique_path("hup.toml");
  std::ofstream(cfg) << ring_toml(40000, "chunk = 500\n") << "[output]\ncheckpoint_interval = 0.0\n";
  for (const auto& [name, kill] : {std::pair<std::string, std::string>{"SIGHUP", "kill -HUP $p"},
                                   {"SIGXCPU", "kill -XCPU $p; kill -XCPU $p"}}) {
    SCOPED_TRACE(name);
    const fs::path dir = unique_path("hup_" + name);
    fs::remove_all(dir);
    const CliRun r = run_cli("--version >/dev/null; { " + std::string(UKB_CLI_PATH) + " run " + cfg + " --out " +
                             dir.string() + " --quiet --threads 1 & p=$!; k=0; while [ ! -e " + dir.string() +
                             "/checkpoint.ukb ] && [ $k -lt 2400 ]; do sleep 0.02; k=$((k+1)); done; " + kill +
                             "; wait $p; }");
    EXPECT_EQ(r.code, name == "SIGHUP" ? 128 + SIGHUP : 128 + SIGXCPU) << r.err;
    EXPECT_NE(r.err.find("interrupted by " + name), std::string::npos) << r.err;
    ASSERT_TRUE(fs::exists(dir / "checkpoint.ukb"));
    EXPECT_EQ(run_cli("run --resume " + dir.string() + " --quiet").code, 0);
    EXPECT_TRUE(fs::exists(dir / "results.npy"));
  }
}

TEST(Resume, AnOutputDirectoryRemovedDuringTheRunIsAWriteError) {
  // The directory removed after the first checkpoint: the next one cannot
  // be written: exit 4 (a write error, not bad input), said so.
  const std::string cfg = unique_path("gone.toml");
  std::ofstream(cfg) << ring_toml(40000, "chunk = 500\n") << "[output]\ncheckpoint_interval = 0.0\n";
  const fs::path dir = unique_path("gone");
  fs::remove_all(dir);
  const CliRun r = run_cli("--version >/dev/null; { " + std::string(UKB_CLI_PATH) + " run " + cfg + " --out " +
                           dir.string() + " --quiet --threads 1 & p=$!; k=0; while [ ! -e " + dir.string() +
                           "/checkpoint.ukb ] && [ $k -lt 2400 ]; do sleep 0.02; k=$((k+1)); done; rm -rf " +
                           dir.string() + "; wait $p; }");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("the output directory '" + dir.string() + "' no longer exists"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nothing was kept"), std::string::npos) << r.err;
}

TEST(Resume, ASignalBeforeTheRunStartsEndsItWithNothingWritten) {
  // SIGTERM while the config is read (a FIFO no one writes: its open
  // blocks, the kernel's wait_for_partner, after the handlers are set):
  // exit 143, said as a stop before the run started, not as
  // "finishing the current chunk" or a config that cannot be read; no
  // output directory made.
  const fs::path fifo = unique_path("fifo.toml"), dir = unique_path("early");
  fs::remove(fifo);
  fs::remove_all(dir);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const CliRun r = run_cli("--version >/dev/null; { " + std::string(UKB_CLI_PATH) + " run " + fifo.string() +
                           " --out " + dir.string() + " --quiet & p=$!; k=0; while [ \"$(cat /proc/$p/wchan 2>/dev/null)\" "
                           "!= wait_for_partner ] && [ $k -lt 1000 ]; do sleep 0.01; k=$((k+1)); done; kill -TERM $p; "
                           "wait $p; }");
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.err;
  EXPECT_NE(r.err.find("the run has not started"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("interrupted by SIGTERM before the run started; nothing was written"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("finishing the current chunk"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("cannot read"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir));
  fs::remove(fifo);
}

TEST(Resume, FnvWordsTellsTwoFlippedTopBitsApart) {
  // Words 0 and 5 of a buffer with their top bits flipped: FNV-1a's step on
  // whole words, (h ^ w) * P, carries a difference in bit 63 unchanged to
  // the end, so two such flips cancel; the checkpoints' checksum (the step,
  // then h ^= h >> 32) tells the buffers apart.
  std::vector<unsigned char> a(64), b;
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<unsigned char>(37 * i + 11);
  b = a;
  b[7] ^= 0x80;
  b[5 * 8 + 7] ^= 0x80;
  auto plain = [](const std::vector<unsigned char>& x) {
    std::uint64_t h = 1469598103934665603ULL;
    for (std::size_t i = 0; i < x.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, x.data() + i, 8);
      h = (h ^ w) * 1099511628211ULL;
    }
    return h;
  };
  EXPECT_EQ(plain(a), plain(b)) << "guard: the pattern defeats the plain word step";
  run::FnvWords fa, fb;
  fa.add(a.data(), a.size());
  fb.add(b.data(), 13);  // in pieces: the words straddle them
  fb.add(b.data() + 13, b.size() - 13);
  EXPECT_NE(fa.hex(), fb.hex());
  run::FnvWords fa2;
  fa2.add(a.data(), 13);
  fa2.add(a.data() + 13, a.size() - 13);
  EXPECT_EQ(fa.hex(), fa2.hex()) << "the same bytes in other pieces: the same sum";
}

TEST(Resume, DamagedForeignOrMismatchedCheckpointsAreRefused) {
  const std::string cfg = unique_path("c.toml"), dir = unique_path("o");
  std::ofstream(cfg) << resumable_toml(200);
  fs::remove_all(dir);
  {
    std::atomic<int> stop{0};
    const Config c = run::load_config(cfg);
    ASSERT_TRUE(run::execute(c, {.out_dir = dir, .stop = &stop, .after_chunk = [&](long) { stop = 1; }}).interrupted);
  }
  const fs::path file = fs::path(dir) / "checkpoint.ukb";
  const std::string good = slurp(file);
  ASSERT_GT(good.size(), 25u);
  EXPECT_EQ(good.substr(good.size() - 25), fnv_words_trailer(good.substr(0, good.size() - 25)));
  auto refused = [&](const std::string& what, const std::string& content, const std::string& args,
                     const std::vector<std::string>& expect) {
    SCOPED_TRACE(what);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << content;
    const CliRun r = run_cli(args);
    EXPECT_EQ(r.code, 2) << r.err;
    for (const std::string& e : expect) EXPECT_NE(r.err.find(e), std::string::npos) << r.err;
    EXPECT_EQ(slurp(file), content) << "a refused checkpoint is left as it was";
    EXPECT_FALSE(fs::exists(fs::path(dir) / "results.csv"));
  };
  const std::string resume = "run --resume " + dir + " --quiet";
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x10;
  refused("a flipped bit", flipped, resume, {file.string(), "corrupted (checksum mismatch)", "cannot be resumed"});
  // The top bits of two of the checksum's words flipped (words count from
  // the file's start; these two are in the body's last columns): FNV-1a's
  // multiply alone carries such differences only upwards, and two cancel
  // (FnvWordsTellsTwoFlippedTopBitsApart has the arithmetic).
  std::string negated = good;
  const std::size_t top = (good.size() - 25 - 400) / 8 * 8 + 7;
  negated[top] ^= static_cast<char>(0x80);
  negated[top - 320] ^= static_cast<char>(0x80);
  refused("two top bits flipped", negated, resume, {"corrupted (checksum mismatch)"});
  refused("truncated", good.substr(0, good.size() - 100), resume, {"truncated"});
  refused("empty", "", resume, {"not a ukb checkpoint"});
  refused("not a checkpoint", "model = \"bead_on_ring\"\n", resume, {"not a ukb checkpoint"});
  // Another version (the checksum is right: written by the format's writer).
  std::ofstream(file, std::ios::binary | std::ios::trunc) << good;
  run::Checkpoint k = run::read_checkpoint(file);
  k.header.version = "0.0.9";
  run::write_checkpoint(file, k.header, k.cols, k.status);
  refused("another version", slurp(file), resume, {"written by ukb 0.0.9", "this is ukb"});
  // Forged headers with a right checksum: a huge sample count, a negative
  // one, a non-number (no allocation, no crash: exit 2).
  const std::string body = good.substr(0, good.size() - 25);
  auto forged = [&](const std::string& from, const std::string& to) {
    std::string b = body;
    const std::size_t at = b.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    b.replace(at, from.size(), to);
    // The header's length line must follow the header's new length.
    const std::size_t nl1 = b.find('\n'), nl2 = b.find('\n', nl1 + 1);
    const long hlen = std::stol(good.substr(nl1 + 1, nl2 - nl1 - 1)) + static_cast<long>(to.size()) -
                      static_cast<long>(from.size());
    b.replace(nl1 + 1, nl2 - nl1 - 1, std::to_string(hlen));
    return b + fnv_trailer(b);
  };
  refused("done = 1e15", forged("\"done\":40", "\"done\":1000000000000000"), resume,
          {"damaged (done > samples)"});
  refused("done = samples, 40 rows stored", forged("\"done\":40", "\"done\":200"), resume,
          {"size does not match its header"});
  refused("done = -1", forged("\"done\":40", "\"done\":-1"), resume, {"damaged (done)"});
  refused("done = 4.5", forged("\"done\":40", "\"done\":4.5"), resume, {"damaged (done)"});
  // Forged fields with a right checksum (the format's own writer): a status
  // code no run gives, a negative step count.
  {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << good;
    run::Checkpoint f = run::read_checkpoint(file);
    f.status[3] = 77;
    run::write_checkpoint(file, f.header, f.cols, f.status);
    refused("status 77", slurp(file), resume, {"sample 3 has the invalid status code 77"});
    std::ofstream(file, std::ios::binary | std::ios::trunc) << good;
    f = run::read_checkpoint(file);
    for (run::Column& c : f.cols)
      if (c.name == "steps") c.i[5] = -3;
    run::write_checkpoint(file, f.header, f.cols, f.status);
    refused("steps -3", slurp(file), resume, {"sample 5 has a negative count in column 'steps'"});
    // A stored input that is not what the config draws (results of other
    // inputs would be mixed in).
    std::ofstream(file, std::ios::binary | std::ios::trunc) << good;
    f = run::read_checkpoint(file);
    bool forged_mu = false;
    for (run::Column& c : f.cols)
      if (c.name == "mu") c.d[7] = 0.25, forged_mu = true;
    ASSERT_TRUE(forged_mu);
    run::write_checkpoint(file, f.header, f.cols, f.status);
    refused("an altered input", slurp(file), resume,
            {"sample 7's 'mu' is 0.25 in the checkpoint, but the config draws", "the checkpoint was altered"});
  }
  // Another config, another backend.
  const std::string other = unique_path("other.toml");
  std::string text = resumable_toml(200);
  text.replace(text.find("seed = 7"), 8, "seed = 8");
  std::ofstream(other) << text;
  refused("another config", good, "run " + other + " --resume " + dir + " --quiet",
          {"belongs to another config", "seed: 7 in the checkpoint, 8 now"});
  refused("another backend", good, resume + " --backend reference",
          {"belongs to another config", "backend: \"cpu\" in the checkpoint, \"reference\" now"});
  // A fresh run into the directory would overwrite the checkpoint.
  refused("a fresh run over a checkpoint", good, "run " + cfg + " --out " + dir + " --quiet",
          {"holds the checkpoint of an unfinished run", "ukb run --resume " + dir});
  // Nothing to resume.
  const std::string empty = unique_path("empty");
  fs::create_directories(empty);
  const CliRun none = run_cli("run --resume " + empty + " --quiet");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("holds no checkpoint"), std::string::npos) << none.err;
  // The same with the config given (it used to be found after every sample
  // was drawn, as "cannot read the checkpoint"); nothing is created.
  const std::string nowhere = unique_path("nowhere");
  fs::remove_all(nowhere);
  const CliRun none_cfg = run_cli("run " + cfg + " --resume " + nowhere + " --quiet");
  EXPECT_EQ(none_cfg.code, 2);
  EXPECT_NE(none_cfg.err.find("--resume: '" + nowhere + "' holds no checkpoint"), std::string::npos) << none_cfg.err;
  EXPECT_FALSE(fs::exists(nowhere));
  // The good checkpoint still resumes.
  std::ofstream(file, std::ios::binary | std::ios::trunc) << good;
  EXPECT_EQ(run_cli(resume).code, 0);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "results.csv"));
  // So does one of an earlier build, whose checksum is FNV-1a over the bytes,
  // to the same results.
  const std::string csv = slurp(fs::path(dir) / "results.csv");
  fs::remove(fs::path(dir) / "results.csv");
  std::ofstream(file, std::ios::binary | std::ios::trunc) << body + fnv_trailer(body);
  const CliRun earlier = run_cli(resume);
  EXPECT_EQ(earlier.code, 0) << earlier.err;
  EXPECT_EQ(slurp(fs::path(dir) / "results.csv"), csv);
}

}  // namespace
}  // namespace ukb::test
