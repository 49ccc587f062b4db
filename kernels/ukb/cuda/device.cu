// CUDA glue of the host library: device query, and a one-thread kernel that
// evaluates a model's terms as device code (the models are UKB_HD code shared
// with the CPU; this proves they compile and run on the device).
#include <cuda_runtime.h>

#include <string>

#include "ukb/cuda.hpp"
#include "ukb/models/all.hpp"

namespace ukb::cuda {
namespace {

// Device memory for a few doubles, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int count) : size_(count * sizeof(double)) {
    if (cudaMalloc(&ptr_, size_ ? size_ : sizeof(double)) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  double* get() const { return static_cast<double*>(ptr_); }
  bool ok() const { return ptr_ != nullptr; }
  bool upload(const double* host) {
    return cudaMemcpy(ptr_, host, size_, cudaMemcpyHostToDevice) == cudaSuccess;
  }
  bool download(double* host) const {
    return cudaMemcpy(host, ptr_, size_, cudaMemcpyDeviceToHost) == cudaSuccess;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t size_;
};

template <class Mo>
struct ParamLoader {
  const double* values;
  int k;
  template <class F>
  __device__ void operator()(const char*, F& field, const char*) {
    field = values[k++];
  }
};

// in = [params..., q(n), qd(n), Qc_ideal(n), lambda(m)];
// out = [M(n*n), Q(n), A(m*n), b(m), C(n)].
template <class Mo>
__global__ void terms_kernel(const double* in, double t, double* out) {
  constexpr int n = Mo::n, m = Mo::m, np = param_count<Mo>();
  typename Mo::Params p{};
  Mo::visit_params(p, ParamLoader<Mo>{in, 0});
  const double* q = in + np;
  const double* qd = q + n;
  const double* Qc = qd + n;
  const double* lambda = Qc + n;
  double* M = out;
  double* Q = M + n * n;
  double* A = Q + n;
  double* b = A + m * n;
  double* C = b + m;
  Mo::mass(q, t, p, M);
  Mo::force(q, qd, t, p, Q);
  Mo::constraints(q, qd, t, p, A, b);
  Mo::nonideal(q, qd, t, p, Qc, lambda, C);
}

template <class Mo>
bool run_terms(const double* params, const double* q, const double* qd, double t,
               const double* Qc_ideal, const double* lambda, double* M, double* Q, double* A,
               double* b, double* C, std::string* why) {
  constexpr int n = Mo::n, m = Mo::m, np = param_count<Mo>();
  double in[np + 3 * n + m], out[n * n + n + m * n + m + n];
  int k = 0;
  for (int i = 0; i < np; ++i) in[k++] = params[i];
  for (int i = 0; i < n; ++i) in[k++] = q[i];
  for (int i = 0; i < n; ++i) in[k++] = qd[i];
  for (int i = 0; i < n; ++i) in[k++] = Qc_ideal[i];
  for (int i = 0; i < m; ++i) in[k++] = lambda[i];
  DeviceBuffer din(k), dout(sizeof(out) / sizeof(double));
  if (!din.ok() || !dout.ok() || !din.upload(in)) {
    if (why) *why = "cannot allocate or fill device memory";
    return false;
  }
  terms_kernel<Mo><<<1, 1>>>(din.get(), t, dout.get());
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess || !dout.download(out)) {
    if (why) *why = std::string("kernel failed: ") + cudaGetErrorString(err);
    return false;
  }
  k = 0;
  for (int i = 0; i < n * n; ++i) M[i] = out[k++];
  for (int i = 0; i < n; ++i) Q[i] = out[k++];
  for (int i = 0; i < m * n; ++i) A[i] = out[k++];
  for (int i = 0; i < m; ++i) b[i] = out[k++];
  for (int i = 0; i < n; ++i) C[i] = out[k++];
  return true;
}

__global__ void probe_kernel() {}

}  // namespace

bool built() { return true; }

int device_count(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // Without a GPU the runtime finds no driver and says "driver version is
    // insufficient": that is no reason to upgrade a driver.
    if (why) {
      int runtime = 0;
      cudaRuntimeGetVersion(&runtime);
      *why = err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice
                 ? "no CUDA device here (no NVIDIA GPU, or no driver for CUDA " + std::to_string(runtime / 1000) +
                       "." + std::to_string(runtime % 1000 / 10) + "; the CUDA runtime says: " +
                       cudaGetErrorString(err) + ")"
                 : std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    }
    return 0;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device found";
    return 0;
  }
  // A device of an architecture this build has no code for cannot run it.
  cudaFuncAttributes attr;
  const cudaError_t image = cudaFuncGetAttributes(&attr, probe_kernel);
  if (image != cudaSuccess) {
    if (why)
      *why = std::string("the CUDA device cannot run this build (compiled for CUDA architectures ") +
             UKB_CUDA_ARCHS + "; reconfigure with -DUKB_CUDA_ARCHITECTURES=native): " +
             cudaGetErrorString(image);
    return 0;
  }
  return count;
}

bool use_device(int k, std::string* why) {
  const int count = device_count(why);
  if (count == 0) return false;
  const cudaError_t err = cudaSetDevice(((k % count) + count) % count);
  if (err != cudaSuccess) {
    if (why) *why = std::string("cannot use CUDA device ") + std::to_string(k % count) + ": " + cudaGetErrorString(err);
    return false;
  }
  return true;
}

bool evaluate_terms(const std::string& model, const double* params, const double* q,
                    const double* qd, double t, const double* Qc_ideal, const double* lambda,
                    double* M, double* Q, double* A, double* b, double* C, std::string* why) {
  if (device_count(why) == 0) return false;
  bool found = false, ok = false;
  models::Builtin::for_each<double>([&]<class Mo>() {
    if (!found && model == Mo::name) {
      found = true;
      ok = run_terms<Mo>(params, q, qd, t, Qc_ideal, lambda, M, Q, A, b, C, why);
    }
  });
  if (!found && why) *why = "unknown model '" + model + "'";
  return ok;
}

}  // namespace ukb::cuda
