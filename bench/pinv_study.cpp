// How the kernels apply B^+: accuracy, rank decisions and cost of one-sided
// Jacobi SVD, of the plain alternative (Cholesky of the Gram matrix
// G = B B^T with diagonal pivoting, B^+ y = B^T G^+ y), of the kernels'
// PseudoInverse (Gram–Cholesky where a bound certifies it, else Jacobi) and
// of the reference (Eigen's dynamic JacobiSVD).
//   build/bin/ukb_pinv_study
// Prints a Markdown table (bench/README.md quotes it).
#include <Eigen/Dense>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "ukb/kernels/linalg.hpp"
#include "ukb/reference.hpp"

namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

// The alternative: pivoted Cholesky of G = B B^T, pivots at or below
// rtol^2 * max(diag G) dropped (the singular-value rule squared).
template <int M, int N>
struct GramCholesky {
  double L[M * M];
  int perm[M];
  int rank = 0;
  const double* B;

  void factor(const double* b, double rtol) {
    B = b;
    double G[M * M];
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < M; ++j) {
        double s = 0;
        for (int k = 0; k < N; ++k) s += B[i * N + k] * B[j * N + k];
        G[i * M + j] = s;
      }
    for (int i = 0; i < M; ++i) perm[i] = i;
    double dmax = 0;
    for (int i = 0; i < M; ++i) dmax = std::max(dmax, G[i * M + i]);
    rank = 0;
    for (int j = 0; j < M; ++j) {
      int p = j;  // largest remaining diagonal
      for (int i = j + 1; i < M; ++i)
        if (G[perm[i] * M + perm[i]] > G[perm[p] * M + perm[p]]) p = i;
      std::swap(perm[j], perm[p]);
      for (int k = 0; k < j; ++k) std::swap(L[j * M + k], L[p * M + k]);
      const int pj = perm[j];
      if (!(G[pj * M + pj] > rtol * rtol * dmax)) break;
      const double l = std::sqrt(G[pj * M + pj]);
      L[j * M + j] = l;
      for (int i = j + 1; i < M; ++i) {
        const int pi = perm[i];
        L[i * M + j] = G[pi * M + pj] / l;
      }
      for (int i = j + 1; i < M; ++i)  // Schur complement
        for (int k = j + 1; k <= i; ++k) {
          const int pi = perm[i], pk = perm[k];
          G[pi * M + pk] -= L[i * M + j] * L[k * M + j];
          G[pk * M + pi] = G[pi * M + pk];
        }
      ++rank;
    }
  }
  // x = B^T z with G z = y on the leading rank x rank block (basic solution).
  void apply(const double* y, double* x) const {
    double z[M] = {}, w[M];
    for (int i = 0; i < rank; ++i) {
      double s = y[perm[i]];
      for (int k = 0; k < i; ++k) s -= L[i * M + k] * w[k];
      w[i] = s / L[i * M + i];
    }
    for (int i = rank - 1; i >= 0; --i) {
      double s = w[i];
      for (int k = i + 1; k < rank; ++k) s -= L[k * M + i] * z[perm[k]];
      z[perm[i]] = s / L[i * M + i];
    }
    for (int k = 0; k < N; ++k) {
      double s = 0;
      for (int i = 0; i < M; ++i) s += B[i * N + k] * z[i];
      x[k] = s;
    }
  }
};

// B = U diag(s) V^T with singular values from 1 down to 1/cond, the last
// `deficient` of them exactly 0.
MatrixXd make_matrix(std::mt19937_64& rng, int m, int n, double cond, int deficient) {
  std::normal_distribution<double> g;
  MatrixXd X(m, m), Y(n, n);
  for (int i = 0; i < m * m; ++i) X.data()[i] = g(rng);
  for (int i = 0; i < n * n; ++i) Y.data()[i] = g(rng);
  const MatrixXd U = Eigen::HouseholderQR<MatrixXd>(X).householderQ();
  const MatrixXd V = Eigen::HouseholderQR<MatrixXd>(Y).householderQ();
  MatrixXd S = MatrixXd::Zero(m, n);
  const int r = m - deficient;
  for (int i = 0; i < r; ++i) S(i, i) = std::pow(cond, -double(i) / std::max(1, r - 1));
  return U * S * V.transpose();
}

template <int M, int N>
void study(const char* label) {
  std::mt19937_64 rng(7);
  const double rtol = 1e-10;
  const int trials = 200;
  for (const auto& [cond, deficient] : {std::pair{1e1, 0}, {1e2, 0}, {1e6, 0}, {1e2, 1}}) {
    double err_j = 0, err_g = 0, err_h = 0;
    int rank_ok_j = 0, rank_ok_g = 0, rank_ok_h = 0, gram_h = 0;
    for (int t = 0; t < trials; ++t) {
      const MatrixXd B = make_matrix(rng, M, N, cond, deficient);
      Eigen::Matrix<double, M, N, Eigen::RowMajor> Br = B;
      VectorXd y = VectorXd::Random(M);
      y = B * (B.transpose() * y);  // consistent right-hand side
      int rref = 0;
      const VectorXd xref = ukb::reference::pseudo_inverse(B, rtol, &rref) * y;
      ukb::kernels::PseudoInverse<M, N, double> jp, hp;
      jp.factor(Br.data(), rtol, false);
      hp.factor(Br.data(), rtol);
      GramCholesky<M, N> gc;
      gc.factor(Br.data(), rtol);
      double xj[N], xg[N], xh[N];
      jp.apply(y.data(), xj);
      gc.apply(y.data(), xg);
      hp.apply(y.data(), xh);
      double dj = 0, dg = 0, dh = 0;
      for (int k = 0; k < N; ++k) {
        dj += (xj[k] - xref(k)) * (xj[k] - xref(k));
        dg += (xg[k] - xref(k)) * (xg[k] - xref(k));
        dh += (xh[k] - xref(k)) * (xh[k] - xref(k));
      }
      err_j = std::max(err_j, std::sqrt(dj) / xref.norm());
      err_g = std::max(err_g, std::sqrt(dg) / xref.norm());
      err_h = std::max(err_h, std::sqrt(dh) / xref.norm());
      rank_ok_j += jp.rank == rref;
      rank_ok_g += gc.rank == rref;
      rank_ok_h += hp.rank == rref;
      gram_h += hp.gram;
    }
    // Cost per factorisation + one application, well-conditioned input.
    const MatrixXd B = make_matrix(rng, M, N, cond, deficient);
    Eigen::Matrix<double, M, N, Eigen::RowMajor> Br = B;
    const VectorXd y = VectorXd::Ones(M);
    double sink = 0;
    auto time = [&](auto&& f) {
      const int reps = 20000;
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) sink += f();
      return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / reps;
    };
    const double tj = time([&] {
      ukb::kernels::PseudoInverse<M, N, double> p;
      p.factor(Br.data(), rtol, false);
      double x[N];
      p.apply(y.data(), x);
      return x[0];
    });
    const double tg = time([&] {
      GramCholesky<M, N> p;
      p.factor(Br.data(), rtol);
      double x[N];
      p.apply(y.data(), x);
      return x[0];
    });
    const double th = time([&] {
      ukb::kernels::PseudoInverse<M, N, double> p;
      p.factor(Br.data(), rtol);
      double x[N];
      p.apply(y.data(), x);
      return x[0];
    });
    const double tr = time([&] { return (ukb::reference::pseudo_inverse(B, rtol) * y)(0); });
    std::printf("| %s | %.0e | %d | %.1e | %.1e | %.1e | %d/%d | %d/%d | %d/%d | %d/%d | %.0f | %.0f | %.0f | %.0f |\n",
                label, cond, deficient, err_j, err_g, err_h, rank_ok_j, trials, rank_ok_g, trials,
                rank_ok_h, trials, gram_h, trials, tj, tg, th, tr);
    if (sink == 42) std::printf(" ");
  }
}

}  // namespace

int main() {
  std::printf("| B (m x n) | cond | rank drop | Jacobi: max rel. err | Gram-Cholesky: max rel. err "
              "| kernels: max rel. err | Jacobi: rank right | Gram-Cholesky: rank right "
              "| kernels: rank right | kernels: Gram route taken | Jacobi [ns] | Gram-Cholesky [ns] "
              "| kernels [ns] | reference [ns] |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  study<2, 2>("2 x 2");
  study<3, 6>("3 x 6");
  study<6, 12>("6 x 12");
  study<12, 24>("12 x 24");
  return 0;
}
