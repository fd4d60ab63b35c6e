// SVG figures a browser shows directly: the curves of a training run (from its metrics CSV)
// and heatmaps (attention weights, one cell per token pair).
//
//   train::plot_metrics_csv("out/metrics.csv", "text classifier");   // writes out/metrics.svg
//   train::write_heatmap_svg("out/attention.svg", weights /* [5, 5] */, tokens, tokens,
//                            "layer 0, head 3: rows attend to columns");
//
// Every writer is atomic (nn::write_file_atomically) and escapes the text it is given.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/train/metrics_log.h"

namespace ember::train {

// One line of a plot: (x, y) points in order. Points whose y is not finite are left out.
struct Curve {
  std::string name;
  std::vector<double> x, y;
};

// One plot area with its own y axis; the curves share it and a legend names them.
struct Panel {
  std::string y_label;
  std::vector<Curve> curves;
};

// Panels stacked top to bottom over a shared x axis (so their steps line up), under `title`.
std::string curves_svg(const std::vector<Panel>& panels, const std::string& title, const std::string& x_label = "step");
void write_curves_svg(const std::string& path, const std::vector<Panel>& panels, const std::string& title,
                      const std::string& x_label = "step");

// The panels of a metrics table: every column whose name contains "loss" in one panel
// (train and validation loss on one scale), then one panel per other column, in file order.
// The first column (the step) is the x axis; "elapsed_s" (the clock) and columns without a
// value are not plotted.
std::vector<Panel> metric_panels(const MetricsTable& table);

// Reads the metrics CSV at `csv_path` and writes its curves beside it, as the same name with
// ".svg" ("out/metrics.csv" -> "out/metrics.svg"). Returns the SVG's path. `title` defaults
// to the CSV's path. Under data parallelism rank 0 alone writes it.
std::string plot_metrics_csv(const std::string& csv_path, const std::string& title = "");

// A heatmap of a 2-D tensor (any float dtype or device): one square cell per (row, column),
// coloured from light (the smallest value) to dark (the largest), with a colour scale, row
// labels on the left and column labels on top, and each cell's value written in it when the
// cells are large enough to hold it. The label counts must match the tensor's shape.
std::string heatmap_svg(const Tensor& values, const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& column_labels, const std::string& title);
void write_heatmap_svg(const std::string& path, const Tensor& values, const std::vector<std::string>& row_labels,
                       const std::vector<std::string>& column_labels, const std::string& title);

// Text made safe for SVG/XML: & < > " ' become entities.
std::string xml_escape(const std::string& text);

}  // namespace ember::train
