// TER, translation edit rate (Snover et al., 2006), exactly as sacreBLEU
// 2.6.0 computes and prints it: its tercom tokeniser (lowercased unless
// case-sensitive; optional normalisation, punctuation removal and CJK
// handling), then word edits (insertion, deletion, substitution, each 1)
// plus block shifts found by sacreBLEU's greedy search with tercom's limits:
// blocks of at most 10 words, moved at most 50 positions, the edit distance
// computed in a band of 25 cells around the length-scaled diagonal, and at
// most 1000 candidate shifts tried per segment and reference.
//
// With several references a segment takes the fewest edits over its
// references and the average of their lengths; the corpus score is the sum
// of edits over the sum of average lengths. Unlike BLEU and chrF, sacreBLEU
// keeps empty reference lines for TER: they count with length 0, and a
// segment whose references are all empty costs one edit per hypothesis word.
// References go through the tokeniser twice, as sacreBLEU 2.6.0 sends them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/stats_metric.h"

namespace nmt::metrics {

struct TerOptions {
  bool normalized = false;      // --ter-normalized: tercom's punctuation tokenisation
  bool no_punct = false;        // --ter-no-punct: remove . , ? : ; ! " ( )
  bool asian_support = false;   // --ter-asian-support: CJK characters and punctuation
  bool case_sensitive = false;  // --ter-case-sensitive: keep case
};

// sacreBLEU's TercomTokenizer on one line (right-stripped first): the
// words, joined by single spaces.
std::string tokenize_tercom(std::string_view line, const TerOptions& options);

// Edits of one hypothesis against one reference (word lists after
// tokenisation): sacreBLEU's lib_ter.translation_edit_rate(). `ref_len` is
// the reference's word count.
struct TerEdits {
  int64_t edits = 0;
  int64_t ref_len = 0;
};
TerEdits translation_edit_rate(const std::vector<std::string_view>& hyp_words,
                               const std::vector<std::string_view>& ref_words);

struct TerScore {
  double score = 0.0;       // 100 * edits / ref_length; may exceed 100
  int64_t num_edits = 0;    // summed over segments
  double ref_length = 0.0;  // summed average reference lengths
  int nrefs = 1;
  TerOptions options;

  // "TER = 51.02"
  std::string text(int width = 2) const;
  // The sacrebleu CLI's line: "TER|nrefs:1|case:lc|...|version:2.6.0 = 51.02"
  std::string line(int width = 2) const;
  // "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:2.6.0"
  std::string signature() const;
  // sacrebleu --format json, keys in sacreBLEU's order.
  nlohmann::ordered_json to_json(int width = 2) const;
};

// Corpus TER over hyps[i] against refs[r][i]. Throws nmt::InputError when
// there is no reference stream or line counts differ.
TerScore corpus_ter(const std::vector<std::string>& hyps,
                    const std::vector<std::vector<std::string>>& refs,
                    const TerOptions& options = {});

// The StatsMetric rows: [fewest edits, sum of the references' lengths] per
// segment, nrefs = refs.size() (TER keeps empty reference lines). sacreBLEU's
// rows are [edits, average reference length], the average a float; here it
// is kept as its integer numerator and divided by nrefs after summing, which
// is exactly sacreBLEU's sum whenever nrefs is a power of two (1, 2, 4: every
// average and partial sum is exact in float32 below 2^23 words and in
// float64). With 3 references sacreBLEU rounds each average before summing,
// so a score may differ from it in the last bits (not at the printed width).
SegmentStats ter_segment_stats(const std::vector<std::string>& hyps,
                               const std::vector<std::vector<std::string>>& refs,
                               const TerOptions& options = {});
// _compute_score_from_stats on summed rows, in sacreBLEU's arithmetic:
// edits / (lengths / nrefs), 100 for edits against empty references only.
double ter_from_stats(const int64_t* sums, int nrefs, StatsArithmetic arithmetic);
// The printed TerScore of summed rows (Python arithmetic).
TerScore ter_score_from_stats(const int64_t* sums, int nrefs, const TerOptions& options);

TerScore sentence_ter(const std::string& hyp, const std::vector<std::string>& refs,
                      const TerOptions& options = {});

}  // namespace nmt::metrics
