// Stand-ins used when the library is built with UKB_ENABLE_CUDA=OFF: no
// device, and the cuda backend's entry points throw BackendUnavailable.
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

bool use_device(int, std::string* why) {
  if (why) *why = kWhy;
  return false;
}

bool evaluate_terms(const std::string&, const double*, const double*, const double*, double,
                    const double*, const double*, double*, double*, double*, double*, double*,
                    std::string* why) {
  if (why) *why = kWhy;
  return false;
}

}  // namespace ukb::cuda

#include "ukb/backend.hpp"
#include "ukb/models/all.hpp"

namespace ukb::backends::cuda {
namespace {
[[noreturn]] void unavailable() {
  throw BackendUnavailable("the cuda backend is not available: this ukb was built without CUDA "
                           "(UKB_ENABLE_CUDA=OFF)");
}
}  // namespace

template <Model Mo>
void evaluate(const BatchView<Mo>&, const EvalSettings<typename Mo::Scalar>&, const EngineOptions&) {
  unavailable();
}

template <Model Mo>
void integrate(const BatchView<Mo>&, const RunSettings<typename Mo::Scalar>&, const EngineOptions&) {
  unavailable();
}

template <Model Mo>
std::unique_ptr<DeviceMirror<Mo>> make_mirror(int) {
  unavailable();
}

}  // namespace ukb::backends::cuda

UKB_FOR_EACH_BUILTIN(UKB_INSTANTIATE_CUDA)
