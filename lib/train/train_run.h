// `nmt train` as a whole: takes over an earlier run into OUT, reads and
// checks the data, plans the run (the recipe), then trains and writes the
// model in a session. See train_run.cpp for the parts of a run.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/config.h"
#include "train/checkpoints.h"
#include "train/options.h"
#include "train/previous_run.h"
#include "train/trainer.h"

namespace nmt {

struct TrainProgress {
  StepStats stats;
  double tokens_per_second = 0;  // target tokens, recent average
  double eta_seconds = -1;       // -1: no limit to estimate from
  double elapsed_seconds = 0;    // this invocation
};

struct TrainCallbacks {
  std::function<void(const std::string&)> log;         // one line, without "\n"
  std::function<void(const TrainProgress&)> progress;  // after every update
  // When non-zero (set from a signal handler), the run stops: after the
  // current update, or within a step of a validation, the averaging or the
  // shortlist's measurement (throwing Stopped inside), then saves a
  // checkpoint of the last update and returns interrupted, OUT unwritten.
  const std::atomic<int>* stop = nullptr;
  // Called when the run holds the lock on OUT (lock_path(out)), and when
  // the reading and checking is over and training is about to begin. Until
  // then a stop has nothing to save: the app's signal handler ends the
  // process at once (removing the lock if it is held), even in a blocking
  // read or inside SentencePiece.
  std::function<void()> on_locked, on_training;
};

struct TrainResult {
  int64_t steps = 0;
  bool interrupted = false;
  // "max-steps", "max-epochs", "max-minutes", "early-stop", "interrupted"
  std::string stop_reason;
  std::string model_path;  // written final model ("" when interrupted)
  std::string best_path;   // best model by the chosen metric ("" if never validated)
  double best = 0;
  std::string final_weights;   // "last" or "average" (with --average-last)
  std::vector<double> losses;  // loss per token of each update in this run
};

// cfg is the model config (its "training" object is expected to be merged
// into opts already). Takes OUT.lock for the whole run, so a second run into
// the same OUT is refused, and removes temporary files that a killed run
// left behind.
TrainResult train(ModelConfig cfg, const TrainOptions& opts, const TrainCallbacks& cb = {});

}  // namespace nmt
