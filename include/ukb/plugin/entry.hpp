/// @file plugin/entry.hpp
/// @brief The versioned C entry points of a model-file plugin (a shared
///        object that ukb compiles from a model header;
///        docs/adding-a-model.md). The loader calls `ukb_plugin_abi_v1` first
///        and touches
///        nothing else of a plugin whose answer is not its own ABI string
///        (ukb version, compilers and flags): ModelInfo crosses the
///        boundary as a C++ object, which only the same compiler and flags
///        make safe.
#pragma once

#include "ukb/registry.hpp"

extern "C" {

/// The models of a plugin, in the order of their UKB_MODEL lines.
struct ukb_plugin_table_v1 {
  int count;                     ///< number of models
  const char* const* ids;        ///< each model as written in UKB_MODEL(...)
  const ukb::ModelInfo* models;  ///< each model's registry entry (describe)
};

/// The ABI string the plugin was compiled for.
typedef const char* (*ukb_plugin_abi_v1_fn)(void);
/// The plugin's models (built on the first call).
typedef const ukb_plugin_table_v1* (*ukb_plugin_models_v1_fn)(void);
}
