// Writing the outputs of `ukb run`: see output.hpp.
#include "output.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "threads.hpp"

namespace ukb::run {

// std::to_chars with a precision writes what printf("%.17g") writes (the
// standard defines it so), five times faster than glibc's printf: the
// results table of a run is mostly such numbers.
namespace {

// g17(v) at out, which has room for 32 characters; returns the end.
char* put_g17(char* out, double v) {
  const auto word = [out](const char* w) { return out + (std::strcpy(out, w), std::strlen(w)); };
  if (std::isnan(v)) return word("nan");
  if (std::isinf(v)) return word(v > 0 ? "inf" : "-inf");
  return std::to_chars(out, out + 32, v, std::chars_format::general, 17).ptr;
}

// The status names by code, and last "unknown" (the name of a code of no
// status, which no table has); status_of(names, code) picks one.
std::vector<std::string> status_names() {
  std::vector<std::string> names;
  for (int s = 0; is_valid_status(s); ++s) names.push_back(status_name(static_cast<Status>(s)));
  names.push_back(status_name(static_cast<Status>(names.size())));
  return names;
}
const std::string& status_of(const std::vector<std::string>& names, std::int32_t code) {
  return names[is_valid_status(code) ? static_cast<std::size_t>(code) : names.size() - 1];
}

}  // namespace

std::vector<std::string> earlier_outputs(const fs::path& dir) {
  std::error_code ec;
  const fs::path f = dir / "run.json";
  const fs::file_status st = fs::symlink_status(f, ec);
  if (!fs::is_regular_file(st) || fs::file_size(f, ec) > (std::uintmax_t{16} << 20) || ec) return {};
  std::ifstream in(f, std::ios::binary);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!(j.is_object() && j.contains("version") && j.contains("config") && j.contains("status_counts"))) return {};
  std::vector<std::string> out;
  for (const char* n : output_files)
    if (!j.contains("outputs") || (j["outputs"].is_array() && std::find(j["outputs"].begin(), j["outputs"].end(),
                                                                        nlohmann::json(n)) != j["outputs"].end()))
      out.emplace_back(n);
  return out;
}

std::string g17(double v) {
  char buf[32];
  return std::string(buf, put_g17(buf, v));
}

void write_npy(std::ostream& f, const Table& table) {
  static_assert(std::endian::native == std::endian::little, "the .npy writer assumes little endian");
  // The status names made once and looked up per row, padded with NULs to
  // the widest in the table.
  std::vector<std::string> names = status_names();
  std::size_t width = 1;
  for (std::int32_t s : table.status) width = std::max(width, status_of(names, s).size());
  for (std::string& n : names) n.resize(std::max(n.size(), width), '\0');
  std::string descr = "[";
  auto field = [&](const std::string& name, const std::string& type) {
    descr += "('" + name + "', '" + type + "'), ";
  };
  for (std::size_t k = 0; k <= table.cols.size(); ++k) {
    if (k == table.status_at) field("status", "|S" + std::to_string(width));
    if (k < table.cols.size()) field(table.cols[k].name, table.cols[k].integer ? "<i8" : "<f8");
  }
  descr += "]";
  std::string header = "{'descr': " + descr + ", 'fortran_order': False, 'shape': (" +
                       std::to_string(table.status.size()) + ",), }";
  // Format 1.0 (a 2-byte header length) where the header fits in 65535
  // bytes, else 2.0 (4 bytes: a model with thousands of columns); the data
  // start 64-byte aligned either way.
  const bool v1 = header.size() + 1 + 63 <= 65535;
  const std::size_t prefix = v1 ? 10 : 12, total = prefix + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  if (v1) {
    const std::uint16_t hlen = static_cast<std::uint16_t>(header.size());
    f.write("\x93NUMPY\x01\x00", 8);
    f.write(reinterpret_cast<const char*>(&hlen), 2);
  } else {
    const std::uint32_t hlen = static_cast<std::uint32_t>(header.size());
    f.write("\x93NUMPY\x02\x00", 8);
    f.write(reinterpret_cast<const char*>(&hlen), 4);
  }
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  // The rows, a block of them at a time (one write per block), each block
  // filled a column at a time (the column's offset in a row, then a stride
  // of a row).
  const std::size_t row_bytes = width + 8 * table.cols.size(), rows = table.status.size();
  const std::size_t per_block = std::max<std::size_t>(1, (std::size_t{1} << 20) / row_bytes);
  std::vector<char> block(per_block * row_bytes);
  const std::size_t status_offset = 8 * table.status_at;
  for (std::size_t r0 = 0; r0 < rows; r0 += per_block) {
    const std::size_t r1 = std::min(rows, r0 + per_block);
    for (std::size_t k = 0; k < table.cols.size(); ++k) {
      const Column& col = table.cols[k];
      const char* from = col.integer ? reinterpret_cast<const char*>(col.i.data() + r0)
                                     : reinterpret_cast<const char*>(col.d.data() + r0);
      char* out = block.data() + 8 * k + (k >= table.status_at ? width : 0);
      for (std::size_t r = r0; r < r1; ++r, from += 8, out += row_bytes) std::memcpy(out, from, 8);
    }
    char* out = block.data() + status_offset;
    for (std::size_t r = r0; r < r1; ++r, out += row_bytes) std::memcpy(out, status_of(names, table.status[r]).data(), width);
    f.write(block.data(), static_cast<std::streamsize>((r1 - r0) * row_bytes));
  }
}

void write_csv(std::ostream& f, const Table& table, int threads) {
  // Cells joined by commas, the status column at table.status_at.
  const std::size_t ncols = table.cols.size();
  for (std::size_t k = 0; k <= ncols; ++k) {
    if (k == table.status_at) f << (k ? "," : "") << "status";
    if (k < ncols) f << (k ? "," : "") << table.cols[k].name;
  }
  f << '\n';
  // The rows in blocks, formatted side by side (the formatting of numbers,
  // not the writing, is most of the time), written in order.
  const std::vector<std::string> names = status_names();
  std::size_t widest_status = 0;
  for (const std::string& n : names) widest_status = std::max(widest_status, n.size());
  const std::size_t row_max = (ncols + 1) * 33 + widest_status + 1;  // 32 per number, a comma each
  const std::size_t rows = table.status.size();
  const int nt = thread_count(threads);
  // Two blocks per thread at a time, at most 64 MiB of buffers together
  // (2048 rows a block where that allows, at least one), allocated here:
  // nothing in the parallel loop throws.
  const std::size_t slots = 2 * static_cast<std::size_t>(nt);
  const std::size_t block = std::clamp<std::size_t>((std::size_t{64} << 20) / (slots * row_max), 1, 2048);
  std::vector<std::unique_ptr<char[]>> buf(slots);
  std::vector<std::size_t> len(slots);
  for (auto& b : buf) b = std::make_unique_for_overwrite<char[]>(std::min(block, rows) * row_max);
  for (std::size_t first = 0; first < rows; first += slots * block) {
    const std::size_t last = std::min(rows, first + slots * block);
    const long blocks = static_cast<long>((last - first + block - 1) / block);
#pragma omp parallel for num_threads(nt) schedule(static, 1)
    for (long b = 0; b < blocks; ++b) {
      const std::size_t r0 = first + static_cast<std::size_t>(b) * block, r1 = std::min(last, r0 + block);
      char* const start = buf[static_cast<std::size_t>(b)].get();
      char* p = start;
      for (std::size_t r = r0; r < r1; ++r) {
        for (std::size_t k = 0; k <= ncols; ++k) {
          if (k == table.status_at) {
            if (k) *p++ = ',';
            const int code = table.status[r];
            const std::string& name = status_of(names, code);
            p = std::copy(name.begin(), name.end(), p);
          }
          if (k < ncols) {
            if (k) *p++ = ',';
            const Column& col = table.cols[k];
            p = col.integer ? std::to_chars(p, p + 32, col.i[r]).ptr : put_g17(p, col.d[r]);
          }
        }
        *p++ = '\n';
      }
      len[static_cast<std::size_t>(b)] = static_cast<std::size_t>(p - start);
    }
    for (long b = 0; b < blocks; ++b)
      f.write(buf[static_cast<std::size_t>(b)].get(), static_cast<std::streamsize>(len[static_cast<std::size_t>(b)]));
  }
}


}  // namespace ukb::run
