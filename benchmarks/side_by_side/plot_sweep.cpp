// Draws the scaling sweep of the side-by-side benchmark with ember's own SVG plots: one figure
// per varied size (sequence length, d_model), ember's and PyTorch's step times as two curves.
//
//   ./build/benchmarks/plot_sweep benchmarks/results/sweep.csv
//   -> benchmarks/results/sweep_seq_len.svg, benchmarks/results/sweep_d_model.svg
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "ember.h"

int main(int argc, char** argv) {
  try {
    EMBER_CHECK(argc == 2, "plot_sweep: usage: plot_sweep SWEEP_CSV (columns axis,value,ember_ms,pytorch_ms)");
    const std::filesystem::path csv = argv[1];
    std::ifstream in(csv);
    EMBER_CHECK(in.good(), "plot_sweep: cannot read {}", csv.string());
    std::string line;
    std::getline(in, line);
    EMBER_CHECK(line == "axis,value,ember_ms,pytorch_ms", "plot_sweep: {}: unexpected header '{}'", csv.string(), line);

    // axis -> the two curves over it, in file order
    std::map<std::string, ember::train::Panel> panels;
    for (int number = 2; std::getline(in, line); ++number) {
      std::istringstream fields(line);
      std::string axis, value, ember_ms, pytorch_ms;
      EMBER_CHECK(std::getline(fields, axis, ',') && std::getline(fields, value, ',') &&
                      std::getline(fields, ember_ms, ',') && std::getline(fields, pytorch_ms),
                  "plot_sweep: {} line {}: expected 4 fields, got '{}'", csv.string(), number, line);
      ember::train::Panel& panel = panels[axis];
      if (panel.curves.empty()) panel = {"ms per training step", {{"ember", {}, {}}, {"PyTorch", {}, {}}}};
      for (auto& curve : panel.curves) curve.x.push_back(std::stod(value));
      panel.curves[0].y.push_back(std::stod(ember_ms));
      panel.curves[1].y.push_back(std::stod(pytorch_ms));
    }
    for (const auto& [axis, panel] : panels) {
      const std::filesystem::path svg = csv.parent_path() / ("sweep_" + axis + ".svg");
      ember::train::write_curves_svg(svg.string(), {panel}, "classifier training step, batch 32: ember and PyTorch",
                                     axis);
      fmt::print("wrote {}\n", svg.string());
    }
  } catch (const std::exception& error) {
    fmt::print(stderr, "error: {}\n", error.what());
    return 1;
  }
  return 0;
}
