// A model of our own (../models/rotating_hoop.hpp) in a program built
// against an installed ukb (find_package(ukb)):
//   custom_model                          a batch on the cpu backend checked
//                                         against the reference (and on cuda
//                                         against cpu where there is a GPU);
//                                         exit code 0 when they agree
//   custom_model CONFIG OUT [BACKEND]     `ukb run CONFIG` for the model
//                                         compiled in (ukb/run_model.hpp)
#include <cmath>
#include <cstdio>
#include <exception>
#include <optional>
#include <random>
#include <string>

#include "rotating_hoop.hpp"
#include "ukb/backends.hpp"  // the backends' definitions, for a model of our own
#include "ukb/cuda.hpp"
#include "ukb/engine.hpp"
#include "ukb/run_model.hpp"

using Hoop = RotatingHoop<double>;
static_assert(ukb::Model<Hoop>, "RotatingHoop must satisfy the model concept");

namespace {

// `ukb run CONFIG --out OUT [--backend BACKEND]` with the model compiled in.
int run_config(const std::string& config, const std::string& out, const char* backend) {
  try {
    ukb::run::Config c = ukb::run::load_config<Hoop>(config);
    if (backend) {
      const std::optional<ukb::Backend> b = ukb::parse_backend(backend);
      if (!b) return std::fprintf(stderr, "unknown backend %s\n", backend), 2;
      c.backend = *b;
    }
    const ukb::run::Outcome o = ukb::run::execute(c, {.out_dir = out});
    std::printf("%ld samples of %s on %s in %.3f s: results in %s/\n", o.samples, c.model->name.c_str(),
                std::string(ukb::to_string(c.backend)).c_str(), o.wall_s, o.out_dir.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_model: %s\n", e.what());
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 || argc == 4) return run_config(argv[1], argv[2], argc == 4 ? argv[3] : nullptr);
  const int N = 257;
  ukb::Batch<Hoop> cpu(N), ref(N);
  std::mt19937_64 rng(2026);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < N; ++i) {
    Hoop::Params p;
    p.R = 0.5 + u(rng);
    p.omega = 1 + 4 * u(rng);
    p.c = 0.5 * u(rng);
    // On the hoop at t = 0 (its plane is x-z): angle phi from the bottom.
    const double phi = 3 * u(rng) - 1.5, phid = 4 * u(rng) - 2;
    const double q[3] = {p.R * std::sin(phi), 0, -p.R * std::cos(phi)};
    const double qd[3] = {p.R * phid * std::cos(phi), p.R * p.omega * std::sin(phi),
                          p.R * phid * std::sin(phi)};
    for (auto* b : {&cpu, &ref}) {
      b->set_params(i, p);
      b->set_state(i, q, qd, 0.0);
    }
  }
  const double dt = 1e-3;
  const long steps = 500;
  const long failed = ukb::step(cpu, ukb::Backend::cpu, dt, steps).failed +
                      ukb::step(ref, ukb::Backend::reference, dt, steps).failed;
  double worst = 0, drift = 0, out_of_plane = 0;
  for (int i = 0; i < N; ++i) {
    double d = 0, r = 0;
    for (int j = 0; j < 3; ++j) {
      d += std::pow(cpu.q(i, j) - ref.q(i, j), 2) + std::pow(cpu.qd(i, j) - ref.qd(i, j), 2);
      r += std::pow(ref.q(i, j), 2) + std::pow(ref.qd(i, j), 2);
    }
    worst = std::max(worst, std::sqrt(d / r));
    const Hoop::Params p = cpu.params(i);
    const double radius = std::sqrt(std::pow(cpu.q(i, 0), 2) + std::pow(cpu.q(i, 1), 2) +
                                    std::pow(cpu.q(i, 2), 2));
    drift = std::max(drift, std::abs(radius - p.R));
    const double wt = p.omega * cpu.t(i);
    out_of_plane = std::max(out_of_plane, std::abs(-std::sin(wt) * cpu.q(i, 0) + std::cos(wt) * cpu.q(i, 1)));
  }
  std::printf("rotating_hoop: %d systems, %ld RK4 steps of %g s on the cpu backend\n", N, steps, dt);
  std::printf("  failed systems: %ld\n", failed);
  std::printf("  max relative difference from the reference backend: %.3e\n", worst);
  std::printf("  max constraint drift: |q| - R = %.3e, out of the hoop's plane = %.3e\n", drift,
              out_of_plane);
  // The same systems with projection onto the (time-dependent) constraint
  // manifold after every step: the drift goes to round-off; the first 32
  // are checked against the reference backend's own projection.
  const int M = 32;
  ukb::Batch<Hoop> pc(N), pr(M);
  for (int i = 0; i < N; ++i) {
    double q[3], qd[3];
    for (int j = 0; j < 3; ++j) q[j] = ref.q(i, j), qd[j] = ref.qd(i, j);
    pc.set_params(i, ref.params(i));
    pc.set_state(i, q, qd, ref.t(i));
    if (i < M) pr.set_params(i, ref.params(i)), pr.set_state(i, q, qd, ref.t(i));
  }
  const ukb::RunOptions proj{.dt = dt, .t_end = 1.0, .stabilization = ukb::Stabilization::projection};
  ukb::integrate(pc, ukb::Backend::cpu, proj);
  ukb::integrate(pr, ukb::Backend::reference, proj);
  double proj_drift = 0, proj_worst = 0;
  long proj_bad = 0;
  for (int i = 0; i < N; ++i) {
    double phi[2], phid[2];
    const double q[3] = {pc.q(i, 0), pc.q(i, 1), pc.q(i, 2)}, qd[3] = {pc.qd(i, 0), pc.qd(i, 1), pc.qd(i, 2)};
    Hoop::constraint_rows(q, qd, pc.t(i), pc.params(i), phi, phid);
    for (double e : {phi[0], phi[1], phid[0], phid[1]}) proj_drift = std::max(proj_drift, std::abs(e));
    proj_bad += pc.status(i) != ukb::Status::ok || pc.proj_fails(i) != 0;
    for (int j = 0; i < M && j < 3; ++j)
      proj_worst = std::max(proj_worst, std::abs(pc.q(i, j) - pr.q(i, j)) + std::abs(pc.qd(i, j) - pr.qd(i, j)));
  }
  std::printf("  with projection, %g s more: max |phi|, |phi'| = %.3e; max difference from the "
              "reference (%d systems) %.3e; failed or unconverged systems: %ld\n",
              proj.t_end - steps * dt, proj_drift, M, proj_worst, proj_bad);
  bool ok = failed == 0 && worst < 1e-10 && drift < 1e-6 && out_of_plane < 1e-6 &&
            proj_drift < 1e-12 && proj_worst < 1e-10 && proj_bad == 0;
  // The cuda backend (ukb_add_model in CMakeLists.txt) against cpu, where
  // there is a GPU.
  std::string why;
  if (ukb::cuda::device_count(&why) > 0) {
    ukb::Batch<Hoop> gpu(N);
    for (int i = 0; i < N; ++i) {
      double q[3], qd[3];
      for (int j = 0; j < 3; ++j) q[j] = ref.q(i, j), qd[j] = ref.qd(i, j);
      gpu.set_params(i, ref.params(i));
      gpu.set_state(i, q, qd, ref.t(i));
    }
    ukb::integrate(gpu, ukb::Backend::cuda, proj);
    double gpu_worst = 0;
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < 3; ++j) gpu_worst = std::max(gpu_worst, std::abs(gpu.q(i, j) - pc.q(i, j)));
    std::printf("  cuda backend, the same systems with projection: max difference from cpu %.3e\n", gpu_worst);
    ok = ok && gpu_worst < 1e-9;
  } else {
    std::printf("  cuda backend: not run (%s)\n", why.c_str());
  }
  std::printf("%s\n", ok ? "OK: cpu backend agrees with the reference" : "MISMATCH");
  return ok ? 0 : 1;
}
