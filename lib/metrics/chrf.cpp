// chrF statistics and formatting. As in bleu.cpp, n-grams are views into
// integer strings (code points for characters, interned ids for words),
// counted through sorted vectors: exact and allocation-light.
#include "metrics/chrf.h"

#include <unicode/utf8.h>

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "metrics/bleu.h"  // kSacrebleuVersion
#include "metrics/ngrams.h"
#include "metrics/tokenizers.h"

namespace nmt::metrics {

namespace {

// Python's string.punctuation, the set chrF++ splits off words.
bool is_ascii_punct(unsigned char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
         (c >= '{' && c <= '~');
}

bool is_single_code_point(std::string_view w) {
  int32_t i = 0;
  UChar32 c;
  U8_NEXT_OR_FFFD(reinterpret_cast<const uint8_t*>(w.data()), i, static_cast<int32_t>(w.size()), c);
  (void)c;
  return i == static_cast<int32_t>(w.size());
}

// Segment text reduced to what the n-gram counts need.
struct Segment {
  std::u32string chars;  // code points, whitespace removed unless kept
  std::u32string words;  // interned word ids (chrF++ only)
};

class Preprocessor {
 public:
  explicit Preprocessor(const ChrfOptions& opt) : opt_(opt) {}

  Segment operator()(std::string_view raw) {
    std::string lowered;
    std::string_view line = raw;
    if (opt_.lowercase) {
      lowered = lowercase(raw);
      line = lowered;
    }
    Segment seg;
    for (char32_t c : decode_utf8(line))
      if (opt_.whitespace || !is_space(c)) seg.chars += c;
    if (opt_.word_order > 0) {
      // One ASCII punctuation mark comes off the end of a word, or else off
      // its start ("(hi)" -> "(hi" ")"), as sacreBLEU adapts from chrF++.py.
      for (std::string_view w : split_whitespace(line)) {
        if (is_single_code_point(w)) {
          seg.words += id(w);
        } else if (is_ascii_punct(static_cast<unsigned char>(w.back()))) {
          seg.words += id(w.substr(0, w.size() - 1));
          seg.words += id(w.substr(w.size() - 1));
        } else if (is_ascii_punct(static_cast<unsigned char>(w.front()))) {
          seg.words += id(w.substr(0, 1));
          seg.words += id(w.substr(1));
        } else {
          seg.words += id(w);
        }
      }
    }
    return seg;
  }

 private:
  char32_t id(std::string_view w) {
    auto [it, inserted] = ids_.try_emplace(std::string(w), next_id_);
    if (inserted) ++next_id_;
    return it->second;
  }

  const ChrfOptions& opt_;
  std::unordered_map<std::string, char32_t> ids_;
  char32_t next_id_ = 1;
};

// The n-grams of order `o` (0-based): character orders first, then word
// orders.
NgramCounts order_ngrams(const Segment& seg, const ChrfOptions& opt, int o) {
  return o < opt.char_order
             ? count_ngrams(seg.chars, static_cast<std::size_t>(o + 1))
             : count_ngrams(seg.words, static_cast<std::size_t>(o - opt.char_order + 1));
}

// Flattened [hyp, ref, match] per order, as sacreBLEU keeps them.
using Stats = std::vector<int64_t>;

void add_match_stats(Stats& stats, const NgramCounts& hyp, const NgramCounts& ref) {
  int64_t hyp_total = 0, ref_total = 0, match = 0;
  auto r = ref.begin();
  for (const auto& [g, c] : hyp) {
    hyp_total += c;
    while (r != ref.end() && r->first < g) ++r;
    if (r != ref.end() && r->first == g) match += std::min(c, r->second);
  }
  for (const auto& rc : ref) ref_total += rc.second;
  // Hypothesis n-grams only count where the reference has that order at all.
  stats.push_back(ref.empty() ? 0 : hyp_total);
  stats.push_back(ref_total);
  stats.push_back(match);
}

// float32: numpy float32 scalars divide in float32; everything after is
// float64 (an int or a Python float meeting a float32 scalar promotes).
double f_score(const int64_t* stats, const ChrfOptions& opt, bool float32 = false) {
  const double eps = 1e-16;
  const double factor = static_cast<double>(opt.beta) * opt.beta;
  const int order = opt.char_order + opt.word_order;
  double score = 0.0, avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (int i = 0; i < order; ++i) {
    const auto n_hyp = static_cast<double>(stats[3 * i]);
    const auto n_ref = static_cast<double>(stats[3 * i + 1]);
    const auto n_match = static_cast<double>(stats[3 * i + 2]);
    double prec = n_hyp > 0 ? n_match / n_hyp : eps;
    double rec = n_ref > 0 ? n_match / n_ref : eps;
    if (float32) {
      if (n_hyp > 0) prec = static_cast<float>(n_match) / static_cast<float>(n_hyp);
      if (n_ref > 0) rec = static_cast<float>(n_match) / static_cast<float>(n_ref);
    }
    const double denom = factor * prec + rec;
    score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (opt.eps_smoothing) return 100 * score / order;
  if (effective_order == 0) {
    avg_prec = avg_rec = 0.0;
  } else {
    avg_prec /= effective_order;
    avg_rec /= effective_order;
  }
  if (avg_prec + avg_rec == 0) return 0.0;
  return 100 * ((1 + factor) * avg_prec * avg_rec / ((factor * avg_prec) + avg_rec));
}

struct Accumulator {
  Stats total;
  int nrefs = 0;  // 0: none seen yet, -1: varies
};

void add_segment(Accumulator& acc, Preprocessor& prep, const ChrfOptions& opt, std::string_view hyp,
                 const std::vector<std::string_view>& refs, std::size_t line_no) {
  const Segment hyp_seg = prep(hyp);
  std::vector<Segment> ref_segs;
  for (std::string_view ref : refs)
    if (!ref.empty()) ref_segs.push_back(prep(ref));  // fewer references for this segment
  const auto n_here = static_cast<int>(ref_segs.size());
  // One order at a time, so that memory follows the line and not the line
  // times the orders (a 1 MB line at 100 character and 100 word orders took
  // 5 GB with every order's counts held at once).
  const int orders = opt.char_order + opt.word_order;
  std::vector<Stats> stats(ref_segs.size());
  for (Stats& st : stats) st.reserve(3 * static_cast<std::size_t>(orders));
  for (int o = 0; o < orders && n_here > 0; ++o) {
    const NgramCounts hyp_ngrams = order_ngrams(hyp_seg, opt, o);
    for (std::size_t r = 0; r < ref_segs.size(); ++r)
      add_match_stats(stats[r], hyp_ngrams, order_ngrams(ref_segs[r], opt, o));
  }
  Stats best;
  double best_f = -1.0;
  for (Stats& st : stats) {
    const double f = f_score(st.data(), opt);
    if (f > best_f) {  // the first reference wins ties
      best_f = f;
      best = std::move(st);
    }
  }
  if (n_here == 0)
    throw InputError("line " + std::to_string(line_no) + ": every reference is empty");
  if (acc.nrefs == 0)
    acc.nrefs = n_here;
  else if (acc.nrefs != n_here)
    acc.nrefs = -1;
  if (acc.total.empty()) acc.total.assign(best.size(), 0);
  for (std::size_t k = 0; k < best.size(); ++k) acc.total[k] += best[k];
}

void check_options(const ChrfOptions& opt) {
  if (opt.char_order < 0 || opt.word_order < 0 || opt.char_order + opt.word_order == 0)
    throw InputError("chrF needs a positive character or word n-gram order (got " +
                     std::to_string(opt.char_order) + " and " + std::to_string(opt.word_order) +
                     ")");
}

ChrfScore finish(const Accumulator& acc, const ChrfOptions& opt, int default_nrefs) {
  ChrfScore s;
  s.options = opt;
  s.nrefs = acc.nrefs == 0 ? default_nrefs : acc.nrefs;
  Stats stats = acc.total;
  stats.resize(3 * static_cast<std::size_t>(opt.char_order + opt.word_order), 0);
  s.score = f_score(stats.data(), opt);
  return s;
}

}  // namespace

ChrfScore corpus_chrf(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs,
                      const ChrfOptions& options) {
  check_options(options);
  if (refs.empty()) throw InputError("no reference given: chrF needs at least one");
  for (std::size_t r = 0; r < refs.size(); ++r) {
    if (refs[r].size() != hyps.size())
      throw InputError("line count mismatch: the hypotheses have " + std::to_string(hyps.size()) +
                       " lines but reference " + std::to_string(r + 1) + " has " +
                       std::to_string(refs[r].size()));
  }
  Accumulator acc;
  Preprocessor prep(options);
  std::vector<std::string_view> seg_refs(refs.size());
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    for (std::size_t r = 0; r < refs.size(); ++r) seg_refs[r] = refs[r][i];
    add_segment(acc, prep, options, hyps[i], seg_refs, i + 1);
  }
  return finish(acc, options, static_cast<int>(refs.size()));
}

ChrfScore sentence_chrf(const std::string& hyp, const std::vector<std::string>& refs,
                        const ChrfOptions& options) {
  check_options(options);
  if (refs.empty()) throw InputError("no reference given: chrF needs at least one");
  Accumulator acc;
  Preprocessor prep(options);
  std::vector<std::string_view> seg_refs(refs.begin(), refs.end());
  add_segment(acc, prep, options, hyp, seg_refs, 1);
  return finish(acc, options, static_cast<int>(refs.size()));
}

std::string ChrfScore::name() const {
  return "chrF" + std::to_string(options.beta) + std::string(options.word_order, '+');
}

std::string ChrfScore::text(int width) const { return name() + " = " + format_fixed(score, width); }

std::string ChrfScore::line(int width) const {
  return name() + "|" + signature() + " = " + format_fixed(score, width);
}

std::string ChrfScore::signature() const {
  return std::string("nrefs:") + (nrefs < 0 ? "var" : std::to_string(nrefs)) +
         "|case:" + (options.lowercase ? "lc" : "mixed") +
         "|eff:" + (options.eps_smoothing ? "no" : "yes") +
         "|nc:" + std::to_string(options.char_order) + "|nw:" + std::to_string(options.word_order) +
         "|space:" + (options.whitespace ? "yes" : "no") + "|version:" + kSacrebleuVersion;
}

nlohmann::ordered_json ChrfScore::to_json(int width) const {
  nlohmann::ordered_json j;
  const std::string sig = signature();
  j["name"] = name();
  j["score"] = std::stod(format_fixed(score, width));
  j["signature"] = sig;
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

SegmentStats chrf_segment_stats(const std::vector<std::string>& hyps,
                                const std::vector<std::vector<std::string>>& refs,
                                const ChrfOptions& options) {
  check_options(options);
  if (refs.empty()) throw InputError("no reference given: chrF needs at least one");
  for (std::size_t r = 0; r < refs.size(); ++r)
    if (refs[r].size() != hyps.size())
      throw InputError("line count mismatch: the hypotheses have " + std::to_string(hyps.size()) +
                       " lines but reference " + std::to_string(r + 1) + " has " +
                       std::to_string(refs[r].size()));
  SegmentStats out;
  out.segments = hyps.size();
  out.width = 3 * static_cast<std::size_t>(options.char_order + options.word_order);
  out.values.reserve(out.segments * out.width);
  Preprocessor prep(options);
  std::vector<std::string_view> seg_refs(refs.size());
  int n_refs = 0;
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    for (std::size_t r = 0; r < refs.size(); ++r) seg_refs[r] = refs[r][i];
    Accumulator acc;
    add_segment(acc, prep, options, hyps[i], seg_refs, i + 1);
    if (n_refs == 0)
      n_refs = acc.nrefs;
    else if (n_refs != acc.nrefs)
      n_refs = -1;
    acc.total.resize(out.width, 0);
    out.values.insert(out.values.end(), acc.total.begin(), acc.total.end());
  }
  out.nrefs = n_refs == 0 ? static_cast<int>(refs.size()) : n_refs;
  return out;
}

double chrf_from_stats(const int64_t* sums, const ChrfOptions& options,
                       StatsArithmetic arithmetic) {
  return f_score(sums, options, arithmetic == StatsArithmetic::kNumpyFloat32);
}

}  // namespace nmt::metrics
