/// @file batch.hpp
/// @brief Structure-of-arrays storage for many systems of one model,
///        generated from the field table (fields.hpp).
///
/// Component j of system i of a field lives at `f[soa(j, i, N)] = f[j * N + i]`:
/// neighbouring systems (GPU threads, SIMD lanes) touch neighbouring
/// addresses. `BatchView` is the plain struct of pointers that backends
/// receive by value; `Batch` owns host memory and fills and reads systems
/// one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "ukb/config.hpp"
#include "ukb/fields.hpp"
#include "ukb/fresh_memory.hpp"
#include "ukb/model.hpp"
#include "ukb/status.hpp"

namespace ukb {

/// Non-owning view of a batch of N systems: one pointer per field of the
/// table (fields.hpp, which documents each), all structure of arrays. The
/// outputs of `evaluate` are null until a batch is first evaluated.
template <Model Mo>
struct BatchView {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m, np = param_count<Mo>(), dn = 10 * n + 2;
  int N = 0;
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) UKB_FIELD_TYPE(type, T)* name = nullptr;
  UKB_FIELDS(UKB_X)
#undef UKB_X

  /// Rows of a field (n, m, np or 1).
  static constexpr int rows(Field f) {
    switch (field_info(f).rows) {
      case 'n': return n;
      case 'm': return m;
      case 'p': return np;
      case 'd': return dn;
      default: return 1;
    }
  }

  /// Calls f(info, pointer) for every field, in table order (pointer typed
  /// as the field).
  template <class F>
  void for_each_field(F&& f) const {
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) f(field_info(Field::name), name);
    UKB_FIELDS(UKB_X)
#undef UKB_X
  }
};

/// Bytes a batch stores per system for integration: every field but the
/// outputs of `evaluate`, the monitors of adaptive steps and the dense
/// output (the state 2n + 1 scalars, the np parameters, the run monitors
/// and the status). Nothing else is allocated, and nothing per step; the
/// first `evaluate` adds output_bytes_per_system(), the first integration
/// with Method::dopri5 two scalars and two 64-bit counters, allocate_dense
/// 10 n + 2 scalars.
template <Model Mo>
constexpr std::size_t bytes_per_system() {
  using T = typename Mo::Scalar;
  [[maybe_unused]] constexpr int n = Mo::n, m = Mo::m, np = param_count<Mo>(), dn = 10 * n + 2;
  std::size_t b = 0;
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) \
  if (!UKB_FIELD_IS(role, output) && !UKB_FIELD_IS(role, dense) && !UKB_FIELD_IS(role, adaptive)) \
    b += sizeof(UKB_FIELD_TYPE(type, T)) * std::size_t(rows);
  UKB_FIELDS(UKB_X)
#undef UKB_X
  return b;
}

/// Bytes per system of the outputs of `evaluate` (q'', Qc_ideal,
/// Qc_nonideal: n scalars each; lambda: m; the rank), allocated when a
/// batch is first evaluated.
template <Model Mo>
constexpr std::size_t output_bytes_per_system() {
  using T = typename Mo::Scalar;
  [[maybe_unused]] constexpr int n = Mo::n, m = Mo::m, np = param_count<Mo>(), dn = 10 * n + 2;
  std::size_t b = 0;
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) \
  if (UKB_FIELD_IS(role, output)) b += sizeof(UKB_FIELD_TYPE(type, T)) * std::size_t(rows);
  UKB_FIELDS(UKB_X)
#undef UKB_X
  return b;
}

namespace detail {
template <class T>
struct ParamWriter {
  T* base;
  int N, i, k = 0;
  template <class F>
  UKB_HD void operator()(const char*, const F& field, const char*) {
    base[soa(k++, i, N)] = field;
  }
};
template <class T>
struct ParamReader {
  const T* base;
  int N, i, k = 0;
  template <class F>
  UKB_HD void operator()(const char*, F& field, const char*) {
    field = base[soa(k++, i, N)];
  }
};

/// The initial value of a field of type X (NaN or zero).
template <class X>
constexpr X field_init(bool nan) {
  if constexpr (std::numeric_limits<X>::has_quiet_NaN) return nan ? std::numeric_limits<X>::quiet_NaN() : X(0);
  return X(0);
}

/// A field's value as the accessors return it (the status as a Status).
template <Field F, class X>
constexpr auto field_value(X x) {
  if constexpr (F == Field::status) {
    return static_cast<Status>(x);
  } else {
    return x;
  }
}
}  // namespace detail

/// Gathers the parameters of system i from a view.
template <Model Mo>
UKB_HD typename Mo::Params load_params(const BatchView<Mo>& v, int i) {
  typename Mo::Params p{};
  Mo::visit_params(p, detail::ParamReader<typename Mo::Scalar>{v.params, v.N, i});
  return p;
}

/// One system's state and run monitors (the `state` and `monitor` fields of
/// the table) in local storage: what a backend's loop gathers from a view
/// before integrating the system and scatters back after. Members are named
/// as the fields; vector fields are arrays.
template <Model Mo>
struct SystemFields {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m, np = param_count<Mo>();
#define UKB_LOCAL_vec(name, type, rows) UKB_FIELD_TYPE(type, T) name[rows];
#define UKB_LOCAL_one(name, type, rows) UKB_FIELD_TYPE(type, T) name;
#define UKB_LOCAL_state(shape, name, type, rows) UKB_LOCAL_##shape(name, type, rows)
#define UKB_LOCAL_monitor(shape, name, type, rows) UKB_LOCAL_##shape(name, type, rows)
#define UKB_LOCAL_adaptive(shape, name, type, rows) UKB_LOCAL_##shape(name, type, rows)
#define UKB_LOCAL_param(shape, name, type, rows)
#define UKB_LOCAL_output(shape, name, type, rows)
#define UKB_LOCAL_dense(shape, name, type, rows)
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) UKB_LOCAL_##role(shape, name, type, rows)
  UKB_FIELDS(UKB_X)
#undef UKB_X

  /// Gathers system i of v (the monitors of adaptive steps: zero where v
  /// has none).
  UKB_HD void load(const BatchView<Mo>& v, int i) {
#define UKB_MOVE_vec(name, rows) \
  for (int j = 0; j < rows; ++j) name[j] = v.name[soa(j, i, v.N)];
#define UKB_MOVE_one(name, rows) name = v.name[i];
#define UKB_MOVE_state(shape, name, rows) UKB_MOVE_##shape(name, rows)
#define UKB_MOVE_monitor(shape, name, rows) UKB_MOVE_##shape(name, rows)
#define UKB_MOVE_adaptive(shape, name, rows) \
  if (v.name) {                              \
    UKB_MOVE_##shape(name, rows)             \
  } else {                                   \
    name = {};                               \
  }
#define UKB_MOVE_param(shape, name, rows)
#define UKB_MOVE_output(shape, name, rows)
#define UKB_MOVE_dense(shape, name, rows)
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) UKB_MOVE_##role(shape, name, rows)
    UKB_FIELDS(UKB_X)
#undef UKB_X
#undef UKB_MOVE_vec
#undef UKB_MOVE_one
#undef UKB_MOVE_adaptive
#define UKB_MOVE_adaptive(shape, name, rows) \
  if (v.name) {                              \
    UKB_MOVE_##shape(name, rows)             \
  }
  }

  /// Scatters into system i of v (the monitors of adaptive steps where v
  /// has them).
  UKB_HD void store(const BatchView<Mo>& v, int i) const {
#define UKB_MOVE_vec(name, rows) \
  for (int j = 0; j < rows; ++j) v.name[soa(j, i, v.N)] = name[j];
#define UKB_MOVE_one(name, rows) v.name[i] = name;
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) UKB_MOVE_##role(shape, name, rows)
    UKB_FIELDS(UKB_X)
#undef UKB_X
#undef UKB_MOVE_vec
#undef UKB_MOVE_one
  }
#undef UKB_MOVE_state
#undef UKB_MOVE_monitor
#undef UKB_MOVE_adaptive
#undef UKB_MOVE_param
#undef UKB_MOVE_output
#undef UKB_MOVE_dense
#undef UKB_LOCAL_vec
#undef UKB_LOCAL_one
#undef UKB_LOCAL_state
#undef UKB_LOCAL_monitor
#undef UKB_LOCAL_adaptive
#undef UKB_LOCAL_param
#undef UKB_LOCAL_output
#undef UKB_LOCAL_dense

  /// True while the status is ok.
  UKB_HD bool ok() const { return status == static_cast<std::int32_t>(Status::ok); }
};

/// Host-owned batch of N systems. Every system starts with the model's
/// default parameters, zero state and status ok.
///
/// Accessors, one per field of the table: `q(i, j)`, `qd(i, j)`, `t(i)`,
/// `status(i)`, the run monitors `steps(i)`, `events(i)`, `t_stop(i)`,
/// `res_pos(i)`, `res_vel(i)`, `rank_drops(i)`, `proj_fails(i)`,
/// `inconsistent(i)`, and the outputs of `evaluate` `qdd(i, j)`,
/// `Qc_ideal(i, j)`, `Qc_nonideal(i, j)`, `lambda(i, j)`, `rank(i)` (which
/// throw std::logic_error before the batch was first evaluated). fields.hpp
/// says what each holds.
template <Model Mo>
class Batch {
 public:
  using T = typename Mo::Scalar;
  using Params = typename Mo::Params;
  static constexpr int n = Mo::n, m = Mo::m, np = param_count<Mo>(), dn = 10 * n + 2;

  explicit Batch(int N) : N_(N) {
    if (N < 1) throw std::invalid_argument("ukb::Batch: the number of systems must be >= 1");
#define UKB_X(name, type, shape, rows, role, init, column, when, doc)           \
  if (!UKB_FIELD_IS(role, output) && !UKB_FIELD_IS(role, dense) && !UKB_FIELD_IS(role, adaptive)) \
    allocate(name##_, std::size_t(rows), Field::name);
    UKB_FIELDS(UKB_X)
#undef UKB_X
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
  /// resets its run monitors to their initial values (fields.hpp).
  void set_state(int i, const T* q, const T* qd, T t = T(0)) {
    check(i);
#define UKB_X(name, type, shape, rows, role, init, column, when, doc)                                 \
  if (UKB_FIELD_IS(role, state) || UKB_FIELD_IS(role, monitor) || UKB_FIELD_IS(role, adaptive))      \
    for (int j = 0; j < rows && !name##_.empty(); ++j)                                                  \
      name##_[soa(j, i, N_)] = detail::field_init<UKB_FIELD_TYPE(type, T)>(field_info(Field::name).nan_init);
    UKB_FIELDS(UKB_X)
#undef UKB_X
    for (int j = 0; j < n; ++j) {
      q_[soa(j, i, N_)] = q[j];
      qd_[soa(j, i, N_)] = qd[j];
    }
    t_[std::size_t(i)] = t;
  }

  // The accessors, one per field (see the class documentation).
#define UKB_ACCESSOR_vec(name)                                                        \
  auto name(int i, int j) const {                                                     \
    return detail::field_value<Field::name>(read(name##_, Field::name)[soa(j, check(i), N_)]); \
  }
#define UKB_ACCESSOR_one(name)                                                        \
  auto name(int i) const {                                                            \
    return detail::field_value<Field::name>(read(name##_, Field::name)[std::size_t(check(i))]); \
  }
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) UKB_ACCESSOR_##shape(name)
  UKB_FIELDS(UKB_X)
#undef UKB_X
#undef UKB_ACCESSOR_vec
#undef UKB_ACCESSOR_one

  /// Allocates the outputs of `evaluate` (NaN, rank 0) if not done yet.
  /// `evaluate` calls it; a caller that hands view() to an evaluation
  /// kernel of its own calls it first.
  void allocate_outputs() {
    if (!rank_.empty()) return;
#define UKB_X(name, type, shape, rows, role, init, column, when, doc)           \
  if (UKB_FIELD_IS(role, output))                                                 \
    allocate(name##_, std::size_t(rows), Field::name);
    UKB_FIELDS(UKB_X)
#undef UKB_X
  }

  /// Allocates the monitors of adaptive steps (zero) if not done yet;
  /// ukb::integrate with Method::dopri5 calls it.
  void allocate_adaptive() {
    if (!rejected_.empty()) return;
#define UKB_X(name, type, shape, rows, role, init, column, when, doc)           \
  if (UKB_FIELD_IS(role, adaptive))                                               \
    allocate(name##_, std::size_t(rows), Field::name);
    UKB_FIELDS(UKB_X)
#undef UKB_X
  }

  /// True once the monitors of adaptive steps are allocated.
  bool has_adaptive_monitors() const { return !rejected_.empty(); }
  /// True once the dense output is allocated.
  bool has_dense() const { return !dense_.empty(); }

  /// Allocates the `dense` field (NaN) if not done yet: integrating with
  /// Method::dopri5 then leaves there the dense output of every system's
  /// last accepted step (kernels::DenseStep; `ukb run` records trajectories
  /// at fixed output times from it). Until then `dense(i, j)` throws.
  void allocate_dense() {
    if (!dense_.empty()) return;
    allocate(dense_, std::size_t(dn), Field::dense);
  }

  /// The SoA view handed to backends (the outputs of `evaluate` are null
  /// until allocate_outputs, the dense output until allocate_dense).
  BatchView<Mo> view() {
    BatchView<Mo> v;
    v.N = N_;
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) v.name = name##_.empty() ? nullptr : name##_.data();
    UKB_FIELDS(UKB_X)
#undef UKB_X
    return v;
  }

 private:
  // A field's `rows` x N values at their initial value: a zero field is
  // fresh memory (fresh_memory.hpp), first touched where a system is set;
  // a NaN field is filled here (and the constructor sets every system's
  // default parameters), on this thread.
  template <class X>
  void allocate(std::vector<X, FreshAllocator<X>>& v, std::size_t rows, Field f) {
    const std::size_t size = rows * std::size_t(N_);
    if (std::numeric_limits<X>::has_quiet_NaN && field_info(f).nan_init) {
      v.assign(size, detail::field_init<X>(true));
    } else {
      std::vector<X, FreshAllocator<X>>(size).swap(v);
    }
  }
  BatchView<Mo> view_const() const { return const_cast<Batch*>(this)->view(); }
  template <class V>
  static const V& read(const V& v, Field f) {
    if (v.empty() && f == Field::dense)
      throw std::logic_error("ukb::Batch: no dense output (call allocate_dense before integrating)");
    if (v.empty() && field_info(f).role == FieldRole::adaptive)
      throw std::logic_error(std::string("ukb::Batch: no monitors of adaptive steps (") + field_info(f).name +
                             "): the batch has not been integrated with Method::dopri5");
    if (v.empty())  // else only the outputs of evaluate start unallocated
      throw std::logic_error(std::string("ukb::Batch: no evaluation outputs yet (") + field_info(f).name +
                             "): call ukb::evaluate first");
    return v;
  }
  int check(int i) const {
    if (i < 0 || i >= N_)
      throw std::out_of_range("ukb::Batch: system " + std::to_string(i) + " outside [0, " +
                              std::to_string(N_) + ")");
    return i;
  }

  int N_;
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) \
  std::vector<UKB_FIELD_TYPE(type, T), FreshAllocator<UKB_FIELD_TYPE(type, T)>> name##_;
  UKB_FIELDS(UKB_X)
#undef UKB_X
};

}  // namespace ukb
