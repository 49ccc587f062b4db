// The cpu backend for the built-in models in float (see builtins_double.cpp).
#define UKB_BUILTIN_INSTANCES
#include "ukb/cpu/backend.hpp"
#include "ukb/models/all.hpp"

#define UKB_MODEL_FLOAT_(X, M) X(::ukb::models::M<float>)
UKB_BUILTIN_MODELS(UKB_MODEL_FLOAT_, UKB_MODEL_NOTHING_, UKB_INSTANTIATE_CPU)
