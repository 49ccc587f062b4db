// Host logic of the CUDA backend, written against Thrust: device memory
// (RAII thrust::device_vector), upload, launch, download, reduction.
//
// This file is compiled twice: by nvcc in kernels/cuda/engine.cu, where
// UKB_LAUNCH is a real <<<grid, block>>> launch, and by g++ against Thrust's
// CPP backend in tests/cuda_emulation.cpp, where UKB_LAUNCH runs every thread
// of the same launch on the CPU. So everything but the `<<<>>>` itself is
// executed in CI, where there is no GPU.
//
// The includer defines UKB_LAUNCH(config, N, body) before including, and may
// define UKB_CUDA_IMPL_NS (default cuda_impl) so that the g++ build of this
// file does not share symbol names with the nvcc build in libukb.
#pragma once

#include <thrust/count.h>
#include <thrust/device_vector.h>

#include <cstddef>
#include <cstdint>

#include "ukb/batch.hpp"
#include "ukb/kernels/launch.hpp"
#include "ukb/kernels/system.hpp"

#ifndef UKB_CUDA_IMPL_NS
#define UKB_CUDA_IMPL_NS cuda_impl
#endif

namespace ukb::UKB_CUDA_IMPL_NS {

// A batch in device memory, mirrored from and to a host view.
template <Model Mo>
struct DeviceBatch {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m, np = param_count<Mo>();
  int N;
  thrust::device_vector<T> q, qd, t, params, qdd, Qc_ideal, Qc_nonideal, lambda;
  thrust::device_vector<std::int32_t> status, rank, events;
  thrust::device_vector<std::int64_t> steps;
  thrust::device_vector<T> t_stop, res_pos, res_vel;
  thrust::device_vector<std::int64_t> rank_drops, proj_fails, inconsistent;

  explicit DeviceBatch(const BatchView<Mo>& h)
      : N(h.N), q(h.q, h.q + sz(n)), qd(h.qd, h.qd + sz(n)), t(h.t, h.t + N),
        params(h.params, h.params + sz(np)), qdd(h.qdd ? sz(n) : 0), Qc_ideal(h.qdd ? sz(n) : 0),
        Qc_nonideal(h.qdd ? sz(n) : 0), lambda(h.qdd ? sz(m) : 0), status(h.status, h.status + N),
        rank(h.qdd ? N : 0), events(h.events, h.events + N),
        steps(h.steps, h.steps + N), t_stop(h.t_stop, h.t_stop + N),
        res_pos(h.res_pos, h.res_pos + N), res_vel(h.res_vel, h.res_vel + N),
        rank_drops(h.rank_drops, h.rank_drops + N), proj_fails(h.proj_fails, h.proj_fails + N),
        inconsistent(h.inconsistent, h.inconsistent + N) {}

  std::size_t sz(int rows) const { return std::size_t(rows) * std::size_t(N); }

  BatchView<Mo> view() {
    using thrust::raw_pointer_cast;
    return {N,
            raw_pointer_cast(q.data()),
            raw_pointer_cast(qd.data()),
            raw_pointer_cast(t.data()),
            raw_pointer_cast(params.data()),
            raw_pointer_cast(status.data()),
            raw_pointer_cast(qdd.data()),
            raw_pointer_cast(Qc_ideal.data()),
            raw_pointer_cast(Qc_nonideal.data()),
            raw_pointer_cast(lambda.data()),
            raw_pointer_cast(rank.data()),
            raw_pointer_cast(steps.data()),
            raw_pointer_cast(events.data()),
            raw_pointer_cast(t_stop.data()),
            raw_pointer_cast(res_pos.data()),
            raw_pointer_cast(res_vel.data()),
            raw_pointer_cast(rank_drops.data()),
            raw_pointer_cast(proj_fails.data()),
            raw_pointer_cast(inconsistent.data())};
  }

  void download_state(const BatchView<Mo>& h) const {
    thrust::copy(q.begin(), q.end(), h.q);
    thrust::copy(qd.begin(), qd.end(), h.qd);
    thrust::copy(t.begin(), t.end(), h.t);
    thrust::copy(status.begin(), status.end(), h.status);
    thrust::copy(steps.begin(), steps.end(), h.steps);
    thrust::copy(events.begin(), events.end(), h.events);
    thrust::copy(t_stop.begin(), t_stop.end(), h.t_stop);
    thrust::copy(res_pos.begin(), res_pos.end(), h.res_pos);
    thrust::copy(res_vel.begin(), res_vel.end(), h.res_vel);
    thrust::copy(rank_drops.begin(), rank_drops.end(), h.rank_drops);
    thrust::copy(proj_fails.begin(), proj_fails.end(), h.proj_fails);
    thrust::copy(inconsistent.begin(), inconsistent.end(), h.inconsistent);
  }
  void download_outputs(const BatchView<Mo>& h) const {
    thrust::copy(qdd.begin(), qdd.end(), h.qdd);
    thrust::copy(Qc_ideal.begin(), Qc_ideal.end(), h.Qc_ideal);
    thrust::copy(Qc_nonideal.begin(), Qc_nonideal.end(), h.Qc_nonideal);
    thrust::copy(lambda.begin(), lambda.end(), h.lambda);
    thrust::copy(rank.begin(), rank.end(), h.rank);
    thrust::copy(status.begin(), status.end(), h.status);
  }
};

struct IsFailed {
  UKB_HD bool operator()(std::int32_t s) const { return s != 0; }
};

// Evaluates every system; returns the number whose status is not ok.
template <Model Mo>
long evaluate(const BatchView<Mo>& host, typename Mo::Scalar rank_rtol, int block) {
  if (!host.qdd || !host.Qc_ideal || !host.Qc_nonideal || !host.lambda || !host.rank)
    throw std::invalid_argument("ukb: evaluate needs the batch's outputs (Batch::allocate_outputs)");
  DeviceBatch<Mo> d(host);
  const kernels::EvaluateBody<Mo> body{d.view(), rank_rtol};
  UKB_LAUNCH(kernels::launch_config(host.N, block), host.N, body);
  d.download_outputs(host);
  return thrust::count_if(d.status.begin(), d.status.end(), IsFailed{});
}

// Integrates every system (see kernels::IntegrateBody).
template <Model Mo>
void integrate(const BatchView<Mo>& host, const kernels::RunSettings<typename Mo::Scalar>& s,
               int block) {
  DeviceBatch<Mo> d(host);
  const kernels::IntegrateBody<Mo> body{d.view(), s};
  UKB_LAUNCH(kernels::launch_config(host.N, block), host.N, body);
  d.download_state(host);
}

}  // namespace ukb::UKB_CUDA_IMPL_NS
