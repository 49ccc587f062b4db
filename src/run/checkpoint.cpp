// Checkpoints of `ukb run`: see checkpoint.hpp for the file layout.
#include "checkpoint.hpp"

#include <sys/stat.h>

#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "files.hpp"
#include "ukb/run.hpp"

namespace ukb::run {
namespace fs = std::filesystem;
namespace {

static_assert(std::endian::native == std::endian::little, "checkpoints are little endian");

constexpr const char* kMagic = "UKB-CHECKPOINT 1\n";
constexpr std::size_t kTrailer = 8 + 16 + 1;  // "FNV64WX " + 16 hex digits + "\n"
constexpr const char* kWords = "FNV64WX ";    // FnvWords: what is written
constexpr const char* kBytes = "FNV1A64 ";    // Fnv over the bytes: earlier builds' checkpoints, still read

// A checkpoint's checksum: of its words (written), or of its bytes (read
// from a checkpoint of an earlier build).
struct Checksum {
  bool words = true;
  FnvWords w;
  Fnv b;
  void add(const void* p, std::size_t n) { words ? w.add(p, n) : b.add(p, n); }
  std::string line() const { return words ? kWords + w.hex() + "\n" : kBytes + b.hex() + "\n"; }
};

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void write_checkpoint(const fs::path& file, const CheckpointHeader& k, const std::vector<Column>& cols,
                      std::span<const std::int32_t> status) {
  nlohmann::json h;
  h["version"] = k.version;
  h["config_text"] = k.config_text;
  h["config_path"] = k.config_path;
  h["config_dir"] = k.config_dir;
  h["identity"] = k.identity;
  h["samples"] = k.samples;
  h["done"] = k.done;
  h["system_steps"] = k.system_steps;
  nlohmann::json names = nlohmann::json::array();
  for (const Column& c : cols) names.push_back({{"name", c.name}, {"integer", c.integer}, {"input", c.input}});
  h["columns"] = names;
  const std::string header = dump(h);
  const std::string head = kMagic + std::to_string(header.size()) + "\n" + header;
  const std::size_t rows = static_cast<std::size_t>(k.done);

  AtomicFile f(file, "the checkpoint");
  Checksum sum;
  auto put = [&](const void* p, std::size_t n) {
    f.write(p, n);
    sum.add(p, n);
  };
  put(head.data(), head.size());
  for (const Column& c : cols) {
    if (c.integer ? c.i.size() < rows : c.d.size() < rows)
      throw std::logic_error("write_checkpoint: column " + c.name + " is shorter than done");
    if (c.integer) put(c.i.data(), rows * 8);
    else put(c.d.data(), rows * 8);
  }
  if (status.size() < rows) throw std::logic_error("write_checkpoint: fewer statuses than done");
  put(status.data(), rows * 4);
  const std::string trailer = sum.line();
  f.write(trailer.data(), trailer.size());
  f.close(/*sync=*/true);
  f.publish();
}

Checkpoint read_checkpoint(const fs::path& file) {
  const std::string name = file.string();
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0)
    throw ConfigError(name + ": cannot read the checkpoint (" + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode))
    throw ConfigError(name + ": " + (S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file") +
                      ", not a checkpoint; it cannot be resumed (delete it to start the run again)");
  std::ifstream f(file, std::ios::binary);
  if (!f) throw ConfigError(name + ": cannot read the checkpoint (" + std::strerror(errno) + ")");
  // The size of the file opened, not of the path's: a live run may replace
  // its checkpoint (a rename) between the stat and the open.
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  f.seekg(0, std::ios::beg);
  if (size < 0 || !f) throw ConfigError(name + ": cannot read the checkpoint (its size is unknown)");
  return read_checkpoint(f, static_cast<std::uintmax_t>(size), name);
}

Checkpoint read_checkpoint(std::istream& f, const std::uintmax_t size, const std::string& name) {
  auto bad = [&](const std::string& why) -> ConfigError {
    return ConfigError(name + ": " + why + "; it cannot be resumed (delete it, or the whole "
                       "directory, to start the run again)");
  };
  // The checksum its trailer names (the first 8 of the last kTrailer bytes).
  // The stream is read from where it stands; one that cannot seek is taken
  // to have the checksum that is written now.
  Checksum sum;
  const std::streampos start = f.tellg();
  if (size >= kTrailer && start != std::streampos(-1)) {
    char tag[8];
    f.seekg(start + static_cast<std::streamoff>(size - kTrailer));
    if (f.read(tag, 8) && std::string(tag, 8) == kBytes) sum.words = false;
    f.clear();
    f.seekg(start);
  }
  std::uintmax_t at = 0;
  // Reads n bytes into p, into the checksum.
  auto get = [&](void* p, std::size_t n) {
    if (!f.read(static_cast<char*>(p), static_cast<std::streamsize>(n))) throw bad("the checkpoint is truncated");
    sum.add(p, n);
    at += n;
  };
  const std::string magic = kMagic;
  std::string m(magic.size(), '\0');
  if (size < magic.size()) throw bad("not a ukb checkpoint (no 'UKB-CHECKPOINT 1' header)");
  get(m.data(), m.size());
  if (m != magic) throw bad("not a ukb checkpoint (no 'UKB-CHECKPOINT 1' header)");
  std::string digits;
  for (char c; digits.size() < 20;) {
    get(&c, 1);
    if (c == '\n') break;
    if (c < '0' || c > '9') throw bad("the checkpoint's header is damaged");
    digits += c;
  }
  if (digits.empty() || digits.size() >= 20) throw bad("the checkpoint's header is damaged");
  const std::uintmax_t hlen = std::stoull(digits);
  if (hlen > size - at || size - at - hlen < kTrailer) throw bad("the checkpoint is truncated");
  std::string text(static_cast<std::size_t>(hlen), '\0');
  get(text.data(), text.size());

  Checkpoint k;
  CheckpointHeader& h = k.header;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    auto integer = [&](const char* key) {
      const nlohmann::json& v = j.at(key);
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0) throw bad(std::string("the checkpoint's header is damaged (") + key + ")");
      return static_cast<long>(v.get<std::int64_t>());
    };
    h.version = j.at("version").get<std::string>();
    h.config_text = j.at("config_text").get<std::string>();
    h.config_path = j.at("config_path").get<std::string>();
    h.config_dir = j.value("config_dir", std::string());
    h.identity = j.at("identity").get<std::string>();
    h.samples = integer("samples");
    h.done = integer("done");
    h.system_steps = j.at("system_steps").get<double>();
    for (const nlohmann::json& c : j.at("columns")) {
      Column col;
      col.name = c.at("name").get<std::string>();
      col.integer = c.at("integer").get<bool>();
      col.input = c.at("input").get<bool>();
      k.cols.push_back(std::move(col));
    }
    if (!nlohmann::json::accept(h.identity)) throw bad("the checkpoint's header is damaged (identity)");
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("the checkpoint's header is damaged (") + e.what() + ")");
  }
  if (h.done > h.samples) throw bad("the checkpoint's header is damaged (done > samples)");
  if (!(h.system_steps >= 0) || !std::isfinite(h.system_steps))
    throw bad("the checkpoint's header is damaged (system_steps)");
  for (const Column& c : k.cols)
    if (c.name.empty() || c.name.size() > 256) throw bad("the checkpoint's header is damaged (a column name)");
  // The body's size, checked by division (no overflow) before anything is
  // allocated.
  const std::uintmax_t body = size - at - kTrailer, per_row = 8 * k.cols.size() + 4;
  const std::uintmax_t rows = static_cast<std::uintmax_t>(h.done);
  if (body % per_row != 0 || body / per_row != rows)
    throw bad("the checkpoint is truncated or damaged (its size does not match its header)");
  for (Column& c : k.cols) {
    if (c.integer) {
      c.i.resize(rows);
      get(c.i.data(), rows * 8);
    } else {
      c.d.resize(rows);
      get(c.d.data(), rows * 8);
    }
  }
  k.status.resize(rows);
  get(k.status.data(), rows * 4);
  std::string trailer(kTrailer, '\0');
  if (!f.read(trailer.data(), static_cast<std::streamsize>(kTrailer))) throw bad("the checkpoint is truncated");
  if (trailer.compare(0, 8, kWords) != 0 && trailer.compare(0, 8, kBytes) != 0)
    throw bad("the checkpoint is truncated (no checksum at its end)");
  if (trailer != sum.line()) throw bad("the checkpoint is corrupted (checksum mismatch)");
  // The checksum holds: the fields must still be those of a run (a file
  // forged with a recomputed checksum, or written by a buggy build).
  for (std::size_t r = 0; r < k.status.size(); ++r)
    if (!is_valid_status(k.status[r]))
      throw bad("sample " + std::to_string(r) + " has the invalid status code " + std::to_string(k.status[r]));
  for (const Column& c : k.cols)
    if (c.integer)
      for (std::size_t r = 0; r < c.i.size(); ++r)
        if (c.i[r] < 0)
          throw bad("sample " + std::to_string(r) + " has a negative count in column '" + c.name + "'");
  return k;
}

std::string config_identity(const std::string& config_json) {
  nlohmann::json j = nlohmann::json::parse(config_json);
  j.erase("config_file");
  j.erase("threads");
  if (j.contains("integrator")) j["integrator"].erase("chunk");  // results do not depend on it
  if (j.contains("output")) {  // neither changes the results (confidence does where [stop] tests an interval)
    j["output"].erase("checkpoint_interval");
    if (!j.contains("stop")) j["output"].erase("confidence");
  }
  return dump(j);
}

std::string identity_difference(const std::string& checkpoint, const std::string& now) {
  nlohmann::json a, b;
  try {
    a = nlohmann::json::parse(checkpoint);
    b = nlohmann::json::parse(now);
  } catch (const nlohmann::json::exception&) {
    return "the checkpoint's config is damaged";
  }
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
    if (!fb.contains(key)) return dotted(key) + ": " + dump(it.value()) + " in the checkpoint, absent now";
    if (fb.at(key) != it.value())
      return dotted(key) + ": " + dump(it.value()) + " in the checkpoint, " + dump(fb.at(key)) + " now";
  }
  for (auto it = fb.begin(); it != fb.end(); ++it)
    if (!fa.contains(it.key())) return dotted(it.key()) + ": absent in the checkpoint, " + dump(it.value()) + " now";
  return "the configs differ";
}

}  // namespace ukb::run
