// The CUDA backend's own source (kernels/ukb/cuda/engine_impl.hpp: device
// memory, upload, launch geometry, tail guard, download, reduction) compiled
// with g++ against Thrust's CPP backend, every thread of the launch run on
// the CPU. Compared with the CPU backend: identical bits expected (same
// kernels, same compiler), at sizes that do not divide the block size.
// The team route (kernels/ukb/kernels/team_run.hpp) runs in these launches
// for the models with a team (the chains), each team as one member
// (team_support.hpp's SoloTeam); CudaEmulation.TeamRoute* run it with
// host threads per member, for every model.
#include <array>

#include "engine_support.hpp"
#include "spring_block.hpp"  // examples/models: a model file, not a built-in model
#include "ukb/backends.hpp"
#include "team_support.hpp"
#include "ukb/cuda/launch.hpp"

#define UKB_LAUNCH(config, N, body) ::ukb::cuda::emulate_launch(config, N, body)
#define UKB_LAUNCH_TEAM(block, N, body) ::ukb::test::emulate_team_launch(block, N, body)
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

// Sets every system i of a and b to the model's initial state from the
// natural initial quantities init(i, p) gives (setting the parameters p).
template <class Mo, class Init>
void set_both(Batch<Mo>& a, Batch<Mo>& b, const Init& init) {
  for (int i = 0; i < a.size(); ++i) {
    typename Mo::Params p;
    const std::array<double, 2> ic = init(i, p);
    double q[Mo::n], qd[Mo::n];
    ASSERT_TRUE(Mo::initial_state(ic.data(), p, q, qd)) << "system " << i;
    for (Batch<Mo>* x : {&a, &b}) x->set_params(i, p), x->set_state(i, q, qd, 0.0);
  }
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
  set_both(emu, cpu, [&](int i, Mo::Params& p) {
    p.mu = 0.05 + 0.25 * i / N;
    return std::array<double, 2>{1.0 - 0.01 * i, 0.5};
  });
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
    set_both(emu, cpu, [&](int i, Mo::Params& p) {
      p.mu = std::tan(p.alpha) * (0.5 + 2.5 * i / N);
      return std::array<double, 2>{2.0, 3.0 * i / N};
    });
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

// The systems of two batches whose state, status, monitors or dense output
// (every field of role state, monitor, adaptive or dense that both have)
// differ in a bit.
template <class Mo>
int differing_systems(const Batch<Mo>& a, const Batch<Mo>& b) {
  const BatchView<Mo> x = const_cast<Batch<Mo>&>(a).view(), y = const_cast<Batch<Mo>&>(b).view();
  int differ = 0;
  for (int i = 0; i < x.N; ++i) {
    bool d = false;
#define UKB_X(name, type, shape, rows, role, init, column, when, doc)                                     \
  if ((UKB_FIELD_IS(role, state) || UKB_FIELD_IS(role, monitor) || UKB_FIELD_IS(role, adaptive) ||           \
       UKB_FIELD_IS(role, dense)) && x.name && y.name)                                                      \
    for (int j = 0; j < (rows); ++j)                                                                        \
      d = d || std::memcmp(&x.name[soa(j, i, x.N)], &y.name[soa(j, i, y.N)], sizeof(x.name[0])) != 0;
    {
      [[maybe_unused]] constexpr int n = Mo::n, m = Mo::m, np = param_count<Mo>(), dn = 10 * n + 2;
      UKB_FIELDS(UKB_X)
    }
#undef UKB_X
    differ += d;
  }
  return differ;
}

// Integrates `team` by the team route's body (TeamIntegrateBody), its
// launch emulated with teams run as `mode` says, and `cpu` on the cpu
// backend, with `run` for `budget` steps; returns the systems that differ
// (differing_systems).
template <class Mo>
int team_route_against_cpu(Batch<Mo>& team, Batch<Mo>& cpu, const RunOptions& run, long budget, TeamMode mode) {
  using T = typename Mo::Scalar;
  const RunSettings<T> s = resolve_run<T>(run, budget, HasConstraintRows<Mo>, Mo::name, Mo::n);
  emulated_team_mode() = mode;
  if (run.method == Method::dopri5) {
    for (Batch<Mo>* b : {&team, &cpu}) b->allocate_adaptive(), b->allocate_dense();
    emulate_team_launch(64, team.size(), kernels::TeamIntegrateBody<Mo, kernels::AdaptiveRun<Mo>>{team.view(), s});
  } else {
    emulate_team_launch(64, team.size(), kernels::TeamIntegrateBody<Mo>{team.view(), s});
  }
  emulated_team_mode() = {};
  integrate(cpu, Backend::cpu, run, budget);
  return differing_systems(team, cpu);
}

TEST(CudaEmulation, TeamRouteMatchesCpuBackendBitwise) {
  // Every model's RK4 and Dormand–Prince runs by a team per system
  // (team_run.hpp), its members host threads: free (2), and 3 taking turns
  // in reverse rank order (a missing sync then shows every time; with
  // projection in rank order too), on shared
  // memory that starts as NaN: the cpu backend's bits, state, status, every
  // counter and the dense output. With events located and residuals
  // monitored; with projection after every step (the team projects, on the
  // lead's command) and Baumgarte; Dormand–Prince from its automatic first
  // step (the lead's run has the team evaluate at its start and at the
  // initial step's probe).
  for_each_model_template([]<template <class> class Model>() {
    using Mo = Model<double>;
    std::vector<RunOptions> runs{RunOptions{.dt = 1e-3, .t_end = 0.05},
                                 RunOptions{.method = Method::dopri5, .dt = 0, .t_end = 0.05}};
    if constexpr (HasConstraintRows<Mo>) {
      runs.push_back(RunOptions{.dt = 1e-3, .t_end = 0.05, .stabilization = Stabilization::projection});
      runs.push_back(RunOptions{.dt = 1e-3, .t_end = 0.05, .stabilization = Stabilization::baumgarte});
      runs.push_back(
          RunOptions{.method = Method::dopri5, .dt = 0, .t_end = 0.05, .stabilization = Stabilization::projection});
    }
    for (const RunOptions& run : runs) {
      // Turns in rank order too where the lead projects: it then goes on
      // first after the team's projection.
      std::vector<TeamMode> modes{TeamMode{2, 0}, TeamMode{3, -1}};
      if (run.stabilization == Stabilization::projection) modes.push_back(TeamMode{3, 1});
      for (const TeamMode mode : modes) {
        SCOPED_TRACE(std::string(Mo::name) + (run.method == Method::dopri5 ? " dopri5 " : " rk4 ") +
                     std::string(to_string(run.stabilization)) + " team of " + std::to_string(mode.size) +
                     (mode.turns < 0 ? " in reverse turns" : mode.turns > 0 ? " in turns" : ""));
        RandomBatch<Model> team(3, 620), cpu(3, 620);
        EXPECT_EQ(team_route_against_cpu(team.batch, cpu.batch, run, 12, mode), 0);
        EXPECT_GE(cpu.batch.steps(2), run.method == Method::rk4 ? 12 : 2) << "guard: the systems stepped";
      }
    }
    if constexpr (HasConstraintRows<Mo> && HasResidual<Mo>) {
      // A residual limit that every projected state fails: the lead
      // restores the state before the step right after the team's
      // projection, and the system stops there; in turns with the lead first.
      SCOPED_TRACE(std::string(Mo::name) + " projection against a residual limit, in turns");
      RandomBatch<Model> team(3, 621), cpu(3, 621);
      const RunOptions run{
          .dt = 1e-3, .t_end = 0.05, .stabilization = Stabilization::projection, .residual_limit = 1e-300};
      EXPECT_EQ(team_route_against_cpu(team.batch, cpu.batch, run, 12, TeamMode{3, 1}), 0);
      int failed = 0;
      for (int i = 0; i < 3; ++i) failed += cpu.batch.status(i) == Status::failed_residual;
      EXPECT_GT(failed, 0) << "guard: the limit failed a projected state";
    }
  });
}

TEST(CudaEmulation, TeamRouteLocatesEventsAndStopsLikeTheCpuBackend) {
  // Stick-slip by teams: a model file's block on a rough spring table
  // (bisected events, the handler stops it) and puck_incline (a handler
  // that moves the time; RK4, and Dormand–Prince, which locates the stop on
  // its dense output), by free teams of 2 (TeamRouteMatchesCpuBackendBitwise
  // takes turns; their syncs are the same).
  {
    using Mo = SpringBlock<double>;
    const int N = 4;
    for (const TeamMode mode : {TeamMode{2, 0}}) {
      SCOPED_TRACE("spring_block, team of " + std::to_string(mode.size));
      Batch<Mo> team(N), cpu(N);
      set_both(team, cpu, [&](int i, Mo::Params& p) {
        p.mu = 0.1 + 0.3 * i / N;
        return std::array<double, 2>{1.0 - 0.1 * i, 0.5};
      });
      EXPECT_EQ(team_route_against_cpu(team, cpu, RunOptions{.dt = 2e-2, .t_end = 4.0}, 1000, mode), 0);
      int stopped = 0, events = 0;
      for (int i = 0; i < N; ++i) stopped += cpu.status(i) == Status::at_rest, events += cpu.events(i);
      EXPECT_GT(stopped, N / 2) << "guard: the blocks stuck";
      EXPECT_GT(events, stopped) << "guard: events that resumed the motion too";
    }
  }
  for (Method method : {Method::rk4, Method::dopri5}) {
    using Mo = models::PuckIncline<double>;
    const int N = 4;
    SCOPED_TRACE(method == Method::rk4 ? "puck_incline, rk4" : "puck_incline, dopri5");
    Batch<Mo> team(N), cpu(N);
    set_both(team, cpu, [&](int i, Mo::Params& p) {
      p.mu = std::tan(p.alpha) * (3.0 + 3.0 * i / N);
      return std::array<double, 2>{2.0, 1.0 * i / N};
    });
    const RunOptions run{.method = method, .dt = method == Method::rk4 ? 2e-2 : 0.0, .t_end = 1.5};
    EXPECT_EQ(team_route_against_cpu(team, cpu, run, 1000, TeamMode{2, 0}), 0);
    int stopped = 0;
    for (int i = 0; i < N; ++i) stopped += cpu.status(i) == Status::at_rest;
    EXPECT_GE(stopped, 2) << "guard: the pucks stopped";
  }
}

// A model that declares its team (docs/adding-a-model.md: `cuda_team`).
struct RingInTeamsOf4 : models::BeadOnRing<double> {
  static constexpr int cuda_team = 4;
};

TEST(CudaEmulation, TheChainsTakeTheTeamRouteUnlessTurnedOff) {
  // planar_chain_6 has a team (kernels::team_size); the Mirror's RK4 runs it
  // on the team route by default and on the thread route with cuda_teams
  // off: both the cpu backend's bits (the emulation's teams are one
  // member each, SoloTeam: team.hpp's team code on one thread).
  using Mo = models::PlanarChain6<double>;
  static_assert(kernels::team_size<Mo>() == 8 && kernels::team_size<models::PlanarChain12<float>>() == 16 &&
                kernels::team_size<models::BeadOnRing<double>>() == 1 && kernels::team_size<RingInTeamsOf4>() == 4);
  const RunOptions run{.dt = 1e-3, .t_end = 0.05};
  const RunSettings<double> s = resolve_run<double>(run, 20, HasConstraintRows<Mo>, Mo::name, Mo::n);
  RandomBatch<models::PlanarChain6> teams(37, 630), threads(37, 630), cpu(37, 630);
  const long launches = emulated_team_launches();
  cuda_emulated::integrate<Mo>(teams.batch.view(), s, {.cuda_block = 24});
  EXPECT_EQ(emulated_team_launches(), launches + 1) << "the team route ran";
  cuda_emulated::integrate<Mo>(threads.batch.view(), s, {.cuda_block = 32, .cuda_teams = false});
  EXPECT_EQ(emulated_team_launches(), launches + 1) << "the thread route ran";
  integrate(cpu.batch, Backend::cpu, run, 20);
  EXPECT_EQ(differing_systems(teams.batch, cpu.batch), 0);
  EXPECT_EQ(differing_systems(threads.batch, cpu.batch), 0);
  EXPECT_EQ(cpu.batch.steps(36), 20) << "guard: the tail system stepped";
}

}  // namespace
}  // namespace ukb::test
