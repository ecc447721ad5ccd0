// Forced scoring, as `nmt score -m` does it: the log-probability a model
// (or an ensemble) gives each target sentence after its source.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nmt/error.h"

namespace nmt::api {

// The options of `nmt score -m`, by the same names; its defaults.
struct NMT_API ScoreOptions {
  ScoreOptions();
  std::string compute_type;  // empty: the model's
  std::string device;        // "cpu", "cuda"
  int64_t batch_tokens;      // target tokens per batch
  double alpha;              // GNMT length penalty of the "score" column
  bool jsonl;                // JSON lines instead of TSV rows
  bool word_scores;          // each piece's log-probability too
};

class NMT_API Scorer {
 public:
  explicit Scorer(const std::vector<std::string>& models, const ScoreOptions& options = {},
                  std::function<void(const std::string&)> warn = {});
  ~Scorer();
  Scorer(Scorer&&) noexcept;
  Scorer& operator=(Scorer&&) noexcept;

  // Each pair's line as `nmt score -m --no-header` writes it, without its
  // line break: "logprob<TAB>tokens<TAB>logprob_per_token<TAB>score", or
  // a JSON object. source and target hold as many lines. Calls from several
  // threads take turns.
  std::vector<std::string> score(const std::vector<std::string>& source,
                                 const std::vector<std::string>& target);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nmt::api
