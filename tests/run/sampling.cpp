// Monte Carlo sampling: Philox against its known answers, each distribution
// against its closed-form moments and law, sweep axes.
#include "run/run_support.hpp"

namespace ukb::test {
namespace {

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

}  // namespace
}  // namespace ukb::test
