#include "train/checkpoints.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace nmt {

namespace fs = std::filesystem;

std::string checkpoint_dir(const std::string& out) { return out + ".ckpt"; }

std::string checkpoint_path(const std::string& out, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%09lld.nmt", static_cast<long long>(step));
  return (fs::path(checkpoint_dir(out)) / name).string();
}

std::vector<std::string> list_checkpoints(const std::string& out) {
  std::vector<std::string> files;
  const fs::path dir = checkpoint_dir(out);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    // step-NNNNNNNNN.nmt; temp files of an interrupted write do not match.
    if (name.size() == 18 && name.rfind("step-", 0) == 0 && name.substr(14) == ".nmt")
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());  // zero-padded: name order is step order
  return files;
}

int64_t checkpoint_step(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  if (name.size() != 18 || name.rfind("step-", 0) != 0 || name.substr(14) != ".nmt") return -1;
  int64_t step = 0;
  for (size_t i = 5; i < 14; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::string lock_path(const std::string& out) { return out + ".lock"; }

std::string partial_path(const std::string& out) { return out + ".partial"; }

void prune_checkpoints(const std::string& out, int64_t keep) {
  if (keep <= 0) return;
  const auto all = list_checkpoints(out);
  std::error_code ec;
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) fs::remove(all[i], ec);
}

}  // namespace nmt
