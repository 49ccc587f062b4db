/// @file batch.hpp
/// @brief Structure-of-arrays storage for many systems of one model.
///
/// Component j of system i lives at `x[j * N + i]`: neighbouring systems
/// (GPU threads, SIMD lanes) touch neighbouring addresses. `BatchView` is
/// the plain struct of pointers that kernels receive by value; `Batch` owns
/// host memory and fills and reads systems one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ukb/config.hpp"
#include "ukb/model.hpp"
#include "ukb/status.hpp"

namespace ukb {

/// Non-owning view of a batch (all arrays SoA, N systems).
template <Model Mo>
struct BatchView {
  using T = typename Mo::Scalar;
  static constexpr int np = param_count<Mo>();
  int N = 0;
  T* q = nullptr;            ///< positions (n x N)
  T* qd = nullptr;           ///< velocities (n x N)
  T* t = nullptr;            ///< times (N)
  T* params = nullptr;       ///< parameters (np x N), in visit_params order
  std::int32_t* status = nullptr;  ///< Status of each system (N)
  // The outputs of `evaluate` (null until a batch is first evaluated:
  // integration never touches them).
  T* qdd = nullptr;          ///< last evaluated acceleration (n x N)
  T* Qc_ideal = nullptr;     ///< last evaluated ideal constraint force (n x N)
  T* Qc_nonideal = nullptr;  ///< last evaluated non-ideal constraint force (n x N)
  T* lambda = nullptr;       ///< last evaluated multipliers (m x N)
  std::int32_t* rank = nullptr;  ///< last evaluated rank of B (N)
  std::int64_t* steps = nullptr;   ///< accepted integration steps since set_state (N)
  std::int32_t* events = nullptr;  ///< located events since set_state (N)
  T* t_stop = nullptr;       ///< at_rest: the event time; failed_*: the last good time; else NaN (N)
  T* res_pos = nullptr;      ///< largest position-level constraint residual seen (N)
  T* res_vel = nullptr;      ///< largest velocity-level constraint residual seen (N)
  std::int64_t* rank_drops = nullptr;  ///< steps with an evaluation where rank(B) < m (N)
  std::int64_t* proj_fails = nullptr;  ///< steps whose projection did not converge (N)
  std::int64_t* inconsistent = nullptr;  ///< steps with an inconsistent evaluation (N)
};

/// Bytes a batch stores per system for integration: the state (2n + 1
/// scalars), the parameters (np), the run monitors (3 scalars: t_stop,
/// res_pos, res_vel), two 32-bit integers (status, events) and four 64-bit
/// counters (steps, rank_drops, proj_fails, inconsistent). Nothing else is
/// allocated, and nothing per step; the first `evaluate` adds
/// output_bytes_per_system().
template <Model Mo>
constexpr std::size_t bytes_per_system() {
  return sizeof(typename Mo::Scalar) * (2 * Mo::n + 4 + param_count<Mo>()) +
         2 * sizeof(std::int32_t) + 4 * sizeof(std::int64_t);
}

/// Bytes per system of the outputs of `evaluate` (q'', Qc_ideal,
/// Qc_nonideal: n scalars each; lambda: m; the rank: a 32-bit integer),
/// allocated when a batch is first evaluated.
template <Model Mo>
constexpr std::size_t output_bytes_per_system() {
  return sizeof(typename Mo::Scalar) * (3 * Mo::n + Mo::m) + sizeof(std::int32_t);
}

namespace detail {
template <class T>
struct ParamWriter {
  T* base;
  int N, i, k = 0;
  template <class F>
  UKB_HD void operator()(const char*, const F& field, const char*) {
    base[std::size_t(k++) * N + i] = field;
  }
};
template <class T>
struct ParamReader {
  const T* base;
  int N, i, k = 0;
  template <class F>
  UKB_HD void operator()(const char*, F& field, const char*) {
    field = base[std::size_t(k++) * N + i];
  }
};
}  // namespace detail

/// Gathers the parameters of system i from a view.
template <Model Mo>
UKB_HD typename Mo::Params load_params(const BatchView<Mo>& v, int i) {
  typename Mo::Params p{};
  Mo::visit_params(p, detail::ParamReader<typename Mo::Scalar>{v.params, v.N, i});
  return p;
}

/// Host-owned batch of N systems. Every system starts with the model's
/// default parameters, zero state and status ok.
template <Model Mo>
class Batch {
 public:
  using T = typename Mo::Scalar;
  using Params = typename Mo::Params;
  static constexpr int n = Mo::n, m = Mo::m, np = param_count<Mo>();

  explicit Batch(int N)
      : N_(N), q_(std::size_t(n) * N), qd_(std::size_t(n) * N), t_(N), params_(std::size_t(np) * N),
        status_(N, 0), steps_(N, 0), events_(N, 0), t_stop_(N, std::numeric_limits<T>::quiet_NaN()), res_pos_(N, T(0)),
        res_vel_(N, T(0)), rank_drops_(N, 0), proj_fails_(N, 0), inconsistent_(N, 0) {
    if (N < 1) throw std::invalid_argument("ukb::Batch: the number of systems must be >= 1");
    for (int i = 0; i < N; ++i) set_params(i, Params{});
  }

  int size() const { return N_; }

  /// Sets the parameters of system i.
  void set_params(int i, const Params& p) {
    Mo::visit_params(p, detail::ParamWriter<T>{params_.data(), N_, check(i)});
  }
  /// The parameters of system i.
  Params params(int i) const { return load_params<Mo>(view_const(), check(i)); }

  /// Sets the state of system i (q and qd: n values each), marks it ok and
  /// resets its run monitors (steps, events, t_stop, residuals, rank_drops,
  /// proj_fails, inconsistent).
  void set_state(int i, const T* q, const T* qd, T t = T(0)) {
    check(i);
    for (int j = 0; j < n; ++j) {
      q_[std::size_t(j) * N_ + i] = q[j];
      qd_[std::size_t(j) * N_ + i] = qd[j];
    }
    t_[i] = t;
    status_[i] = static_cast<std::int32_t>(Status::ok);
    steps_[i] = 0;
    events_[i] = 0;
    t_stop_[i] = std::numeric_limits<T>::quiet_NaN();
    res_pos_[i] = res_vel_[i] = T(0);
    rank_drops_[i] = proj_fails_[i] = inconsistent_[i] = 0;
  }

  /// Component j of the position / velocity of system i, its time, status.
  T q(int i, int j) const { return q_[std::size_t(j) * N_ + check(i)]; }
  T qd(int i, int j) const { return qd_[std::size_t(j) * N_ + check(i)]; }
  T t(int i) const { return t_[check(i)]; }
  Status status(int i) const { return static_cast<Status>(status_[check(i)]); }

  /// Outputs of the last evaluation of system i (component j). Throws
  /// std::logic_error before the batch was first evaluated.
  T qdd(int i, int j) const { return evaluated(qdd_)[std::size_t(j) * N_ + check(i)]; }
  T Qc_ideal(int i, int j) const { return evaluated(Qc_ideal_)[std::size_t(j) * N_ + check(i)]; }
  T Qc_nonideal(int i, int j) const { return evaluated(Qc_nonideal_)[std::size_t(j) * N_ + check(i)]; }
  T lambda(int i, int j) const { return evaluated(lambda_)[std::size_t(j) * N_ + check(i)]; }
  int rank(int i) const { return evaluated(rank_)[check(i)]; }

  /// Allocates the outputs of `evaluate` (NaN, rank 0) if not done yet.
  /// `evaluate` calls it; a caller that hands view() to an evaluation
  /// kernel of its own calls it first.
  void allocate_outputs() {
    if (!rank_.empty()) return;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    qdd_.assign(std::size_t(n) * N_, nan);
    Qc_ideal_.assign(std::size_t(n) * N_, nan);
    Qc_nonideal_.assign(std::size_t(n) * N_, nan);
    lambda_.assign(std::size_t(m) * N_, nan);
    rank_.assign(std::size_t(N_), 0);
  }

  /// Run monitors of system i since its set_state: accepted steps, located
  /// events, t_stop (at_rest: the time it came to rest; failed_*: the time
  /// of its last good state, where the failing step began; else NaN), the largest
  /// position- and velocity-level constraint residuals seen (0 where not
  /// monitored: see RunOptions::monitor and the model's `residual`).
  std::int64_t steps(int i) const { return steps_[check(i)]; }
  int events(int i) const { return events_[check(i)]; }
  T t_stop(int i) const { return t_stop_[check(i)]; }
  T res_pos(int i) const { return res_pos_[check(i)]; }
  T res_vel(int i) const { return res_vel_[check(i)]; }
  /// Accepted steps of system i in which an evaluation found rank(B) < m
  /// (redundant or degenerate constraints), and steps whose projection did
  /// not converge (RunOptions::stabilization).
  std::int64_t rank_drops(int i) const { return rank_drops_[check(i)]; }
  std::int64_t proj_fails(int i) const { return proj_fails_[check(i)]; }
  /// Accepted steps of system i in which an evaluation was inconsistent:
  /// |A q'' - b| above kernels::consistency_rtol (the rows contradict each
  /// other; q'' is their least-squares compromise).
  std::int64_t inconsistent(int i) const { return inconsistent_[check(i)]; }

  /// The SoA view handed to backends (the outputs of `evaluate` are null
  /// until allocate_outputs).
  BatchView<Mo> view() {
    return {N_, q_.data(), qd_.data(), t_.data(), params_.data(), status_.data(),
            or_null(qdd_), or_null(Qc_ideal_), or_null(Qc_nonideal_), or_null(lambda_), or_null(rank_),
            steps_.data(), events_.data(), t_stop_.data(), res_pos_.data(), res_vel_.data(),
            rank_drops_.data(), proj_fails_.data(), inconsistent_.data()};
  }

 private:
  BatchView<Mo> view_const() const { return const_cast<Batch*>(this)->view(); }
  template <class V>
  static auto* or_null(V& v) {
    return v.empty() ? nullptr : v.data();
  }
  template <class V>
  const V& evaluated(const V& v) const {
    if (v.empty())
      throw std::logic_error("ukb::Batch: no evaluation outputs yet: call ukb::evaluate first");
    return v;
  }
  int check(int i) const {
    if (i < 0 || i >= N_)
      throw std::out_of_range("ukb::Batch: system " + std::to_string(i) + " outside [0, " +
                              std::to_string(N_) + ")");
    return i;
  }

  int N_;
  std::vector<T> q_, qd_, t_, params_;
  std::vector<std::int32_t> status_;
  std::vector<T> qdd_, Qc_ideal_, Qc_nonideal_, lambda_;
  std::vector<std::int32_t> rank_;
  std::vector<std::int64_t> steps_;
  std::vector<std::int32_t> events_;
  std::vector<T> t_stop_, res_pos_, res_vel_;
  std::vector<std::int64_t> rank_drops_, proj_fails_, inconsistent_;
};

}  // namespace ukb
