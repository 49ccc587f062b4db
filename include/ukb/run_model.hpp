/// @file run_model.hpp
/// @brief `ukb run` for a model of the program's own: the config, sampling,
///        events, statistics, output files and checkpoints of run.hpp with
///        a model compiled into the program (no plugin, no compiler at run
///        time).
///
/// ```cpp
/// #include "my_model.hpp"
/// #include "ukb/backends.hpp"   // reference and cpu, in one source file
/// #include "ukb/run_model.hpp"
/// ukb::run::Config c = ukb::run::load_config<MyModel<double>>("my.toml");
/// ukb::run::Outcome o = ukb::run::execute(c, {.out_dir = "out"});
/// ```
/// The config's `model` key may be absent, the model's name, or a model
/// file (then its source: the program's model runs, the file is not
/// compiled). For the cuda backend, `ukb_add_model(target HEADER
/// my_model.hpp)` in CMake (docs/adding-a-model.md). Link `ukb::run`.
#pragma once

#include <string>

#include "ukb/describe.hpp"
#include "ukb/run.hpp"

namespace ukb {

/// The registry entry of a model of the program's own, made once.
template <Model Mo>
const ModelInfo& model_info() {
  static const ModelInfo info = describe<Mo>();
  return info;
}

namespace run {

/// load_config for the model Mo (double precision).
template <Model Mo>
Config load_config(const std::string& path) {
  return load_config(path, model_info<Mo>());
}

/// parse_config for the model Mo; `path` is used in messages and for the
/// directory of relative paths.
template <Model Mo>
Config parse_config(const std::string& text, const std::string& path) {
  return parse_config(text, ConfigSource{.path = path, .dir = {}, .model = &model_info<Mo>(), .model_files = true});
}

}  // namespace run
}  // namespace ukb
