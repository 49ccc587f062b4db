// The registry of the built-in models (apart from registry.cpp, so that a
// model-file plugin that links libukb.a for the registry's helpers does not
// pull in every built-in model's backends).
#include "ukb/describe.hpp"
#include "ukb/models/all.hpp"
#include "ukb/registry.hpp"

namespace ukb {
namespace {

std::vector<ModelInfo> build() {
  std::vector<ModelInfo> all;
  models::Builtin::for_each<double>([&]<class Mo>() { all.push_back(describe<Mo>()); });
  return all;
}

}  // namespace

const std::vector<ModelInfo>& all_models() {
  static const std::vector<ModelInfo> all = build();
  return all;
}

const ModelInfo* find_model(std::string_view name) {
  for (const ModelInfo& m : all_models())
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace ukb
