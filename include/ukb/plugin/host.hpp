/// @file plugin/host.hpp
/// @brief Included first by the translation unit that ukb generates for a
///        model file (src/run/model_file.cpp): every UKB_MODEL line of the
///        file then also registers its model, with the reference and cpu
///        backends instantiated for it (and, where UKB_PLUGIN_CUDA is
///        defined, the cuda backend, compiled by nvcc in plugin/cuda.cuh),
///        and the C entry points (plugin/entry.hpp) are defined. Not for
///        other programs.
#pragma once

#ifndef UKB_PLUGIN_ABI
#error "ukb/plugin/host.hpp is included by the plugins that ukb compiles from model files only"
#endif

#include <type_traits>
#include <vector>

#define UKB_PLUGIN_CAT2_(a, b) a##b
#define UKB_PLUGIN_CAT_(a, b) UKB_PLUGIN_CAT2_(a, b)
#ifdef UKB_PLUGIN_CUDA
#define UKB_PLUGIN_CUDA_INSTANCE_(...) UKB_CUDA_MODEL(UKB_MODEL_TYPE(__VA_ARGS__))
#else
#define UKB_PLUGIN_CUDA_INSTANCE_(...)
#endif
#define UKB_MODEL_EXTRA_(...)                                                               \
  UKB_PLUGIN_CUDA_INSTANCE_(__VA_ARGS__)                                                    \
  static const ::ukb::plugin::Registrar UKB_PLUGIN_CAT_(ukb_plugin_model_, __COUNTER__){ \
      #__VA_ARGS__, &::ukb::describe<UKB_MODEL_TYPE(__VA_ARGS__)>};

#include "ukb/backends.hpp"
#include "ukb/describe.hpp"
#include "ukb/plugin/entry.hpp"

namespace ukb::plugin {
struct Registered {
  const char* id;
  ModelInfo (*make)();
};
inline std::vector<Registered>& registered() {
  static std::vector<Registered> all;
  return all;
}
struct Registrar {
  Registrar(const char* id, ModelInfo (*make)()) { registered().push_back({id, make}); }
};
}  // namespace ukb::plugin

extern "C" __attribute__((visibility("default"))) const char* ukb_plugin_abi_v1() { return UKB_PLUGIN_ABI; }

extern "C" __attribute__((visibility("default"))) const ukb_plugin_table_v1* ukb_plugin_models_v1() {
  static const std::vector<ukb::ModelInfo> models = [] {
    std::vector<ukb::ModelInfo> v;
    for (const ukb::plugin::Registered& r : ukb::plugin::registered()) v.push_back(r.make());
    return v;
  }();
  static const std::vector<const char*> ids = [] {
    std::vector<const char*> v;
    for (const ukb::plugin::Registered& r : ukb::plugin::registered()) v.push_back(r.id);
    return v;
  }();
  static const ukb_plugin_table_v1 table{static_cast<int>(models.size()), ids.data(), models.data()};
  return &table;
}
