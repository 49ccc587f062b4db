/// @file engine_impl.hpp
/// @brief Host logic of the CUDA backend, written against Thrust: device
///        memory (RAII thrust::device_vector, one per field of the table),
///        upload, launch, download, reductions.
///
/// This file is compiled twice: by nvcc through backend.cuh, where
/// UKB_LAUNCH is a real <<<grid, block>>> launch, and by g++ against
/// Thrust's CPP backend in tests/kernels/test_cuda_emulation.cpp, where UKB_LAUNCH
/// runs every thread of the same launch on the CPU (launch.hpp). So
/// everything but the `<<<>>>` itself is executed in CI, where there is no
/// GPU.
///
/// The includer defines UKB_LAUNCH(config, N, body) and UKB_LAUNCH_TEAM(block,
/// N, body) (the team route: one team of Body::team_threads threads per system,
/// Body::Shared its shared memory; false where it cannot be launched, the
/// thread route then runs) before including, and may
/// define UKB_CUDA_IMPL_NS (default cuda_impl) so that the g++ build of this
/// file does not share symbol names with the nvcc build in libukb.
#pragma once

#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform_reduce.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>

#include "ukb/backend.hpp"
#include "ukb/batch.hpp"
#include "ukb/cuda/launch.hpp"
#include "ukb/kernels/run.hpp"
#include "ukb/kernels/team_run.hpp"

#ifndef UKB_CUDA_IMPL_NS
#define UKB_CUDA_IMPL_NS cuda_impl
#endif

namespace ukb::UKB_CUDA_IMPL_NS {

/// A batch in device memory: one device vector per field of the table
/// (fields.hpp); the outputs of `evaluate` only when asked for.
template <Model Mo>
struct DeviceBatch {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m, np = param_count<Mo>(), dn = 10 * n + 2;
  int N;
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) \
  thrust::device_vector<UKB_FIELD_TYPE(type, T)> name;
  UKB_FIELDS(UKB_X)
#undef UKB_X

  DeviceBatch(int systems, bool outputs, bool with_dense = false) : N(systems) {
#define UKB_X(name, type, shape, rows, role, init, column, when, doc)                                  \
  if ((outputs || !UKB_FIELD_IS(role, output)) && (with_dense || !UKB_FIELD_IS(role, dense)) &&    \
      !UKB_FIELD_IS(role, adaptive))                                                                  \
    name.resize(std::size_t(rows) * std::size_t(N));
    UKB_FIELDS(UKB_X)
#undef UKB_X
  }

  /// Device pointers (the outputs null where not allocated).
  BatchView<Mo> view() {
    BatchView<Mo> v;
    v.N = N;
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) \
  v.name = name.empty() ? nullptr : thrust::raw_pointer_cast(name.data());
    UKB_FIELDS(UKB_X)
#undef UKB_X
    return v;
  }

  /// Every field of host but the outputs of `evaluate` and the dense
  /// output, to the device; the monitors of adaptive steps where host has
  /// them (allocated here at their first upload).
  void upload(const BatchView<Mo>& h) {
#define UKB_X(name, type, shape, rows, role, init, column, when, doc)                   \
  if (UKB_FIELD_IS(role, adaptive) && h.name && name.empty())                         \
    name.resize(std::size_t(rows) * std::size_t(N));                                  \
  if (!UKB_FIELD_IS(role, output) && !UKB_FIELD_IS(role, dense) && !name.empty() && h.name) \
    thrust::copy(h.name, h.name + std::size_t(rows) * std::size_t(N), name.begin());
    UKB_FIELDS(UKB_X)
#undef UKB_X
  }

  /// The state, the run monitors (those of adaptive steps and the dense
  /// output where there are), to the host (after an integration).
  void download_run(const BatchView<Mo>& h) const {
#define UKB_X(name, type, shape, rows, role, init, column, when, doc)                               \
  if ((UKB_FIELD_IS(role, state) || UKB_FIELD_IS(role, monitor) || UKB_FIELD_IS(role, adaptive) ||  \
       UKB_FIELD_IS(role, dense)) &&                                                                 \
      h.name && !name.empty())                                                                       \
    thrust::copy(name.begin(), name.end(), h.name);
    UKB_FIELDS(UKB_X)
#undef UKB_X
  }

  /// The outputs of `evaluate` and the status, to the host.
  void download_outputs(const BatchView<Mo>& h) const {
#define UKB_X(name, type, shape, rows, role, init, column, when, doc) \
  if (UKB_FIELD_IS(role, output)) thrust::copy(name.begin(), name.end(), h.name);
    UKB_FIELDS(UKB_X)
#undef UKB_X
    thrust::copy(status.begin(), status.end(), h.status);
  }
};

/// System i's share of the Tally (tally_of), and the sum, for the device's
/// reduction.
template <class T>
struct TallyOf {
  const std::int32_t* status;
  const T* t;
  const std::int64_t* steps;
  RunSettings<T> s;
  UKB_HD Tally operator()(int i) const { return tally_of(status[i], t[i], steps[i], s); }
};
struct AddTally {
  UKB_HD Tally operator()(const Tally& a, const Tally& b) const { return a + b; }
};

/// A batch that stays in device memory across calls.
template <Model Mo>
class Mirror final : public backends::cuda::DeviceMirror<Mo> {
 public:
  using T = typename Mo::Scalar;
  explicit Mirror(int N, bool with_dense = false) : d_(N, false, with_dense) {}
  void upload(const BatchView<Mo>& host) override { d_.upload(host); }
  void download(const BatchView<Mo>& host) const override { d_.download_run(host); }
  void integrate(const RunSettings<T>& s, const EngineOptions& o) override {
    // A kernel per method (kernels::IntegrateBody, or on the team route
    // kernels::TeamIntegrateBody).
    if (s.method == Method::dopri5) {
      run<kernels::AdaptiveRun<Mo>>(s, o);
    } else {
      run<kernels::SystemRun<Mo>>(s, o);
    }
  }
  Tally tally(const RunSettings<T>& s) const override {
    DeviceBatch<Mo>& d = const_cast<DeviceBatch<Mo>&>(d_);
    const BatchView<Mo> v = d.view();
    return thrust::transform_reduce(thrust::counting_iterator<int>(0), thrust::counting_iterator<int>(d_.N),
                                    TallyOf<T>{v.status, v.t, v.steps, s}, Tally{}, AddTally{});
  }

 private:
  // The kernel of the run Run: a team per system where the model has one
  // (team_run.hpp) and the options allow it, else one thread per system.
  template <class Run>
  void run(const RunSettings<T>& s, const EngineOptions& o) {
    if constexpr (kernels::team_size<Mo>() > 1) {
      if (o.cuda_teams && UKB_LAUNCH_TEAM(o.cuda_block, d_.N, (kernels::TeamIntegrateBody<Mo, Run>{d_.view(), s})))
        return;
    }
    const kernels::IntegrateBody<Mo, Run> body{d_.view(), s};
    UKB_LAUNCH(::ukb::cuda::launch_config(d_.N, o.cuda_block), d_.N, body);
  }

  DeviceBatch<Mo> d_;
};

/// Evaluates every system of a host batch (upload, one thread per system,
/// download of the outputs and statuses).
template <Model Mo>
void evaluate(const BatchView<Mo>& host, const EvalSettings<typename Mo::Scalar>& s, const EngineOptions& o) {
  if (!host.qdd || !host.Qc_ideal || !host.Qc_nonideal || !host.lambda || !host.rank)
    throw std::invalid_argument("ukb: evaluate needs the batch's outputs (Batch::allocate_outputs)");
  DeviceBatch<Mo> d(host.N, true);
  d.upload(host);
  const kernels::EvaluateBody<Mo> body{d.view(), s};
  UKB_LAUNCH(::ukb::cuda::launch_config(host.N, o.cuda_block), host.N, body);
  d.download_outputs(host);
}

/// Integrates every system of a host batch (upload, one thread per system,
/// download of the state and run monitors).
template <Model Mo>
void integrate(const BatchView<Mo>& host, const RunSettings<typename Mo::Scalar>& s, const EngineOptions& o) {
  Mirror<Mo> d(host.N, host.dense != nullptr);
  d.upload(host);
  d.integrate(s, o);
  d.download(host);
}

}  // namespace ukb::UKB_CUDA_IMPL_NS
