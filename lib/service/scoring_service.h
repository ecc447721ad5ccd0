// Forced scoring: the log-probability that a model (or an ensemble) gives
// each target sentence after its source, as `nmt score -m` writes it: a TSV
// row or a JSON line per pair, or the corpus's totals. Any program that
// links the library can do the same.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "decode/scorer.h"
#include "decode/search.h"
#include "io/text_file.h"
#include "model/languages.h"
#include "model/loaded_model.h"

namespace nmt {

enum class ScoreFormat { text, jsonl };

struct ScoreOptions {
  std::vector<std::string> models;  // one, or an ensemble sharing a vocabulary
  std::string compute;              // empty: each model file's own
  Device device = Device::CPU;
  int64_t batch_tokens = 4096;  // target tokens per batch
  double alpha = 0.6;           // of the GNMT length penalty in the "score" column
  ScoreFormat format = ScoreFormat::text;
  bool header = true;        // text: the column names first
  bool word_scores = false;  // each piece's log-probability too
  bool summary = false;      // the corpus's totals only
  // A multilingual model's languages, by its codes (model/languages.h).
  std::string source_lang, target_lang;
};

class ScoringService {
 public:
  // Checks the options (UsageErrors about their keys) and loads the
  // models; warn: one-line warnings (a pair cut to what the model
  // takes). An ensemble whose members do not share a vocabulary is refused.
  ScoringService(ScoreOptions opts, std::function<void(const std::string&)> warn);

  // How an input should be read: lines cut where the model could not take
  // more (twice that for source<TAB>target lines).
  io::TextChecks text_checks(bool tab_pairs) const;
  // source<TAB>target lines into sources and targets (InputError naming
  // the line that has no TAB).
  static void split_pairs(const std::vector<std::string>& lines, std::vector<std::string>& src,
                          std::vector<std::string>& tgt);

  // Scores the pairs; progress: pairs scored of all, after each batch.
  // Refuses (an error about batch_tokens) a batch that could need more
  // memory than the machine has.
  struct Scored {
    std::vector<std::vector<int32_t>> targets;  // as scored (cut to the model's length)
    std::vector<ForcedScore> scores;
  };
  Scored score(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
               const std::function<void(int64_t done, int64_t total)>& progress) const;
  // The result, a line at a time (each ending in "\n"): the header, then a
  // line per pair, or the corpus's totals.
  void write(const Scored& scored, const std::function<void(const std::string& line)>& write) const;

 private:
  void check_memory(const std::vector<std::vector<int32_t>>& s,
                    const std::vector<std::vector<int32_t>>& t) const;
  std::string line_of(size_t i, const ForcedScore& score, const std::vector<int32_t>& target,
                      const SearchOptions& penalty) const;

  ScoreOptions opts_;
  std::function<void(const std::string&)> warn_;
  std::vector<LoadedModel> models_;
  LanguageFraming lang_;
  int64_t max_len_ = 0;
};

}  // namespace nmt
