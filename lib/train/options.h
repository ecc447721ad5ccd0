// The options of `nmt train`: the files, and the training options that the
// config's "training" object and the command line both set, declared once in
// training_options() (train/option_table.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/option_spec.h"
#include "metrics/tokenizers.h"
#include "train/optimizer.h"

namespace nmt {

struct ModelConfig;

// An option value or a combination of options that cannot mean anything
// (a usage error: the command line exits 2), as opposed to an input that is
// missing or unreadable.
class OptionError : public InputError {
 public:
  using InputError::InputError;
};

// What the recipe's model shape is for (train/recipe.h's recipe_layers):
// the best BLEU for the budget; faster translation (a two-layer decoder)
// at little or no BLEU; or a student to train on a teacher's translations
// (a one-layer decoder, which loses BLEU on original targets).
enum class Optimize { Quality, Speed, Student };
const char* optimize_name(Optimize o);  // "quality", "speed", "student"

// What picks OUT.best: validation BLEU (higher is better), or the loss.
enum class BestMetric { Bleu, Loss };
const char* best_metric_name(BestMetric m);  // "bleu", "loss"

// The config trained when none is named: the recipe then picks one by the
// corpus's size (train/recipe.h).
inline constexpr const char* kDefaultConfig = "transformer-small";

struct TrainOptions {
  // Files (command line only). Several training corpora: train_src[i] is
  // line-aligned with train_tgt[i].
  std::vector<std::string> train_src, train_tgt;
  std::string valid_src, valid_tgt;
  std::string out;  // the final model; OUT.best, OUT.ckpt/, OUT.log.jsonl, OUT.curve.svg beside it
  std::string spm;  // an existing SentencePiece model instead of training one
  // The --config file, when the config was read from one: checked not to be
  // an output, like the data files ("" for a config given in memory).
  std::string config;
  int vocab_size = 0;   // 0: the config's vocab_size
  bool resume = false;  // continue from the latest checkpoint in OUT.ckpt/
  // With resume: go on where the training or validation data differ from
  // what the checkpoint recorded of them (a warning), instead of refusing.
  bool resume_with_new_data = false;

  // The command line turns these on (--no-recipe, --no-filter turn them
  // off); a run made in code has neither unless it asks.
  // recipe: choose what the user did not give (train/recipe.h).
  bool recipe = false;
  // filter: drop exact duplicate pairs and pairs whose length ratio is
  // implausible (data.h's filters).
  bool filter = false;
  bool explain = false;  // print the recipe and stop before training
  // shortlist: at the end, build the vocabulary shortlist from the training
  // pairs and measure its cost on the validation set (model/shortlist.h).
  bool shortlist = false;
  // What the user set, by key: the training keys below, and "config",
  // "vocab_size", "dropout", "label_smoothing". The recipe leaves these.
  std::set<std::string> given;
  bool was_given(const std::string& key) const { return given.count(key) > 0; }
  // --dropout, --label-smoothing: set on whichever config is trained (< 0:
  // the config's, or the recipe's).
  double dropout = -1, label_smoothing = -1;

  // Also settable in the config's "training" object, under these names.
  int64_t batch_tokens = 4096;  // max(source, target) padded tokens per batch
  int64_t update_freq = 1;      // batches per update (gradient accumulation)
  int64_t max_steps = 0;        // 0: no limit (likewise below)
  int64_t max_epochs = 0;
  double max_minutes = 0;  // wall-clock budget of this invocation
  uint64_t seed = 1;
  int64_t warmup_steps = 4000;
  double lr_scale = 1.0;
  LrShape lr_schedule = LrShape::InverseSqrt;  // after warmup (optimizer.h)
  double clip_norm = 0;             // 0: no gradient-norm clipping
  int64_t valid_every = 1000;       // steps
  int64_t valid_sentences = 500;    // first N validation pairs decoded for BLEU (0: all)
  int64_t checkpoint_every = 1000;  // steps (0: only by time and at the end)
  double checkpoint_minutes = 0;
  int64_t keep_checkpoints = 5;  // 0: keep all
  int64_t average_last = 0;      // final model = mean of the last K checkpoints (0/1: last weights)
  int64_t early_stop = 0;        // stop after N validations without improvement (0: never)
  BestMetric best_metric = BestMetric::Bleu;
  // sacreBLEU's tokeniser for the validation BLEU: 13a, intl, char, zh,
  // ja-mecab or none (the recipe takes the target language's).
  metrics::TokenizerKind valid_tokenize = metrics::TokenizerKind::k13a;
  int64_t log_every = 100;           // steps between plain progress lines (not on a terminal)
  // BF16: mixed precision (the products in bf16 with f32 accumulation;
  // weights, gradients, optimiser and loss in f32).
  ComputeType compute_type = ComputeType::F32;
  Optimize optimize = Optimize::Quality;
  // Where the model, its gradients and Adam's moments live (--device); not
  // a recipe choice, and not written into the model, which is the same file
  // whatever device trained it.
  Device device = Device::CPU;
};

// One training option (core/option_spec.h): the config's "training"
// object's key, what its values may be, whether the recipe chooses it, and
// where TrainOptions holds it.
using TrainingOption = OptionSpec<TrainOptions>;

// Every training option, in the order --help lists them.
const std::vector<TrainingOption>& training_options();
const TrainingOption* find_training_option(const std::string& key);
// Checks every key and value of a "training" object. Throws InputError
// naming `source` and the key (with cli, naming the option: {batch_tokens}).
void validate_training_json(const nlohmann::json& j, const std::string& source, bool cli = false);

// Applies a "training" JSON object (from the config, or the command-line
// options gathered under the same names) onto opts. Unknown keys, wrong
// types and out-of-range values throw InputError naming `source` and the key
// (`cli`: name it as an option, {batch_tokens}).
void apply_training_json(const nlohmann::json& j, TrainOptions& opts, const std::string& source,
                         bool cli = false);
// The config to train, by name or file (option: how messages name what
// gave it), read, and its "training" object applied onto opts with every
// key marked as the user's; config_given: the user named the config, so the
// recipe keeps it.
ModelConfig read_training_config(const std::string& name, bool config_given,
                                 const std::string& option, TrainOptions& opts);
// Training keys the user gave, marked as the user's and applied onto opts
// (as apply_training_json).
void apply_given_training(const nlohmann::json& given, TrainOptions& opts,
                          const std::string& source, bool cli = false);
// Checks the combination of options (OptionError), that the input files
// exist and that no output of the run (OUT, OUT.best, OUT.log.jsonl,
// OUT.curve.svg, OUT.lock, OUT.ckpt/ and what it holds) is one of them, and
// that OUT.ckpt is a directory if it exists; throws InputError with one
// clear message.
void validate_options(const TrainOptions& opts);

// Refuses (OptionError naming the option) --batch-tokens and --update-freq
// whose batches could not fit in `memory` bytes: the batches of an update
// are gathered before it is computed, and a batch's activations grow with
// its tokens, the vocabulary (the logits) and the model's width. vocab: the
// vocabulary size expected. memory 0: this machine's.
void check_memory_bounds(const TrainOptions& opts, const ModelConfig& cfg, int64_t vocab,
                         uint64_t memory = 0);

nlohmann::json options_to_json(const TrainOptions& opts);

}  // namespace nmt
