// SVG plots: well-formed XML, escaped labels, one cell per matrix entry, one panel per metric.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "scratch_files.h"
#include "nn/train/metrics_log.h"
#include "nn/train/svg_plot.h"

using namespace ember;
using namespace ember::testing;

namespace {


size_t count_of(const std::string& text, const std::string& piece) {
  size_t count = 0;
  for (size_t at = text.find(piece); at != std::string::npos; at = text.find(piece, at + 1)) ++count;
  return count;
}

// The basics of well-formed XML that a hand-written writer could get wrong: every element
// closed in order, attribute values quoted, and no '<' or bare '&' in text or attributes.
void check_well_formed(const std::string& svg) {
  REQUIRE(svg.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "));
  std::vector<std::string> open;
  size_t i = svg.find("?>") + 2;
  while (i < svg.size()) {
    const size_t tag = svg.find('<', i);
    const std::string text = svg.substr(i, tag == std::string::npos ? std::string::npos : tag - i);
    for (size_t amp = text.find('&'); amp != std::string::npos; amp = text.find('&', amp + 1)) {
      const size_t semicolon = text.find(';', amp);
      const bool entity = semicolon != std::string::npos && semicolon - amp <= 6;
      CHECK_MESSAGE(entity, "bare '&' in text: " << text);
    }
    if (tag == std::string::npos) break;
    const size_t end = svg.find('>', tag);
    REQUIRE(end != std::string::npos);
    const std::string inside = svg.substr(tag + 1, end - tag - 1);
    CHECK_MESSAGE(inside.find('<') == std::string::npos, "'<' inside a tag: " << inside);
    CHECK_MESSAGE(count_of(inside, "\"") % 2 == 0, "unbalanced quotes: " << inside);
    if (inside.starts_with("/")) {
      REQUIRE_MESSAGE(!open.empty(), "closing " << inside << " with nothing open");
      CHECK(open.back() == inside.substr(1));
      open.pop_back();
    } else if (!inside.ends_with("/")) {
      open.push_back(inside.substr(0, inside.find_first_of(" \n")));
    }
    i = end + 1;
  }
  CHECK_MESSAGE(open.empty(), "unclosed element " << (open.empty() ? "" : open.back()));
}

}  // namespace

TEST_CASE("xml_escape makes any label safe for SVG") {
  CHECK(train::xml_escape("plain") == "plain");
  CHECK(train::xml_escape("<s> & \"q\" 'a'") == "&lt;s&gt; &amp; &quot;q&quot; &apos;a&apos;");
  CHECK(train::xml_escape("Grüße") == "Grüße");           // UTF-8 passes through
  CHECK(train::xml_escape("a\x01z") == "a\xEF\xBF\xBDz");  // a control character is not allowed in XML
  CHECK(train::xml_escape("a\xC3") == "a\xEF\xBF\xBD");     // nor a truncated UTF-8 sequence
}

TEST_CASE("a heatmap has one cell per entry, the labels escaped, and values in small maps") {
  const Tensor weights = tensor({0.5f, 0.25f, 0.25f, 0.1f, 0.8f, 0.1f}, {2, 3});
  const std::string svg = train::heatmap_svg(weights, {"<cls>", "a&b"}, {"\"x\"", "time", "flies"},
                                             "attention <layer 0>");
  check_well_formed(svg);
  CHECK(count_of(svg, "class=\"cell\"") == 6);
  CHECK(count_of(svg, "class=\"row-label\"") == 2);
  CHECK(count_of(svg, "class=\"column-label\"") == 3);
  CHECK(svg.find("&lt;cls&gt;") != std::string::npos);
  CHECK(svg.find("a&amp;b") != std::string::npos);
  CHECK(svg.find("&quot;x&quot;") != std::string::npos);
  CHECK(svg.find("attention &lt;layer 0&gt;") != std::string::npos);
  CHECK(svg.find("<cls>") == std::string::npos);
  CHECK(svg.find(">0.80</text>") != std::string::npos);  // the value written in its cell
  // The largest value gets the darkest colour of the scale, the smallest the lightest.
  CHECK(svg.find("fill=\"#08306b\"><title>a&amp;b / time: 0.8</title>") != std::string::npos);
  CHECK(svg.find("fill=\"#f7fbff\"><title>a&amp;b / &quot;x&quot;: 0.1") != std::string::npos);
}

TEST_CASE("a large heatmap leaves the values out of its small cells") {
  const int64_t n = 40;
  std::vector<std::string> labels;
  for (int64_t i = 0; i < n; ++i) labels.push_back(fmt::format("t{}", i));
  const std::string svg = train::heatmap_svg(rand({n, n}), labels, labels, "40 tokens");
  check_well_formed(svg);
  CHECK(count_of(svg, "class=\"cell\"") == static_cast<size_t>(n * n));
  CHECK(count_of(svg, "</text>") == static_cast<size_t>(1 + 2 * n + 2));  // title, labels, scale ends
}

TEST_CASE("a heatmap of the wrong shape or label count is refused") {
  CHECK_THROWS_WITH_ALL(train::heatmap_svg(rand({2, 2, 2}), {"a", "b"}, {"a", "b"}, ""), "heatmap_svg",
                        "2-D", "[2, 2, 2]");
  CHECK_THROWS_WITH_ALL(train::heatmap_svg(rand({2, 3}), {"a", "b"}, {"a", "b"}, ""), "heatmap_svg",
                        "2 row labels and 2 column labels", "[2, 3]");
}

TEST_CASE("write_heatmap_svg writes the file atomically, leaving no temporary file") {
  ScratchDir scratch("svg_heatmap");
  const std::string path = scratch.file("plots/attention.svg");
  const Tensor identity = tensor({1.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 1.0f}, {3, 3});
  train::write_heatmap_svg(path, identity, {"a", "b", "c"}, {"a", "b", "c"}, "identity");
  check_well_formed(read_text_file(path));
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(scratch.dir() / "plots")) {
    CHECK(entry.path().filename() == "attention.svg");
    ++files;
  }
  CHECK(files == 1);
}

TEST_CASE("a metrics CSV plots losses in one panel and every other metric in its own") {
  ScratchDir scratch("svg_curves");
  const std::string csv = scratch.file("metrics.csv");
  {
    train::MetricsLog log(csv, {"train_loss", "val_loss", "accuracy", "lr", "elapsed_s", "never"});
    for (int64_t step = 10; step <= 100; step += 10) {
      train::MetricValues values = {{"train_loss", 3.0 / static_cast<double>(step)},
                                    {"lr", 1e-3},
                                    {"elapsed_s", static_cast<double>(step)}};
      if (step % 50 == 0) {
        values.emplace_back("val_loss", 4.0 / static_cast<double>(step));
        values.emplace_back("accuracy", 0.5 + static_cast<double>(step) / 400);
      }
      log.write(step, values);
    }
  }
  const train::MetricsTable table = train::read_metrics_csv(csv);
  const std::vector<train::Panel> panels = train::metric_panels(table);
  REQUIRE(panels.size() == 3);
  CHECK(panels[0].y_label == "loss");
  REQUIRE(panels[0].curves.size() == 2);
  CHECK(panels[0].curves[0].name == "train_loss");
  CHECK(panels[0].curves[1].name == "val_loss");
  CHECK(panels[0].curves[1].x == std::vector<double>{50, 100});
  CHECK(panels[1].y_label == "accuracy");
  CHECK(panels[2].y_label == "lr");

  const std::string svg_path = train::plot_metrics_csv(csv, "tiny & run");
  CHECK(svg_path == scratch.file("metrics.svg"));
  const std::string svg = read_text_file(svg_path);
  check_well_formed(svg);
  CHECK(count_of(svg, "class=\"panel\"") == 3);
  CHECK(count_of(svg, "class=\"curve\"") == 4);
  CHECK(svg.find("tiny &amp; run") != std::string::npos);
  CHECK(svg.find(">val_loss</text>") != std::string::npos);  // the legend
  CHECK(svg.find(">elapsed_s<") == std::string::npos);
  CHECK(svg.find(">never<") == std::string::npos);
  CHECK(svg.find(">step</text>") != std::string::npos);  // the x axis label
}

TEST_CASE("curves with one point, a constant value, or no panels still draw") {
  const std::string one = train::curves_svg({{"loss", {{"loss", {5}, {2.0}}}}}, "one point");
  check_well_formed(one);
  CHECK(count_of(one, "<circle") == 1);
  const std::string nothing = train::curves_svg({}, "empty");
  check_well_formed(nothing);
  CHECK(nothing.find("no values") != std::string::npos);
  CHECK_THROWS_WITH_ALL(train::curves_svg({{"y", {{"bad", {1, 2}, {1.0}}}}}, ""), "curve 'bad'", "2 x values");
}
