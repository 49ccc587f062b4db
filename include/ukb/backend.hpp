/// @file backend.hpp
/// @brief The backend interface: the entry points every backend implements,
///        declared once and stamped into each backend's namespace (after
///        Ginkgo's kernel declarations). The engine (engine.hpp) validates
///        and resolves a call, then dispatches it here once.
///
/// | backend | namespace | definitions |
/// |---|---|---|
/// | reference | ukb::backends::reference | include/ukb/reference/backend.hpp (Eigen, double only) |
/// | cpu | ukb::backends::cpu | kernels/ukb/cpu/backend.hpp (OpenMP, SIMD lanes) |
/// | cuda | ukb::backends::cuda | kernels/ukb/cuda/engine_impl.hpp (Thrust, nvcc) |
///
/// The library instantiates every backend for the built-in models. A model
/// of one's own is instantiated by including "ukb/backends.hpp" (reference
/// and cpu) in one translation unit of the program, and for cuda by
/// compiling "ukb/cuda/engine_impl.hpp" for it with nvcc
/// (docs/adding-a-model.md). No header here includes Eigen, OpenMP, SIMD or
/// CUDA.
#pragma once

#include <memory>

#include "ukb/batch.hpp"
#include "ukb/model.hpp"
#include "ukb/options.hpp"
#include "ukb/settings.hpp"

/// The two entry points of a backend, over a host view of a batch:
/// - evaluate: every system at its state: the outputs of `evaluate` and the
///   status (fields.hpp);
/// - integrate: every active system by at most s.budget steps
///   (kernels::SystemRun documents a call; the reference has its own loop
///   with the same decisions).
#define UKB_BACKEND_ENTRY_POINTS                                                                   \
  template <::ukb::Model Mo>                                                                       \
  void evaluate(const ::ukb::BatchView<Mo>& v, const ::ukb::EvalSettings<typename Mo::Scalar>& s, \
                const ::ukb::EngineOptions& o);                                                    \
  template <::ukb::Model Mo>                                                                       \
  void integrate(const ::ukb::BatchView<Mo>& v, const ::ukb::RunSettings<typename Mo::Scalar>& s, \
                 const ::ukb::EngineOptions& o);

/// A backend's namespace: its entry points, and `Entry`, the type through
/// which the engine's one dispatch reaches them.
#define UKB_DECLARE_BACKEND(name)                                                                      \
  namespace name {                                                                                     \
  UKB_BACKEND_ENTRY_POINTS                                                                             \
  struct Entry {                                                                                       \
    static constexpr const char* backend = #name;                                                      \
    template <::ukb::Model Mo>                                                                         \
    static void evaluate(const ::ukb::BatchView<Mo>& v, const ::ukb::EvalSettings<typename Mo::Scalar>& s, \
                         const ::ukb::EngineOptions& o) {                                              \
      ::ukb::backends::name::evaluate<Mo>(v, s, o);                                                    \
    }                                                                                                  \
    template <::ukb::Model Mo>                                                                         \
    static void integrate(const ::ukb::BatchView<Mo>& v, const ::ukb::RunSettings<typename Mo::Scalar>& s, \
                          const ::ukb::EngineOptions& o) {                                             \
      ::ukb::backends::name::integrate<Mo>(v, s, o);                                                   \
    }                                                                                                  \
  };                                                                                                   \
  }

namespace ukb::backends {

UKB_DECLARE_BACKEND(reference)
UKB_DECLARE_BACKEND(cpu)
UKB_DECLARE_BACKEND(cuda)

namespace cuda {

/// A batch's copy in device memory that stays there across calls: what
/// `ukb run --backend cuda` integrates chunk after chunk without a round
/// trip per call. Uploaded and downloaded explicitly.
template <Model Mo>
class DeviceMirror {
 public:
  using T = typename Mo::Scalar;
  virtual ~DeviceMirror() = default;
  /// Copies every field of host but the outputs of `evaluate` to the device.
  virtual void upload(const BatchView<Mo>& host) = 0;
  /// Copies the state and the run monitors back.
  virtual void download(const BatchView<Mo>& host) const = 0;
  /// Integrates the device copy (as integrate).
  virtual void integrate(const RunSettings<T>& s, const EngineOptions& o) = 0;
  /// The systems still active and the failed ones, counted on the device.
  virtual Tally tally(const RunSettings<T>& s) const = 0;
};

/// A device copy of a batch of N systems (nothing uploaded yet). Throws
/// BackendUnavailable without a CUDA build or device.
template <Model Mo>
std::unique_ptr<DeviceMirror<Mo>> make_mirror(int N);
}  // namespace cuda

}  // namespace ukb::backends

/// Explicit instantiation of the entry points of the reference, cpu or cuda
/// backend for a model type (`UKB_INSTANTIATE_CPU(MyModel<double>)`); the
/// UKB_EXTERN_ forms declare that they are instantiated elsewhere.
#define UKB_BACKEND_INSTANCE_(kw, ns, Mo)                                                              \
  kw template void ukb::backends::ns::evaluate<Mo>(                                                    \
      const ::ukb::BatchView<Mo>&, const ::ukb::EvalSettings<typename Mo::Scalar>&, const ::ukb::EngineOptions&); \
  kw template void ukb::backends::ns::integrate<Mo>(                                                   \
      const ::ukb::BatchView<Mo>&, const ::ukb::RunSettings<typename Mo::Scalar>&, const ::ukb::EngineOptions&);
#define UKB_INSTANTIATE_REFERENCE(Mo) UKB_BACKEND_INSTANCE_(, reference, Mo)
#define UKB_INSTANTIATE_CPU(Mo) UKB_BACKEND_INSTANCE_(, cpu, Mo)
#define UKB_INSTANTIATE_CUDA(Mo)         \
  UKB_BACKEND_INSTANCE_(, cuda, Mo)      \
  template std::unique_ptr<::ukb::backends::cuda::DeviceMirror<Mo>> ukb::backends::cuda::make_mirror<Mo>(int);
#define UKB_EXTERN_REFERENCE(Mo) UKB_BACKEND_INSTANCE_(extern, reference, Mo)
#define UKB_EXTERN_CPU(Mo) UKB_BACKEND_INSTANCE_(extern, cpu, Mo)
