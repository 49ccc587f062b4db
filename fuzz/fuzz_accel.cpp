// libFuzzer target: `ukb accel` argument parsing. The input is split into
// arguments at '\n' and '\0' (at most 16, each at most 256 bytes) and run as
// `ukb accel ARGS...` with std::cout and std::cerr silenced. Exit codes 0, 1
// and 2 are fine; 3 (internal error), anything else, a crash, a hang or a
// sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <streambuf>
#include <string>
#include <vector>

#include "cli.hpp"

namespace {

/// Swallows everything written to it.
class NullBuffer : public std::streambuf {
 protected:
  int_type overflow(int_type c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

constexpr std::size_t max_args = 16, max_arg_len = 256;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> words{"ukb", "accel"};
  std::string word;
  std::size_t i = 0;
  for (; i < size && words.size() < 2 + max_args; ++i) {
    const char ch = static_cast<char>(data[i]);
    if (ch == '\n' || ch == '\0') {
      words.push_back(word);
      word.clear();
    } else if (word.size() < max_arg_len) {
      word.push_back(ch);
    }
  }
  if (i == size && !word.empty() && words.size() < 2 + max_args) words.push_back(word);

  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  static NullBuffer null;
  std::streambuf* const out = std::cout.rdbuf(&null);
  std::streambuf* const err = std::cerr.rdbuf(&null);
  const int rc = ukb_cli_main(static_cast<int>(words.size()), argv.data());
  std::cout.rdbuf(out);
  std::cerr.rdbuf(err);
  if (rc < 0 || rc > 2) {
    std::fprintf(stderr, "fuzz_accel: `ukb accel` exited with %d for the arguments:\n", rc);
    for (std::size_t k = 2; k < words.size(); ++k) std::fprintf(stderr, "  [%s]\n", words[k].c_str());
    std::abort();
  }
  return 0;
}
