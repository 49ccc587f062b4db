// The `ukb` command line: the acceptance example of `ukb accel` against the
// hand-derived closed form, `ukb models`, `ukb trajectory` against the
// incline's analytic solution, and bad input (exit code 2, a message naming
// the problem, nothing on stdout).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_support.hpp"
#include "closed_forms.hpp"
#include "ukb/cuda.hpp"
#include "ukb/registry.hpp"

namespace ukb::test {
namespace {

TEST(Cli, AccelRingAcceptanceExampleMatchesClosedForm) {
  const CliRun r = run_cli(
      "accel --model bead_on_ring --param R=1.25 --param mu=0.25 --q 1.194170,0.369400 "
      "--qd -0.738801,2.388340");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"qdd", "Qc_ideal", "Qc_nonideal", "lambda", "rank", "status"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["rank"], 1);
  const Eigen::VectorXd expected = ring_closed_form(9.81, 0.25, 1.194170, 0.369400, -0.738801, 2.388340);
  ASSERT_EQ(j["qdd"].size(), 2u);
  for (int i = 0; i < 2; ++i)
    EXPECT_NEAR(j["qdd"][i].get<double>(), expected(i), 1e-12 * expected.norm()) << i;
  // Guard: friction matters here (it changes the acceleration visibly).
  const Eigen::VectorXd no_friction = ring_closed_form(9.81, 0.0, 1.194170, 0.369400, -0.738801, 2.388340);
  EXPECT_GT((expected - no_friction).norm(), 0.1);
}

TEST(Cli, AccelOfTheNonholonomicModelsIsThatOfTheirReducedEquations) {
  // Issue 20's acceptance, through `ukb accel` on both backends.
  auto qdd_of = [](const std::string& args) {
    const CliRun r = run_cli("accel " + args);
    EXPECT_EQ(r.code, 0) << args << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["status"], "ok") << args;
    return j["qdd"].get<std::vector<double>>();
  };
  for (const char* be : {"reference", "cpu"}) {
    SCOPED_TRACE(be);
    const std::string on = std::string(" --backend ") + be;
    {  // sleigh: v' = a w^2 + (F.e1 - c v)/m, (I + m a^2) w' = -m a v w + a F.e2
      const double m = 2, I = 0.3, a = 0.25, Fx = 0.7, Fy = -0.4, c = 0.6, th = 0.9, v = 1.3, w = -2.1;
      const double e1x = std::cos(th), e1y = std::sin(th);
      const double xd = v * e1x - a * w * e1y, yd = v * e1y + a * w * e1x;
      const double vd = a * w * w + (Fx * e1x + Fy * e1y - c * v) / m;
      const double wd = (-m * a * v * w + a * (-Fx * e1y + Fy * e1x)) / (I + m * a * a);
      const double along = vd - a * w * w, across = v * w + a * wd;
      std::ostringstream args;
      args.precision(17);
      args << "--model chaplygin_sleigh --param m=2 --param I=0.3 --param a=0.25 --param Fx=0.7 --param Fy=-0.4 "
           << "--param c=0.6 --q 0.1,-0.2," << th << " --qd " << xd << "," << yd << "," << w << on;
      const std::vector<double> got = qdd_of(args.str());
      const std::vector<double> want = {along * e1x - across * e1y, along * e1y + across * e1x, wd};
      ASSERT_EQ(got.size(), 3u);
      for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], want[i], 1e-12 * (std::abs(want[i]) + 1e-3)) << i;
    }
    {  // disk: theta'' = tau_th/Ith, (Jph + m r^2) phi'' = tau_ph sin(w_ph t) - c_r phi'
      const double m = 1.5, r = 0.4, Ith = 0.05, Jph = 0.09, tth = 0.3, tph = 0.8, wph = 2, cr = 0.2, t = 0.7;
      const double th = -1.1, thd = 0.6, phd = 3.0;
      const double thdd = tth / Ith, phdd = (tph * std::sin(wph * t) - cr * phd) / (Jph + m * r * r);
      std::ostringstream args;
      args.precision(17);
      args << "--model rolling_disk --param m=1.5 --param r=0.4 --param Ith=0.05 --param Jph=0.09 "
           << "--param tau_th=0.3 --param tau_ph=0.8 --param w_ph=2 --param c_r=0.2 --t 0.7 --q 0,0," << th
           << ",0.5 --qd " << r * phd * std::cos(th) << "," << r * phd * std::sin(th) << "," << thd << "," << phd << on;
      const std::vector<double> got = qdd_of(args.str());
      const std::vector<double> want = {r * (phdd * std::cos(th) - phd * thd * std::sin(th)),
                                        r * (phdd * std::sin(th) + phd * thd * std::cos(th)), thdd, phdd};
      ASSERT_EQ(got.size(), 4u);
      for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], want[i], 1e-12 * (std::abs(want[i]) + 1e-3)) << i;
    }
    {  // sphere: the centre accelerates at 5 F / (7 m)
      const double psi = 0.4, th = 1.2, r = 0.15, psid = 0.5, thd = -0.7, phd = 1.1;
      const double xd = r * thd * std::sin(psi) - r * phd * std::sin(th) * std::cos(psi);
      const double yd = -r * thd * std::cos(psi) - r * phd * std::sin(th) * std::sin(psi);
      std::ostringstream args;
      args.precision(17);
      args << "--model rolling_sphere --param m=2 --param r=0.15 --param Fx=0.9 --param Fy=-0.5 --q 0,0," << psi
           << "," << th << ",0.3 --qd " << xd << "," << yd << "," << psid << "," << thd << "," << phd << on;
      const std::vector<double> got = qdd_of(args.str());
      ASSERT_EQ(got.size(), 5u);
      EXPECT_NEAR(got[0], 5 * 0.9 / 14, 1e-12 * 0.33);
      EXPECT_NEAR(got[1], -5 * 0.5 / 14, 1e-12 * 0.33);
      // psi' + phi' cos theta stays: psi'' + phi'' cos theta - phi' theta' sin theta = 0.
      EXPECT_NEAR(got[2] + got[4] * std::cos(th) - phd * thd * std::sin(th), 0, 1e-12 * (1 + std::abs(got[4])));
    }
  }
  // The gimbal lock: a status, not a NaN.
  const CliRun lock = run_cli("accel --model rolling_sphere --q 0,0,0.3,0,0.1 --qd 0,0,1,0,2");
  EXPECT_NE(lock.out.find("failed_mass_matrix"), std::string::npos) << lock.out << lock.err;
}

TEST(Cli, AccelCpuBackendAgreesWithReference) {
  // Every model, at its default parameters and an arbitrary state.
  for (const ModelInfo& m : all_models()) {
    std::ostringstream q, qd;
    for (int i = 0; i < m.n; ++i) {
      q << (i ? "," : "") << 0.4 + 0.3 * i;
      qd << (i ? "," : "") << 0.2 - 0.1 * i;
    }
    const std::string args = "accel --model " + m.name + " --q " + q.str() + " --qd " + qd.str();
    const CliRun ref = run_cli(args), cpu = run_cli(args + " --backend cpu");
    ASSERT_EQ(ref.code, 0) << m.name << ref.err;
    ASSERT_EQ(cpu.code, 0) << m.name << cpu.err;
    const auto a = nlohmann::json::parse(ref.out), b = nlohmann::json::parse(cpu.out);
    EXPECT_EQ(a["rank"], b["rank"]) << m.name;
    EXPECT_EQ(a["status"], b["status"]) << m.name;
    for (const char* key : {"qdd", "Qc_ideal", "Qc_nonideal", "lambda"}) {
      double diff = 0, norm = 0;
      for (std::size_t i = 0; i < a[key].size(); ++i) {
        const double x = a[key][i].get<double>(), y = b[key][i].get<double>();
        diff = std::max(diff, std::abs(x - y));
        norm = std::max(norm, std::abs(x));
      }
      EXPECT_LE(diff, 1e-12 * std::max(norm, 1.0)) << m.name << " " << key;
    }
  }
}

TEST(Cli, AccelAcceptsSignedAndExponentNumbers) {
  const CliRun r = run_cli("accel --model incline_block --param alpha=+5e-1 --param mu=0 --q +0,-0 --qd 0,0");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["qdd"][0].get<double>(), 9.81 * std::sin(0.5) * std::cos(0.5), 1e-14);
}

TEST(Cli, AccelPrintsFullPrecisionAndTheStatusOfAFailedSystem) {
  const CliRun ok = run_cli("accel --model incline_block --param mu=0 --param alpha=0.5 --q 0,0 --qd 0,0");
  ASSERT_EQ(ok.code, 0) << ok.err;
  const auto j = nlohmann::json::parse(ok.out);
  const double along = j["qdd"][0].get<double>() * std::cos(0.5) - j["qdd"][1].get<double>() * std::sin(0.5);
  EXPECT_NEAR(along, 9.81 * std::sin(0.5), 1e-14);

  // |q'|^2 overflows: b of the ring's row is -inf.
  const CliRun bad = run_cli("accel --model bead_on_ring --q 1,0 --qd 0,1e200");
  EXPECT_EQ(bad.code, 1);
  const auto jb = nlohmann::json::parse(bad.out);
  EXPECT_EQ(jb["status"], "failed_nonfinite");
  EXPECT_TRUE(jb["qdd"][0].is_null());
  // A mass of -1 is refused before any evaluation (exit code 2).
  const CliRun neg = run_cli("accel --model bead_on_ring --param m=-1 --q 1,0 --qd 0,1");
  EXPECT_EQ(neg.code, 2);
  EXPECT_NE(neg.err.find("--param m: expected a value > 0 (bead mass (> 0)), got -1"), std::string::npos) << neg.err;
}

TEST(Cli, ModelsListsEveryModelWithParameters) {
  const CliRun text = run_cli("models");
  ASSERT_EQ(text.code, 0) << text.err;
  for (const ModelInfo& m : all_models()) {
    EXPECT_NE(text.out.find(m.name), std::string::npos) << m.name;
    for (const auto& p : m.params) EXPECT_NE(text.out.find(p.description), std::string::npos);
  }
  const CliRun js = run_cli("models --json");
  ASSERT_EQ(js.code, 0) << js.err;
  const auto j = nlohmann::json::parse(js.out);
  ASSERT_EQ(j.size(), all_models().size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    EXPECT_EQ(j[i]["name"], all_models()[i].name);
    EXPECT_EQ(j[i]["coords"].size(), static_cast<std::size_t>(all_models()[i].n));
    for (std::size_t k = 0; k < all_models()[i].params.size(); ++k)
      EXPECT_EQ(j[i]["params"][k]["default"].get<double>(), all_models()[i].params[k].default_value);
  }
}

TEST(Cli, TrajectoryFollowsTheInclineAnalyticSolution) {
  // Sliding down at 1 m/s with tan(alpha) > mu: s = t + a t^2 / 2 with
  // a = g (sin alpha - mu cos alpha), exact for RK4 (constant acceleration).
  const std::string file = unique_path("incline.csv");
  const double al = 0.5, mu = 0.3, a = 9.81 * (std::sin(al) - mu * std::cos(al));
  std::ostringstream args;
  args.precision(17);
  args << "trajectory --model incline_block --q 0,0 --qd " << std::cos(al) << "," << -std::sin(al)
       << " --dt 0.01 --steps 100 --every 10 --out " << file;
  const CliRun r = run_cli(args.str());
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "t,x,y,x_dot,y_dot");
  int rows = 0;
  double t = 0, x = 0, y = 0, xd = 0, yd = 0;
  while (std::getline(in, line)) {
    char c;
    std::istringstream ss(line);
    ss >> t >> c >> x >> c >> y >> c >> xd >> c >> yd;
    const double s = t + 0.5 * a * t * t;
    EXPECT_NEAR(x, s * std::cos(al), 1e-12) << line;
    EXPECT_NEAR(y, -s * std::sin(al), 1e-12) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 11);  // t = 0, 0.1, ..., 1
  EXPECT_NEAR(t, 1.0, 1e-12);
  EXPECT_FALSE(std::filesystem::exists(file + ".tmp"));
}

struct BadInput {
  std::string args;
  std::string must_mention;
};

TEST(Cli, BadInputExitsWithCode2AndNamesTheProblem) {
  const std::string ring = "accel --model bead_on_ring ";
  std::vector<BadInput> cases = {
      {"accel --model bead_on_rign --q 1,0 --qd 0,1", "did you mean 'bead_on_ring'"},
      {"accel --model nope --q 1,0 --qd 0,1", "unknown model 'nope'"},
      {ring + "--param mu_s=0.1 --q 1,0 --qd 0,1", "no parameter 'mu_s'"},
      {ring + "--param muu=0.1 --q 1,0 --qd 0,1", "did you mean 'mu'"},
      {ring + "--param mu --q 1,0 --qd 0,1", "KEY=VALUE"},
      {ring + "--param mu=abc --q 1,0 --qd 0,1", "'abc' is not a number"},
      {ring + "--param mu=0.1 --param mu=0.2 --q 1,0 --qd 0,1", "given twice"},
      {ring + "--param mu=inf --q 1,0 --qd 0,1", "not a finite number"},
      {ring + "--q 1,0,0 --qd 0,1", "--q: expected 2"},
      {ring + "--q 1 --qd 0,1", "--q: expected 2"},
      {ring + "--q 1,0 --qd 0,x", "--qd: 'x' is not a number"},
      {ring + "--q 1,0, --qd 0,1", "--q"},
      {ring + "--q 1,nan --qd 0,1", "not a finite number"},
      {ring + "--qd 0,1", "--q"},
      {ring + "--q 1,0 --qd 0,1 --t abc", "--t"},
      {ring + "--q 1,0 --qd 0,1 --backend gpu", "unknown backend 'gpu'"},
      {ring + "--q 1,0 --qd 0,1 --rank-rtol -1", "--rank-rtol"},
      {ring + "--q 1,0 --qd 0,1 --rank-rtol 1", "--rank-rtol"},
      {ring + "--q 1e999,0 --qd 0,1", "out of range"},
      {"trajectory --model bead_on_ring --q 1,0 --qd 0,1 --dt 0.1 --steps 99999999999999999999", "--steps"},
      {"accel --q 1,0 --qd 0,1", "--model"},
      {"frobnicate", "unknown subcommand 'frobnicate'"},
      {"acel --model bead_on_ring", "did you mean 'accel'"},
      {"", "subcommand"},
      {"trajectory --model bead_on_ring --q 1,0 --qd 0,1 --dt 0 --steps 10", "--dt"},
      {"trajectory --model bead_on_ring --q 1,0 --qd 0,1 --dt 0.1 --steps 0", "--steps"},
      {"trajectory --model bead_on_ring --q 1,0 --qd 0,1 --dt 0.1 --steps 5 --every 0", "--every"},
      {"trajectory --model bead_on_ring --q 1,0 --qd 0,1 --dt 0.1 --steps 5 --out /nonexistent/dir/x.csv",
       "cannot write"},
      {"trajectory --model bead_on_ring --q 1,0 --qd 0,1 --dt 0.1 --steps 5 --out ''",
       "--out: expected a file name, got an empty string"},
      {"trajectory --model bead_on_ring --q 1,0 --qd 0,1 --dt 1e308 --steps 3", "would end beyond the largest number"},
      // Parameter ranges (from the models' descriptions: mass > 0, mu >= 0).
      {ring + "--param m=0 --q 1,0 --qd 0,1", "--param m: expected a value > 0"},
      {ring + "--param mu=-0.1 --q 1,0 --qd 0,1", "--param mu: expected a value >= 0"},
      {"trajectory --model planar_chain_3 --param l=-1 --q 1,0,2,0,3,0 --qd 0,0,0,0,0,0 --dt 0.1 --steps 5",
       "--param l: expected a value > 0"},
      // Unknown options get a suggestion.
      {ring + "--q 1,0 --qd 0,1 --rank-rtoll 1e-9", "did you mean '--rank-rtol'"},
      {"trajectory --model bead_on_ring --q 1,0 --qd 0,1 --dt 0.1 --stpes 5", "did you mean '--steps'"},
      // `ukb run`.
      {"run", "expected a config file (ukb run CONFIG) or --resume DIR"},
      {"run --resume /nonexistent/ukb-run", "holds no checkpoint"},
      {"run --resume /tmp/a --out /tmp/b", "--out: a resumed run writes into its own directory"},
      {"run x.toml --threads -1", "--threads"},
  };
  if (cuda::device_count() == 0) cases.push_back({ring + "--q 1,0 --qd 0,1 --backend cuda", "--backend cuda"});
  for (const BadInput& c : cases) {
    const CliRun r = run_cli(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.must_mention), std::string::npos)
        << "`ukb " << c.args << "` said: " << r.err << "expected it to mention: " << c.must_mention;
    EXPECT_TRUE(r.out.empty()) << c.args << " printed to stdout: " << r.out;
  }
}

}  // namespace
}  // namespace ukb::test
