// BLEU statistics and formatting. Tokens are interned to integer ids and an
// n-gram is a view of consecutive ids, so n-gram counting is exact (no hash
// collisions) and needs no per-n-gram allocation: a sorted vector per order
// replaces Python's Counter of tuples.
#include "metrics/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "metrics/ngrams.h"

namespace nmt::metrics {

namespace {

// sacreBLEU's my_log: log(0) is a large negative number, not -inf, so that
// an unsmoothed zero precision gives a score of exactly 0.
double my_log(double x) { return x > 0 ? std::log(x) : -9999999999.0; }

double default_smooth_value(Smoothing s) {
  switch (s) {
    case Smoothing::kFloor:
      return 0.1;
    case Smoothing::kAddK:
      return 1.0;
    default:
      return 0.0;
  }
}

bool smoothing_takes_value(Smoothing s) { return s == Smoothing::kFloor || s == Smoothing::kAddK; }

// Per n-gram maximum over the references (sacreBLEU's clipping counts).
NgramCounts merge_max(std::vector<NgramCounts>& per_ref) {
  if (per_ref.size() == 1) return std::move(per_ref[0]);
  NgramCounts all;
  for (const NgramCounts& c : per_ref) all.insert(all.end(), c.begin(), c.end());
  std::sort(all.begin(), all.end());  // equal n-grams adjacent, largest count last
  NgramCounts out;
  for (const auto& [g, c] : all) {
    if (!out.empty() && out.back().first == g)
      out.back().second = std::max(out.back().second, c);
    else
      out.emplace_back(g, c);
  }
  return out;
}

// Interns tokens so that n-grams become short integer strings.
class Vocab {
 public:
  std::u32string encode(const std::string& tokenized) {
    std::u32string ids;
    for (std::string_view tok : split_whitespace(tokenized)) {
      auto [it, inserted] = ids_.try_emplace(std::string(tok), next_id_);
      if (inserted) ++next_id_;
      ids += it->second;
    }
    return ids;
  }

 private:
  std::unordered_map<std::string, char32_t> ids_;
  char32_t next_id_ = 1;
};

std::string preprocess(std::string_view line, const BleuOptions& opt) {
  if (opt.lowercase) {
    std::string lowered = lowercase(line);
    return tokenize(rstrip_whitespace(lowered), opt.tokenizer, opt.spm_model);
  }
  return tokenize(rstrip_whitespace(line), opt.tokenizer, opt.spm_model);
}

// sacreBLEU's closest reference length: smallest |hyp - ref|, then the
// shorter reference.
int64_t closest_ref_len(int64_t hyp_len, const std::vector<int64_t>& ref_lens) {
  int64_t best_diff = -1, best_len = -1;
  for (int64_t len : ref_lens) {
    int64_t diff = std::llabs(hyp_len - len);
    if (best_diff == -1 || diff < best_diff) {
      best_diff = diff;
      best_len = len;
    } else if (diff == best_diff && len < best_len) {
      best_len = len;
    }
  }
  return best_len;
}

struct CorpusStats {
  std::array<int64_t, kBleuMaxOrder> correct{};
  std::array<int64_t, kBleuMaxOrder> total{};
  int64_t hyp_len = 0;
  int64_t ref_len = 0;
  int nrefs = 0;  // 0: none seen yet, -1: varies
};

void add_segment(CorpusStats& stats, Vocab& vocab, std::string_view hyp,
                 const std::vector<std::string_view>& refs, const BleuOptions& opt,
                 std::size_t line_no) {
  std::vector<std::u32string> ref_ids;
  std::vector<int64_t> ref_lens;
  for (std::string_view ref : refs) {
    if (ref.empty()) continue;  // fewer references for this segment
    ref_ids.push_back(vocab.encode(preprocess(ref, opt)));
    ref_lens.push_back(static_cast<int64_t>(ref_ids.back().size()));
  }
  if (ref_ids.empty())
    throw InputError("line " + std::to_string(line_no) + ": every reference is empty");
  int n_here = static_cast<int>(ref_ids.size());
  if (stats.nrefs == 0)
    stats.nrefs = n_here;
  else if (stats.nrefs != n_here)
    stats.nrefs = -1;

  std::u32string hyp_ids = vocab.encode(preprocess(hyp, opt));
  const auto hyp_len = static_cast<int64_t>(hyp_ids.size());
  stats.hyp_len += hyp_len;
  stats.ref_len += closest_ref_len(hyp_len, ref_lens);

  for (std::size_t n = 1; n <= kBleuMaxOrder; ++n) {
    NgramCounts hyp_counts = count_ngrams(hyp_ids, n);
    if (hyp_counts.empty()) continue;
    std::vector<NgramCounts> per_ref;
    per_ref.reserve(ref_ids.size());
    for (const std::u32string& r : ref_ids) per_ref.push_back(count_ngrams(r, n));
    NgramCounts ref_counts = merge_max(per_ref);

    int64_t total = 0, correct = 0;
    auto r = ref_counts.begin();
    for (const auto& [g, c] : hyp_counts) {
      total += c;
      while (r != ref_counts.end() && r->first < g) ++r;
      if (r != ref_counts.end() && r->first == g) correct += std::min(c, r->second);
    }
    stats.total[n - 1] += total;
    stats.correct[n - 1] += correct;
  }
}

void check_line_counts(std::size_t n_hyps, const std::vector<std::vector<std::string>>& refs) {
  if (refs.empty()) throw InputError("no reference given: BLEU needs at least one");
  for (std::size_t r = 0; r < refs.size(); ++r) {
    if (refs[r].size() != n_hyps)
      throw InputError("line count mismatch: the hypotheses have " + std::to_string(n_hyps) +
                       " lines but reference " + std::to_string(r + 1) + " has " +
                       std::to_string(refs[r].size()));
  }
}

}  // namespace

Smoothing parse_smoothing(std::string_view name) {
  if (name == "exp") return Smoothing::kExp;
  if (name == "floor") return Smoothing::kFloor;
  if (name == "add-k") return Smoothing::kAddK;
  if (name == "none") return Smoothing::kNone;
  throw InputError("unknown smoothing method '" + std::string(name) +
                   "': expected exp, floor, add-k or none");
}

const char* smoothing_name(Smoothing s) {
  switch (s) {
    case Smoothing::kExp:
      return "exp";
    case Smoothing::kFloor:
      return "floor";
    case Smoothing::kAddK:
      return "add-k";
    case Smoothing::kNone:
      return "none";
  }
  return "?";
}

BleuScore bleu_from_stats(const std::array<int64_t, kBleuMaxOrder>& correct_in,
                          const std::array<int64_t, kBleuMaxOrder>& total_in, int64_t hyp_len,
                          int64_t ref_len, const BleuOptions& options, StatsArithmetic arithmetic) {
  BleuScore s;
  s.options = options;
  s.hyp_len = hyp_len;
  s.ref_len = ref_len;
  s.ratio = ref_len ? static_cast<double>(hyp_len) / static_cast<double>(ref_len) : 0.0;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    s.counts[n] = static_cast<double>(correct_in[n]);
    s.totals[n] = static_cast<double>(total_in[n]);
  }
  const double smooth_value = options.smooth_value.value_or(default_smooth_value(options.smooth));

  if (hyp_len < ref_len)
    s.bp = hyp_len > 0 ? std::exp(1.0 - static_cast<double>(ref_len) / static_cast<double>(hyp_len))
                       : 0.0;
  else
    s.bp = 1.0;

  // No match at any order: 0, before smoothing could invent precision (#141).
  if (std::all_of(correct_in.begin(), correct_in.end(), [](int64_t c) { return c == 0; })) return s;

  double smooth_mteval = 1.0;
  int eff_order = kBleuMaxOrder;
  for (int n = 1; n <= kBleuMaxOrder; ++n) {
    double& correct = s.counts[n - 1];
    double& total = s.totals[n - 1];
    if (options.smooth == Smoothing::kAddK && n > 1) {
      correct += smooth_value;
      total += smooth_value;
      if (arithmetic == StatsArithmetic::kNumpyFloat32) {
        correct = static_cast<float>(correct);
        total = static_cast<float>(total);
      } else if (arithmetic == StatsArithmetic::kNumpyInt64) {
        correct = std::trunc(correct);
        total = std::trunc(total);
      }
    }
    if (total == 0) break;
    if (options.effective_order) eff_order = n;
    if (correct == 0) {
      if (options.smooth == Smoothing::kExp) {
        smooth_mteval *= 2;
        s.precisions[n - 1] = 100.0 / (smooth_mteval * total);
      } else if (options.smooth == Smoothing::kFloor) {
        s.precisions[n - 1] = 100.0 * smooth_value / total;
      }
    } else {
      s.precisions[n - 1] = 100.0 * correct / total;
    }
  }

  // Summed in order, as Python's sum() does, so the last bit matches too.
  double log_sum = 0.0;
  for (int n = 0; n < eff_order; ++n) log_sum += my_log(s.precisions[n]);
  s.score = s.bp * std::exp(log_sum / eff_order);
  return s;
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs,
                      const BleuOptions& options) {
  check_line_counts(hyps.size(), refs);
  CorpusStats stats;
  Vocab vocab;
  std::vector<std::string_view> seg_refs(refs.size());
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    for (std::size_t r = 0; r < refs.size(); ++r) seg_refs[r] = refs[r][i];
    add_segment(stats, vocab, hyps[i], seg_refs, options, i + 1);
  }
  BleuScore s = bleu_from_stats(stats.correct, stats.total, stats.hyp_len, stats.ref_len, options);
  s.nrefs = stats.nrefs == 0 ? static_cast<int>(refs.size()) : stats.nrefs;
  return s;
}

BleuScore sentence_bleu(const std::string& hyp, const std::vector<std::string>& refs,
                        const BleuOptions& options) {
  if (refs.empty()) throw InputError("no reference given: BLEU needs at least one");
  BleuOptions opt = options;
  opt.effective_order = true;
  CorpusStats stats;
  Vocab vocab;
  std::vector<std::string_view> seg_refs(refs.begin(), refs.end());
  add_segment(stats, vocab, hyp, seg_refs, opt, 1);
  BleuScore s = bleu_from_stats(stats.correct, stats.total, stats.hyp_len, stats.ref_len, opt);
  s.nrefs = stats.nrefs;
  return s;
}

std::string BleuScore::verbose() const {
  std::string v;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    if (n) v += '/';
    v += format_fixed(precisions[n], 1);
  }
  v += " (BP = " + format_fixed(bp, 3) + " ratio = " + format_fixed(ratio, 3) +
       " hyp_len = " + std::to_string(hyp_len) + " ref_len = " + std::to_string(ref_len) + ")";
  return v;
}

std::string BleuScore::text(int width) const {
  return "BLEU = " + format_fixed(score, width) + " " + verbose();
}

std::string BleuScore::line(int width) const {
  return "BLEU|" + signature() + " = " + format_fixed(score, width) + " " + verbose();
}

std::string BleuScore::signature() const {
  std::string smooth = smoothing_name(options.smooth);
  if (smoothing_takes_value(options.smooth))
    smooth += "[" +
              format_fixed(options.smooth_value.value_or(default_smooth_value(options.smooth)), 2) +
              "]";
  return std::string("nrefs:") + (nrefs < 0 ? "var" : std::to_string(nrefs)) +
         "|case:" + (options.lowercase ? "lc" : "mixed") +
         "|eff:" + (options.effective_order ? "yes" : "no") +
         "|tok:" + tokenizer_signature(options.tokenizer) + "|smooth:" + smooth +
         "|version:" + kSacrebleuVersion;
}

nlohmann::ordered_json BleuScore::to_json(int width) const {
  nlohmann::ordered_json j;
  const std::string sig = signature();
  j["name"] = "BLEU";
  // sacreBLEU stores the score rounded to the printed width.
  j["score"] = std::stod(format_fixed(score, width));
  j["signature"] = sig;
  j["verbose_score"] = verbose();
  std::string_view rest = sig;
  while (!rest.empty()) {
    std::size_t bar = rest.find('|');
    std::string_view field = rest.substr(0, bar);
    std::size_t colon = field.find(':');
    j[std::string(field.substr(0, colon))] = std::string(field.substr(colon + 1));
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return j;
}

SegmentStats bleu_segment_stats(const std::vector<std::string>& hyps,
                                const std::vector<std::vector<std::string>>& refs,
                                const BleuOptions& options) {
  check_line_counts(hyps.size(), refs);
  SegmentStats out;
  out.segments = hyps.size();
  out.width = 2 + 2 * kBleuMaxOrder;
  out.values.reserve(out.segments * out.width);
  Vocab vocab;
  int n_refs = 0;
  std::vector<std::string_view> seg_refs(refs.size());
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    for (std::size_t r = 0; r < refs.size(); ++r) seg_refs[r] = refs[r][i];
    CorpusStats seg;
    add_segment(seg, vocab, hyps[i], seg_refs, options, i + 1);
    if (n_refs == 0)
      n_refs = seg.nrefs;
    else if (n_refs != seg.nrefs)
      n_refs = -1;
    out.values.push_back(seg.hyp_len);
    out.values.push_back(seg.ref_len);
    out.values.insert(out.values.end(), seg.correct.begin(), seg.correct.end());
    out.values.insert(out.values.end(), seg.total.begin(), seg.total.end());
  }
  out.nrefs = n_refs == 0 ? static_cast<int>(refs.size()) : n_refs;
  return out;
}

}  // namespace nmt::metrics
