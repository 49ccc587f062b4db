/// @file reference.hpp
/// @brief The reference backend's solver, the oracle of the test suite
///        (reference/solver.hpp).
#pragma once

#include "ukb/reference/solver.hpp"
