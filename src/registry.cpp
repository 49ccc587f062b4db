#include "ukb/registry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <limits>

#include "ukb/models/all.hpp"

namespace ukb {
namespace {

// A parameter; its range from a description ending in "(> x)" or "(>= x)".
ParamInfo param_info(const char* name, double value, const char* doc) {
  ParamInfo p;
  p.name = name;
  p.default_value = value;
  p.description = doc;
  const std::string& d = p.description;
  const std::size_t open = d.rfind('(');
  if (open == std::string::npos || d.empty() || d.back() != ')') return p;
  std::string inner = d.substr(open + 1, d.size() - open - 2);
  bool inclusive = false;
  if (inner.rfind(">= ", 0) == 0) inclusive = true, inner.erase(0, 3);
  else if (inner.rfind("> ", 0) == 0) inner.erase(0, 2);
  else return p;
  char* end = nullptr;
  const double x = std::strtod(inner.c_str(), &end);
  if (end == inner.c_str() || *end != '\0') return p;
  p.lower = x;
  p.lower_inclusive = inclusive;
  return p;
}

template <Model Mo>
void add_run_hooks(ModelInfo& info) {
  constexpr int n = Mo::n;
  info.has_events = HasEvents<Mo>;
  info.has_potential = HasPotential<Mo>;
  info.has_residual = HasResidual<Mo>;
  info.has_rows = HasConstraintRows<Mo>;
  if constexpr (HasInitialState<Mo>) {
    info.initial_names.assign(Mo::initial_names.begin(), Mo::initial_names.end());
    info.initial_state = [](std::span<const double> values, const double* ic, double* q,
                            double* qd) {
      return static_cast<bool>(Mo::initial_state(ic, params_from<Mo>(values), q, qd));
    };
    info.natural_state = [](std::span<const double> values, const double* q, const double* qd,
                            double* ic) { Mo::natural_state(q, qd, params_from<Mo>(values), ic); };
  }
  info.residual = [](std::span<const double> values, const double* q, const double* qd, double t,
                     double& pos, double& vel) {
    if constexpr (HasResidual<Mo>) {
      Mo::residual(q, qd, t, params_from<Mo>(values), pos, vel);
    } else {
      (void)values, (void)q, (void)qd, (void)t;
      pos = vel = std::numeric_limits<double>::quiet_NaN();
    }
  };
  info.energy = [](std::span<const double> values, const double* q, const double* qd, double t) {
    if constexpr (HasPotential<Mo>) {
      const typename Mo::Params p = params_from<Mo>(values);
      double M[n * n];
      Mo::mass(q, t, p, M);
      return models::detail::kinetic_energy<n>(M, qd) + Mo::potential(q, t, p);
    } else {
      (void)values, (void)q, (void)qd, (void)t;
      return std::numeric_limits<double>::quiet_NaN();
    }
  };
  info.advance = [](EnsembleChunk& c, Backend backend, const RunOptions& run, long budget,
                    const EngineOptions& options) {
    const int N = c.N;
    Batch<Mo> b(N);
    BatchView<Mo> v = b.view();
    std::copy(c.params.begin(), c.params.end(), v.params);
    std::copy(c.q.begin(), c.q.end(), v.q);
    std::copy(c.qd.begin(), c.qd.end(), v.qd);
    std::copy(c.t.begin(), c.t.end(), v.t);
    std::copy(c.status.begin(), c.status.end(), v.status);
    std::copy(c.steps.begin(), c.steps.end(), v.steps);
    std::copy(c.events.begin(), c.events.end(), v.events);
    std::copy(c.t_stop.begin(), c.t_stop.end(), v.t_stop);
    std::copy(c.res_pos.begin(), c.res_pos.end(), v.res_pos);
    std::copy(c.res_vel.begin(), c.res_vel.end(), v.res_vel);
    std::copy(c.rank_drops.begin(), c.rank_drops.end(), v.rank_drops);
    std::copy(c.proj_fails.begin(), c.proj_fails.end(), v.proj_fails);
    std::copy(c.inconsistent.begin(), c.inconsistent.end(), v.inconsistent);
    const long active = ukb::advance(b, backend, run, budget, options);
    std::copy(v.q, v.q + std::size_t(n) * N, c.q.begin());
    std::copy(v.qd, v.qd + std::size_t(n) * N, c.qd.begin());
    std::copy(v.t, v.t + N, c.t.begin());
    std::copy(v.status, v.status + N, c.status.begin());
    std::copy(v.steps, v.steps + N, c.steps.begin());
    std::copy(v.events, v.events + N, c.events.begin());
    std::copy(v.t_stop, v.t_stop + N, c.t_stop.begin());
    std::copy(v.res_pos, v.res_pos + N, c.res_pos.begin());
    std::copy(v.res_vel, v.res_vel + N, c.res_vel.begin());
    std::copy(v.rank_drops, v.rank_drops + N, c.rank_drops.begin());
    std::copy(v.proj_fails, v.proj_fails + N, c.proj_fails.begin());
    std::copy(v.inconsistent, v.inconsistent + N, c.inconsistent.begin());
    return active;
  };
}

template <Model Mo>
ModelInfo make_info() {
  ModelInfo info;
  info.name = Mo::name;
  info.summary = Mo::summary;
  info.n = Mo::n;
  info.m = Mo::m;
  info.coords.assign(Mo::coords.begin(), Mo::coords.end());
  const typename Mo::Params defaults{};
  Mo::visit_params(defaults, [&](const char* name, const double& value, const char* doc) {
    info.params.push_back(param_info(name, value, doc));
  });
  info.reference_accel = [](std::span<const double> values, const reference::Options& opt) {
    return reference::accel_fn<Mo>(params_from<Mo>(values), opt);
  };
  info.batch_accel = [](Backend backend, std::span<const double> values, const Eigen::VectorXd& q,
                        const Eigen::VectorXd& qd, double t, double rank_rtol) {
    Batch<Mo> b(1);
    b.set_params(0, params_from<Mo>(values));
    b.set_state(0, q.data(), qd.data(), t);
    evaluate(b, backend, {.threads = 1, .rank_rtol = rank_rtol});
    reference::Result r;
    r.qdd.resize(Mo::n);
    r.Qc_ideal.resize(Mo::n);
    r.Qc_nonideal.resize(Mo::n);
    r.lambda.resize(Mo::m);
    for (int j = 0; j < Mo::n; ++j) {
      r.qdd(j) = b.qdd(0, j);
      r.Qc_ideal(j) = b.Qc_ideal(0, j);
      r.Qc_nonideal(j) = b.Qc_nonideal(0, j);
    }
    for (int j = 0; j < Mo::m; ++j) r.lambda(j) = b.lambda(0, j);
    r.rank = b.rank(0);
    r.status = b.status(0);
    const reference::Terms k = reference::terms<Mo>(b.params(0), q, qd, t);
    r.constraint_residual = (k.A * r.qdd - k.b).cwiseAbs().maxCoeff();
    // The flag by the reference's definition, from this backend's q''.
    r.inconsistent = r.status == Status::ok &&
                     reference::is_inconsistent(k.A, k.b, k.M.llt().solve(k.Q), r.constraint_residual);
    return r;
  };
  info.reference_terms = [](std::span<const double> values, const Eigen::VectorXd& q,
                            const Eigen::VectorXd& qd, double t) {
    return reference::terms<Mo>(params_from<Mo>(values), q, qd, t);
  };
  add_run_hooks<Mo>(info);
  return info;
}

std::vector<ModelInfo> build() {
  std::vector<ModelInfo> all;
  models::Builtin::for_each<double>([&]<class Mo>() { all.push_back(make_info<Mo>()); });
  return all;
}

// Optimal string alignment distance: insertions, deletions, substitutions
// and transpositions of neighbours each cost 1.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t w = b.size() + 1;
  std::vector<std::size_t> d((a.size() + 1) * w);
  for (std::size_t i = 0; i <= a.size(); ++i) d[i * w] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      std::size_t v = std::min({d[(i - 1) * w + j] + 1, d[i * w + j - 1] + 1,
                                d[(i - 1) * w + j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        v = std::min(v, d[(i - 2) * w + j - 2] + 1);
      d[i * w + j] = v;
    }
  }
  return d[a.size() * w + b.size()];
}

}  // namespace

void EnsembleChunk::reset(int systems, int n, int np) {
  N = systems;
  const std::size_t S = static_cast<std::size_t>(systems);
  params.assign(S * np, 0.0);
  q.assign(S * n, 0.0);
  qd.assign(S * n, 0.0);
  t.assign(S, 0.0);
  status.assign(S, static_cast<std::int32_t>(Status::ok));
  steps.assign(S, 0);
  events.assign(S, 0);
  t_stop.assign(S, std::numeric_limits<double>::quiet_NaN());
  res_pos.assign(S, 0.0);
  res_vel.assign(S, 0.0);
  rank_drops.assign(S, 0);
  proj_fails.assign(S, 0);
  inconsistent.assign(S, 0);
}

int ModelInfo::param_index(std::string_view key) const {
  for (std::size_t i = 0; i < params.size(); ++i)
    if (params[i].name == key) return static_cast<int>(i);
  return -1;
}

bool ParamInfo::admits(double v) const {
  return std::isfinite(v) && (lower_inclusive ? v >= lower : v > lower);
}

std::string ParamInfo::range() const {
  if (lower == -std::numeric_limits<double>::infinity()) return "finite";
  std::ostringstream s;
  s << (lower_inclusive ? ">= " : "> ") << lower;
  return s.str();
}

std::vector<double> ModelInfo::defaults() const {
  std::vector<double> v;
  for (const ParamInfo& p : params) v.push_back(p.default_value);
  return v;
}

const std::vector<ModelInfo>& all_models() {
  static const std::vector<ModelInfo> all = build();
  return all;
}

const ModelInfo* find_model(std::string_view name) {
  for (const ModelInfo& m : all_models())
    if (m.name == name) return &m;
  return nullptr;
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // A likely typo: at most a third of the longer word changed (at least 1).
  const std::size_t limit = std::max<std::size_t>(1, std::max(word.size(), best.size()) / 3);
  return best_d <= limit ? best : std::string();
}

}  // namespace ukb
