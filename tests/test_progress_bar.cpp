// ProgressBar: what it prints in lines mode and in place, with a fake clock so the
// throughput, elapsed time and ETA are exact.
#include <sstream>

#include "helpers.h"
#include "nn/train/progress_bar.h"

using namespace ember;
using namespace ember::testing;

namespace {

// A bar writing bar and messages to one captured stream, on a clock the test moves.
struct Captured {
  std::ostringstream out;
  double time = 0;

  train::ProgressBarOptions options(train::ProgressDisplay display = train::ProgressDisplay::Lines) {
    train::ProgressBarOptions options;
    options.label = "train";
    options.unit = "samples";
    options.display = display;
    options.bar_stream = &out;
    options.message_stream = &out;
    options.clock = [this] { return time; };
    return options;
  }
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

size_t count_of(const std::string& text, const std::string& piece) {
  size_t count = 0;
  for (size_t at = text.find(piece); at != std::string::npos; at = text.find(piece, at + 1)) ++count;
  return count;
}

}  // namespace

TEST_CASE("lines mode prints a line every 10% with metrics, throughput, elapsed time and ETA") {
  Captured captured;
  {
    train::ProgressBar bar(100, captured.options());
    CHECK_FALSE(bar.in_place());
    for (int64_t step = 1; step <= 100; ++step) {
      captured.time += 1;  // one step per second, 32 samples each
      bar.update(step, {{"loss", 2.5}, {"lr", 0.001}}, 32);
    }
    bar.finish();
  }
  const std::vector<std::string> lines = lines_of(captured.out.str());
  REQUIRE(lines.size() == 10);  // 10%, 20%, ..., 100%; finish() does not repeat the last one
  CHECK(lines[0] == "train 10/100 (10%)  loss 2.500  lr 1.00e-03  32.0 samples/s  elapsed 0:10  eta 1:30");
  CHECK(lines[4] == "train 50/100 (50%)  loss 2.500  lr 1.00e-03  32.0 samples/s  elapsed 0:50  eta 0:50");
  CHECK(lines[9] == "train 100/100 (100%)  loss 2.500  lr 1.00e-03  32.0 samples/s  elapsed 1:40");
}

TEST_CASE("a resumed bar starts at its step and times only the steps of this run") {
  Captured captured;
  train::ProgressBarOptions options = captured.options();
  options.unit = "steps";
  train::ProgressBar bar(100, options, 45);
  for (int64_t step = 46; step <= 60; ++step) {
    captured.time += 2;
    bar.update(step, {{"loss", 1.25}});
  }
  const std::vector<std::string> lines = lines_of(captured.out.str());
  REQUIRE(lines.size() == 2);  // 50% and 60%, not the 10%..40% the earlier run printed
  // Without items the throughput counts steps: 0.5 per second; 50 steps left take 100 s.
  CHECK(lines[0] == "train 50/100 (50%)  loss 1.250  0.50 steps/s  elapsed 0:10  eta 1:40");
  CHECK(lines[1].starts_with("train 60/100 (60%)"));
}

TEST_CASE("lines mode can print by time instead of by percentage, plus a final line") {
  Captured captured;
  train::ProgressBarOptions options = captured.options();
  options.lines_every_percent = 0;
  options.lines_every_seconds = 30;
  train::ProgressBar bar(100, options);
  for (int64_t step = 1; step <= 100; ++step) {
    captured.time += 1;
    bar.update(step, {{"loss", 0.5}});
  }
  bar.finish();
  bar.finish();  // a second call does nothing
  const std::vector<std::string> lines = lines_of(captured.out.str());
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].starts_with("train 30/100 (30%)"));
  CHECK(lines[1].starts_with("train 60/100 (60%)"));
  CHECK(lines[2].starts_with("train 90/100 (90%)"));
  CHECK(lines[3].starts_with("train 100/100 (100%)"));
}

TEST_CASE("a bar that goes out of scope early still prints where it stopped") {
  Captured captured;
  {
    train::ProgressBar bar(100, captured.options());
    captured.time = 3;
    bar.update(3, {{"loss", 4.0}});
  }
  const std::vector<std::string> lines = lines_of(captured.out.str());
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].starts_with("train 3/100 (3%)  loss 4.000"));
}

TEST_CASE("print_line in lines mode writes the message between the bar's lines") {
  Captured captured;
  train::ProgressBar bar(10, captured.options());
  captured.time = 1;
  bar.update(1, {{"loss", 2.0}});
  bar.print_line("step 1: val loss 1.900");
  captured.time = 2;
  bar.update(2, {{"loss", 1.5}});
  const std::vector<std::string> lines = lines_of(captured.out.str());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].starts_with("train 1/10 (10%)  loss 2.000"));
  CHECK(lines[1] == "step 1: val loss 1.900");
  CHECK(lines[2].starts_with("train 2/10 (20%)  loss 1.500"));
}

TEST_CASE("in place, the bar redraws one line and print_line clears it, prints, and redraws") {
  Captured captured;
  train::ProgressBar bar(10, captured.options(train::ProgressDisplay::InPlace));
  CHECK(bar.in_place());
  captured.time = 1;
  bar.update(5, {{"loss", 2.0}}, 100);
  const std::string clear = "\r\x1b[2K";
  CHECK(captured.out.str() == clear + "train  50% [##########          ] 5/10  loss 2.000  100 samples/s  0:01 < 0:01");

  captured.out.str("");
  bar.print_line("a message");
  const std::string after = captured.out.str();
  CHECK(after.starts_with(clear + "a message\n" + clear + "train  50% [#"));

  captured.out.str("");
  captured.time = 1.05;  // sooner than redraw_every_seconds after the last draw: not redrawn
  bar.update(6);
  CHECK(captured.out.str().empty());

  captured.time = 2;
  bar.update(10);
  bar.finish();
  const std::string end = captured.out.str();
  CHECK(end.find("100% [####################] 10/10") != std::string::npos);
  CHECK(end.ends_with("\n"));
  CHECK(count_of(end, "\n") == 1);
}

TEST_CASE("a bar on a stream that is not a terminal prints lines") {
  std::ostringstream out;
  train::ProgressBarOptions options;
  options.bar_stream = &out;
  train::ProgressBar bar(5, options);
  CHECK_FALSE(bar.in_place());
  bar.update(5);
  bar.finish();
  CHECK(out.str().starts_with("5/5 (100%)"));
}

TEST_CASE("throughput is smoothed over time: a change of speed shows gradually") {
  Captured captured;
  train::ProgressBar bar(1000, captured.options());
  for (int64_t step = 1; step <= 10; ++step) {
    captured.time += 1;
    bar.update(step, {}, 100);
  }
  CHECK(bar.throughput() == doctest::Approx(100));
  captured.time += 1;
  bar.update(11, {}, 300);  // one second at 300/s
  CHECK(bar.throughput() > 100);
  CHECK(bar.throughput() < 200);
  for (int64_t step = 12; step <= 60; ++step) {
    captured.time += 1;
    bar.update(step, {}, 300);
  }
  CHECK(bar.throughput() == doctest::Approx(300).epsilon(0.01));
}

TEST_CASE("durations, metrics and rates are formatted compactly") {
  CHECK(train::format_duration(0) == "0:00");
  CHECK(train::format_duration(41) == "0:41");
  CHECK(train::format_duration(725) == "12:05");
  CHECK(train::format_duration(3723) == "1:02:03");
  CHECK(train::format_metric(2.31349) == "2.313");
  CHECK(train::format_metric(0.2) == "0.2000");
  CHECK(train::format_metric(12.5) == "12.50");
  CHECK(train::format_metric(1234.4) == "1234");
  CHECK(train::format_metric(3e-4) == "3.00e-04");
  CHECK(train::format_metric(0) == "0");
  CHECK(train::format_rate(3.14159) == "3.14");
  CHECK(train::format_rate(950) == "950");
  CHECK(train::format_rate(5432) == "5.43k");
  CHECK(train::format_rate(1.2e6) == "1.20M");
}

TEST_CASE("a bar with no steps or a start past its end is refused") {
  CHECK_THROWS_WITH_ALL(train::ProgressBar(0), "ProgressBar", "total_steps");
  CHECK_THROWS_WITH_ALL(train::ProgressBar(10, {}, 11), "ProgressBar", "start_step 11");
}
