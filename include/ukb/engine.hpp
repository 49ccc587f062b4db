/// @file engine.hpp
/// @brief The batched engine: evaluate or integrate every system of a Batch
///        on the reference, cpu or cuda backend. A thin façade: it checks
///        and resolves the options (options.hpp) and dispatches once to the
///        backend's entry points (backend.hpp).
///
/// ```cpp
/// ukb::Batch<ukb::models::BeadOnRing<double>> batch(1000);
/// batch.set_params(i, p);  batch.set_state(i, q, qd);       // for each i
/// ukb::step(batch, ukb::Backend::cpu, 1e-3, 5000);          // 5000 RK4 steps
/// double x = batch.q(i, 0);  ukb::Status s = batch.status(i);
/// ```
///
/// The built-in models run on every backend as they are. A model of one's
/// own needs the backends' definitions in one translation unit of the
/// program: `#include "ukb/backends.hpp"` there (reference and cpu), and
/// for cuda a .cu file with `UKB_INSTANTIATE_CUDA` (docs/adding-a-model.md).
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "ukb/backend.hpp"
#include "ukb/batch.hpp"
#include "ukb/models/all.hpp"
#include "ukb/options.hpp"

namespace ukb {

namespace detail {
/// Why a model cannot run on cuda, and what to do: a model file's plugin
/// loaded without its cuda backend is loaded again with it; a built-in
/// model of a build without its cuda instance uses another backend.
inline std::string cuda_not_compiled(const char* model) {
#ifdef UKB_PLUGIN_ABI
  return std::string("the cuda backend of the model file's model '") + model +
         "' was not compiled: load the file with it (Python: ukb.model(PATH, cuda=True); C++: "
         "load_model_file(PATH, {.cuda = true}); `ukb run` and `ukb accel` do so with --backend cuda)";
#else
  return std::string("the cuda backend is not compiled for '") + model +
         "': use the cpu backend, or instantiate it (docs/adding-a-model.md)";
#endif
}
}  // namespace detail

/// Whether the cuda backend is compiled for model Mo: the built-in models
/// in double and float, and a model of one's own for which
/// `UKB_CUDA_MODEL(Mo)` is declared next to its cuda instantiation
/// (docs/adding-a-model.md). Asking cuda for another model (a built-in one
/// on dual numbers, say) throws BackendUnavailable.
template <class Mo>
struct CudaInstance
    : std::bool_constant<models::Builtin::contains<Mo> && (std::is_same_v<typename Mo::Scalar, double> ||
                                                          std::is_same_v<typename Mo::Scalar, float>)> {};

// UKB_CUDA_MODEL(Mo), the declaration that the cuda backend is instantiated
// for Mo: model_check.hpp.

namespace detail {

// The one dispatch: calls f.template operator()<Entry>() with the Entry of
// backend be (backend.hpp), or throws BackendUnavailable.
template <Model Mo, class F>
void on_backend(Backend be, F&& f) {
  using T = typename Mo::Scalar;
  switch (be) {
    case Backend::reference:
      if constexpr (std::is_same_v<T, double>) {
        f.template operator()<backends::reference::Entry>();
        return;
      } else {
        throw BackendUnavailable("the reference backend computes in double only");
      }
    case Backend::cpu:
      f.template operator()<backends::cpu::Entry>();
      return;
    case Backend::cuda:
      if constexpr (CudaInstance<Mo>::value) {
        f.template operator()<backends::cuda::Entry>();
        return;
      } else {
        throw BackendUnavailable(detail::cuda_not_compiled(Mo::name));
      }
  }
  throw std::invalid_argument("ukb: unknown backend");
}

// What an integration call checks and resolves before any work, on every
// route (integrate; on cuda, describe.hpp's resident ensemble): the engine
// options, then the run options into the settings of its scalar.
template <Model Mo>
RunSettings<typename Mo::Scalar> integration_settings(const RunOptions& r, long budget, const EngineOptions& o) {
  check(o);
  return resolve_run<typename Mo::Scalar>(r, budget, HasConstraintRows<Mo>, Mo::name, Mo::n);
}

template <Model Mo>
Tally tally(const BatchView<Mo>& v, const RunSettings<typename Mo::Scalar>& s) {
  Tally c;
  for (int i = 0; i < v.N; ++i) c = c + tally_of(v.status[i], v.t[i], v.steps[i], s);
  return c;
}

}  // namespace detail

/// Evaluates every system at its current state: the outputs qdd, Qc_ideal,
/// Qc_nonideal, lambda, rank and the status (fields.hpp). Of `r`, only the
/// rank tolerance and Baumgarte stabilisation apply. Returns the number of
/// systems whose status is not ok. A model function that throws (cpu and
/// reference backends): ModelError, the batch's outputs undefined.
template <Model Mo>
long evaluate(Batch<Mo>& b, Backend be, const RunOptions& r = {}, const EngineOptions& o = {}) {
  check(o);
  const EvalSettings<typename Mo::Scalar> s =
      resolve_evaluation<typename Mo::Scalar>(r, HasConstraintRows<Mo>, Mo::name);
  b.allocate_outputs();
  const BatchView<Mo> v = b.view();
  detail::on_backend<Mo>(be, [&]<class E>() {
    if constexpr (std::is_same_v<E, backends::cuda::Entry>)
      E::template evaluate<Mo>(v, s, o);  // device code cannot throw; a CUDA error is not the model's
    else
      detail::as_model_error(Mo::name, "evaluating", [&] { E::template evaluate<Mo>(v, s, o); });
  });
  long failed = 0;
  for (int i = 0; i < v.N; ++i) failed += v.status[i] != static_cast<std::int32_t>(Status::ok);
  return failed;
}

/// The run of an ensemble: every active system (status ok, t < r.t_end,
/// fewer than r.max_steps steps since set_state) takes steps of r.method,
/// with event location, residual monitoring and stabilisation as r says and
/// the model provides (kernels::SystemRun documents a call), until it is
/// done or has taken `budget` more steps in this call. A system whose step
/// fails keeps its last good state and gets the status. Splitting a run into
/// calls does not change its outcome. A model function that throws (cpu and
/// reference backends): ModelError, after every thread has stopped; the
/// systems' states are then those of some step between the call's start and
/// the throw.
template <Model Mo>
Tally integrate(Batch<Mo>& b, Backend be, const RunOptions& r,
                long budget = std::numeric_limits<long>::max(), const EngineOptions& o = {}) {
  const RunSettings<typename Mo::Scalar> s = detail::integration_settings<Mo>(r, budget, o);
  if (r.method == Method::dopri5) b.allocate_adaptive();
  const BatchView<Mo> v = b.view();
  detail::on_backend<Mo>(be, [&]<class E>() {
    if constexpr (std::is_same_v<E, backends::cuda::Entry>)
      E::template integrate<Mo>(v, s, o);  // device code cannot throw; a CUDA error is not the model's
    else
      detail::as_model_error(Mo::name, "integrating", [&] { E::template integrate<Mo>(v, s, o); });
  });
  return detail::tally(v, s);
}

/// integrate: `steps` RK4 steps of size dt for every system whose status is
/// ok, with no events located and no residuals tracked.
template <Model Mo>
Tally step(Batch<Mo>& b, Backend be, typename Mo::Scalar dt, long steps, const EngineOptions& o = {}) {
  return integrate(b, be, {.dt = double(dt), .events = false, .monitor = false}, steps, o);
}

/// integrate: RK4 steps of size dt until every system reaches t_end (its
/// last step shortened to land on t_end exactly; t_end finite), with no
/// events located and no residuals tracked. A system whose time is so large
/// that dt no longer advances it stops there.
template <Model Mo>
Tally run_until(Batch<Mo>& b, Backend be, typename Mo::Scalar dt, typename Mo::Scalar t_end,
                const EngineOptions& o = {}) {
  if (!std::isfinite(static_cast<double>(t_end))) throw std::invalid_argument("ukb: the end time must be finite");
  return integrate(b, be, {.dt = double(dt), .t_end = double(t_end), .events = false, .monitor = false},
                   std::numeric_limits<long>::max(), o);
}

}  // namespace ukb
