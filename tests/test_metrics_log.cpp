// MetricsLog and read_metrics_csv: the columns, empty cells, flushing, and what a resumed
// run keeps of the earlier file.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "scratch_files.h"
#include "nn/train/metrics_log.h"

using namespace ember;
using namespace ember::testing;

namespace {



}  // namespace

TEST_CASE("a metrics log writes step first, then its columns, leaving unmeasured cells empty") {
  ScratchDir scratch("metrics_columns");
  const std::string path = scratch.file("run/metrics.csv");  // the directory is created
  train::MetricsLog log(path, {"train_loss", "val_loss", "lr"});
  CHECK(log.columns() == std::vector<std::string>{"step", "train_loss", "val_loss", "lr"});
  log.write(100, {{"train_loss", 2.5}, {"lr", 0.0003}});
  // Each row is on disk as soon as it is written, while the log is still open.
  CHECK(read_text_file(path) == "step,train_loss,val_loss,lr\n100,2.5,,0.0003\n");
  log.write(200, {{"val_loss", 2.125}, {"train_loss", 2.25}});
  CHECK(read_text_file(path) == "step,train_loss,val_loss,lr\n100,2.5,,0.0003\n200,2.25,2.125,\n");
}

TEST_CASE("a resumed log keeps the rows up to the resumed step and drops the later ones") {
  ScratchDir scratch("metrics_resume");
  const std::string path = scratch.file("metrics.csv");
  {
    train::MetricsLog log(path, {"loss"});
    for (int64_t step = 1; step <= 5; ++step) log.write(step, {{"loss", 10.0 - static_cast<double>(step)}});
  }
  train::MetricsLog resumed(path, {"loss"}, 3);
  CHECK(read_text_file(path) == "step,loss\n1,9\n2,8\n3,7\n");
  resumed.write(4, {{"loss", 6.5}});
  CHECK(read_text_file(path) == "step,loss\n1,9\n2,8\n3,7\n4,6.5\n");
}

TEST_CASE("a fresh log replaces an old file; a resumed one without a file starts one") {
  ScratchDir scratch("metrics_fresh");
  const std::string path = scratch.file("metrics.csv");
  write_text_file(path, "step,loss\n1,9\n");
  { train::MetricsLog log(path, {"loss"}); }
  CHECK(read_text_file(path) == "step,loss\n");

  const std::string other = scratch.file("other.csv");
  train::MetricsLog resumed(other, {"loss"}, 40);
  resumed.write(41, {{"loss", 1}});
  CHECK(read_text_file(other) == "step,loss\n41,1\n");
}

TEST_CASE("resuming a log whose columns differ is refused, naming the file and both headers") {
  ScratchDir scratch("metrics_other_columns");
  const std::string path = scratch.file("metrics.csv");
  write_text_file(path, "step,loss,accuracy\n1,9,0.5\n");
  CHECK_THROWS_WITH_ALL(train::MetricsLog(path, {"loss"}, 1), "MetricsLog", path.c_str(), "step,loss,accuracy",
                        "'step,loss'");
  CHECK(read_text_file(path) == "step,loss,accuracy\n1,9,0.5\n");  // left as it was
}

TEST_CASE("unknown, repeated or malformed column names are refused") {
  ScratchDir scratch("metrics_names");
  const std::string path = scratch.file("metrics.csv");
  train::MetricsLog log(path, {"loss"});
  CHECK_THROWS_WITH_ALL(log.write(1, {{"accuracy", 0.5}}), "'accuracy' is not a column", "step, loss");
  CHECK_THROWS_WITH_ALL(train::MetricsLog(path, {"loss", "loss"}), "'loss' appears twice");
  CHECK_THROWS_WITH_ALL(train::MetricsLog(path, {"a,b"}), "column name 'a,b'");
  CHECK_THROWS_WITH_ALL(train::MetricsLog(path, {"step"}), "'step' appears twice");
}

TEST_CASE("a metrics CSV reads back as columns, rows and series without the empty cells") {
  ScratchDir scratch("metrics_read");
  const std::string path = scratch.file("metrics.csv");
  {
    train::MetricsLog log(path, {"train_loss", "val_loss"});
    log.write(10, {{"train_loss", 3.0}});
    log.write(20, {{"train_loss", 2.0}, {"val_loss", 2.5}});
    log.write(30, {{"train_loss", 1.0}});
  }
  const train::MetricsTable table = train::read_metrics_csv(path);
  CHECK(table.columns == std::vector<std::string>{"step", "train_loss", "val_loss"});
  REQUIRE(table.rows.size() == 3);
  CHECK(table.rows[0][0] == 10.0);
  CHECK_FALSE(table.rows[0][2].has_value());
  CHECK(table.series("train_loss") == std::vector<std::pair<double, double>>{{10, 3}, {20, 2}, {30, 1}});
  CHECK(table.series("val_loss") == std::vector<std::pair<double, double>>{{20, 2.5}});
  CHECK_THROWS_WITH_ALL(table.series("accuracy"), "no column 'accuracy'");
}

TEST_CASE("a malformed metrics CSV is refused, naming the file, the line and the cell") {
  ScratchDir scratch("metrics_bad");
  const std::string path = scratch.file("metrics.csv");
  write_text_file(path, "step,loss\n1,2.5\n2,two\n");
  CHECK_THROWS_WITH_ALL(train::read_metrics_csv(path), path.c_str(), "line 3", "'loss'", "'two'");
  write_text_file(path, "step,loss\n1,2.5,7\n");
  CHECK_THROWS_WITH_ALL(train::read_metrics_csv(path), path.c_str(), "line 2 has 3 cells");
  CHECK_THROWS_WITH_ALL(train::read_metrics_csv(scratch.file("missing.csv")), "no file", "missing.csv");
}
