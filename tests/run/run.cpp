// `ukb run` as a whole: reproducibility across runs, threads, chunks and
// backends, adaptive steps, step limits, bad initial states; every
// documented default and rule against the code.
#include "run/run_support.hpp"

namespace ukb::test {
namespace {

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

TEST(Run, RecordedRowsStopWhereAHandlerJumpsTheTimeAndFollowThePath) {
  // record_dt with a handler that moves the time: the puck's stop event
  // fires `lookahead` ahead of the stop and finish_stop jumps to it. With a
  // look-ahead of 0.05 s every jump spans one output time of 0.02 s at
  // least. Rows: every multiple of 0.02 s up to the step that ended at the
  // event (none in the jumped stretch, whose length the closed forms bound
  // by lookahead k / (k - 1), k = mu / tan(alpha)), then the rest; each
  // row on the puck's path: k v + y' = k v0 + y'0 + a (1 - k^2) t
  // (docs/models.md) and on the plane.
  const std::string toml =
      "model = \"puck_incline\"\nsamples = 6\nseed = 5\n[integrator]\nmethod = \"dopri5\"\nrtol = 1e-10\n"
      "atol = 1e-12\nt_end = 3.0\n[params]\nalpha = 0.3\nlookahead = 0.05\n"
      "mu = { dist = \"uniform\", min = 0.45, max = 0.9 }\n[initial]\nspeed = 2.0\nheading = 1.5\n";
  const fs::path dir = run_into(config(toml + "[output]\nrecord = [0, 1, 2, 3, 4, 5]\nrecord_dt = 0.02\n"), "rec");
  EXPECT_EQ(slurp(dir / "results.csv"), slurp(run_into(config(toml), "plain") / "results.csv"));
  const Csv tr(dir / "trajectories.csv"), res(dir / "results.csv");
  const double alpha = 0.3, a = 9.81 * std::sin(alpha), v0 = 2.0, heading = 1.5, dt = 0.02;
  double worst_path = 0;
  for (long s = 0; s < 6; ++s) {
    SCOPED_TRACE("sample " + std::to_string(s));
    const double k = res.num("mu")[std::size_t(s)] / std::tan(alpha), t_stop = res.num("t_stop")[std::size_t(s)];
    EXPECT_EQ(res.text("status")[std::size_t(s)], "at_rest");
    std::vector<double> ts;
    std::string last;
    for (const auto& row : tr.rows) {
      if (std::stol(row[tr.at("sample")]) != s) continue;
      const double t = std::strtod(row[tr.at("t")].c_str(), nullptr);
      const double xd = std::strtod(row[tr.at("qd_x")].c_str(), nullptr);
      const double yd = std::strtod(row[tr.at("qd_y")].c_str(), nullptr);
      const double z = std::strtod(row[tr.at("q_z")].c_str(), nullptr);
      ts.push_back(t);
      last = row[tr.at("status")];
      if (last == "running") {
        const double lhs = k * std::hypot(xd, yd) + yd, rhs = k * v0 + v0 * std::cos(heading) + a * (1 - k * k) * t;
        worst_of(worst_path, std::abs(lhs - rhs) + std::abs(z));
      }
    }
    ASSERT_GE(ts.size(), 3u);
    EXPECT_EQ(last, "at_rest");
    EXPECT_EQ(ts.back(), t_stop);
    const long K = long(ts.size()) - 2;  // rows at 0, dt, ..., K dt, then the rest
    for (long j = 0; j <= K; ++j) EXPECT_EQ(ts[std::size_t(j)], dt * double(j)) << j;
    const long left_out = long(std::floor(t_stop / dt)) - K;
    EXPECT_GE(left_out, 1) << "the jumped stretch spans an output time";
    // The jump T from the event to the stop lies in [L k / (k + 1), L k / (k - 1)]
    // (L the look-ahead; T = L k (k + cos phi) / (k^2 - 1) at the event).
    EXPECT_GT(dt * double(K + 1), t_stop - 0.05 * k / (k - 1)) << "only outputs in the jumped stretch left out";
    EXPECT_LE(dt * double(K), t_stop - 0.05 * k / (k + 1)) << "no row inside the jumped stretch";
  }
  EXPECT_LT(worst_path, 1e-6);
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
      {"| `event_tol` | number > 0 | `1e-10` |", policy::default_event_tol == 1e-10},
      {"| `rank_rtol` | number in [0, 1) | 1e-10 (float: 1e-5) |",
       policy::default_rank_rtol<double>() == 1e-10 && policy::default_rank_rtol<float>() == 1e-5f},
      {"| `alpha` | number >= 0 | 10 |", policy::default_baumgarte_rate == 10.0},
      {"| `tol` | number in [1e-15, 1) | `1e-10` (float: 1e-5) |",
       policy::default_projection_tol<double>() == 1e-10 && policy::default_projection_tol<float>() == 1e-5},
      {"| `max_iter` | integer in [1, 100] | 4 |", policy::default_projection_iters == 4},
      {"| `dt_max` | number > 0 or inf | `inf` |", RunOptions{}.dt_max == std::numeric_limits<double>::infinity()},
      {"| `safety` | number in (0, 1] | 0.9 |", RunOptions{}.safety == policy::step_safety && policy::step_safety == 0.9},
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

TEST(Ensembles, SystemsSetFromManyThreadsAreThoseSetOneByOne) {
  // Ensemble::set may run on several threads for distinct systems (`ukb
  // run` sets its chunk so, and the fields' memory is first written there):
  // every field, and the integration after, as where one thread set them.
  const ModelInfo& M = *find_model("bead_on_ring");
  const int N = 4099;  // not a multiple of any SIMD width
  const std::size_t n = std::size_t(M.n), np = M.params.size();
  ASSERT_EQ(M.initial_names, (std::vector<std::string>{"theta", "omega"}));
  std::vector<double> P(std::size_t(N) * np), Q(std::size_t(N) * n), QD(std::size_t(N) * n);
  for (int i = 0; i < N; ++i) {
    double* p = P.data() + std::size_t(i) * np;
    for (std::size_t j = 0; j < np; ++j) p[j] = M.params[j].default_value;
    p[M.param_index("mu")] = 0.05 + 0.4 * i / N;
    const double ic[2] = {-3.0 + 6.0 * i / N, 2.0 - 4.0 * ((i * 7) % N) / N};  // theta, omega
    ASSERT_TRUE(M.initial_state(std::span<const double>(p, np), ic, &Q[n * std::size_t(i)], &QD[n * std::size_t(i)]));
  }
  auto set = [&](Ensemble& e, int i) {
    e.set(i, std::span<const double>(P.data() + std::size_t(i) * np, np), &Q[n * std::size_t(i)],
          &QD[n * std::size_t(i)], 0.25);
  };
  std::unique_ptr<Ensemble> one = M.ensemble(N, Backend::cpu), many = M.ensemble(N, Backend::cpu);
  for (int i = 0; i < N; ++i) set(*one, i);
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)  // interleaved: neighbouring systems (one cache line) from different threads
      threads.emplace_back([&, t] {
        for (int i = t; i < N; i += 4) set(*many, i);
      });
    for (std::thread& t : threads) t.join();
  }
  auto same = [&](const char* when) {
    for (const FieldInfo& f : field_table) {
      if (f.role != FieldRole::param && f.role != FieldRole::state && f.role != FieldRole::monitor) continue;
      const std::size_t rows = f.rows == 'n' ? n : f.rows == 'm' ? std::size_t(M.m) : f.rows == 'p' ? np : 1;
      const std::size_t bytes = rows * std::size_t(N) * (f.real ? 8 : std::size_t(f.bytes));
      const void* a = f.real ? static_cast<const void*>(one->real(f.field))
                      : f.bytes == 8 ? static_cast<const void*>(one->i64(f.field))
                                     : static_cast<const void*>(one->i32(f.field));
      const void* b = f.real ? static_cast<const void*>(many->real(f.field))
                      : f.bytes == 8 ? static_cast<const void*>(many->i64(f.field))
                                     : static_cast<const void*>(many->i32(f.field));
      EXPECT_EQ(std::memcmp(a, b, bytes), 0) << f.name << " " << when;
    }
  };
  same("after set");
  EXPECT_EQ(one->value(Field::t, N - 1), 0.25);
  EXPECT_EQ(one->value(Field::steps, N - 1), 0.0);
  EXPECT_TRUE(std::isnan(one->value(Field::t_stop, N - 1)));
  const RunOptions r{.dt = 1e-2, .t_end = 0.45};
  const EngineOptions o{.threads = 2};
  one->integrate(r, 100, o);
  many->integrate(r, 100, o);
  same("after 20 steps");
  EXPECT_EQ(one->value(Field::steps, 7), 20.0);
}

}  // namespace
}  // namespace ukb::test
