// The cpu backend for the built-in models in double (the float ones are in
// builtins_float.cpp: two translation units that compile side by side).
#define UKB_BUILTIN_INSTANCES
#include "ukb/cpu/backend.hpp"
#include "ukb/models/all.hpp"

UKB_FOR_EACH_BUILTIN_DOUBLE(UKB_INSTANTIATE_CPU)
