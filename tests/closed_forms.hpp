// Closed forms derived by hand, shared by the tests (see test_seeds.cpp).
#pragma once

#include <Eigen/Dense>
#include <cmath>

namespace ukb::test {

// Bead on a ring (Udwadia 2000, section 5), Cartesian closed form, derived
// with a Lagrange multiplier. With v^2 = x'^2 + y'^2, R^2 = x^2 + y^2 and
// k = g y - v^2, the constraint x x'' + y y'' = -v^2 gives the ideal normal
// force m k (x, y) / R^2 (magnitude m |k| / R), so the friction per unit mass
// is f = -mu |k| / R * v / |v|. The constraint force removes the radial part
// of f; on the manifold (x x' + y y' = 0) there is none, and
//   x'' =      k x / R^2 - mu |k| x' / (R |v|)
//   y'' = -g + k y / R^2 - mu |k| y' / (R |v|)          (eq. 39)
// Off the manifold the radial part f.(x,y)/R^2 (x,y) is subtracted.
inline Eigen::VectorXd ring_closed_form(double g, double mu, double x, double y, double xd,
                                        double yd) {
  const double R2 = x * x + y * y, R = std::sqrt(R2), v2 = xd * xd + yd * yd, v = std::sqrt(v2);
  const double k = g * y - v2;
  const double fx = -mu * std::abs(k) * xd / (R * v), fy = -mu * std::abs(k) * yd / (R * v);
  const double radial = (fx * x + fy * y) / R2;
  return Eigen::VectorXd{{k * x / R2 + fx - radial * x, -g + k * y / R2 + fy - radial * y}};
}

}  // namespace ukb::test
