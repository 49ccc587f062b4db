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
