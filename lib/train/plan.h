// What a training run trains, settled before its model is built: the model
// config, every option (the user's and the recipe's, train/recipe.h), the
// recipe's reasons, the vocabulary, and the schedule the budget allows.
// train_run.cpp makes it; the session (train/session.h) trains from it.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"
#include "model/vocab.h"
#include "train/options.h"
#include "train/recipe.h"

namespace nmt {

struct TrainPlan {
  ModelConfig cfg;
  TrainOptions opts;
  Recipe recipe;
  bool recipe_restored = false;  // the options come from a resumed checkpoint's recipe
  Vocab vocab;
  std::string spm;  // the vocabulary's SentencePiece model ("" until there is one)
  // Where the learning rate reaches 0 as first planned (0: not known; the
  // session revises it from the speed it measures).
  int64_t schedule_steps = 0;
  double seconds_per_update = 0;  // measured before training (0: not measured)

  bool has_valid() const { return !opts.valid_src.empty(); }
};

}  // namespace nmt
