// The output files (results, summary, trajectories, run.json, stdout)
// against each other and against the sorted values; the example configs.
#include "run/run_support.hpp"

namespace ukb::test {
namespace {

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
  // Zeros of both signs are one constant: a mean of +0 (numpy.mean's too),
  // std 0, every value in the first bin, quantiles 0.
  const nlohmann::json zeros = of({0.0, -0.0, -0.0, 0.0, -0.0}, 4);
  EXPECT_EQ(zeros["count"].get<long>(), 5);
  EXPECT_EQ(zeros["mean"].get<double>(), 0.0);
  EXPECT_FALSE(std::signbit(zeros["mean"].get<double>()));
  EXPECT_EQ(zeros["std"].get<double>(), 0.0);
  EXPECT_EQ(zeros["histogram"]["counts"].get<std::vector<long>>(), (std::vector<long>{5, 0, 0, 0}));
  EXPECT_EQ(zeros["min"].get<double>(), 0.0);
  EXPECT_EQ(zeros["max"].get<double>(), 0.0);
  for (const char* k : {"p01", "p50", "p99"}) EXPECT_EQ(zeros["quantiles"][k].get<double>(), 0.0) << k;
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

// The puck's example config: every puck launched across the slope (y'0 = 0)
// at v0 = 2 m/s with k = mu / tan(alpha) > 1 rests at
// t = k v0 / (g sin(alpha) (k^2 - 1)) (docs/models.md), found and finished
// by the friction helpers.
TEST(Examples, ThePuckConfigStopsEveryPuckWhenItsClosedFormSays) {
  Config c = run::load_config(std::string(UKB_SOURCE_DIR) + "/examples/puck_incline.toml");
  c.samples = 200;
  const auto rows = read_csv(run_into(c, "puck") / "results.csv");
  const double alpha = 0.3, a = 9.81 * std::sin(alpha), v0 = 2.0;
  double worst = 0;
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("status"), "at_rest");
    const double k = std::stod(row.at("mu")) / std::tan(alpha);
    worst_of(worst, std::abs(std::stod(row.at("t_stop")) - k * v0 / (a * (k * k - 1))));
  }
  EXPECT_EQ(rows.size(), 200u);
  EXPECT_LT(worst, 1e-8);
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

}  // namespace
}  // namespace ukb::test
