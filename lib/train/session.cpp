#include "train/session.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/backend.h"
#include "core/error.h"
#include "core/format.h"
#include "core/stop.h"
#include "ops/ops.h"
#include "train/checkpoints.h"

namespace nmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

TrainSession::TrainSession(const TrainPlan& plan, const TrainingData& data,
                           const TrainCallbacks& cb, Clock::time_point start)
    : plan_(plan), opts_(plan.opts), data_(data), cb_(cb), start_(start), last_ckpt_time_(start) {}

double TrainSession::seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void TrainSession::log(const std::string& s) const {
  if (root() && cb_.log) cb_.log(s);
}

TrainResult TrainSession::run(std::unique_ptr<FileContents> checkpoint) {
  build(std::move(checkpoint));
  if (cb_.on_training) cb_.on_training();
  if (root()) open_log();
  loop();
  if (root()) finish();
  result_.steps = trainer_->steps();
  result_.interrupted = result_.stop_reason == "interrupted";
  return std::move(result_);
}

void TrainSession::build(std::unique_ptr<FileContents> checkpoint) {
  model_ = std::make_unique<Transformer>(plan_.cfg, opts_.device);
  model_->init(opts_.seed);
  model_->params().set_compute_type(opts_.compute_type);
  trainer_ = std::make_unique<Trainer>(*model_, data_.train, opts_);
  trainer_->set_stop(cb_.stop);
  trainer_->set_schedule_steps(plan_.schedule_steps);
  if (checkpoint) take_loop_state(trainer_->load(*checkpoint, opts_.resume_with_new_data).extra);
  last_ckpt_step_ = trainer_->steps();
  loop_start_step_ = trainer_->steps();
}

// What the loop of the run a checkpoint resumes had reached.
void TrainSession::take_loop_state(const json& e) {
  auto num = [&](const char* key, double fallback) {
    return e.contains(key) && e[key].is_number() ? e[key].get<double>() : fallback;
  };
  best_ = num("best", 0.0);
  best_step_ = static_cast<int64_t>(num("best_step", -1));
  bad_valids_ = static_cast<int64_t>(num("bad_validations", 0));
  last_valid_step_ = static_cast<int64_t>(num("last_valid_step", -1));
  last_metric_ = num("last_metric", 0.0);
  // A checkpoint written by the validation that ran out the patience:
  // the run it resumes had decided to stop there.
  early_stopped_ = opts_.early_stop > 0 && bad_valids_ >= opts_.early_stop;
  train_seconds_before_ = num("train_seconds", 0.0);
  trainer_->set_schedule_steps(static_cast<int64_t>(num("schedule_steps", 0)));
}

// The update at which a linear or cosine schedule ends, from what is known
// now: the step and epoch budgets exactly, and a time budget from the
// speed so far (the measured probe before the first updates), keeping room
// for the last validations. 0: not known (decays as the inverse square root).
int64_t TrainSession::schedule_end() const {
  if (!trainer_ || opts_.lr_schedule == LrShape::InverseSqrt) return 0;
  int64_t end = 0;
  auto take = [&](int64_t x) { end = end == 0 ? x : std::min(end, x); };
  if (opts_.max_steps > 0) take(opts_.max_steps);
  if (opts_.max_epochs > 0)
    take(std::max<int64_t>(
        1, opts_.max_epochs * trainer_->batches_per_epoch() / (opts_.update_freq * comm_.size())));
  if (opts_.max_minutes > 0) {
    const int64_t done = trainer_->steps() - loop_start_step_;
    const double elapsed = seconds_since(loop_start_);
    const double per_update = done >= 5 ? elapsed / double(done) : plan_.seconds_per_update;
    if (per_update > 0) {
      const double left = opts_.max_minutes * 60 - seconds_since(start_);
      const double reserve = 2 * last_valid_seconds_ + 0.02 * opts_.max_minutes * 60;
      take(trainer_->steps() + updates_in_time(left, per_update, reserve));
    }
  }
  return end;
}

void TrainSession::revise_schedule(int64_t end) {
  if (end <= 0 || end == trainer_->schedule_steps()) return;
  trainer_->set_schedule_steps(end);
  if (logged_end_ == 0 || std::abs(double(end - logged_end_)) > 0.1 * double(logged_end_)) {
    log("schedule: the learning rate reaches 0 at update " + std::to_string(end) +
        (opts_.max_minutes > 0 && trainer_->steps() > loop_start_step_
             ? " (" +
                   format_number("%.2f", seconds_since(loop_start_) /
                                             double(trainer_->steps() - loop_start_step_)) +
                   " s per update so far)"
             : std::string()));
    logged_end_ = end;
  }
}

void TrainSession::open_log() {
  const bool resumed = opts_.resume && trainer_->steps() > 0;
  log_ =
      std::make_unique<TrainLog>(opts_.out, resumed, trainer_->steps(),
                                 plan_.cfg.name + ": " + fs::path(opts_.out).filename().string());
  if (log_->unreadable())
    log("warning: dropped " + std::to_string(log_->unreadable()) + " unreadable line(s) of " +
        opts_.out + ".log.jsonl");
  const int64_t bpe = trainer_->batches_per_epoch();
  log_->write({{"type", "start"},
               {"step", trainer_->steps()},
               {"resumed", resumed},
               {"options", options_to_json(opts_)},
               {"config", config_to_json(plan_.cfg)},
               {"parameters", model_->parameter_count()},
               {"batches_per_epoch", bpe},
               {"backends", backends_info()},
               // The arithmetic of the device it trains on (cpu/numerics.h).
               {"numerics", backend(opts_.device).numerics()}});
  json data = data_.summary(opts_, plan_.cfg, plan_.vocab.size());
  data["type"] = "data";
  data["step"] = trainer_->steps();
  log_->write(data);
  log("model: " + plan_.cfg.name + ", " + human_number(double(model_->parameter_count())) +
      " parameters; " + std::to_string(bpe) +
      " batches of <= " + std::to_string(opts_.batch_tokens) + " tokens per epoch, " +
      std::to_string(opts_.update_freq) + " per update per process; " +
      std::to_string(ops::num_threads()) + " threads; " + comm_.describe());
}

void TrainSession::agree() {
  int64_t flags[4] = {
      cb_.stop && cb_.stop->load() != 0,
      root() && opts_.max_minutes > 0 && seconds_since(start_) >= opts_.max_minutes * 60,
      root() && early_stopped_, root() ? schedule_end() : 0};
  comm_.max(flags, 4);
  signalled_ = flags[0], out_of_time_ = flags[1], early_stop_agreed_ = flags[2];
  revise_schedule(flags[3]);
}

// Every input here is the same in every process: step counts, epochs and
// the agreed flags.
bool TrainSession::stop_now() {
  agree();
  std::string& reason = result_.stop_reason;
  const int64_t steps = trainer_->steps();
  if (opts_.max_steps > 0 && steps >= opts_.max_steps)
    reason = "max-steps";
  else if (opts_.max_epochs > 0 && trainer_->epoch() >= opts_.max_epochs)
    reason = "max-epochs";
  else if (out_of_time_)
    reason = "max-minutes";
  else if (early_stop_agreed_)
    reason = "early-stop";
  else if (signalled_)
    reason = "interrupted";
  return !reason.empty();
}

void TrainSession::loop() {
  loop_start_ = Clock::now();
  loop_start_step_ = trainer_->steps();
  // A validation that a stop cut short left its step's checkpoint without
  // it: run it now, as the uninterrupted run did at this step.
  const int64_t step = trainer_->steps();
  if (root() && plan_.has_valid() && opts_.valid_every > 0 && step > 0 &&
      step % opts_.valid_every == 0 && last_valid_step_ < step)
    validate_unless_stopped();
  while (!stop_now()) {
    const StepStats s = trainer_->step();
    if (!std::isfinite(s.loss))
      throw Error("training diverged at step " + std::to_string(s.step) + " (loss " +
                  format_number("%g", s.loss) +
                  "); try a smaller {lr_scale}, a longer {warmup_steps} or {clip_norm}");
    after_update(s);
  }
}

void TrainSession::after_update(const StepStats& s) {
  result_.losses.push_back(s.loss);
  if (!root()) return;  // logs, validation and checkpoints are rank 0's
  log_->write({{"type", "train"},
               {"step", s.step},
               {"epoch", s.epoch_progress},
               {"loss", s.loss},
               {"nll_loss", s.nll},
               {"ppl", s.ppl},
               {"lr", s.lr},
               {"grad_norm", s.grad_norm},
               {"tgt_tokens", s.tgt_tokens},
               {"src_tokens", s.src_tokens},
               {"sentences", s.sentences},
               {"step_seconds", s.seconds},
               {"tgt_tokens_per_s", s.tgt_tokens / std::max(s.seconds, 1e-9)},
               {"elapsed_s", seconds_since(start_)}});
  log_->add_train(s.step, s.loss);
  report_progress(s);
  // Stopped: the loop stops at once, and finish() saves this step's
  // checkpoint (without this validation, which a resumed run makes).
  if (plan_.has_valid() && opts_.valid_every > 0 && s.step % opts_.valid_every == 0 &&
      !validate_unless_stopped())
    return;
  if ((opts_.checkpoint_every > 0 && s.step % opts_.checkpoint_every == 0) ||
      (opts_.checkpoint_minutes > 0 &&
       seconds_since(last_ckpt_time_) >= opts_.checkpoint_minutes * 60))
    save_checkpoint();
}

void TrainSession::report_progress(const StepStats& s) {
  tok_ema_ = tok_ema_ == 0 ? double(s.tgt_tokens) : 0.9 * tok_ema_ + 0.1 * double(s.tgt_tokens);
  sec_ema_ = sec_ema_ == 0 ? s.seconds : 0.9 * sec_ema_ + 0.1 * s.seconds;
  if (!cb_.progress) return;
  TrainProgress p;
  p.stats = s;
  p.tokens_per_second = tok_ema_ / std::max(sec_ema_, 1e-9);
  p.elapsed_seconds = seconds_since(start_);
  double eta = -1;
  auto take = [&](double e) { eta = eta < 0 ? e : std::min(eta, e); };
  if (opts_.max_steps > 0) take(double(opts_.max_steps - s.step) * sec_ema_);
  if (opts_.max_minutes > 0) take(std::max(0.0, opts_.max_minutes * 60 - p.elapsed_seconds));
  if (opts_.max_epochs > 0)
    take(std::max(0.0, (double(opts_.max_epochs) - s.epoch_progress) *
                           double(trainer_->batches_per_epoch()) / double(opts_.update_freq) *
                           sec_ema_));
  p.eta_seconds = eta;
  cb_.progress(p);
}

json TrainSession::extra_state() const {
  return json{{"options", options_to_json(opts_)},
              {"best", best_},
              {"best_step", best_step_},
              {"bad_validations", bad_valids_},
              {"last_valid_step", last_valid_step_},
              {"last_metric", last_metric_},
              {"train_seconds", train_seconds_before_ + seconds_since(start_)},
              {"schedule_steps", trainer_->schedule_steps()},
              {"recipe", plan_.recipe.to_json()},
              {"data", data_.digests}};
}

std::map<std::string, std::string> TrainSession::model_metadata() const {
  std::map<std::string, std::string> m = {
      {"step", std::to_string(trainer_->steps())},
      {"training_options", options_to_json(opts_).dump()},
      {"training_data", data_.summary(opts_, plan_.cfg, plan_.vocab.size()).dump()}};
  if (!plan_.recipe.empty()) m["recipe"] = plan_.recipe.to_json().dump();
  return m;
}

void TrainSession::save_checkpoint() {
  const int64_t step = trainer_->steps();
  const std::string path = checkpoint_path(opts_.out, step);
  fs::create_directories(checkpoint_dir(opts_.out));
  try {
    trainer_->save(path, plan_.spm, extra_state());
  } catch (const Error& e) {
    const auto all = list_checkpoints(opts_.out);
    throw Error("the checkpoint of step " + std::to_string(step) + " was not saved (" + e.what() +
                "); " +
                (all.empty() ? std::string("there is no earlier checkpoint")
                             : "the previous checkpoint " + all.back() +
                                   " is intact: free some space and continue with {resume}"));
  }
  last_ckpt_step_ = step;
  last_ckpt_time_ = Clock::now();
  const int64_t keep =
      opts_.keep_checkpoints == 0 ? 0 : std::max(opts_.keep_checkpoints, opts_.average_last);
  prune_checkpoints(opts_.out, keep);
  log_->write({{"type", "checkpoint"}, {"step", step}, {"path", path}});
  log_->sync();
}

TrainSession::Metric TrainSession::validate(bool averaged) {
  const auto t0 = Clock::now();
  const ValidStats v =
      trainer_->validate(data_.valid, &plan_.vocab, &data_.vtgt, opts_.valid_sentences);
  last_valid_seconds_ = seconds_since(t0);
  const int64_t step = trainer_->steps();
  Metric m;
  m.higher_better = opts_.best_metric == BestMetric::Bleu && v.has_bleu;
  m.value = m.higher_better ? v.bleu : v.loss;
  m.name = m.higher_better ? "BLEU" : "loss";
  json j = {{"type", "valid"},
            {"step", step},
            {"loss", v.loss},
            {"nll_loss", v.nll},
            {"ppl", v.ppl},
            {"tokens", v.tokens},
            {"sentences", v.sentences},
            {"seconds", seconds_since(t0)}};
  if (v.has_bleu) {
    j["bleu"] = v.bleu;
    j["bleu_text"] = v.bleu_text;
    j["bleu_sentences"] = v.bleu_sentences;
  }
  std::string line = std::string(averaged ? "averaged model: " : "") + "validation at step " +
                     std::to_string(step) + ": loss " + format_number("%.3f", v.loss) + ", ppl " +
                     format_number("%.2f", v.ppl);
  if (v.has_bleu)
    line += ", BLEU " + format_number("%.2f", v.bleu) + " (greedy, " +
            std::to_string(v.bleu_sentences) + " sentences)";
  if (averaged) {
    j["averaged"] = true;
    log_->write(j);
    log(line);
    return m;
  }
  last_valid_step_ = step;
  last_metric_ = m.value;
  if (best_step_ < 0 || m.better_than(best_)) {
    best_ = m.value;
    best_step_ = step;
    bad_valids_ = 0;
    save_model(opts_.out + ".best", *model_, plan_.spm, model_metadata());
    line += " (best so far; saved " + opts_.out + ".best)";
  } else {
    ++bad_valids_;
    line +=
        " (best " + format_number("%.3f", best_) + " at step " + std::to_string(best_step_) + ")";
    if (opts_.early_stop > 0 && bad_valids_ >= opts_.early_stop) early_stopped_ = true;
  }
  j["best"] = best_;
  j["best_step"] = best_step_;
  log_->write(j);
  log(line);
  const double bleu = v.bleu;
  log_->add_valid(step, v.loss, v.has_bleu ? &bleu : nullptr);
  log_->write_curve();
  return m;
}

bool TrainSession::validate_unless_stopped() {
  try {
    validate(false);
    return true;
  } catch (const Stopped&) {
    log("validation at step " + std::to_string(trainer_->steps()) + " stopped");
    return false;
  }
}

}  // namespace nmt
