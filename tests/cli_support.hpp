// Running the `ukb` executable from a test (UKB_CLI_PATH is set by CMake).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sanitized.hpp"

namespace ukb::test {

// The directory of this process's test files, TempDir()/ukb_test_PID_XXXXXX/
// (ctest runs each test in a process of its own, several at once; mkdtemp:
// a recycled PID never finds the files that an earlier failure kept): made
// when first asked for, removed after the last test if every test passed,
// kept with its path printed if one failed (a crash or ctest's timeout
// keeps it without the message).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string name =
        (std::filesystem::path(::testing::TempDir()) / ("ukb_test_" + std::to_string(getpid()) + "_XXXXXX")).string();
    if (::mkdtemp(name.data()) == nullptr) {
      ADD_FAILURE() << "cannot make a directory like " << name << ": " << std::strerror(errno);
      std::abort();
    }
    return std::filesystem::path(name);
  }();
  return dir;
}

namespace detail {
inline bool scratch_made = false;

class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!scratch_made) return;
    namespace fs = std::filesystem;
    const fs::path& dir = scratch_dir();
    if (!::testing::UnitTest::GetInstance()->Passed()) {
      std::cerr << "ukb test: a test failed; its files are kept in " << dir.string() << "\n";
      return;
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec) {  // a test may leave a directory without write permission
      for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_directory(ec)) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
      fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, ec);
      ec.clear();
      fs::remove_all(dir, ec);
    }
    if (ec) std::cerr << "ukb test: cannot remove " << dir.string() << ": " << ec.message() << "\n";
  }
};
// Registered once per test executable (an inline variable; unique_path
// names it, so that its initialisation cannot be deferred away).
inline ::testing::Environment* const scratch_cleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);
}  // namespace detail

// A file name of this test in scratch_dir() (made again where the
// directory was removed: --gtest_repeat tears the environment down after
// every repetition).
inline std::string unique_path(const std::string& leaf) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  (void)detail::scratch_cleanup;
  detail::scratch_made = true;
  std::filesystem::create_directories(scratch_dir());
  return (scratch_dir() / (std::string(info->name()) + "_" + leaf)).string();
}

// The whole content of a file ("" if it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct CliRun {
  int code;
  std::string out, err;
};

// Runs the CLI with the given arguments (shell-quoted by the caller).
inline CliRun run_cli(const std::string& args) {
  const std::string err_file = unique_path("stderr.txt");
  const std::string cmd = std::string(UKB_CLI_PATH) + " " + args + " 2>" + err_file;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return {-1, "", "popen failed"};
  std::string out;
  std::array<char, 4096> buf;
  while (std::size_t k = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), k);
  const int status = pclose(pipe);
  std::ifstream ef(err_file);
  std::stringstream err;
  err << ef.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, err.str()};
}

/// A CSV file (results.csv) as rows of named columns.
inline std::vector<std::map<std::string, std::string>> read_csv(const std::filesystem::path& p) {
  std::istringstream in(slurp(p));
  std::string line;
  std::vector<std::string> head;
  std::vector<std::map<std::string, std::string>> rows;
  auto split = [](const std::string& l) {
    std::vector<std::string> v;
    std::stringstream s(l);
    for (std::string x; std::getline(s, x, ',');) v.push_back(x);
    return v;
  };
  if (std::getline(in, line)) head = split(line);
  while (std::getline(in, line)) {
    const std::vector<std::string> v = split(line);
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < head.size() && i < v.size(); ++i) row[head[i]] = v[i];
    rows.push_back(row);
  }
  return rows;
}

}  // namespace ukb::test
