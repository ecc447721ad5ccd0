#include "train/checkpoints.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "io/json.h"
#include "model/model_file.h"
#include "model/transformer.h"
#include "ops/ops.h"

namespace nmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

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

std::string checkpoint_problem(const FileContents& f, int64_t expected_step) {
  auto it = f.metadata.find("checksum");
  if (it != f.metadata.end()) {
    const std::string now = content_checksum(f);
    if (now != it->second)
      return "its checksum does not match its content: stored " + it->second + ", computed " + now;
  }
  TrainState s;
  try {
    s = read_train_state(f);
  } catch (const InputError& e) {
    std::string why = e.what();
    if (why.rfind(f.source + ": ", 0) == 0) why = why.substr(f.source.size() + 2);
    return why;
  }
  if (expected_step >= 0 && s.step != expected_step)
    return "its training state says step " + std::to_string(s.step) + ", its name step " +
           std::to_string(expected_step);
  for (const char* name : {kAdamMTensor, kAdamVTensor}) {
    auto t = f.tensors.find(name);
    if (t == f.tensors.end()) return std::string("it has no tensor ") + name;
    if (t->second.dtype != "F32" || t->second.shape.size() != 1)
      return std::string("tensor ") + name + " is not a vector of F32";
  }
  // Every F32 value finite, and Adam's second moments (running means of
  // squares) never negative.
  std::vector<float> chunk;  // a tensor is read a piece at a time: Adam's are model-sized
  for (const auto& [name, e] : f.tensors) {
    if (e.dtype != "F32") continue;
    const int64_t n = static_cast<int64_t>((e.end - e.begin) / 4);
    const bool second_moment = name == kAdamVTensor;
    for (int64_t at = 0; at < n; at += int64_t{1} << 20) {
      const int64_t m = std::min<int64_t>(n - at, int64_t{1} << 20);
      chunk.resize(static_cast<size_t>(m));
      f.data.copy(e.begin + 4 * static_cast<uint64_t>(at), 4 * static_cast<uint64_t>(m),
                  chunk.data());
      int64_t bad = -1;
#pragma omp parallel for reduction(max : bad) if (m > (1 << 16))
      for (int64_t i = 0; i < m; ++i)
        if (!std::isfinite(chunk[i]) || (second_moment && chunk[i] < 0)) bad = std::max(bad, i);
      if (bad >= 0) {
        const float x = chunk[bad];
        return "tensor " + name + " holds " + (std::isfinite(x) ? "a negative" : "a non-finite") +
               " value at element " + std::to_string(at + bad) +
               (second_moment && std::isfinite(x) ? " (Adam's second moments are squares)" : "");
      }
    }
  }
  return "";
}

TrainState read_train_state(const FileContents& f) {
  auto it = f.metadata.find("training_state");
  if (it == f.metadata.end())
    throw InputError(f.source + ": not a training checkpoint (no training_state in its metadata)");
  const json j = io::parse_json(it->second, f.source + " (training_state)");
  auto field = [&](const char* key) -> int64_t {
    if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer() ||
        (j[key].is_number_integer() && j[key].get<int64_t>() < 0))
      throw InputError(f.source + ": damaged training_state: \"" + key +
                       "\" is missing or not a non-negative integer");
    return j[key].get<int64_t>();
  };
  TrainState s;
  s.step = field("step");
  s.epoch = field("epoch");
  s.batch_index = field("batch_index");
  s.seed = static_cast<uint64_t>(field("seed"));
  s.adam_t = field("adam_t");
  s.batch_tokens = field("batch_tokens");
  s.update_freq = field("update_freq");
  s.train_pairs = field("train_pairs");
  s.ranks = j.contains("ranks") ? field("ranks") : 1;
  if (j.contains("extra")) {
    if (!j["extra"].is_object())
      throw InputError(f.source + ": damaged training_state: \"extra\" is not an object");
    s.extra = j["extra"];
  }
  return s;
}

void average_checkpoints(const std::vector<std::string>& paths, Transformer& model,
                         const StopFlag* stop) {
  if (paths.empty()) throw Error("average_checkpoints: no files");
  Tensor& values = model.params().values();
  const int64_t n = values.numel();
  std::vector<double> acc(n, 0.0);
  std::vector<float> staging;  // the values, on the host
  for (const std::string& p : paths) {
    throw_if_stopped(stop);
    const FileContents f = read_safetensors(p);
    load_weights(f, model);
    const float* v = ops::host_data(values, staging);
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) acc[i] += v[i];
  }
  const double inv = 1.0 / static_cast<double>(paths.size());
  const bool on_host = values.device() == Device::CPU;
  if (!on_host) staging.resize(static_cast<size_t>(n));
  float* v = on_host ? values.data() : staging.data();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(acc[i] * inv);
  if (!on_host) ops::upload(v, values);
}

}  // namespace nmt
