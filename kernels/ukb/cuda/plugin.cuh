/// @file cuda/plugin.cuh
/// @brief Included first by the CUDA translation unit that ukb generates
///        for a model file under `--backend cuda` (src/run/model_file.cpp):
///        every UKB_MODEL line of the file then instantiates the cuda
///        backend for its model. Not for other programs.
#pragma once

#define UKB_MODEL_EXTRA_(...) UKB_INSTANTIATE_CUDA(UKB_MODEL_TYPE(__VA_ARGS__))

#include "ukb/cuda/backend.cuh"
