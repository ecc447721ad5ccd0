// Text in, text out: the translation pipeline around search(). Lines are
// cleaned (invalid UTF-8 replaced), encoded with SentencePiece, sorted by
// length within the window and packed into batches by tokens, translated,
// and returned in input order, one result per input line. Empty lines give
// empty translations without touching the model.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "decode/search.h"
#include "model/loaded_model.h"

namespace nmt {

struct TranslationResult {
  std::string text;
  // The best hypothesis's search score: logprob divided by the GNMT length
  // penalty ((5 + tokens) / 6)^alpha, or by tokens with length_norm.
  double score = 0;
  double logprob = 0;                                  // natural log, </s> included
  int64_t tokens = 0;                                  // subword tokens, </s> included
  std::vector<std::pair<std::string, double>> n_best;  // text, score (best first)
};

class Translator {
 public:
  // warn receives one-line warnings (with the 1-based line number).
  Translator(const LoadedModel& model, SearchOptions opts, int64_t batch_tokens,
             std::function<void(const std::string&)> warn = {});
  // first_line: the 1-based number of lines[0] in the whole input.
  std::vector<TranslationResult> translate(const std::vector<std::string>& lines,
                                           int64_t first_line = 1);

 private:
  const LoadedModel& model_;
  SearchOptions opts_;
  int64_t batch_tokens_;
  std::function<void(const std::string&)> warn_;
  DecodeState state_;
};

}  // namespace nmt
