// Cross-checking backends (include/ukb/crosscheck.hpp): reading results
// tables, the tolerance rules, the comparison and the choice of samples.
#include "ukb/crosscheck.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "output.hpp"

namespace ukb::run {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = line.find(',', from);
    cells.push_back(line.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) return cells;
    from = comma + 1;
  }
}

double cell_number(const std::string& s, bool& ok) {
  ok = true;
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  ok = ec == std::errc() && end == s.data() + s.size() && !s.empty();
  return v;
}

bool is_counter(const std::string& name) {
  for (const FieldInfo& f : field_table)
    if (f.column && name == f.column) return !f.real;
  return false;
}

const char* rule_name(CrossRule r) {
  switch (r) {
    case CrossRule::exact: return "exact";
    case CrossRule::one: return "within_one";
    case CrossRule::steps: return "steps";
    case CrossRule::time: return "time";
    case CrossRule::state: return "state";
    case CrossRule::reported: return "reported";
  }
  return "?";
}

}  // namespace

const std::vector<double>* Results::column(const std::string& name) const {
  for (std::size_t k = 0; k < names.size(); ++k)
    if (names[k] == name) return &values[k];
  return nullptr;
}

Results read_results(const std::string& csv_path) {
  std::ifstream f(csv_path);
  if (!f) throw ConfigError(csv_path + ": cannot be read");
  std::string line;
  if (!std::getline(f, line)) throw ConfigError(csv_path + ": empty; expected a results.csv of `ukb run`");
  const std::vector<std::string> head = split(line);
  std::size_t status_at = head.size();
  Results r;
  for (std::size_t k = 0; k < head.size(); ++k) {
    if (head[k] == "status") status_at = k;
    else r.names.push_back(head[k]);
  }
  if (status_at == head.size() || r.names.empty() || r.names[0] != "sample")
    throw ConfigError(csv_path + ": line 1: expected the header of a results.csv of `ukb run` (sample, ..., status, ...)");
  r.values.resize(r.names.size());
  for (long ln = 2; std::getline(f, line); ++ln) {
    const std::vector<std::string> cells = split(line);
    if (cells.size() != head.size())
      throw ConfigError(csv_path + ": line " + std::to_string(ln) + ": expected " + std::to_string(head.size()) +
                        " cells, got " + std::to_string(cells.size()));
    for (std::size_t k = 0, col = 0; k < cells.size(); ++k) {
      if (k == status_at) {
        r.status.push_back(cells[k]);
        continue;
      }
      bool ok = false;
      const double v = cell_number(cells[k], ok);
      if (!ok)
        throw ConfigError(csv_path + ": line " + std::to_string(ln) + ", column '" + head[k] +
                          "': expected a number, got '" + printable(cells[k], 40) + "'");
      r.values[col++].push_back(v);
    }
  }
  return r;
}

double crosscheck_tau(const Config& c) {
  if (c.run.method != Method::dopri5) return 1e-9;
  double tol = std::max(1e-9, 100 * c.run.rtol);
  for (double a : c.run.atol) tol = std::max(tol, 100 * a);
  return tol;
}

CrossRule crosscheck_rule(const Config& c, const std::string& column) {
  if (column == "sample" || column == "status") return CrossRule::exact;
  for (const Input* in : c.inputs())
    if (in->name == column) return CrossRule::exact;
  if (is_counter(column)) {
    // What the method spent, not what the system did: a step decision taken
    // within rounding of its threshold (an error norm at 1, a crossing at a
    // sampled point of the dense output) sends one backend down a location
    // by bisection, dozens of evaluations more for the same physics.
    if (column == "rejected" || column == "rhs_evals") return CrossRule::reported;
    if (c.run.method == Method::dopri5) return column == "events" ? CrossRule::exact : CrossRule::steps;
    return column == "projection_failures" ? CrossRule::one : CrossRule::exact;
  }
  if (column == "t_final" || column == "t_stop") return CrossRule::time;
  return CrossRule::state;
}

CrosscheckReport compare_results(const Config& c, const Results& a, const Results& b, const std::string& backend_a,
                                 const std::string& backend_b) {
  if (a.names != b.names)
    throw ConfigError("crosscheck: the two results tables have different columns (" + backend_a + ": " +
                      std::to_string(a.names.size()) + ", " + backend_b + ": " + std::to_string(b.names.size()) + ")");
  CrosscheckReport rep;
  rep.backend_a = backend_a;
  rep.backend_b = backend_b;
  rep.tau = crosscheck_tau(c);
  rep.event_tol = c.run.event_tol;
  rep.samples = static_cast<long>(b.rows());
  // Rows of a by sample.
  std::unordered_map<long, std::size_t> row_of;
  for (std::size_t r = 0; r < a.rows(); ++r) row_of[static_cast<long>(a.values[0][r])] = r;
  std::vector<std::size_t> ra(b.rows());
  for (std::size_t r = 0; r < b.rows(); ++r) {
    const auto it = row_of.find(static_cast<long>(b.values[0][r]));
    if (it == row_of.end())
      throw ConfigError("crosscheck: sample " + g17(b.values[0][r]) + " of " + backend_b + " is not in " + backend_a);
    ra[r] = it->second;
  }
  // The varying inputs' columns.
  std::vector<std::size_t> input_cols;
  for (std::size_t k = 1; k < b.names.size(); ++k)
    for (const Input* in : c.inputs())
      if (in->name == b.names[k]) input_cols.push_back(k);
  auto offender = [&](std::size_t r, double x, double y, double tol) {
    CrossOffender o;
    o.sample = static_cast<long>(b.values[0][r]);
    o.a = x, o.b = y, o.tol = tol;
    o.status_a = a.status[ra[r]], o.status_b = b.status[r];
    for (std::size_t k : input_cols) o.inputs.emplace_back(b.names[k], b.values[k][r]);
    return o;
  };
  // Keeps the 3 worst (by ratio) of a column.
  auto keep = [](std::vector<std::pair<double, CrossOffender>>& worst, double ratio, CrossOffender o) {
    worst.emplace_back(ratio, std::move(o));
    std::stable_sort(worst.begin(), worst.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    if (worst.size() > 3) worst.pop_back();
  };
  // Samples whose other columns are compared: the same status on both
  // sides and, with dopri5, one that ended where both backends end alike.
  std::vector<bool> comparable(b.rows());
  {
    CrossColumn col;
    col.name = "status";
    std::vector<std::pair<double, CrossOffender>> worst;
    for (std::size_t r = 0; r < b.rows(); ++r) {
      const bool same = a.status[ra[r]] == b.status[r];
      comparable[r] = same && (c.run.method != Method::dopri5 || b.status[r] == "finished" || b.status[r] == "at_rest");
      if (same) continue;
      ++col.failures;
      col.worst = col.max_abs = col.max_rel = std::numeric_limits<double>::infinity();
      if (worst.size() < 3) keep(worst, 1, offender(r, 0, 0, 0));
    }
    col.pass = col.failures == 0;
    for (auto& w : worst) col.offenders.push_back(std::move(w.second));
    rep.columns.push_back(std::move(col));
  }
  for (std::size_t k = 0; k < b.names.size(); ++k) {
    CrossColumn col;
    col.name = b.names[k];
    col.rule = crosscheck_rule(c, col.name);
    const std::vector<double>& x = a.values[k];
    const std::vector<double>& y = b.values[k];
    double scale = 0;  // state: max |b| over the compared samples
    for (std::size_t r = 0; r < b.rows(); ++r)
      if (comparable[r] && std::isfinite(y[r])) scale = std::max(scale, std::abs(y[r]));
    std::vector<std::pair<double, CrossOffender>> worst;
    for (std::size_t r = 0; r < b.rows(); ++r) {
      // Different outcomes (or dopri5 stopping early): only the sample and its inputs are comparable.
      if (!comparable[r] && (col.rule != CrossRule::exact || is_counter(col.name))) continue;
      const double u = x[ra[r]], v = y[r];
      double tol = 0;
      switch (col.rule) {
        case CrossRule::exact: tol = 0; break;
        case CrossRule::one: tol = 1; break;
        case CrossRule::steps: tol = 2 + 0.01 * std::max(std::abs(u), std::abs(v)); break;
        case CrossRule::time: tol = 2 * c.run.event_tol + rep.tau * (1 + (std::isfinite(v) ? std::abs(v) : 0)); break;
        case CrossRule::state: tol = rep.tau * (1 + scale); break;
        case CrossRule::reported: tol = std::numeric_limits<double>::infinity(); break;
      }
      double d;
      if (std::isnan(u) && std::isnan(v)) d = 0;
      else if (u == v) d = 0;  // infinities of the same sign too
      else if (std::isnan(u) || std::isnan(v) || std::isinf(u) || std::isinf(v)) d = std::numeric_limits<double>::infinity();
      else d = std::abs(u - v);
      col.max_abs = std::max(col.max_abs, d);
      col.max_rel = std::max(col.max_rel, v != 0 && std::isfinite(v) ? d / std::abs(v) : d);
      const double ratio = d == 0 ? 0 : (tol > 0 ? d / tol : std::numeric_limits<double>::infinity());
      col.worst = std::max(col.worst, ratio);
      if (d > tol) ++col.failures;
      // A reported column's samples that differ most, by their difference.
      if (d > 0) keep(worst, col.rule == CrossRule::reported ? d : ratio, offender(r, u, v, tol));
    }
    col.pass = col.failures == 0;
    for (auto& w : worst) col.offenders.push_back(std::move(w.second));
    rep.columns.push_back(std::move(col));
  }
  // The verdict.
  std::vector<const CrossColumn*> failed;
  const CrossColumn* worst = nullptr;
  for (const CrossColumn& col : rep.columns) {
    if (!col.pass) failed.push_back(&col);
    if (col.rule != CrossRule::exact && col.rule != CrossRule::reported && (!worst || col.worst > worst->worst))
      worst = &col;
  }
  rep.pass = failed.empty();
  std::ostringstream v;
  v << "crosscheck " << backend_a << " against " << backend_b << " on " << rep.samples << " samples, "
    << rep.columns.size() << " columns: ";
  if (rep.pass) {
    v << "passed";
    if (worst) {
      char share[32];
      std::snprintf(share, sizeof share, "%.2g", worst->worst);
      v << " (closest: " << worst->name << " at " << share << " of its tolerance)";
    }
  } else {
    v << "FAILED in " << failed.size() << (failed.size() == 1 ? " column" : " columns") << ":";
    for (std::size_t k = 0; k < failed.size() && k < 4; ++k) {
      const CrossColumn& col = *failed[k];
      const CrossOffender& o = col.offenders.front();
      v << (k ? "; " : " ") << col.name << " (" << col.failures << (col.failures == 1 ? " sample" : " samples")
        << ", worst sample " << o.sample << ": ";
      if (col.name == "status") v << o.status_a << " against " << o.status_b << ")";
      else v << g17(o.a) << " against " << g17(o.b) << ", tolerance " << g17(o.tol) << ")";
    }
    if (failed.size() > 4) v << "; ...";
  }
  rep.verdict = v.str();
  return rep;
}

std::string CrosscheckReport::to_json() const {
  nlohmann::json j;
  j["backend"] = backend_a;
  j["against"] = backend_b;
  j["samples"] = samples;
  j["pass"] = pass;
  j["verdict"] = verdict;
  j["tau"] = tau;
  j["event_tol"] = event_tol;
  auto num = [](double x) -> nlohmann::json {
    if (std::isfinite(x)) return x;
    return g17(x);  // JSON has no NaN or infinity: the words
  };
  nlohmann::json cols = nlohmann::json::array();
  for (const CrossColumn& c : columns) {
    nlohmann::json o;
    o["column"] = c.name;
    o["rule"] = rule_name(c.rule);
    o["max_abs"] = num(c.max_abs);
    o["max_rel"] = num(c.max_rel);
    o["worst_over_tolerance"] = num(c.worst);
    o["failures"] = c.failures;
    o["pass"] = c.pass;
    nlohmann::json w = nlohmann::json::array();
    for (const CrossOffender& f : c.offenders) {
      nlohmann::json x;
      x["sample"] = f.sample;
      x["status"] = {{backend_a, f.status_a}, {backend_b, f.status_b}};
      if (c.name != "status") {
        x[backend_a] = num(f.a);
        x[backend_b] = num(f.b);
        x["tolerance"] = num(f.tol);
      }
      nlohmann::json in = nlohmann::json::object();
      for (const auto& [name, value] : f.inputs) in[name] = num(value);
      x["inputs"] = in;
      w.push_back(x);
    }
    o["worst"] = w;
    cols.push_back(o);
  }
  j["columns"] = cols;
  return j.dump(2) + "\n";
}

std::vector<long> crosscheck_subset(const Config& c, std::span<const std::int32_t> status, long K) {
  const long S = static_cast<long>(status.size());  // the samples run: c.samples, or fewer where [stop] ended the run
  std::vector<long> out;
  if (K <= 0) return out;
  if (S <= K) {
    for (long i = 0; i < S; ++i) out.push_back(i);
    return out;
  }
  long P = 1;  // points of the sweep
  for (const Input* x : c.inputs())
    if (x->dist.is_axis()) P *= x->dist.axis_size();
  P = std::min(P, S);  // sample i is at point i mod P
  constexpr std::uint32_t point_stream = 0x504e5453u, sample_stream = 0x43524f53u;  // "PNTS", "CROS"
  auto point_hash = [&](long p) { return uniform01(c.seed, static_cast<std::uint64_t>(p), point_stream, 0, 0); };
  // The points that take part: all where there are at most K, else the K
  // of smallest hash (a bounded max-heap).
  std::unordered_map<long, std::size_t> chosen;  // point -> its index in `points`
  std::vector<long> points;
  if (P <= K) {
    for (long p = 0; p < P; ++p) chosen[p] = points.size(), points.push_back(p);
  } else {
    std::priority_queue<std::pair<double, long>> h;
    for (long p = 0; p < P; ++p) {
      const std::pair<double, long> e{point_hash(p), p};
      if (static_cast<long>(h.size()) < K) h.push(e);
      else if (e < h.top()) h.pop(), h.push(e);
    }
    while (!h.empty()) points.push_back(h.top().second), h.pop();
    std::sort(points.begin(), points.end());
    for (std::size_t k = 0; k < points.size(); ++k) chosen[points[k]] = k;
  }
  // Per chosen point and status, the `need` samples of smallest hash.
  const long need = (K + static_cast<long>(points.size()) - 1) / static_cast<long>(points.size());
  using Entry = std::pair<double, long>;  // (hash, sample)
  std::vector<std::map<std::int32_t, std::priority_queue<Entry>>> groups(points.size());
  for (long i = 0; i < S; ++i) {
    const auto it = chosen.find(i % P);
    if (it == chosen.end()) continue;
    const std::int32_t st = i < static_cast<long>(status.size()) ? status[static_cast<std::size_t>(i)] : 0;
    auto& h = groups[it->second][st];
    const Entry e{uniform01(c.seed, static_cast<std::uint64_t>(i), sample_stream, 0, 0), i};
    if (static_cast<long>(h.size()) < need) h.push(e);
    else if (e < h.top()) h.pop(), h.push(e);
  }
  // Per point: its statuses in turn, from one chosen by the point's hash.
  std::vector<std::vector<long>> order(points.size());
  for (std::size_t k = 0; k < points.size(); ++k) {
    std::vector<std::vector<long>> lists;
    for (auto& [st, h] : groups[k]) {
      std::vector<Entry> v;
      while (!h.empty()) v.push_back(h.top()), h.pop();
      std::sort(v.begin(), v.end());
      lists.emplace_back();
      for (const Entry& e : v) lists.back().push_back(e.second);
    }
    if (lists.empty()) continue;
    const std::size_t first = static_cast<std::size_t>(point_hash(points[k]) * static_cast<double>(lists.size()));
    std::rotate(lists.begin(), lists.begin() + static_cast<std::ptrdiff_t>(std::min(first, lists.size() - 1)),
                lists.end());
    for (std::size_t r = 0;; ++r) {
      bool any = false;
      for (const auto& l : lists)
        if (r < l.size()) order[k].push_back(l[r]), any = true;
      if (!any) break;
    }
  }
  for (std::size_t r = 0; static_cast<long>(out.size()) < K; ++r) {
    bool any = false;
    for (const std::vector<long>& o : order) {
      if (r >= o.size()) continue;
      any = true;
      out.push_back(o[r]);
      if (static_cast<long>(out.size()) == K) break;
    }
    if (!any) break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ukb::run
