// The results table: columns from the config, the model and the field table.
#include "table.hpp"

#include <vector>

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

void append_row(Table& t, const Config& c, long sample, const Finals& f, int k, double e0) {
  const ModelInfo& M = *c.model;
  const int n = M.n, np = static_cast<int>(M.params.size());
  std::vector<double> p(static_cast<std::size_t>(np)), q(static_cast<std::size_t>(n)), qd(static_cast<std::size_t>(n));
  for (int j = 0; j < np; ++j) p[std::size_t(j)] = f.params[soa(j, k, f.N)];
  for (int j = 0; j < n; ++j) q[std::size_t(j)] = f.q[soa(j, k, f.N)], qd[std::size_t(j)] = f.qd[soa(j, k, f.N)];
  const double tf = f.t[k];
  t.cols[0].i.push_back(sample);
  t.status.push_back(f.status[k]);
  std::size_t col = t.c_t;
  t.cols[col++].d.push_back(tf);
  for (double x : q) t.cols[col++].d.push_back(x);
  for (double x : qd) t.cols[col++].d.push_back(x);
  if (!M.initial_names.empty()) {
    std::vector<double> nat(M.initial_names.size());
    M.natural_state(p, q.data(), qd.data(), nat.data());
    for (double x : nat) t.cols[col++].d.push_back(x);
  }
  for (std::size_t m = 0; m < t.monitors.size(); ++m) {
    Column& to = t.cols[t.monitors[m].col];
    if (f.real[m]) to.d.push_back(f.real[m][k]);
    else if (f.i64s[m]) to.i.push_back(f.i64s[m][k]);
    else to.i.push_back(f.i32s[m][k]);
  }
  if (t.energies) {
    const double e1 = M.energy(p, q.data(), qd.data(), tf);
    t.cols[t.c_energy].d.push_back(e0);
    t.cols[t.c_energy + 1].d.push_back(e1);
    t.cols[t.c_energy + 2].d.push_back(e0 - e1);
  }
}

}  // namespace ukb::run
