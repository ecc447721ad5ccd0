// A training session: the model built from the plan (train/plan.h), trained
// by the Trainer's updates, with validation, checkpoints, the log and the
// learning curve, to the plan's end; then the final model: the better of
// the last weights and the checkpoint average (if asked), with its
// shortlist, written as OUT.partial and renamed onto OUT once whole. A stop
// signal is honoured up to that rename: the run ends as interrupted, its
// checkpoints kept, OUT not written.
//
// In a distributed run every process trains (Trainer::step sums their
// gradients); only rank 0 logs, validates and writes files, and the
// decisions that depend on a clock, a signal or a validation are agreed on
// after every update (agree()), so that all processes stop at the same step.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/comm.h"
#include "model/model_file.h"
#include "model/transformer.h"
#include "train/plan.h"
#include "train/train_log.h"
#include "train/train_run.h"
#include "train/trainer.h"
#include "train/training_data.h"

namespace nmt {

class TrainSession {
 public:
  using Clock = std::chrono::steady_clock;

  // start: when the run began (a time budget counts from then).
  TrainSession(const TrainPlan& plan, const TrainingData& data, const TrainCallbacks& cb,
               Clock::time_point start);
  // Builds the model (the checkpoint's weights, optimiser and loop state
  // when one is given) and trains it to the plan's end.
  TrainResult run(std::unique_ptr<FileContents> checkpoint);

 private:
  // The metric that picks the best model, and which way is better.
  struct Metric {
    double value = 0;
    bool higher_better = false;
    const char* name = "loss";
    bool better_than(double other) const { return higher_better ? value > other : value < other; }
  };

  bool root() const { return comm_.rank() == 0; }
  void log(const std::string& s) const;
  static double seconds_since(Clock::time_point t);

  void build(std::unique_ptr<FileContents> checkpoint);
  void take_loop_state(const nlohmann::json& extra);
  void open_log();
  void agree();
  bool stop_now();
  void loop();
  void after_update(const StepStats& s);
  void report_progress(const StepStats& s);
  int64_t schedule_end() const;
  void revise_schedule(int64_t end);
  nlohmann::json extra_state() const;
  std::map<std::string, std::string> model_metadata() const;
  void save_checkpoint();
  Metric validate(bool averaged);
  bool validate_unless_stopped();  // false: a stop signal cut it short
  // final_model.cpp: the end of the session.
  void choose_final_weights();
  void add_shortlist(const std::string& model_path, VocabTensors& tensors,
                     std::map<std::string, std::string>& meta);
  bool int8_validates(const std::string& model_path);
  void write_final_model();
  void finish();

  const TrainPlan& plan_;
  const TrainOptions& opts_;
  const TrainingData& data_;
  const TrainCallbacks& cb_;
  Comm& comm_ = world();
  const Clock::time_point start_;

  std::unique_ptr<Transformer> model_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<TrainLog> log_;

  // Agreed by every process after each update: a stop signal anywhere, and
  // rank 0's time budget and early stopping.
  bool signalled_ = false, out_of_time_ = false, early_stop_agreed_ = false;
  Clock::time_point loop_start_ = Clock::now();
  int64_t loop_start_step_ = 0;
  int64_t logged_end_ = 0;  // the schedule's end as last logged
  double last_valid_seconds_ = 0;

  // Carried across resumes in the checkpoints' extra state.
  double best_ = 0, last_metric_ = 0;
  int64_t best_step_ = -1, bad_valids_ = 0, last_valid_step_ = -1;
  double train_seconds_before_ = 0;
  bool early_stopped_ = false;

  int64_t last_ckpt_step_ = 0;
  Clock::time_point last_ckpt_time_;  // the run's start, then each checkpoint's
  double tok_ema_ = 0, sec_ema_ = 0;
  TrainResult result_;
};

}  // namespace nmt
