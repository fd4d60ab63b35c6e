// MetricsLog writes and truncates the CSV; read_metrics_csv parses it back.
#include "nn/train/metrics_log.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <filesystem>
#include <string_view>

#include "core/distributed/process_group.h"
#include "core/error.h"
#include "nn/io/regular_file.h"
#include "nn/io/atomic_file.h"

namespace ember::train {
namespace {

std::vector<std::string_view> split_cells(std::string_view line) {
  std::vector<std::string_view> cells;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    cells.push_back(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return cells;
    start = comma + 1;
  }
}

// The file's lines without their line endings ("\r\n" too, should a spreadsheet have saved it).
std::vector<std::string> read_lines(const std::string& path, const char* reader) {
  check_regular_file(path, reader);
  std::ifstream file(path, std::ios::binary);
  EMBER_CHECK(file.is_open(), "{}: cannot open '{}'", reader, path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(file, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

std::optional<double> parse_cell(std::string_view cell, const std::string& path, size_t line_number,
                                 const std::string& column) {
  if (cell.empty()) return std::nullopt;
  double value = 0;
  const auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
  EMBER_CHECK(error == std::errc() && end == cell.data() + cell.size(),
              "read_metrics_csv: {} line {}: column '{}' holds '{}', which is not a number", path, line_number, column,
              cell);
  return value;
}

void check_column_name(const std::string& name) {
  EMBER_CHECK(!name.empty() && name.find_first_of(",\"\r\n") == std::string::npos,
              "MetricsLog: column name '{}' must be non-empty and contain no comma, quote or line break", name);
}

}  // namespace

MetricsLog::MetricsLog(std::string path, std::vector<std::string> columns, std::optional<int64_t> resume_step)
    : path_(std::move(path)) {
  columns_.push_back("step");
  for (std::string& column : columns) {
    check_column_name(column);
    for (const std::string& seen : columns_) {
      EMBER_CHECK(seen != column, "MetricsLog: column '{}' appears twice", column);
    }
    columns_.push_back(std::move(column));
  }
  const std::string header = fmt::format("{}", fmt::join(columns_, ","));
  if (!distributed::is_main_process()) return;  // rank 0 alone writes the file

  // The kept rows are rewritten atomically, so a crash here cannot lose the earlier history.
  std::string kept = header + "\n";
  if (resume_step && std::filesystem::exists(path_)) {
    const std::vector<std::string> lines = read_lines(path_, "MetricsLog");
    EMBER_CHECK(!lines.empty() && lines[0] == header,
                "MetricsLog: cannot resume '{}': its columns are '{}' but this run writes '{}' (use another output "
                "directory, or remove the file)",
                path_, lines.empty() ? "" : lines[0], header);
    for (size_t i = 1; i < lines.size(); ++i) {
      if (lines[i].empty()) continue;
      const std::optional<double> step = parse_cell(split_cells(lines[i])[0], path_, i + 1, "step");
      if (step && *step <= static_cast<double>(*resume_step)) kept += lines[i] + "\n";
    }
  }
  nn::write_file_atomically(path_, kept);
  file_.open(path_, std::ios::app | std::ios::binary);
  EMBER_CHECK(file_.is_open(), "MetricsLog: cannot open '{}' for appending", path_);
}

void MetricsLog::write(int64_t step, const MetricValues& values) {
  std::vector<std::string> cells(columns_.size());
  cells[0] = std::to_string(step);
  for (const auto& [name, value] : values) {
    size_t index = 1;
    while (index < columns_.size() && columns_[index] != name) ++index;
    EMBER_CHECK(index < columns_.size(), "MetricsLog::write: '{}' is not a column of '{}' (columns: {})", name, path_,
                fmt::join(columns_, ", "));
    cells[index] = fmt::format("{:.6g}", value);
  }
  if (!file_.is_open()) return;  // a rank other than 0
  file_ << fmt::format("{}", fmt::join(cells, ",")) << '\n';
  file_.flush();
  EMBER_CHECK(file_.good(), "MetricsLog::write: writing '{}' failed", path_);
}

size_t MetricsTable::column_index(const std::string& column) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == column) return i;
  }
  fail("MetricsTable: no column '{}' (columns: {})", column, fmt::join(columns, ", "));
}

std::vector<std::pair<double, double>> MetricsTable::series(const std::string& column) const {
  const size_t index = column_index(column);
  std::vector<std::pair<double, double>> points;
  for (const auto& row : rows) {
    if (row[0] && row[index]) points.emplace_back(*row[0], *row[index]);
  }
  return points;
}

MetricsTable read_metrics_csv(const std::string& path) {
  EMBER_CHECK(std::filesystem::exists(path), "read_metrics_csv: no file '{}'", path);
  const std::vector<std::string> lines = read_lines(path, "read_metrics_csv");
  EMBER_CHECK(!lines.empty() && !lines[0].empty(), "read_metrics_csv: '{}' has no header line", path);
  MetricsTable table;
  for (std::string_view name : split_cells(lines[0])) table.columns.emplace_back(name);
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    const std::vector<std::string_view> cells = split_cells(lines[i]);
    EMBER_CHECK(cells.size() == table.columns.size(), "read_metrics_csv: {} line {} has {} cells, the header {}", path,
                i + 1, cells.size(), table.columns.size());
    std::vector<std::optional<double>> row;
    for (size_t c = 0; c < cells.size(); ++c) row.push_back(parse_cell(cells[c], path, i + 1, table.columns[c]));
    table.rows.push_back(std::move(row));
  }
  return table;
}

}  // namespace ember::train
