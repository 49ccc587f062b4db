// The cuda backend for the built-in models in double: one thread per system
// running the shared kernels (backend.cuh); the host logic (engine_impl.hpp)
// is also run on the CPU by the test suite (tests/kernels/test_cuda_emulation.cpp).
// The float instantiations are in engine_float.cu, so that the two halves of
// the slowest compile of the build run on two cores at once.
#include "ukb/cuda/backend.cuh"
#include "ukb/models/all.hpp"

UKB_FOR_EACH_BUILTIN_DOUBLE(UKB_INSTANTIATE_CUDA)
