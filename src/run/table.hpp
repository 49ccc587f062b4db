// The results table of `ukb run` (internal to the ukb_run library): one row
// per sample, its columns derived from the config, the model and the table
// of per-system fields (include/ukb/fields.hpp), so that the results files
// and the checkpoint follow the fields without a list of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ukb/fields.hpp"
#include "ukb/fresh_memory.hpp"
#include "ukb/registry.hpp"
#include "ukb/run.hpp"

namespace ukb::run {

/// The values of a column: they grow without being written (fresh_memory.hpp),
/// so that the threads that make the rows are the first to touch them.
template <class X>
using Values = std::vector<X, FreshAllocator<X>>;

/// One column of the results table, in sample order.
struct Column {
  std::string name;
  bool integer = false;
  bool input = false;
  Values<double> d;        ///< values of a double column
  Values<std::int64_t> i;  ///< values of an integer column
};

/// The results table: `sample`, the varying inputs, `status`, the final
/// state and natural quantities, the run monitors of the field table with a
/// results column, and the energies. The input columns are filled for every
/// sample before the run (the inputs are drawn once); the others grow a
/// block of samples at a time, in sample order.
struct Table {
  std::vector<Column> cols;   ///< numeric columns, in output order
  std::size_t status_at = 0;  ///< index in cols before which the status column is written
  Values<std::int32_t> status;

  std::vector<std::size_t> varying;  ///< canonical indices of the varying inputs (columns 1, 2, ...)
  std::size_t c_t = 0;               ///< t_final; then q, qd (n each) and the natural quantities
  std::size_t c_energy = 0;          ///< energy_start, energy_end, energy_dissipated (with a potential)
  bool energies = false;
  /// The run monitors written, and their columns.
  struct Monitor {
    Field field;
    std::size_t col;
  };
  std::vector<Monitor> monitors;

  /// Rows done.
  std::size_t rows() const { return status.size(); }
  /// The column named `name`, or null.
  const Column* find(const std::string& name) const {
    for (const Column& col : cols)
      if (col.name == name) return &col;
    return nullptr;
  }
};

/// The table of a run of c (columns, with room for every sample).
Table make_table(const Config& c);

/// The fields of an ensemble that the rows are made of, read once.
struct Finals {
  Finals(Ensemble& e, const Table& table);
  int N;
  const double *q, *qd, *t, *params;
  const std::int32_t* status;
  std::vector<const double*> real;         ///< per Table::monitors entry (real fields), else null
  std::vector<const std::int64_t*> i64s;   ///< per entry (64-bit counters), else null
  std::vector<const std::int32_t*> i32s;   ///< per entry (32-bit counters), else null
};

/// Where the rows of `rows_values` go: each column's values (8 bytes each,
/// a double's or an int64's) from `col[j]` (null for the input columns,
/// which are never written), the statuses (4 bytes each) from `status`.
struct RowsOut {
  std::vector<char*> col;
  char* status = nullptr;
};

/// Scratch of rows_values, reused between calls (one per thread).
struct RowScratch {
  std::vector<double> p, q, qd, nat, obs;
};

/// The rows of systems [k0, k1) of the ensemble, written column by column
/// into `out`: each sample's index, its status, its final state (system
/// k), natural quantities, observables, monitors and energies. For system
/// k0 + i: its sample is samples[i], the energy of its initial state e0[i],
/// and its row's position in `out` at[i] (k0 + i where `at` is null).
void rows_values(const Table& t, const Config& c, const Finals& f, long k0, long k1, const long* samples,
                 const double* e0, const long* at, const RowsOut& out, RowScratch& scratch);

/// `out` for rows in the table's own columns (rows that exist).
RowsOut table_out(Table& t);

/// Writes the row of a sample (row_values) at row `row` of the table (which
/// has that row).
void put_row(Table& t, std::size_t row, const Config& c, long sample, const Finals& f, int k, double e0);

/// Appends the rows of systems [k0, k1) to the table (rows_values; system
/// k0 + i is sample samples[i], e0[i] its initial energy).
void append_rows(Table& t, const Config& c, const Finals& f, long k0, long k1, const long* samples,
                 const double* e0);

/// Appends the row of a sample (append_rows of system k alone).
void append_row(Table& t, const Config& c, long sample, const Finals& f, int k, double e0);

}  // namespace ukb::run
