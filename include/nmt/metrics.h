// Corpus scores exactly as sacreBLEU 2.6.0 computes and prints them (the
// numbers and signature of `nmt score`): BLEU, chrF (chrF++ with
// word_order 2) and TER.
#pragma once

#include <string>
#include <vector>

#include "nmt/error.h"

namespace nmt::api {

enum class Metric { bleu, chrf, ter };

// sacreBLEU's options, by its names (-tok is tokenize).
struct NMT_API MetricOptions {
  std::string tokenize = "13a";  // BLEU: none, zh, 13a, intl, char, ja-mecab, flores200, ...
  std::string spm_model;         // BLEU's flores101/flores200/spBLEU-1K SentencePiece model
  bool lowercase = false;        // BLEU, chrF
  std::string smooth = "exp";    // BLEU: exp, floor, add-k, none
  int char_order = 6, word_order = 0, beta = 2;  // chrF
  bool chrf_whitespace = false;                  // chrF: spaces inside character n-grams
  bool ter_normalized = false, ter_no_punct = false, ter_asian_support = false,
       ter_case_sensitive = false;
  int width = 2;  // decimals of the score in line
};

struct MetricScore {
  double score = 0;       // 0..100 (TER may exceed 100)
  std::string signature;  // "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
  std::string line;       // sacreBLEU's line: "BLEU|nrefs:1|...|version:2.6.0 = 29.59 ..."
};

// hyps[i] against refs[r][i] (r: one reference stream each). An empty
// reference line is left out of that segment; a stream's line count that
// differs from the hypotheses' is an Error.
NMT_API MetricScore corpus_score(Metric metric, const std::vector<std::string>& hyps,
                                 const std::vector<std::vector<std::string>>& refs,
                                 const MetricOptions& options = {});

}  // namespace nmt::api
