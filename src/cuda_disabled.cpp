// Stand-ins used when the library is built with UKB_ENABLE_CUDA=OFF.
#include "ukb/cuda.hpp"

namespace ukb::cuda {

namespace {
const char* const kWhy = "this ukb was built without CUDA (UKB_ENABLE_CUDA=OFF)";
}

bool built() { return false; }

int device_count(std::string* why) {
  if (why) *why = kWhy;
  return 0;
}

bool evaluate_terms(const std::string&, const double*, const double*, const double*, double,
                    const double*, const double*, double*, double*, double*, double*, double*,
                    std::string* why) {
  if (why) *why = kWhy;
  return false;
}

}  // namespace ukb::cuda

#include "ukb/cuda_engine.hpp"

namespace ukb::cuda {

template <Model Mo>
long evaluate_batch(const BatchView<Mo>&, typename Mo::Scalar, int) {
  throw BackendUnavailable("the cuda backend is not available: this ukb was built without CUDA "
                           "(UKB_ENABLE_CUDA=OFF)");
}

template <Model Mo>
void integrate_batch(const BatchView<Mo>& v, const kernels::RunSettings<typename Mo::Scalar>& s,
                     int b) {
  evaluate_batch<Mo>(v, s.rank_rtol, b);
}

}  // namespace ukb::cuda

UKB_FOR_EACH_BUILTIN(UKB_CUDA_INSTANTIATE)
