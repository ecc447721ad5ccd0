#include "train/train_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "io/output_file.h"
#include "io/json.h"

namespace nmt {

using json = nlohmann::json;

namespace {

bool is_num(const json& j, const char* key) { return j.contains(key) && j[key].is_number(); }

// The curve reads step and loss of "train" and "valid" entries, and bleu
// when a "valid" entry has it: an entry without them cannot be used.
bool usable(const json& j) {
  if (!j.is_object()) return false;
  if (!j.contains("type") || !j["type"].is_string()) return false;
  const std::string type = j["type"].get<std::string>();
  if (type != "train" && type != "valid") return true;
  if (!is_num(j, "step") || !is_num(j, "loss")) return false;
  if (j.contains("averaged") && !j["averaged"].is_boolean()) return false;
  return !j.contains("bleu") || j["bleu"].is_number();
}

// Downsamples a per-step series to at most n points (bucket means), so the
// SVG of a long run stays small.
std::vector<std::pair<double, double>> downsample(const std::vector<std::pair<double, double>>& p,
                                                  size_t n) {
  if (p.size() <= n) return p;
  std::vector<std::pair<double, double>> out;
  const size_t per = (p.size() + n - 1) / n;
  for (size_t i = 0; i < p.size(); i += per) {
    double sx = 0, sy = 0;
    const size_t end = std::min(p.size(), i + per);
    for (size_t k = i; k < end; ++k) sx += p[k].first, sy += p[k].second;
    out.push_back({sx / double(end - i), sy / double(end - i)});
  }
  return out;
}

}  // namespace

TrainLog::TrainLog(const std::string& out, bool resume, int64_t step, const std::string& title)
    : path_(out + ".log.jsonl"), curve_path_(out + ".curve.svg") {
  curve_.title = title;
  if (resume) keep_entries_until(step);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (resume ? 0 : O_TRUNC),
               0644);
  if (fd_ < 0)
    throw InputError("cannot write the training log " + path_ + ": " + std::strerror(errno));
}

TrainLog::~TrainLog() {
  if (fd_ >= 0) ::close(fd_);
}

void TrainLog::keep_entries_until(int64_t step) {
  std::ifstream in(path_);
  std::string line, text;
  while (std::getline(in, line)) {
    json j;
    try {
      j = io::parse_json(line, path_);
    } catch (const InputError&) {
      ++unreadable_;
      continue;
    }
    if (!usable(j)) {
      ++unreadable_;
      continue;
    }
    if (is_num(j, "step") && j["step"].get<double>() > double(step)) continue;
    text += line + "\n";
    const std::string type = j["type"].get<std::string>();
    if (type == "train") add_train(j["step"].get<int64_t>(), j["loss"].get<double>());
    if (type == "valid" && !j.value("averaged", false)) {
      const double bleu = j.contains("bleu") ? j["bleu"].get<double>() : 0.0;
      add_valid(j["step"].get<int64_t>(), j["loss"].get<double>(),
                j.contains("bleu") ? &bleu : nullptr);
    }
  }
  io::write_file(path_, text);
}

void TrainLog::write(const json& entry) {
  const std::string line = entry.dump() + "\n";
  const char* p = line.data();
  size_t n = line.size();
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw Error("cannot write the training log " + path_ + ": " + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void TrainLog::sync() {
  if (fd_ >= 0) ::fsync(fd_);
}

void TrainLog::add_valid(int64_t step, double loss, const double* bleu) {
  curve_.valid_loss.push_back({double(step), loss});
  if (bleu) curve_.valid_bleu.push_back({double(step), *bleu});
}

void TrainLog::write_curve() const {
  CurveData d = curve_;
  d.train_loss = downsample(curve_.train_loss, 1000);
  plot::write(learning_curve(d), curve_path_);
}

}  // namespace nmt
