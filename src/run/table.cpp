// The results table: columns from the config, the model and the field table.
#include "table.hpp"

#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
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

void rows_values(const Table& t, const Config& c, const Finals& f, long k0, long k1, const long* samples,
                 const double* e0, const long* at, const RowsOut& out, RowScratch& r) {
  const ModelInfo& M = *c.model;
  const int n = M.n, np = static_cast<int>(M.params.size());
  const long len = k1 - k0;
  const std::size_t N = static_cast<std::size_t>(f.N);
  // Column by column, each a run of stores in row order.
  auto put = [&](std::size_t col, auto&& value) {
    char* const to = out.col[col];
    for (long i = 0; i < len; ++i) {
      const std::uint64_t b = bits(value(static_cast<std::size_t>(k0 + i)));
      std::memcpy(to + 8 * (at ? at[i] : k0 + i), &b, 8);
    }
  };
  put(0, [&](std::size_t k) { return std::int64_t(samples[k - static_cast<std::size_t>(k0)]); });
  for (long i = 0; i < len; ++i) std::memcpy(out.status + 4 * (at ? at[i] : k0 + i), &f.status[k0 + i], 4);
  std::size_t col = t.c_t;
  put(col++, [&](std::size_t k) { return f.t[k]; });
  for (std::size_t j = 0; j < std::size_t(n); ++j) put(col++, [&](std::size_t k) { return f.q[j * N + k]; });
  for (std::size_t j = 0; j < std::size_t(n); ++j) put(col++, [&](std::size_t k) { return f.qd[j * N + k]; });
  for (std::size_t m = 0; m < t.monitors.size(); ++m) {
    if (f.real[m]) put(t.monitors[m].col, [&](std::size_t k) { return f.real[m][k]; });
    else if (f.i64s[m]) put(t.monitors[m].col, [&](std::size_t k) { return std::int64_t(f.i64s[m][k]); });
    else put(t.monitors[m].col, [&](std::size_t k) { return std::int64_t(f.i32s[m][k]); });
  }
  // The quantities the model computes from a system's state, row by row.
  const std::size_t nat = M.initial_names.size(), obs = M.observable_names.size();
  if (nat == 0 && obs == 0 && !t.energies) return;
  r.p.resize(static_cast<std::size_t>(np));
  r.q.resize(static_cast<std::size_t>(n));
  r.qd.resize(static_cast<std::size_t>(n));
  r.nat.resize(nat);
  r.obs.resize(obs);
  for (long i = 0; i < len; ++i) {
    const std::size_t k = static_cast<std::size_t>(k0 + i);
    auto store = [&](std::size_t to, double x) {
      const std::uint64_t b = bits(x);
      std::memcpy(out.col[to] + 8 * (at ? at[i] : k0 + i), &b, 8);
    };
    for (std::size_t j = 0; j < r.p.size(); ++j) r.p[j] = f.params[j * N + k];
    for (std::size_t j = 0; j < std::size_t(n); ++j) r.q[j] = f.q[j * N + k], r.qd[j] = f.qd[j * N + k];
    const double tf = f.t[k];
    std::size_t to = t.c_t + 1 + 2 * std::size_t(n);
    if (nat > 0) {
      M.natural_state(r.p, r.q.data(), r.qd.data(), r.nat.data());
      for (double x : r.nat) store(to++, x);
    }
    if (obs > 0) {
      M.observables(r.p, r.q.data(), r.qd.data(), tf, r.obs.data());
      for (double x : r.obs) store(to++, x);
    }
    if (t.energies) {
      const double e1 = M.energy(r.p, r.q.data(), r.qd.data(), tf);
      store(t.c_energy, e0[i]);
      store(t.c_energy + 1, e1);
      store(t.c_energy + 2, e0[i] - e1);
    }
  }
}

RowsOut table_out(Table& t) {
  RowsOut out;
  for (Column& col : t.cols)
    out.col.push_back(col.input ? nullptr
                      : col.integer ? reinterpret_cast<char*>(col.i.data())
                                    : reinterpret_cast<char*>(col.d.data()));
  out.status = reinterpret_cast<char*>(t.status.data());
  return out;
}

void put_row(Table& t, std::size_t row, const Config& c, long sample, const Finals& f, int k, double e0) {
  if (row >= t.rows()) throw std::logic_error("put_row: the table has no row " + std::to_string(row));
  RowScratch r;
  const long at = static_cast<long>(row);
  rows_values(t, c, f, k, k + 1, &sample, &e0, &at, table_out(t), r);
}

void append_rows(Table& t, const Config& c, const Finals& f, long k0, long k1, const long* samples,
                 const double* e0) {
  const std::size_t row = t.rows(), count = static_cast<std::size_t>(k1 - k0);
  for (Column& col : t.cols)
    if (!col.input) col.integer ? col.i.resize(row + count) : col.d.resize(row + count);
  t.status.resize(row + count);
  std::vector<long> at(count);
  for (std::size_t i = 0; i < count; ++i) at[i] = static_cast<long>(row + i);
  RowScratch r;
  rows_values(t, c, f, k0, k1, samples, e0, at.data(), table_out(t), r);
}

void append_row(Table& t, const Config& c, long sample, const Finals& f, int k, double e0) {
  append_rows(t, c, f, k, k + 1, &sample, &e0);
}

}  // namespace ukb::run
