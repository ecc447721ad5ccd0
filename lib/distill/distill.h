// `nmt distill`: sequence-level knowledge distillation (Kim and Rush, 2016)
// in one resumable run. A teacher (one model or an ensemble) translates the
// training source; its weakest translations are dropped; a student of a
// fast shape (the recipe with --optimize student: a one-layer decoder) trains
// on the rest, with the original targets mixed in where two short pilots
// say that validates better; the student, averaged and with its shortlist
// as training leaves it, is written in int8 with a record of how it was
// made, which `nmt info` prints. Every step logs what it chose, why, and
// how long it took.
//
// The work lives in OUT.distill/ (state.json, the teacher's translations,
// the distilled pairs, the pilots and the student's own training outputs),
// so a stopped run goes on where it stopped.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/stop.h"
#include "train/train_run.h"

namespace nmt {

// Whether the student also learns from the corpus's own targets.
enum class OriginalTargets {
  Auto,  // two pilots, one each way, and the better on validation chrF
  Mix,   // the original pairs beside the distilled ones
  None,  // the teacher's targets alone
};
const char* original_targets_name(OriginalTargets o);  // "auto", "mix", "none"

struct DistillOptions {
  std::vector<std::string> teachers;  // one, or an ensemble sharing a vocabulary
  std::string train_src, train_tgt;   // line-aligned
  std::string valid_src, valid_tgt;   // optional, both or neither
  std::string out;                    // the student; OUT.distill/ beside it
  // The student's config (a models/ name or a file); empty: the recipe's,
  // given one decoder layer.
  std::string config;
  double max_minutes = 0;  // the whole run's, teacher and pilots included, over resumptions
  bool resume = false;
  OriginalTargets original = OriginalTargets::Auto;
  double pilot_minutes = 0;  // each pilot's budget; 0: chosen from the budget
  int beam = 4;              // the teacher's
  double drop_share = 0.05;  // of the pairs, those the teacher scored lowest
  bool quantize = true;      // write the student in int8
  uint64_t seed = 1;
  Device device = Device::CPU;
};

struct DistillCallbacks {
  std::function<void(const std::string&)> log;  // a line each; options named {key}
  // After each update of a pilot's or the student's training (name: which).
  std::function<void(const std::string& name, const TrainProgress&)> progress;
  // Non-zero: stop at the next chunk of the teacher's translation or the
  // next update of a training, keeping what is done for --resume.
  const StopFlag* stop = nullptr;
};

struct DistillResult {
  bool interrupted = false;
  std::string model_path;  // OUT, once written
};

// Throws InputError (OptionError for options that mean nothing together)
// naming the option by key.
DistillResult distill(const DistillOptions& opts, const DistillCallbacks& cb);

}  // namespace nmt
