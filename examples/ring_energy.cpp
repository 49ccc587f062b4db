// Example of the C++ API: a bead released at rest level with the centre of a
// rough ring, integrated with the reference backend's RK4 driver. Prints the
// angle from the bottom, the angular speed and the mechanical energy, which
// friction drains.
//
//   build/bin/ukb_example_ring_energy [mu] [t_end]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ukb/models/bead_on_ring.hpp"
#include "ukb/reference.hpp"

int main(int argc, char** argv) {
  using Ring = ukb::models::BeadOnRing<double>;
  Ring::Params p;  // m = 1, R = 1, g = 9.81
  p.mu = argc > 1 ? std::atof(argv[1]) : 0.2;
  const double t_end = argc > 2 ? std::atof(argv[2]) : 1.0, dt = 1e-3;

  // Released at rest at angle pi/2 (x = R, y = 0).
  ukb::reference::State s{Eigen::Vector2d(p.R, 0.0), Eigen::Vector2d(0.0, 0.0), 0.0};
  auto energy = [&](const ukb::reference::State& x) {
    return 0.5 * p.m * x.qd.squaredNorm() + p.m * p.g * x.q(1);
  };
  const double e0 = energy(s);
  std::printf("# bead on a ring, R = %g m, mu = %g, released at rest at theta = pi/2\n", p.R, p.mu);
  std::printf("%8s %12s %12s %14s\n", "t [s]", "theta [rad]", "theta' [1/s]", "E - E0 [J]");
  long k = 0;
  const ukb::Status st = ukb::reference::integrate_rk4(
      ukb::reference::accel_fn<Ring>(p), s, dt, std::lround(t_end / dt),
      [&](const ukb::reference::State& x) {
        if (++k % 100 != 0) return;
        const double theta = std::atan2(x.q(0), -x.q(1));
        const double omega = (x.q(0) * x.qd(1) - x.q(1) * x.qd(0)) / x.q.squaredNorm();
        std::printf("%8.3f %12.6f %12.6f %14.6e\n", x.t, theta, omega, energy(x) - e0);
      });
  if (st != ukb::Status::ok) {
    std::fprintf(stderr, "integration failed: %s\n", std::string(ukb::to_string(st)).c_str());
    return 1;
  }
  return 0;
}
