// A progress bar for training loops, on stderr: step/total, the latest metrics, a smoothed
// throughput, elapsed time and ETA.
//
//   train::ProgressBar progress(total_steps, {.label = "train", .unit = "tok"}, start_step);
//   for (int64_t step = start_step + 1; step <= total_steps; ++step) {
//     ...
//     progress.update(step, {{"loss", loss.item()}, {"lr", lr}}, batch_tokens);
//     if (step % 500 == 0) progress.print_line(fmt::format("step {}: val loss {:.3f}", step, val));
//   }
//   progress.finish();
//
// On a terminal it redraws one line in place:
//   train  45% [#########           ] 450/1000  loss 2.313  lr 3.00e-04  5.43k tok/s  0:41 < 0:50
// Elsewhere (a log file, a pipe, CI) it prints a plain line each time another 10% is done or
// 30 s have passed since the last line, and a final line:
//   train 450/1000 (45%)  loss 2.313  lr 3.00e-04  5.43k tok/s  elapsed 0:41  eta 0:50
//
// Under data parallelism only rank 0 shows anything: the other ranks' bars stay silent.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ember::train {

// Named values shown after the step count, in the order given: {{"loss", 2.31}, {"acc", 0.8}}.
using ProgressMetrics = std::vector<std::pair<std::string, double>>;

enum class ProgressDisplay {
  Auto,     // in place when the bar's stream is a terminal, lines otherwise
  InPlace,  // one line redrawn with "\r"
  Lines,    // plain lines, for logs
};

struct ProgressBarOptions {
  std::string label;          // shown first ("train", "epoch 3"); may be empty
  std::string unit = "it";    // what the throughput counts: "tok" shows "tok/s", "samples" "samples/s"
  ProgressDisplay display = ProgressDisplay::Auto;
  // Lines mode: a line each time another `lines_every_percent` of the run is done, and
  // whenever `lines_every_seconds` have passed since the last line; 0 turns either off.
  int lines_every_percent = 10;
  double lines_every_seconds = 30;
  // In-place mode: the fastest redraw rate, so a fast loop does not spend its time drawing.
  double redraw_every_seconds = 0.1;
  // Where the bar goes (std::cerr by default), and where print_line's messages go
  // (std::cout by default: they are results, the bar is only status).
  std::ostream* bar_stream = nullptr;
  std::ostream* message_stream = nullptr;
  // Seconds since any fixed origin; a monotonic clock by default. Tests pass a fake one.
  std::function<double()> clock = {};
};

class ProgressBar {
 public:
  // A bar for steps start_step+1 .. total_steps. A resumed run passes the step it resumed
  // from, so the bar starts there and throughput and ETA count only the steps of this run.
  explicit ProgressBar(int64_t total_steps, ProgressBarOptions options = {}, int64_t start_step = 0);
  // Finishes the bar if finish() was not called (an exception left the loop, say).
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // The run has done `step` steps in all; `metrics` replace the ones shown. `items` is how
  // many units (tokens, samples) the steps since the last update processed; left out, the
  // throughput counts steps.
  void update(int64_t step, const ProgressMetrics& metrics = {}, std::optional<double> items = std::nullopt);

  // Prints a message on its own line between updates: in place, the bar is cleared first and
  // redrawn after, so the two do not mix.
  void print_line(const std::string& message);

  // Draws the final state and ends the bar's line (in-place), or prints the final line (lines).
  // Later calls do nothing.
  void finish();

  // The text of the bar's current state (without the bar graphic), as lines mode prints it.
  std::string status_line() const;
  // Smoothed units per second (0 before any measurement) and the estimated seconds left.
  double throughput() const { return throughput_; }
  std::optional<double> eta_seconds() const;
  bool in_place() const { return in_place_; }

 private:
  double now() const;
  // Which lines_every_percent slice of the run `step` is in.
  int64_t line_bucket(int64_t step) const;
  void measure(double time, double items);
  std::string details() const;   // metrics and throughput
  std::string bar_line(int bar_width) const;  // the in-place line, with a bar graphic that wide
  void draw();
  void clear();
  void print_plain_line();

  ProgressBarOptions options_;
  std::ostream& bar_stream_;
  std::ostream& message_stream_;
  bool in_place_ = false;
  bool silent_ = false;  // a rank other than 0 of a data-parallel job
  int64_t total_steps_, start_step_, step_;
  ProgressMetrics metrics_;
  double start_time_;
  // Throughput is smoothed over time, not over calls, so it reads the same whether the loop
  // updates every step or every hundred.
  double window_start_time_, window_items_ = 0, total_items_ = 0;
  double throughput_ = 0;
  bool measured_ = false;
  double last_draw_time_ = -1e300, last_line_time_;
  int64_t last_line_bucket_ = 0, last_line_step_ = -1;
  bool drawn_ = false, finished_ = false;
};

// "0:41", "12:05", "1:02:03".
std::string format_duration(double seconds);
// A metric's value in four significant digits, trailing zeros kept so the width stays put:
// "2.313", "0.2000", "12.50"; very small or large ones in scientific notation: "3.00e-04".
std::string format_metric(double value);
// "950", "5.43k", "1.20M": three significant digits.
std::string format_rate(double per_second);

}  // namespace ember::train
