// `ukb run`: plans the run (output directory, memory, every sample's inputs
// drawn once and its initial state checked), integrates the ensemble chunk
// by chunk on a resident ensemble, checkpoints, and writes the outputs (each
// file under a temporary name renamed when complete). The pieces: table.hpp
// (the results table), output.hpp (files), stats.hpp (summary.json),
// trajectories.hpp (recorded samples), checkpoint.hpp.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <new>
#include <optional>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "checkpoint.hpp"
#include "cluster.hpp"
#include "output.hpp"
#include "stats.hpp"
#include "table.hpp"
#include "threads.hpp"
#include "trajectories.hpp"
#include "ukb/crosscheck.hpp"
#include "ukb/cuda.hpp"
#include "ukb/model_file.hpp"
#include "ukb/run.hpp"

namespace ukb::run {

std::string status_name(Status s) { return s == Status::ok ? "finished" : std::string(to_string(s)); }

namespace {

using Clock = std::chrono::steady_clock;

// A checkpoint written by another ukb version is refused.
void check_version(const fs::path& file, const CheckpointHeader& h) {
  if (h.version != ukb::version)
    throw ConfigError(file.string() + ": written by ukb " + h.version + ", this is ukb " + ukb::version +
                      "; resume it with ukb " + h.version + " or start the run again");
}

// The progress line (on a terminal only).
class Progress {
 public:
  // done0 samples and steps0 system-steps were done before (a resumed run):
  // rates and the time left count this process's work only.
  Progress(bool on, long total, long done0 = 0, double steps0 = 0)
      : on_(on), total_(total), done0_(done0), steps0_(steps0), start_(Clock::now()), last_(start_) {}
  void update(long done, double system_steps, bool final = false) {
    if (!on_) return;
    const auto now = Clock::now();
    if (!final && now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    const double el = std::chrono::duration<double>(now - start_).count();
    const double f = static_cast<double>(done) / static_cast<double>(total_);
    const double here = static_cast<double>(done - done0_) / static_cast<double>(total_ - done0_);
    system_steps -= steps0_;
    char eta[32] = "--";
    if (here > 0 && !final) std::snprintf(eta, sizeof eta, "%.0f s", el * (1 - here) / here);
    if (final) std::snprintf(eta, sizeof eta, "done in %.1f s", el);
    std::fprintf(stderr, "\r  %5.1f %%  %ld / %ld samples  %.3g system-steps/s  %s %s   ", 100 * f, done,
                 total_, el > 0 ? system_steps / el : 0.0, final ? "" : "left", eta);
    if (final) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  bool on_;
  long total_, done0_;
  double steps0_;
  Clock::time_point start_, last_;
};

// The state and parameters of sample i from its inputs (canonical order).
// With `check`, throws ConfigError where the inputs or the initial state are
// not admitted; without, the state alone, of inputs that draw_all has
// checked (the same state: the checks change nothing).
void initial_state(const Config& c, long i, const std::vector<double>& in, double* params, double* q,
                   double* qd, bool check = true) {
  const ModelInfo& M = *c.model;
  const std::size_t np = M.params.size();
  // A draw that overflows (a lognormal of mean_log 800) is refused as the
  // config's error, before any work.
  for (std::size_t k = 0; check && k < in.size(); ++k)
    if (!std::isfinite(in[k])) {
      throw ConfigError(c.path + ": key '" + c.input_key(k) + "': sample " + std::to_string(i) + " drew " + g17(in[k]) +
                        "; expected finite values: narrow its distribution");
    }
  // A draw outside what the parameter or quantity admits (a lognormal that
  // underflows to 0 or to a subnormal for a mass): refused the same way.
  for (std::size_t k = 0; check && k < in.size(); ++k) {
    const ParamInfo* p = k < np ? &M.params[k] : !c.raw_initial && k - np < M.initial.size() ? &M.initial[k - np] : nullptr;
    if (p && !p->admits(in[k]))
      throw ConfigError(c.path + ": key '" + c.input_key(k) + "': sample " + std::to_string(i) + " drew " + g17(in[k]) +
                        ", not admitted (" + p->name + " must be " + p->range() + ")" + subnormal_note(in[k]) +
                        "; narrow its distribution");
  }
  std::copy(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(np), params);
  const std::span<const double> pv(params, np);
  const double* ic = in.data() + np;
  auto describe = [&] {
    std::string s;
    for (std::size_t k = 0; k < c.initial.size(); ++k)
      s += (k ? ", " : "") + c.initial[k].name + " = " + g17(ic[k]);
    return s;
  };
  if (!c.raw_initial) {
    if (!M.initial_state(pv, ic, q, qd))
      throw ConfigError(c.path + ": [initial]: sample " + std::to_string(i) + ": no state of '" + M.name +
                        "' satisfies the constraints for " + describe() +
                        " (what each quantity means and admits: ukb models)");
  } else {
    std::copy(ic, ic + M.n, q);
    std::copy(ic + M.n, ic + 2 * M.n, qd);
    double pos = 0, vel = 0;
    if (check) M.residual(pv, q, qd, c.t0, pos, vel);
    if (check && M.has_residual && !(pos <= c.initial_tol && vel <= c.initial_tol))
      throw ConfigError(c.path + ": [initial]: sample " + std::to_string(i) +
                        ": the raw initial state violates the constraints of '" + M.name +
                        "': position residual " + g17(pos) + ", velocity residual " + g17(vel) +
                        " (expected at most initial.tolerance = " + g17(c.initial_tol) + ") for " + describe());
  }
  // A model that gives M's diagonal (mass_diagonal) has the cpu and cuda
  // backends factor that alone; the reference factors all of `mass`. Were
  // they to differ, the backends would integrate different systems.
  if (!check) return;
  if (M.mass_diagonal_mismatch) {
    const std::string why = M.mass_diagonal_mismatch(pv, q, c.t0);
    if (!why.empty())
      throw ConfigError((c.model_file.empty() ? c.path : printable(c.model_file)) + ": model '" + M.name +
                        "': mass and mass_diagonal disagree at the initial state of sample " + std::to_string(i) +
                        ": " + why);
  }
  // Likewise for the columns of A that the cpu and cuda backends skip
  // (constraint_columns): there the backends would drop real terms.
  if (M.constraint_columns_mismatch) {
    const std::string why = M.constraint_columns_mismatch(pv, q, qd, c.t0);
    if (!why.empty())
      throw ConfigError((c.model_file.empty() ? c.path : printable(c.model_file)) + ": model '" + M.name +
                        "': constraints and constraint_columns disagree at the initial state of sample " +
                        std::to_string(i) + ": " + why);
  }
}

// Sets system k of e to sample ids[k] at its initial state, for every k;
// returns the energies of those states. By `threads` threads (0: all
// cores), each setting the systems whose states it computes (Ensemble::set),
// so that the ensemble's memory is first touched by the threads. The inputs
// of a sample (canonical order): the varying ones as drawn into the table
// before the run, the fixed ones from the config.
std::vector<double> set_samples(const Config& c, const Table& t, Ensemble& e, const std::vector<long>& ids,
                                int threads) {
  const ModelInfo& M = *c.model;
  const std::size_t N = ids.size(), np = M.params.size(), n = static_cast<std::size_t>(M.n);
  const std::vector<const Input*> inputs = c.inputs();
  std::vector<double> E0(N);
  struct Scratch {
    std::vector<double> in, p, q, qd;
  };
  for_each_index<Scratch>(static_cast<long>(N), threads, [&](long x, Scratch& w) {
    const std::size_t k = static_cast<std::size_t>(x), i = static_cast<std::size_t>(ids[k]);
    if (w.in.empty()) {  // the fixed inputs, once per thread
      w.in.resize(inputs.size());
      for (std::size_t j = 0; j < inputs.size(); ++j) w.in[j] = inputs[j]->dist.a;
      w.p.resize(np), w.q.resize(n), w.qd.resize(n);
    }
    for (std::size_t v = 0; v < t.varying.size(); ++v) w.in[t.varying[v]] = t.cols[1 + v].d[i];
    try {
      initial_state(c, ids[k], w.in, w.p.data(), w.q.data(), w.qd.data(), false);  // checked by draw_all
      E0[k] = M.energy(std::span<const double>(w.p), w.q.data(), w.qd.data(), c.t0);
    } catch (const ModelError& thrown) {
      throw ModelError(thrown.what() + std::string(" (sample ") + std::to_string(ids[k]) + ")");
    }
    e.set(static_cast<int>(k), std::span<const double>(w.p), w.q.data(), w.qd.data(), c.t0);
  });
  return E0;
}

// The output directory of a run.
std::string output_dir(const Config& c, const ExecuteOptions& o) {
  return !o.out_dir.empty() ? o.out_dir : !c.out_dir.empty() ? c.out_dir : "ukb-run";
}

// "1.5 GB", "350 MB", "12 kB".
std::string bytes_text(double b) {
  char buf[32];
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.3g GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof buf, "%.3g MB", b / 1e6);
  else std::snprintf(buf, sizeof buf, "%.3g kB", b / 1e3);
  return buf;
}

// The memory a run needs: the results table (every sample: 8 bytes a
// column, 4 its status) and the ensembles of one chunk and of the recorded
// samples (every field of fields.hpp; the dense output, which only the
// recorded samples keep, for those).
double memory_need(const Config& c) {
  const ModelInfo& M = *c.model;
  Config layout = c;
  layout.samples = 0;  // the columns alone, no room reserved
  const double columns = static_cast<double>(make_table(layout).cols.size());
  const double table = (8.0 * columns + 4.0) * static_cast<double>(c.samples);
  double per_system = 0, dense = 0;
  for (const FieldInfo& f : field_table) {
    const double rows = f.rows == 'n'   ? M.n
                        : f.rows == 'm' ? M.m
                        : f.rows == 'p' ? static_cast<double>(M.params.size())
                        : f.rows == 'd' ? 10.0 * M.n + 2
                                        : 1.0;
    (f.role == FieldRole::dense ? dense : per_system) += rows * (f.real ? 8.0 : f.bytes);
  }
  const double chunk = static_cast<double>(std::min(c.chunk, c.samples)), recorded = static_cast<double>(c.record.size());
  return table + per_system * (chunk + recorded) + dense * recorded;
}

// Refuses a run that cannot fit in the memory this process may use (the
// machine's, ulimit -v, the cgroup's limit) before work starts.
void check_memory(const Config& c) {
  const double need = memory_need(c);
  const MemoryLimit have = available_memory();
  if (have.bytes > 0 && need > 0.8 * have.bytes)
    throw ConfigError(c.path + ": key 'samples': " + std::to_string(c.samples) + " samples need about " +
                      bytes_text(need) + " for the results table and one chunk, more than 80 % of " + have.what +
                      " (" + bytes_text(have.bytes) + " available); expected fewer samples (split the run by seed)");
}

// Refuses a thread count this process cannot create, before any work:
// OpenMP (libgomp) ends the process with its own message and exit code 1
// where it cannot create its threads, leaving no outputs and the output
// directory's lock. The threads' stacks, each of the default size, count
// against an address-space limit in full (ulimit -v); a probe then creates
// them all at once (ulimit -u, the kernel's threads-max, a cgroup's pids.max)
// and lets them end.
void check_threads(const Config& c, int threads) {
  const int n = thread_count(threads);
  if (n <= 1) return;
  std::size_t stack = 8u << 20;
  pthread_attr_t a;
  if (::pthread_getattr_default_np(&a) == 0) {
    ::pthread_attr_getstacksize(&a, &stack);
    ::pthread_attr_destroy(&a);
  }
  const std::string key = c.path + ": key 'threads' (or --threads): " + std::to_string(n) + " threads ";
  const MemoryLimit have = available_memory();
  const double stacks = static_cast<double>(n - 1) * static_cast<double>(stack);
  if (have.what.find("ulimit -v") != std::string::npos && stacks > 0.5 * have.bytes)
    throw ConfigError(key + "take " + bytes_text(stacks) + " of address space for their stacks (" +
                      bytes_text(static_cast<double>(stack)) + " each), more than half of " + have.what + " (" +
                      bytes_text(have.bytes) + " available); expected fewer threads");
  int fds[2];
  if (::pipe(fds) != 0) return;  // no probe: OpenMP reports what it finds
  std::vector<pthread_t> made;
  int err = 0;
  auto wait = [](void* fd) -> void* {
    char b;
    while (::read(static_cast<int>(reinterpret_cast<std::intptr_t>(fd)), &b, 1) < 0 && errno == EINTR) {
    }
    return nullptr;
  };
  for (int k = 1; k < n; ++k) {
    pthread_t t;
    err = ::pthread_create(&t, nullptr, wait, reinterpret_cast<void*>(static_cast<std::intptr_t>(fds[0])));
    if (err != 0) break;
    made.push_back(t);
  }
  ::close(fds[1]);  // every waiting thread's read returns
  for (pthread_t t : made) ::pthread_join(t, nullptr);
  ::close(fds[0]);
  if (err != 0)
    throw ConfigError(key + "cannot be created here: thread " + std::to_string(made.size() + 2) + " failed (" +
                      std::strerror(err) + "; ulimit -u, ulimit -v or the system's limit on threads); expected " +
                      "at most " + std::to_string(made.size() + 1));
}

// Draws every sample's inputs once, into the table's input columns, and
// checks every initial state before any work starts.
void draw_all(const Config& c, Table& t, int threads) {
  const std::size_t S = static_cast<std::size_t>(c.samples);
  for (std::size_t k = 0; k < t.varying.size(); ++k) t.cols[1 + k].d.resize(S);
  // By `threads` threads (0: all cores); a bad initial state is reported for
  // the first such sample, as one thread would (for_each_index).
  const ModelInfo& M = *c.model;
  const std::vector<const Input*> inputs = c.inputs();
  struct State {
    std::vector<double> in, p, q, qd;
  };
  for_each_index<State>(c.samples, threads, [&](long i, State& s) {
    if (s.in.empty()) {  // once per thread
      s.in.resize(inputs.size());
      s.p.resize(M.params.size());
      s.q.resize(static_cast<std::size_t>(M.n));
      s.qd.resize(static_cast<std::size_t>(M.n));
    }
    draw_inputs(c, inputs, static_cast<std::uint64_t>(i), s.in.data());
    for (std::size_t k = 0; k < t.varying.size(); ++k) t.cols[1 + k].d[static_cast<std::size_t>(i)] = s.in[t.varying[k]];
    initial_state(c, i, s.in, s.p.data(), s.q.data(), s.qd.data());
  });
}

// --resume DIR where DIR has no checkpoint: refused before anything is read.
void require_checkpoint(const std::string& dir) {
  if (!fs::exists(fs::symlink_status(fs::path(dir) / checkpoint_name)))
    throw ConfigError("--resume: '" + printable(dir, 200) + "' holds no checkpoint (" + checkpoint_name +
                      "): nothing to resume; a completed run removes its checkpoint");
}

}  // namespace

Config resume_config(const std::string& dir) {
  const fs::path file = fs::path(dir) / checkpoint_name;
  require_checkpoint(dir);
  const CheckpointHeader k = read_checkpoint(file).header;
  check_version(file, k);
  // A model file is found where the run found it (config_dir), whatever the
  // working directory now; checkpoints of earlier versions: beside the
  // config's path as given (".": a bare file name).
  std::string from = k.config_dir.empty() ? fs::path(k.config_path).parent_path().string() : k.config_dir;
  if (from.empty()) from = ".";
  Config c = parse_config(k.config_text, ConfigSource{.path = k.config_path + " (as stored in " + file.string() + ")",
                                                     .dir = from,
                                                     .model = nullptr,
                                                     .model_files = true});
  c.path = k.config_path;
  const nlohmann::json id = nlohmann::json::parse(k.identity);  // JSON: read_checkpoint checked it
  if (id.contains("backend") && id["backend"].is_string())
    if (const std::optional<Backend> b = parse_backend(id["backend"].get<std::string>())) c.backend = *b;
  // A run whose config was changed in code after parsing cannot be rebuilt
  // from the file's text: resume it through the API, with that config.
  const std::string diff = identity_difference(k.identity, config_identity(c.to_json()));
  if (!diff.empty())
    throw ConfigError(file.string() + ": the stored config text does not give the checkpoint's run (" + diff +
                      "); resume it with the config it ran with (ukb run CONFIG --resume DIR, or "
                      "ukb::run::execute with resume = true)");
  return c;
}

namespace {

// The run (execute, below, adds what to do after a failure to its message).
// `planned` becomes true when the work starts.
// Integrates e, which holds samples ids, until none of its systems is
// active, in calls of about 4e6 system-steps (so that a progress line stays
// lively); after each call, each(system-steps of the call, systems still
// active).
template <class F>
void integrate_until_done(Ensemble& e, const std::vector<long>& ids, const RunOptions& r, const EngineOptions& eo,
                          F&& each) {
  const int N = e.size();
  const long budget = std::max(16L, 4000000L / N);
  // The steps taken so far: summed here once (the ensemble is on the host
  // after set), then from each call's tally (on cuda reduced on the device:
  // counting them here would bring the whole ensemble back after every call).
  std::int64_t before = 0;
  {
    const std::int64_t* s = e.i64(Field::steps);
    for (int k = 0; k < N; ++k) before += s[k];
  }
  for (;;) {
    Tally left;
    try {
      left = e.integrate(r, budget, eo);
    } catch (const ModelError& x) {
      const auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
      throw ModelError(x.what() + std::string(" (in one of the samples ") + std::to_string(*lo) + " to " +
                       std::to_string(*hi) + ")");
    }
    each(left.steps - before, left.active);
    if (left.active == 0) return;
    if (left.steps == before)  // no system can move any more (config checks make this unreachable)
      throw std::runtime_error("the run makes no progress (dt too small for t?)");
    before = left.steps;
  }
}

// Rows of a results table as Results: `rows` of t, for `samples`; the input
// columns from `inputs` (the run's table, which holds every sample's draws).
Results results_of(const Table& t, const std::vector<long>& rows, const Table& inputs, const std::vector<long>& samples) {
  Results r;
  for (std::size_t j = 0; j < t.cols.size(); ++j) {
    const Column& col = t.cols[j];
    r.names.push_back(col.name);
    std::vector<double> v;
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const std::size_t row = static_cast<std::size_t>(rows[k]);
      if (col.input) v.push_back(inputs.cols[j].d[static_cast<std::size_t>(samples[k])]);
      else if (col.integer) v.push_back(static_cast<double>(col.i[row]));
      else v.push_back(col.d[row]);
    }
    r.values.push_back(std::move(v));
  }
  for (long row : rows) r.status.push_back(status_name(static_cast<Status>(t.status[static_cast<std::size_t>(row)])));
  return r;
}

// The cross-check of a complete run (ExecuteOptions::crosscheck): its chosen
// samples integrated again on the other backend (model M2) and compared.
CrosscheckReport crosscheck_run(const Config& c, const ModelInfo& M2, const Table& table, const ExecuteOptions& o,
                                const EngineOptions& eo) {
  const Backend other = *o.crosscheck;
  const std::vector<long> ids = crosscheck_subset(c, table.status, o.crosscheck_samples);
  const int N = static_cast<int>(ids.size());
  std::unique_ptr<Ensemble> e = M2.ensemble(N, other);
  const std::vector<double> e0 = set_samples(c, table, *e, ids, eo.threads);
  integrate_until_done(*e, ids, c.run, eo, [](std::int64_t, long) {});
  Config sized = c;
  sized.samples = N;  // the table's columns reserve room for N rows
  Table sub = make_table(sized);
  const Finals f(*e, sub);
  append_rows(sub, c, f, 0, N, ids.data(), e0.data());
  std::vector<long> rows(ids.size());
  for (std::size_t k = 0; k < rows.size(); ++k) rows[k] = static_cast<long>(k);
  Results theirs = results_of(sub, rows, table, ids);
  if (o.crosscheck_tamper) o.crosscheck_tamper(theirs);
  return compare_results(c, results_of(table, ids, table, ids), theirs, std::string(to_string(c.backend)),
                         std::string(to_string(other)));
}

// ---------------------------------------------------------------- distributed runs (cluster.hpp)

// The cluster of a distributed run, or null for one process.
Cluster* cluster_of(const ExecuteOptions& o) { return o.cluster && o.cluster->size() > 1 ? o.cluster : nullptr; }

// The CPU threads of a rank.
int threads_of(const Config& c, const ExecuteOptions& o) {
  const Cluster* cl = cluster_of(o);
  return c.threads == 0 && cl ? cl->threads_hint() : c.threads;
}

// Block b of a distributed run whose first `done` samples are done: its
// first sample and its count.
std::pair<long, long> block_span(const Config& c, long done, long b) {
  const long first = done + b * c.chunk;
  return {first, std::min(c.chunk, c.samples - first)};
}

// Whether sample s is recorded: `sorted` is the config's record list sorted.
bool recorded_in(const std::vector<long>& sorted, long s) { return std::binary_search(sorted.begin(), sorted.end(), s); }

std::vector<long> sorted_record(const Config& c) {
  std::vector<long> r = c.record;
  std::sort(r.begin(), r.end());
  return r;
}

// Where a process's time in its blocks went (run.json's samples_seconds).
struct BlockTimes {
  double states = 0;     // the initial states computed and set into the ensemble
  double integrate = 0;  // the integration calls (on cuda: with the copies to and from the device)
  double rows = 0;       // the final states read and the rows made
};

// The samples of [first, first + count) that are not recorded (those are
// rank 0's, integrated with their trajectories).
std::vector<long> unrecorded(const Config& c, long first, long count) {
  const std::vector<long> record = sorted_record(c);
  std::vector<long> ids;
  ids.reserve(static_cast<std::size_t>(count));
  for (long s = first; s < first + count; ++s)
    if (!recorded_in(record, s)) ids.push_back(s);
  return ids;
}

// Integrates the samples `ids` on e and makes their rows into `out` on the
// run's threads (rows_values, a range of systems at a time): system k's
// (sample ids[k]) at position at(k). Returns their system-steps.
template <class At>
double integrate_rows(const Config& c, const ModelInfo& M, const Table& table, const EngineOptions& eo,
                      const std::vector<long>& ids, std::unique_ptr<Ensemble>& e, BlockTimes& times,
                      const std::function<void(std::int64_t steps, long active)>& each, const RowsOut& out,
                      const At& at) {
  const int N = static_cast<int>(ids.size());
  double steps = 0;
  if (N == 0) return steps;
  auto t0 = Clock::now();
  auto lap = [&](double& into) {
    const auto now = Clock::now();
    into += std::chrono::duration<double>(now - t0).count();
    t0 = now;
  };
  if (!e || e->size() != N) e = M.ensemble(N, c.backend);
  const std::vector<double> e0 = set_samples(c, table, *e, ids, eo.threads);
  lap(times.states);
  integrate_until_done(*e, ids, c.run, eo, [&](std::int64_t s, long active) {
    steps += static_cast<double>(s);
    if (each) each(s, active);
  });
  lap(times.integrate);
  const Finals f(*e, table);
  // Ranges of rows, so that each column is written in runs of stores.
  constexpr long range = 1024;
  for_each_index<RowScratch>((N + range - 1) / range, eo.threads, [&](long b, RowScratch& w) {
    const long k0 = b * range, k1 = std::min<long>(N, k0 + range);
    const std::size_t i0 = static_cast<std::size_t>(k0);
    rows_values(table, c, f, k0, k1, ids.data() + i0, e0.data() + i0, at(i0), out, w);
  });
  lap(times.rows);
  return steps;
}

// The rows of block [first, first + count) of a distributed run, for rank
// 0: the unrecorded samples' count, their system-steps, then every column
// of the table that is not an input (the inputs are drawn on every rank),
// then their statuses.
std::vector<char> block_rows(const Config& c, const ModelInfo& M, const Table& table, const EngineOptions& eo,
                             long first, long count, std::unique_ptr<Ensemble>& e, BlockTimes& times,
                             const std::function<void(std::int64_t steps, long active)>& each = {}) {
  const std::vector<long> ids = unrecorded(c, first, count);
  // Where each column that is not an input goes among the block's columns.
  std::vector<std::size_t> slot(table.cols.size(), 0);
  std::size_t cols = 0;
  for (std::size_t j = 0; j < table.cols.size(); ++j)
    if (!table.cols[j].input) slot[j] = cols++;
  const std::size_t n = ids.size();
  std::vector<char> out(16 + n * (cols * 8 + 4));
  char* const data = out.data() + 16;
  RowsOut to;
  for (std::size_t j = 0; j < table.cols.size(); ++j)
    to.col.push_back(table.cols[j].input ? nullptr : data + slot[j] * n * 8);
  to.status = data + cols * n * 8;
  const double steps = integrate_rows(c, M, table, eo, ids, e, times, each, to,
                                      [](std::size_t) { return static_cast<const long*>(nullptr); });
  const std::int64_t rows = static_cast<std::int64_t>(n);
  std::memcpy(out.data(), &rows, 8);
  std::memcpy(out.data() + 8, &steps, 8);
  return out;
}

// Block [first, first + count) of a run in one process, its rows made
// straight into the table (rows `first`, ...; the table has `first` rows):
// the recorded samples' from `recorded` (which returns their steps), the
// others' by the run's threads, which touch the rows' memory first. Returns
// the block's system-steps. On failure the table keeps its `first` rows.
double rows_into_table(Table& table, const Config& c, const ModelInfo& M, const EngineOptions& eo, long first,
                       long count, std::unique_ptr<Ensemble>& e, BlockTimes& times,
                       const std::function<void(std::int64_t steps, long active)>& each,
                       const std::function<double(long)>& recorded) {
  const std::vector<long> ids = unrecorded(c, first, count);
  const std::size_t rows = static_cast<std::size_t>(first), total = static_cast<std::size_t>(c.samples);
  if (table.rows() != rows) throw std::logic_error("rows_into_table: the table does not end where the block starts");
  // The columns that are not inputs, and the statuses, at `to` rows (room
  // for every sample reserved at the first block; a shrink reserves nothing).
  auto resize = [&](std::size_t to) {
    auto fit = [&](auto& v) {
      if (to > v.size() && v.capacity() < total) v.reserve(total);
      v.resize(to);
    };
    for (Column& col : table.cols)
      if (!col.input) col.integer ? fit(col.i) : fit(col.d);
    fit(table.status);
  };
  double steps = 0;
  try {
    resize(rows + static_cast<std::size_t>(count));  // unwritten (fresh_memory.hpp): every row is put below
    // In one process a sample's row is its index.
    steps = integrate_rows(c, M, table, eo, ids, e, times, each, table_out(table),
                           [&](std::size_t k) { return ids.data() + k; });
    const auto t0 = Clock::now();  // the recorded samples' rows count as rows
    std::vector<long> record = sorted_record(c);
    record.erase(std::unique(record.begin(), record.end()), record.end());
    for (long s : record)
      if (s >= first && s < first + count) steps += recorded(s);
    times.rows += std::chrono::duration<double>(Clock::now() - t0).count();
  } catch (...) {
    resize(rows);
    throw;
  }
  return steps;
}

// Appends block [first, first + count) to the table in sample order: the
// recorded samples from `recorded`, the others from the block's rows.
// Returns the block's system-steps.
double merge_rows(Table& table, const Config& c, long first, long count, const std::vector<char>& rows,
                  const std::function<double(long)>& recorded) {
  std::int64_t N;
  double steps;
  if (rows.size() < 16) throw std::runtime_error("a block's rows from another rank are truncated");
  std::memcpy(&N, rows.data(), 8);
  std::memcpy(&steps, rows.data() + 8, 8);
  std::size_t cols = 0;
  for (const Column& col : table.cols) cols += !col.input;
  if (rows.size() != 16 + static_cast<std::size_t>(N) * (cols * 8 + 4))
    throw std::runtime_error("a block's rows from another rank have the wrong size");
  const char* data = rows.data() + 16;
  const std::vector<long> record = sorted_record(c);
  const std::size_t n = static_cast<std::size_t>(N);
  std::int64_t k = 0;
  for (long s = first; s < first + count;) {
    if (recorded_in(record, s)) {
      steps += recorded(s);
      ++s;
      continue;
    }
    // The samples up to the next recorded one: a run of rows, column by column.
    long end = s + 1;
    while (end < first + count && !recorded_in(record, end)) ++end;
    const std::size_t len = static_cast<std::size_t>(end - s), at = static_cast<std::size_t>(k);
    if (k + static_cast<std::int64_t>(len) > N) throw std::runtime_error("a block from another rank has too few rows");
    // Into room reserved for every sample at the first block (growing by
    // doubling moved the columns again at every power of two).
    const auto total = static_cast<std::size_t>(c.samples);
    auto append = [&](auto& to, const char* from) {
      using X = typename std::decay_t<decltype(to)>::value_type;
      if (to.capacity() < total) to.reserve(total);
      const std::size_t old = to.size();
      to.resize(old + len);
      std::memcpy(to.data() + old, from, len * sizeof(X));
    };
    std::size_t j = 0;
    for (Column& col : table.cols) {
      if (col.input) continue;
      const char* v = data + (j++ * n + at) * 8;
      if (col.integer) append(col.i, v);
      else append(col.d, v);
    }
    append(table.status, data + cols * n * 8 + at * 4);
    k += static_cast<std::int64_t>(len);
    s = end;
  }
  if (k != N) throw std::runtime_error("a block from another rank has too many rows");
  return steps;
}

// The blocks of a run in one process, handed out in order, so that one
// process and the ranks of a distributed run share one loop (run_blocks).
// Their rows go straight into the table (rows_into_table): none is
// delivered.
class LocalBlocks final : public Cluster {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int threads_hint() const override { return 0; }
  std::string agree(const std::string& error, bool) override { return error; }
  bool engaged() const override { return false; }
  void end() override {}
  long broadcast(long x) override { return x; }
  std::vector<double> gather(double x) override { return {x}; }
  void serve(long blocks) override { blocks_ = blocks, next_ = 0, stopped_ = false; }
  long next_block() override { return !stopped_ && next_ < blocks_ ? next_++ : -1; }
  void deliver(long, std::vector<char>) override { throw std::logic_error("LocalBlocks: rows are not delivered"); }
  void stop() override { stopped_ = true; }
  bool take(long, std::vector<char>&) override { return false; }
  void finish() override {}

 private:
  long blocks_ = 0, next_ = 0;
  bool stopped_ = false;
};

// A rank other than 0 of a distributed run: the same plan (every sample's
// inputs drawn), then blocks as rank 0 hands them out; rank 0 has the table
// and writes the files.
Outcome execute_rank(const Config& c, const ExecuteOptions& o, Cluster& cl) {
  std::string error;
  Table table;
  const ModelInfo* M = c.model;
  try {
    if (o.crosscheck) throw ConfigError("--crosscheck: not available in a distributed run; cross-check with one process");
    if (c.backend == Backend::cuda) {
      std::string why;
      if (cuda::device_count(&why) == 0 || !cuda::use_device(cl.local_rank(), &why))
        throw ConfigError(c.path + ": key 'backend': cuda is not available here (" + why + "); expected reference or cpu");
      if (!c.model_file.empty()) M = &load_model_file(c.model_file, {.cuda = true, .progress = false});
    }
    check_memory(c);
    check_threads(c, threads_of(c, o));
    table = make_table(c);
    draw_all(c, table, threads_of(c, o));
  } catch (const std::exception& e) {
    error = e.what();
  }
  const std::string first = cl.agree(error, true);
  if (!first.empty()) throw ConfigError(first);
  const long done = cl.broadcast(0);
  cl.serve((c.samples - done + c.chunk - 1) / c.chunk);
  const EngineOptions eo{.threads = threads_of(c, o), .simd = o.simd};
  std::unique_ptr<Ensemble> e;
  double busy = 0, blocks = 0;
  BlockTimes times;  // this rank's own (run.json has rank 0's)
  for (long b; (b = cl.next_block()) >= 0;) {
    const auto [start, count] = block_span(c, done, b);
    const auto t0 = Clock::now();
    cl.deliver(b, block_rows(c, *M, table, eo, start, count, e, times));
    busy += std::chrono::duration<double>(Clock::now() - t0).count();
    ++blocks;
    if (o.stop && o.stop->load() != 0) cl.stop();
  }
  cl.finish();
  Outcome r;
  r.samples = c.samples;
  r.done = cl.broadcast(0);
  cl.gather(busy);
  cl.gather(blocks);
  cl.end();
  r.interrupted = r.done < c.samples;
  return r;
}

// ---------------------------------------------------------------- plan
//
// A run in one process (or rank 0 of a distributed run) is planned, then
// its blocks run, then its outputs are published: execute_in calls the
// three in turn.

// Refuses what the run's backends cannot do here, before anything is made.
void check_backends(const Config& c, const ExecuteOptions& o, Cluster* cl) {
  if (cl && o.crosscheck)
    throw ConfigError("--crosscheck: not available in a distributed run; cross-check with one process");
  if (c.backend == Backend::cuda) {
    std::string why;
    // In a distributed run each rank of a node takes a GPU of its own.
    if (cuda::device_count(&why) == 0 || (cl && !cuda::use_device(cl->local_rank(), &why)))
      throw ConfigError(c.path + ": key 'backend': cuda is not available here (" + why +
                        "); expected reference or cpu");
  }
  if (o.crosscheck) {
    const std::string b(to_string(*o.crosscheck));
    if (*o.crosscheck == c.backend)
      throw ConfigError("--crosscheck: expected a backend other than the run's (" + b + ")");
    std::string why;
    if (*o.crosscheck == Backend::cuda && cuda::device_count(&why) == 0)
      throw ConfigError("--crosscheck: cuda is not available here (" + why + "); expected reference or cpu");
    if (o.crosscheck_samples < 1 || o.crosscheck_samples > 1000000)
      throw ConfigError("--crosscheck-samples: expected an integer in [1, 1000000], got " +
                        std::to_string(o.crosscheck_samples));
  }
}

// A model file's plugin with the cuda backend (compiled by nvcc on first
// use), whatever variant the config was parsed with; `what` names the
// source of a failure.
const ModelInfo& cuda_plugin(const Config& c, const std::string& what) {
  try {
    return load_model_file(c.model_file, {.cuda = true, .progress = true});
  } catch (const ModelFileError& e) {
    throw ConfigError(what + e.what());
  }
}

// The files the run must not overwrite: its config (a resumed run's config
// is the checkpoint's text, its path as given then) and its model file.
std::vector<fs::path> run_inputs(const Config& c, const ExecuteOptions& o) {
  std::vector<fs::path> inputs;
  if (!o.resume) inputs.push_back(c.path);
  if (!c.model_file.empty()) {
    const fs::path model = split_model_spec(c.model_file).first;
    inputs.push_back(model.is_absolute() || c.source_dir.empty() ? model : fs::path(c.source_dir) / model);
  }
  return inputs;
}

// What the plan fixed: the models, the output directory, the table with
// every sample's inputs, and where the work starts (the checkpoint's
// samples and steps where resumed).
struct Plan {
  const ModelInfo* M = nullptr;   // the model the run integrates (a model file's cuda plugin on cuda)
  const ModelInfo* M2 = nullptr;  // the cross-check's (the cuda plugin where it runs on cuda)
  fs::path ckpt_file;
  std::unique_ptr<Output> out;
  Table table;
  std::string identity;  // the config's: a checkpoint belongs to it
  long done = 0;
  double system_steps = 0;
};

// Continues from the checkpoint of p.ckpt_file: refused where it belongs
// to another config, has other columns or other inputs than the config
// draws; else its columns become the table's and its samples are done.
void resume_from_checkpoint(const Config& c, Plan& p) {
  Table& table = p.table;
  const fs::path& ckpt_file = p.ckpt_file;
  Checkpoint k = read_checkpoint(ckpt_file);
  const CheckpointHeader& h = k.header;
  check_version(ckpt_file, h);
  const std::string diff = identity_difference(h.identity, p.identity);
  if (!diff.empty())
    throw ConfigError(ckpt_file.string() + ": the checkpoint belongs to another config (" + diff +
                      "); resume with the same config and backend, or start the run again elsewhere");
  bool same_cols = k.cols.size() == table.cols.size() && h.samples == c.samples &&
                   k.status.size() == static_cast<std::size_t>(h.done);
  for (std::size_t j = 0; same_cols && j < table.cols.size(); ++j)
    same_cols = k.cols[j].name == table.cols[j].name && k.cols[j].integer == table.cols[j].integer;
  if (!same_cols) throw ConfigError(ckpt_file.string() + ": the checkpoint's columns do not match this run's");
  // Its inputs are those the config draws, bit for bit: a checkpoint
  // altered (its checksum recomputed) would otherwise mix in results of
  // other inputs.
  for (std::size_t j = 0; j < table.cols.size(); ++j) {
    const Column &mine = table.cols[j], &stored = k.cols[j];
    if (!mine.input) continue;
    const std::size_t n = mine.integer ? std::min(mine.i.size(), stored.i.size())
                                       : std::min(mine.d.size(), stored.d.size());
    for (std::size_t r = 0; r < n; ++r) {
      const bool same = mine.integer ? mine.i[r] == stored.i[r]
                                     : std::bit_cast<std::uint64_t>(mine.d[r]) == std::bit_cast<std::uint64_t>(stored.d[r]);
      if (!same)
        throw ConfigError(ckpt_file.string() + ": sample " + std::to_string(r) + "'s '" + mine.name + "' is " +
                          (mine.integer ? std::to_string(stored.i[r]) : g17(stored.d[r])) +
                          " in the checkpoint, but the config draws " +
                          (mine.integer ? std::to_string(mine.i[r]) : g17(mine.d[r])) +
                          ": the checkpoint was altered; delete it and start the run again");
    }
  }
  // The checkpoint's columns become the table's (one copy in memory); the
  // input columns hold every sample's draws already.
  const std::size_t S = static_cast<std::size_t>(c.samples);
  for (std::size_t j = 0; j < table.cols.size(); ++j) {
    if (table.cols[j].input) continue;
    table.cols[j].d = std::move(k.cols[j].d);
    table.cols[j].i = std::move(k.cols[j].i);
    table.cols[j].integer ? table.cols[j].i.reserve(S) : table.cols[j].d.reserve(S);
  }
  table.status = std::move(k.status);
  table.status.reserve(S);
  p.done = h.done;
  p.system_steps = h.system_steps;
  p.out->keep();
}

// The plan: every check that can fail before work (backends, models, the
// output directory, memory, threads, every sample's inputs, a checkpoint to
// continue from or not to overwrite), in that order.
Plan plan_run(const Config& c, const ExecuteOptions& o, const std::string& dir) {
  check_backends(c, o, cluster_of(o));
  Plan p;
  const bool file_on_cuda = c.backend == Backend::cuda && !c.model_file.empty();
  p.M = file_on_cuda ? &cuda_plugin(c, c.path + ": key 'model': ") : c.model;
  p.M2 = o.crosscheck && *o.crosscheck == Backend::cuda && !c.model_file.empty()
             ? &cuda_plugin(c, "--crosscheck cuda: the config's key 'model': ")
             : p.M;
  if (o.crosscheck) {  // the other backend can run this model: found now, not after the run
    try {
      (void)p.M2->ensemble(1, *o.crosscheck);
    } catch (const std::exception& e) {
      throw ConfigError("--crosscheck " + std::string(to_string(*o.crosscheck)) + ": " + e.what());
    }
  }
  p.ckpt_file = fs::path(dir) / checkpoint_name;
  if (o.resume) require_checkpoint(dir);  // before any work
  p.out = std::make_unique<Output>(
      dir, o.resume ? "--resume" : !o.out_dir.empty() ? "--out" : c.path + ": key 'output.dir'", run_inputs(c, o));
  check_memory(c);
  check_threads(c, threads_of(c, o));
  p.table = make_table(c);
  draw_all(c, p.table, threads_of(c, o));
  p.identity = config_identity(c.to_json());
  if (o.resume) {
    resume_from_checkpoint(c, p);
  } else if (fs::exists(p.ckpt_file)) {
    throw ConfigError((!o.out_dir.empty() ? std::string("--out") : c.path + ": key 'output.dir'") + ": '" + dir +
                      "' holds the checkpoint of an unfinished run; continue it with `ukb run --resume " + dir +
                      "`, or delete " + p.ckpt_file.string() + " to start again");
  }
  return p;
}

// Writes the checkpoint of the samples done so far.
void save_checkpoint(const Config& c, Plan& p) {
  CheckpointHeader h;
  h.version = ukb::version;
  h.config_text = c.text;
  h.config_path = c.path;
  h.config_dir = c.source_dir;
  h.identity = p.identity;
  h.samples = c.samples;
  h.done = p.done;
  h.system_steps = p.system_steps;
  as_write_error([&] { write_checkpoint(p.ckpt_file, h, p.table.cols, p.table.status); });
  p.out->keep();
  p.out->remove_stale();
}

// ---------------------------------------------------------------- blocks

// How the blocks went, for run.json.
struct Work {
  bool stopped = false;                          // a stop request: the checkpoint of p.done samples is written
  double recording = 0;                          // the recorded samples, with their trajectories
  BlockTimes times;                              // this process's blocks
  double merging = 0;                            // rank 0's time merging the rows of every block
  double last_wait = 0;                          // rank 0's wait for the last blocks of the others
  std::vector<double> ranks_busy, ranks_blocks;  // per rank
  Clock::time_point last_save;                   // the last checkpoint written (or the start of the blocks)
  // [stop]: each check (samples, estimate, half-width), and whether the
  // last one met the target (the run ended there).
  std::vector<std::array<double, 3>> checks;
  bool stop_met = false;
};

// The checks of [stop] in order: first, 2 first, 4 first, ... below
// samples, then samples.
long next_check_after(const Config& c, long n) {
  long k = c.stop->first;
  while (k <= n && k < c.samples) k = k > c.samples / 2 ? c.samples : 2 * k;
  return k;
}

// Cuts the table to its first n rows (the inputs, drawn for every sample,
// too): [stop] ended the run there.
void keep_rows(Table& t, std::size_t n) {
  for (Column& col : t.cols) col.integer ? col.i.resize(std::min(n, col.i.size())) : col.d.resize(std::min(n, col.d.size()));
  t.status.resize(std::min(n, t.status.size()));
}

// The samples after p.done: the recorded ones first, with their
// trajectories (their final states join the table in sample order, and the
// blocks skip them), then blocks of c.chunk samples handed out in order in
// one process (their rows made in place in the table), or by the cluster to
// its ranks (this process's own rows and the others' merged in sample
// order). A checkpoint every
// c.checkpoint_interval seconds, and where a stop request ends the work.
// `planned` is set once the recorded samples are done (execute_one's
// messages), `agreed` once the ranks agreed on the plan.
Work run_blocks(const Config& c, const ExecuteOptions& o, Plan& p, bool& planned, bool& agreed) {
  Cluster* const cl = cluster_of(o);
  Table& table = p.table;
  const ModelInfo& M = *p.M;
  Work w;
  if (cl) {  // every rank's plan is made: the others learn where the work starts
    const std::string first = cl->agree("", true);
    agreed = true;
    if (!first.empty()) throw ConfigError(first);
    cl->broadcast(p.done);
    cl->serve((c.samples - p.done + c.chunk - 1) / c.chunk);  // before the recorded samples: nobody waits
  }
  const EngineOptions eo{.threads = threads_of(c, o), .simd = o.simd};
  std::unique_ptr<Ensemble> recorded;
  std::vector<double> recorded_e0;
  const auto record_from = Clock::now();
  if (!c.record.empty()) {
    recorded = M.ensemble(static_cast<int>(c.record.size()), c.backend);
    recorded_e0 = set_samples(c, table, *recorded, c.record, eo.threads);
    AtomicFile& f = p.out->open("trajectories.csv");
    // A stop request while the recorded samples run (one process: under MPI
    // the other ranks' blocks may already join them) ends the run with the
    // checkpoint of the samples done before; they run again on --resume.
    record_trajectories(c, *recorded, eo, f.stream(), cl ? nullptr : o.stop, &w.stopped);
    f.close();
  }
  w.recording = std::chrono::duration<double>(Clock::now() - record_from).count();
  planned = true;
  Progress progress(o.progress, c.samples, p.done, p.system_steps);
  w.last_save = Clock::now();
  if (w.stopped) {  // the samples done before (none in a new run) are kept
    save_checkpoint(c, p);
    progress.update(p.done, p.system_steps, true);
    return w;
  }
  std::unordered_map<long, int> slot;  // sample -> its system in `recorded`
  for (std::size_t k = 0; k < c.record.size(); ++k) slot[c.record[k]] = static_cast<int>(k);
  std::unique_ptr<Finals> recorded_finals;
  if (recorded) recorded_finals = std::make_unique<Finals>(*recorded, table);
  // A recorded sample's row: appended (the merge of a distributed run's
  // blocks) or put at its row, which rows_into_table has made.
  auto recorded_row = [&](long s, bool append) {
    const int r = slot.at(s);
    if (append) append_row(table, c, s, *recorded_finals, r, recorded_e0[std::size_t(r)]);
    else put_row(table, static_cast<std::size_t>(s), c, s, *recorded_finals, r, recorded_e0[std::size_t(r)]);
    return static_cast<double>(recorded->i64(Field::steps)[r]);
  };

  std::unique_ptr<Ensemble> e;
  LocalBlocks local;
  Cluster& work = cl ? *cl : static_cast<Cluster&>(local);
  const long done0 = p.done, blocks = (c.samples - p.done + c.chunk - 1) / c.chunk;
  if (!cl) work.serve(blocks);  // a cluster serves from the handshake on
  long merged = 0;
  double busy = 0, own = 0;
  // [stop]: the checks the rows in the table allow, in order (each a
  // function of the rows before it alone, so the same for any chunk,
  // thread or rank count); where one meets the target, no more blocks are
  // handed out and the table ends there. A resumed run makes every check
  // its rows allow again, from the first (a few: they double), so that its
  // checks are those of a run that was not interrupted.
  long stop_at = -1, check = c.stop ? c.stop->first : -1;
  auto checks = [&] {
    while (c.stop && stop_at < 0 && check <= p.done) {
      const std::array<double, 2> at = stop_statistic(c, table, static_cast<std::size_t>(check));
      w.checks.push_back({static_cast<double>(check), at[0], at[1]});
      const double target = c.stop->halfwidth > 0 ? c.stop->halfwidth : c.stop->rel_halfwidth * std::abs(at[0]);
      if (at[1] <= target) {  // NaN (no interval yet) is not met
        stop_at = check;
        w.stop_met = true;
        work.stop();
      } else if (check >= c.samples) {
        break;
      } else {
        check = next_check_after(c, check);
      }
    }
  };
  // A block's rows are in the table: the run goes on from its end.
  auto landed = [&](long first, long count, double steps) {
    p.system_steps += steps;
    p.done = first + count;
    ++merged;
    progress.update(p.done, p.system_steps);
    if (o.after_chunk) o.after_chunk(p.done);
    checks();
  };
  checks();
  auto merge = [&] {
    std::vector<char> rows;
    while (merged < blocks && work.take(merged, rows)) {
      const auto [first, count] = block_span(c, done0, merged);
      const auto t0 = Clock::now();
      const double steps = merge_rows(table, c, first, count, rows, [&](long s) { return recorded_row(s, true); });
      w.merging += std::chrono::duration<double>(Clock::now() - t0).count();
      landed(first, count, steps);
    }
  };
  for (long b; (b = work.next_block()) >= 0;) {
    const std::pair<long, long> span = block_span(c, done0, b);
    const long first = span.first, count = span.second;  // (a lambda below uses them: no structured binding)
    const auto t0 = Clock::now();
    double partial = 0;  // the block's steps so far, for the progress line
    auto each = [&](std::int64_t s, long active) {
      partial += static_cast<double>(s);
      progress.update(first + count - active, p.system_steps + partial);
    };
    if (cl) {
      work.deliver(b, block_rows(c, M, table, eo, first, count, e, w.times, each));
    } else {  // one process: the rows go straight into the table, in block order
      landed(first, count,
             rows_into_table(table, c, M, eo, first, count, e, w.times, each, [&](long s) { return recorded_row(s, false); }));
    }
    busy += std::chrono::duration<double>(Clock::now() - t0).count();
    ++own;
    merge();
    if (o.stop && o.stop->load() != 0) work.stop();
    if (p.done < c.samples && stop_at < 0 &&  // once [stop] is met the run ends at its check: no checkpoint past it
        std::chrono::duration<double>(Clock::now() - w.last_save).count() >= c.checkpoint_interval) {
      save_checkpoint(c, p);
      w.last_save = Clock::now();
    }
  }
  const auto idle_from = Clock::now();
  work.finish();
  merge();
  if (cl) {
    cl->broadcast(stop_at >= 0 ? c.samples : p.done);  // a run that [stop] ended is complete
    w.ranks_busy = cl->gather(busy);
    w.ranks_blocks = cl->gather(own);
    cl->end();
    w.last_wait = std::chrono::duration<double>(Clock::now() - idle_from).count();
  }
  if (stop_at >= 0 && p.done > stop_at) {  // [stop] met: the rows after the check go
    keep_rows(table, static_cast<std::size_t>(stop_at));
    p.done = stop_at;
  } else if (stop_at >= 0) {
    keep_rows(table, static_cast<std::size_t>(p.done));  // the inputs drawn beyond it
  }
  if (p.done < c.samples && stop_at < 0) {  // stopped: the blocks merged so far are kept
    save_checkpoint(c, p);
    w.stopped = true;
  }
  progress.update(p.done, p.system_steps, true);
  return w;
}

// ---------------------------------------------------------------- publish

// Where the wall time went (run.json's phase_seconds): each phase's end.
class Phases {
 public:
  explicit Phases(Clock::time_point start) : last_(start) {}
  void end(const char* name) {
    const auto now = Clock::now();
    json_[name] = std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  const nlohmann::json& json() const { return json_; }

 private:
  nlohmann::json json_ = nlohmann::json::object();
  Clock::time_point last_;
};

// run.json: the config as run, where the time went, the load balance.
nlohmann::json run_record(const Config& c, const ExecuteOptions& o, const std::string& dir, const nlohmann::json& sum,
                          double wall_s, const Phases& phases, const Plan& p, const Work& w,
                          const std::optional<CrosscheckReport>& cross) {
  Cluster* const cl = cluster_of(o);
  nlohmann::json r;
  r["config"] = nlohmann::json::parse(c.to_json());
  r["config"]["output"]["dir"] = dir;  // where this run wrote (--out, or output.dir)
  r["version"] = ukb::version;
  r["backend"] = std::string(to_string(c.backend));
  r["threads"] = c.backend == Backend::cpu ? thread_count(threads_of(c, o)) : 1;  // per rank
  r["seed"] = c.seed;
  r["samples"] = c.samples;
  if (c.stop) r["samples_run"] = p.table.rows();  // where [stop] ended the run: fewer
  r["status_counts"] = sum["status_counts"];
  r["wall_seconds"] = wall_s;
  r["phase_seconds"] = phases.json();
  // Within `samples`, this process's own blocks (rank 0's under MPI).
  r["samples_seconds"] = {{"record", w.recording},       {"states", w.times.states}, {"integrate", w.times.integrate},
                          {"rows", w.times.rows}, {"merge", w.merging}};
  r["system_steps"] = p.system_steps;
  r["ranks"] = cl ? cl->size() : 1;
  if (cl) {  // the load balance: each rank's time integrating its blocks
    r["rank_busy_seconds"] = w.ranks_busy;
    std::vector<long> blocks;
    for (double b : w.ranks_blocks) blocks.push_back(std::lround(b));
    r["rank_blocks"] = blocks;
    r["rank0_final_wait_seconds"] = w.last_wait;
    r["rank0_merge_seconds"] = w.merging;
  }
  if (cross)
    r["crosscheck"] = {{"against", cross->backend_b}, {"samples", cross->samples}, {"pass", cross->pass}};
  std::vector<std::string> outputs = p.out->opened();  // what a later run into DIR may remove
  outputs.emplace_back("run.json");
  r["outputs"] = outputs;
  return r;
}

// The outputs of a complete run (crosscheck.json, results, summary.json,
// run.json), each under a temporary name renamed when complete. A failure
// writes the checkpoint first where `saved` is false, so that --resume
// writes them.
Outcome publish(const Config& c, const ExecuteOptions& o, const std::string& dir, Plan& p, const Work& w,
                Phases& phases, Clock::time_point start, bool saved) {
  Output& out = *p.out;
  const EngineOptions eo{.threads = threads_of(c, o), .simd = o.simd};
  try {
    std::optional<CrosscheckReport> cross;
    if (o.crosscheck) {
      // Whatever goes wrong in the cross-check, the run's own outputs follow.
      try {
        cross = crosscheck_run(c, *p.M2, p.table, o, eo);
      } catch (const std::exception& why) {
        cross.emplace();
        cross->backend_a = to_string(c.backend);
        cross->backend_b = to_string(*o.crosscheck);
        cross->pass = false;
        cross->verdict = "crosscheck " + cross->backend_a + " against " + cross->backend_b +
                         " could not run: " + why.what() + " (the run's own outputs are complete)";
      }
      AtomicFile& f = out.open("crosscheck.json");
      f.stream() << cross->to_json();
      f.close();
      phases.end("crosscheck");
    }
    if (c.write_csv) {
      AtomicFile& f = out.open("results.csv");
      write_csv(f.stream(), p.table, eo.threads);
      f.close();
      phases.end("results_csv");
    }
    // results.npy is written by a thread of its own while the summary is
    // made (both only read the table): writing it is one thread's work,
    // mostly the copy into the page cache.
    std::future<void> npy;
    if (c.write_npy) {
      AtomicFile& f = out.open("results.npy");
      npy = std::async(std::launch::async, [&f, &t = p.table] {
        write_npy(f.stream(), t);
        f.close();
      });
    }
    Outcome result;
    result.samples = static_cast<long>(p.table.rows());  // c.samples, or where [stop] ended the run
    result.done = result.samples;
    nlohmann::json sum = summary(c, p.table, result, eo.threads);
    if (c.stop) {
      const StopRule& r = *c.stop;
      nlohmann::json& j = sum["stop"];
      j["statistic"] = r.statistic;
      if (r.halfwidth > 0) j["halfwidth_target"] = r.halfwidth;
      else j["rel_halfwidth_target"] = r.rel_halfwidth;
      j["met"] = w.stop_met;
      j["samples"] = result.samples;
      j["max_samples"] = c.samples;
      nlohmann::json checks = nlohmann::json::array();
      for (const auto& k : w.checks)
        checks.push_back({{"samples", static_cast<long>(k[0])},
                          {"estimate", std::isfinite(k[1]) ? nlohmann::json(k[1]) : nlohmann::json(nullptr)},
                          {"halfwidth", std::isfinite(k[2]) ? nlohmann::json(k[2]) : nlohmann::json(nullptr)}});
      j["checks"] = checks;
      const double est = w.checks.empty() ? std::nan("") : w.checks.back()[1];
      const double half = w.checks.empty() ? std::nan("") : w.checks.back()[2];
      char line[320];
      std::snprintf(line, sizeof line, "  stop: %s = %.9g +- %.3g (%g %% interval): %s %ld samples (target +- %.3g%s)",
                    r.statistic.c_str(), est, half, 100 * c.confidence, w.stop_met ? "met at" : "NOT met by",
                    result.samples, r.halfwidth > 0 ? r.halfwidth : r.rel_halfwidth, r.halfwidth > 0 ? "" : " relative");
      result.stop_report = line;
      result.stop_met = w.stop_met;
    }
    {
      AtomicFile& f = out.open("summary.json");
      f.stream() << sum.dump(2) << '\n';
      f.close();
    }
    phases.end("summary");
    if (npy.valid()) {
      npy.get();
      phases.end("results_npy");  // the wait for it after the summary
    }
    result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
    {
      const nlohmann::json r = run_record(c, o, dir, sum, result.wall_s, phases, p, w, cross);
      AtomicFile& f = out.open("run.json");
      f.stream() << r.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';  // a path need not be UTF-8
      f.close();
    }
    out.commit();
    result.out_dir = dir;
    if (cross) {
      result.crosschecked = true;
      result.crosscheck_pass = cross->pass;
      result.crosscheck_verdict = cross->verdict;
    }
    return result;
  } catch (const CompleteRunError&) {
    throw;  // the outputs are in place
  } catch (const std::exception& failure) {
    if (saved) throw;
    try {
      save_checkpoint(c, p);  // the caller says it is kept, and how to go on
    } catch (const std::exception& why) {
      throw WriteError(std::string(failure.what()) + "; the checkpoint could not be written either (" + why.what() +
                       ")");
    }
    throw;
  }
}

Outcome execute_in(const Config& c, const ExecuteOptions& o, const std::string& dir, bool& planned, bool& agreed) {
  const auto start = Clock::now();
  Phases phases(start);
  Plan p = plan_run(c, o, dir);
  phases.end("setup");

  const bool resumed_complete = o.resume && p.done == c.samples;  // only the outputs are left
  const Work w = run_blocks(c, o, p, planned, agreed);
  if (w.stopped) {  // the checkpoint is written
    Outcome r;
    r.interrupted = true;
    r.done = p.done;
    r.samples = c.samples;
    r.checkpoint = p.ckpt_file.string();
    r.out_dir = dir;
    r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
    return r;
  }
  phases.end("samples");

  // The results in a checkpoint before the outputs where the work since
  // the last one reaches checkpoint_interval (the most work a crash may
  // lose, as during the run); otherwise a failure while the outputs are
  // written (a full disk) writes it then, so that --resume writes them.
  bool saved = resumed_complete;
  if (!saved && std::chrono::duration<double>(Clock::now() - w.last_save).count() >= c.checkpoint_interval) {
    save_checkpoint(c, p);
    saved = true;
  }
  phases.end("checkpoint");
  return publish(c, o, dir, p, w, phases, start, saved);
}

}  // namespace

namespace {

Outcome execute_one(const Config& c, const ExecuteOptions& o, bool& agreed) {
  const std::string dir = output_dir(c, o);
  bool planned = false;
  const fs::path ckpt = fs::path(dir) / checkpoint_name;
  // What is kept after a failure, and how to go on.
  auto kept = [&] {
    std::error_code ec;
    if (!fs::is_regular_file(ckpt, ec)) return std::string("; nothing was kept");
    return "; the work up to the last checkpoint is kept in " + ckpt.string() +
           ": once the cause is fixed, continue with `ukb run --resume " + dir + "`";
  };
  try {
    return execute_in(c, o, dir, planned, agreed);
  } catch (const CompleteRunError& e) {
    throw WriteError(e.what());
  } catch (const WriteError& e) {
    std::error_code ec;
    const std::string gone = planned && !fs::is_directory(dir, ec)
                                 ? " (the output directory '" + dir + "' no longer exists: removed during the run?)"
                                 : "";
    throw WriteError(e.what() + gone + kept());
  } catch (const ModelError& e) {
    throw ModelError((c.model_file.empty() ? c.path : printable(c.model_file)) + ": " + e.what() + kept());
  } catch (const std::bad_alloc&) {
    const MemoryLimit have = available_memory();
    const std::string limit = have.bytes > 0 ? " (" + have.what + ": " + bytes_text(have.bytes) + " available)" : "";
    if (!planned) {
      std::string need;  // the estimate allocates a little itself
      try {
        need = " (about " + bytes_text(memory_need(c)) + " needed" + limit + ")";
      } catch (const std::exception&) {
        need = limit;
      }
      throw ConfigError(c.path + ": out of memory while planning the run of " + std::to_string(c.samples) +
                        " samples" + need + "; expected fewer samples (split the run by seed)");
    }
    throw ConfigError(c.path + ": out of memory during the run" + limit +
                      "; expected a smaller integrator.chunk or fewer samples" + kept());
  }
}


}  // namespace

Outcome execute(const Config& given, const ExecuteOptions& o) {
  Config c = given;
  Cluster* const cl = cluster_of(o);
  if (c.chunk <= 0) {
    c.chunk = default_chunk(c.backend);
    // Under MPI, blocks that give every rank four or more (the dynamic
    // split balances the load only where there are blocks to hand out).
    if (cl) {
      const long per = 4L * cl->size();
      c.chunk = std::min(c.chunk, std::max(1L, (c.samples + per - 1) / per));
    }
  }
  if (cl && cl->rank() != 0) return execute_rank(c, o, *cl);
  bool agreed = false;
  try {
    return execute_one(c, o, agreed);
  } catch (const std::exception& e) {
    if (cl && !agreed) cl->agree(e.what(), true);  // the other ranks wait for rank 0's plan: they stop too
    throw;
  }
}

}  // namespace ukb::run
