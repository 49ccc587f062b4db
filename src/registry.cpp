#include "ukb/registry.hpp"

#include "ukb/fields.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <limits>


namespace ukb {
namespace {

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

ParamInfo param_info(const char* name, double value, const char* doc) {
  ParamInfo p;
  p.name = name;
  p.default_value = value;
  p.description = doc;
  const std::string& d = p.description;
  const std::size_t open = d.rfind('(');
  if (open == std::string::npos || d.empty() || d.back() != ')') return p;
  std::string inner = d.substr(open + 1, d.size() - open - 2);
  if (inner.rfind("one of ", 0) == 0) {
    std::vector<double> values;
    const char* c = inner.c_str() + 7;
    for (;;) {
      char* end = nullptr;
      const double x = std::strtod(c, &end);
      if (end == c) return p;
      values.push_back(x);
      while (*end == ' ') ++end;
      if (*end == '\0') break;
      if (*end != ',') return p;
      c = end + 1;
    }
    p.choices = values;
    return p;
  }
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

double Ensemble::value(Field f, int i, int j) {
  const FieldInfo& info = field_info(f);
  const std::size_t k = soa(j, i, size());
  if (info.real) return real(f)[k];
  return info.bytes == 8 ? static_cast<double>(i64(f)[k]) : static_cast<double>(i32(f)[k]);
}

int ModelInfo::param_index(std::string_view key) const {
  for (std::size_t i = 0; i < params.size(); ++i)
    if (params[i].name == key) return static_cast<int>(i);
  return -1;
}

bool ParamInfo::admits(double v) const {
  if (!choices.empty()) return std::find(choices.begin(), choices.end(), v) != choices.end();
  const bool subnormal = v != 0 && std::abs(v) < std::numeric_limits<double>::min();  // subnormal_note's
  return std::isfinite(v) && !subnormal && (lower_inclusive ? v >= lower : v > lower);
}

std::string subnormal_note(double v) {
  if (!(v != 0 && std::abs(v) < std::numeric_limits<double>::min())) return "";
  return "; a subnormal number (0 < |x| < 2.2250738585072014e-308) is never admitted: the model's arithmetic "
         "loses its digits there";
}

std::string ParamInfo::range() const {
  if (!choices.empty()) {
    std::ostringstream s;
    s << "one of ";
    for (std::size_t i = 0; i < choices.size(); ++i) s << (i ? ", " : "") << choices[i];
    return s.str();
  }
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

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const std::string& c : candidates) {
    // The distance is at least the difference in length: a word that much
    // longer (or shorter) is no typo of c, and its distance is not computed
    // (a 50 MB name costs nothing).
    const std::size_t longer = std::max(word.size(), c.size()), shorter = std::min(word.size(), c.size());
    if (longer - shorter > std::max<std::size_t>(1, longer / 3)) continue;
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

std::string printable(std::string_view text, std::size_t max_bytes, bool keep_newlines) {
  std::string out;
  const std::size_t n = max_bytes > 0 && text.size() > max_bytes ? max_bytes : text.size();
  out.reserve(n + 16);
  char hex[8];
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const bool newline = keep_newlines && (c == '\n' || c == '\t');
    // C0 controls, DEL, and the C1 controls in UTF-8 (0xC2 0x80-0x9F), which
    // terminals also act on.
    const bool c1 = c == 0xC2 && i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xE0) == 0x80;
    if ((c < 0x20 && !newline) || c == 0x7F || c1) {
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
      if (c1) {
        std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(text[++i]));
        out += hex;
      }
    } else {
      out += static_cast<char>(c);
    }
  }
  if (n < text.size()) {
    // Not in the middle of a UTF-8 character.
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
    out += "... (" + std::to_string(text.size()) + " bytes)";
  }
  return out;
}

std::string name_problems(const ModelInfo& M) {
  auto bad = [](const std::string& n) -> std::string {
    if (n.empty()) return "is empty";
    if (n.size() > 64) return "is longer than 64 characters";
    if (std::isdigit(static_cast<unsigned char>(n[0]))) return "starts with a digit";
    for (char ch : n)
      if (!(std::isalnum(static_cast<unsigned char>(ch)) && static_cast<unsigned char>(ch) < 128) && ch != '_')
        return "has a character other than ASCII letters, digits and '_'";
    return "";
  };
  auto check = [&](const char* what, const std::vector<std::string>& names) -> std::string {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (const std::string why = bad(names[i]); !why.empty())
        return std::string(what) + " '" + printable(names[i], 80) + "' " + why;
      for (std::size_t j = 0; j < i; ++j)
        if (names[j] == names[i]) return std::string(what) + " '" + printable(names[i], 80) + "' is given twice";
    }
    return "";
  };
  std::vector<std::string> inputs;
  for (const ParamInfo& p : M.params) inputs.push_back(p.name);
  std::string why = check("the coordinate", M.coords);
  if (why.empty()) why = check("the parameter", inputs);
  if (why.empty()) why = check("the natural quantity", M.initial_names);
  if (why.empty()) why = check("the observable", M.observable_names);
  if (why.empty() && !M.observable_names.empty()) {
    // Every column a results table of the model may have besides them
    // (src/run/table.cpp), whatever the config writes.
    std::vector<std::string> taken = {"sample", "status", "t_final", "energy_start", "energy_end", "energy_dissipated"};
    for (const FieldInfo& f : field_table)
      if (f.column) taken.push_back(f.column);
    for (const std::string& x : inputs) taken.push_back(x);
    for (const std::string& x : M.initial_names) taken.push_back(x), taken.push_back(x + "_final");
    for (const std::string& x : M.coords) taken.push_back("q_" + x + "_final"), taken.push_back("qd_" + x + "_final");
    for (const std::string& o : M.observable_names)
      if (why.empty() && std::find(taken.begin(), taken.end(), o) != taken.end())
        why = "the observable '" + o + "' is also the name of another column of the results (a parameter, a natural "
              "quantity, a final coordinate or a column ukb writes)";
  }
  if (why.empty()) {
    for (const std::string& q : M.initial_names)
      if (why.empty() && std::find(inputs.begin(), inputs.end(), q) != inputs.end())
        why = "'" + q + "' is both a parameter and a natural quantity (each becomes an input column of the results)";
  }
  return why.empty() ? why : why + " (names must be 1 to 64 ASCII letters, digits and '_', not starting with a digit, "
                                   "and distinct)";
}

bool column_written(const ModelInfo& M, const RunOptions& r, ColumnWhen when) {
  switch (when) {
    case ColumnWhen::always: return true;
    case ColumnWhen::monitored: return M.has_residual && r.monitor;
    case ColumnWhen::projecting: return r.stabilization == Stabilization::projection;
    case ColumnWhen::adaptive: return r.method == Method::dopri5;
  }
  return false;
}

}  // namespace ukb
