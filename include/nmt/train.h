// Training, as `nmt train` does it: the recipe chooses what the options
// leave open (from the corpus, the machine and a timing probe), then the
// run trains, validates, checkpoints and writes the model.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nmt/error.h"

namespace nmt::api {

struct NMT_API TrainSpec {
  std::string config;  // a models/ name or a JSON file; empty: the recipe's, by corpus size
  std::vector<std::string> train_src, train_tgt;  // line-aligned pairs of files
  std::string valid_src, valid_tgt;
  std::string out;  // the model; OUT.best, OUT.ckpt/, OUT.log.jsonl beside it
  std::string spm;  // an existing SentencePiece model instead of training one
  // The config's "training" keys ({"max_minutes": 10, "batch_tokens":
  // 8192}), as a JSON object; they override the config's own.
  std::string training_json = "{}";
  int vocab_size = 0;                         // of the joint vocabulary; 0: the config's
  double dropout = -1, label_smoothing = -1;  // < 0: the config's, or the recipe's
  bool resume = false;
  std::string device = "cpu";
  bool recipe = true;     // choose what is not given (`nmt train --no-recipe`: false)
  bool filter = true;     // drop duplicate and implausible pairs
  bool shortlist = true;  // build and measure the vocabulary shortlist at the end
};

struct TrainProgress {
  int64_t step = 0;
  double loss = 0;  // per target token, of this update
  double tokens_per_second = 0;
  double eta_seconds = -1;  // -1: no limit to estimate from
};

struct TrainResult {
  int64_t steps = 0;
  bool interrupted = false;
  std::string stop_reason;  // "max-steps", "max-epochs", "max-minutes", "early-stop", "interrupted"
  std::string model_path;   // "" when interrupted
  std::string best_path;    // "" when never validated
};

// log: one line each, what `nmt train` prints; progress: after every
// update; stop: when it turns non-zero, the run saves a checkpoint and
// returns interrupted (resume: true goes on from it).
NMT_API TrainResult train(const TrainSpec& spec,
                          const std::function<void(const std::string&)>& log = {},
                          const std::function<void(const TrainProgress&)>& progress = {},
                          const std::atomic<int>* stop = nullptr);

}  // namespace nmt::api
