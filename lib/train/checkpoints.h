// Where `nmt train` keeps its checkpoints (OUT.ckpt/step-NNNNNNNNN.nmt) and
// how old ones are pruned. Checkpoints are written atomically, so a listed
// checkpoint is always complete.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

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

}  // namespace nmt
