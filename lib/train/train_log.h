// What a training run leaves for people to read: OUT.log.jsonl, one JSON
// object per line for every metric, and OUT.curve.svg, the learning curve.
//
// The log is appended one line per write(2) on an O_APPEND descriptor, so a
// kill -9 never leaves half a line; sync() makes it durable at checkpoints.
// On --resume the lines after the checkpoint's step are dropped (that work
// is redone), and the curve is rebuilt from the lines kept, each of which is
// checked for the fields the curve reads.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "train/learning_curve.h"

namespace nmt {

class TrainLog {
 public:
  // resume: keep the entries up to `step`; otherwise start afresh.
  TrainLog(const std::string& out, bool resume, int64_t step, const std::string& title);
  ~TrainLog();
  TrainLog(const TrainLog&) = delete;
  TrainLog& operator=(const TrainLog&) = delete;

  void write(const nlohmann::json& entry);
  void sync();
  // Lines of the old log that were dropped on resume because they were not
  // JSON objects or lacked a field the curve needs.
  int64_t unreadable() const { return unreadable_; }

  void add_train(int64_t step, double loss) { curve_.train_loss.push_back({double(step), loss}); }
  void add_valid(int64_t step, double loss, const double* bleu);
  void write_curve() const;

 private:
  void keep_entries_until(int64_t step);

  std::string path_, curve_path_;
  int fd_ = -1;
  CurveData curve_;
  int64_t unreadable_ = 0;
};

}  // namespace nmt
