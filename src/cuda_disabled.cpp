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
