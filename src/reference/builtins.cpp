// The reference backend for the built-in models (double only).
#define UKB_BUILTIN_INSTANCES
#include "ukb/models/all.hpp"
#include "ukb/reference/backend.hpp"

UKB_FOR_EACH_BUILTIN_DOUBLE(UKB_INSTANTIATE_REFERENCE)
