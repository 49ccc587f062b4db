// The C++ side of the Python module `ukb` (python/ukb/__init__.py is the
// public API; its docstrings and docs/python.md document it).
// This file converts between numpy and the library's type-erased entry
// points (registry.hpp, run.hpp); the argument checks a user sees with a
// useful message are in __init__.py, the ones here guard the C++ side.
//
// Outputs are numpy arrays over memory this module hands to Python: an
// ensemble's fields (structure of arrays: q of N systems is n rows of N, so
// the (N, n) array has strides (8, 8 N)) and the recorded trajectories, each
// owned by a capsule that is the arrays' base, so nothing is copied.
// The GIL is released while a backend works; between calls (and after every
// chunk of `run`) Python's signal handlers run, so Ctrl-C stops the work.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "ukb/crosscheck.hpp"
#include "ukb/cuda.hpp"
#include "ukb/model_file.hpp"
#include "ukb/registry.hpp"
#include "ukb/run.hpp"

namespace py = pybind11;

namespace {

using ukb::Field;
using ukb::ModelInfo;

// A numpy array over `data`, kept alive by `owner` (a capsule).
template <class T>
py::array view(const T* data, std::vector<py::ssize_t> shape, std::vector<py::ssize_t> strides, py::handle owner) {
  for (auto& s : strides) s *= static_cast<py::ssize_t>(sizeof(T));
  return py::array_t<T>(shape, strides, data, owner);
}

// A capsule that owns a heap object of type T.
template <class T>
py::capsule owner_of(std::shared_ptr<T> p) {
  auto* keep = new std::shared_ptr<T>(std::move(p));
  return py::capsule(keep, [](void* v) { delete static_cast<std::shared_ptr<T>*>(v); });
}

ukb::Backend backend_of(const std::string& s) {
  if (auto b = ukb::parse_backend(s)) return *b;
  throw std::invalid_argument("backend: expected 'reference', 'cpu' or 'cuda', got '" + s + "'");
}

py::dict param_dict(const ukb::ParamInfo& p) {
  py::dict d;
  d["name"] = p.name;
  d["default"] = p.default_value;
  d["range"] = p.range();
  d["description"] = p.description;
  d["lower"] = p.lower;  // admissible: above lower (or equal where lower_inclusive), or one of choices
  d["lower_inclusive"] = p.lower_inclusive;
  d["choices"] = p.choices;
  return d;
}

// A row-major (N, k) float64 array (the Python side converts inputs to one).
const double* rows_of(const py::array_t<double, py::array::c_style>& a, py::ssize_t N, py::ssize_t k,
                      const char* what) {
  if (a.ndim() != 2 || a.shape(0) != N || a.shape(1) != k)
    throw std::invalid_argument(std::string(what) + ": expected shape (" + std::to_string(N) + ", " +
                                std::to_string(k) + ")");
  return a.data();
}

// ---------------------------------------------------------------- evaluate

py::dict evaluate(const ModelInfo& M, const std::string& backend, const std::vector<double>& params,
                  const std::vector<double>& q, const std::vector<double>& qd, double t, double rank_rtol) {
  if (params.size() != M.params.size() || q.size() != std::size_t(M.n) || qd.size() != std::size_t(M.n))
    throw std::invalid_argument("evaluate: wrong number of values for '" + M.name + "'");
  const ukb::Backend be = backend_of(backend);
  ukb::Evaluation r;
  {
    py::gil_scoped_release nogil;
    r = M.evaluate(be, params, q.data(), qd.data(), t, rank_rtol);
  }
  auto arr = [](std::vector<double>& v) {
    auto keep = std::make_shared<std::vector<double>>(std::move(v));
    return view(keep->data(), {py::ssize_t(keep->size())}, {1}, owner_of(keep));
  };
  py::dict d;
  d["qdd"] = arr(r.qdd);
  d["Qc_ideal"] = arr(r.Qc_ideal);
  d["Qc_nonideal"] = arr(r.Qc_nonideal);
  d["lambda"] = arr(r.lambda);
  d["rank"] = r.rank;
  d["status"] = std::string(ukb::to_string(r.status));
  d["constraint_residual"] = r.constraint_residual;
  d["inconsistent"] = r.inconsistent;
  return d;
}

// ---------------------------------------------------------------- initial states

// The consistent states of N sets of natural quantities: q and qd (N, n),
// and whether each exists.
py::tuple initial_states(const ModelInfo& M, const py::array_t<double, py::array::c_style>& params,
                         const py::array_t<double, py::array::c_style>& ic) {
  if (!M.initial_state) throw std::invalid_argument("'" + M.name + "' has no natural initial quantities");
  const py::ssize_t N = ic.ndim() == 2 ? ic.shape(0) : 0;
  const py::ssize_t np_ = py::ssize_t(M.params.size()), k = py::ssize_t(M.initial_names.size()), n = M.n;
  const double* P = rows_of(params, N, np_, "params");
  const double* I = rows_of(ic, N, k, "initial quantities");
  py::array_t<double> q({N, n}), qd({N, n});
  py::array_t<bool> ok(N);
  double* Q = q.mutable_data();
  double* QD = qd.mutable_data();
  bool* OK = ok.mutable_data();
  for (py::ssize_t i = 0; i < N; ++i)
    OK[i] = M.initial_state(std::span<const double>(P + i * np_, std::size_t(np_)), I + i * k, Q + i * n, QD + i * n);
  return py::make_tuple(q, qd, ok);
}

// Position- and velocity-level constraint residuals of N states.
py::tuple residuals(const ModelInfo& M, const py::array_t<double, py::array::c_style>& params,
                    const py::array_t<double, py::array::c_style>& q, const py::array_t<double, py::array::c_style>& qd,
                    double t) {
  const py::ssize_t N = q.ndim() == 2 ? q.shape(0) : 0, n = M.n, np_ = py::ssize_t(M.params.size());
  const double* P = rows_of(params, N, np_, "params");
  const double* Q = rows_of(q, N, n, "q");
  const double* QD = rows_of(qd, N, n, "qd");
  py::array_t<double> pos(N), vel(N);
  double* a = pos.mutable_data();
  double* b = vel.mutable_data();
  for (py::ssize_t i = 0; i < N; ++i)
    M.residual(std::span<const double>(P + i * np_, std::size_t(np_)), Q + i * n, QD + i * n, t, a[i], b[i]);
  return py::make_tuple(pos, vel);
}

// The energy E = 1/2 q'^T M q' + V(q, t) and the kinetic energy T of N
// states, each with its own time (ukb.energy_balance).
py::tuple energies(const ModelInfo& M, const py::array_t<double, py::array::c_style>& params,
                   const py::array_t<double, py::array::c_style>& q, const py::array_t<double, py::array::c_style>& qd,
                   const py::array_t<double, py::array::c_style>& t) {
  const py::ssize_t N = q.ndim() == 2 ? q.shape(0) : 0, n = M.n, np_ = py::ssize_t(M.params.size());
  const double* Q = rows_of(q, N, n, "q");
  const double* QD = rows_of(qd, N, n, "qd");
  const double* P = rows_of(params, N, np_, "params");
  if (t.ndim() != 1 || t.shape(0) != N) throw std::invalid_argument("t: expected shape (" + std::to_string(N) + ",)");
  py::array_t<double> energy(N), kinetic(N);
  double* e = energy.mutable_data();
  double* k = kinetic.mutable_data();
  const std::vector<double> at_rest(static_cast<std::size_t>(n), 0.0);
  for (py::ssize_t i = 0; i < N; ++i) {
    const std::span<const double> values(P + i * np_, std::size_t(np_));
    const double* qi = Q + i * n;
    const double* qdi = QD + i * n;
    e[i] = M.energy(values, qi, qdi, t.data()[i]);
    k[i] = e[i] - M.energy(values, qi, at_rest.data(), t.data()[i]);  // T = E - V, V = E at rest
  }
  return py::make_tuple(energy, kinetic);
}

// ---------------------------------------------------------------- simulate

// The integrator options of a Python call by the table of run options
// (ukb/options.hpp): each of its type, the ones that do not apply to the
// method chosen refused, then the checks of the library (ukb::check).
ukb::RunOptions run_options(const py::dict& o) {
  ukb::RunOptions r;
  for (auto [key, value] : o) {
    const std::string k = py::cast<std::string>(key);
    const ukb::RunOptionInfo* row = ukb::find_run_option(k);
    if (!row) {
      std::vector<std::string> known;
      std::string hint;
      for (const ukb::RunOptionInfo& x : ukb::run_option_table()) {
        known.emplace_back(x.name);
        if (k == x.key || k == std::string(x.table) + "_" + x.key) hint = x.name;  // a config file's name
      }
      if (hint.empty()) hint = ukb::closest_match(k, known);
      std::string all;
      for (const std::string& n : known) all += (all.empty() ? "" : ", ") + n;
      throw std::invalid_argument("unknown integrator option '" + ukb::printable(k, 80) + "'" +
                                  (hint.empty() ? "" : "; did you mean '" + hint + "'?") + " (options: " + all + ")");
    }
    ukb::visit_run_options(r, [&](const ukb::RunOptionInfo& x, auto& v) {
      using V = std::remove_cvref_t<decltype(v)>;
      if (std::string_view(x.name) != row->name) return;
      try {
        if constexpr (std::is_enum_v<V>) {
          const std::string word = py::cast<std::string>(value);
          const std::optional<V> parsed = ukb::parse_option<V>(word);
          if (!parsed) {
            std::string choices;
            for (const std::string& c : ukb::option_choices<V>()) choices += (choices.empty() ? "'" : ", '") + c + "'";
            throw std::invalid_argument(k + ": expected one of " + choices + ", got '" + ukb::printable(word, 80) + "'");
          }
          v = *parsed;
        } else {
          v = py::cast<V>(value);
        }
      } catch (const py::cast_error&) {
        throw std::invalid_argument(k + ": " + std::string(py::str(py::repr(value))) + " has not the type the option takes");
      }
    });
  }
  for (auto [key, value] : o) {
    const std::string m = ukb::given_error(*ukb::find_run_option(py::cast<std::string>(key)), r);
    if (!m.empty()) throw std::invalid_argument(py::cast<std::string>(key) + ": " + m);
  }
  ukb::check(r);
  return r;
}

// The table of run options for the Python side: name -> (kind, doc).
py::dict run_option_kinds() {
  py::dict d;
  ukb::RunOptions r;
  ukb::visit_run_options(r, [&](const ukb::RunOptionInfo& x, auto& v) {
    using V = std::remove_cvref_t<decltype(v)>;
    const char* kind = std::is_enum_v<V> ? "choice"
                       : std::is_same_v<V, bool> ? "bool"
                       : std::is_same_v<V, long> ? "long"
                       : std::is_integral_v<V> ? "int"
                       : std::is_same_v<V, double> ? "real"
                                                   : "reals";
    d[py::str(x.name)] = py::make_tuple(kind, std::string(x.doc));
  });
  return d;
}

// Integrates every system of e until none has work left, in calls of about
// 0.1 s (a budget of steps that grows and shrinks with the time a call
// took), so that Ctrl-C is seen soon whatever the model costs; budgets never
// change results. With record_every, a call is record_every steps and the
// trajectories are returned: rows of [q (n x N), qd (n x N), t (N)], row k
// after k calls; a system that had stopped before a call has NaN in that
// call's row.
std::shared_ptr<std::vector<double>> integrate_all(ukb::Ensemble& ens, int coords, const ukb::RunOptions& r,
                                                   const ukb::EngineOptions& eo, long record_every) {
  ukb::Ensemble* const e = &ens;
  const py::ssize_t N = ens.size(), n = coords;
  const std::size_t row = std::size_t((2 * n + 1) * N);
  auto traj = std::make_shared<std::vector<double>>();
  auto record = [&](const std::vector<char>* moved) {
    const std::size_t base = traj->size();
    traj->resize(base + row, std::numeric_limits<double>::quiet_NaN());
    const double* q = e->real(Field::q);
    const double* qd = e->real(Field::qd);
    const double* t = e->real(Field::t);
    double* out = traj->data() + base;
    for (py::ssize_t i = 0; i < N; ++i) {
      if (moved && !(*moved)[std::size_t(i)]) continue;
      for (py::ssize_t j = 0; j < n; ++j) {
        out[j * N + i] = q[j * N + i];
        out[(n + j) * N + i] = qd[j * N + i];
      }
      out[2 * n * N + i] = t[i];
    }
  };
  const bool adaptive = r.method == ukb::Method::dopri5;
  // Which systems a call moved: their step count (dopri5: also the count of
  // rejected steps) or their status changed.
  // (The count of rejected steps is allocated by the first dopri5 call,
  // zero before.)
  std::vector<std::int64_t> mark(static_cast<std::size_t>(2 * N));
  bool have_rejected = false;
  auto snapshot = [&] {
    const std::int64_t* s = e->i64(Field::steps);
    const std::int32_t* st = e->i32(Field::status);
    const std::int64_t* rej = have_rejected ? e->i64(Field::rejected) : nullptr;
    for (py::ssize_t i = 0; i < N; ++i) {
      mark[std::size_t(i)] = s[i] + (rej ? rej[i] : 0);
      mark[std::size_t(N + i)] = st[i];
    }
  };

  long budget = record_every > 0 ? record_every : 16;
  if (record_every > 0) record(nullptr);
  std::vector<char> moved(static_cast<std::size_t>(N));
  // The steps taken so far: summed here once, then from each call's tally
  // (on cuda reduced on the device, without bringing the ensemble back).
  std::int64_t steps_done = 0;
  {
    const std::int64_t* s = e->i64(Field::steps);
    for (py::ssize_t i = 0; i < N; ++i) steps_done += s[i];
  }
  for (;;) {
    ukb::Tally left;
    bool progress = true;
    {
      py::gil_scoped_release nogil;
      if (record_every > 0) snapshot();
      const auto started = std::chrono::steady_clock::now();
      left = e->integrate(r, budget, eo);
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (record_every == 0) {
        if (took < 0.05 && budget < (1L << 40)) budget *= 2;
        else if (took > 0.4 && budget > 1) budget /= 2;
      }
      have_rejected = adaptive;
      progress = left.steps != steps_done;
      steps_done = left.steps;
      if (record_every > 0) {
        const std::int64_t* s = e->i64(Field::steps);
        const std::int32_t* st = e->i32(Field::status);
        const std::int64_t* rej = adaptive ? e->i64(Field::rejected) : nullptr;
        bool any = false;
        for (py::ssize_t i = 0; i < N; ++i) {
          const std::size_t k = std::size_t(i);
          moved[k] = mark[k] != s[i] + (rej ? rej[i] : 0) || mark[std::size_t(N) + k] != st[i];
          any = any || moved[k];
        }
        if (any) record(&moved);
      }
    }
    if (left.active == 0) break;
    if (!progress && !adaptive)
      throw std::runtime_error("the integration makes no progress (dt too small for t?)");
    // Ctrl-C: Python's handlers run here and raise KeyboardInterrupt.
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }

  return traj;
}

// What simulate returns of the ensemble's own fields: views owned by one
// capsule (the state, status, t_stop, the counters of results.csv).
void add_fields(py::dict& d, const ModelInfo& M, const ukb::RunOptions& r, const std::shared_ptr<ukb::Ensemble>& e) {
  const py::ssize_t N = e->size(), n = M.n;
  const py::capsule keep = owner_of(e);
  const py::ssize_t col = 1;
  d["q"] = view(e->real(Field::q), {N, n}, {col, N}, keep);
  d["qd"] = view(e->real(Field::qd), {N, n}, {col, N}, keep);
  d["t"] = view(e->real(Field::t), {N}, {1}, keep);
  d["status"] = view(e->i32(Field::status), {N}, {1}, keep);
  d["t_stop"] = view(e->real(Field::t_stop), {N}, {1}, keep);
  py::dict counters;
  for (const ukb::FieldInfo& f : ukb::field_table) {
    if (!f.column || f.field == Field::t_stop) continue;
    if (f.role != ukb::FieldRole::monitor && f.role != ukb::FieldRole::adaptive) continue;
    if (!ukb::column_written(M, r, f.when)) continue;  // the counters of results.csv
    if (f.real) counters[f.column] = view(e->real(f.field), {N}, {1}, keep);
    else if (f.bytes == 8) counters[f.column] = view(e->i64(f.field), {N}, {1}, keep);
    else counters[f.column] = view(e->i32(f.field), {N}, {1}, keep);
  }
  d["counters"] = counters;

}

// The quantities of each system's final state: energy_start/energy_end
// (models with a potential; e0 the energies at the start), the natural
// quantities (`final`) and the model's own observables.
void add_finals(py::dict& d, const ModelInfo& M, ukb::Ensemble& ens, const double* P, std::vector<double> e0) {
  ukb::Ensemble* const e = &ens;
  const py::ssize_t N = ens.size(), n = M.n, np_ = py::ssize_t(M.params.size());
  const double* q = e->real(Field::q);
  const double* qd = e->real(Field::qd);
  const double* t = e->real(Field::t);
  std::vector<double> qi(static_cast<std::size_t>(n)), qdi(static_cast<std::size_t>(n));
  auto state = [&](py::ssize_t i) {
    for (py::ssize_t j = 0; j < n; ++j) {
      qi[std::size_t(j)] = q[j * N + i];
      qdi[std::size_t(j)] = qd[j * N + i];
    }
  };
  if (M.has_potential) {
    auto end = std::make_shared<std::vector<double>>(std::size_t(N));
    for (py::ssize_t i = 0; i < N; ++i) {
      state(i);
      (*end)[std::size_t(i)] = M.energy(std::span<const double>(P + i * np_, std::size_t(np_)), qi.data(), qdi.data(), t[i]);
    }
    auto start = std::make_shared<std::vector<double>>(std::move(e0));
    d["energy_start"] = view(start->data(), {N}, {1}, owner_of(start));
    d["energy_end"] = view(end->data(), {N}, {1}, owner_of(end));
  }
  py::dict natural;
  if (M.natural_state) {
    const py::ssize_t k = py::ssize_t(M.initial_names.size());
    auto nat = std::make_shared<std::vector<double>>(std::size_t(k * N));
    std::vector<double> ic(static_cast<std::size_t>(k));
    for (py::ssize_t i = 0; i < N; ++i) {
      state(i);
      M.natural_state(std::span<const double>(P + i * np_, std::size_t(np_)), qi.data(), qdi.data(), ic.data());
      for (py::ssize_t j = 0; j < k; ++j) (*nat)[std::size_t(j * N + i)] = ic[std::size_t(j)];
    }
    const py::capsule own = owner_of(nat);
    for (py::ssize_t j = 0; j < k; ++j)
      natural[py::str(M.initial_names[std::size_t(j)])] = view(nat->data() + j * N, {N}, {1}, own);
  }
  d["final"] = natural;
  py::dict own_observables;  // the model's observable_names, at the final states
  if (M.observables) {
    const py::ssize_t k = py::ssize_t(M.observable_names.size());
    auto obs = std::make_shared<std::vector<double>>(std::size_t(k * N));
    std::vector<double> out(static_cast<std::size_t>(k));
    for (py::ssize_t i = 0; i < N; ++i) {
      state(i);
      M.observables(std::span<const double>(P + i * np_, std::size_t(np_)), qi.data(), qdi.data(), t[i], out.data());
      for (py::ssize_t j = 0; j < k; ++j) (*obs)[std::size_t(j * N + i)] = out[std::size_t(j)];
    }
    const py::capsule own = owner_of(obs);
    for (py::ssize_t j = 0; j < k; ++j)
      own_observables[py::str(M.observable_names[std::size_t(j)])] = view(obs->data() + j * N, {N}, {1}, own);
  }
  d["observables"] = own_observables;
}

py::dict simulate(const ModelInfo& M, const std::string& backend, const py::array_t<double, py::array::c_style>& params,
                  const py::array_t<double, py::array::c_style>& q0, const py::array_t<double, py::array::c_style>& qd0,
                  double t0, const py::dict& options, int threads, int chunk, bool simd, long record_every) {
  const py::ssize_t N = q0.ndim() == 2 ? q0.shape(0) : -1, n = M.n, np_ = py::ssize_t(M.params.size());
  if (N < 1 || N > std::numeric_limits<int>::max()) throw std::invalid_argument("q0: expected 1 to 2^31 - 1 systems");
  const double* P = rows_of(params, N, np_, "params");
  const double* Q = rows_of(q0, N, n, "q0");
  const double* QD = rows_of(qd0, N, n, "qd0");
  const ukb::RunOptions r = run_options(options);
  ukb::EngineOptions eo;
  eo.threads = threads;
  eo.chunk = chunk;
  eo.simd = simd;
  ukb::check(eo);
  if (record_every < 0) throw std::invalid_argument("record_every: expected an integer >= 1");

  std::shared_ptr<ukb::Ensemble> e = M.ensemble(static_cast<int>(N), backend_of(backend));
  std::vector<double> e0(static_cast<std::size_t>(N));
  for (py::ssize_t i = 0; i < N; ++i) {
    const std::span<const double> p(P + i * np_, std::size_t(np_));
    e->set(static_cast<int>(i), p, Q + i * n, QD + i * n, t0);
    e0[std::size_t(i)] = M.energy(p, Q + i * n, QD + i * n, t0);
  }
  const std::shared_ptr<std::vector<double>> traj = integrate_all(*e, M.n, r, eo, record_every);
  py::dict d;
  add_fields(d, M, r, e);
  add_finals(d, M, *e, P, std::move(e0));
  if (record_every > 0) {
    const std::size_t row = std::size_t((2 * n + 1) * N);
    const py::ssize_t T = py::ssize_t(traj->size() / row);
    const py::capsule own = owner_of(traj);
    const py::ssize_t rs = py::ssize_t(row);
    d["traj_q"] = view(traj->data(), {N, T, n}, {1, rs, N}, own);
    d["traj_qd"] = view(traj->data() + n * N, {N, T, n}, {1, rs, N}, own);
    d["traj_t"] = view(traj->data() + 2 * n * N, {N, T}, {1, rs}, own);
  }
  return d;
}

// ---------------------------------------------------------------- run

// Runs a config (text and where it came from, or the checkpoint in out_dir
// when `text` and `path` are empty and `resume`). `on_chunk(done, samples)`
// is called after every chunk with the GIL held; Python's signal handlers
// run then, and an exception from either (KeyboardInterrupt) stops the run
// after that chunk with a checkpoint and is raised again once execute has
// returned.
py::dict run(const std::string& text, const std::string& path, const std::string& dir, bool from_file,
             const std::string& out_dir, const std::optional<std::string>& backend, std::optional<int> threads,
             bool resume, bool force_npy, const py::object& on_chunk, const std::optional<std::string>& crosscheck,
             long crosscheck_samples) {
  ukb::run::Config c;
  if (from_file) c = ukb::run::load_config(path);
  else if (text.empty() && resume) c = ukb::run::resume_config(out_dir);
  else c = ukb::run::parse_config(text, ukb::run::ConfigSource{.path = path, .dir = dir});
  if (backend) c.backend = backend_of(*backend);
  if (threads) {
    if (*threads < 0) throw std::invalid_argument("threads: expected an integer >= 0 (0: all cores)");
    c.threads = *threads;
  }
  if (force_npy) c.write_npy = true;

  std::atomic<int> stop{0};
  std::optional<py::error_already_set> raised;
  ukb::run::ExecuteOptions o;
  o.out_dir = out_dir;
  o.resume = resume;
  o.stop = &stop;
  if (crosscheck) o.crosscheck = backend_of(*crosscheck);
  o.crosscheck_samples = crosscheck_samples;
  o.after_chunk = [&](long done) {
    py::gil_scoped_acquire gil;
    try {
      if (!on_chunk.is_none()) on_chunk(done, c.samples);
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    } catch (py::error_already_set& e) {
      // The traceback joins the exception, which is raised again later.
      if (e.trace()) PyException_SetTraceback(e.value().ptr(), e.trace().ptr());
      if (!raised) raised.emplace(std::move(e));
      stop.store(1);
    }
  };
  ukb::run::Outcome out;
  {
    py::gil_scoped_release nogil;
    out = ukb::run::execute(c, o);
  }
  py::dict d;
  d["interrupted"] = out.interrupted;
  d["done"] = out.done;
  d["samples"] = out.samples;
  d["checkpoint"] = out.checkpoint;
  d["status_counts"] = out.status_counts;
  d["wall_s"] = out.wall_s;
  d["out_dir"] = out.out_dir;
  d["crosschecked"] = out.crosschecked;
  d["crosscheck_pass"] = out.crosscheck_pass;
  d["crosscheck_verdict"] = out.crosscheck_verdict;
  d["warnings"] = ukb::run::warnings(out);
  d["write_npy"] = c.write_npy;
  d["write_csv"] = c.write_csv;
  if (raised) {
    d["raised"] = raised->value();
    d["raised_type"] = raised->type();
  }
  return d;
}

// Two tables of the same samples of a run of a config (text or file)
// compared under the cross-check's rules (crosscheck.hpp); the report as
// JSON text. A table: its numeric columns (names, values) and statuses.
std::string compare(const std::string& text, const std::string& path, const std::string& dir, bool from_file,
                    const std::vector<std::string>& names_a, const std::vector<std::vector<double>>& values_a,
                    const std::vector<std::string>& status_a, const std::vector<std::string>& names_b,
                    const std::vector<std::vector<double>>& values_b, const std::vector<std::string>& status_b,
                    const std::string& label_a, const std::string& label_b) {
  const ukb::run::Config c = from_file ? ukb::run::load_config(path)
                                       : ukb::run::parse_config(text, ukb::run::ConfigSource{.path = path, .dir = dir});
  auto results = [](const std::vector<std::string>& n, const std::vector<std::vector<double>>& v,
                    const std::vector<std::string>& s) {
    ukb::run::Results r;
    r.names = n;
    r.values = v;
    r.status = s;
    for (const auto& col : r.values)
      if (col.size() != r.status.size()) throw std::invalid_argument("a table's columns differ in length");
    return r;
  };
  return ukb::run::compare_results(c, results(names_a, values_a, status_a), results(names_b, values_b, status_b),
                                   label_a, label_b)
      .to_json();
}

py::dict read_results(const std::string& csv) {
  ukb::run::Results r = ukb::run::read_results(csv);
  py::dict d;
  py::list names;
  py::list columns;
  for (std::size_t k = 0; k < r.names.size(); ++k) {
    names.append(r.names[k]);
    auto keep = std::make_shared<std::vector<double>>(std::move(r.values[k]));
    columns.append(view(keep->data(), {py::ssize_t(keep->size())}, {1}, owner_of(keep)));
  }
  d["names"] = names;
  d["columns"] = columns;
  d["status"] = r.status;
  return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "The compiled part of the ukb module; use `import ukb`.";

  static py::exception<ukb::run::ConfigError> config_error(m, "ConfigError", PyExc_ValueError);
  static py::exception<ukb::ModelFileError> model_file_error(m, "ModelFileError", PyExc_ValueError);
  static py::exception<ukb::run::WriteError> write_error(m, "WriteError", PyExc_OSError);
  static py::exception<ukb::BackendUnavailable> backend_unavailable(m, "BackendUnavailable", PyExc_RuntimeError);
  static py::exception<ukb::ModelError> model_error(m, "ModelError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ukb::run::ConfigError& e) {
      config_error(e.what());
    } catch (const ukb::ModelFileError& e) {
      model_file_error(e.what());
    } catch (const ukb::run::WriteError& e) {
      write_error(e.what());
    } catch (const ukb::BackendUnavailable& e) {
      backend_unavailable(e.what());
    } catch (const ukb::ModelError& e) {
      model_error(e.what());
    }
  });

  py::class_<ModelInfo>(m, "Model", "A model: its coordinates, parameters and hooks (ukb.models()).")
      .def_property_readonly("name", [](const ModelInfo& M) { return M.name; })
      .def_property_readonly("summary", [](const ModelInfo& M) { return M.summary; })
      .def_property_readonly("n", [](const ModelInfo& M) { return M.n; }, "number of coordinates")
      .def_property_readonly("m", [](const ModelInfo& M) { return M.m; }, "number of constraint rows")
      .def_property_readonly("coords", [](const ModelInfo& M) { return M.coords; })
      .def_property_readonly("params", [](const ModelInfo& M) {
        py::list l;
        for (const auto& p : M.params) l.append(param_dict(p));
        return l;
      }, "parameters in order: dicts of name, default, range, description")
      .def_property_readonly("initial", [](const ModelInfo& M) {
        py::list l;
        for (const auto& p : M.initial) l.append(param_dict(p));
        return l;
      }, "natural initial quantities (ukb.initial_state), with their admissible values")
      .def_property_readonly("observables", [](const ModelInfo& M) { return M.observable_names; },
                             "the model's own results columns (its observable_names)")
      .def_property_readonly("hooks", [](const ModelInfo& M) {
        py::dict h;
        h["events"] = M.has_events;
        h["potential"] = M.has_potential;
        h["residual"] = M.has_residual;
        h["constraint_rows"] = M.has_rows;
        h["rebind"] = M.has_rebind;
        h["mass_diagonal"] = M.has_diagonal_mass;
        h["constraint_columns"] = M.has_constraint_columns;
        h["initial_state"] = M.initial_state != nullptr;
        h["observables"] = !M.observable_names.empty();
        return h;
      }, "which optional hooks the model has (docs/adding-a-model.md)")
      .def("__repr__", [](const ModelInfo& M) { return "<ukb.Model '" + M.name + "' n=" + std::to_string(M.n) + " m=" + std::to_string(M.m) + ">"; });

  m.def("models", [] {
    std::vector<const ModelInfo*> v;
    for (const ModelInfo& M : ukb::all_models()) v.push_back(&M);
    return v;
  }, py::return_value_policy::reference);
  m.def("find_model", [](const std::string& name) { return ukb::find_model(name); },
        py::return_value_policy::reference);
  m.def("run_options", &run_option_kinds,
        "the integrator options of simulate (ukb/options.hpp's table): name -> (kind, doc)");
  m.def("closest_match", [](const std::string& w, const std::vector<std::string>& c) { return ukb::closest_match(w, c); });
  m.def("load_model_file", [](const std::string& spec, bool cuda) -> const ModelInfo* {
    py::gil_scoped_release nogil;
    return &ukb::load_model_file(spec, {.cuda = cuda, .progress = true});
  }, py::return_value_policy::reference);
  m.def("evaluate", &evaluate);
  m.def("initial_states", &initial_states);
  m.def("residuals", &residuals);
  m.def("energies", &energies);
  m.def("cuda_devices", [] {
    std::string why;
    const int n = ukb::cuda::device_count(&why);
    return py::make_tuple(n, why);
  });
  m.def("default_rank_rtol", [] { return ukb::policy::default_rank_rtol<double>(); });
  m.def("simulate", &simulate);
  m.def("run", &run);
  m.def("read_results", &read_results);
  m.def("compare", &compare);
  m.def("integer_columns", [] {
    std::vector<std::string> v{"sample"};
    for (const ukb::FieldInfo& f : ukb::field_table)
      if (f.column && !f.real) v.emplace_back(f.column);
    return v;
  });
  // The points of sampling = "sobol" (checked by ukb.sobol_points).
  m.def("sobol_points", [](long n, int d, std::optional<std::uint64_t> seed, std::uint64_t replicate) {
    py::array_t<double> x({n, static_cast<long>(d)});
    auto v = x.mutable_unchecked<2>();
    for (long i = 0; i < n; ++i)
      for (int j = 0; j < d; ++j)
        v(i, j) = seed ? ukb::run::sobol_unit(*seed, replicate, static_cast<std::uint64_t>(i), j)
                       : static_cast<double>(ukb::run::sobol_bits(static_cast<std::uint64_t>(i), j)) * 0x1.0p-52;
    return x;
  });
  m.def("sobol_dimensions", &ukb::run::sobol_dimensions);
  // The quantiles behind the intervals of summary.json (tested against SciPy's).
  m.def("normal_quantile", &ukb::run::normal_quantile);
  m.def("t_quantile", &ukb::run::t_quantile);
  m.def("status_names", [] {
    std::vector<std::string> v;
    for (int s = 0; ukb::is_valid_status(s); ++s) v.push_back(ukb::run::status_name(static_cast<ukb::Status>(s)));
    return v;
  });
  m.attr("version") = ukb::version;
}
