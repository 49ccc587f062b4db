// The results table: columns from the config, the model and the field table.
#include "table.hpp"

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "ukb/registry.hpp"
#include "ukb/run.hpp"

namespace ukb::run {
namespace {

Column& add(Table& t, std::string name, bool integer, std::size_t reserve) {
  t.cols.push_back({std::move(name), integer, false, {}, {}});
  integer ? t.cols.back().i.reserve(reserve) : t.cols.back().d.reserve(reserve);
  return t.cols.back();
}

bool written(const Config& c, ColumnWhen when) { return column_written(*c.model, c.run, when); }

}  // namespace

Table make_table(const Config& c) {
  const ModelInfo& M = *c.model;
  const std::size_t S = static_cast<std::size_t>(c.samples);
  Table t;
  add(t, "sample", true, S);
  const std::vector<const Input*> inputs = c.inputs();
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k]->dist.kind != Dist::Kind::fixed) {
      t.varying.push_back(k);
      add(t, inputs[k]->name, false, S).input = true;
    }
  t.status_at = t.cols.size();
  t.status.reserve(S);
  t.c_t = t.cols.size();
  add(t, "t_final", false, S);
  for (const std::string& x : M.coords) add(t, "q_" + x + "_final", false, S);
  for (const std::string& x : M.coords) add(t, "qd_" + x + "_final", false, S);
  for (const std::string& x : M.initial_names) add(t, x + "_final", false, S);
  for (const std::string& x : M.observable_names) add(t, x, false, S);
  // The run monitors with a results column, in the field table's order; the
  // energies follow the ones written always.
  t.energies = M.has_potential;
  bool energies_placed = false;
  auto place_energies = [&] {
    if (energies_placed) return;
    energies_placed = true;
    t.c_energy = t.cols.size();
    if (!t.energies) return;
    add(t, "energy_start", false, S);
    add(t, "energy_end", false, S);
    add(t, "energy_dissipated", false, S);
  };
  for (const FieldInfo& f : field_table) {
    if ((f.role != FieldRole::monitor && f.role != FieldRole::adaptive) || !f.column) continue;
    if (f.when != ColumnWhen::always) place_energies();
    if (!written(c, f.when)) continue;
    t.monitors.push_back({f.field, t.cols.size()});
    add(t, f.column, !f.real, S);
  }
  place_energies();
  // Names the results would not tell apart (a CSV header, a NumPy
  // structured array and summary.json need distinct columns): a coordinate
  // `x_final`... of a model file that passed name_problems.
  std::set<std::string> seen{"status"};
  for (const Column& col : t.cols)
    if (!seen.insert(col.name).second)
      throw ConfigError(c.path + ": key 'model': the results of model '" + printable(M.name, 80) +
                        "' would have two columns named '" + printable(col.name, 80) +
                        "'; rename the model's coordinate, parameter, natural quantity or observable that makes it");
  return t;
}

Finals::Finals(Ensemble& e, const Table& table)
    : N(e.size()),
      q(e.real(Field::q)),
      qd(e.real(Field::qd)),
      t(e.real(Field::t)),
      params(e.real(Field::params)),
      status(e.i32(Field::status)) {
  for (const Table::Monitor& m : table.monitors) {
    const FieldInfo& info = field_info(m.field);
    real.push_back(info.real ? e.real(m.field) : nullptr);
    i64s.push_back(!info.real && info.bytes == 8 ? e.i64(m.field) : nullptr);
    i32s.push_back(!info.real && info.bytes == 4 ? e.i32(m.field) : nullptr);
  }
}

namespace {
std::uint64_t bits(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, 8);
  return b;
}
std::uint64_t bits(std::int64_t x) { return static_cast<std::uint64_t>(x); }
}  // namespace

void row_values(const Table& t, const Config& c, long sample, const Finals& f, int k, double e0,
                std::uint64_t* by_col, std::int32_t& status, RowScratch& r) {
  const ModelInfo& M = *c.model;
  const int n = M.n, np = static_cast<int>(M.params.size());
  r.p.resize(static_cast<std::size_t>(np));
  r.q.resize(static_cast<std::size_t>(n));
  r.qd.resize(static_cast<std::size_t>(n));
  for (int j = 0; j < np; ++j) r.p[std::size_t(j)] = f.params[soa(j, k, f.N)];
  for (int j = 0; j < n; ++j) r.q[std::size_t(j)] = f.q[soa(j, k, f.N)], r.qd[std::size_t(j)] = f.qd[soa(j, k, f.N)];
  const double tf = f.t[k];
  by_col[0] = bits(std::int64_t(sample));
  status = f.status[k];
  std::size_t col = t.c_t;
  by_col[col++] = bits(tf);
  for (double x : r.q) by_col[col++] = bits(x);
  for (double x : r.qd) by_col[col++] = bits(x);
  if (!M.initial_names.empty()) {
    r.nat.resize(M.initial_names.size());
    M.natural_state(r.p, r.q.data(), r.qd.data(), r.nat.data());
    for (double x : r.nat) by_col[col++] = bits(x);
  }
  if (!M.observable_names.empty()) {
    r.obs.resize(M.observable_names.size());
    M.observables(r.p, r.q.data(), r.qd.data(), tf, r.obs.data());
    for (double x : r.obs) by_col[col++] = bits(x);
  }
  for (std::size_t m = 0; m < t.monitors.size(); ++m) {
    std::uint64_t& to = by_col[t.monitors[m].col];
    if (f.real[m]) to = bits(f.real[m][k]);
    else if (f.i64s[m]) to = bits(std::int64_t(f.i64s[m][k]));
    else to = bits(std::int64_t(f.i32s[m][k]));
  }
  if (t.energies) {
    const double e1 = M.energy(r.p, r.q.data(), r.qd.data(), tf);
    by_col[t.c_energy] = bits(e0);
    by_col[t.c_energy + 1] = bits(e1);
    by_col[t.c_energy + 2] = bits(e0 - e1);
  }
}

void put_row(Table& t, std::size_t row, const Config& c, long sample, const Finals& f, int k, double e0) {
  std::vector<std::uint64_t> v(t.cols.size());
  std::int32_t st;
  RowScratch r;
  row_values(t, c, sample, f, k, e0, v.data(), st, r);
  for (std::size_t j = 0; j < t.cols.size(); ++j) {
    Column& col = t.cols[j];
    if (col.input) continue;
    std::memcpy(col.integer ? static_cast<void*>(&col.i.at(row)) : static_cast<void*>(&col.d.at(row)), &v[j], 8);
  }
  t.status.at(row) = st;
}

void append_row(Table& t, const Config& c, long sample, const Finals& f, int k, double e0) {
  const std::size_t row = t.rows();
  for (Column& col : t.cols)
    if (!col.input) col.integer ? col.i.push_back(0) : col.d.push_back(0);
  t.status.push_back(0);
  put_row(t, row, c, sample, f, k, e0);
}

}  // namespace ukb::run
