// The public Scorer over the library's ScoringService.
#include "nmt/scorer.h"

#include <mutex>

#include "api/guard.h"
#include "core/device.h"
#include "io/text_file.h"
#include "service/scoring_service.h"

namespace nmt::api {

ScoreOptions::ScoreOptions() {
  const nmt::ScoreOptions s;
  device = device_name(s.device);
  batch_tokens = s.batch_tokens;
  alpha = s.alpha;
  jsonl = s.format == ScoreFormat::jsonl;
  word_scores = s.word_scores;
}

struct Scorer::Impl {
  std::unique_ptr<ScoringService> service;
  // ScoringService::score is not promised safe from several threads at
  // once: callers (Python threads among them) take turns.
  std::mutex calls;
};

Scorer::Scorer(const std::vector<std::string>& models, const ScoreOptions& o,
               std::function<void(const std::string&)> warn)
    : impl_(std::make_unique<Impl>()) {
  if (!warn) warn = [](const std::string&) {};
  guarded([&] {
    for (const auto& m : models) io::check_input_path(m, "model");
    nmt::ScoreOptions s;
    s.models = models;
    s.compute = o.compute_type;
    s.device = open_device(o.device);
    s.batch_tokens = o.batch_tokens;
    s.alpha = o.alpha;
    s.format = o.jsonl ? ScoreFormat::jsonl : ScoreFormat::text;
    s.header = false;
    s.word_scores = o.word_scores;
    impl_->service = std::make_unique<ScoringService>(std::move(s), warn);
  });
}

Scorer::~Scorer() = default;
Scorer::Scorer(Scorer&&) noexcept = default;
Scorer& Scorer::operator=(Scorer&&) noexcept = default;

std::vector<std::string> Scorer::score(const std::vector<std::string>& source,
                                       const std::vector<std::string>& target) {
  return guarded([&] {
    Impl& impl = held(impl_, "Scorer");
    std::lock_guard lock(impl.calls);
    const ScoringService& service = *impl.service;
    std::vector<std::string> out;
    service.write(service.score(source, target, {}), [&out](const std::string& line) {
      out.push_back(line.substr(0, line.size() - 1));
    });
    return out;
  });
}

}  // namespace nmt::api
