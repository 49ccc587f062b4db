/// @file model_file.hpp
/// @brief Model files: a C++ header with one or more models (model.hpp),
///        each named by a `UKB_MODEL(Name)` line, compiled by ukb into a
///        plugin on first use and loaded with dlopen (docs/adding-a-model.md).
///        What `model = "sleigh.hpp"` in a config, `--model
///        sleigh.hpp` and `ukb models --file sleigh.hpp` use.
///
/// A model file is code that runs with the user's rights: ukb compiles the
/// file it is given (and what that file includes), never another.
///
/// - **Compilers and flags**: those ukb was built with, from the toolchain
///   record written at configure time (`share/ukb/toolchain.json` beside
///   the `bin/` of the ukb executable, in the build tree and in an
///   installed package; `$UKB_TOOLCHAIN` names another).
/// - **Cache**: `$UKB_CACHE_DIR`, else `$XDG_CACHE_HOME/ukb`, else
///   `~/.cache/ukb`; one directory per file, variant (cpu and reference, or
///   also cuda) and toolchain, keyed by the file's path and content, the
///   ukb version, compilers and flags; its manifest records the content
///   hash of every file the compiler read, so an edited include is rebuilt
///   too, and the plugin's own hash, so a damaged or foreign plugin is
///   never loaded (it is rebuilt). Built under a temporary name and renamed:
///   concurrent runs do not race. An unwritable cache falls back to a
///   temporary directory, with a note on stderr.
/// - **Errors**: a file that cannot be read, has no or several `UKB_MODEL`
///   lines without a choice, or does not compile throws ModelFileError with
///   the compiler's messages mapped to the user's file:line (the failed
///   requirement's text for a model that misses one; `UKB_VERBOSE_COMPILE=1`
///   shows the compiler's full output); nothing is left behind.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ukb/registry.hpp"

namespace ukb {

/// A model file that cannot be used: the message names the file and, for
/// code that does not compile, the lines at fault. `ukb` exits with code 2.
struct ModelFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// How a model file is compiled and loaded.
struct ModelFileOptions {
  /// Also the cuda backend (the file compiled by nvcc as well). Without it
  /// the plugin has the reference and cpu backends; cuda throws
  /// BackendUnavailable for its models.
  bool cuda = false;
  /// A line on stderr when a plugin is compiled, and how long it took.
  bool progress = true;
};

/// A loaded model file.
struct ModelFile {
  std::string path;                     ///< the file, canonical
  std::vector<std::string> ids;         ///< its models as written in UKB_MODEL(...)
  std::vector<const ModelInfo*> models; ///< their registry entries (same order)
  /// Hash (hex) of the content of the file and of every file it includes:
  /// what a checkpoint records, so that a run is not resumed with an edited
  /// model.
  std::string content_hash;
  std::string plugin;                   ///< the plugin's path in the cache
  bool compiled = false;                ///< compiled by this call (not found in the cache)
};

/// Whether a model name is a model file: it contains '/' or '.' (built-in
/// names are lower-case words).
bool is_model_file(std::string_view name);

/// The models of a file: compiled into a plugin or found in the cache, and
/// loaded (once per process and variant). Throws ModelFileError.
const ModelFile& open_model_file(const std::string& path, const ModelFileOptions& o = {});

/// One model of a model file: `spec` is "path" (a file with one UKB_MODEL
/// line) or "path:Name" (Name as written in UKB_MODEL, or the model's
/// `name`). Relative paths are relative to the working directory. Throws
/// ModelFileError.
const ModelInfo& load_model_file(const std::string& spec, const ModelFileOptions& o = {});

/// The file part and the model part ("" if none) of a spec "path[:Name]".
std::pair<std::string, std::string> split_model_spec(const std::string& spec);

}  // namespace ukb
