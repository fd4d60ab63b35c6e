// SVG text for curves and heatmaps: axes with "nice" ticks (steps of 1, 2 or 5 times a power
// of ten), a legend or colour scale, and every given string escaped.
#include "nn/train/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>

#include "core/distributed/process_group.h"
#include "core/error.h"
#include "nn/io/atomic_file.h"

namespace ember::train {
namespace {

// A categorical palette that stays distinguishable for the first eight curves.
constexpr std::array<const char*, 8> kPalette = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                 "#9467bd", "#8c564b", "#e377c2", "#17becf"};
// Roughly the advance of one character of 12px sans-serif; used to make room for labels.
constexpr double kCharWidth = 7.0;

std::string svg_open(double width, double height, const std::string& title) {
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<title>{2}</title>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{3:.1f}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">{2}</text>\n",
      width, height, xml_escape(title), width / 2);
}

// The number of characters a label shows (UTF-8 continuation bytes do not start one).
size_t display_length(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// A tick label without float noise: 0.30000000000000004 shows as "0.3".
std::string tick_text(double value) { return fmt::format("{:.6g}", std::abs(value) < 1e-12 ? 0.0 : value); }

// An axis range widened to whole ticks, and the ticks.
struct Axis {
  double low, high;
  std::vector<double> ticks;

  double fraction(double value) const { return (value - low) / (high - low); }
};

Axis nice_axis(double low, double high, int target_ticks = 5) {
  if (!(low < high)) {  // a single value, or none: centre it in a range of its own size
    const double half = low == 0 || !std::isfinite(low) ? 1.0 : std::abs(low) * 0.1;
    low = std::isfinite(low) ? low - half : -1.0;
    high = std::isfinite(high) ? high + half : 1.0;
  }
  const double raw = (high - low) / target_ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normalised = raw / magnitude;
  const double step = (normalised < 1.5 ? 1 : normalised < 3 ? 2 : normalised < 7 ? 5 : 10) * magnitude;
  Axis axis{std::floor(low / step) * step, std::ceil(high / step) * step, {}};
  for (double tick = axis.low; tick <= axis.high + step * 1e-9; tick += step) {
    axis.ticks.push_back(std::round(tick / step) * step);
  }
  return axis;
}

// The smallest and largest finite values, or (inf, -inf) when there are none.
template <class Values>
std::pair<double, double> finite_range(const Values& values) {
  double low = std::numeric_limits<double>::infinity(), high = -low;
  for (double value : values) {
    if (!std::isfinite(value)) continue;
    low = std::min(low, value);
    high = std::max(high, value);
  }
  return {low, high};
}

struct Rgb {
  double red, green, blue;
};

// A sequential light-to-dark blue scale for t in [0, 1], linear between five stops.
Rgb scale_colour(double t) {
  static constexpr std::array<Rgb, 5> stops = {
      Rgb{247, 251, 255}, Rgb{198, 219, 239}, Rgb{107, 174, 214}, Rgb{33, 113, 181}, Rgb{8, 48, 107}};
  t = std::clamp(t, 0.0, 1.0) * (stops.size() - 1);
  const size_t i = std::min(static_cast<size_t>(t), stops.size() - 2);
  const double f = t - static_cast<double>(i);
  return {stops[i].red + f * (stops[i + 1].red - stops[i].red),
          stops[i].green + f * (stops[i + 1].green - stops[i].green),
          stops[i].blue + f * (stops[i + 1].blue - stops[i].blue)};
}

std::string hex(Rgb colour) {
  return fmt::format("#{:02x}{:02x}{:02x}", static_cast<int>(std::lround(colour.red)),
                     static_cast<int>(std::lround(colour.green)), static_cast<int>(std::lround(colour.blue)));
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string escaped;
  escaped.reserve(text.size());
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = byte(i);
    // Bytes that are not valid UTF-8 would make the whole file unreadable to a browser, and
    // so would control characters other than tab and line breaks: both become U+FFFD.
    size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (c == 0xC0 || c == 0xC1 || c > 0xF4) length = 0;  // overlong or beyond U+10FFFF
    for (size_t k = 1; k < length; ++k) {
      if (i + k >= text.size() || (byte(i + k) & 0xC0) != 0x80) length = 0;
    }
    if (length == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r')) {
      escaped += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    switch (c) {
      case '&': escaped += "&amp;"; break;
      case '<': escaped += "&lt;"; break;
      case '>': escaped += "&gt;"; break;
      case '"': escaped += "&quot;"; break;
      case '\'': escaped += "&apos;"; break;
      default: escaped.append(text, i, length);
    }
    i += length;
  }
  return escaped;
}

// --- curves ----------------------------------------------------------------------------------

std::string curves_svg(const std::vector<Panel>& panels, const std::string& title, const std::string& x_label) {
  constexpr double kWidth = 860, kLeft = 80, kRight = 180, kTop = 50, kPlotHeight = 200, kPanelGap = 50;
  const double plot_left = kLeft, plot_right = kWidth - kRight;
  const double height = kTop + std::max<double>(static_cast<double>(panels.size()), 1) * (kPlotHeight + kPanelGap);
  std::string svg = svg_open(kWidth, height, title);
  if (panels.empty()) {
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#666\">no values</text>\n",
                       kWidth / 2, kTop + kPlotHeight / 2);
    return svg + "</svg>\n";
  }

  // One x axis for every panel, so that the same step sits at the same place in each.
  std::vector<double> all_x;
  for (const Panel& panel : panels) {
    for (const Curve& curve : panel.curves) {
      EMBER_CHECK(curve.x.size() == curve.y.size(), "curves_svg: curve '{}' has {} x values but {} y values",
                  curve.name, curve.x.size(), curve.y.size());
      all_x.insert(all_x.end(), curve.x.begin(), curve.x.end());
    }
  }
  const auto [x_min, x_max] = finite_range(all_x);
  const Axis x_axis = nice_axis(x_min, x_max);
  const auto x_pixel = [&](double x) { return plot_left + x_axis.fraction(x) * (plot_right - plot_left); };

  for (size_t p = 0; p < panels.size(); ++p) {
    const Panel& panel = panels[p];
    const double top = kTop + static_cast<double>(p) * (kPlotHeight + kPanelGap), bottom = top + kPlotHeight;
    std::vector<double> all_y;
    for (const Curve& curve : panel.curves) all_y.insert(all_y.end(), curve.y.begin(), curve.y.end());
    auto [y_min, y_max] = finite_range(all_y);
    // A little room above and below, so a flat stretch (a constant learning rate) does not run
    // along the frame; but a non-negative metric keeps 0 as its floor.
    const double margin = 0.03 * (y_max - y_min);
    if (y_min < y_max) {
      y_min = y_min >= 0 ? std::max(0.0, y_min - margin) : y_min - margin;
      y_max += margin;
    }
    const Axis y_axis = nice_axis(y_min, y_max);
    const auto y_pixel = [&](double y) { return bottom - y_axis.fraction(y) * kPlotHeight; };

    svg += fmt::format("<g class=\"panel\">\n<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                       "fill=\"none\" stroke=\"#888\"/>\n",
                       plot_left, top, plot_right - plot_left, kPlotHeight);
    for (double tick : y_axis.ticks) {
      const double y = y_pixel(tick);
      svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>\n"
                         "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                         plot_left, y, plot_right, y, plot_left - 6, y + 4, tick_text(tick));
    }
    for (double tick : x_axis.ticks) {
      const double x = x_pixel(tick);
      svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>\n"
                         "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                         x, top, x, bottom, x, bottom + 16, tick_text(tick));
    }
    svg += fmt::format("<text transform=\"translate(18 {:.1f}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                       top + kPlotHeight / 2, xml_escape(panel.y_label));

    for (size_t c = 0; c < panel.curves.size(); ++c) {
      const Curve& curve = panel.curves[c];
      const char* colour = kPalette[c % kPalette.size()];
      std::string points;
      size_t count = 0;
      for (size_t i = 0; i < curve.x.size(); ++i) {
        if (!std::isfinite(curve.x[i]) || !std::isfinite(curve.y[i])) continue;
        points += fmt::format("{}{:.1f},{:.1f}", count++ == 0 ? "" : " ", x_pixel(curve.x[i]), y_pixel(curve.y[i]));
      }
      svg += fmt::format("<polyline class=\"curve\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\" "
                         "stroke-linejoin=\"round\" points=\"{}\"><title>{}</title></polyline>\n",
                         colour, points, xml_escape(curve.name));
      // Sparse curves (validation every N steps) get markers, so single points show too.
      if (count <= 40) {
        for (size_t i = 0; i < curve.x.size(); ++i) {
          if (!std::isfinite(curve.x[i]) || !std::isfinite(curve.y[i])) continue;
          svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n", x_pixel(curve.x[i]),
                             y_pixel(curve.y[i]), colour);
        }
      }
      const double legend_y = top + 14 + static_cast<double>(c) * 18;
      svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\" "
                         "stroke-width=\"3\"/>\n<text x=\"{4:.1f}\" y=\"{5:.1f}\">{6}</text>\n",
                         plot_right + 12, legend_y, plot_right + 32, colour, plot_right + 38, legend_y + 4,
                         xml_escape(curve.name));
    }
    svg += "</g>\n";
  }
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                     (plot_left + plot_right) / 2, height - kPanelGap + 36, xml_escape(x_label));
  return svg + "</svg>\n";
}

void write_curves_svg(const std::string& path, const std::vector<Panel>& panels, const std::string& title,
                      const std::string& x_label) {
  nn::write_file_atomically(path, curves_svg(panels, title, x_label));
}

std::vector<Panel> metric_panels(const MetricsTable& table) {
  const auto curve_of = [&](size_t column) {
    Curve curve{table.columns[column], {}, {}};
    for (const auto& [x, y] : table.series(table.columns[column])) {
      curve.x.push_back(x);
      curve.y.push_back(y);
    }
    return curve;
  };
  Panel losses{"loss", {}};
  std::vector<Panel> others;
  for (size_t column = 1; column < table.columns.size(); ++column) {
    const std::string& name = table.columns[column];
    if (name == "elapsed_s") continue;
    Curve curve = curve_of(column);
    if (curve.x.empty()) continue;
    if (name.find("loss") != std::string::npos) {
      losses.curves.push_back(std::move(curve));
    } else {
      others.push_back(Panel{name, {std::move(curve)}});
    }
  }
  std::vector<Panel> panels;
  if (!losses.curves.empty()) panels.push_back(std::move(losses));
  for (Panel& panel : others) panels.push_back(std::move(panel));
  return panels;
}

std::string plot_metrics_csv(const std::string& csv_path, const std::string& title) {
  const std::filesystem::path svg_path = std::filesystem::path(csv_path).replace_extension(".svg");
  if (!distributed::is_main_process()) return svg_path.string();  // rank 0 alone plots
  const MetricsTable table = read_metrics_csv(csv_path);
  const std::string x_label = table.columns.empty() ? "step" : table.columns[0];
  write_curves_svg(svg_path.string(), metric_panels(table),
                   title.empty() ? csv_path : title, x_label);
  return svg_path.string();
}

// --- heatmap ---------------------------------------------------------------------------------

std::string heatmap_svg(const Tensor& values, const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& column_labels, const std::string& title) {
  EMBER_CHECK(values.defined() && values.dim() == 2, "heatmap_svg: expected a 2-D tensor (rows x columns), got shape {}",
              values.defined() ? shape_str(values.sizes()) : "(undefined)");
  const auto rows = static_cast<size_t>(values.size(0)), columns = static_cast<size_t>(values.size(1));
  EMBER_CHECK(row_labels.size() == rows && column_labels.size() == columns,
              "heatmap_svg: {} row labels and {} column labels for a tensor of shape {}", row_labels.size(),
              column_labels.size(), shape_str(values.sizes()));
  const std::vector<double> cells = values.to_vector<double>();

  // Cells as large as fit in about 560 px, but no smaller than a line of text.
  const double cell = std::clamp(560.0 / static_cast<double>(std::max<size_t>({rows, columns, 1})), 14.0, 56.0);
  const double label_font = std::min(12.0, cell * 0.8);
  const bool show_values = cell >= 36;
  size_t longest_row = 1, longest_column = 1;
  for (const std::string& label : row_labels) longest_row = std::max(longest_row, display_length(label));
  for (const std::string& label : column_labels) longest_column = std::max(longest_column, display_length(label));
  // Column labels are written at -45 degrees: they rise and lean right by length / sqrt(2).
  const double column_label_extent = static_cast<double>(longest_column) * kCharWidth * label_font / 12 * 0.71 + 10;
  const double grid_left = 20 + static_cast<double>(longest_row) * kCharWidth * label_font / 12 + 8;
  const double grid_top = 44 + column_label_extent;
  const double grid_width = cell * static_cast<double>(columns), grid_height = cell * static_cast<double>(rows);
  const double scale_left = grid_left + grid_width + std::max(column_label_extent, 24.0);
  const double scale_height = std::max(grid_height, 120.0);
  const double title_width = static_cast<double>(display_length(title)) * 9.5 + 40;
  const double width = std::max(scale_left + 90, title_width);
  const double height = grid_top + std::max(grid_height, scale_height) + 24;

  // Named copies, not a structured binding: clang (16) refuses to capture a binding in a lambda
  // when compiling with OpenMP, as the sanitizer build does.
  const std::pair<double, double> range = finite_range(cells);
  const double low = range.first;
  const double high = range.second;
  const bool any_finite = low <= high;
  const auto position = [&](double value) { return high > low ? (value - low) / (high - low) : 0.5; };

  std::string svg = svg_open(width, height, title);
  for (size_t c = 0; c < columns; ++c) {
    const double x = grid_left + (static_cast<double>(c) + 0.5) * cell, y = grid_top - 6;
    svg += fmt::format("<text class=\"column-label\" transform=\"translate({:.1f} {:.1f}) rotate(-45)\" "
                       "font-size=\"{:.1f}\">{}</text>\n",
                       x, y, label_font, xml_escape(column_labels[c]));
  }
  for (size_t r = 0; r < rows; ++r) {
    const double y = grid_top + (static_cast<double>(r) + 0.5) * cell + label_font * 0.35;
    svg += fmt::format("<text class=\"row-label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"{:.1f}\">"
                       "{}</text>\n",
                       grid_left - 6, y, label_font, xml_escape(row_labels[r]));
  }
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < columns; ++c) {
      const double value = cells[r * columns + c];
      const double x = grid_left + static_cast<double>(c) * cell, y = grid_top + static_cast<double>(r) * cell;
      const bool finite = std::isfinite(value);
      const double t = finite ? position(value) : 0;
      svg += fmt::format("<rect class=\"cell\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                         "fill=\"{}\"><title>{} / {}: {:.4g}</title></rect>\n",
                         x, y, cell, cell, finite ? hex(scale_colour(t)) : "#bbbbbb", xml_escape(row_labels[r]),
                         xml_escape(column_labels[c]), value);
      if (show_values) {
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"11\" fill=\"{}\">"
                           "{:.2f}</text>\n",
                           x + cell / 2, y + cell / 2 + 4, t > 0.55 ? "white" : "#1a1a1a", value);
      }
    }
  }
  // The colour scale: a gradient through the same stops, largest value on top.
  svg += "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int i = 0; i <= 4; ++i) svg += fmt::format("<stop offset=\"{}\" stop-color=\"{}\"/>", i / 4.0, hex(scale_colour(i / 4.0)));
  svg += "</linearGradient></defs>\n";
  svg += fmt::format("<rect class=\"scale\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"16\" height=\"{:.1f}\" "
                     "fill=\"url(#scale)\" stroke=\"#888\"/>\n",
                     scale_left, grid_top, scale_height);
  if (any_finite) {
    svg += fmt::format("<text x=\"{0:.1f}\" y=\"{1:.1f}\">{2:.3g}</text>\n<text x=\"{0:.1f}\" y=\"{3:.1f}\">{4:.3g}</text>\n",
                       scale_left + 22, grid_top + 10, high, grid_top + scale_height, low);
  }
  return svg + "</svg>\n";
}

void write_heatmap_svg(const std::string& path, const Tensor& values, const std::vector<std::string>& row_labels,
                       const std::vector<std::string>& column_labels, const std::string& title) {
  nn::write_file_atomically(path, heatmap_svg(values, row_labels, column_labels, title));
}

}  // namespace ember::train
