// The cuda backend for the built-in models in float (see engine.cu).
#include "ukb/cuda/backend.cuh"
#include "ukb/models/all.hpp"

UKB_FOR_EACH_BUILTIN_FLOAT(UKB_INSTANTIATE_CUDA)
