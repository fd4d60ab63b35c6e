// A training run's metrics as a CSV file with fixed columns, one row per step at which
// something was measured, and the reader that loads it back (for plots and comparisons).
//
//   train::MetricsLog log(out + "/metrics.csv", {"train_loss", "val_loss", "lr"}, resumed_step);
//   log.write(step, {{"train_loss", 2.31}, {"lr", 3e-4}});   // val_loss left empty
//
// The file, as spreadsheets and pandas read it:
//
//   step,train_loss,val_loss,lr
//   100,2.31,,0.0003
//   200,2.05,2.11,0.0003
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ember::train {

// The values measured at one step, by column name.
using MetricValues = std::vector<std::pair<std::string, double>>;

// Under data parallelism rank 0 alone writes the file; the other ranks check their columns and
// write nothing.
class MetricsLog {
 public:
  // Writes `path` with the columns "step" and then `columns` (names without commas, quotes
  // or line breaks). A fresh run (resume_step empty) replaces any file already there. A
  // resumed run keeps the rows of the existing file up to and including resume_step and
  // drops the later ones, which the resumed run is about to measure again, so that the
  // curves have no duplicates; the existing file must have the same columns, or this
  // throws ember::Error naming the file and both headers. Creates the parent directory.
  MetricsLog(std::string path, std::vector<std::string> columns, std::optional<int64_t> resume_step = std::nullopt);

  // Appends one row and flushes it, so the file is current even if the run is killed.
  // Columns not in `values` are left empty; a name that is not a column throws.
  void write(int64_t step, const MetricValues& values);

  const std::string& path() const { return path_; }
  // "step" first, then the metric columns.
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  std::string path_;
  std::vector<std::string> columns_;
  std::ofstream file_;
};

// A metrics CSV read back: column names and rows of cells, an empty cell being std::nullopt.
struct MetricsTable {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<double>>> rows;

  // The index of a column; throws ember::Error naming the column when there is none.
  size_t column_index(const std::string& column) const;
  // The (step, value) pairs of one column, skipping empty cells. The first column is the step.
  std::vector<std::pair<double, double>> series(const std::string& column) const;
};

// Reads a CSV written by MetricsLog (or any CSV of numbers with a header). A missing file,
// a row with the wrong number of cells or a cell that is not a number throws ember::Error
// naming the file, the line and the cell.
MetricsTable read_metrics_csv(const std::string& path);

}  // namespace ember::train
