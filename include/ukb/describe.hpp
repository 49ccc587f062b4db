/// @file describe.hpp
/// @brief `describe<Mo>()`: the registry entry (ModelInfo) of a model type,
///        with its type-erased entry points and its resident ensemble.
///
/// The library describes the built-in models (src/registry.cpp). For a model
/// of one's own, include this header and "ukb/backends.hpp" (the backends'
/// definitions) in one translation unit.
#pragma once

#include <Eigen/Dense>
#include <cmath>
#include <cstdio>
#include <limits>
#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "ukb/engine.hpp"
#include "ukb/models/common.hpp"
#include "ukb/reference/solver.hpp"
#include "ukb/registry.hpp"

namespace ukb {

namespace detail {

/// The resident ensemble (registry.hpp) of a double-precision model: a Batch
/// in host memory and, on cuda, its mirror in device memory.
template <Model Mo>
class EnsembleOf final : public Ensemble {
 public:
  static_assert(std::is_same_v<typename Mo::Scalar, double>, "ensembles are in double precision");

  EnsembleOf(int N, Backend be) : batch_(N), backend_(be) {
    if (be == Backend::cuda) {
      if constexpr (CudaInstance<Mo>::value) {
        mirror_ = backends::cuda::make_mirror<Mo>(N);
      } else {
        throw BackendUnavailable(cuda_not_compiled(Mo::name));
      }
    }
  }

  int size() const override { return batch_.size(); }
  Backend backend() const override { return backend_; }

  void set(int i, std::span<const double> params, const double* q, const double* qd, double t) override {
    pull();
    batch_.set_params(i, params_from<Mo>(params));
    batch_.set_state(i, q, qd, t);
    if (!host_newer_.load(std::memory_order_relaxed)) host_newer_.store(true, std::memory_order_relaxed);
  }

  Tally integrate(const RunOptions& r, long budget, const EngineOptions& o) override {
    if (!mirror_) return ukb::integrate(batch_, backend_, r, budget, o);
    const RunSettings<double> s = integration_settings<Mo>(r, budget, o);
    if (r.method == Method::dopri5 && !batch_.has_adaptive_monitors()) {
      pull();
      batch_.allocate_adaptive();
      host_newer_ = true;  // the mirror takes the new fields at the upload
    }
    if (host_newer_) mirror_->upload(batch_.view());
    host_newer_ = false;
    mirror_->integrate(s, o);
    device_newer_ = true;
    return mirror_->tally(s);
  }

  void enable_dense() override {
    pull();
    mirror_.reset();  // ukb::integrate moves the batch, its dense output with it
    batch_.allocate_dense();
  }

  const double* real(Field f) override { return column<double>(f); }
  const std::int64_t* i64(Field f) override { return column<std::int64_t>(f); }
  const std::int32_t* i32(Field f) override { return column<std::int32_t>(f); }

 private:
  // The host copy is brought up to date with the device's (once, whoever
  // of the threads setting systems comes first).
  void pull() {
    if (!device_newer_.load(std::memory_order_acquire)) return;
    const std::lock_guard<std::mutex> lock(pulling_);
    if (!device_newer_.load(std::memory_order_relaxed)) return;
    mirror_->download(batch_.view());
    device_newer_.store(false, std::memory_order_release);
  }

  template <class X>
  const X* column(Field f) {
    pull();
    const X* out = nullptr;
    batch_.view().for_each_field([&](const FieldInfo& info, auto* p) {
      if constexpr (std::is_same_v<std::remove_pointer_t<decltype(p)>, X>)
        if (info.field == f) out = p;
    });
    if (!out)
      throw std::logic_error(std::string("ukb::Ensemble: field '") + field_info(f).name +
                             "' is not available with that type");
    return out;
  }

  Batch<Mo> batch_;
  Backend backend_;
  std::unique_ptr<backends::cuda::DeviceMirror<Mo>> mirror_;
  std::atomic<bool> host_newer_ = true, device_newer_ = false;  // atomic: set() may run on many threads
  std::mutex pulling_;
};

// One system evaluated on a backend.
template <Model Mo>
Evaluation evaluate_one(Backend be, std::span<const double> values, const double* q, const double* qd, double t,
                        double rank_rtol) {
  constexpr int n = Mo::n, m = Mo::m;
  const typename Mo::Params p = params_from<Mo>(values);
  const Eigen::Map<const Eigen::VectorXd> qv(q, n), qdv(qd, n);
  Evaluation e;
  auto to = [](std::vector<double>& dst, const Eigen::VectorXd& v) { dst.assign(v.data(), v.data() + v.size()); };
  if (be == Backend::reference) {  // the oracle itself, with its own residual and consistency rule
    const reference::Result r =
        as_model_error(Mo::name, "evaluating", [&] { return reference::evaluate<Mo>(p, qv, qdv, t, {rank_rtol}); });
    to(e.qdd, r.qdd), to(e.Qc_ideal, r.Qc_ideal), to(e.Qc_nonideal, r.Qc_nonideal), to(e.lambda, r.lambda);
    e.rank = r.rank;
    e.status = r.status;
    e.constraint_residual = r.constraint_residual;
    e.inconsistent = r.inconsistent;
    return e;
  }
  Batch<Mo> b(1);
  b.set_params(0, p);
  b.set_state(0, q, qd, t);
  ukb::evaluate(b, be, RunOptions{.rank_rtol = rank_rtol}, EngineOptions{.threads = 1});
  Eigen::VectorXd qdd(n);
  for (int j = 0; j < n; ++j) {
    qdd(j) = b.qdd(0, j);
    e.qdd.push_back(b.qdd(0, j));
    e.Qc_ideal.push_back(b.Qc_ideal(0, j));
    e.Qc_nonideal.push_back(b.Qc_nonideal(0, j));
  }
  for (int j = 0; j < m; ++j) e.lambda.push_back(b.lambda(0, j));
  e.rank = b.rank(0);
  e.status = b.status(0);
  // The residual and the consistency rule of the reference, from this
  // backend's q''.
  const reference::Terms k =
      as_model_error(Mo::name, "evaluating", [&] { return reference::terms<Mo>(p, qv, qdv, t); });
  e.constraint_residual = (k.A * qdd - k.b).cwiseAbs().maxCoeff();
  e.inconsistent = e.status == Status::ok &&
                   reference::is_inconsistent(k.A, k.b, k.M.llt().solve(k.Q), e.constraint_residual);
  return e;
}

/// Why mass_diagonal does not give the diagonal of mass at (q, t), or ""
/// (ModelInfo::mass_diagonal_mismatch).
template <Model Mo>
std::string mass_diagonal_mismatch(std::span<const double> values, const double* q, double t) {
  constexpr int n = Mo::n;
  const typename Mo::Params p = params_from<Mo>(values);
  double M[n * n], d[n];
  as_model_error(Mo::name, "checking mass_diagonal", [&] {
    Mo::mass(q, t, p, M);
    Mo::mass_diagonal(q, t, p, d);
  });
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const double want = i == j ? d[i] : 0.0;
      // Equal values (a zero of either sign included), or NaN in both
      // (the kernels then fail the system as the reference does).
      if (M[i * n + j] == want || (i == j && std::isnan(want) && std::isnan(M[i * n + j]))) continue;
      char text[160];
      if (i == j)
        std::snprintf(text, sizeof text, "mass gives M[%d][%d] = %.17g, mass_diagonal gives d[%d] = %.17g", i, j,
                      M[i * n + j], i, want);
      else
        std::snprintf(text, sizeof text, "mass gives M[%d][%d] = %.17g off the diagonal, which mass_diagonal "
                      "declares zero", i, j, M[i * n + j]);
      return std::string(text) + " (mass_diagonal must give the diagonal of a diagonal M)";
    }
  return {};
}

/// Why constraints has a nonzero outside a row's constraint_columns at
/// (q, qd, t), or "" (ModelInfo::constraint_columns_mismatch).
template <Model Mo>
std::string constraint_columns_mismatch(std::span<const double> values, const double* q, const double* qd, double t) {
  constexpr int n = Mo::n;
  const typename Mo::Params p = params_from<Mo>(values);
  double A[Mo::m * n], b[Mo::m];
  as_model_error(Mo::name, "checking constraint_columns", [&] { Mo::constraints(q, qd, t, p, A, b); });
  for (int i = 0; i < Mo::m; ++i) {
    const ColumnRange c = constraint_columns_of<Mo>(i);
    for (int j = 0; j < n; ++j) {
      // A zero of either sign passes; so does NaN within the row's
      // columns (the kernels then fail the system as the reference does).
      if ((j >= c.begin && j < c.end) || A[i * n + j] == 0.0) continue;
      char text[200];
      std::snprintf(text, sizeof text, "constraints gives A[%d][%d] = %.17g, outside row %d's constraint_columns "
                    "[%d, %d)", i, j, A[i * n + j], i, c.begin, c.end);
      return std::string(text) + " (A must be zero outside each row's constraint_columns)";
    }
  }
  return {};
}

}  // namespace detail

/// The registry entry of a double-precision model: its name, coordinates,
/// parameters (defaults and ranges from the descriptions), the optional
/// hooks it has (model.hpp), and its type-erased entry points. The
/// backends' definitions must be available to the program for the model
/// (built-in, or "ukb/backends.hpp" included in one translation unit).
template <Model Mo>
ModelInfo describe() {
  static_assert(std::is_same_v<typename Mo::Scalar, double>, "describe the double-precision model");
  constexpr int n = Mo::n;
  ModelInfo info;
  info.name = Mo::name;
  info.summary = Mo::summary;
  info.n = Mo::n;
  info.m = Mo::m;
  info.coords.assign(Mo::coords.begin(), Mo::coords.end());
  const typename Mo::Params defaults{};
  Mo::visit_params(defaults, [&](const char* name, const double& value, const char* doc) {
    info.params.push_back(param_info(name, value, doc));
  });
  info.has_events = HasEvents<Mo>;
  info.has_potential = HasPotential<Mo>;
  info.has_residual = HasResidual<Mo>;
  info.has_rows = HasConstraintRows<Mo>;
  info.has_rebind = requires {
    requires std::same_as<typename Mo::template rebind<typename Mo::Scalar>, Mo>;
  };
  info.has_diagonal_mass = HasDiagonalMass<Mo>;
  if constexpr (HasDiagonalMass<Mo>) {
    info.mass_diagonal_mismatch = &detail::mass_diagonal_mismatch<Mo>;
  }
  info.has_constraint_columns = HasConstraintColumns<Mo>;
  if constexpr (HasConstraintColumns<Mo>) {
    info.constraint_columns_mismatch = &detail::constraint_columns_mismatch<Mo>;
  }
  info.evaluate = &detail::evaluate_one<Mo>;
  info.terms = [](std::span<const double> values, const double* q, const double* qd, double t) {
    const typename Mo::Params p = params_from<Mo>(values);
    Terms k{std::vector<double>(std::size_t(Mo::n) * Mo::n), std::vector<double>(Mo::n),
            std::vector<double>(std::size_t(Mo::m) * Mo::n), std::vector<double>(Mo::m)};
    detail::as_model_error(Mo::name, "computing its terms", [&] {
      Mo::mass(q, t, p, k.M.data());
      Mo::force(q, qd, t, p, k.Q.data());
      Mo::constraints(q, qd, t, p, k.A.data(), k.b.data());
    });
    return k;
  };
  if constexpr (HasInitialState<Mo>) {
    info.initial_names.assign(Mo::initial_names.begin(), Mo::initial_names.end());
    for (std::size_t k = 0; k < Mo::initial_names.size(); ++k) {
      const char* doc = "";
      if constexpr (requires { Mo::initial_docs; }) {
        static_assert(Mo::initial_docs.size() == Mo::initial_names.size(), "initial_docs: one per initial_names");
        doc = Mo::initial_docs[k];
      }
      ParamInfo q = param_info(Mo::initial_names[k], 0.0, doc);
      if (!q.admits(0.0) && !q.choices.empty()) q.default_value = q.choices.front();
      info.initial.push_back(std::move(q));
    }
    info.initial_state = [](std::span<const double> values, const double* ic, double* q, double* qd) {
      return detail::as_model_error(Mo::name, "computing an initial state", [&] {
        return static_cast<bool>(Mo::initial_state(ic, params_from<Mo>(values), q, qd));
      });
    };
    info.natural_state = [](std::span<const double> values, const double* q, const double* qd, double* ic) {
      detail::as_model_error(Mo::name, "computing natural quantities",
                             [&] { Mo::natural_state(q, qd, params_from<Mo>(values), ic); });
    };
  }
  if constexpr (HasObservables<Mo>) {
    info.observable_names.assign(Mo::observable_names.begin(), Mo::observable_names.end());
    info.observables = [](std::span<const double> values, const double* q, const double* qd, double t, double* out) {
      detail::as_model_error(Mo::name, "computing its observables",
                             [&] { Mo::observables(q, qd, t, params_from<Mo>(values), out); });
    };
  }
  info.residual = [](std::span<const double> values, const double* q, const double* qd, double t, double& pos,
                     double& vel) {
    if constexpr (HasResidual<Mo>) {
      detail::as_model_error(Mo::name, "computing its residual",
                             [&] { Mo::residual(q, qd, t, params_from<Mo>(values), pos, vel); });
    } else {
      (void)values, (void)q, (void)qd, (void)t;
      pos = vel = std::numeric_limits<double>::quiet_NaN();
    }
  };
  info.energy = [](std::span<const double> values, const double* q, const double* qd, double t) {
    if constexpr (HasPotential<Mo>) {
      const typename Mo::Params p = params_from<Mo>(values);
      return detail::as_model_error(Mo::name, "computing its energy", [&] {
        double M[n * n];
        Mo::mass(q, t, p, M);
        return models::detail::kinetic_energy<n>(M, qd) + Mo::potential(q, t, p);
      });
    } else {
      (void)values, (void)q, (void)qd, (void)t;
      return std::numeric_limits<double>::quiet_NaN();
    }
  };
  info.ensemble = [](int N, Backend be) -> std::unique_ptr<Ensemble> {
    return std::make_unique<detail::EnsembleOf<Mo>>(N, be);
  };
  return info;
}

}  // namespace ukb
