/// @file run.hpp
/// @brief Monte Carlo ensembles (`ukb run`): the config, reproducible
///        sampling of the inputs, and the run that writes per-sample
///        results, statistics and trajectories.
///
/// ```cpp
/// ukb::run::Config c = ukb::run::load_config("examples/ring_friction.toml");
/// ukb::run::Outcome o = ukb::run::execute(c, {.out_dir = "out"});
/// ```
/// The config format, the outputs and the statuses are documented in the
/// docs/config.md.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ukb/options.hpp"
#include "ukb/registry.hpp"
#include "ukb/status.hpp"

namespace ukb::run {

struct Results;  // crosscheck.hpp
class Cluster;   // the ranks of a distributed run (`mpirun -n P ukb run`), internal

/// Bad input (config file, option, output directory): the message names the
/// file, the key and what was expected. `ukb run` exits with code 2.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An output could not be written although its path was good (a full disk,
/// a quota, a device error): the message names the file and the cause, and
/// where the run's checkpoint holds its work, how to continue. `ukb` exits
/// with code 4.
struct WriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// How one input (a parameter or an initial quantity) is chosen per sample.
struct Dist {
  enum class Kind { fixed, uniform, normal, lognormal, values, grid };
  Kind kind = Kind::fixed;
  double a = 0;  ///< fixed: the value; uniform, grid: min; normal: mean; lognormal: mean of log
  double b = 0;  ///< uniform, grid: max; normal: sd; lognormal: sd of log
  double lo = -std::numeric_limits<double>::infinity();  ///< normal: truncation below
  double hi = std::numeric_limits<double>::infinity();   ///< normal: truncation above
  std::vector<double> list;  ///< values
  long count = 0;            ///< grid: number of points (>= 2; min and max included)

  /// A sweep axis (values, grid): samples walk through its points.
  bool is_axis() const { return kind == Kind::values || kind == Kind::grid; }
  /// Drawn at random (uniform, normal, lognormal): a dimension of the
  /// sampling designs and of [sensitivity].
  bool is_random() const { return kind != Kind::fixed && !is_axis(); }
  /// Number of points of an axis.
  long axis_size() const;
  /// Point k of an axis.
  double axis_point(long k) const;
};

/// One named input of the model.
struct Input {
  std::string name;  ///< parameter name, natural quantity, or q_<coord> / qd_<coord>
  Dist dist;
};

/// The most samples for which results.csv is written where `[output]
/// formats` is not given (about 29 MB of text for the ring; npy is always
/// written by default).
inline constexpr long csv_default_samples = 100000;

/// How the random inputs of the samples are placed (config key `sampling`,
/// docs/config.md "Sampling designs"): independent Philox draws, a
/// scrambled Sobol sequence, or a Latin hypercube. Sweep axes (values,
/// grid) are walked the same way by every design.
enum class Sampling { random, sobol, lhs };

/// The name of a design in configs ("random", "sobol", "lhs").
const char* to_string(Sampling s);

/// The dimensions of the Sobol sequence (Joe and Kuo's new-joe-kuo-6.21201,
/// the first ones): at most this many random inputs with sampling = "sobol".
int sobol_dimensions();

/// Point `index` (< 2^52) of the unscrambled Sobol sequence in dimension
/// `dim` (< sobol_dimensions()) as a 52-bit integer: the point is it times
/// 2^-52. The points in the order of scipy.stats.qmc.Sobol (Antonov and
/// Saleev's Gray-code order), point 0 at the origin.
std::uint64_t sobol_bits(std::uint64_t index, int dim);

/// Owen's nested uniform scramble of a 52-bit point x, for the random
/// scramble `key` (each key its own scramble): bit l from the top (l < 32)
/// is flipped or not by a hash of (key, l, the l bits above it), and the 20
/// bits below the top 32 by a hash of (key, the top 32 bits). A scrambled
/// (t, m, s)-net is again a (t, m, s)-net.
std::uint64_t owen_scramble(std::uint64_t x, std::uint64_t key);

/// The point in (0, 1) that sampling = "sobol" gives dimension `dim` of
/// point `index` of replicate `replicate` in a run with `seed`: the Sobol
/// point Owen-scrambled for (seed, replicate, dim), at the middle of its
/// cell of 2^-52.
double sobol_unit(std::uint64_t seed, std::uint64_t replicate, std::uint64_t index, int dim);

/// [stop]: add samples until a statistic's interval is narrow enough
/// (docs/config.md, "Stopping at a precision"): the statistic is checked
/// over the first `first`, 2 `first`, 4 `first`, ... samples and at
/// `samples`; the run ends at the first check where its half-width meets
/// the target.
struct StopRule {
  std::string statistic;     ///< as written: "mean(theta_final)", "p95(t_stop)", "median(x)"
  std::string column;        ///< the results column
  int percent = -1;          ///< -1: the mean; else the quantile p<percent>
  double halfwidth = 0;      ///< the absolute target (> 0), or 0
  double rel_halfwidth = 0;  ///< the target relative to |statistic| (> 0), or 0
  long first = 0;            ///< the first check
};

/// A resolved `ukb run` config (docs/config.md has every key).
struct Config {
  std::string path;                 ///< the file, for messages
  const ModelInfo* model = nullptr;
  /// The model file (model_file.hpp) the model comes from, "path[:Name]"
  /// with the path absolute; "" for a built-in model or the program's own.
  std::string model_file;
  std::string model_hash;           ///< the model file's content hash (ModelFile::content_hash)
  long samples = 0;
  std::uint64_t seed = 0;
  Backend backend = Backend::cpu;
  int threads = 0;                  ///< 0: all cores
  Sampling sampling = Sampling::random;  ///< the design of the random inputs
  /// sobol, lhs: independent replicates of the design (sample i of each
  /// sweep point belongs to replicate i mod replicates); 0 for random.
  long replicates = 0;
  /// [sensitivity] outputs: the results columns whose Sobol indices over
  /// the random inputs summary.json reports (docs/config.md, "Sensitivity
  /// indices"); empty: none, and the samples are placed as `sampling` says.
  /// Given: sample i is row i mod (d + 2) of base point i / (d + 2), d the
  /// random inputs (A, B, then A with input j from B).
  std::vector<std::string> sensitivity;
  /// [stop]; unset: every sample of `samples` is run.
  std::optional<StopRule> stop;
  RunOptions run;                   ///< [integrator] and [stabilization]
  long chunk = 0;                   ///< samples integrated together; 0: default_chunk(backend)
  std::vector<Input> params;        ///< one per model parameter, model order
  bool raw_initial = false;         ///< q / qd given instead of the natural quantities
  std::vector<Input> initial;       ///< natural quantities, or q_<c>... then qd_<c>...
  double initial_tol = 1e-9;        ///< raw initial states: admissible constraint residual
  double t0 = 0;                    ///< initial time
  std::vector<long> record;         ///< samples whose trajectories are written
  long record_every = 100;          ///< trajectory row every this many steps
  double record_dt = 0;             ///< dopri5: a trajectory row at t0 + k record_dt (dense output); 0: record_every
  int histogram_bins = 50;          ///< bins of each histogram in summary.json
  double confidence = 0.95;         ///< the level of the intervals in summary.json ([output] confidence)
  /// results.csv ([output] formats; by default up to csv_default_samples
  /// samples: above that the text table would cost more than the rest of a
  /// run's outputs together, see docs/outputs.md)
  bool write_csv = true;
  bool write_npy = true;            ///< results.npy ([output] formats)
  bool formats_given = false;       ///< [output] formats is in the config (else the default above)
  std::string out_dir;              ///< [output] dir (the --out option overrides it)
  double checkpoint_interval = 60;  ///< seconds between checkpoints (0: every chunk; inf: none but after a failure)
  std::string text;                 ///< the config file's text (kept in checkpoints)
  /// The directory a model file named by the config is relative to, made
  /// absolute when the config was read (kept in checkpoints: --resume finds
  /// the file from any working directory).
  std::string source_dir;

  /// Every input in canonical order: params, then initial.
  std::vector<const Input*> inputs() const;
  /// How many inputs are drawn at random (Dist::is_random).
  long random_inputs() const;
  /// The config key of input k of inputs(): "params.mu", "initial.theta",
  /// or for a raw initial state "initial.q[j]" / "initial.qd[j]".
  std::string input_key(std::size_t k) const;
  /// The resolved config as JSON text (written to run.json).
  std::string to_json() const;
};

/// Where a config's text comes from, besides the text.
struct ConfigSource {
  std::string path;  ///< the file, for messages
  /// A model file named by the config (`model = "sleigh.hpp"`) is relative
  /// to this directory; "" : the directory of `path`.
  std::string dir;
  /// A model of the program's own (ukb/run_model.hpp), run whatever the
  /// config's `model` key says, as long as it names this model or a file.
  const ModelInfo* model = nullptr;
  /// Whether a model file may be compiled and loaded (false: refused).
  bool model_files = true;
};

/// Parses and validates a config file. Throws ConfigError.
Config load_config(const std::string& path);
/// The same, for a model of the program's own (ConfigSource::model).
Config load_config(const std::string& path, const ModelInfo& model);
/// Parses and validates config text; `path` is used in messages only.
Config parse_config(const std::string& text, const std::string& path);
/// Parses and validates config text from a source.
Config parse_config(const std::string& text, const ConfigSource& source);

/// Philox4x32-10 uniform on (0, 1) with 53 random bits, for stream
/// (seed, sample, quantity, block): word pair `half` (0 or 1) of the block.
double uniform01(std::uint64_t seed, std::uint64_t sample, std::uint32_t quantity,
                 std::uint32_t block, int half);

/// The value of input number `quantity` (canonical order) for sample i
/// with sampling = "random": a function of (seed, i, the input's
/// distribution, its quantity index and, for sweep axes, i's position in
/// the sweep) only. `axis_index` is the point of the sweep for axis inputs,
/// ignored otherwise.
double draw(const Dist& d, std::uint64_t seed, std::uint64_t sample, std::uint32_t quantity,
            long axis_index);

/// The standard normal distribution's quantile at p in (0, 1), within an
/// ulp or two (Acklam's approximation and one Halley step on erfc).
double normal_quantile(double p);

/// Student's t distribution's quantile at p in [0.5, 1) for `dof` >= 1
/// degrees of freedom: closed forms for 1 and 2; else the Cornish–Fisher
/// expansion about the normal quantile (Abramowitz and Stegun 26.7.5)
/// refined by Newton's method on the exact CDF (A&S 26.7.3-4) up to 1000
/// degrees of freedom.
double t_quantile(double p, long dof);

/// The value of distribution d (not fixed, not an axis) at the point u of
/// (0, 1): its inverse cumulative distribution function (a normal
/// truncated to [min, max] by the inverse of the truncated one), as the
/// designs other than random place the inputs.
double from_unit(const Dist& d, double u);

/// Every input of sample i, canonical order, by the config's design.
std::vector<double> draw_inputs(const Config& c, std::uint64_t sample);
/// The same into out (in.size() values), `in` being c.inputs(): without
/// an allocation, for a loop over many samples.
void draw_inputs(const Config& c, const std::vector<const Input*>& in, std::uint64_t sample, double* out);

/// What execute does besides the config.
struct ExecuteOptions {
  std::string out_dir;   ///< the output directory (created; "" : the config's)
  bool progress = false; ///< a progress line on stderr
  /// Continue the run whose checkpoint is in the output directory (it must
  /// match the config: see `resume_config`); otherwise an output directory
  /// holding a checkpoint is refused.
  bool resume = false;
  /// When *stop becomes nonzero (e.g. set by a SIGINT handler: a lock-free
  /// atomic may be written from a signal handler on any thread): the current
  /// chunk is finished, a checkpoint written, and execute returns with
  /// Outcome::interrupted. Checked after every chunk, and while the
  /// recorded samples run (output.record; in one process) after every call
  /// of record_every steps: a stop there keeps the samples done before (they
  /// run again on resume). A stop request during the last chunk or while the
  /// outputs are written is ignored (the run completes).
  const std::atomic<int>* stop = nullptr;
  /// Called after every chunk with the number of samples done (tests use it
  /// to interrupt a run at a chosen point).
  std::function<void(long done)> after_chunk = {};
  /// The cpu backend's SIMD lanes (EngineOptions::simd); false: one sample
  /// at a time. The results are the same bit for bit (tests compare them).
  bool simd = true;
  /// Cross-check (`ukb run --crosscheck BACKEND`, crosscheck.hpp): once the
  /// run is complete, `crosscheck_samples` of its samples (crosscheck_subset)
  /// are integrated again on this backend and compared with the run's
  /// results (compare_results); the report goes to crosscheck.json and
  /// Outcome. Unset: no cross-check. It must differ from the run's backend.
  std::optional<Backend> crosscheck = std::nullopt;
  long crosscheck_samples = 256;  ///< K, in [1, 1e6]
  /// For tests of the cross-check (and of a CI step that uses it): called
  /// with the other backend's results before they are compared, to plant
  /// an error.
  std::function<void(Results& other)> crosscheck_tamper = {};
  /// The ranks of a distributed run (`mpirun -n P ukb run`, docs/cluster.md),
  /// set by the `ukb` executable when MPI launched it; every
  /// rank calls execute, rank 0 writes the files, which are those of one
  /// process. Null: one process.
  Cluster* cluster = nullptr;
};

/// Counts of a finished (or interrupted) run.
struct Outcome {
  bool interrupted = false;  ///< stopped early: only the checkpoint was written
  long done = 0;             ///< samples done (== samples unless interrupted)
  std::string checkpoint;    ///< the checkpoint file of an interrupted run
  long samples = 0;
  std::map<std::string, long> status_counts;  ///< by status name (ok is "finished")
  double wall_s = 0;
  std::string out_dir;
  /// Medians over the successful samples of t_stop and of the natural final
  /// quantities (e.g. theta_final), where any are finite.
  std::vector<std::pair<std::string, double>> medians;
  /// The interval of each median at the config's `[output] confidence`
  /// (summary.json's quantile_intervals p50), in the order of `medians`;
  /// NaN for a side there is none.
  std::vector<std::array<double, 2>> median_intervals;
  /// With [sensitivity]: a line per output giving each input's first-order
  /// and total Sobol index with its interval (summary.json's sensitivity).
  std::vector<std::string> sensitivity;
  /// With [stop]: whether its target was met (the run ended at that
  /// check), and a line saying so for stdout (summary.json's stop).
  bool stop_met = false;
  std::string stop_report;
  /// The largest res_pos_max and res_vel_max over every sample, whatever
  /// its status (model units; infinity where one overflowed; NaN where the
  /// run has no such column or every value is NaN): how far the
  /// integration drifted off the constraints.
  double res_pos_max = std::numeric_limits<double>::quiet_NaN();
  double res_vel_max = std::numeric_limits<double>::quiet_NaN();
  /// Samples with an inconsistent step (column inconsistent > 0: q'' was a
  /// least-squares compromise there) and with a projection that did not
  /// converge (projection_failures > 0).
  long inconsistent_samples = 0;
  long projection_failure_samples = 0;
  bool crosschecked = false;       ///< a cross-check ran (ExecuteOptions::crosscheck)
  bool crosscheck_pass = true;     ///< ... and every column was within its tolerance
  std::string crosscheck_verdict;  ///< its one-line verdict (CrosscheckReport::verdict)
};

/// The warnings of a completed run, one sentence each, none where all is
/// well: the samples with inconsistent steps and with projection failures
/// (`ukb run` prints them on stderr, ukb.run raises RuntimeWarnings).
std::vector<std::string> warnings(const Outcome& o);

/// The options of the `[integrator]` and `[stabilization]` tables as the
/// Markdown table of docs/config.md (generated from ukb/options.hpp's
/// table of run options; a test keeps the docs equal to it).
std::string run_options_markdown();

/// The samples integrated together where the config gives no
/// `integrator.chunk`: 65536 on the cpu and reference backends (progress
/// and Ctrl-C granularity at a few MB), 2^20 on cuda, so that a chunk fills
/// the device many times over. An H100 runs about 3.4e4 threads of today's
/// integration kernels at once (132 SMs, 8 warps each at their 190-255
/// registers per thread): 65536 systems were two such waves, and a launch
/// lasts as long as its slowest systems while most of the device idles;
/// 2^20 are about 30 waves, with a sixteenth of the launches and host round
/// trips. In a distributed run (ExecuteOptions::cluster) without
/// `integrator.chunk`, the chunk is at most samples / (4 ranks), rounded
/// up, so that every rank gets four blocks or more.
long default_chunk(Backend b);

/// Runs the ensemble and writes results.csv, results.npy, summary.json,
/// trajectories.csv (when samples are recorded) and run.json into the
/// output directory, each under a temporary name renamed when complete.
/// Throws ConfigError before any work for bad input (inconsistent initial
/// states, unwritable directory, a directory another run holds, not enough
/// memory); WriteError when an output or a checkpoint cannot be written (the
/// message says what was kept: the results are checkpointed before the
/// outputs are written, so `--resume` writes them again). On any error
/// nothing is left behind but the last checkpoint. Checkpoints (checkpoint.ukb) are written every
/// Config::checkpoint_interval seconds and on a stop request, and removed
/// when the run completes.
Outcome execute(const Config& c, const ExecuteOptions& o);

/// The config of the run whose checkpoint is in `dir` (for `ukb run
/// --resume DIR` without a config file): its stored text parsed again, with
/// the backend it ran on. Throws ConfigError for a missing, damaged or
/// foreign checkpoint, or one written by another ukb version.
Config resume_config(const std::string& dir);

/// The status name written to the outputs ("finished" for ok).
std::string status_name(Status s);

}  // namespace ukb::run
