// The `ukb` command-line tool.
//
//   ukb models [--json] [--file MODEL_FILE [--backend cuda]]
//   ukb accel --model NAME|MODEL_FILE [--param KEY=VALUE]... --q v1,v2,... --qd v1,v2,...
//             [--t T] [--backend reference]
//   ukb trajectory --model NAME [--param KEY=VALUE]... --q ... --qd ... --dt DT
//             --steps K [--every J] [--t0 T] [--out FILE]
//   ukb run CONFIG [--backend reference|cpu|cuda] [--out DIR] [--threads N] [--quiet]
//           [--crosscheck BACKEND [--crosscheck-samples K]]
//   ukb run [CONFIG] --resume DIR [--threads N] [--quiet]
//
// Exit codes: 0 success; 1 the evaluation or integration failed (status in
// the output; for `run`: some sample failed, the outputs are written);
// 2 bad input (message on stderr; also a model whose own code throws); 3 internal error; 4 an output could not be
// written (a full disk, /dev/full, a quota: the message names the file and
// the cause, and for `run` what was kept); 130 / 143 `run` interrupted by
// SIGINT / SIGTERM (a checkpoint is written; --resume continues); 5 `run
// --crosscheck`: the run is complete, but its samples integrated again on
// the other backend differ beyond the tolerances (crosscheck.json).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <optional>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.hpp"
#include "cluster.hpp"
#include "files.hpp"
#include "output.hpp"
#include "ukb/config.hpp"
#include "ukb/cuda.hpp"
#include "ukb/policy.hpp"
#include "ukb/model_file.hpp"
#include "ukb/registry.hpp"
#include "ukb/crosscheck.hpp"
#include "ukb/run.hpp"
#include <signal.h>
#include <unistd.h>

#include <csignal>

namespace {

using ukb::ModelInfo;

/// Bad input: reported on stderr, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

/// Parses a finite number; `what` names the option for the message.
double parse_number(const std::string& text, const std::string& what) {
  std::string s = trim(text);
  if (s.size() > 1 && s[0] == '+' && s[1] != '-') s.erase(0, 1);  // from_chars takes no '+'
  double v = 0;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (!s.empty() && ec == std::errc::result_out_of_range && ptr == end)
    throw UsageError(what + ": '" + ukb::printable(text, 80) + "' is out of range for a double");
  if (s.empty() || ec != std::errc() || ptr != end)
    throw UsageError(what + ": '" + ukb::printable(text, 80) + "' is not a number");
  if (!std::isfinite(v)) throw UsageError(what + ": '" + ukb::printable(text, 80) + "' is not a finite number");
  return v;
}

/// Parses "v1,v2,..." into exactly `n` numbers.
std::vector<double> parse_vector(const std::string& text, int n, const std::string& what,
                                 const ModelInfo& model) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parse_number(item, what));
  if (!text.empty() && text.back() == ',') out.push_back(parse_number("", what));
  if (static_cast<int>(out.size()) != n) {
    std::string names;
    for (const auto& c : model.coords) names += (names.empty() ? "" : ",") + c;
    throw UsageError(what + ": expected " + std::to_string(n) + " comma-separated numbers (" +
                     names + ") for model '" + model.name + "', got " +
                     std::to_string(out.size()));
  }
  return out;
}

// A built-in model by name, or a model file ("path[:Name]", compiled with
// the cuda backend where `cuda`).
const ModelInfo& lookup_model(const std::string& name, bool cuda = false) {
  if (ukb::is_model_file(name)) {
    try {
      return ukb::load_model_file(name, {.cuda = cuda, .progress = true});
    } catch (const ukb::ModelFileError& e) {
      throw UsageError(std::string("--model: ") + e.what());
    }
  }
  if (const ModelInfo* m = ukb::find_model(name)) return *m;
  std::vector<std::string> names;
  for (const auto& m : ukb::all_models()) names.push_back(m.name);
  std::string msg = "--model: unknown model '" + ukb::printable(name, 80) + "'";
  const std::string hint = ukb::closest_match(name, names);
  if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
  msg += "; `ukb models` lists the models, and a model file is a path (\"models/sleigh.hpp\")";
  throw UsageError(msg);
}

/// Applies "--param KEY=VALUE" overrides to the defaults.
std::vector<double> resolve_params(const ModelInfo& model, const std::vector<std::string>& kvs) {
  std::vector<double> values = model.defaults();
  std::vector<bool> seen(values.size(), false);
  std::vector<std::string> names;
  for (const auto& p : model.params) names.push_back(p.name);
  for (const std::string& kv : kvs) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos)
      throw UsageError("--param: '" + ukb::printable(kv, 80) + "' is not of the form KEY=VALUE");
    const std::string key = trim(kv.substr(0, eq));
    const int i = model.param_index(key);
    if (i < 0) {
      std::string msg = "--param: model '" + model.name + "' has no parameter '" + ukb::printable(key, 80) + "'";
      const std::string hint = ukb::closest_match(key, names);
      if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
      std::string all;
      for (const auto& nm : names) all += (all.empty() ? "" : ", ") + nm;
      throw UsageError(msg + "; its parameters are " + all);
    }
    if (seen[i]) throw UsageError("--param: parameter '" + ukb::printable(key, 80) + "' given twice");
    seen[i] = true;
    values[i] = parse_number(kv.substr(eq + 1), "--param " + key);
    const ukb::ParamInfo& p = model.params[static_cast<std::size_t>(i)];
    if (!p.admits(values[i]))
      throw UsageError("--param " + key + ": expected a value " + p.range() + " (" + p.description +
                       "), got " + trim(kv.substr(eq + 1)) + ukb::subnormal_note(values[i]));
  }
  return values;
}

/// NaN becomes JSON null (JSON has no NaN).
nlohmann::json to_json(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
  return a;
}

ukb::Backend check_backend(const std::string& name) {
  const auto backend = ukb::parse_backend(name);
  if (!backend)
    throw UsageError("--backend: unknown backend '" + ukb::printable(name, 80) + "' (expected reference, cpu or cuda)");
  if (*backend == ukb::Backend::cuda) {
    std::string why;
    if (ukb::cuda::device_count(&why) == 0)
      throw UsageError("--backend cuda: " + why + "; use --backend cpu or reference");
  }
  return *backend;
}

struct SystemArgs {
  std::string model;
  std::vector<std::string> params;
  std::string q, qd;
};

// An option's value that is another option ("--q --qd 0,1" gives --q the
// value "--qd"): refused with a message that names the option lacking its value.
const CLI::Validator not_an_option(
    [](std::string& v) {
      return v.rfind("--", 0) == 0 ? "expected a value, got the option '" + ukb::printable(v, 80) + "'"
                                   : std::string();
    },
    "", "not an option");

void add_system_options(CLI::App* cmd, SystemArgs& a) {
  cmd->add_option("--model", a.model, "model name (see `ukb models`) or model file (PATH or PATH:Name)")->required()->check(not_an_option);
  cmd->add_option("--param", a.params, "parameter override KEY=VALUE (repeatable)")
      ->allow_extra_args(false)
      ->check(not_an_option);
  cmd->add_option("--q", a.q, "generalized coordinates v1,v2,... (n numbers)")->required()->check(not_an_option);
  cmd->add_option("--qd", a.qd, "generalized velocities v1,v2,... (n numbers)")->required()->check(not_an_option);
}

// The optional hooks a model has (model.hpp): the key of `models --json`,
// what each enables, and whether the model has it.
struct Hook {
  const char* key;
  const char* enables;
  bool has;
};
std::vector<Hook> hooks_of(const ModelInfo& m) {
  return {{"residual", "residual: constraint-drift monitoring (res_pos_max, res_vel_max)", m.has_residual},
          {"constraint_rows", "row_kinds + constraint_rows: stabilisation (baumgarte, projection)", m.has_rows},
          {"potential", "potential: energy observables (energy_start, energy_end, energy_dissipated)",
           m.has_potential},
          {"initial_state", "initial_names + initial_state + natural_state: natural initial quantities",
           !m.initial_names.empty()},
          {"events", "event + on_event: events (stick-slip)", m.has_events},
          {"observables", "observable_names + observables: results columns of the model's own (final state)",
           !m.observable_names.empty()},
          {"rebind", "rebind: the cpu backend's SIMD packs (else lane by lane)", m.has_rebind},
          {"mass_diagonal", "mass_diagonal: the cpu and cuda backends factor M's diagonal alone (else all of M)",
           m.has_diagonal_mass},
          {"constraint_columns", "constraint_columns: the cpu and cuda backends skip the zeros of A's rows",
           m.has_constraint_columns}};
}

int cmd_models(bool as_json, const std::string& file, const std::string& backend) {
  std::vector<const ModelInfo*> list;
  if (file.empty()) {
    if (!backend.empty()) throw UsageError("--backend: only with --file (the built-in models have every backend)");
    for (const ModelInfo& m : ukb::all_models()) list.push_back(&m);
  } else {
    bool cuda = false;
    if (!backend.empty()) {
      const std::optional<ukb::Backend> b = ukb::parse_backend(backend);
      if (!b) throw UsageError("--backend: unknown backend '" + ukb::printable(backend, 80) +
                               "' (expected reference, cpu or cuda)");
      cuda = *b == ukb::Backend::cuda;
    }
    try {
      const auto [path, choice] = ukb::split_model_spec(file);
      if (choice.empty()) {
        list = ukb::open_model_file(path, {.cuda = cuda, .progress = true}).models;
      } else {
        list.push_back(&ukb::load_model_file(file, {.cuda = cuda, .progress = true}));
      }
    } catch (const ukb::ModelFileError& e) {
      throw UsageError(std::string("--file: ") + e.what());
    }
  }
  ukb::run::StdoutWriter w;
  std::ostream& out = w.stream();
  if (as_json) {
    nlohmann::json all = nlohmann::json::array();
    for (const ModelInfo* mp : list) {
      const ModelInfo& m = *mp;
      nlohmann::json params = nlohmann::json::array();
      for (const auto& p : m.params)
        params.push_back({{"name", p.name}, {"default", p.default_value}, {"description", p.description},
                          {"range", p.range()}});
      nlohmann::json initial = nlohmann::json::array();
      for (const auto& q : m.initial) {
        nlohmann::json e = {{"name", q.name}, {"default", q.default_value}, {"description", q.description}};
        if (!q.choices.empty()) e["choices"] = q.choices;
        initial.push_back(e);
      }
      nlohmann::json hooks = nlohmann::json::object();
      for (const Hook& h : hooks_of(m)) hooks[h.key] = h.has;
      all.push_back({{"name", m.name}, {"summary", m.summary}, {"n", m.n}, {"m", m.m},
                     {"coords", m.coords}, {"params", params}, {"initial", initial},
                     {"observables", m.observable_names}, {"hooks", hooks}});
    }
    out << all.dump(2) << "\n";
    w.finish();
    return 0;
  }
  for (const ModelInfo* mp : list) {
    const ModelInfo& m = *mp;
    out << m.name << "  (n = " << m.n << " coordinates, m = " << m.m
              << " constraint rows)\n  " << m.summary << "\n  q = (";
    for (std::size_t i = 0; i < m.coords.size(); ++i) out << (i ? ", " : "") << m.coords[i];
    out << ")\n  parameters:\n";
    for (const auto& p : m.params) {
      std::ostringstream def;
      def << p.default_value;
      out << "    " << p.name << std::string(6 - std::min<std::size_t>(5, p.name.size()), ' ')
                << "= " << def.str() << std::string(8 - std::min<std::size_t>(7, def.str().size()), ' ')
                << p.description << (file.empty() ? "" : "  [" + p.range() + "]") << "\n";
    }
    if (!m.initial.empty()) {
      out << "  initial quantities ([initial] of a config):";
      for (const auto& q : m.initial) {
        out << "\n    " << q.name;
        if (!q.description.empty()) out << ": " << q.description;
      }
      out << "\n";
    }
    if (!m.observable_names.empty()) {
      out << "  observables (results columns):";
      for (const std::string& o : m.observable_names) out << " " << o;
      out << "\n";
    }
    if (!file.empty()) {
      out << "  optional hooks:\n";
      for (const Hook& h : hooks_of(m)) out << "    [" << (h.has ? 'x' : ' ') << "] " << h.enables << "\n";
    }
    out << "\n";
  }
  w.finish();
  return 0;
}

int cmd_accel(const SystemArgs& a, double t, const std::string& backend, double rank_rtol) {
  // The backend first: a model file's cuda plugin takes half a minute to
  // compile, not to be spent where there is no device.
  const ukb::Backend be = check_backend(backend);
  const ModelInfo& model = lookup_model(a.model, be == ukb::Backend::cuda);
  const std::vector<double> params = resolve_params(model, a.params);
  const std::vector<double> q = parse_vector(a.q, model.n, "--q", model);
  const std::vector<double> qd = parse_vector(a.qd, model.n, "--qd", model);
  if (!std::isfinite(t)) throw UsageError("--t: expected a finite number");
  if (!(rank_rtol >= 0 && rank_rtol < 1))
    throw UsageError("--rank-rtol: expected a number in [0, 1), got " + ukb::run::g17(rank_rtol));
  // As `ukb run` (driver.cpp): the cpu and cuda backends factor the
  // diagonal that mass_diagonal gives, the reference all of `mass`.
  if (model.mass_diagonal_mismatch) {
    const std::string why = model.mass_diagonal_mismatch(params, q.data(), t);
    if (!why.empty())
      throw UsageError("--model: model '" + model.name + "': mass and mass_diagonal disagree at --q: " + why);
  }
  if (model.constraint_columns_mismatch) {
    const std::string why = model.constraint_columns_mismatch(params, q.data(), qd.data(), t);
    if (!why.empty())
      throw UsageError("--model: model '" + model.name +
                       "': constraints and constraint_columns disagree at --q, --qd: " + why);
  }

  const ukb::Evaluation r = model.evaluate(be, params, q.data(), qd.data(), t, rank_rtol);
  nlohmann::ordered_json out;
  out["qdd"] = to_json(r.qdd);
  out["Qc_ideal"] = to_json(r.Qc_ideal);
  out["Qc_nonideal"] = to_json(r.Qc_nonideal);
  out["lambda"] = to_json(r.lambda);
  out["rank"] = r.rank;
  out["status"] = std::string(ukb::to_string(r.status));
  out["constraint_residual"] =
      std::isfinite(r.constraint_residual) ? nlohmann::json(r.constraint_residual) : nlohmann::json(nullptr);
  ukb::run::StdoutWriter w;
  w.stream() << out.dump() << "\n";
  w.finish();
  return r.status == ukb::Status::ok ? 0 : 1;
}

int cmd_trajectory(const SystemArgs& a, double t0, double dt, long steps, long every,
                   const std::string& out_path) {
  const ModelInfo& model = lookup_model(a.model);
  const std::vector<double> params = resolve_params(model, a.params);
  const std::vector<double> q = parse_vector(a.q, model.n, "--q", model);
  const std::vector<double> qd = parse_vector(a.qd, model.n, "--qd", model);
  if (!std::isfinite(t0)) throw UsageError("--t0: expected a finite number");
  if (!(dt > 0) || !std::isfinite(dt)) throw UsageError("--dt: expected a finite number > 0");
  constexpr long max_steps = 1000000000;  // 1e9 reference steps would take days
  if (steps < 1 || steps > max_steps)
    throw UsageError("--steps: expected an integer in [1, 1e9], got " + std::to_string(steps));
  if (every < 1) throw UsageError("--every: expected an integer >= 1");
  if (!std::isfinite(t0 + static_cast<double>(steps) * dt))
    throw UsageError("--dt: the run would end beyond the largest number (--t0 + --steps x --dt = " +
                     ukb::run::g17(t0 + static_cast<double>(steps) * dt) + "); expected a smaller dt or fewer steps");
  if (!ukb::policy::step_advances_time(t0, t0 + static_cast<double>(steps) * dt, dt))
    throw UsageError("--dt: the time step " + ukb::run::g17(dt) + " is too small to advance the time from --t0 " + ukb::run::g17(t0) +
                     " over " + std::to_string(steps) + " steps; expected a larger dt or a smaller time");

  // A file is written under a unique temporary name and renamed when
  // complete (removed on any failure); every write is checked.
  std::unique_ptr<ukb::run::AtomicFile> file;
  if (!out_path.empty()) {
    try {
      file = std::make_unique<ukb::run::AtomicFile>(out_path, "--out");
    } catch (const ukb::run::ConfigError& e) {
      throw UsageError(e.what());
    }
  }
  std::unique_ptr<ukb::run::StdoutWriter> standard;
  if (!file) standard = std::make_unique<ukb::run::StdoutWriter>();
  std::ostream& os = file ? file->stream() : standard->stream();
  os.precision(17);
  os << "t";
  for (const auto& c : model.coords) os << "," << c;
  for (const auto& c : model.coords) os << "," << c << "_dot";
  os << "\n";
  // One system on the reference backend, in calls of `every` steps: a row
  // at t0 and after every call.
  const std::unique_ptr<ukb::Ensemble> e = model.ensemble(1, ukb::Backend::reference);
  e->set(0, params, q.data(), qd.data(), t0);
  auto write = [&] {
    os << e->real(ukb::Field::t)[0];
    for (int j = 0; j < model.n; ++j) os << "," << e->real(ukb::Field::q)[j];
    for (int j = 0; j < model.n; ++j) os << "," << e->real(ukb::Field::qd)[j];
    os << "\n";
  };
  write();
  const ukb::RunOptions run{.dt = dt, .max_steps = steps, .events = false, .monitor = false};
  ukb::Status st = ukb::Status::ok;
  for (long k = 0; k < steps && st == ukb::Status::ok;) {
    const long before = e->i64(ukb::Field::steps)[0];
    e->integrate(run, std::min(every, steps - k), {.threads = 1});
    k = e->i64(ukb::Field::steps)[0];
    st = static_cast<ukb::Status>(e->i32(ukb::Field::status)[0]);
    if (k == before) break;  // the step no longer advances the time
    if (st == ukb::Status::ok) write();
    if (!os) break;  // a failed write: reported below
  }
  if (file) {
    file->close();
    file->publish();
  } else {
    standard->finish();
  }
  if (st != ukb::Status::ok) {
    std::cerr << "ukb trajectory: integration stopped at t = " << e->real(ukb::Field::t)[0] << " with status "
              << ukb::to_string(st) << "\n";
    return 1;
  }
  return 0;
}

struct RunArgs {
  std::string config, backend, out, resume, threads, crosscheck, crosscheck_samples;
  bool out_given = false;
  bool quiet = false;
};

// Set by SIGINT / SIGTERM during `ukb run`: the run finishes its chunk,
// writes a checkpoint and stops. The first signal restores the default
// action of both, so a second one (of either kind) ends the process at once
// (the last checkpoint stays). A lock-free atomic: the handler may run on
// any thread, an OpenMP worker included.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
// False while the config is read and its model compiled: a stop signal then
// ends the run before any work (nothing to checkpoint).
std::atomic<bool> g_run_started{false};
static_assert(std::atomic<bool>::is_always_lock_free);

// The ranks of an MPI job, or null; only rank 0 speaks for the job (the
// others print errors of their own only, and the signal's note never).
ukb::run::Cluster* g_cluster = nullptr;
bool g_silent_rank = false;

extern "C" void on_stop_signal(int sig) {
  g_stop_signal.store(sig);
  // Say what the signal does (write(2) is async-signal-safe).
  static const char msg[] =
      "\nukb run: stopping: finishing the current chunk, then writing a checkpoint (during the last "
      "chunk or the outputs the run completes instead; a second signal ends the process at once, the "
      "last checkpoint stays)\n";
  static const char early[] =
      "\nukb run: stopping: the run has not started (its config is read, its model file compiled); it "
      "ends before any work, writing nothing (a compile under way still finishes into the cache)\n";
  const int saved = errno;
  if (!g_silent_rank) {
    if (g_run_started.load())
      (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    else
      (void)!::write(STDERR_FILENO, early, sizeof early - 1);
  }
  errno = saved;
  // async-signal-safe. SIGXCPU stays caught: the kernel repeats it every
  // second past the soft CPU limit, until the hard one's SIGKILL.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGHUP, SIG_DFL);
}

// The signals that stop a run with a checkpoint: SIGINT (Ctrl-C), SIGTERM
// (kill, schedulers), SIGHUP (the terminal or ssh session closed), SIGXCPU
// (a CPU-time limit, as batch systems set one before their SIGKILL).
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGXCPU};

const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGXCPU: return "SIGXCPU";
    default: return "SIGTERM";
  }
}

// A signal ignored on entry (e.g. SIGINT of a background job started by a
// non-interactive shell, SIGHUP under nohup) stays ignored, as the shell meant.
void catch_stop_signals() {
  for (int sig : kStopSignals) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}

// --threads as a number; -1 where not given.
int threads_arg(const RunArgs& a) {
  if (a.threads.empty()) return -1;
  int n = -1;
  const char* end = a.threads.data() + a.threads.size();
  const auto [ptr, ec] = std::from_chars(a.threads.data(), end, n);
  if (ec != std::errc() || ptr != end || n < 0 || n > 4096)
    throw UsageError("--threads: expected an integer in [0, 4096] (0: all cores), got '" +
                     ukb::printable(a.threads, 80) + "'");
  return n;
}

// The run's config (the file, or the checkpoint's with --resume) with the
// command line's --threads and --backend; nullopt where a stop signal came
// while it was read or its model compiled (a compiler it killed is no error
// of the model). In an MPI job every rank reads the config, rank 0 first:
// a model file is compiled once, into the cache the others then find it in
// (a cache on a shared file system; else once per node). An error any rank
// has is said once, by rank 0, and ends every rank with exit code 2.
std::optional<ukb::run::Config> run_config(const RunArgs& a, int threads) {
  ukb::run::Config c;
  std::string load_error;
  auto load = [&] {
    try {
      c = a.config.empty() ? ukb::run::resume_config(a.resume) : ukb::run::load_config(a.config);
    } catch (const ukb::run::ConfigError& e) {
      load_error = e.what();
    }
  };
  if (!g_silent_rank) load();
  if (!g_cluster && g_stop_signal.load() != 0) return std::nullopt;
  if (g_cluster) {
    const std::string first = g_cluster->agree(load_error, false);  // rank 0's
    if (!first.empty()) throw UsageError(first);
    if (g_silent_rank) load();
    load_error = g_cluster->agree(load_error, false);  // the others'
  }
  if (!load_error.empty()) throw UsageError(load_error);
  if (threads >= 0) c.threads = threads;
  if (!a.backend.empty()) {
    const std::optional<ukb::Backend> b = ukb::parse_backend(a.backend);
    if (!b) throw UsageError("--backend: unknown backend '" + a.backend + "' (expected reference, cpu or cuda)");
    c.backend = *b;
  }
  return c;
}

// A run of very many steps says so before it starts (the progress line
// shows the rate on a terminal; SIGINT checkpoints it). Adaptive steps: at
// least the span over dt_max. So does a trajectories.csv of gigabytes: its
// rows (a row every record_every steps, or every record_dt) of about 24
// bytes a column.
void warn_of_size(const ukb::run::Config& c) {
  const bool adaptive = c.run.method == ukb::Method::dopri5;
  const double span = std::isfinite(c.run.t_end) ? c.run.t_end - c.t0 : HUGE_VAL;
  const double per_sample = std::min(static_cast<double>(c.run.max_steps),
                                     std::ceil(span / (adaptive ? c.run.dt_max : c.run.dt)));
  if (std::isfinite(per_sample)) {
    const double total = per_sample * static_cast<double>(c.samples);
    if (total > 1e11)
      std::cerr << "ukb run: " << (adaptive ? "at least " : "up to ") << ukb::run::g17(per_sample)
                << " steps per sample, " << ukb::run::g17(total)
                << " system-steps in all: days to years at the 1e6-1e8 system-steps/s of one machine; "
                   "SIGINT, SIGTERM, SIGHUP or SIGXCPU stops it with a checkpoint (ukb run --resume continues)\n";
  }
  if (!c.record.empty()) {
    const double rows = 2 + (c.record_dt > 0 ? std::floor(span / c.record_dt)
                                             : std::isfinite(per_sample) ? std::floor(per_sample / double(c.record_every))
                                                                         : 0.0);
    const double cols = 4.0 + 2 * c.model->n + static_cast<double>(c.model->initial.size());
    const double bytes = rows * cols * 24 * static_cast<double>(c.record.size());
    if (bytes > 1e9 && std::isfinite(bytes)) {
      char text[160];
      std::snprintf(text, sizeof text, "%.1f GB (%.0f rows for each of %zu recorded samples)", bytes / 1e9, rows,
                    c.record.size());
      std::cerr << "ukb run: trajectories.csv will take " << (adaptive && c.record_dt <= 0 ? "at least " : "about ")
                << text << "; a larger output.record_every or record_dt writes less\n";
    }
  }
}

// --crosscheck BACKEND, --crosscheck-samples K, and
// UKB_CROSSCHECK_PERTURB=SAMPLE (docs/crosscheck.md): an error of 1e-6
// planted in that sample's final positions on the other backend, to see a
// CI step fail as it should.
struct CrosscheckArgs {
  std::optional<ukb::Backend> backend;
  long samples = 256;
  std::function<void(ukb::run::Results&)> tamper;
};

CrosscheckArgs crosscheck_args(const RunArgs& a) {
  CrosscheckArgs x;
  if (!a.crosscheck.empty()) {
    x.backend = ukb::parse_backend(a.crosscheck);
    if (!x.backend)
      throw UsageError("--crosscheck: unknown backend '" + ukb::printable(a.crosscheck, 80) +
                       "' (expected reference, cpu or cuda)");
  }
  if (!a.crosscheck_samples.empty()) {
    if (!x.backend) throw UsageError("--crosscheck-samples: applies to --crosscheck BACKEND only");
    const char* end = a.crosscheck_samples.data() + a.crosscheck_samples.size();
    const auto [ptr, ec] = std::from_chars(a.crosscheck_samples.data(), end, x.samples);
    if (ec != std::errc() || ptr != end || x.samples < 1 || x.samples > 1000000)
      throw UsageError("--crosscheck-samples: expected an integer in [1, 1000000], got '" +
                       ukb::printable(a.crosscheck_samples, 80) + "'");
  }
  if (const char* p = std::getenv("UKB_CROSSCHECK_PERTURB"); p && x.backend) {
    long victim = -1;
    const char* end = p + std::strlen(p);
    const auto [ptr, ec] = std::from_chars(p, end, victim);
    if (ec != std::errc() || ptr != end || victim < 0)
      throw UsageError("UKB_CROSSCHECK_PERTURB: expected a sample index >= 0, got '" + ukb::printable(p, 80) + "'");
    x.tamper = [victim](ukb::run::Results& r) {
      for (std::size_t row = 0; row < r.rows(); ++row) {
        if (static_cast<long>(r.values[0][row]) != victim) continue;
        for (std::size_t k = 0; k < r.names.size(); ++k)
          if (r.names[k].rfind("q_", 0) == 0) r.values[k][row] += 1e-6 * (1 + std::abs(r.values[k][row]));
      }
    };
  }
  return x;
}

// The report of a complete run: the statuses, medians, residuals and files
// on stdout, warnings and the cross-check's verdict on stderr. Its exit
// code: 5 where the cross-check failed, 1 where a sample failed, else 0.
int report_run(const ukb::run::Config& c, const ukb::run::Outcome& o) {
  long failed = 0;
  ukb::run::StdoutWriter w;
  std::ostream& out = w.stream();
  out << "ukb run: " << o.samples << " samples of " << c.model->name << " in "
            << o.wall_s << " s:";
  for (const auto& [name, count] : o.status_counts) {
    out << ' ' << count << ' ' << name << ';';
    if (name.rfind("failed", 0) == 0) failed += count;
  }
  out << '\n';
  out.precision(9);
  // A long chain has hundreds of natural quantities: the first few here,
  // every one in summary.json.
  constexpr std::size_t shown = 12;
  for (std::size_t k = 0; k < o.medians.size() && k < shown; ++k) {
    out << "  median " << o.medians[k].first << " = " << o.medians[k].second;
    // Its interval (summary.json's quantile_intervals p50), where it has a side.
    if (k < o.median_intervals.size() && !(std::isnan(o.median_intervals[k][0]) && std::isnan(o.median_intervals[k][1]))) {
      auto side = [&](double x) -> std::ostream& { return std::isnan(x) ? out << "none" : out << x; };
      out << "  (" << 100 * c.confidence << " % interval ";
      side(o.median_intervals[k][0]) << " to ";
      side(o.median_intervals[k][1]) << ")";
    }
    out << '\n';
  }
  if (o.medians.size() > shown)
    out << "  (" << o.medians.size() - shown << " more medians in summary.json)\n";
  for (const std::string& line : o.sensitivity) out << line << '\n';
  if (!o.stop_report.empty()) out << o.stop_report << '\n';
  if (!std::isnan(o.res_pos_max) || !std::isnan(o.res_vel_max))
    out << "  largest constraint residuals: position " << o.res_pos_max << ", velocity " << o.res_vel_max
        << " (res_pos_max, res_vel_max)\n";
  out << "  results in " << ukb::printable(o.out_dir) << "/ (" << (c.write_csv ? "results.csv, " : "")
            << (c.write_npy ? "results.npy, " : "") << "summary.json, run.json"
            << (c.record.empty() ? "" : ", trajectories.csv") << (o.crosschecked ? ", crosscheck.json" : "") << ")\n";
  if (!c.write_csv && !c.formats_given)
    out << "  (no results.csv by default above " << ukb::run::csv_default_samples
        << " samples; output.formats = [\"csv\", \"npy\"] writes it)\n";
  try {
    w.finish();
  } catch (const ukb::run::WriteError& e) {  // what failed is this report, not the run
    throw ukb::run::WriteError(std::string(e.what()) + "; the run is complete, its outputs are in " +
                               ukb::printable(o.out_dir));
  }
  for (const std::string& warning : ukb::run::warnings(o)) std::cerr << "ukb run: warning: " << warning << '\n';
  if (o.crosschecked) {
    std::cerr << "ukb run: " << o.crosscheck_verdict << '\n';
    if (!o.crosscheck_pass) {
      std::cerr << "  details in " << ukb::printable(o.out_dir) << "/crosscheck.json; exit code 5\n";
      return 5;
    }
  }
  return failed > 0 ? 1 : 0;
}


int cmd_run(const RunArgs& a) {
  catch_stop_signals();  // first: a signal during start-up also leads to a checkpoint
  if (a.config.empty() && a.resume.empty())
    throw UsageError("run: expected a config file (ukb run CONFIG) or --resume DIR");
  auto same_dir = [](const std::string& x, const std::string& y) {
    std::error_code e1, e2;
    return std::filesystem::weakly_canonical(x, e1) == std::filesystem::weakly_canonical(y, e2) && !e1 && !e2;
  };
  if (a.out_given && a.out.empty()) throw UsageError("--out: expected a directory name, got an empty string");
  const int threads = threads_arg(a);
  if (!a.resume.empty() && !a.out.empty() && !same_dir(a.out, a.resume))
    throw UsageError("--out: a resumed run writes into its own directory '" + a.resume +
                     "'; expected no --out (or the same directory)");
  const std::optional<ukb::run::Config> loaded = run_config(a, threads);
  if (!loaded) {  // a stop signal before the run started
    std::cerr << "ukb run: interrupted by " << stop_signal_name(g_stop_signal.load())
              << " before the run started; nothing was written\n";
    return 128 + g_stop_signal.load();
  }
  const ukb::run::Config& c = *loaded;
  warn_of_size(c);
  if (!c.sensitivity.empty() && !a.quiet) {  // the cost of the indices, before the run
    const long d = c.random_inputs();
    std::cerr << "ukb run: [sensitivity] over " << d << " random inputs: " << c.samples / (d + 2)
              << " base points x (d + 2) = " << c.samples << " samples\n";
  }
  const CrosscheckArgs cross = crosscheck_args(a);
  ukb::run::Outcome o;
  g_run_started.store(true);
  try {
    o = ukb::run::execute(c, {.out_dir = a.resume.empty() ? a.out : a.resume,
                              .progress = !a.quiet && !g_silent_rank && isatty(STDERR_FILENO),
                              .resume = !a.resume.empty(),
                              .stop = &g_stop_signal,
                              .after_chunk = {},
                              .crosscheck = cross.backend,
                              .crosscheck_samples = cross.samples,
                              .crosscheck_tamper = cross.tamper,
                              .cluster = g_cluster});
  } catch (const ukb::run::ConfigError& e) {
    throw UsageError(e.what());
  } catch (const ukb::BackendUnavailable& e) {
    throw UsageError(std::string("backend ") + std::string(ukb::to_string(c.backend)) + ": " + e.what());
  }
  if (o.interrupted) {
    // In an MPI job a stop on any rank stops every rank (SIGTERM where none came here).
    const int sig = g_stop_signal.load() != 0 ? g_stop_signal.load() : SIGTERM;
    if (!g_silent_rank)
      std::cerr << "ukb run: interrupted by " << stop_signal_name(sig) << " after " << o.done
                << " of " << o.samples << " samples; checkpoint written to " << ukb::printable(o.checkpoint)
                << "\n  continue with: ukb run --resume " << ukb::printable(o.out_dir) << "\n";
    return 128 + sig;
  }
  if (g_silent_rank) return 0;  // rank 0 reports the job
  return report_run(c, o);
}

// "; option '--stpes' is unknown (did you mean '--steps'?)" for the first
// option of argv that the subcommand (argv[1]) does not know and that is
// close to one it does.
std::string unknown_option_hint(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> known;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (argc > 1 && sub->get_name() == argv[1])
      for (const CLI::Option* opt : sub->get_options())
        for (const std::string& n : opt->get_lnames()) known.push_back("--" + n);
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word.rfind("--", 0) != 0) continue;
    word = word.substr(0, word.find('='));
    if (std::find(known.begin(), known.end(), word) != known.end()) continue;
    const std::string near = ukb::closest_match(word, known);
    if (!near.empty()) return "; option '" + ukb::printable(word, 80) + "' is unknown (did you mean '" + near + "'?)";
  }
  return "";
}

// `--help` or `--version`: printed through a checked writer, so that a
// full or closed standard output exits 4 as every subcommand's output does.
int help_or_version(const CLI::App& app, const CLI::Error& e) {
  try {
    ukb::run::StdoutWriter w;
    const int rc = app.exit(e, w.stream(), std::cerr);
    w.finish();
    return rc;
  } catch (const ukb::run::WriteError& we) {
    std::cerr << "ukb: " << ukb::printable(we.what()) << "\n";
    return 4;
  }
}

}  // namespace

// The whole CLI; src/cli/entry.cpp's main calls it, and so does fuzz/fuzz_accel.cpp.
int ukb_cli_main(int argc, char** argv, ukb::run::Cluster* cluster) {
  g_cluster = cluster;
  g_silent_rank = cluster && cluster->rank() != 0;
  // "ukb: ", or in an MPI job "ukb (rank k of P): " for the other ranks.
  auto who = [&] {
    return g_silent_rank ? "ukb (rank " + std::to_string(cluster->rank()) + " of " + std::to_string(cluster->size()) + "): "
                         : std::string("ukb: ");
  };
  // Every message is printed through this: names from the command line or
  // a file cannot drive the terminal (escaped), and stay readable. One over
  // 4 KiB (long paths echoed several times) keeps its beginning, which says
  // what failed, and its end, which says the cause and what to do.
  auto printable = [](const std::string& m) {
    constexpr std::size_t half = 2048;
    if (m.size() <= 2 * half) return ukb::printable(m, 0, /*keep_newlines=*/true);
    auto continuation = [&](std::size_t i) { return (static_cast<unsigned char>(m[i]) & 0xC0) == 0x80; };
    std::size_t head = half, tail = m.size() - half;  // not within a UTF-8 character
    while (head > 0 && continuation(head)) --head;
    while (tail < m.size() && continuation(tail)) ++tail;
    const std::string_view v(m);
    return ukb::printable(v.substr(0, head), 0, true) + " [... " + std::to_string(tail - head) +
           " bytes left out ...] " + ukb::printable(v.substr(tail), 0, true);
  };
  CLI::App app{"ukb: batched Udwadia-Kalaba solver for constrained systems with non-ideal "
               "constraints"};
  app.set_version_flag("--version", std::string("ukb ") + ukb::version);
  app.require_subcommand(1);

  bool models_json = false;
  std::string models_file, models_backend;
  CLI::App* models = app.add_subcommand("models", "list the built-in models, their coordinates "
                                                  "and parameters with defaults");
  models->add_flag("--json", models_json, "print JSON instead of text");
  models->add_option("--file", models_file,
                     "describe the models of a model file (PATH or PATH:Name; compiled on first use), with "
                     "the optional hooks each has")
      ->check(not_an_option);
  models->add_option("--backend", models_backend,
                     "with --file: cuda compiles the file's cuda backend too (nvcc)")
      ->check(not_an_option);

  SystemArgs accel_args;
  double accel_t = 0, rank_rtol = ukb::policy::default_rank_rtol<double>();
  std::string backend = "reference";
  CLI::App* accel = app.add_subcommand(
      "accel", "evaluate one system and print q'', Qc_ideal, Qc_nonideal, lambda, rank and "
               "status as one JSON object");
  add_system_options(accel, accel_args);
  accel->add_option("--t", accel_t, "time (default 0)");
  accel->add_option("--backend", backend, "reference (default), cpu, or cuda (needs a GPU)");
  accel->add_option("--rank-rtol", rank_rtol,
                    "relative rank tolerance of the pseudo-inverse (default 1e-10)");

  SystemArgs traj_args;
  double t0 = 0, dt = 0;
  long steps = 0, every = 1;
  std::string out_path;
  CLI::App* traj = app.add_subcommand(
      "trajectory", "integrate one system with RK4 on the reference backend and print CSV");
  add_system_options(traj, traj_args);
  traj->add_option("--t0", t0, "initial time (default 0)");
  traj->add_option("--dt", dt, "time step (> 0)")->required();
  traj->add_option("--steps", steps, "number of RK4 steps (>= 1)")->required();
  traj->add_option("--every", every, "write every J-th step (default 1)");
  traj->add_option("--out", out_path, "write the CSV to this file instead of stdout");

  RunArgs run_args;
  CLI::App* run = app.add_subcommand(
      "run", "run a Monte Carlo ensemble described by a TOML config (see docs/config.md) "
             "and write results.csv, results.npy, summary.json, trajectories.csv, run.json");
  run->add_option("config", run_args.config, "the config file (TOML); optional with --resume");
  run->add_option("--resume", run_args.resume,
                  "continue the interrupted run whose checkpoint is in this directory (results "
                  "identical to an uninterrupted run)");
  run->add_option("--backend", run_args.backend, "reference, cpu or cuda (default: the config's, else cpu)");
  run->add_option("--out", run_args.out, "output directory (default: output.dir of the config, else ukb-run)");
  run->add_option("--threads", run_args.threads, "CPU threads (0: all cores; default: the config's)");
  run->add_flag("--quiet", run_args.quiet, "no progress line on stderr");
  run->add_option("--crosscheck", run_args.crosscheck,
                  "integrate some samples again on this backend (reference, cpu or cuda) and compare; "
                  "exit code 5 where they differ beyond the tolerances (crosscheck.json)");
  run->add_option("--crosscheck-samples", run_args.crosscheck_samples,
                  "how many samples the cross-check integrates again (default 256)");

  try {
    // A first word that is not an option must name a subcommand.
    if (argc > 1 && argv[1][0] != '-') {
      const std::vector<std::string> subs = {"models", "accel", "trajectory", "run"};
      const std::string word = argv[1];
      if (std::find(subs.begin(), subs.end(), word) == subs.end()) {
        std::string msg = "unknown subcommand '" + ukb::printable(word, 80) + "'";
        const std::string hint = ukb::closest_match(word, subs);
        if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
        throw UsageError(msg + "; expected one of models, accel, trajectory, run");
      }
    }
    app.parse(argc, argv);
    if (models->parsed()) return cmd_models(models_json, models_file, models_backend);
    if (accel->parsed()) return cmd_accel(accel_args, accel_t, backend, rank_rtol);
    if (traj->parsed()) {
      if (traj->count("--out") > 0 && out_path.empty())
        throw UsageError("--out: expected a file name, got an empty string");
      return cmd_trajectory(traj_args, t0, dt, steps, every, out_path);
    }
    if (run->parsed()) {
      run_args.out_given = run->count("--out") > 0;
      return cmd_run(run_args);
    }
  } catch (const CLI::CallForHelp& e) {
    return help_or_version(app, e);
  } catch (const CLI::CallForAllHelp& e) {
    return help_or_version(app, e);
  } catch (const CLI::CallForVersion& e) {
    return help_or_version(app, e);
  } catch (const CLI::ParseError& e) {
    if (g_silent_rank) return 2;
    const std::string hint = unknown_option_hint(app, argc, argv);
    std::cerr << "ukb: " << printable(e.what()) << printable(hint)
              << "\n(run `ukb --help` or `ukb SUBCOMMAND --help`)\n";
    return 2;
  } catch (const UsageError& e) {
    // Bad input every rank has (agreed on) is said once; an error of one
    // rank in the middle of a run, by that rank.
    if (!g_silent_rank || g_cluster->engaged()) std::cerr << who() << printable(e.what()) << "\n";
    return 2;
  } catch (const ukb::run::ConfigError& e) {  // from a path that did not wrap it
    if (!g_silent_rank || g_cluster->engaged()) std::cerr << who() << printable(e.what()) << "\n";
    return 2;
  } catch (const ukb::ModelError& e) {  // a model's own code threw: the model file's error
    if (!g_silent_rank || g_cluster->engaged()) std::cerr << who() << printable(e.what()) << "\n";
    return 2;
  } catch (const ukb::run::WriteError& e) {
    std::cerr << who() << printable(e.what()) << "\n";
    return 4;
  } catch (const std::bad_alloc&) {
    std::cerr << who() << "out of memory\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << who() << "internal error: " << printable(e.what()) << "\n";
    return 3;
  }
  return 2;
}
