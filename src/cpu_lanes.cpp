// The CPU backend's SIMD lanes for the built-in models, compiled once here
// instead of in every translation unit that integrates a batch (engine.hpp
// declares these instantiations extern).
#include "ukb/engine.hpp"

UKB_FOR_EACH_BUILTIN(UKB_LANES_INSTANTIATION)
