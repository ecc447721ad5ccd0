// Where `nmt train` keeps its checkpoints (OUT.ckpt/step-NNNNNNNNN.nmt), how
// old ones are pruned, and what a checkpoint holds besides the weights: the
// training state and Adam's moments. Checkpoints are written atomically, so
// a listed checkpoint is always complete (and checked before it is resumed).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/stop.h"

namespace nmt {

struct FileContents;
class Transformer;

// Adam's moments, beside the weights in a checkpoint.
inline constexpr const char* kAdamMTensor = "optimizer/adam_m";
inline constexpr const char* kAdamVTensor = "optimizer/adam_v";

// Position and counters saved with a checkpoint.
struct TrainState {
  int64_t step = 0, epoch = 0, batch_index = 0;
  uint64_t seed = 0;
  int64_t adam_t = 0, batch_tokens = 0, update_freq = 0, train_pairs = 0;
  int64_t ranks = 1;                                // processes that trained it
  nlohmann::json extra = nlohmann::json::object();  // the loop's own state
};

std::string checkpoint_dir(const std::string& out);
std::string checkpoint_path(const std::string& out, int64_t step);
std::vector<std::string> list_checkpoints(const std::string& out);  // oldest first
// The step in a checkpoint's name (step-000000050.nmt: 50), -1 if none.
int64_t checkpoint_step(const std::string& path);
// OUT.lock, the lock a run holds on OUT for its whole length.
std::string lock_path(const std::string& out);
// OUT.partial: the final model until it is whole, then renamed onto OUT.
std::string partial_path(const std::string& out);
// Removes all but the newest `keep` checkpoints (keep 0: none removed).
void prune_checkpoints(const std::string& out, int64_t keep);

// The training state a checkpoint holds; throws InputError naming the file
// when it is missing or damaged.
TrainState read_train_state(const FileContents& file);

// Why a checkpoint cannot be resumed from, or "" if it can: a checksum that
// does not match (older checkpoints have none and are checked structurally
// only), a training state that is missing, damaged or for another step than
// expected_step (the file name's; -1: not checked), Adam moments that are
// missing, non-finite or (the second) negative, or a non-finite weight.
std::string checkpoint_problem(const FileContents& file, int64_t expected_step);

// Averages the weights of the given model files (checkpoints) into model;
// throws Stopped between files once *stop is non-zero.
void average_checkpoints(const std::vector<std::string>& paths, Transformer& model,
                         const StopFlag* stop = nullptr);

}  // namespace nmt
