// `ukb run`: checks every initial state, integrates the ensemble chunk by
// chunk, and writes the per-sample table, the statistics, the recorded
// trajectories and the run record, each file under a temporary name renamed
// when complete.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint.hpp"
#include "ukb/cuda.hpp"
#include "ukb/run.hpp"

namespace ukb::run {
namespace fs = std::filesystem;

std::string status_name(Status s) { return s == Status::ok ? "finished" : std::string(to_string(s)); }

namespace {

using Clock = std::chrono::steady_clock;

// The results table: sample index, varying inputs, status, observables.
struct Table {
  std::vector<Column> cols;  // numeric columns, in output order; status goes after the inputs
  std::size_t status_at = 0; // index in cols before which the status column is written
  std::vector<std::int32_t> status;

  Column& add(std::string name, bool integer, std::size_t reserve) {
    cols.push_back({std::move(name), integer, false, {}, {}});
    integer ? cols.back().i.reserve(reserve) : cols.back().d.reserve(reserve);
    return cols.back();
  }
};

std::string g17(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

nlohmann::json jnum(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// Statistics of the finite values of one column over a subset of samples,
// accumulated in sample order (so they are reproducible).
nlohmann::json stats(const std::vector<double>& all, const std::vector<std::size_t>& rows, int bins) {
  std::vector<double> v;
  v.reserve(rows.size());
  for (std::size_t r : rows)
    if (std::isfinite(all[r])) v.push_back(all[r]);
  nlohmann::json j;
  j["count"] = v.size();
  if (v.empty()) return j;
  double sum = 0;
  for (double x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  j["mean"] = mean;
  j["std"] = v.size() > 1 ? jnum(std::sqrt(ss / static_cast<double>(v.size() - 1))) : nlohmann::json(nullptr);
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  j["min"] = s.front();
  j["max"] = s.back();
  // Quantiles by linear interpolation between order statistics (numpy's default).
  for (double p : {1.0, 5.0, 25.0, 50.0, 75.0, 95.0, 99.0}) {
    const double h = (static_cast<double>(s.size()) - 1) * p / 100;
    const std::size_t k = static_cast<std::size_t>(std::floor(h));
    const double q = k + 1 < s.size() ? s[k] + (h - static_cast<double>(k)) * (s[k + 1] - s[k]) : s[k];
    char key[8];
    std::snprintf(key, sizeof key, "p%02d", static_cast<int>(p));
    j["quantiles"][key] = q;
  }
  // Histogram: `bins` equal bins over [min, max], the last one closed.
  std::vector<std::int64_t> counts(static_cast<std::size_t>(bins), 0);
  const double lo = s.front(), hi = s.back(), w = (hi - lo) / bins;
  for (double x : v) {
    std::size_t b = w > 0 ? static_cast<std::size_t>((x - lo) / w) : 0;
    counts[std::min<std::size_t>(b, counts.size() - 1)]++;
  }
  std::vector<double> edges(static_cast<std::size_t>(bins) + 1);
  for (int b = 0; b <= bins; ++b) edges[static_cast<std::size_t>(b)] = b == bins ? hi : lo + w * b;
  j["histogram"] = {{"edges", edges}, {"counts", counts}};
  return j;
}

// The files a run writes (each only when asked for).
constexpr std::array<const char*, 5> kOutputs{"results.csv", "results.npy", "summary.json",
                                              "trajectories.csv", "run.json"};

// A checkpoint written by another ukb version is refused.
void check_version(const fs::path& file, const CheckpointHeader& h) {
  if (h.version != ukb::version)
    throw ConfigError(file.string() + ": written by ukb " + h.version + ", this is ukb " + ukb::version +
                      "; resume it with ukb " + h.version + " or start the run again");
}

// Files written to NAME.tmp, renamed to NAME by commit(); on destruction
// without commit, the temporaries (and a directory we created) are removed.
class Output {
 public:
  Output(fs::path dir, const std::string& origin) : dir_(std::move(dir)), origin_(origin) {
    std::error_code ec;
    if (!fs::exists(dir_, ec)) {
      fs::path top = dir_;
      while (top.has_parent_path() && !top.parent_path().empty() && !fs::exists(top.parent_path(), ec))
        top = top.parent_path();
      fs::create_directories(dir_, ec);
      if (ec)
        throw ConfigError(origin + ": cannot create the output directory '" + dir_.string() + "' (" +
                          ec.message() + ")");
      created_ = top;
    } else if (!fs::is_directory(dir_, ec)) {
      throw ConfigError(origin + ": the output path '" + dir_.string() + "' exists and is not a directory");
    }
    const fs::path probe = dir_ / ".ukb-write-test.tmp";
    std::ofstream f(probe);
    if (!f) {
      cleanup();
      throw ConfigError(origin + ": cannot write into the output directory '" + dir_.string() + "' (" +
                        std::strerror(errno) + ")");
    }
    f.close();
    fs::remove(probe, ec);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;
  ~Output() {
    if (!committed_) cleanup();
  }

  std::ofstream open(const std::string& name) {
    const fs::path p = dir_ / (name + ".tmp");
    files_.push_back(name);
    std::ofstream f(p, std::ios::binary);
    if (!f) throw ConfigError(origin_ + ": cannot write '" + p.string() + "' (" + std::strerror(errno) + ")");
    return f;
  }

  void close(std::ofstream& f, const std::string& name) {
    f.close();
    if (!f)
      throw ConfigError(origin_ + ": writing '" + (dir_ / (name + ".tmp")).string() +
                        "' failed (disk full?)");
  }

  // Renames every file into place and removes the outputs of an earlier run
  // into the same directory that this run did not write (they would not
  // belong to it).
  void commit() {
    for (const std::string& n : files_) fs::rename(dir_ / (n + ".tmp"), dir_ / n);
    for (const char* n : kOutputs)
      if (std::find(files_.begin(), files_.end(), n) == files_.end()) fs::remove(dir_ / n);
    remove_checkpoint();  // the run is complete
    committed_ = true;
  }

  // Removes the outputs of an earlier run into the directory: once this
  // run's checkpoint is there, they would seem to belong to it.
  void remove_stale() {
    std::error_code ec;
    for (const char* n : kOutputs) fs::remove(dir_ / n, ec);
  }

  void remove_checkpoint() {
    fs::remove(dir_ / checkpoint_name);
    std::error_code ec;
    fs::remove(dir_ / (std::string(checkpoint_name) + ".tmp"), ec);
  }

  // The directory holds a checkpoint now: keep it whatever happens.
  void keep() { created_.clear(); }

 private:
  void cleanup() {
    std::error_code ec;
    for (const std::string& n : files_) fs::remove(dir_ / (n + ".tmp"), ec);
    if (!created_.empty()) fs::remove_all(created_, ec);
  }

  fs::path dir_, created_;
  std::string origin_;
  std::vector<std::string> files_;
  bool committed_ = false;
};

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
// Throws ConfigError where the initial state is not consistent.
void initial_state(const Config& c, long i, const std::vector<double>& in, double* params, double* q,
                   double* qd) {
  const ModelInfo& M = *c.model;
  const std::size_t np = M.params.size();
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
                        "' satisfies the constraints for " + describe());
    return;
  }
  std::copy(ic, ic + M.n, q);
  std::copy(ic + M.n, ic + 2 * M.n, qd);
  double pos, vel;
  M.residual(pv, q, qd, c.t0, pos, vel);
  if (M.has_residual && !(pos <= c.initial_tol && vel <= c.initial_tol))
    throw ConfigError(c.path + ": [initial]: sample " + std::to_string(i) +
                      ": the raw initial state violates the constraints of '" + M.name +
                      "': position residual " + g17(pos) + ", velocity residual " + g17(vel) +
                      " (expected at most initial.tolerance = " + g17(c.initial_tol) + ") for " + describe());
}

// Fills chunk systems [0, count) with samples from `ids`.
void fill(const Config& c, EnsembleChunk& ch, const std::vector<long>& ids) {
  const ModelInfo& M = *c.model;
  const int n = M.n, np = static_cast<int>(M.params.size());
  const int N = static_cast<int>(ids.size());
  ch.reset(N, n, np);
  std::vector<double> p(static_cast<std::size_t>(np)), q(static_cast<std::size_t>(n)),
      qd(static_cast<std::size_t>(n));
  for (int s = 0; s < N; ++s) {
    const std::vector<double> in = draw_inputs(c, static_cast<std::uint64_t>(ids[static_cast<std::size_t>(s)]));
    initial_state(c, ids[static_cast<std::size_t>(s)], in, p.data(), q.data(), qd.data());
    for (int k = 0; k < np; ++k) ch.params[std::size_t(k) * N + s] = p[std::size_t(k)];
    for (int j = 0; j < n; ++j) {
      ch.q[std::size_t(j) * N + s] = q[std::size_t(j)];
      ch.qd[std::size_t(j) * N + s] = qd[std::size_t(j)];
    }
    ch.t[std::size_t(s)] = c.t0;
  }
}

// System s of a chunk, gathered.
struct Sys {
  std::vector<double> p, q, qd;
  Sys(const EnsembleChunk& ch, int s, int n, int np) : p(std::size_t(np)), q(std::size_t(n)), qd(std::size_t(n)) {
    const std::size_t N = static_cast<std::size_t>(ch.N);
    for (int k = 0; k < np; ++k) p[std::size_t(k)] = ch.params[std::size_t(k) * N + s];
    for (int j = 0; j < n; ++j) q[std::size_t(j)] = ch.q[std::size_t(j) * N + s], qd[std::size_t(j)] = ch.qd[std::size_t(j) * N + s];
  }
};

void write_npy(std::ofstream& f, const Table& T) {
  static_assert(std::endian::native == std::endian::little, "the .npy writer assumes little endian");
  std::size_t width = 1;
  for (std::int32_t s : T.status) width = std::max(width, status_name(static_cast<Status>(s)).size());
  std::string descr = "[";
  auto field = [&](const std::string& name, const std::string& type) {
    descr += "('" + name + "', '" + type + "'), ";
  };
  for (std::size_t k = 0; k <= T.cols.size(); ++k) {
    if (k == T.status_at) field("status", "|S" + std::to_string(width));
    if (k < T.cols.size()) field(T.cols[k].name, T.cols[k].integer ? "<i8" : "<f8");
  }
  descr += "]";
  std::string header = "{'descr': " + descr + ", 'fortran_order': False, 'shape': (" +
                       std::to_string(T.status.size()) + ",), }";
  const std::size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  const std::uint16_t hlen = static_cast<std::uint16_t>(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(reinterpret_cast<const char*>(&hlen), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::vector<char> row;
  for (std::size_t r = 0; r < T.status.size(); ++r) {
    row.clear();
    for (std::size_t k = 0; k <= T.cols.size(); ++k) {
      if (k == T.status_at) {
        std::string s = status_name(static_cast<Status>(T.status[r]));
        s.resize(width, '\0');
        row.insert(row.end(), s.begin(), s.end());
      }
      if (k < T.cols.size()) {
        char b[8];
        if (T.cols[k].integer) std::memcpy(b, &T.cols[k].i[r], 8);
        else std::memcpy(b, &T.cols[k].d[r], 8);
        row.insert(row.end(), b, b + 8);
      }
    }
    f.write(row.data(), static_cast<std::streamsize>(row.size()));
  }
}

void write_csv(std::ofstream& f, const Table& T) {
  // Cells joined by commas, the status column at T.status_at.
  auto row = [&](auto&& status_cell, auto&& cell) {
    for (std::size_t k = 0; k <= T.cols.size(); ++k) {
      if (k == T.status_at) {
        if (k) f << ',';
        status_cell();
      }
      if (k < T.cols.size()) {
        if (k) f << ',';
        cell(T.cols[k]);
      }
    }
    f << '\n';
  };
  row([&] { f << "status"; }, [&](const Column& col) { f << col.name; });
  for (std::size_t r = 0; r < T.status.size(); ++r)
    row([&] { f << status_name(static_cast<Status>(T.status[r])); },
        [&](const Column& col) {
          if (col.integer) f << col.i[r];
          else f << g17(col.d[r]);
        });
}

}  // namespace

Config resume_config(const std::string& dir) {
  const fs::path file = fs::path(dir) / checkpoint_name;
  if (!fs::exists(file))
    throw ConfigError("--resume: '" + dir + "' holds no checkpoint (" + checkpoint_name +
                      "): nothing to resume; a completed run removes its checkpoint");
  const CheckpointHeader k = read_checkpoint(file).header;
  check_version(file, k);
  Config c = parse_config(k.config_text, k.config_path + " (as stored in " + file.string() + ")");
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

Outcome execute(const Config& c, const ExecuteOptions& o) {
  const auto start = Clock::now();
  const ModelInfo& M = *c.model;
  const int n = M.n, np = static_cast<int>(M.params.size());
  const bool natural_out = !M.initial_names.empty();

  if (c.backend == Backend::cuda) {
    std::string why;
    if (cuda::device_count(&why) == 0)
      throw ConfigError(c.path + ": key 'backend': cuda is not available here (" + why +
                        "); expected reference or cpu");
  }
  const std::string dir = !o.out_dir.empty() ? o.out_dir : !c.out_dir.empty() ? c.out_dir : "ukb-run";
  Output out(dir, !o.out_dir.empty() ? "--out" : c.path + ": key 'output.dir'");

  // The table is held in memory: refuse a run that cannot fit before work starts.
  {
    const double columns = 14.0 + 3.0 * n + static_cast<double>(c.inputs().size() + M.initial_names.size());
    const double need = columns * 8.0 * static_cast<double>(c.samples);
    const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    if (have > 0 && need > 0.8 * have)
      throw ConfigError(c.path + ": key 'samples': " + std::to_string(c.samples) + " samples need about " +
                        g17(std::ceil(need / 1e9)) + " GB for the results table, more than this machine's memory (" +
                        g17(std::floor(have / 1e9)) + " GB); expected fewer samples (split the run by seed)");
  }

  // Every initial state is checked before any work starts.
  {
    std::vector<double> p(static_cast<std::size_t>(np)), q(static_cast<std::size_t>(n)),
        qd(static_cast<std::size_t>(n));
    for (long i = 0; i < c.samples; ++i)
      initial_state(c, i, draw_inputs(c, static_cast<std::uint64_t>(i)), p.data(), q.data(), qd.data());
  }

  // The table's columns.
  Table T;
  const std::size_t S = static_cast<std::size_t>(c.samples);
  T.add("sample", true, S);
  const std::vector<const Input*> inputs = c.inputs();
  std::vector<std::size_t> varying;  // canonical indices of the varying inputs
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k]->dist.kind != Dist::Kind::fixed) {
      varying.push_back(k);
      T.add(inputs[k]->name, false, S).input = true;
    }
  T.status_at = T.cols.size();
  T.status.reserve(S);
  const std::size_t c_t = T.cols.size();
  T.add("t_final", false, S);
  for (int j = 0; j < n; ++j) T.add("q_" + M.coords[std::size_t(j)] + "_final", false, S);
  for (int j = 0; j < n; ++j) T.add("qd_" + M.coords[std::size_t(j)] + "_final", false, S);
  if (natural_out)
    for (const std::string& nm : M.initial_names) T.add(nm + "_final", false, S);
  const std::size_t c_stop = T.cols.size();
  T.add("t_stop", false, S);
  T.add("steps", true, S);
  T.add("events", true, S);
  T.add("rank_drops", true, S);
  T.add("inconsistent", true, S);
  const std::size_t c_energy = T.cols.size();
  if (M.has_potential) {
    T.add("energy_start", false, S);
    T.add("energy_end", false, S);
    T.add("energy_dissipated", false, S);
  }
  const std::size_t c_res = T.cols.size();
  if (M.has_residual && c.run.monitor) {
    T.add("res_pos_max", false, S);
    T.add("res_vel_max", false, S);
  }
  const bool projecting = c.run.stabilization == Stabilization::projection;
  const std::size_t c_proj = T.cols.size();
  if (projecting) T.add("projection_failures", true, S);

  // A checkpoint: continue from it (--resume), or refuse to overwrite it.
  const fs::path ckpt_file = fs::path(dir) / checkpoint_name;
  const std::string identity = config_identity(c.to_json());
  double system_steps = 0;
  long done = 0;
  if (o.resume) {
    Checkpoint k = read_checkpoint(ckpt_file);
    const CheckpointHeader& h = k.header;
    check_version(ckpt_file, h);
    const std::string diff = identity_difference(h.identity, identity);
    if (!diff.empty())
      throw ConfigError(ckpt_file.string() + ": the checkpoint belongs to another config (" + diff +
                        "); resume with the same config and backend, or start the run again elsewhere");
    bool same_cols = k.cols.size() == T.cols.size() && h.samples == c.samples &&
                     k.status.size() == static_cast<std::size_t>(h.done);
    for (std::size_t j = 0; same_cols && j < T.cols.size(); ++j)
      same_cols = k.cols[j].name == T.cols[j].name && k.cols[j].integer == T.cols[j].integer;
    if (!same_cols) throw ConfigError(ckpt_file.string() + ": the checkpoint's columns do not match this run's");
    // The checkpoint's columns become the table's (one copy in memory).
    for (std::size_t j = 0; j < T.cols.size(); ++j) {
      T.cols[j].d = std::move(k.cols[j].d);
      T.cols[j].i = std::move(k.cols[j].i);
      T.cols[j].integer ? T.cols[j].i.reserve(S) : T.cols[j].d.reserve(S);
    }
    T.status = std::move(k.status);
    T.status.reserve(S);
    done = h.done;
    system_steps = h.system_steps;
    out.keep();
  } else if (fs::exists(ckpt_file)) {
    throw ConfigError((!o.out_dir.empty() ? std::string("--out") : c.path + ": key 'output.dir'") + ": '" + dir +
                      "' holds the checkpoint of an unfinished run; continue it with `ukb run --resume " + dir +
                      "`, or delete " + ckpt_file.string() + " to start again");
  }
  auto save = [&] {
    CheckpointHeader h;
    h.version = ukb::version;
    h.config_text = c.text;
    h.config_path = c.path;
    h.identity = identity;
    h.samples = c.samples;
    h.done = done;
    h.system_steps = system_steps;
    write_checkpoint(ckpt_file, h, T.cols, T.status);
    out.keep();
    out.remove_stale();
  };

  const EngineOptions eo{.threads = c.threads, .rank_rtol = c.rank_rtol};
  Progress progress(o.progress, c.samples, done, system_steps);
  auto last_save = Clock::now();
  std::vector<double> nat(M.initial_names.size());
  for (long first = done; first < c.samples; first += c.chunk) {
    const long count = std::min(c.chunk, c.samples - first);
    std::vector<long> ids(static_cast<std::size_t>(count));
    for (long s = 0; s < count; ++s) ids[std::size_t(s)] = first + s;
    EnsembleChunk ch;
    fill(c, ch, ids);
    std::vector<double> e0(static_cast<std::size_t>(count));
    for (int s = 0; s < ch.N; ++s) {
      const Sys y(ch, s, n, np);
      e0[std::size_t(s)] = M.energy(y.p, y.q.data(), y.qd.data(), c.t0);
    }
    // Budgets of about 4e6 system-steps per call keep the progress line lively.
    const long budget = std::max(16L, 4000000L / count);
    for (;;) {
      std::int64_t before = 0, after = 0;
      for (std::int64_t k : ch.steps) before += k;
      const long active = M.advance(ch, c.backend, c.run, budget, eo);
      for (std::int64_t k : ch.steps) after += k;
      system_steps += static_cast<double>(after - before);
      progress.update(done + count - active, system_steps);
      if (active == 0) break;
      if (after == before)  // no system can move any more (config checks make this unreachable)
        throw std::runtime_error("the run makes no progress (dt too small for t?)");
    }
    done += count;
    for (int s = 0; s < ch.N; ++s) {
      const std::size_t us = std::size_t(s);
      const Sys y(ch, s, n, np);
      T.cols[0].i.push_back(first + s);
      if (!varying.empty()) {
        const std::vector<double> in = draw_inputs(c, static_cast<std::uint64_t>(first + s));
        for (std::size_t v = 0; v < varying.size(); ++v) T.cols[1 + v].d.push_back(in[varying[v]]);
      }
      T.status.push_back(ch.status[us]);
      std::size_t k = c_t;
      T.cols[k++].d.push_back(ch.t[us]);
      for (int j = 0; j < n; ++j) T.cols[k++].d.push_back(y.q[std::size_t(j)]);
      for (int j = 0; j < n; ++j) T.cols[k++].d.push_back(y.qd[std::size_t(j)]);
      if (natural_out) {
        M.natural_state(y.p, y.q.data(), y.qd.data(), nat.data());
        for (double x : nat) T.cols[k++].d.push_back(x);
      }
      T.cols[c_stop].d.push_back(ch.t_stop[us]);
      T.cols[c_stop + 1].i.push_back(ch.steps[us]);
      T.cols[c_stop + 2].i.push_back(ch.events[us]);
      T.cols[c_stop + 3].i.push_back(ch.rank_drops[us]);
      T.cols[c_stop + 4].i.push_back(ch.inconsistent[us]);
      if (M.has_potential) {
        const double e1 = M.energy(y.p, y.q.data(), y.qd.data(), ch.t[us]);
        T.cols[c_energy].d.push_back(e0[us]);
        T.cols[c_energy + 1].d.push_back(e1);
        T.cols[c_energy + 2].d.push_back(e0[us] - e1);
      }
      if (M.has_residual && c.run.monitor) {
        T.cols[c_res].d.push_back(ch.res_pos[us]);
        T.cols[c_res + 1].d.push_back(ch.res_vel[us]);
      }
      if (projecting) T.cols[c_proj].i.push_back(ch.proj_fails[us]);
    }
    if (o.after_chunk) o.after_chunk(done);
    if (done == c.samples) break;
    const bool stop = o.stop && o.stop->load() != 0;
    if (stop || std::chrono::duration<double>(Clock::now() - last_save).count() >= c.checkpoint_interval) {
      save();
      last_save = Clock::now();
    }
    if (stop) {
      progress.update(done, system_steps, true);
      Outcome r;
      r.interrupted = true;
      r.done = done;
      r.samples = c.samples;
      r.checkpoint = ckpt_file.string();
      r.out_dir = dir;
      r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
      return r;
    }
  }
  progress.update(done, system_steps, true);

  // Recorded trajectories: the recorded samples again, in calls of
  // record_every steps (splitting a run into calls does not change it).
  if (!c.record.empty()) {
    std::ofstream f = out.open("trajectories.csv");
    f << "sample,t,status";
    for (int j = 0; j < n; ++j) f << ",q_" << M.coords[std::size_t(j)];
    for (int j = 0; j < n; ++j) f << ",qd_" << M.coords[std::size_t(j)];
    if (natural_out)
      for (const std::string& nm : M.initial_names) f << ',' << nm;
    if (M.has_potential) f << ",energy";
    f << '\n';
    EnsembleChunk ch;
    fill(c, ch, c.record);
    kernels::RunSettings<double> settings;
    settings.dt = c.run.dt, settings.t_end = c.run.t_end, settings.max_steps = c.run.max_steps;
    std::vector<bool> live(c.record.size(), true);
    auto rows = [&] {
      for (int s = 0; s < ch.N; ++s) {
        if (!live[std::size_t(s)]) continue;
        const Sys y(ch, s, n, np);
        // A system still on its way is "running"; otherwise its final status.
        const std::size_t us = std::size_t(s);
        const bool running = kernels::run_active(ch.status[us], ch.t[us], ch.steps[us], settings);
        f << c.record[us] << ',' << g17(ch.t[us]) << ','
          << (running ? std::string("running") : status_name(static_cast<Status>(ch.status[us])));
        for (double x : y.q) f << ',' << g17(x);
        for (double x : y.qd) f << ',' << g17(x);
        if (natural_out) {
          M.natural_state(y.p, y.q.data(), y.qd.data(), nat.data());
          for (double x : nat) f << ',' << g17(x);
        }
        if (M.has_potential) f << ',' << g17(M.energy(y.p, y.q.data(), y.qd.data(), ch.t[std::size_t(s)]));
        f << '\n';
      }
    };
    rows();
    // After each call, a row for every system the call changed.
    for (;;) {
      const std::vector<std::int64_t> steps0 = ch.steps;
      const std::vector<double> t0 = ch.t;
      const std::vector<std::int32_t> status0 = ch.status;
      const long active = M.advance(ch, c.backend, c.run, c.record_every, eo);
      bool moved = false;
      for (std::size_t s = 0; s < live.size(); ++s) {
        live[s] = ch.steps[s] != steps0[s] || ch.t[s] != t0[s] || ch.status[s] != status0[s];
        moved = moved || live[s];
      }
      rows();
      if (active == 0) break;
      if (!moved) throw std::runtime_error("the recorded run makes no progress (dt too small for t?)");
    }
    out.close(f, "trajectories.csv");
  }

  if (c.write_csv) {
    std::ofstream f = out.open("results.csv");
    write_csv(f, T);
    out.close(f, "results.csv");
  }
  if (c.write_npy) {
    std::ofstream f = out.open("results.npy");
    write_npy(f, T);
    out.close(f, "results.npy");
  }

  Outcome result;
  result.samples = c.samples;
  result.done = c.samples;
  std::map<std::int32_t, std::vector<std::size_t>> by_status;
  std::vector<std::size_t> ok_rows;
  for (std::size_t r = 0; r < T.status.size(); ++r) {
    by_status[T.status[r]].push_back(r);
    const Status s = static_cast<Status>(T.status[r]);
    if (s == Status::ok || s == Status::at_rest) ok_rows.push_back(r);
  }
  nlohmann::json sum;
  sum["samples"] = c.samples;
  sum["status_counts"] = nlohmann::json::object();
  for (const auto& [s, rows] : by_status) {
    sum["status_counts"][status_name(static_cast<Status>(s))] = rows.size();
    result.status_counts[status_name(static_cast<Status>(s))] = static_cast<long>(rows.size());
  }
  sum["statistics"] =
      "over the finite values of each observable; 'successful' takes the samples whose status is "
      "finished or at_rest, 'by_status' each status on its own (failed samples report their last "
      "good state); std has the n - 1 denominator; quantiles interpolate linearly between order "
      "statistics; histograms have equal bins over [min, max]";
  for (const Column& col : T.cols) {
    if (col.name == "sample" || col.input) continue;
    std::vector<double> v = col.d;
    if (col.integer) v.assign(col.i.begin(), col.i.end());
    nlohmann::json& o2 = sum["observables"][col.name];
    o2["successful"] = stats(v, ok_rows, c.histogram_bins);
    bool headline = col.name == "t_stop";
    for (const std::string& nm : M.initial_names) headline = headline || col.name == nm + "_final";
    if (headline && o2["successful"].contains("quantiles"))
      result.medians.emplace_back(col.name, o2["successful"]["quantiles"]["p50"].get<double>());
    for (const auto& [s, rows] : by_status)
      o2["by_status"][status_name(static_cast<Status>(s))] = stats(v, rows, c.histogram_bins);
  }
  {
    std::ofstream f = out.open("summary.json");
    f << sum.dump(2) << '\n';
    out.close(f, "summary.json");
  }

  result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  {
    nlohmann::json r;
    r["config"] = nlohmann::json::parse(c.to_json());
    r["version"] = ukb::version;
    r["backend"] = std::string(to_string(c.backend));
    r["threads"] = c.backend == Backend::cpu ? (c.threads > 0 ? c.threads : omp_get_max_threads()) : 1;
    r["seed"] = c.seed;
    r["samples"] = c.samples;
    r["status_counts"] = sum["status_counts"];
    r["wall_seconds"] = result.wall_s;
    r["system_steps"] = system_steps;
    std::ofstream f = out.open("run.json");
    f << r.dump(2) << '\n';
    out.close(f, "run.json");
  }
  out.commit();
  result.out_dir = dir;
  return result;
}

}  // namespace ukb::run
