// libFuzzer target: the checkpoint reader of `ukb run --resume`. Any input
// may be refused with ukb::run::ConfigError; any other exception, a crash,
// a hang, an allocation beyond the input's size or a sanitizer report is a
// bug. An accepted checkpoint's identity is compared with itself (the path
// `--resume` takes next).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <typeinfo>

#include "checkpoint.hpp"
#include "ukb/run.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const ukb::run::Checkpoint k = ukb::run::read_checkpoint(in, size, "fuzz.ukb");
    const std::size_t rows = static_cast<std::size_t>(k.header.done);
    if (k.status.size() != rows) std::abort();
    for (const ukb::run::Column& c : k.cols)
      if ((c.integer ? c.i.size() : c.d.size()) != rows) std::abort();
    if (!ukb::run::identity_difference(k.header.identity, k.header.identity).empty()) std::abort();
  } catch (const ukb::run::ConfigError&) {
    // refused with a message: fine
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_checkpoint: %s escaped read_checkpoint: %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz_checkpoint: a non-std exception escaped read_checkpoint\n");
    std::abort();
  }
  return 0;
}
