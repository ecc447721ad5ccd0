// The data of a training run: every corpus read and checked, the pairs no
// model can learn from cleared, exact duplicates dropped, then encoded with
// the vocabulary and filtered by length ratio; with each file's digest (a
// resumed run compares them with its checkpoint's) and what the model
// files record of it.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"
#include "train/data.h"
#include "train/options.h"

namespace nmt {

class Vocab;

struct TrainingData {
  using Log = std::function<void(const std::string&)>;

  // The text as read: the training side is released by encode(); the
  // validation side stays (validation BLEU and the shortlist's cost use it).
  std::vector<std::string> src, tgt, vsrc, vtgt;
  nlohmann::json digests = nlohmann::json::array();  // role, file, lines, digest per file
  int64_t train_lines = 0;                           // lines of all training corpora
  int64_t usable_pairs = 0;                          // without an empty side or a duplicate
  int64_t duplicates = 0;
  int64_t widest = 0;  // subwords of the widest training pair, with </s>
  RatioFilter ratio;
  ParallelCorpus train, valid;

  // Reads every corpus of opts, lines cut at what a model of max_len
  // subwords could take (they are then skipped as too long).
  void read(const TrainOptions& opts, int64_t max_len, const Log& log);
  // Clears the pairs with an empty side, and the exact duplicates with
  // opts.filter; throws InputError when no pair is left.
  void select(const TrainOptions& opts, int64_t max_len);
  // Encodes both sets, filters by length ratio with opts.filter, checks a
  // given batch against the widest pair, and logs what is kept.
  void encode(const Vocab& vocab, const TrainOptions& opts, int64_t max_len, const Log& log);

  // "line 12 of a.en" for a line of the concatenated training corpora.
  std::string where(int64_t line, const TrainOptions& opts) const;
  // Recorded in every model file a run writes, so that `nmt info` can say
  // how the model was made; nothing in it depends on time or resumption.
  nlohmann::json summary(const TrainOptions& opts, const ModelConfig& cfg, int vocab_size) const;

 private:
  void record_digest(const char* role, const std::string& file,
                     const std::vector<std::string>& lines);
  std::vector<int64_t> file_starts_;  // first line of each training corpus
  std::vector<int64_t> line_of_;      // the input line of each pair still held as text
};

// The training source files, comma-separated, for messages.
std::string train_files(const TrainOptions& opts);

}  // namespace nmt
