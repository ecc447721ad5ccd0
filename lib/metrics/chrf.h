// chrF (Popović 2015) and chrF++ (Popović 2017) exactly as sacreBLEU 2.6.0
// computes and prints them: character n-grams up to 6 with whitespace
// removed, word n-grams up to `word_order` (2 for chrF++) after splitting
// one ASCII punctuation mark off each word, beta 2, and sacreBLEU's default
// effective-order averaging (eff:yes) rather than chrF++.py's epsilon
// smoothing. With several references a segment uses the one with the best
// segment F-score.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics/stats_metric.h"

namespace nmt::metrics {

struct ChrfOptions {
  int char_order = 6;
  int word_order = 0;  // 2 = chrF++
  int beta = 2;
  bool lowercase = false;
  bool whitespace = false;     // keep spaces inside character n-grams
  bool eps_smoothing = false;  // chrF++.py / Moses / NLTK style (eff:no)
};

struct ChrfScore {
  double score = 0.0;  // 0..100
  int nrefs = 1;       // -1: varies across segments ("var")
  ChrfOptions options;

  // "chrF2", "chrF2++": one '+' per word order, as sacreBLEU names it.
  std::string name() const;
  // "chrF2 = 52.82"
  std::string text(int width = 2) const;
  // The sacrebleu CLI's line: "chrF2|nrefs:1|...|version:2.6.0 = 52.82"
  std::string line(int width = 2) const;
  // "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"
  std::string signature() const;
  // sacrebleu --format json, keys in sacreBLEU's order.
  nlohmann::ordered_json to_json(int width = 2) const;
};

// Corpus chrF over hyps[i] against refs[r][i]: statistics are summed over
// segments, then one F-score is taken. Throws nmt::InputError on line count
// mismatches or a segment without a non-empty reference.
ChrfScore corpus_chrf(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs,
                      const ChrfOptions& options = {});

ChrfScore sentence_chrf(const std::string& hyp, const std::vector<std::string>& refs,
                        const ChrfOptions& options = {});

// sacreBLEU's per-segment statistics: [hyp, ref, match] for each character
// order, then each word order, against the best-scoring reference.
SegmentStats chrf_segment_stats(const std::vector<std::string>& hyps,
                                const std::vector<std::vector<std::string>>& refs,
                                const ChrfOptions& options);

// The chrF score (0..100) from summed statistics; with float32 arithmetic
// precision and recall are float32 quotients, as numpy computes them.
double chrf_from_stats(const int64_t* sums, const ChrfOptions& options,
                       StatsArithmetic arithmetic = StatsArithmetic::kPython);

}  // namespace nmt::metrics
