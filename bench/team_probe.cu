// Issue 22's first measurement of teams of threads per system and of the
// cuSOLVER/cuBLAS batched route: the linear algebra of one Udwadia–Kalaba
// evaluation's Gram route,
//     L = chol(M),  B = A L^{-T},  G = B B^T,  chol(G),
// for the chains of the workloads W2, W3, W5 and W6 (planar_chain_6, 12,
// 24, 48) at their workload states, on the GPU, by
//   - one thread per system, its matrices in local arrays (linalg.hpp's
//     kernels, as every evaluation of the engine runs them today), and
//   - a team of S = 4, 8, 16 or 32 threads of a warp per system, its
//     matrices in shared memory (team.hpp on cuda/team.cuh's tiles), and
//   - the libraries (issue 22's item 3): the inputs written to global
//     memory, then cuSOLVER's potrfBatched, cuBLAS's trsmBatched and
//     gemmStridedBatched over the whole ensemble.
// Each computes M and A from the state, as the engine does (member 0 of a
// team calls the model), and writes 1 / L_ii of chol(G) per system. The
// table gives systems per second for each route, its speed-up over one
// thread, and the largest difference of its outputs from the thread's,
// relative to the largest output (0 for a team when the bits agree: the
// same operations in the same order, which Kernels.Team* in the test suite
// checks on the CPU; round-off for the libraries' other algorithms). Not
// the whole evaluation: the vectors, the pseudo-inverse's application and
// the RK4 update are left out, so a speed-up here bounds what a route can
// give the engine's kernels: compare with 4 x the workload's RK4
// system-steps/s (four evaluations a step) of ukb_bench_workloads for the
// whole evaluation by one thread.
//
// A second table times whole RK4 steps (the engine's evaluation and
// stepper, kernels/ukb/kernels/rk4.hpp: four evaluations and the stage
// updates) for the chains of W2 and W3: one thread per system (its arrays
// in registers and local memory, as the engine's kernels) against a team
// per system with the step's workspace (Rk4Workspace) and the state in
// shared memory, `probe_steps` steps per launch from the same start (the
// workloads' states, the models' default parameters, as the first table);
// the outputs are the states after them.
//
//   build/bin/ukb_team_probe [--json FILE] [--quick]
//
// Built with -DUKB_BENCH_GPU_STUDY=ON and CUDA (bench/gpu.sh). Exit code 2
// without a usable GPU, 1 when no row could be measured.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ukb/cuda/team.cuh"
#include "ukb/kernels/linalg.hpp"
#include "ukb/kernels/rk4.hpp"
#include "ukb/kernels/team.hpp"
#include "workloads.hpp"

namespace {

using namespace ukb;

// A CUDA error ends the probe of one chain and precision (its row says
// why), not the others.
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// What a team shares: one system's matrices and vectors.
template <class Mo>
struct Shared {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m;
  T L[n * n], B[m * n], G[m * m], rd[n], rg[m], b[m], x[n], v[n];
};

// The route's result of system i: 1 / L_ii of chol(G), NaN where a
// factorisation failed.
template <class Mo>
__global__ void thread_route(const typename Mo::Scalar* q, const typename Mo::Scalar* qd, int N,
                             typename Mo::Scalar* out) {
  using T = typename Mo::Scalar;
  constexpr int n = Mo::n, m = Mo::m;
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N) return;
  T x[n], v[n], L[n * n], rd[n], B[m * n], b[m], G[m * m], rg[m];
  for (int j = 0; j < n; ++j) x[j] = q[long(j) * N + i], v[j] = qd[long(j) * N + i];
  const typename Mo::Params p{};
  Mo::mass(x, T(0), p, L);
  Mo::constraints(x, v, T(0), p, B, b);
  int bad = kernels::cholesky<n>(L, rd);
  if (!bad) {
    kernels::solve_lower_rows<n, m>(L, rd, B);
    kernels::team_gram<m, n>(kernels::SerialTeam{}, B, G);
    bad = kernels::cholesky<m>(G, rg);
  }
  for (int k = 0; k < m; ++k) out[long(k) * N + i] = bad ? T(NAN) : rg[k];
}

template <class Mo, int S>
__global__ void team_route(const typename Mo::Scalar* q, const typename Mo::Scalar* qd, int N,
                           typename Mo::Scalar* out, int teams_per_block) {
  using T = typename Mo::Scalar;
  constexpr int n = Mo::n, m = Mo::m;
  extern __shared__ double smem[];  // double: aligned for either scalar
  const ukb::cuda::TileTeam<S> team = ukb::cuda::this_tile<S>();
  const int t = threadIdx.x / S;
  const long i = long(blockIdx.x) * teams_per_block + t;
  if (i >= N) return;  // the whole team: one system per team
  Shared<Mo>& w = reinterpret_cast<Shared<Mo>*>(smem)[t];
  for (int j = team.rank(); j < n; j += S) w.x[j] = q[long(j) * N + i], w.v[j] = qd[long(j) * N + i];
  team.sync();
  if (team.rank() == 0) {
    const typename Mo::Params p{};
    Mo::mass(w.x, T(0), p, w.L);
    Mo::constraints(w.x, w.v, T(0), p, w.B, w.b);
  }
  team.sync();
  int bad = kernels::team_cholesky<n>(team, w.L, w.rd);
  if (!bad) {
    kernels::team_solve_lower_rows<n, m>(team, w.L, w.rd, w.B);
    kernels::team_gram<m, n>(team, w.B, w.G);
    bad = kernels::team_cholesky<m>(team, w.G, w.rg);
  }
  for (int k = team.rank(); k < m; k += S) out[long(k) * N + i] = bad ? T(NAN) : w.rg[k];
}

// Whole RK4 steps: `steps` steps of the workload's dt from (q, qd) into
// (qo, qdo) per system; NaN there where a step failed.
constexpr int probe_steps = 10;

template <class Mo>
__global__ void thread_steps(const typename Mo::Scalar* q, const typename Mo::Scalar* qd, int N,
                             typename Mo::Scalar* qo, typename Mo::Scalar* qdo) {
  using T = typename Mo::Scalar;
  constexpr int n = Mo::n;
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N) return;
  T x[n], v[n], t = T(0);
  for (int j = 0; j < n; ++j) x[j] = q[long(j) * N + i], v[j] = qd[long(j) * N + i];
  const typename Mo::Params p{};
  const kernels::StageSettings<T> ss{policy::default_rank_rtol<T>(), {}};
  bool ok = true;
  for (int k = 0; k < probe_steps && ok; ++k) ok = kernels::rk4_step<Mo>(x, v, t, T(bench::workload_dt), p, ss) == Status::ok;
  for (int j = 0; j < n; ++j) qo[long(j) * N + i] = ok ? x[j] : T(NAN), qdo[long(j) * N + i] = ok ? v[j] : T(NAN);
}

// What a team shares for whole steps: the step's workspace and the state.
template <class Mo>
struct StepShared {
  kernels::Rk4Workspace<Mo> ws;
  typename Mo::Scalar x[Mo::n], v[Mo::n];
};

// sizeof(X) in device code, where it may differ from the host's: the
// host's float pseudo-inverse carries a double Gram route (Lanes::Wide).
template <class X>
__global__ void device_sizeof(std::size_t* out) {
  *out = sizeof(X);
}

template <class X>
std::size_t size_on_device() {
  std::size_t* d = nullptr;
  std::size_t h = 0;
  check(cudaMalloc(&d, sizeof h), "cudaMalloc");
  device_sizeof<X><<<1, 1>>>(d);
  const cudaError_t e = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
  cudaFree(d);
  check(e, "download");
  return h;
}

template <class Mo, int S>
__global__ void team_steps(const typename Mo::Scalar* q, const typename Mo::Scalar* qd, int N,
                           typename Mo::Scalar* qo, typename Mo::Scalar* qdo, int teams_per_block) {
  using T = typename Mo::Scalar;
  constexpr int n = Mo::n;
  extern __shared__ double smem[];
  const ukb::cuda::TileTeam<S> team = ukb::cuda::this_tile<S>();
  const long i = long(blockIdx.x) * teams_per_block + threadIdx.x / S;
  if (i >= N) return;  // the whole team
  StepShared<Mo>& w = reinterpret_cast<StepShared<Mo>*>(smem)[threadIdx.x / S];
  for (int j = team.rank(); j < n; j += S) w.x[j] = q[long(j) * N + i], w.v[j] = qd[long(j) * N + i];
  team.sync();
  const typename Mo::Params p{};
  const kernels::StageSettings<T> ss{policy::default_rank_rtol<T>(), {}};
  T t = T(0);
  bool ok = true;
  for (int k = 0; k < probe_steps && ok; ++k)
    ok = kernels::rk4_step<Mo>(team, w.ws, w.x, w.v, t, T(bench::workload_dt), p, ss) == Status::ok;
  for (int j = team.rank(); j < n; j += S)
    qo[long(j) * N + i] = ok ? w.x[j] : T(NAN), qdo[long(j) * N + i] = ok ? w.v[j] : T(NAN);
}

void check_blas(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(int(e)));
}
void check_solver(cusolverStatus_t e, const char* what) {
  if (e != CUSOLVER_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuSOLVER status " + std::to_string(int(e)));
}

// The library calls in either precision: the lower Cholesky factor of
// each n x n matrix; X <- L^{-1} X (L n x n lower, X n x m); C = X^T X (X
// n x m, C m x m), strided.
inline cusolverStatus_t potrf_lower(cusolverDnHandle_t h, int n, double* a[], int* info, int N) {
  return cusolverDnDpotrfBatched(h, CUBLAS_FILL_MODE_LOWER, n, a, n, info, N);
}
inline cusolverStatus_t potrf_lower(cusolverDnHandle_t h, int n, float* a[], int* info, int N) {
  return cusolverDnSpotrfBatched(h, CUBLAS_FILL_MODE_LOWER, n, a, n, info, N);
}
inline cublasStatus_t trsm_left_lower(cublasHandle_t h, int n, int m, const double* one, double* L[], double* X[],
                                      int N) {
  return cublasDtrsmBatched(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, n, m, one,
                            L, n, X, n, N);
}
inline cublasStatus_t trsm_left_lower(cublasHandle_t h, int n, int m, const float* one, float* L[], float* X[],
                                      int N) {
  return cublasStrsmBatched(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, n, m, one,
                            L, n, X, n, N);
}
inline cublasStatus_t gemm_tn(cublasHandle_t h, int m, int n, const double* one, const double* X, long long sx,
                              const double* zero, double* C, long long sc, int N) {
  return cublasDgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, one, X, n, sx, X, n, sx, zero, C, m, sc, N);
}
inline cublasStatus_t gemm_tn(cublasHandle_t h, int m, int n, const float* one, const float* X, long long sx,
                              const float* zero, float* C, long long sc, int N) {
  return cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, one, X, n, sx, X, n, sx, zero, C, m, sc, N);
}

// The library route's handles, made once.
struct Libraries {
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  Libraries() {
    check_blas(cublasCreate(&blas), "cublasCreate");
    check_solver(cusolverDnCreate(&solver), "cusolverDnCreate");
  }
  ~Libraries() {
    cusolverDnDestroy(solver);
    cublasDestroy(blas);
  }
};
Libraries* libraries = nullptr;

// The library route's inputs: M (n x n, symmetric: row-major is
// column-major) and A (m x n row-major: A^T, n x m, column-major) of every
// system, one after the other.
template <class Mo>
__global__ void library_inputs(const typename Mo::Scalar* q, const typename Mo::Scalar* qd, int N,
                               typename Mo::Scalar* M, typename Mo::Scalar* At) {
  using T = typename Mo::Scalar;
  constexpr int n = Mo::n, m = Mo::m;
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N) return;
  T x[n], v[n], b[m];
  for (int j = 0; j < n; ++j) x[j] = q[long(j) * N + i], v[j] = qd[long(j) * N + i];
  const typename Mo::Params p{};
  Mo::mass(x, T(0), p, M + i * n * n);
  Mo::constraints(x, v, T(0), p, At + i * m * n, b);
}

// 1 / L_ii of the factor of each system's G (m x m, column-major).
template <class T>
__global__ void library_output(const T* G, int N, int m, T* out) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N) return;
  for (int k = 0; k < m; ++k) out[long(k) * N + i] = T(1) / G[i * m * m + k * m + k];
}

// A JSON number, or null where it is not finite (a route that failed where
// the other did not).
std::string number(double x) {
  if (!std::isfinite(x)) return "null";
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}

// A JSON string's contents: quotes, backslashes and control characters
// escaped (a driver's message may hold any of them).
std::string json_text(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      o += ' ';
    } else {
      o += c;
    }
  }
  return o;
}

struct Row {
  std::string workload, model, scalar, route;
  int N = 0, teams_per_block = 0;  // systems per block
  double systems_per_s = 0, speedup = 0, max_rel_diff = 0;
  bool bitwise = false;
  std::string note;
};

// Seconds per launch of `launch` (median of 5 timings of enough launches to
// take about 0.1 s).
template <class F>
double seconds_per_launch(const F& launch) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  launch();  // warm-up
  check(cudaGetLastError(), "launch");
  check(cudaDeviceSynchronize(), "kernel");
  auto timed = [&](int reps) {
    check(cudaEventRecord(a), "event");
    for (int r = 0; r < reps; ++r) launch();
    check(cudaEventRecord(b), "event");
    check(cudaEventSynchronize(b), "event");
    check(cudaGetLastError(), "launch");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "event");
    return double(ms) * 1e-3 / reps;
  };
  const double one = timed(1);
  const int reps = int(std::clamp(0.1 / std::max(one, 1e-7), 1.0, 1000.0));
  std::vector<double> t;
  for (int k = 0; k < 5; ++k) t.push_back(timed(reps));
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[2];
}

template <class Mo>
struct Probe {
  using T = typename Mo::Scalar;
  static constexpr int n = Mo::n, m = Mo::m;
  int N;
  T *q = nullptr, *qd = nullptr, *out_thread = nullptr, *out_team = nullptr;
  std::vector<T> ref;

  explicit Probe(int systems) : N(systems) {
    std::vector<T> hq(std::size_t(n) * N), hqd(std::size_t(n) * N);
    for (int i = 0; i < N; ++i) {
      typename Mo::Params p;
      T x[n], v[n];
      bench::workload_system<Mo>(1, i, p, x, v);
      for (int j = 0; j < n; ++j) hq[std::size_t(j) * N + i] = x[j], hqd[std::size_t(j) * N + i] = v[j];
    }
    const std::size_t bytes = sizeof(T) * std::size_t(n) * N, out_bytes = sizeof(T) * std::size_t(m) * N;
    check(cudaMalloc(&q, bytes), "cudaMalloc");
    check(cudaMalloc(&qd, bytes), "cudaMalloc");
    check(cudaMalloc(&out_thread, out_bytes), "cudaMalloc");
    check(cudaMalloc(&out_team, out_bytes), "cudaMalloc");
    check(cudaMemcpy(q, hq.data(), bytes, cudaMemcpyHostToDevice), "upload");
    check(cudaMemcpy(qd, hqd.data(), bytes, cudaMemcpyHostToDevice), "upload");
  }
  ~Probe() {
    cudaFree(q);
    cudaFree(qd);
    cudaFree(out_thread);
    cudaFree(out_team);
    cudaFree(qo);
    cudaFree(qdo);
  }

  Row base() const {
    Row r;
    r.workload = bench::Workload<Mo>::id;
    r.model = Mo::name;
    r.scalar = sizeof(T) == 8 ? "double" : "float";
    r.N = N;
    return r;
  }

  std::vector<T> download(const T* d) const {
    std::vector<T> h(std::size_t(m) * N);
    check(cudaMemcpy(h.data(), d, sizeof(T) * h.size(), cudaMemcpyDeviceToHost), "download");
    return h;
  }

  // The thread route's row: `items` per launch of `seconds`, its outputs
  // (the reference of the other routes) checked for NaN.
  Row thread_result(const std::vector<T>& out, double items, double seconds) const {
    Row r = base();
    r.route = "thread";
    r.teams_per_block = 128;
    r.systems_per_s = items / seconds;
    r.speedup = 1;
    r.bitwise = true;
    long failed = 0;
    for (T x : out) failed += std::isnan(double(x));
    if (failed) r.note = std::to_string(failed) + " outputs NaN";
    return r;
  }

  // Teams of S per block where each needs per_team bytes of shared memory
  // (up to 128 threads, within the block's opt-in limit); 0, with the
  // row's note saying why, where one team's does not fit.
  static int teams_per_block(std::size_t per_team, int S, Row& r) {
    cudaDeviceProp prop;
    int dev = 0;
    check(cudaGetDevice(&dev), "device");
    check(cudaGetDeviceProperties(&prop, dev), "device");
    const std::size_t limit = prop.sharedMemPerBlockOptin;
    r.route = "team " + std::to_string(S);
    if (per_team > limit) {
      r.note = "needs " + std::to_string(per_team) + " B of shared memory per system, the block has " +
               std::to_string(limit);
      return 0;
    }
    return int(std::max<std::size_t>(1, std::min<std::size_t>(128 / S, limit / per_team)));
  }

  Row thread_row(double& seconds) {
    const int block = 128, grid = (N + block - 1) / block;
    seconds = seconds_per_launch([&] { thread_route<Mo><<<grid, block>>>(q, qd, N, out_thread); });
    ref = download(out_thread);
    return thread_result(ref, N, seconds);
  }

  template <int S>
  Row team_row(double thread_seconds) {
    Row r = base();
    const std::size_t per_team = sizeof(Shared<Mo>);
    const int teams = teams_per_block(per_team, S, r);
    if (teams == 0) return r;
    const std::size_t shared = per_team * teams;
    check(cudaFuncSetAttribute(team_route<Mo, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)),
          "shared memory");
    const int grid = (N + teams - 1) / teams;
    // NaN everywhere first: a system the team kernel skipped cannot show
    // the outputs of the team size before.
    check(cudaMemset(out_team, 0xFF, sizeof(T) * std::size_t(m) * N), "cudaMemset");
    const double s = seconds_per_launch([&] { team_route<Mo, S><<<grid, teams * S, shared>>>(q, qd, N, out_team, teams); });
    compare(r, download(out_team), ref, N, s, thread_seconds, teams);
    return r;
  }

  // A route's rate (`items` per launch of `seconds`) and its outputs
  // against the thread's (a NaN in both: a system that failed in both).
  static void compare(Row& r, const std::vector<T>& got, const std::vector<T>& want, double items, double seconds,
                      double thread_seconds, int per_block) {
    double scale = 0, diff = 0;
    for (std::size_t k = 0; k < got.size(); ++k) {
      scale = std::max(scale, std::abs(double(want[k])));
      const bool both_failed = std::isnan(double(got[k])) && std::isnan(double(want[k]));
      const double d = std::abs(double(got[k]) - double(want[k]));
      diff = std::max(diff, both_failed ? 0.0 : std::isnan(d) ? INFINITY : d);
    }
    r.teams_per_block = per_block;
    r.systems_per_s = items / seconds;
    r.speedup = thread_seconds / seconds;
    r.max_rel_diff = scale > 0 ? diff / scale : diff;
    r.bitwise = std::memcmp(got.data(), want.data(), sizeof(T) * got.size()) == 0;
  }

  // The library route: the inputs into global memory (library_inputs),
  // then cuSOLVER's potrfBatched (M = L L^T), cuBLAS's trsmBatched (B^T =
  // L^{-1} A^T), gemmStridedBatched (G = B B^T) and potrfBatched (G), then
  // 1 / L_ii of G's factor. Other algorithms than the kernels': compared
  // within round-off, not bit for bit.
  Row library_row(double thread_seconds) {
    Row r = base();
    r.route = "library";
    if (!libraries) throw std::runtime_error("no cuBLAS/cuSOLVER handle");
    const std::size_t nn = std::size_t(n) * n, mn = std::size_t(m) * n, mm = std::size_t(m) * m;
    T *M = nullptr, *At = nullptr, *G = nullptr;
    T **Mp = nullptr, **Atp = nullptr, **Gp = nullptr;
    int* info = nullptr;
    struct Free {
      std::vector<void*> p;
      ~Free() {
        for (void* x : p) cudaFree(x);
      }
    } held;
    auto alloc = [&](auto*& ptr, std::size_t bytes) {
      check(cudaMalloc(&ptr, bytes), "cudaMalloc");
      held.p.push_back(ptr);
    };
    alloc(M, sizeof(T) * nn * N);
    alloc(At, sizeof(T) * mn * N);
    alloc(G, sizeof(T) * mm * N);
    alloc(Mp, sizeof(T*) * N);
    alloc(Atp, sizeof(T*) * N);
    alloc(Gp, sizeof(T*) * N);
    alloc(info, sizeof(int) * 2 * std::size_t(N));
    std::vector<T*> h(N);
    for (int i = 0; i < N; ++i) h[i] = M + nn * i;
    check(cudaMemcpy(Mp, h.data(), sizeof(T*) * N, cudaMemcpyHostToDevice), "upload");
    for (int i = 0; i < N; ++i) h[i] = At + mn * i;
    check(cudaMemcpy(Atp, h.data(), sizeof(T*) * N, cudaMemcpyHostToDevice), "upload");
    for (int i = 0; i < N; ++i) h[i] = G + mm * i;
    check(cudaMemcpy(Gp, h.data(), sizeof(T*) * N, cudaMemcpyHostToDevice), "upload");
    check(cudaMemset(out_team, 0xFF, sizeof(T) * std::size_t(m) * N), "cudaMemset");
    const int block = 128, grid = (N + block - 1) / block;
    cublasHandle_t blas = libraries->blas;
    cusolverDnHandle_t solver = libraries->solver;
    const T one = T(1), zero = T(0);
    auto route = [&] {
      library_inputs<Mo><<<grid, block>>>(q, qd, N, M, At);
      check_solver(potrf_lower(solver, n, Mp, info, N), "potrfBatched");
      check_blas(trsm_left_lower(blas, n, m, &one, Mp, Atp, N), "trsmBatched");
      check_blas(gemm_tn(blas, m, n, &one, At, mn, &zero, G, mm, N), "gemmStridedBatched");
      check_solver(potrf_lower(solver, m, Gp, info + N, N), "potrfBatched");
      library_output<T><<<grid, block>>>(G, N, m, out_team);
    };
    const double s = seconds_per_launch(route);
    std::vector<int> hinfo(2 * std::size_t(N));
    check(cudaMemcpy(hinfo.data(), info, sizeof(int) * hinfo.size(), cudaMemcpyDeviceToHost), "download");
    long failed = 0;
    for (int x : hinfo) failed += x != 0;
    if (failed) r.note = std::to_string(failed) + " factorisations failed";
    compare(r, download(out_team), ref, N, s, thread_seconds, 0);
    return r;
  }

  // Whole RK4 steps (thread_steps, team_steps): the states after them in
  // qo, qdo (2 n N values), the thread's kept in step_ref.
  T *qo = nullptr, *qdo = nullptr;
  std::vector<T> step_ref;

  std::vector<T> download_states() const {
    const std::size_t k = std::size_t(n) * N;
    std::vector<T> h(2 * k);
    check(cudaMemcpy(h.data(), qo, sizeof(T) * k, cudaMemcpyDeviceToHost), "download");
    check(cudaMemcpy(h.data() + k, qdo, sizeof(T) * k, cudaMemcpyDeviceToHost), "download");
    return h;
  }

  Row thread_steps_row(double& seconds) {
    if (!qo) {
      check(cudaMalloc(&qo, sizeof(T) * std::size_t(n) * N), "cudaMalloc");
      check(cudaMalloc(&qdo, sizeof(T) * std::size_t(n) * N), "cudaMalloc");
    }
    const int block = 128, grid = (N + block - 1) / block;
    seconds = seconds_per_launch([&] { thread_steps<Mo><<<grid, block>>>(q, qd, N, qo, qdo); });
    step_ref = download_states();
    return thread_result(step_ref, double(N) * probe_steps, seconds);
  }

  template <int S>
  Row team_steps_row(double thread_seconds) {
    Row r = base();
    const std::size_t per_team = size_on_device<StepShared<Mo>>();
    const int teams = teams_per_block(per_team, S, r);
    if (teams == 0) return r;
    const std::size_t shared = per_team * teams;
    check(cudaFuncSetAttribute(team_steps<Mo, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)),
          "shared memory");
    check(cudaMemset(qo, 0xFF, sizeof(T) * std::size_t(n) * N), "cudaMemset");
    check(cudaMemset(qdo, 0xFF, sizeof(T) * std::size_t(n) * N), "cudaMemset");
    const int grid = (N + teams - 1) / teams;
    const double sec =
        seconds_per_launch([&] { team_steps<Mo, S><<<grid, teams * S, shared>>>(q, qd, N, qo, qdo, teams); });
    compare(r, download_states(), step_ref, double(N) * probe_steps, sec, thread_seconds, teams);
    r.note = std::to_string(per_team) + " B shared per system";
    return r;
  }

  // Two team sizes per chain (the probe of the linear algebra alone found
  // teams of 4 best for W2 and of 32 for W3): fewer kernels, a shorter compile.
  void run_steps(std::vector<Row>& rows) {
    constexpr int small = n <= 18 ? 4 : 16;
    double ts = 0;
    rows.push_back(thread_steps_row(ts));
    rows.push_back(team_steps_row<small>(ts));
    rows.push_back(team_steps_row<2 * small>(ts));
  }

  void run(std::vector<Row>& rows) {
    double ts = 0;
    rows.push_back(thread_row(ts));
    try {
      rows.push_back(library_row(ts));
    } catch (const std::exception& e) {
      Row r = base();
      r.route = "library";
      r.note = e.what();
      rows.push_back(r);
      cudaGetLastError();
    }
    rows.push_back(team_row<4>(ts));
    rows.push_back(team_row<8>(ts));
    rows.push_back(team_row<16>(ts));
    rows.push_back(team_row<32>(ts));
  }
};

template <class T, int K, bool Steps = false>
void probe(int N, std::vector<Row>& rows) {
  using Mo = models::PlanarChain<T, K>;
  try {
    Probe<Mo> p(N);
    if constexpr (Steps) {
      p.run_steps(rows);
    } else {
      p.run(rows);
    }
  } catch (const std::exception& e) {
    Row r;
    r.workload = bench::Workload<Mo>::id;
    r.model = Mo::name;
    r.scalar = sizeof(T) == 8 ? "double" : "float";
    r.N = N;
    r.route = "-";
    r.note = e.what();
    rows.push_back(r);
    cudaGetLastError();  // an error that is not sticky does not end the next probe
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* json = nullptr;
  bool quick = false;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--json") == 0 && a + 1 < argc) {
      json = argv[++a];
    } else if (std::strcmp(argv[a], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: ukb_team_probe [--json FILE] [--quick]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "ukb_team_probe: no usable GPU\n");
    return 2;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "ukb_team_probe: cannot read the GPU's properties\n");
    return 2;
  }
  const int scale = quick ? 10 : 1;
  std::unique_ptr<Libraries> libs;
  try {
    libs = std::make_unique<Libraries>();
    libraries = libs.get();
  } catch (const std::exception& e) {  // the library rows then say why
    std::fprintf(stderr, "ukb_team_probe: no library route: %s\n", e.what());
  }
  // Each row is printed as soon as it is measured, so a run stopped by a
  // time limit still leaves the rows it got.
  std::printf("Device: %s. The Gram route's linear algebra per system (chol(M), B = A L^-T, G = B B^T, chol(G)):\n\n",
              prop.name);
  std::printf("| workload | scalar | N | route | systems/s | vs thread | systems per block | max rel diff | same bits | note |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  std::vector<Row> rows;
  int measured = 0;
  auto print_new = [&](std::size_t from) {
    for (std::size_t k = from; k < rows.size(); ++k) {
      const Row& r = rows[k];
      measured += r.systems_per_s > 0;
      const std::string per_block = r.teams_per_block > 0 ? std::to_string(r.teams_per_block) : "-";
      std::printf("| %s %s | %s | %d | %s | %.3g | %.2fx | %s | %.1e | %s | %s |\n", r.workload.c_str(),
                  r.model.c_str(), r.scalar.c_str(), r.N, r.route.c_str(), r.systems_per_s, r.speedup,
                  per_block.c_str(), r.max_rel_diff, r.bitwise ? "yes" : "no", r.note.c_str());
    }
    std::fflush(stdout);
  };
  auto run = [&](auto probe_one, int systems) {
    const std::size_t from = rows.size();
    probe_one(systems / scale, rows);
    print_new(from);
  };
  run(probe<double, 6>, 100000);
  run(probe<float, 6>, 100000);
  run(probe<double, 12>, 100000);
  run(probe<float, 12>, 100000);
  run(probe<double, 24>, 20000);
  run(probe<float, 24>, 20000);
  run(probe<double, 48>, 10000);
  run(probe<float, 48>, 10000);
  const std::size_t first_step_row = rows.size();
  std::printf("\nWhole RK4 steps (%d per launch, every evaluation and stage update), system-steps per second:\n\n",
              probe_steps);
  std::printf("| workload | scalar | N | route | system-steps/s | vs thread | systems per block | max rel diff | same bits | note |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  run(probe<double, 6, true>, 100000);
  run(probe<float, 6, true>, 100000);
  run(probe<double, 12, true>, 100000);
  run(probe<float, 12, true>, 100000);
  if (json) {
    FILE* f = std::fopen(json, "w");
    if (!f) {
      std::fprintf(stderr, "ukb_team_probe: cannot write %s\n", json);
      return 1;
    }
    std::fprintf(f, "{\"device\": \"%s\", \"rows\": [\n", json_text(prop.name).c_str());
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const Row& r = rows[k];
      if (k == first_step_row) std::fprintf(f, "], \"step_rows\": [\n");
      const bool last = k + 1 == rows.size() || k + 1 == first_step_row;
      std::fprintf(f,
                   "  {\"workload\": \"%s\", \"model\": \"%s\", \"scalar\": \"%s\", \"N\": %d, \"route\": \"%s\", "
                   "\"systems_per_s\": %s, \"speedup\": %s, \"systems_per_block\": %d, \"max_rel_diff\": %s, "
                   "\"same_bits\": %s, \"note\": \"%s\"}%s\n",
                   r.workload.c_str(), r.model.c_str(), r.scalar.c_str(), r.N, r.route.c_str(),
                   number(r.systems_per_s).c_str(), number(r.speedup).c_str(), r.teams_per_block,
                   number(r.max_rel_diff).c_str(), r.bitwise ? "true" : "false",
                   json_text(r.note).c_str(), last ? "" : ",");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return measured > 0 ? 0 : 1;  // every row failed: say so to gpu.sh
}
