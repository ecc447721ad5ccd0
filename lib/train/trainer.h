// `nmt train`: the training loop of the paper (section 5) around the
// Transformer's forward/backward pair.
//
// Two levels:
//  * Trainer: one model, one encoded corpus. step() does one update of
//    update_freq batches (gradients summed, the loss normalised by the
//    update's target tokens), Adam over the flat parameter buffer with the
//    warmup/inverse-square-root schedule; validate() computes teacher-forced
//    cross-entropy and greedy-decoding BLEU; save()/load() write and read
//    checkpoints that resume exactly (weights, Adam moments, step, data
//    position, seed). Works on raw id sequences, so tests need no vocabulary.
//  * train(): the whole command: reads and checks the files, trains or loads
//    the SentencePiece model, runs the loop with validation, best-model
//    tracking, early stopping, periodic checkpoints, the JSON-lines log and
//    the learning-curve SVG, and writes the final (optionally averaged)
//    model.
//
// Determinism: the batches of an epoch depend only on (data, batch_tokens,
// seed, epoch), and dropout masks on mix(seed, step, microbatch), so the
// same seed, data and thread count give the same loss at every step, and a
// resumed run the same losses as an uninterrupted one.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/transformer.h"
#include "train/data.h"
#include "train/optimizer.h"

namespace nmt {

class Vocab;
struct FileContents;

struct TrainOptions {
  // Files (command line only).
  std::string train_src, train_tgt, valid_src, valid_tgt;
  std::string out;  // the final model; OUT.best, OUT.ckpt/, OUT.log.jsonl, OUT.curve.svg beside it
  std::string spm;  // an existing SentencePiece model instead of training one
  int vocab_size = 0;   // 0: the config's vocab_size
  bool resume = false;  // continue from the latest checkpoint in OUT.ckpt/

  // Also settable in the config's "training" object, under these names.
  int64_t batch_tokens = 4096;  // max(source, target) padded tokens per batch
  int64_t update_freq = 1;      // batches per update (gradient accumulation)
  int64_t max_steps = 0;        // 0: no limit (likewise below)
  int64_t max_epochs = 0;
  double max_minutes = 0;  // wall-clock budget of this invocation
  uint64_t seed = 1;
  int64_t warmup_steps = 4000;
  double lr_scale = 1.0;
  double clip_norm = 0;             // 0: no gradient-norm clipping
  int64_t valid_every = 1000;       // steps
  int64_t valid_sentences = 500;    // first N validation pairs decoded for BLEU (0: all)
  int64_t checkpoint_every = 1000;  // steps (0: only by time and at the end)
  double checkpoint_minutes = 0;
  int64_t keep_checkpoints = 5;  // 0: keep all
  int64_t average_last = 0;      // final model = mean of the last K checkpoints (0/1: last weights)
  int64_t early_stop = 0;        // stop after N validations without improvement (0: never)
  std::string best_metric = "bleu";  // or "loss"
  int64_t log_every = 100;           // steps between plain progress lines (not on a terminal)
};

// Applies a "training" JSON object (from the config, or the command-line
// options gathered under the same names) onto opts. Unknown keys, wrong
// types and out-of-range values throw InputError naming `source` and the key
// (`cli`: name it as the command-line option, --batch-tokens).
void apply_training_json(const nlohmann::json& j, TrainOptions& opts, const std::string& source,
                         bool cli = false);
// Checks the combination of options and that the input files exist; throws
// InputError with one clear message.
void validate_options(const TrainOptions& opts);

struct StepStats {
  int64_t step = 0;           // after this update (1-based)
  int64_t epoch = 0;          // completed epochs after it
  double epoch_progress = 0;  // epochs as a real number
  double loss = 0;            // label-smoothed loss per target token
  double nll = 0;             // negative log-likelihood per target token
  double ppl = 0;             // exp(nll)
  double lr = 0;
  double grad_norm = 0;  // before clipping
  int64_t tgt_tokens = 0, src_tokens = 0, sentences = 0;
  double seconds = 0;  // wall time of the update
};

struct ValidStats {
  double loss = 0, nll = 0, ppl = 0;  // teacher-forced, per target token
  int64_t tokens = 0, sentences = 0;
  bool has_bleu = false;
  double bleu = 0;
  std::string bleu_text;  // sacreBLEU's line
  int64_t bleu_sentences = 0;
  std::vector<std::string> hyps;  // the decoded validation hypotheses
};

// Position and counters saved with a checkpoint.
struct TrainState {
  int64_t step = 0, epoch = 0, batch_index = 0;
  uint64_t seed = 0;
  nlohmann::json extra = nlohmann::json::object();  // the loop's own state
};

class Trainer {
 public:
  // The model must have been initialised (or loaded). The corpus must
  // outlive the trainer.
  Trainer(Transformer& model, const ParallelCorpus& train, const TrainOptions& opts);

  // One update of update_freq batches.
  StepStats step();

  // Teacher-forced loss over `valid`, and BLEU of greedy translations of its
  // first max_bleu sentences (0: all, <0: none). Hypotheses and references
  // are decoded with vocab, or, without one, written as space-separated ids
  // (then refs may be null).
  ValidStats validate(const ParallelCorpus& valid, const Vocab* vocab,
                      const std::vector<std::string>* ref_lines, int64_t max_bleu);

  // A checkpoint is a complete model file (weights, config, vocabulary) plus
  // the Adam moments and the training state.
  void save(const std::string& path, const std::string& spm_model, const nlohmann::json& extra);
  // Restores weights, moments and position from a checkpoint; returns the
  // state (extra holds what save() was given).
  TrainState load(const FileContents& file);

  int64_t steps() const { return step_; }
  int64_t epoch() { return stream_.epoch(); }
  int64_t batch_index() { return stream_.index(); }
  int64_t batches_per_epoch() { return stream_.batches_per_epoch(); }
  Adam& adam() { return adam_; }
  Transformer& model() { return model_; }

 private:
  Transformer& model_;
  const ParallelCorpus& train_;
  TrainOptions opts_;
  BatchStream stream_;
  Adam adam_;
  int64_t step_ = 0;
  Tensor dlogits_;
};

// Averages the weights of the given model files (checkpoints) into model.
void average_checkpoints(const std::vector<std::string>& paths, Transformer& model);

struct TrainProgress {
  StepStats stats;
  double tokens_per_second = 0;  // target tokens, recent average
  double eta_seconds = -1;       // -1: no limit to estimate from
  double elapsed_seconds = 0;    // this invocation
};

struct TrainCallbacks {
  std::function<void(const std::string&)> log;         // one line, without "\n"
  std::function<void(const TrainProgress&)> progress;  // after every update
  // When non-zero (set from a signal handler), training stops after the
  // current update, saves a checkpoint and returns.
  const std::atomic<int>* stop = nullptr;
};

struct TrainResult {
  int64_t steps = 0;
  bool interrupted = false;
  std::string
      stop_reason;  // "max-steps", "max-epochs", "max-minutes", "early-stop", "interrupted", ...
  std::string model_path;  // written final model ("" when interrupted)
  std::string best_path;   // best model by the chosen metric ("" if never validated)
  double best = 0;
  std::vector<double> losses;  // loss per token of each update in this run
};

// The whole `nmt train`. cfg is the model config (its "training" object is
// expected to be merged into opts already).
TrainResult train(ModelConfig cfg, const TrainOptions& opts, const TrainCallbacks& cb = {});

// Where train() puts things, from OUT.
std::string checkpoint_dir(const std::string& out);
std::vector<std::string> list_checkpoints(const std::string& out);  // oldest first

}  // namespace nmt
