// The registry lists exactly the models, coordinates, parameters and defaults
// that the foundation issue specifies (the table below is that
// specification, written out by hand).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "ukb/describe.hpp"
#include "ukb/models/bead_on_ring.hpp"
#include "ukb/models/planar_chain.hpp"
#include "ukb/registry.hpp"

namespace ukb {
namespace {

struct Spec {
  int n, m;
  std::vector<std::string> coords;
  std::vector<std::pair<std::string, double>> params;
};

const std::map<std::string, Spec>& specs() {
  static const std::map<std::string, Spec> s = {
      {"bead_on_ring", {2, 1, {"x", "y"}, {{"m", 1}, {"R", 1}, {"g", 9.81}, {"mu", 0.2}}}},
      {"nonholonomic_particle",
       {3, 1, {"x", "y", "z"}, {{"m", 1}, {"a0", 0.1}, {"fx", 0}, {"fy", 0}, {"fz", -9.81}}}},
      {"incline_block", {2, 1, {"x", "y"}, {{"m", 1}, {"alpha", 0.5}, {"g", 9.81}, {"mu", 0.3}}}},
      {"puck_incline",
       {3, 1, {"x", "y", "z"}, {{"m", 1}, {"alpha", 0.3}, {"g", 9.81}, {"mu", 0.5}, {"lookahead", 1e-3}}}},
      {"planar_chain_3",
       {6, 3, {"x1", "y1", "x2", "y2", "x3", "y3"}, {{"m", 1}, {"l", 1}, {"g", 9.81}, {"c", 0}}}},
      {"planar_chain_6", {12, 6, {}, {{"m", 1}, {"l", 1}, {"g", 9.81}, {"c", 0}}}},
      {"planar_chain_12", {24, 12, {}, {{"m", 1}, {"l", 1}, {"g", 9.81}, {"c", 0}}}},
      {"redundant_pendulum", {2, 2, {"x", "y"}, {{"m", 1}, {"l", 1}, {"g", 9.81}, {"c", 0}}}},
      {"two_link_arm",
       {2, 1, {"theta1", "theta2"},
        {{"m1", 1}, {"m2", 1}, {"l1", 1}, {"l2", 1}, {"g", 9.81}, {"c", 0}, {"beta", 0},
         {"p0x", 0}, {"p0y", -1.5}}}},
      // Issue 20's names, coordinates and defaults.
      {"chaplygin_sleigh",
       {3, 1, {"x", "y", "theta"},
        {{"m", 1}, {"I", 0.1}, {"a", 0.2}, {"Fx", 0}, {"Fy", 0}, {"tau0", 0}, {"w", 0}, {"c", 0}}}},
      {"rolling_disk",
       {4, 2, {"x", "y", "theta", "phi"},
        {{"m", 1}, {"r", 0.3}, {"Ith", 0.0225}, {"Jph", 0.045}, {"tau_th", 0}, {"w_th", 0}, {"tau_ph", 0},
         {"w_ph", 0}, {"c_r", 0}}}},
      {"rolling_sphere", {5, 2, {"x", "y", "psi", "theta", "phi"}, {{"m", 1}, {"r", 0.1}, {"Fx", 0}, {"Fy", 0}}}},
  };
  return s;
}

TEST(Registry, ListsExactlyTheSpecifiedModels) {
  ASSERT_EQ(all_models().size(), specs().size());
  for (const ModelInfo& info : all_models()) {
    SCOPED_TRACE(info.name);
    const auto it = specs().find(info.name);
    ASSERT_NE(it, specs().end()) << "unexpected model";
    const Spec& s = it->second;
    EXPECT_EQ(info.n, s.n);
    EXPECT_EQ(info.m, s.m);
    EXPECT_EQ(static_cast<int>(info.coords.size()), s.n);
    if (!s.coords.empty()) {
      EXPECT_EQ(info.coords, s.coords);
    }
    ASSERT_EQ(info.params.size(), s.params.size());
    for (std::size_t i = 0; i < s.params.size(); ++i) {
      EXPECT_EQ(info.params[i].name, s.params[i].first);
      EXPECT_EQ(info.params[i].default_value, s.params[i].second);
      EXPECT_FALSE(info.params[i].description.empty());
      EXPECT_EQ(info.param_index(s.params[i].first), static_cast<int>(i));
    }
    // Every natural initial quantity says what it is (`ukb models` prints it).
    ASSERT_EQ(info.initial.size(), info.initial_names.size());
    for (const ParamInfo& q : info.initial) EXPECT_FALSE(q.description.empty()) << q.name;
    EXPECT_EQ(info.param_index("no_such_parameter"), -1);
    EXPECT_EQ(find_model(info.name), &info);
  }
  EXPECT_EQ(find_model("no_such_model"), nullptr);
}

TEST(Registry, ChainCoordinatesAreNumberedPairs) {
  const ModelInfo* chain = find_model("planar_chain_12");
  ASSERT_NE(chain, nullptr);
  EXPECT_EQ(chain->coords.front(), "x1");
  EXPECT_EQ(chain->coords[1], "y1");
  EXPECT_EQ(chain->coords.back(), "y12");
}

// Masses and lengths must be > 0 and friction or damping coefficients >= 0
// (issue: ranges are validated); the ranges come from the descriptions.
TEST(Registry, ParameterRangesFollowTheirDescriptionsAndAdmitTheDefaults) {
  int positive = 0, nonnegative = 0;
  for (const ModelInfo& m : all_models())
    for (const ParamInfo& p : m.params) {
      SCOPED_TRACE(m.name + "." + p.name);
      EXPECT_TRUE(p.admits(p.default_value));
      EXPECT_FALSE(p.admits(std::numeric_limits<double>::quiet_NaN()));
      // Masses, lengths, moments of inertia and the puck's look-ahead (a time).
      const bool positive_quantity = p.name == "m" || p.name == "m1" || p.name == "m2" || p.name == "R" ||
                                  p.name == "l" || p.name == "l1" || p.name == "l2" || p.name == "r" ||
                                  p.name == "I" || p.name == "Ith" || p.name == "Jph" || p.name == "lookahead";
      if (positive_quantity) {
        ++positive;
        EXPECT_FALSE(p.admits(0.0));
        EXPECT_TRUE(p.admits(1e-300));
        EXPECT_EQ(p.range(), "> 0");
      } else if (p.name == "mu" || p.name == "c" || p.name == "c_r") {
        ++nonnegative;
        EXPECT_TRUE(p.admits(0.0));
        EXPECT_FALSE(p.admits(-1e-300));
        EXPECT_EQ(p.range(), ">= 0");
      } else {
        EXPECT_TRUE(p.admits(-1e300)) << "no range stated";
        EXPECT_EQ(p.range(), "finite");
      }
    }
  EXPECT_GE(positive, 12);
  EXPECT_GE(nonnegative, 6);
}

TEST(Registry, NamesThatWouldBreakTheOutputsAreFound) {
  // Every built-in model passes.
  for (const ModelInfo& M : all_models()) EXPECT_EQ(name_problems(M), "") << M.name;
  // What a model file could declare, each refused with its name and rule.
  const ModelInfo ring = *find_model("bead_on_ring");
  struct Case {
    std::vector<std::string> coords, params, initial;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {{"x", "y,z"}, {}, {}, "the coordinate 'y,z' has a character other than"},
      {{"x", "x"}, {}, {}, "the coordinate 'x' is given twice"},
      {{"x", "\"y\""}, {}, {}, "has a character other than"},
      {{"x", "y\nz"}, {}, {}, "has a character other than"},
      {{"x", "\xc3\xa9"}, {}, {}, "has a character other than"},
      {{"x", "1y"}, {}, {}, "starts with a digit"},
      {{"x", ""}, {}, {}, "is empty"},
      {{"x", std::string(65, 'y')}, {}, {}, "longer than 64"},
      {{"x", "y"}, {"m", "m"}, {}, "the parameter 'm' is given twice"},
      {{"x", "y"}, {"m", "R"}, {"theta", "th eta"}, "the natural quantity 'th eta'"},
      {{"x", "y"}, {"m", "theta"}, {"theta", "omega"}, "'theta' is both a parameter and a natural quantity"},
  };
  for (const Case& c : cases) {
    ModelInfo M = ring;
    M.coords = c.coords;
    if (!c.params.empty()) {
      M.params.clear();
      for (const std::string& n : c.params) {
        ParamInfo p = ring.params.front();
        p.name = n;
        M.params.push_back(p);
      }
    }
    if (!c.initial.empty()) M.initial_names = c.initial;
    const std::string why = name_problems(M);
    EXPECT_NE(why.find(c.expect), std::string::npos) << why;
    EXPECT_NE(why.find("names must be"), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << "escaped: " << why;
  }
  // A model's own observables (results columns): valid names, distinct,
  // and none that another column of the ring's results may have.
  const std::vector<std::pair<std::vector<std::string>, const char*>> observables = {
      {{"radius", "height"}, ""},
      {{"r", "r"}, "the observable 'r' is given twice"},
      {{"a b"}, "the observable 'a b' has a character other than"},
      {{"mu"}, "the observable 'mu' is also the name of another column"},
      {{"theta"}, "the observable 'theta' is also"},
      {{"theta_final"}, "the observable 'theta_final' is also"},
      {{"q_x_final"}, "the observable 'q_x_final' is also"},
      {{"qd_y_final"}, "the observable 'qd_y_final' is also"},
      {{"rejected"}, "the observable 'rejected' is also"},
      {{"energy_end"}, "the observable 'energy_end' is also"},
      {{"status"}, "the observable 'status' is also"},
  };
  for (const auto& [names, expect] : observables) {
    ModelInfo M = ring;
    M.observable_names = names;
    const std::string why = name_problems(M);
    if (*expect == '\0') {
      EXPECT_EQ(why, "") << names.front();
    } else {
      EXPECT_NE(why.find(expect), std::string::npos) << why;
    }
  }
}

TEST(Registry, SuggestsCloseNames) {
  const std::vector<std::string> names = {"bead_on_ring", "incline_block", "two_link_arm"};
  EXPECT_EQ(closest_match("bead_on_rign", names), "bead_on_ring");
  EXPECT_EQ(closest_match("incline", names), "");
  EXPECT_EQ(closest_match("mu", {"m", "R", "g", "mu"}), "mu");
  EXPECT_EQ(closest_match("alpah", {"m", "alpha", "g", "mu"}), "alpha");
  EXPECT_EQ(closest_match("zzzzzz", {"m", "alpha"}), "");
}

TEST(Registry, EvaluateUsesTheGivenParameters) {
  // The incline block at rest with mu = 0: the acceleration along the line
  // is g sin(alpha), whatever alpha the values carry.
  const ModelInfo* incline = find_model("incline_block");
  ASSERT_NE(incline, nullptr);
  std::vector<double> values = incline->defaults();
  values[incline->param_index("alpha")] = 0.9;
  values[incline->param_index("mu")] = 0.0;
  values[incline->param_index("g")] = 3.0;
  const double zero[2] = {0, 0};
  for (Backend be : {Backend::reference, Backend::cpu}) {
    const Evaluation r = incline->evaluate(be, values, zero, zero, 0, 1e-10);
    const double dir[2] = {std::cos(0.9), -std::sin(0.9)};
    const double along = r.qdd[0] * dir[0] + r.qdd[1] * dir[1];
    EXPECT_NEAR(along, 3.0 * std::sin(0.9), 1e-14);
    EXPECT_NEAR(std::hypot(r.qdd[0] - along * dir[0], r.qdd[1] - along * dir[1]), 0.0, 1e-14);
  }
}

// bead_on_ring with an off-diagonal entry in its mass, which inherits the
// ring's mass_diagonal (the trap of a derived model, docs/adding-a-model.md).
struct SkewRing : models::BeadOnRing<double> {
  static constexpr const char* name = "skew_ring";
  static void mass(const double*, double, const Params& p, double* M) {
    M[0] = M[3] = p.m;
    M[1] = M[2] = 0.5;
  }
};

TEST(Registry, MassDiagonalIsCheckedAgainstMass) {
  const double q[2] = {0.6, -0.8};
  const ModelInfo* ring = find_model("bead_on_ring");
  ASSERT_TRUE(ring && ring->has_diagonal_mass && ring->mass_diagonal_mismatch);
  std::vector<double> p = ring->defaults();
  EXPECT_EQ(ring->mass_diagonal_mismatch(p, q, 0.0), "");
  // NaN on both sides agrees: the kernels then fail the system, as the
  // reference does.
  p[std::size_t(ring->param_index("m"))] = std::nan("");
  EXPECT_EQ(ring->mass_diagonal_mismatch(p, q, 0.0), "");
  // describe<SkewRing>() would set this check (as it does for every model
  // with mass_diagonal, the built-in ones above) and compile the backends
  // for SkewRing with it: the check alone. (That describe<> passes a failing
  // check on is ModelFiles.ModelsThatContradictTheirOwnDeclarationsAreRefused.)
  EXPECT_EQ(detail::mass_diagonal_mismatch<SkewRing>(ring->defaults(), q, 0.0),
            "mass gives M[0][1] = 0.5 off the diagonal, which mass_diagonal declares zero (mass_diagonal must give the "
            "diagonal of a diagonal M)");
  const ModelInfo* arm = find_model("two_link_arm");
  ASSERT_TRUE(arm);
  EXPECT_FALSE(arm->has_diagonal_mass);
  EXPECT_EQ(arm->mass_diagonal_mismatch, nullptr);
}

// planar_chain_3 whose last row also reaches the first mass, which
// inherits the chain's constraint_columns (the same trap).
struct ReachingChain : models::PlanarChain3<double> {
  static constexpr const char* name = "reaching_chain";
  static void constraints(const double* q, const double* qd, double t, const Params& p, double* A, double* b) {
    models::PlanarChain3<double>::constraints(q, qd, t, p, A, b);
    A[2 * n + 1] = 0.25;
  }
};

// Every built-in model's mass_diagonal and constraint_columns against its
// own mass and constraints, at random states (the checks of describe<>,
// compiled in libukb: under the sanitizers these run every model's code,
// where the kernel tests take ModelKinds alone, support.hpp).
TEST(Registry, EveryBuiltinDiagonalAndColumnsAgreeWithItsDenseSelf) {
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  int diagonal = 0, columns = 0;
  for (const ModelInfo& info : all_models()) {
    SCOPED_TRACE(info.name);
    diagonal += info.has_diagonal_mass;
    columns += info.has_constraint_columns;
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<double> q(std::size_t(info.n)), qd(std::size_t(info.n));
      for (double& x : q) x = u(rng);
      for (double& x : qd) x = u(rng);
      const double t = u(rng);
      if (info.has_diagonal_mass) {
        EXPECT_EQ(info.mass_diagonal_mismatch(info.defaults(), q.data(), t), "");
      }
      if (info.has_constraint_columns) {
        EXPECT_EQ(info.constraint_columns_mismatch(info.defaults(), q.data(), qd.data(), t), "");
      }
    }
  }
  EXPECT_EQ(diagonal, 10) << "all but two_link_arm and rolling_sphere";
  EXPECT_EQ(columns, 3) << "the chains of 3, 6 and 12 links";
}

TEST(Registry, ConstraintColumnsAreCheckedAgainstConstraints) {
  const ModelInfo* chain = find_model("planar_chain_3");
  ASSERT_TRUE(chain && chain->has_constraint_columns && chain->constraint_columns_mismatch);
  // A state off the manifold, every coordinate and rate nonzero: each row's
  // four (two) entries nonzero, every other one zero.
  const double q[6] = {0.3, -0.9, 0.8, -1.5, 1.1, -2.6}, qd[6] = {0.2, 0.1, -0.4, 0.3, 0.5, -0.6};
  std::vector<double> p = chain->defaults();
  EXPECT_EQ(chain->constraint_columns_mismatch(p, q, qd, 0.0), "");
  // NaN within a row's columns passes: the kernels fail the system there.
  const double qn[6] = {0.3, -0.9, std::nan(""), -1.5, 1.1, -2.6};
  EXPECT_EQ(chain->constraint_columns_mismatch(p, qn, qd, 0.0), "");
  // The check that describe<ReachingChain>() would set, alone (as above).
  EXPECT_EQ(detail::constraint_columns_mismatch<ReachingChain>(chain->defaults(), q, qd, 0.0),
            "constraints gives A[2][1] = 0.25, outside row 2's constraint_columns [2, 6) (A must be zero outside "
            "each row's constraint_columns)");
  const ModelInfo* ring = find_model("bead_on_ring");
  ASSERT_TRUE(ring);
  EXPECT_FALSE(ring->has_constraint_columns);
  EXPECT_EQ(ring->constraint_columns_mismatch, nullptr);
}

}  // namespace
}  // namespace ukb
