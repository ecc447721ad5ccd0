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

#include "core/comm.h"
#include "core/stop.h"
#include "model/config.h"
#include "model/transformer.h"
#include "train/checkpoints.h"
#include "train/data.h"
#include "train/grad_sync.h"
#include "train/optimizer.h"
#include "train/options.h"

namespace nmt {

class Vocab;
struct FileContents;

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

class Trainer {
 public:
  // The model must have been initialised (or loaded). The corpus must
  // outlive the trainer.
  // comm: the processes of a data-parallel run (see step()).
  Trainer(Transformer& model, const ParallelCorpus& train, const TrainOptions& opts,
          Comm& comm = world());

  // One update of update_freq batches.
  StepStats step();

  // Teacher-forced loss over `valid`, and BLEU of greedy translations of its
  // first max_bleu sentences (0: all, <0: none). Hypotheses and references
  // are decoded with vocab, or, without one, written as space-separated ids
  // (then refs may be null). Throws Stopped, between batches or decoding
  // steps, once the flag given to set_stop() is non-zero.
  ValidStats validate(const ParallelCorpus& valid, const Vocab* vocab,
                      const std::vector<std::string>* ref_lines, int64_t max_bleu);

  // A checkpoint is a complete model file (weights, config, vocabulary) plus
  // the Adam moments and the training state.
  void save(const std::string& path, const std::string& spm_model, const nlohmann::json& extra);
  // Restores weights, moments and position from a checkpoint; returns the
  // state (extra holds what save() was given). new_data: the corpus may
  // differ from the one the checkpoint was trained on (its size is not
  // compared, and a position past the end of its epoch starts the next).
  TrainState load(const FileContents& file, bool new_data = false);

  // What validate() watches; null: nothing (it runs to its end).
  void set_stop(const StopFlag* stop) { stop_ = stop; }

  int64_t steps() const { return step_; }
  // The update at which a linear or cosine schedule reaches 0 (0: none
  // known yet, which decays as the inverse square root). A run with a time
  // budget revises it as it learns how fast updates go.
  void set_schedule_steps(int64_t total) { schedule_steps_ = total; }
  int64_t schedule_steps() const { return schedule_steps_; }
  int64_t epoch() { return stream_.epoch(); }
  int64_t batch_index() { return stream_.index(); }
  int64_t batches_per_epoch() { return stream_.batches_per_epoch(); }
  Adam& adam() { return adam_; }
  Transformer& model() { return model_; }
  Grads& grads() { return grads_; }

 private:
  void greedy_bleu(const ParallelCorpus& valid, const Vocab* vocab,
                   const std::vector<std::string>* ref_lines, int64_t max_bleu,
                   ValidStats& v) const;

  void apply_update(StepStats& s);

  Transformer& model_;
  const ParallelCorpus& train_;
  TrainOptions opts_;
  Comm& comm_;
  BatchStream stream_;
  Adam adam_;
  Grads grads_;
  GradSync sync_;
  Activations acts_;  // the step's arena, reused by every batch
  int64_t step_ = 0;
  LrShape shape_;
  int64_t schedule_steps_ = 0;
  const StopFlag* stop_ = nullptr;
  Tensor dlogits_;
  // (loss, nll, tokens, the gradient's sum of squares) of a step, on the
  // model's device.
  Tensor step_totals_;
};

// Seconds of one update of `batch_tokens` on this model (forward and
// backward passes on a few batches of the corpus, no weight change; each
// timed on its second pass, once its primitives exist; the median): what the
// recipe plans a time budget with. Also returns, in fill, the target tokens
// per padded batch token.
double measure_update_seconds(Transformer& model, const ParallelCorpus& corpus,
                              int64_t batch_tokens, uint64_t seed, double* fill = nullptr);

}  // namespace nmt
