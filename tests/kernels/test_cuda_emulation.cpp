// The CUDA backend's own source (kernels/ukb/cuda/engine_impl.hpp: device
// memory, upload, launch geometry, tail guard, download, reduction) compiled
// with g++ against Thrust's CPP backend, every thread of the launch run on
// the CPU. Compared with the CPU backend: identical bits expected (same
// kernels, same compiler), at sizes that do not divide the block size.
#include "engine_support.hpp"
#include "spring_block.hpp"  // examples/models: a model file, not a built-in model
#include "ukb/backends.hpp"
#include "ukb/cuda/launch.hpp"

#define UKB_LAUNCH(config, N, body) ::ukb::cuda::emulate_launch(config, N, body)
#define UKB_CUDA_IMPL_NS cuda_emulated
#include "ukb/cuda/engine_impl.hpp"

namespace ukb::test {
namespace {

TEST(CudaEmulation, LaunchCoversEverySystemOnceWithIdleTail) {
  for (int N : {1, 37, 127, 128, 129, 1003}) {
    for (int block : {32, 128, 256}) {
      const cuda::LaunchConfig c = cuda::launch_config(N, block);
      EXPECT_GE(c.grid * block, N);
      EXPECT_LT((c.grid - 1) * block, N);
      std::vector<int> hits(N, 0);
      cuda::emulate_launch(c, N, [&](int i) { ++hits.at(i); });
      for (int i = 0; i < N; ++i) ASSERT_EQ(hits[i], 1) << "N " << N << " block " << block;
    }
  }
}

TEST(CudaEmulation, OccupancyBlockSpreadsSmallEnsemblesAndKeepsTheBestOtherwise) {
  // 132 multiprocessors, a kernel whose best block is 352 threads: N = 10^6
  // takes it; N = 10^4 (76 systems a multiprocessor) takes 64, whole warps
  // that give every multiprocessor a block; N = 1, a warp.
  EXPECT_EQ(cuda::occupancy_block(1000000, 352, 132), 352);
  EXPECT_EQ(cuda::occupancy_block(10000, 352, 132), 64);
  EXPECT_EQ(cuda::occupancy_block(1, 352, 132), 32);
  EXPECT_EQ(cuda::occupancy_block(132 * 352, 352, 132), 352);
  EXPECT_EQ(cuda::occupancy_block(132 * 352 - 1, 352, 132), 352);
  // The launch then covers N with blocks no larger than the best one.
  for (int N : {1, 37, 10000, 46463, 1000000}) {
    const int b = cuda::occupancy_block(N, 352, 132);
    EXPECT_EQ(b % 32, 0);
    EXPECT_LE(b, 352);
    const cuda::LaunchConfig c = cuda::launch_config(N, b);
    EXPECT_GE(long(c.grid) * b, N);
    EXPECT_GE(c.grid, std::min(132, (N + 31) / 32));
  }
  // No block given: the emulation chooses one and still runs every system once.
  std::vector<int> hits(1003, 0);
  cuda::emulate_launch(cuda::launch_config(1003, 0), 1003, [&](int i) { ++hits.at(i); });
  for (int h : hits) ASSERT_EQ(h, 1);
}

TEST(CudaEmulation, EngineSourceMatchesCpuBackendBitwise) {
  for_each_model_template([]<template <class> class Model>() {
    using Mo = Model<double>;
    for (int N : {1, 37, 1003}) {
      SCOPED_TRACE(std::string(Mo::name) + " N=" + std::to_string(N));
      RandomBatch<Model> emu(N, 500 + N), cpu(N, 500 + N);
      const double rtol = policy::default_rank_rtol<double>();
      emu.batch.allocate_outputs();
      cuda_emulated::evaluate<Mo>(emu.batch.view(), {rtol}, {.cuda_block = 128});
      int failed = 0;
      for (int i = 0; i < N; ++i) failed += emu.batch.status(i) != Status::ok;
      EXPECT_EQ(failed, 0);
      ASSERT_EQ(evaluate(cpu.batch, Backend::cpu), 0);
      int diff = 0;
      for (int i = 0; i < N; ++i)
        for (int j = 0; j < Mo::n; ++j) diff += emu.batch.qdd(i, j) != cpu.batch.qdd(i, j);
      EXPECT_EQ(diff, 0);
      // An ensemble run's settings: events located, residuals monitored.
      const RunOptions run{.dt = 1e-3, .t_end = 0.05, .max_steps = 40};
      const RunSettings<double> s{1e-3, 0.05, 40, 30, 1e-10, rtol, true, true, {}, {},
                                  std::numeric_limits<double>::infinity()};
      cuda_emulated::integrate<Mo>(emu.batch.view(), s, {.cuda_block = 128});
      integrate(cpu.batch, Backend::cpu, run, 30);
      int mismatches = 0;
      for (int i = 0; i < N; ++i) {
        mismatches += !same_bits(emu.batch, i, cpu.batch, i, Mo::n);
        mismatches += emu.batch.steps(i) != cpu.batch.steps(i) ||
                      emu.batch.events(i) != cpu.batch.events(i) ||
                      emu.batch.status(i) != cpu.batch.status(i) ||
                      emu.batch.res_pos(i) != cpu.batch.res_pos(i) ||
                      emu.batch.res_vel(i) != cpu.batch.res_vel(i);
      }
      EXPECT_EQ(mismatches, 0);
      EXPECT_EQ(cpu.batch.steps(N - 1), 30) << "guard: the budget bounds the call";
      EXPECT_NE(emu.batch.q(N - 1, 0), emu.samples[N - 1].q(0)) << "guard: the last system (tail) moved";
    }
  });
}

TEST(CudaEmulation, AdaptiveStepsMatchCpuBackendBitwise) {
  // Dormand–Prince in the shared body: the emulated launch gives the CPU
  // backend's bits, the monitors of adaptive steps and the dense output too.
  for_each_model_template([]<template <class> class Model>() {
    using Mo = Model<double>;
    SCOPED_TRACE(Mo::name);
    RandomBatch<Model> emu(37, 560), cpu(37, 560);
    RunOptions run{.method = Method::dopri5, .dt = 0, .t_end = 0.3};
    run.rtol = 1e-8;
    run.atol = {1e-10};
    emu.batch.allocate_adaptive();
    emu.batch.allocate_dense();
    cpu.batch.allocate_dense();
    const RunSettings<double> s = resolve_run<double>(run, 25, HasConstraintRows<Mo>, Mo::name, Mo::n);
    cuda_emulated::integrate<Mo>(emu.batch.view(), s, {.cuda_block = 32});
    integrate(cpu.batch, Backend::cpu, run, 25);
    int mismatches = 0;
    for (int i = 0; i < 37; ++i) {
      mismatches += !same_bits(emu.batch, i, cpu.batch, i, Mo::n);
      mismatches += emu.batch.steps(i) != cpu.batch.steps(i) || emu.batch.rejected(i) != cpu.batch.rejected(i) ||
                    emu.batch.rhs_evals(i) != cpu.batch.rhs_evals(i) || emu.batch.h_next(i) != cpu.batch.h_next(i) ||
                    emu.batch.status(i) != cpu.batch.status(i) || emu.batch.events(i) != cpu.batch.events(i);
      for (int j = 0; j < 10 * Mo::n + 2; ++j) {
        const double a = emu.batch.dense(i, j), b = cpu.batch.dense(i, j);
        mismatches += !(a == b || (a != a && b != b));
      }
    }
    EXPECT_EQ(mismatches, 0);
    EXPECT_GT(cpu.batch.steps(36), 0) << "guard: the tail system took steps";
    EXPECT_GT(cpu.batch.t(36), 0.0);
  });
}

TEST(CudaEmulation, StabilisedRunsMatchCpuBackendBitwise) {
  // Baumgarte and projection run in the shared body: the emulated launch of
  // the CUDA host source gives the CPU backend's bits, counters included.
  for_each_model_template([]<template <class> class Model>() {
    using Mo = Model<double>;
    for (Stabilization st : {Stabilization::baumgarte, Stabilization::projection}) {
      SCOPED_TRACE(std::string(Mo::name) + " " + std::string(to_string(st)));
      RandomBatch<Model> emu(37, 550), cpu(37, 550);
      const RunOptions run{.dt = 1e-3, .t_end = 0.05, .max_steps = 40, .stabilization = st};
      const RunSettings<double> s = resolve_run<double>(run, 30, HasConstraintRows<Mo>, Mo::name, Mo::n);
      cuda_emulated::integrate<Mo>(emu.batch.view(), s, {.cuda_block = 32});
      integrate(cpu.batch, Backend::cpu, run, 30);
      int mismatches = 0;
      for (int i = 0; i < 37; ++i)
        mismatches += !same_bits(emu.batch, i, cpu.batch, i, Mo::n) ||
                      emu.batch.steps(i) != cpu.batch.steps(i) ||
                      emu.batch.rank_drops(i) != cpu.batch.rank_drops(i) ||
                      emu.batch.proj_fails(i) != cpu.batch.proj_fails(i) ||
                      emu.batch.res_pos(i) != cpu.batch.res_pos(i);
      EXPECT_EQ(mismatches, 0);
      EXPECT_EQ(cpu.batch.steps(36), 30) << "guard: the systems stepped";
    }
  });
}

// Integrates `emu` through the CUDA source (emulated) and `cpu` on the cpu
// backend with `run`; returns the systems whose state, steps, events or
// status differ, and the systems cpu left at rest.
template <class Mo>
std::pair<int, int> emulated_against_cpu(Batch<Mo>& emu, Batch<Mo>& cpu, const RunOptions& run) {
  const RunSettings<double> s =
      resolve_run<double>(run, std::numeric_limits<long>::max(), HasConstraintRows<Mo>, Mo::name, Mo::n);
  if (run.method == Method::dopri5) emu.allocate_adaptive(), cpu.allocate_adaptive();
  cuda_emulated::integrate<Mo>(emu.view(), s, {.cuda_block = 32});
  integrate(cpu, Backend::cpu, run);
  int mismatches = 0, at_rest = 0;
  for (int i = 0; i < cpu.size(); ++i) {
    mismatches += !same_bits(emu, i, cpu, i, Mo::n) || emu.steps(i) != cpu.steps(i) ||
                  emu.events(i) != cpu.events(i) || emu.status(i) != cpu.status(i);
    at_rest += cpu.status(i) == Status::at_rest;
  }
  return {mismatches, at_rest};
}

TEST(CudaEmulation, ModelFileMatchesCpuBackendBitwise) {
  // A model of the user's own (examples/models/spring_block.hpp: friction,
  // stick-slip events) through the CUDA backend's source as a model-file
  // plugin instantiates it (kernels/ukb/cuda/plugin.cuh).
  using Mo = SpringBlock<double>;
  const int N = 101;
  Batch<Mo> emu(N), cpu(N);
  for (int i = 0; i < N; ++i) {
    Mo::Params p;
    p.mu = 0.05 + 0.25 * i / N;
    const double ic[2] = {1.0 - 0.01 * i, 0.5};
    double q[2], qd[2];
    ASSERT_TRUE(Mo::initial_state(ic, p, q, qd));
    for (Batch<Mo>* b : {&emu, &cpu}) b->set_params(i, p), b->set_state(i, q, qd, 0.0);
  }
  const auto [mismatches, at_rest] = emulated_against_cpu(emu, cpu, RunOptions{.dt = 1e-3, .t_end = 5.0});
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(at_rest, N / 2) << "guard: the stick-slip events happened";
}

TEST(CudaEmulation, ASurfaceModelMatchesCpuBackendBitwiseWithBothMethods) {
  // puck_incline: friction against a 2-D sliding
  // velocity, its stops found by ukb::friction's event and finished by its
  // handler (which moves the time), under RK4 and dopri5.
  using Mo = models::PuckIncline<double>;
  const int N = 67;
  for (Method method : {Method::rk4, Method::dopri5}) {
    SCOPED_TRACE(method == Method::rk4 ? "rk4" : "dopri5");
    Batch<Mo> emu(N), cpu(N);
    for (int i = 0; i < N; ++i) {
      Mo::Params p;
      p.mu = std::tan(p.alpha) * (0.5 + 2.5 * i / N);
      const double ic[2] = {2.0, 3.0 * i / N};
      double q[3], qd[3];
      ASSERT_TRUE(Mo::initial_state(ic, p, q, qd));
      for (Batch<Mo>* b : {&emu, &cpu}) b->set_params(i, p), b->set_state(i, q, qd, 0.0);
    }
    const auto [mismatches, at_rest] = emulated_against_cpu(
        emu, cpu, RunOptions{.method = method, .dt = method == Method::rk4 ? 1e-3 : 0.0, .t_end = 1.5});
    EXPECT_EQ(mismatches, 0);
    if (method == Method::dopri5) {
      EXPECT_GT(at_rest, N / 3) << "guard: the pucks stopped";
    }
  }
}

TEST(CudaEmulation, FloatAndFailuresStayInTheirSystem) {
  RandomBatch<models::BeadOnRing, float> b(129, 600);
  auto p = b.batch.params(128);
  p.m = -1.0f;
  b.batch.set_params(128, p);
  const float inf = std::numeric_limits<float>::infinity();
  cuda_emulated::integrate<models::BeadOnRing<float>>(
      b.batch.view(), {1e-3f, inf, 1000, 10, 1e-6f, 1e-5f, false, false, {}, {}, std::numeric_limits<float>::infinity()},
      {.cuda_block = 64});
  EXPECT_EQ(b.batch.status(128), Status::failed_mass_matrix);
  EXPECT_EQ(b.batch.status(127), Status::ok);
}

TEST(CudaEmulation, TheDeviceTallyCountsWhatTheHostCounts) {
  // A batch kept on the device (Mirror), integrated in calls of 10 steps:
  // each call's tally, reduced on the device, has the active and failed
  // systems the host counts on the same batch, and the steps summed over
  // every system (what `ukb run` counts its progress by, without bringing
  // the batch back).
  using Mo = models::BeadOnRing<double>;
  RandomBatch<models::BeadOnRing> b(129, 601);
  auto p = b.batch.params(5);
  p.m = -1.0;  // fails at its first step
  b.batch.set_params(5, p);
  const RunOptions run{.dt = 1e-3, .t_end = 0.05};
  const RunSettings<double> s = resolve_run<double>(run, 10, HasConstraintRows<Mo>, Mo::name, Mo::n);
  cuda_emulated::Mirror<Mo> m(b.batch.size());
  m.upload(b.batch.view());
  long active = -1;
  for (int call = 1; call <= 6; ++call) {
    SCOPED_TRACE(call);
    m.integrate(s, {.cuda_block = 32});
    const Tally device = m.tally(s);
    m.download(b.batch.view());
    const Tally host = detail::tally(b.batch.view(), s);
    std::int64_t steps = 0;
    for (int i = 0; i < b.batch.size(); ++i) steps += b.batch.steps(i);
    EXPECT_EQ(device.active, host.active);
    EXPECT_EQ(device.failed, 1);
    EXPECT_EQ(device.steps, steps);
    if (call == 1) {
      EXPECT_EQ(device.steps, 128 * 10) << "guard: the 128 good systems take the call's 10 steps";
    }
    active = device.active;
  }
  EXPECT_EQ(active, 0) << "guard: the calls reach t_end";
}

}  // namespace
}  // namespace ukb::test
