// BLEU (Papineni et al., 2002) exactly as sacreBLEU 2.6.0 computes and
// prints it, so that `nmt score`, validation during `nmt train` and anyone's
// sacrebleu run report the same number, text and signature.
//
// Conventions taken over from sacreBLEU: references are refs[r][i] (stream
// r, segment i); an empty reference line is skipped for that segment (a
// varying count shows as nrefs:var); lines are right-stripped, optionally
// lowercased, then tokenised; 4-gram precisions; closest reference length,
// shorter one on ties.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/stats_metric.h"
#include "metrics/tokenizers.h"

namespace nmt::metrics {

// Version of sacreBLEU whose numbers and strings these functions reproduce;
// it appears in every signature.
inline constexpr const char* kSacrebleuVersion = "2.6.0";

enum class Smoothing {
  kExp,    // NIST geometric decay for zero matches (mteval-v13a); default
  kFloor,  // zero matches count as `smooth_value` (default 0.1)
  kAddK,   // add `smooth_value` (default 1) to counts for n > 1
  kNone,
};

// "exp", "floor", "add-k", "none"; anything else throws nmt::InputError.
Smoothing parse_smoothing(std::string_view name);
const char* smoothing_name(Smoothing s);

struct BleuOptions {
  TokenizerKind tokenizer = TokenizerKind::k13a;
  // The SentencePiece model file of flores101/flores200 (sacreBLEU
  // downloads it; nmt takes it by path).
  std::string spm_model;
  bool lowercase = false;
  Smoothing smooth = Smoothing::kExp;
  // Unset: the method's default (floor 0.1, add-k 1). Ignored by exp/none.
  std::optional<double> smooth_value;
  // Leave out n-gram orders the hypothesis is too short to have. Off for a
  // corpus by default; sentence_bleu() always turns it on.
  bool effective_order = false;
};

inline constexpr int kBleuMaxOrder = 4;

struct BleuScore {
  double score = 0.0;                              // 0..100
  std::array<double, kBleuMaxOrder> precisions{};  // percentages
  // Matched and total n-grams per order; after add-k smoothing, as
  // sacreBLEU reports them.
  std::array<double, kBleuMaxOrder> counts{};
  std::array<double, kBleuMaxOrder> totals{};
  double bp = 0.0;     // brevity penalty
  double ratio = 0.0;  // hyp_len / ref_len
  int64_t hyp_len = 0;
  int64_t ref_len = 0;
  int nrefs = 1;  // -1: varies across segments ("var")
  BleuOptions options;

  // "BLEU = 29.59 67.3/40.6/27.3/18.3 (BP = 0.865 ratio = 0.874 ...)"; the
  // score with `width` decimals, the precisions always with one.
  std::string text(int width = 2) const;
  // The sacrebleu CLI's line, signature inside: "BLEU|nrefs:1|...|version:2.6.0 = 29.59 ..."
  std::string line(int width = 2) const;
  // "67.3/40.6/27.3/18.3 (BP = 0.865 ratio = 0.874 hyp_len = ... ref_len = ...)"
  std::string verbose() const;
  // "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
  std::string signature() const;
  // sacrebleu --format json, keys in sacreBLEU's order; dump(1) gives its text.
  nlohmann::ordered_json to_json(int width = 2) const;
};

// Corpus BLEU over hyps[i] against refs[r][i]. Throws nmt::InputError if a
// reference stream's line count differs from the hypotheses' or a segment
// has no non-empty reference.
BleuScore corpus_bleu(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs,
                      const BleuOptions& options = {});

// sacreBLEU's sentence_bleu(): one segment, effective order forced on.
BleuScore sentence_bleu(const std::string& hyp, const std::vector<std::string>& refs,
                        const BleuOptions& options = {});

// sacreBLEU's compute_bleu() on sufficient statistics, for callers that
// accumulate them themselves.
// `arithmetic`: see stats_metric.h; it changes only add-k smoothing, whose
// added value numpy rounds into the float32 or int64 array.
BleuScore bleu_from_stats(const std::array<int64_t, kBleuMaxOrder>& correct,
                          const std::array<int64_t, kBleuMaxOrder>& total, int64_t hyp_len,
                          int64_t ref_len, const BleuOptions& options,
                          StatsArithmetic arithmetic = StatsArithmetic::kPython);

// sacreBLEU's per-segment statistics, one row per segment:
// [hyp_len, ref_len, correct_1..4, total_1..4].
SegmentStats bleu_segment_stats(const std::vector<std::string>& hyps,
                                const std::vector<std::vector<std::string>>& refs,
                                const BleuOptions& options);

}  // namespace nmt::metrics
