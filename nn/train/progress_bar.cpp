// ProgressBar: measuring (throughput smoothed over time), deciding when to draw, and the
// text of the bar.
#include "nn/train/progress_bar.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include "core/distributed/process_group.h"
#include "core/error.h"
#include "core/float_to_int.h"

namespace ember::train {
namespace {

// A window of at least this long gives one throughput sample: shorter ones are mostly noise
// (one slow step, a timer tick).
constexpr double kMinWindowSeconds = 0.5;
// The smoothing time constant: a sample's weight is 1 - exp(-window / kSmoothingSeconds).
constexpr double kSmoothingSeconds = 5.0;
constexpr int kBarWidth = 20;
// ANSI: carriage return, then erase the whole line.
constexpr const char* kClearLine = "\r\x1b[2K";

// The file descriptor behind one of the standard streams, or -1 for any other stream.
int standard_descriptor(const std::ostream& stream) {
  if (&stream == &std::cerr || &stream == &std::clog) return STDERR_FILENO;
  if (&stream == &std::cout) return STDOUT_FILENO;
  return -1;
}

// Columns of the terminal behind `fd`, or 0 when unknown.
int terminal_width(int fd) {
  winsize size{};
  if (fd < 0 || ::ioctl(fd, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  const int64_t hours = total / 3600, minutes = total / 60 % 60, secs = total % 60;
  if (hours > 0) return fmt::format("{}:{:02}:{:02}", hours, minutes, secs);
  return fmt::format("{}:{:02}", minutes, secs);
}

std::string format_metric(double value) {
  if (value == 0) return "0";
  if (!std::isfinite(value)) return fmt::format("{}", value);
  const double magnitude = std::abs(value);
  if (magnitude < 1e-2 || magnitude >= 1e6) return fmt::format("{:.2e}", value);
  // Four significant digits with the trailing zeros kept, so the line does not jitter.
  const int decimals = std::max(0, 3 - float_to_int<int>(std::floor(std::log10(magnitude))));
  return fmt::format("{:.{}f}", value, decimals);
}

std::string format_rate(double per_second) {
  if (!std::isfinite(per_second) || per_second < 0) return "?";
  const char* suffix = "";
  if (per_second >= 1e9) {
    per_second /= 1e9, suffix = "G";
  } else if (per_second >= 1e6) {
    per_second /= 1e6, suffix = "M";
  } else if (per_second >= 1e3) {
    per_second /= 1e3, suffix = "k";
  }
  if (per_second >= 100) return fmt::format("{:.0f}{}", per_second, suffix);
  if (per_second >= 10) return fmt::format("{:.1f}{}", per_second, suffix);
  return fmt::format("{:.2f}{}", per_second, suffix);
}

ProgressBar::ProgressBar(int64_t total_steps, ProgressBarOptions options, int64_t start_step)
    : options_(std::move(options)),
      bar_stream_(options_.bar_stream != nullptr ? *options_.bar_stream : std::cerr),
      message_stream_(options_.message_stream != nullptr ? *options_.message_stream : std::cout),
      total_steps_(total_steps),
      start_step_(start_step),
      step_(start_step) {
  EMBER_CHECK(total_steps > 0, "ProgressBar: total_steps must be positive, got {}", total_steps);
  EMBER_CHECK(start_step >= 0 && start_step <= total_steps,
              "ProgressBar: start_step {} is outside 0..total_steps ({})", start_step, total_steps);
  EMBER_CHECK(options_.lines_every_percent >= 0 && options_.lines_every_seconds >= 0,
              "ProgressBar: lines_every_percent and lines_every_seconds must not be negative");
  switch (options_.display) {
    case ProgressDisplay::InPlace: in_place_ = true; break;
    case ProgressDisplay::Lines: in_place_ = false; break;
    case ProgressDisplay::Auto: {
      const int fd = standard_descriptor(bar_stream_);
      in_place_ = fd >= 0 && ::isatty(fd) != 0;
      break;
    }
  }
  silent_ = !distributed::is_main_process();
  if (!options_.clock) options_.clock = monotonic_seconds;
  start_time_ = window_start_time_ = last_line_time_ = now();
  last_line_bucket_ = line_bucket(start_step);
}

ProgressBar::~ProgressBar() {
  try {
    finish();
  } catch (...) {  // a destructor must not throw; a broken stream is not worth a crash
  }
}

double ProgressBar::now() const { return options_.clock(); }

int64_t ProgressBar::line_bucket(int64_t step) const {
  if (options_.lines_every_percent == 0) return 0;
  return step * 100 / total_steps_ / options_.lines_every_percent;
}

void ProgressBar::measure(double time, double items) {
  window_items_ += items;
  total_items_ += items;
  const double window = time - window_start_time_;
  if (window < kMinWindowSeconds) {
    // No full window yet: the average so far is the best there is.
    if (!measured_ && time > start_time_) throughput_ = total_items_ / (time - start_time_);
    return;
  }
  const double sample = window_items_ / window;
  const double weight = measured_ ? 1 - std::exp(-window / kSmoothingSeconds) : 1.0;
  throughput_ += weight * (sample - throughput_);
  measured_ = true;
  window_start_time_ = time;
  window_items_ = 0;
}

std::optional<double> ProgressBar::eta_seconds() const {
  // From the average over the whole run rather than the smoothed rate, so that pauses that
  // recur (evaluation every N steps) are part of the estimate.
  const int64_t done = step_ - start_step_;
  const double elapsed = now() - start_time_;
  if (done <= 0 || elapsed <= 0) return std::nullopt;
  return static_cast<double>(std::max<int64_t>(total_steps_ - step_, 0)) * elapsed / static_cast<double>(done);
}

void ProgressBar::update(int64_t step, const ProgressMetrics& metrics, std::optional<double> items) {
  if (finished_ || silent_) return;
  const int64_t steps = std::max<int64_t>(step - step_, 0);
  step_ = step;
  if (!metrics.empty()) metrics_ = metrics;
  const double time = now();
  measure(time, items.value_or(static_cast<double>(steps)));

  if (in_place_) {
    if (time - last_draw_time_ >= options_.redraw_every_seconds || step_ >= total_steps_) draw();
    return;
  }
  const bool next_bucket = options_.lines_every_percent > 0 && line_bucket(step_) > last_line_bucket_;
  const bool time_passed = options_.lines_every_seconds > 0 && time - last_line_time_ >= options_.lines_every_seconds;
  if (next_bucket || time_passed) print_plain_line();
}

std::string ProgressBar::details() const {
  std::string text;
  for (const auto& [name, value] : metrics_) text += fmt::format("  {} {}", name, format_metric(value));
  text += fmt::format("  {} {}/s", format_rate(throughput_), options_.unit);
  return text;
}

std::string ProgressBar::status_line() const {
  const double elapsed = now() - start_time_;
  std::string line = fmt::format("{}{}{}/{} ({}%){}  elapsed {}", options_.label, options_.label.empty() ? "" : " ",
                                 step_, total_steps_, step_ * 100 / total_steps_, details(), format_duration(elapsed));
  const std::optional<double> eta = eta_seconds();
  if (eta && step_ < total_steps_) line += fmt::format("  eta {}", format_duration(*eta));
  return line;
}

std::string ProgressBar::bar_line(int bar_width) const {
  const double fraction = std::clamp(static_cast<double>(step_) / static_cast<double>(total_steps_), 0.0, 1.0);
  const int filled = float_to_int<int>(fraction * bar_width);
  const std::string bar = bar_width > 0 ? fmt::format(" [{}{}]", std::string(filled, '#'), std::string(bar_width - filled, ' ')) : "";
  std::string line = fmt::format("{}{}{:3}%{} {}/{}{}  {}", options_.label, options_.label.empty() ? "" : " ",
                                 step_ * 100 / total_steps_, bar, step_, total_steps_, details(),
                                 format_duration(now() - start_time_));
  const std::optional<double> eta = eta_seconds();
  if (eta && step_ < total_steps_) line += fmt::format(" < {}", format_duration(*eta));
  return line;
}

void ProgressBar::draw() {
  std::string line = bar_line(kBarWidth);
  // A line wider than the terminal wraps, and "\r" then returns only to the start of its
  // last row: the bar would repeat down the screen instead of redrawing. The bar graphic
  // gives way first, then the end of the line.
  const int width = terminal_width(standard_descriptor(bar_stream_));
  const int excess = width > 1 ? static_cast<int>(line.size()) - (width - 1) : 0;
  if (excess > 0) {
    line = bar_line(excess <= kBarWidth - 5 ? kBarWidth - excess : 0);
    if (static_cast<int>(line.size()) >= width) line.resize(static_cast<size_t>(width - 1));
  }
  bar_stream_ << kClearLine << line << std::flush;
  last_draw_time_ = now();
  drawn_ = true;
}

void ProgressBar::clear() {
  if (in_place_ && drawn_) bar_stream_ << kClearLine << std::flush;
}

void ProgressBar::print_plain_line() {
  bar_stream_ << status_line() << '\n' << std::flush;
  last_line_time_ = now();
  last_line_bucket_ = line_bucket(step_);
  last_line_step_ = step_;
}

void ProgressBar::print_line(const std::string& message) {
  if (silent_) return;
  clear();
  message_stream_ << message << '\n' << std::flush;
  if (in_place_ && drawn_ && !finished_) draw();
}

void ProgressBar::finish() {
  if (finished_ || silent_) return;
  if (in_place_) {
    if (drawn_) {
      draw();
      bar_stream_ << '\n' << std::flush;
    }
  } else if (last_line_step_ != step_) {
    print_plain_line();
  }
  finished_ = true;
}

}  // namespace ember::train
