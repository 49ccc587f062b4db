// The cuda backend for the built-in models: one thread per system running
// the shared kernels (backend.cuh); the host logic (engine_impl.hpp) is also
// run on the CPU by the test suite (tests/test_cuda_emulation.cpp).
#include "ukb/cuda/backend.cuh"
#include "ukb/models/all.hpp"

UKB_FOR_EACH_BUILTIN(UKB_INSTANTIATE_CUDA)
