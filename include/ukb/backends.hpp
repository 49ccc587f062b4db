/// @file backends.hpp
/// @brief The definitions of the reference and cpu backends, for a model of
///        one's own: include this header in one translation unit of the
///        program (with the model's header), and ukb::evaluate,
///        ukb::integrate and ukb::describe work for the model there and
///        everywhere else in the program. (The built-in models need nothing:
///        the library has them.) The cuda backend is instantiated by a .cu
///        file: docs/adding-a-model.md.
///
/// This is the header that brings Eigen (the reference), OpenMP and
/// std::experimental::simd (the cpu backend) into a translation unit.
#pragma once

#include "ukb/cpu/backend.hpp"
#include "ukb/reference/backend.hpp"
