// Checkpoints of `ukb run`: see checkpoint.hpp for the file layout.
#include "checkpoint.hpp"

#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ukb/run.hpp"

namespace ukb::run {
namespace fs = std::filesystem;
namespace {

static_assert(std::endian::native == std::endian::little, "checkpoints are little endian");

constexpr const char* kMagic = "UKB-CHECKPOINT 1\n";

std::uint64_t fnv1a64(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

template <class T>
void put(std::string& out, const std::vector<T>& v) {
  const std::size_t at = out.size();
  out.resize(at + v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data() + at, v.data(), v.size() * sizeof(T));
}

}  // namespace

void write_checkpoint(const fs::path& file, const Checkpoint& k) {
  nlohmann::json h;
  h["version"] = k.version;
  h["config_text"] = k.config_text;
  h["config_path"] = k.config_path;
  h["identity"] = k.identity;
  h["samples"] = k.samples;
  h["done"] = k.done;
  h["system_steps"] = k.system_steps;
  nlohmann::json cols = nlohmann::json::array();
  for (const Column& c : k.cols) cols.push_back({{"name", c.name}, {"integer", c.integer}, {"input", c.input}});
  h["columns"] = cols;
  const std::string header = h.dump();

  std::string out = kMagic + std::to_string(header.size()) + "\n" + header;
  for (const Column& c : k.cols) c.integer ? put(out, c.i) : put(out, c.d);
  put(out, k.status);
  char trailer[32];
  std::snprintf(trailer, sizeof trailer, "FNV1A64 %016" PRIx64 "\n", fnv1a64(out));
  out += trailer;

  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw ConfigError("cannot write the checkpoint '" + tmp.string() + "' (" + std::strerror(errno) + ")");
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    f.close();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw ConfigError("writing the checkpoint '" + tmp.string() + "' failed (disk full?)");
    }
  }
  fs::rename(tmp, file);
}

Checkpoint read_checkpoint(const fs::path& file) {
  const std::string name = file.string();
  std::ifstream f(file, std::ios::binary);
  if (!f) throw ConfigError(name + ": cannot read the checkpoint (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  auto bad = [&](const std::string& why) -> ConfigError {
    return ConfigError(name + ": " + why + "; it cannot be resumed (delete it, or the whole "
                       "directory, to start the run again)");
  };
  const std::string magic = kMagic;
  if (s.compare(0, magic.size(), magic) != 0) throw bad("not a ukb checkpoint (no 'UKB-CHECKPOINT 1' header)");
  // Trailer: the checksum of everything before it.
  constexpr std::size_t trailer_size = 8 + 16 + 1;
  if (s.size() < magic.size() + trailer_size) throw bad("the checkpoint is truncated");
  const std::string body = s.substr(0, s.size() - trailer_size);
  const std::string trailer = s.substr(s.size() - trailer_size);
  char expect[32];
  std::snprintf(expect, sizeof expect, "FNV1A64 %016" PRIx64 "\n", fnv1a64(body));
  if (trailer.compare(0, 8, "FNV1A64 ") != 0) throw bad("the checkpoint is truncated (no checksum at its end)");
  if (trailer != expect) throw bad("the checkpoint is corrupted (checksum mismatch)");

  std::size_t at = magic.size();
  const std::size_t nl = body.find('\n', at);
  if (nl == std::string::npos) throw bad("the checkpoint's header is damaged");
  std::size_t hlen = 0;
  try {
    hlen = std::stoul(body.substr(at, nl - at));
  } catch (const std::exception&) {
    throw bad("the checkpoint's header is damaged");
  }
  at = nl + 1;
  if (hlen > body.size() - at) throw bad("the checkpoint's header is damaged");
  Checkpoint k;
  try {
    const nlohmann::json h = nlohmann::json::parse(body.substr(at, hlen));
    k.version = h.at("version").get<std::string>();
    k.config_text = h.at("config_text").get<std::string>();
    k.config_path = h.at("config_path").get<std::string>();
    k.identity = h.at("identity").get<std::string>();
    k.samples = h.at("samples").get<long>();
    k.done = h.at("done").get<long>();
    k.system_steps = h.at("system_steps").get<double>();
    for (const nlohmann::json& c : h.at("columns")) {
      Column col;
      col.name = c.at("name").get<std::string>();
      col.integer = c.at("integer").get<bool>();
      col.input = c.at("input").get<bool>();
      k.cols.push_back(std::move(col));
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("the checkpoint's header is damaged (") + e.what() + ")");
  }
  at += hlen;
  if (k.done < 0 || k.done > k.samples) throw bad("the checkpoint's header is damaged (done > samples)");
  const std::size_t rows = static_cast<std::size_t>(k.done);
  if (body.size() - at != rows * (8 * k.cols.size() + 4))
    throw bad("the checkpoint's size does not match its header");
  for (Column& c : k.cols) {
    if (c.integer) {
      c.i.resize(rows);
      if (rows) std::memcpy(c.i.data(), body.data() + at, rows * 8);
    } else {
      c.d.resize(rows);
      if (rows) std::memcpy(c.d.data(), body.data() + at, rows * 8);
    }
    at += rows * 8;
  }
  k.status.resize(rows);
  if (rows) std::memcpy(k.status.data(), body.data() + at, rows * 4);
  return k;
}

std::string config_identity(const std::string& config_json) {
  nlohmann::json j = nlohmann::json::parse(config_json);
  j.erase("config_file");
  j.erase("threads");
  if (j.contains("integrator")) j["integrator"].erase("chunk");  // results do not depend on it
  if (j.contains("output")) j["output"].erase("checkpoint_interval");
  return j.dump();
}

std::string identity_difference(const std::string& checkpoint, const std::string& now) {
  const nlohmann::json a = nlohmann::json::parse(checkpoint), b = nlohmann::json::parse(now);
  if (a == b) return "";
  // The first differing leaf, by JSON pointer.
  const nlohmann::json fa = a.flatten(), fb = b.flatten();
  auto dotted = [](std::string k) {  // "/integrator/dt" -> "integrator.dt"
    k.erase(0, 1);
    for (char& ch : k) ch = ch == '/' ? '.' : ch;
    return k;
  };
  for (auto it = fa.begin(); it != fa.end(); ++it) {
    const std::string key = it.key();
    if (!fb.contains(key)) return dotted(key) + ": " + it.value().dump() + " in the checkpoint, absent now";
    if (fb.at(key) != it.value())
      return dotted(key) + ": " + it.value().dump() + " in the checkpoint, " + fb.at(key).dump() + " now";
  }
  for (auto it = fb.begin(); it != fb.end(); ++it)
    if (!fa.contains(it.key())) return dotted(it.key()) + ": absent in the checkpoint, " + it.value().dump() + " now";
  return "the configs differ";
}

}  // namespace ukb::run
