// What an earlier run into the same OUT left, and how a run takes it over:
// temporary files of a killed run are removed, files that are not an nmt
// run's are refused, and with {resume} the newest whole checkpoint (a
// damaged one is named and passed over) is checked against this run and
// continued: its config, vocabulary, seed and, with the recipe, the options
// it chose.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model_file.h"
#include "train/plan.h"

namespace nmt {

// --resume where a data file differs from what the checkpoint recorded of
// it (TrainOptions::resume_with_new_data not set): the message names the
// file and the checkpoint.
class DataChanged : public InputError {
 public:
  using InputError::InputError;
};

struct Resumption {
  std::unique_ptr<FileContents> checkpoint;          // null: a new run
  std::string name;                                  // the checkpoint's file name
  nlohmann::json digests = nlohmann::json::array();  // the data it was trained on
};

using RunLog = std::function<void(const std::string&)>;

// Under OUT's lock (no other nmt writes these names): removes what a
// killed run into OUT left; returns how many files.
int clear_stale_temps(const std::string& out);

// Before any data is read: refuses an OUT that holds an earlier run's
// checkpoints without {resume}, or files that are not an nmt run's; with
// {resume}, opens the checkpoint and takes its state into plan; without
// one, loads {spm} into plan. ranks: the processes of this run.
Resumption open_previous_run(TrainPlan& plan, int ranks, const RunLog& log);

// After the data is read: each file is compared, by its role and place,
// with what the checkpoint recorded (one from before digests recorded
// nothing). A change throws DataChanged, or with resume_with_new_data is
// logged as a warning.
void check_data_unchanged(const nlohmann::json& digests, const Resumption& from,
                          bool resume_with_new_data, const RunLog& log);

}  // namespace nmt
