/// @file cuda.hpp
/// @brief Whether this build has the CUDA backend and whether a device is
///        present. Includes no CUDA header; links in every build.
#pragma once

#include <string>

namespace ukb::cuda {

/// True when the library was built with UKB_ENABLE_CUDA=ON.
bool built();

/// Number of usable CUDA devices; 0 when none, when the driver is missing or
/// too old, or when the build has no CUDA. On 0, `*why` (if given) receives
/// a sentence saying why, for error messages and skipped tests.
int device_count(std::string* why = nullptr);

/// Makes device k modulo device_count() the one the cuda backend of this
/// process uses from now on (cudaSetDevice, for the calling thread: call it
/// before the first ensemble). A distributed run gives each rank its index
/// among the ranks of its node, so that one job drives every GPU of every
/// node. False, with `*why` set, where there is no device.
bool use_device(int k, std::string* why = nullptr);

/// Evaluates the terms of a built-in model for one system on device 0, as a
/// check that the model code runs as device code: M (n x n, row-major), Q
/// (n), A (m x n, row-major), b (m), and C (n) from the given Qc_ideal (n) and
/// lambda (m). Returns false with `*why` set when there is no device or the
/// model is unknown.
bool evaluate_terms(const std::string& model, const double* params, const double* q,
                    const double* qd, double t, const double* Qc_ideal, const double* lambda,
                    double* M, double* Q, double* A, double* b, double* C, std::string* why);

}  // namespace ukb::cuda
