// What the tests of `ukb run` (tests/run/) share: a CSV reader, a config
// from TOML text, a run into a fresh directory, the ring configs.
#pragma once

#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.hpp"
#include "worst.hpp"
#include "ukb/engine.hpp"
#include "ukb/models/all.hpp"
#include "checkpoint.hpp"
#include "files.hpp"
#include "output.hpp"
#include "stats.hpp"
#include "ukb/crosscheck.hpp"
#include "ukb/cuda.hpp"
#include "ukb/run.hpp"

namespace ukb::test {

namespace fs = std::filesystem;
using run::Config;
using run::Dist;

inline constexpr double kG = 9.81;

// A CSV file by column name.
struct Csv {
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> rows;
  explicit Csv(const fs::path& p) {
    std::ifstream f(p);
    std::string line;
    bool header = true;
    while (std::getline(f, line)) {
      std::vector<std::string> cells;
      std::stringstream ss(line);
      std::string c;
      while (std::getline(ss, c, ',')) cells.push_back(c);
      if (header) names = cells, header = false;
      else rows.push_back(cells);
    }
  }
  std::size_t at(const std::string& name) const {
    const auto it = std::find(names.begin(), names.end(), name);
    EXPECT_NE(it, names.end()) << "no column " << name;
    return static_cast<std::size_t>(it - names.begin());
  }
  std::vector<std::string> text(const std::string& name) const {
    std::vector<std::string> v;
    const std::size_t k = at(name);
    for (const auto& r : rows) v.push_back(r[k]);
    return v;
  }
  std::vector<double> num(const std::string& name) const {
    std::vector<double> v;
    for (const std::string& s : text(name)) v.push_back(std::strtod(s.c_str(), nullptr));
    return v;
  }
};

inline Config config(const std::string& toml) { return run::parse_config(toml, "test.toml"); }

// Runs a config into a fresh directory of this test; returns the directory.
inline fs::path run_into(const Config& c, const std::string& leaf) {
  const fs::path dir = unique_path(leaf);
  fs::remove_all(dir);
  run::execute(c, {.out_dir = dir.string()});
  return dir;
}

inline std::string ring_toml(long samples, const std::string& extra_integrator = "",
                      const std::string& mu = R"({ dist = "uniform", min = 0.05, max = 0.5 })") {
  return "model = \"bead_on_ring\"\nsamples = " + std::to_string(samples) +
         "\nseed = 7\n[integrator]\ndt = 0.01\nt_end = 60.0\n" + extra_integrator +
         "\n[params]\nmu = " + mu + "\n[initial]\ntheta = 0.0\nomega = 0.0\n";
}

// The ring config with adaptive steps instead of dt = 0.01.
inline std::string ring_dopri5_toml(long samples, const std::string& extra = "") {
  std::string s = ring_toml(samples);
  const std::string from = "dt = 0.01\n";
  return s.replace(s.find(from), from.size(), "method = \"dopri5\"\nrtol = 1e-9\natol = 1e-11\n" + extra);
}

}  // namespace ukb::test
