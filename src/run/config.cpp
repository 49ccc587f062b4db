// The `ukb run` config: TOML (toml++), validated key by key; every error
// names the file, the line and column, the key and what was expected.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ukb/cuda.hpp"
#include "ukb/run.hpp"

namespace ukb::run {
namespace {

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

class Parser {
 public:
  explicit Parser(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const toml::node* n, const std::string& key, const std::string& msg) const {
    std::string where = path_;
    if (n && n->source().begin.line > 0)
      where += ":" + std::to_string(n->source().begin.line) + ":" +
               std::to_string(n->source().begin.column);
    throw ConfigError(where + ": " + (key.empty() ? "" : "key '" + key + "': ") + msg);
  }

  // Rejects keys of t that are not in `allowed`, suggesting the closest.
  void only_keys(const toml::table& t, const std::string& prefix,
                 const std::vector<std::string>& allowed) const {
    for (auto&& [k, v] : t) {
      const std::string key(k.str());
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      std::string msg = "unknown key";
      const std::string near = closest_match(key, allowed);
      if (!near.empty()) msg += " (did you mean '" + near + "'?)";
      msg += "; expected one of: " + join(allowed);
      fail(&v, prefix + key, msg);
    }
  }

  double number(const toml::node& n, const std::string& key, bool allow_inf = false) const {
    double v;
    if (auto i = n.as_integer()) {
      v = static_cast<double>(i->get());
    } else if (auto f = n.as_floating_point()) {
      v = f->get();
    } else {
      fail(&n, key, std::string("expected a number, got ") + type_name(n));
    }
    if (std::isnan(v) || (!allow_inf && std::isinf(v)))
      fail(&n, key, std::string("expected a finite number") + (allow_inf ? " or inf" : ""));
    return v;
  }

  long integer(const toml::node& n, const std::string& key, long lo, long hi) const {
    auto i = n.as_integer();
    if (!i) fail(&n, key, std::string("expected an integer, got ") + type_name(n));
    const std::int64_t v = i->get();
    if (v < lo || v > hi)
      fail(&n, key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "], got " + std::to_string(v));
    return static_cast<long>(v);
  }

  std::string string(const toml::node& n, const std::string& key) const {
    auto s = n.as_string();
    if (!s) fail(&n, key, std::string("expected a string, got ") + type_name(n));
    return s->get();
  }

  bool boolean(const toml::node& n, const std::string& key) const {
    auto b = n.as_boolean();
    if (!b) fail(&n, key, std::string("expected true or false, got ") + type_name(n));
    return b->get();
  }

  const toml::table& table(const toml::node& n, const std::string& key) const {
    auto t = n.as_table();
    if (!t) fail(&n, key, std::string("expected a table, got ") + type_name(n));
    return *t;
  }

  // A value or a distribution (see the README, "Monte Carlo runs").
  Dist dist(const toml::node& n, const std::string& key) const {
    Dist d;
    if (n.is_number()) {
      d.a = number(n, key);
      return d;
    }
    if (auto arr = n.as_array()) {
      d.kind = Dist::Kind::values;
      values(*arr, key, d.list);
      return d;
    }
    if (!n.is_table())
      fail(&n, key,
           std::string("expected a number, a list of values or a distribution table "
                       "({ dist = \"uniform\", min = ..., max = ... }), got ") +
               type_name(n));
    const toml::table& t = *n.as_table();
    const toml::node* kind = t.get("dist");
    if (!kind) fail(&n, key, "a distribution table needs 'dist' (one of " + join(kinds()) + ")");
    const std::string name = string(*kind, key + ".dist");
    auto need = [&](const char* field) -> const toml::node& {
      const toml::node* f = t.get(field);
      if (!f) fail(&n, key, std::string("a '") + name + "' distribution needs '" + field + "'");
      return *f;
    };
    auto ordered = [&](const char* lo_name, const char* hi_name) {
      if (!(d.a < d.b))
        fail(t.get(hi_name), key + "." + hi_name,
             std::string("expected ") + hi_name + " > " + lo_name + ", got " + lo_name + " = " +
                 fmt(d.a) + " and " + hi_name + " = " + fmt(d.b));
    };
    if (name == "fixed") {
      only_keys(t, key + ".", {"dist", "value"});
      d.a = number(need("value"), key + ".value");
    } else if (name == "uniform") {
      only_keys(t, key + ".", {"dist", "min", "max"});
      d.kind = Dist::Kind::uniform;
      d.a = number(need("min"), key + ".min");
      d.b = number(need("max"), key + ".max");
      ordered("min", "max");
    } else if (name == "normal") {
      only_keys(t, key + ".", {"dist", "mean", "sd", "min", "max"});
      d.kind = Dist::Kind::normal;
      d.a = number(need("mean"), key + ".mean");
      d.b = number(need("sd"), key + ".sd");
      if (!(d.b > 0)) fail(t.get("sd"), key + ".sd", "expected a standard deviation > 0, got " + fmt(d.b));
      if (const toml::node* lo = t.get("min")) d.lo = number(*lo, key + ".min");
      if (const toml::node* hi = t.get("max")) d.hi = number(*hi, key + ".max");
      if (!(d.lo < d.hi))
        fail(t.get("max"), key + ".max",
             "expected max > min, got min = " + fmt(d.lo) + " and max = " + fmt(d.hi));
      // Truncation by rejection: the window must hold a fair share of the mass.
      auto cdf = [&](double x) { return 0.5 * std::erfc(-(x - d.a) / (d.b * std::sqrt(2.0))); };
      const double mass = cdf(d.hi) - cdf(d.lo);
      if (!(mass >= 0.05))
        fail(&n, key,
             "the truncation window [" + fmt(d.lo) + ", " + fmt(d.hi) + "] holds " + fmt(mass) +
                 " of the normal's probability; expected at least 0.05 (use a uniform "
                 "distribution or widen the window)");
    } else if (name == "lognormal") {
      only_keys(t, key + ".", {"dist", "mean_log", "sd_log"});
      d.kind = Dist::Kind::lognormal;
      d.a = number(need("mean_log"), key + ".mean_log");
      d.b = number(need("sd_log"), key + ".sd_log");
      if (!(d.b > 0)) fail(t.get("sd_log"), key + ".sd_log", "expected sd_log > 0, got " + fmt(d.b));
    } else if (name == "values") {
      only_keys(t, key + ".", {"dist", "values"});
      d.kind = Dist::Kind::values;
      const toml::node& v = need("values");
      if (!v.is_array()) fail(&v, key + ".values", std::string("expected an array of numbers, got ") + type_name(v));
      values(*v.as_array(), key + ".values", d.list);
    } else if (name == "grid") {
      only_keys(t, key + ".", {"dist", "min", "max", "count"});
      d.kind = Dist::Kind::grid;
      d.a = number(need("min"), key + ".min");
      d.b = number(need("max"), key + ".max");
      ordered("min", "max");
      d.count = integer(need("count"), key + ".count", 2, 1000000000);
    } else {
      std::string msg = "unknown distribution '" + name + "'";
      const std::string near = closest_match(name, kinds());
      if (!near.empty()) msg += " (did you mean '" + near + "'?)";
      fail(kind, key + ".dist", msg + "; expected one of " + join(kinds()));
    }
    return d;
  }

  static std::vector<std::string> kinds() {
    return {"fixed", "uniform", "normal", "lognormal", "values", "grid"};
  }

  static std::string fmt(double v) {
    std::ostringstream s;
    s.precision(17);
    s << v;
    return s.str();
  }

 private:
  void values(const toml::array& arr, const std::string& key, std::vector<double>& out) const {
    if (arr.empty()) fail(&arr, key, "expected a non-empty list of numbers");
    for (std::size_t i = 0; i < arr.size(); ++i)
      out.push_back(number(*arr.get(i), key + "[" + std::to_string(i) + "]"));
  }

  std::string path_;
};

std::string dist_kind_name(Dist::Kind k) {
  switch (k) {
    case Dist::Kind::fixed: return "fixed";
    case Dist::Kind::uniform: return "uniform";
    case Dist::Kind::normal: return "normal";
    case Dist::Kind::lognormal: return "lognormal";
    case Dist::Kind::values: return "values";
    case Dist::Kind::grid: return "grid";
  }
  return "?";
}

nlohmann::json dist_json(const Dist& d) {
  nlohmann::json j = {{"dist", dist_kind_name(d.kind)}};
  auto num = [](double v) -> nlohmann::json {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return v;
  };
  switch (d.kind) {
    case Dist::Kind::fixed: j["value"] = d.a; break;
    case Dist::Kind::uniform: j["min"] = d.a, j["max"] = d.b; break;
    case Dist::Kind::normal:
      j["mean"] = d.a, j["sd"] = d.b, j["min"] = num(d.lo), j["max"] = num(d.hi);
      break;
    case Dist::Kind::lognormal: j["mean_log"] = d.a, j["sd_log"] = d.b; break;
    case Dist::Kind::values: j["values"] = d.list; break;
    case Dist::Kind::grid: j["min"] = d.a, j["max"] = d.b, j["count"] = d.count; break;
  }
  return j;
}

}  // namespace

Config parse_config(const std::string& text, const std::string& path) {
  const Parser P(path);
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw ConfigError(path + ":" + std::to_string(e.source().begin.line) + ":" +
                      std::to_string(e.source().begin.column) + ": not valid TOML: " +
                      std::string(e.description()));
  }
  Config c;
  c.path = path;
  P.only_keys(root, "", {"model", "samples", "seed", "backend", "threads", "integrator",
                         "stabilization", "params", "initial", "output"});

  // model
  const toml::node* model = root.get("model");
  if (!model) P.fail(nullptr, "model", "missing; expected the name of a built-in model (see `ukb models`)");
  const std::string name = P.string(*model, "model");
  c.model = find_model(name);
  if (!c.model) {
    std::vector<std::string> names;
    for (const ModelInfo& m : all_models()) names.push_back(m.name);
    std::string msg = "unknown model '" + name + "'";
    const std::string near = closest_match(name, names);
    if (!near.empty()) msg += " (did you mean '" + near + "'?)";
    P.fail(model, "model", msg + "; expected one of " + join(names));
  }
  const ModelInfo& M = *c.model;

  const toml::node* samples = root.get("samples");
  if (!samples) P.fail(nullptr, "samples", "missing; expected the number of samples (an integer >= 1)");
  c.samples = P.integer(*samples, "samples", 1, 1000000000000L);
  if (const toml::node* s = root.get("seed"))
    c.seed = static_cast<std::uint64_t>(P.integer(*s, "seed", 0, std::numeric_limits<std::int64_t>::max()));
  if (const toml::node* b = root.get("backend")) {
    const std::string be = P.string(*b, "backend");
    const std::optional<Backend> parsed = parse_backend(be);
    if (!parsed) P.fail(b, "backend", "unknown backend '" + be + "'; expected reference, cpu or cuda");
    c.backend = *parsed;
  }
  if (const toml::node* t = root.get("threads")) c.threads = static_cast<int>(P.integer(*t, "threads", 0, 4096));

  // [integrator]
  const toml::node* integ = root.get("integrator");
  if (!integ) P.fail(nullptr, "integrator", "missing; expected a table [integrator] with at least dt");
  const toml::table& I = P.table(*integ, "integrator");
  P.only_keys(I, "integrator.", {"method", "dt", "t_end", "max_steps", "event_tol", "events",
                                 "monitor", "rank_rtol", "chunk"});
  if (const toml::node* m = I.get("method")) {
    const std::string method = P.string(*m, "integrator.method");
    if (method != "rk4") P.fail(m, "integrator.method", "unknown method '" + method + "'; expected rk4");
  }
  const toml::node* dt = I.get("dt");
  if (!dt) P.fail(integ, "integrator.dt", "missing; expected the time step (a number > 0)");
  c.run.dt = P.number(*dt, "integrator.dt");
  if (!(c.run.dt > 0)) P.fail(dt, "integrator.dt", "expected a time step > 0, got " + Parser::fmt(c.run.dt));
  bool bounded = false;
  if (const toml::node* te = I.get("t_end")) {
    c.run.t_end = P.number(*te, "integrator.t_end", true);
    bounded = std::isfinite(c.run.t_end);
  }
  if (const toml::node* ms = I.get("max_steps")) {
    c.run.max_steps = P.integer(*ms, "integrator.max_steps", 1, std::numeric_limits<long>::max());
    bounded = true;
  }
  if (!bounded)
    P.fail(integ, "integrator", "neither t_end (finite) nor max_steps is given; expected at least "
                                "one of them, or the run might never end");
  if (const toml::node* e = I.get("event_tol")) {
    c.run.event_tol = P.number(*e, "integrator.event_tol");
    if (!(c.run.event_tol > 0))
      P.fail(e, "integrator.event_tol", "expected a tolerance > 0, got " + Parser::fmt(c.run.event_tol));
  }
  if (const toml::node* e = I.get("events")) c.run.events = P.boolean(*e, "integrator.events");
  if (const toml::node* e = I.get("monitor")) c.run.monitor = P.boolean(*e, "integrator.monitor");
  if (const toml::node* r = I.get("rank_rtol")) {
    c.rank_rtol = P.number(*r, "integrator.rank_rtol");
    if (!(c.rank_rtol >= 0 && c.rank_rtol < 1))
      P.fail(r, "integrator.rank_rtol", "expected a number in [0, 1), got " + Parser::fmt(c.rank_rtol));
  }
  if (const toml::node* ch = I.get("chunk")) c.chunk = P.integer(*ch, "integrator.chunk", 1, 1 << 30);

  // [stabilization]
  if (const toml::node* sn = root.get("stabilization")) {
    const toml::table& S = P.table(*sn, "stabilization");
    P.only_keys(S, "stabilization.", {"method", "alpha", "beta", "gamma", "tol", "max_iter"});
    if (const toml::node* m = S.get("method")) {
      const std::string method = P.string(*m, "stabilization.method");
      const std::optional<Stabilization> parsed = parse_stabilization(method);
      if (!parsed) {
        std::string msg = "unknown method '" + method + "'";
        const std::string near = closest_match(method, {"none", "baumgarte", "projection"});
        if (!near.empty()) msg += " (did you mean '" + near + "'?)";
        P.fail(m, "stabilization.method", msg + "; expected none, baumgarte or projection");
      }
      c.run.stabilization = *parsed;
    }
    const std::string method(to_string(c.run.stabilization));
    // A key of the other method would be silently ignored: refuse it.
    auto only_for = [&](const char* key, Stabilization s) -> const toml::node* {
      const toml::node* k = S.get(key);
      if (k && c.run.stabilization != s)
        P.fail(k, std::string("stabilization.") + key,
               std::string("applies to method = \"") + std::string(to_string(s)) +
                   "\" only; this config's method is \"" + method + "\"");
      return k;
    };
    for (auto [key, field] : {std::pair{"alpha", &c.run.baumgarte_alpha},
                              std::pair{"beta", &c.run.baumgarte_beta},
                              std::pair{"gamma", &c.run.baumgarte_gamma}})
      if (const toml::node* k = only_for(key, Stabilization::baumgarte)) {
        *field = P.number(*k, std::string("stabilization.") + key);
        if (!(*field >= 0))
          P.fail(k, std::string("stabilization.") + key,
                 "expected a rate >= 0 (1/time units), got " + Parser::fmt(*field));
      }
    if (const toml::node* k = only_for("tol", Stabilization::projection)) {
      c.run.projection_tol = P.number(*k, "stabilization.tol");
      if (!(c.run.projection_tol >= 1e-15 && c.run.projection_tol < 1))
        P.fail(k, "stabilization.tol",
               "expected a relative tolerance in [1e-15, 1) (round-off in double is 1e-16), got " +
                   Parser::fmt(c.run.projection_tol));
    }
    if (const toml::node* k = only_for("max_iter", Stabilization::projection))
      c.run.projection_iters = static_cast<int>(P.integer(*k, "stabilization.max_iter", 1, 100));
    if (c.run.stabilization == Stabilization::baumgarte &&
        c.run.baumgarte_rates().fastest() * c.run.dt > 1)
      P.fail(sn, "stabilization",
             "the Baumgarte rates are too fast for integrator.dt = " + Parser::fmt(c.run.dt) +
                 ": max(2 alpha, beta, gamma) * dt = " +
                 Parser::fmt(c.run.baumgarte_rates().fastest() * c.run.dt) +
                 "; expected at most 1 (the stabilised drift would be stiff for RK4; the default "
                 "rates are " + Parser::fmt(default_baumgarte_rate) + ")");
    if (c.run.stabilization != Stabilization::none && !M.has_rows)
      P.fail(S.get("method"), "stabilization.method",
             "model '" + M.name + "' does not state its constraint rows; expected none");
  }

  // [params]
  for (const ParamInfo& p : M.params) {
    Dist d;
    d.a = p.default_value;
    c.params.push_back({p.name, d});
  }
  if (const toml::node* pn = root.get("params")) {
    const toml::table& T = P.table(*pn, "params");
    std::vector<std::string> names;
    for (const ParamInfo& p : M.params) names.push_back(p.name);
    P.only_keys(T, "params.", names);
    for (auto&& [k, v] : T) {
      const int idx = M.param_index(k.str());
      c.params[static_cast<std::size_t>(idx)].dist = P.dist(v, "params." + std::string(k.str()));
    }
  }

  // [initial]
  const bool natural = !M.initial_names.empty();
  for (const std::string& q : M.initial_names) c.initial.push_back({q, Dist{}});
  if (const toml::node* in = root.get("initial")) {
    const toml::table& T = P.table(*in, "initial");
    std::vector<std::string> allowed = M.initial_names;
    for (const char* k : {"q", "qd", "tolerance", "t0"}) allowed.emplace_back(k);
    P.only_keys(T, "initial.", allowed);
    if (const toml::node* t0 = T.get("t0")) c.t0 = P.number(*t0, "initial.t0");
    if (const toml::node* tol = T.get("tolerance")) {
      c.initial_tol = P.number(*tol, "initial.tolerance");
      if (!(c.initial_tol >= 0))
        P.fail(tol, "initial.tolerance", "expected a tolerance >= 0, got " + Parser::fmt(c.initial_tol));
    }
    const toml::node* q = T.get("q");
    const toml::node* qd = T.get("qd");
    if (q || qd) {
      for (const std::string& nm : M.initial_names)
        if (const toml::node* x = T.get(nm))
          P.fail(x, "initial." + nm, "natural quantities and raw q / qd cannot be mixed; give either " +
                                         join(M.initial_names) + " or q and qd");
      c.raw_initial = true;
      c.initial.clear();
      for (const char* which : {"q", "qd"}) {
        const toml::node* arr = T.get(which);
        for (int j = 0; j < M.n; ++j) {
          Input x{std::string(which) + "_" + M.coords[static_cast<std::size_t>(j)], Dist{}};
          if (arr) {
            const std::string key = std::string("initial.") + which;
            const toml::array* a = arr->as_array();
            if (!a) P.fail(arr, key, std::string("expected an array of ") + std::to_string(M.n) + " values, got " + type_name(*arr));
            if (static_cast<int>(a->size()) != M.n)
              P.fail(arr, key, "expected " + std::to_string(M.n) + " values (" + join(M.coords) +
                                   "), got " + std::to_string(a->size()));
            const toml::node& e = *a->get(static_cast<std::size_t>(j));
            x.dist = P.dist(e, key + "[" + std::to_string(j) + "]");
          }
          c.initial.push_back(x);
        }
      }
    } else {
      for (Input& x : c.initial)
        if (const toml::node* v = T.get(x.name)) x.dist = P.dist(*v, "initial." + x.name);
    }
  }
  if (!natural && !c.raw_initial) {
    c.raw_initial = true;
    for (const char* which : {"q", "qd"})
      for (int j = 0; j < M.n; ++j)
        c.initial.push_back({std::string(which) + "_" + M.coords[static_cast<std::size_t>(j)], Dist{}});
  }
  {
    // Every step must advance the time, up to the last instant of the run.
    const double t_last = std::isfinite(c.run.t_end) ? c.run.t_end
                                                     : c.t0 + static_cast<double>(c.run.max_steps) * c.run.dt;
    const double t_big = std::max(std::abs(c.t0), std::abs(t_last));
    if (!(t_big + c.run.dt * 1e-3 > t_big) || !std::isfinite(t_last))
      P.fail(dt, "integrator.dt",
             "the time step " + Parser::fmt(c.run.dt) + " is too small to advance the time near " +
                 Parser::fmt(t_big) + "; expected a larger dt or a smaller time range");
  }
  if (!(c.run.t_end > c.t0))
    P.fail(I.get("t_end"), "integrator.t_end",
           "expected an end time > the initial time t0 = " + Parser::fmt(c.t0) + ", got " +
               Parser::fmt(c.run.t_end));

  // Sweep axes: their product must stay countable.
  long total = 1;
  for (const Input* x : c.inputs())
    if (x->dist.is_axis()) {
      if (total > 1000000000000L / x->dist.axis_size())
        P.fail(nullptr, x->name, "the sweep axes (lists of values and grids) have more than 1e12 points together");
      total *= x->dist.axis_size();
    }

  // [output]
  if (const toml::node* on = root.get("output")) {
    const toml::table& O = P.table(*on, "output");
    P.only_keys(O, "output.", {"dir", "record", "record_every", "histogram_bins", "formats"});
    if (const toml::node* f = O.get("formats")) {
      const toml::array* a = f->as_array();
      if (!a || a->empty())
        P.fail(f, "output.formats", "expected a non-empty array of \"csv\" and \"npy\"");
      c.write_csv = c.write_npy = false;
      for (std::size_t i = 0; i < a->size(); ++i) {
        const std::string key = "output.formats[" + std::to_string(i) + "]";
        const std::string v = P.string(*a->get(i), key);
        if (v == "csv") c.write_csv = true;
        else if (v == "npy") c.write_npy = true;
        else P.fail(a->get(i), key, "unknown format '" + v + "'; expected csv or npy");
      }
    }
    if (const toml::node* d = O.get("dir")) {
      c.out_dir = P.string(*d, "output.dir");
      if (c.out_dir.empty()) P.fail(d, "output.dir", "expected a directory name, got an empty string");
    }
    if (const toml::node* r = O.get("record")) {
      const toml::array* a = r->as_array();
      if (!a) P.fail(r, "output.record", std::string("expected an array of sample indices, got ") + type_name(*r));
      for (std::size_t i = 0; i < a->size(); ++i) {
        const long s = P.integer(*a->get(i), "output.record[" + std::to_string(i) + "]", 0, c.samples - 1);
        if (std::find(c.record.begin(), c.record.end(), s) == c.record.end()) c.record.push_back(s);
      }
    }
    if (const toml::node* e = O.get("record_every"))
      c.record_every = P.integer(*e, "output.record_every", 1, std::numeric_limits<long>::max());
    if (const toml::node* h = O.get("histogram_bins"))
      c.histogram_bins = static_cast<int>(P.integer(*h, "output.histogram_bins", 1, 100000));
  }
  return c;
}

Config load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read the config file (" + std::strerror(errno) + ")");
  std::ostringstream s;
  s << in.rdbuf();
  return parse_config(s.str(), path);
}

std::string Config::to_json() const {
  nlohmann::json j;
  j["config_file"] = path;
  j["model"] = model->name;
  j["samples"] = samples;
  j["seed"] = seed;
  j["backend"] = std::string(to_string(backend));
  j["threads"] = threads;
  auto num = [](double v) -> nlohmann::json {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return v;
  };
  j["integrator"] = {{"method", "rk4"},
                     {"dt", run.dt},
                     {"t_end", num(run.t_end)},
                     {"max_steps", run.max_steps},
                     {"event_tol", run.event_tol},
                     {"events", run.events},
                     {"monitor", run.monitor},
                     {"rank_rtol", rank_rtol < 0 ? nlohmann::json("default") : nlohmann::json(rank_rtol)},
                     {"chunk", chunk}};
  {
    nlohmann::json s = {{"method", std::string(to_string(run.stabilization))}};
    if (run.stabilization == Stabilization::baumgarte) {
      const BaumgarteRates r = run.baumgarte_rates();
      s["alpha"] = r.alpha;
      s["beta"] = r.beta;
      s["gamma"] = r.gamma;
    } else if (run.stabilization == Stabilization::projection) {
      s["tol"] = run.projection_tolerance<double>();
      s["max_iter"] = run.projection_iters;
    }
    j["stabilization"] = s;
  }
  for (const Input& x : params) j["params"][x.name] = dist_json(x.dist);
  j["initial"]["kind"] = raw_initial ? "raw" : "natural";
  for (const Input& x : initial) j["initial"]["quantities"][x.name] = dist_json(x.dist);
  j["initial"]["tolerance"] = initial_tol;
  j["initial"]["t0"] = t0;
  std::vector<std::string> formats;
  if (write_csv) formats.emplace_back("csv");
  if (write_npy) formats.emplace_back("npy");
  j["output"] = {{"record", record},
                 {"record_every", record_every},
                 {"histogram_bins", histogram_bins},
                 {"formats", formats}};
  return j.dump(2);
}

}  // namespace ukb::run
