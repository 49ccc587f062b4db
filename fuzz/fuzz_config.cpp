// libFuzzer target: the `ukb run` config parser. Any input may be refused
// with ukb::run::ConfigError; any other exception, a crash, a hang or a
// sanitizer report is a bug. Accepted configs are also written as JSON.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "ukb/run.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    // Model files refused: a fuzzer must not compile (or read) files.
    const ukb::run::Config c = ukb::run::parse_config(
        text, ukb::run::ConfigSource{.path = "fuzz.toml", .dir = {}, .model = nullptr, .model_files = false});
    const std::string json = c.to_json();
    if (json.empty()) std::abort();
  } catch (const ukb::run::ConfigError&) {
    // refused with a message: fine
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_config: %s escaped parse_config: %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz_config: a non-std exception escaped parse_config\n");
    std::abort();
  }
  return 0;
}
