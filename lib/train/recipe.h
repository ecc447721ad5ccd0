// The training recipe: what `nmt train` chooses for the options a user did
// not give, from the data and the budget, each choice with its reason.
//
// Two stages, because the second needs what the first makes possible:
//   1. from the corpus (pairs, script): the model config (when -c is not
//      given), the vocabulary size and SentencePiece's character coverage,
//      the compute type;
//   2. from the budget and the throughput measured on a model of the
//      chosen shape (plan_budget, before the model is built): the
//      number of updates the budget allows, and from it the batch size, the
//      warmup, the learning-rate schedule and its peak, dropout, label
//      smoothing, and the validation, checkpoint, averaging and early-stopping
//      cadence.
// Both stages are pure functions of their inputs (the second's measurements
// come from a probe the caller passes), so tests can ask what a corpus of
// any size on any machine would get without having either. An option the user gave
// (on the command line or in the config's "training" object) is never
// changed; it is listed as given.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/device.h"
#include "model/config.h"
#include "train/options.h"

namespace nmt {

struct RecipeChoice {
  std::string key;     // the option's key: "batch_tokens", "config", "vocab_size", ...
  nlohmann::json value;
  std::string reason;  // "given" for a user's own value
  bool given = false;
};

class Recipe {
 public:
  void choose(const std::string& key, nlohmann::json value, std::string reason);
  void given(const std::string& key, nlohmann::json value, std::string where = "given");
  // Replaces an earlier choice of `key` and moves it to the end, so that a
  // stage that learns more (a measurement) logs its revision after the rest.
  void revise(const std::string& key, nlohmann::json value, std::string reason);
  const std::vector<RecipeChoice>& choices() const { return choices_; }
  const RecipeChoice* find(const std::string& key) const;
  // One line per choice: "batch_tokens 2048: <reason>".
  std::vector<std::string> lines() const;
  nlohmann::json to_json() const;
  static Recipe from_json(const nlohmann::json& j);
  bool empty() const { return choices_.empty(); }

 private:
  std::vector<RecipeChoice> choices_;
};

// What the first stage looks at: the corpus as it will be trained on
// (after the filters), and a sample's script.
struct CorpusFacts {
  int64_t pairs = 0;
  // Shares of the characters of each side (a sample of lines; spaces and
  // ASCII punctuation not counted) that are Han, kana or Hangul.
  double src_cjk = 0, tgt_cjk = 0;
  double tgt_kana = 0;  // of the target side's characters, the share that is kana (Japanese)
};
// Reads at most `sample` lines of each side.
CorpusFacts corpus_facts(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                         size_t sample = 20000);

// The shipped config the recipe takes for a corpus of this many pairs.
std::string recipe_config_name(int64_t pairs, std::string* reason = nullptr);

// The layer split for opts.optimize, on the config the recipe chose (a
// given config keeps its layers: listed as given). quality: the config's
// own. The decoder runs once per output token and beam, the encoder once
// per source token, so at beam 4 a decoder layer costs about five encoder
// layers of translation time: speed keeps the encoder and gives the
// decoder two layers, which on original targets scored as well as three in
// 10 minutes (1.2 BLEU less in one 60-minute run: bench/recipe.sh);
// student gives it one, which scores well only on a teacher's translations
// (Kim and Rush 2016; nmt distill). (Kasai et al. 2021 also deepen the
// encoder, 12+1 for 6+6; on the budgets this recipe plans, an hour or less
// on a CPU, a deeper encoder learned several times more slowly:
// bench/recipe.sh.) Renames cfg ("transformer-small-3x2").
void recipe_layers(ModelConfig& cfg, const TrainOptions& opts, Recipe& recipe);

struct DataRecipe {
  int vocab_size = 8000;
  double character_coverage = 1.0;
  std::string compute_type = "f32";
};

// Stage 1. opts.given says what the user set ("config", "vocab_size",
// "compute_type", ...); cfg is the config in use (the given one, or the
// recipe's, already loaded). bf16_why_not: "" when this machine trains in
// bf16, else why it cannot; mecab_why_not likewise for the ja-mecab
// tokeniser. Sets opts.vocab_size, compute_type and valid_tokenize.
DataRecipe recipe_for_data(const CorpusFacts& facts, const ModelConfig& cfg, TrainOptions& opts,
                           const std::string& bf16_why_not, Recipe& recipe,
                           const std::string& mecab_why_not = "");

// The compute type by measured speed, once the model is built: the
// instruction set does not tell (a Xeon with AVX512-BF16 but no AMX trained
// 2218 target tokens/s in bf16 against about 3500 in f32, an AMD EPYC with
// the same instructions 1.6x faster in bf16), so bf16 is kept only where an
// update of `batch_tokens` runs at least 5% faster in it. Revises
// stage 1's choice; does nothing when the compute type was given or stage 1
// chose f32. Returns whether it changed the compute type.
bool recipe_compute_by_speed(double bf16_seconds, double f32_seconds, int64_t batch_tokens,
                             TrainOptions& opts, Recipe& recipe);

struct BudgetFacts {
  int64_t pairs = 0;
  int64_t target_tokens = 0;  // of the encoded corpus, with </s>
  int64_t widest_pair = 0;    // subwords of the widest pair, with </s>: the smallest batch
  // Measured on the model about to be trained: seconds of one update of
  // `probe_batch_tokens`; 0 when not measured (a budget of steps or epochs
  // needs no clock).
  double probe_seconds = 0;
  int64_t probe_batch_tokens = 0;
  // Target tokens per padded batch token, as the batches come out.
  double fill = 0.8;
  bool has_valid = false;
};

// Stage 2. Sets the options and cfg's dropout and label smoothing (unless
// given); returns the number of updates the schedule ends at (0: no end,
// for a run without a budget).
int64_t recipe_for_budget(const BudgetFacts& facts, ModelConfig& cfg, TrainOptions& opts,
                          Recipe& recipe);

// One update's time as a probe measures it, on a model of the run's shape
// (not the one it will train: train_run.cpp builds a throwaway one).
struct ProbeTiming {
  double seconds = 0;  // one update of the batch asked for
  double fill = 0.8;   // target tokens per padded batch token
};
using UpdateProbe = std::function<ProbeTiming(int64_t batch_tokens, ComputeType type)>;

struct BudgetPlan {
  int64_t updates = 0;            // recipe_for_budget's
  double seconds_per_update = 0;  // at the chosen batch, from the probe (0: not measured)
  bool compute_revised = false;   // the compute type's choice was revised (moved last)
};

// Stage 2 with the measurements it needs. Only a budget of time is timed
// (a budget of steps or epochs must train the same model on every run of
// the same command: a resumed run is checked against an uninterrupted
// one). Then: where stage 1 chose bf16 on its own, an update is timed in
// bf16 and in f32 and the faster kept (recipe_compute_by_speed); the plan
// is made with the chosen type's speed, and when the batch it picks is not
// the one timed (smaller batches run fewer tokens a second), that batch is
// timed and the plan made again. A batch is never timed below the widest
// pair.
BudgetPlan plan_budget(BudgetFacts facts, ModelConfig& cfg, TrainOptions& opts, Recipe& recipe,
                       const UpdateProbe& probe);

// The updates a time budget allows at `seconds_per_update`, keeping
// `reserve_seconds` for the end (the last validation and the final model).
int64_t updates_in_time(double seconds_left, double seconds_per_update, double reserve_seconds);

}  // namespace nmt
