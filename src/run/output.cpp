// Writing the outputs of `ukb run`: see output.hpp.
#include "output.hpp"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace ukb::run {

// std::to_chars with a precision writes what printf("%.17g") writes (the
// standard defines it so), five times faster than glibc's printf: the
// results table of a run is mostly such numbers.
std::string g17(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 17);
  return std::string(buf, r.ptr);
}

void write_npy(std::ostream& f, const Table& table) {
  static_assert(std::endian::native == std::endian::little, "the .npy writer assumes little endian");
  std::size_t width = 1;
  for (std::int32_t s : table.status) width = std::max(width, status_name(static_cast<Status>(s)).size());
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
  const std::size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  const std::uint16_t hlen = static_cast<std::uint16_t>(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(reinterpret_cast<const char*>(&hlen), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::vector<char> row;
  for (std::size_t r = 0; r < table.status.size(); ++r) {
    row.clear();
    for (std::size_t k = 0; k <= table.cols.size(); ++k) {
      if (k == table.status_at) {
        std::string s = status_name(static_cast<Status>(table.status[r]));
        s.resize(width, '\0');
        row.insert(row.end(), s.begin(), s.end());
      }
      if (k < table.cols.size()) {
        char b[8];
        if (table.cols[k].integer) std::memcpy(b, &table.cols[k].i[r], 8);
        else std::memcpy(b, &table.cols[k].d[r], 8);
        row.insert(row.end(), b, b + 8);
      }
    }
    f.write(row.data(), static_cast<std::streamsize>(row.size()));
  }
}

void write_csv(std::ostream& f, const Table& table) {
  // Cells joined by commas, the status column at table.status_at.
  auto row = [&](auto&& status_cell, auto&& cell) {
    for (std::size_t k = 0; k <= table.cols.size(); ++k) {
      if (k == table.status_at) {
        if (k) f << ',';
        status_cell();
      }
      if (k < table.cols.size()) {
        if (k) f << ',';
        cell(table.cols[k]);
      }
    }
    f << '\n';
  };
  row([&] { f << "status"; }, [&](const Column& col) { f << col.name; });
  for (std::size_t r = 0; r < table.status.size(); ++r)
    row([&] { f << status_name(static_cast<Status>(table.status[r])); },
        [&](const Column& col) {
          if (col.integer) f << col.i[r];
          else f << g17(col.d[r]);
        });
}


}  // namespace ukb::run
