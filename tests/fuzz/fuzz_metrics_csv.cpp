// Fuzzes the metrics CSV readers: train::read_metrics_csv (plots and comparisons read it back)
// and the resume path of train::MetricsLog, which keeps the rows of an existing file up to the
// resumed step.
#include "fuzz_input.h"
#include "nn/train/metrics_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  const std::string path = fuzzing::write_input(fuzzing::as_text(data, size), "metrics.csv");
  fuzzing::expect_success_or_error([&] {
    const train::MetricsTable table = train::read_metrics_csv(path);
    for (size_t column = 1; column < table.columns.size(); ++column) (void)table.series(table.columns[column]);
  });
  fuzzing::expect_success_or_error([&] {
    train::MetricsLog log(path, {"train_loss", "val_loss", "lr"}, 200);
    log.write(300, {{"train_loss", 1.5}});
  });
  return 0;
}
