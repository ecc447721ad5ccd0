// Distillation, as `nmt distill` does it: a teacher (or an ensemble)
// translates the training source, its weakest translations are dropped, a
// student with a one-layer decoder trains on the rest with the recipe, and
// is written in int8 with a record of how it was made. Resumable: the work
// lives in OUT.distill/.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nmt/error.h"

namespace nmt::api {

struct NMT_API DistillSpec {
  std::vector<std::string> teachers;  // one, or an ensemble sharing a vocabulary
  std::string train_src, train_tgt;   // line-aligned files
  std::string valid_src, valid_tgt;   // optional, both or neither
  std::string out;                    // the student
  std::string config;      // the student's (a models/ name or a file); empty: the recipe's
  double max_minutes = 0;  // the whole run's, over every resumption
  bool resume = false;
  std::string original = "auto";  // the original targets: "auto", "mix" or "none"
  double pilot_minutes = 0;       // each of auto's pilots; 0: chosen
  int beam = 4;                   // the teacher's
  double drop_share = 0.05;       // of the pairs, those the teacher scored lowest
  bool quantize = true;           // the student in int8
  uint64_t seed = 1;
  std::string device = "cpu";
};

struct DistillResult {
  bool interrupted = false;
  std::string model_path;  // out, once written
};

// log: one line each, what `nmt distill` prints; stop: when it turns
// non-zero, the run keeps what is done and returns interrupted (resume:
// true goes on from there).
NMT_API DistillResult distill(const DistillSpec& spec,
                              const std::function<void(const std::string&)>& log = {},
                              const std::atomic<int>* stop = nullptr);

}  // namespace nmt::api
