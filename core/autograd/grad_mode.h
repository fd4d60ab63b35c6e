// Whether ops record the graph (grad mode), and whether they check for NaN/inf (anomaly mode).
#pragma once

namespace ember {

// Recording is on by default; NoGradGuard switches it off for the current thread within a
// scope (inference, optimizer updates, and the backward pass itself).
class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Anomaly mode (off by default): every op checks its output, and backward every gradient, for
// NaN or inf, and throws ember::Error naming the op that produced it. Slow; for debugging a
// diverging run.
class AnomalyMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : previous_(AnomalyMode::is_enabled()) { AnomalyMode::set_enabled(true); }
  ~DetectAnomalyGuard() { AnomalyMode::set_enabled(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace ember
