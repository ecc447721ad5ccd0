// TER: the tercom tokeniser and sacreBLEU's shift search (metrics/lib_ter.py).
//
// The search gives sacreBLEU's numbers because it makes the same choices:
// the same candidate order and ranking, the same banded edit distance with
// the same tie-breaking between operations, the same limits. What differs
// is only how the work is done. sacreBLEU caches edit-distance rows in a
// trie keyed by hypothesis prefixes; a row depends only on the prefix (all
// hypotheses of one search have the same length, so the band is the same),
// so here the matrix of the current hypothesis is kept and a candidate
// shift recomputes only the rows after its first changed word, in one
// preallocated scratch table, without an operation trace. Both tables keep
// only the band (see ShiftSearch::span_lo_). Words are interned to integers
// once per segment.
#include "metrics/ter.h"

#include <unicode/utf8.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <unordered_map>

#include "core/error.h"
#include "metrics/bleu.h"  // kSacrebleuVersion
#include "metrics/ngrams.h"
#include "metrics/tokenizers.h"

namespace nmt::metrics {

namespace {

// ---------------------------------------------------------------------------
// Tokeniser (sacrebleu/tokenizers/tokenizer_ter.py). Each regex pass of
// _normalize_general_and_western is replayed as a left-to-right scan with
// Python's non-overlapping re.sub semantics; all its patterns are ASCII, so
// scanning bytes of UTF-8 gives the same result as scanning code points.

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  if (pos == 0) return;
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// [{-~[-` -&(-+:-@/]: ASCII punctuation and space except ' , - .
bool is_tercom_punct(char c) {
  return (c >= 0x20 && c <= 0x26) || (c >= 0x28 && c <= 0x2B) || c == 0x2F ||
         (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

// re.sub(r"(A)(B)", repl, s) where A and B match one byte each.
template <typename A, typename B, typename Emit>
void sub_pairs(std::string& s, A a, B b, Emit emit) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  std::size_t p = 0;
  while (p < s.size()) {
    if (p + 1 < s.size() && a(s[p]) && b(s[p + 1])) {
      emit(out, s[p], s[p + 1]);
      p += 2;
    } else {
      out += s[p++];
    }
  }
  s = std::move(out);
}

void normalize_general_and_western(std::string& s) {
  replace_all(s, "\n-", "");  // end-of-line hyphenation
  replace_all(s, "\n", " ");
  replace_all(s, "&quot;", "\"");
  replace_all(s, "&amp;", "&");
  replace_all(s, "&lt;", "<");
  replace_all(s, "&gt;", ">");
  std::string t;
  t.reserve(s.size() * 2 + 2);
  t += ' ';
  for (char c : s) {
    if (is_tercom_punct(c)) {
      t += ' ';
      t += c;
      t += ' ';
    } else {
      t += c;
    }
  }
  t += ' ';
  s = std::move(t);
  replace_all(s, "'s ", " 's ");
  // r"'s$" cannot match: the string ends with the space added above.
  const auto not_digit = [](char c) { return !is_digit(c); };
  const auto period_comma = [](char c) { return c == '.' || c == ','; };
  sub_pairs(s, not_digit, period_comma, [](std::string& o, char x, char y) {
    o += x;
    o += ' ';
    o += y;
    o += ' ';
  });
  sub_pairs(s, period_comma, not_digit, [](std::string& o, char x, char y) {
    o += ' ';
    o += x;
    o += ' ';
    o += y;
  });
  sub_pairs(
      s, is_digit, [](char c) { return c == '-'; },
      [](std::string& o, char x, char y) {
        o += x;
        o += ' ';
        o += y;
        o += ' ';
      });
}

// TercomTokenizer.ASIAN_PUNCT and FULL_WIDTH_PUNCT.
bool is_asian_punct(char32_t c) {
  return c == 0x3001 || c == 0x3002 || (c >= 0x3008 && c <= 0x3011) ||
         (c >= 0x3014 && c <= 0x301F) || (c >= 0xFF61 && c <= 0xFF65) || c == 0x30FB;
}
bool is_full_width_punct(char32_t c) {
  switch (c) {
    case 0xFF0E:
    case 0xFF0C:
    case 0xFF1F:
    case 0xFF1A:
    case 0xFF1B:
    case 0xFF01:
    case 0xFF02:
    case 0xFF08:
    case 0xFF09:
      return true;
    default:
      return false;
  }
}

// The characters _normalize_asian puts spaces around. Its three Hiragana /
// Katakana substitutions are anchored with ^ at both ends of a lookahead,
// so on a string that starts with the space normalisation added they never
// match, and are left out.
bool is_asian_split(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x31C0 && c <= 0x31EF) || (c >= 0x2E80 && c <= 0x2EFF) ||
         (c >= 0x3300 && c <= 0x33FF) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0x3200 && c <= 0x3F22) || is_asian_punct(c) ||
         is_full_width_punct(c);
}

// Rewrites code point by code point: keep, drop, or surround with spaces.
template <typename Decide>
void map_code_points(std::string& s, Decide decide) {
  std::string out;
  out.reserve(s.size() + s.size() / 2);
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const auto n = static_cast<int32_t>(s.size());
  for (int32_t i = 0; i < n;) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT_OR_FFFD(p, i, n, c);
    const std::string_view bytes(s.data() + start, static_cast<std::size_t>(i - start));
    switch (decide(static_cast<char32_t>(c))) {
      case 0:
        out += bytes;
        break;
      case 1:
        break;
      default:
        out += ' ';
        out += bytes;
        out += ' ';
    }
  }
  s = std::move(out);
}

// ---------------------------------------------------------------------------
// Shift search (sacrebleu/metrics/lib_ter.py).

constexpr int kMaxShiftSize = 10;
constexpr int kMaxShiftDist = 50;
constexpr int kBeamWidth = 25;
constexpr int64_t kMaxShiftCandidates = 1000;
constexpr int32_t kInf = 1 << 30;  // sacreBLEU's 1e16: only "never chosen" matters

// Operations rewriting the hypothesis (rows) into the reference (columns).
enum Op : uint8_t { kNop, kSub, kIns, kDel, kUndef };

class ShiftSearch {
 public:
  // Edits (shifts plus edit distance) of `hyp` against `ref`, word ids.
  int64_t edits(const std::vector<int>& hyp, const std::vector<int>& ref);

 private:
  void prepare(std::size_t n, std::size_t m);
  // Rows from+1..n of `words`' banded edit distance into `cost` (and `op`
  // when given), row `from` read from `first_prev` (that row of a table laid
  // out as these). Returns the last cell.
  int32_t fill_rows(const int* words, std::size_t from, const int32_t* first_prev, int32_t* cost,
                    uint8_t* op) const;
  // Where cell (i, j) is kept; j within row i's span.
  std::size_t cell(std::size_t i, std::size_t j) const { return off_[i] + (j - span_lo_[i]); }
  void trace_alignment();
  // Edit distance of shifted_ (which differs from words_ from some word on).
  int32_t candidate_cost();
  void perform_shift(std::size_t start, std::size_t length, std::size_t target);

  const std::vector<int>* ref_ = nullptr;
  std::size_t n_ = 0, m_ = 0;         // hypothesis length, reference length
  std::vector<std::size_t> lo_, hi_;  // band of row i: columns [lo_[i], hi_[i])
  // Only the band is kept, so memory follows the work (n times the band, plus
  // the full first and last rows), not n times m: a document-length segment
  // of 30,000 words would otherwise take 8 GB. Row i keeps columns
  // [span_lo_[i], span_hi_[i]): its band, one column to the left (read as
  // the left neighbour of the band's first cell), and as far right as the
  // next row's band reaches (read as that row's upper neighbours). Bands
  // only move right, so every cell a row reads is kept; cells outside a band
  // stay kInf and kUndef.
  std::vector<std::size_t> span_lo_, span_hi_, off_;
  std::vector<int> words_, shifted_, best_words_;
  std::vector<int32_t> base_cost_, cand_cost_;  // the kept cells
  std::vector<uint8_t> base_op_;                // the kept cells
  std::vector<uint8_t> trace_;
  std::vector<int64_t> align_;              // (m) hypothesis position of each reference word
  std::vector<int32_t> hyp_err_, ref_err_;  // prefix sums, (n+1) and (m+1)
};

void ShiftSearch::prepare(std::size_t n, std::size_t m) {
  n_ = n;
  m_ = m;
  const std::size_t w = m + 1;  // a full row
  lo_.assign(n + 1, 0);
  hi_.assign(n + 1, w);
  const double ratio = n > 0 ? static_cast<double>(m) / static_cast<double>(n) : 1.0;
  // "in some crazy sentences, the difference in length is so large that we
  // may end up with zero overlap with previous row"
  const int64_t beam =
      kBeamWidth < ratio / 2 ? static_cast<int64_t>(std::ceil(ratio / 2 + kBeamWidth)) : kBeamWidth;
  for (std::size_t i = 1; i <= n; ++i) {
    const auto diag = static_cast<int64_t>(std::floor(static_cast<double>(i) * ratio));
    lo_[i] = static_cast<std::size_t>(std::max<int64_t>(0, diag - beam));
    hi_[i] = i == n ? w : static_cast<std::size_t>(std::min<int64_t>(w, diag + beam));
  }
  span_lo_.resize(n + 1);
  span_hi_.resize(n + 1);
  off_.resize(n + 2);
  off_[0] = 0;
  for (std::size_t i = 0; i <= n; ++i) {
    span_lo_[i] = lo_[i] > 0 ? lo_[i] - 1 : 0;
    span_hi_[i] = i < n ? std::max(hi_[i], hi_[i + 1]) : hi_[i];
    off_[i + 1] = off_[i] + (span_hi_[i] - span_lo_[i]);
  }
  // Bands never move within a search (every hypothesis of it has the same
  // length), so what lies outside them is set once.
  const std::size_t cells = off_[n + 1];
  base_cost_.assign(cells, kInf);
  cand_cost_.assign(cells, kInf);
  base_op_.assign(cells, kUndef);
  for (std::size_t j = 0; j <= m; ++j) {
    base_cost_[j] = static_cast<int32_t>(j);
    base_op_[j] = kIns;
  }
  align_.resize(m);
  hyp_err_.resize(n + 1);
  ref_err_.resize(m + 1);
  shifted_.resize(n);
  best_words_.resize(n);
}

int32_t ShiftSearch::fill_rows(const int* words, std::size_t from, const int32_t* first_prev,
                               int32_t* cost, uint8_t* op) const {
  const int* ref = ref_->data();
  const int32_t* prev_row = first_prev;
  for (std::size_t i = from + 1; i <= n_; ++i) {
    const std::size_t lo = lo_[i];
    const auto width = static_cast<std::ptrdiff_t>(hi_[i] - lo);
    // prev[k], cur[k]: column lo + k of rows i-1 and i; prev[-1] and
    // cur[-1] (read only when lo > 0) are kept too (see span_lo_).
    const int32_t* prev = prev_row + (lo - span_lo_[i - 1]);
    int32_t* cur = cost + cell(i, lo);
    uint8_t* cur_op = op ? op + cell(i, lo) : nullptr;
    const int word = words[i - 1];
    std::ptrdiff_t k = 0;  // signed: [k - 1] is read at k = 0
    if (lo == 0) {
      cur[0] = prev[0] + 1;
      if (cur_op) cur_op[0] = kDel;
      k = 1;
    }
    // Tercom prefers match/substitution, then deletion, then insertion (as
    // sacreBLEU orders them for the flipped trace); strict '<' keeps the first.
    for (; k < width; ++k) {
      const bool match = word == ref[static_cast<std::ptrdiff_t>(lo) + k - 1];
      int32_t best = kInf;
      uint8_t best_op = kUndef;
      const int32_t sub = prev[k - 1] + (match ? 0 : 1);
      if (sub < best) {
        best = sub;
        best_op = match ? kNop : kSub;
      }
      if (prev[k] + 1 < best) {
        best = prev[k] + 1;
        best_op = kDel;
      }
      if (cur[k - 1] + 1 < best) {
        best = cur[k - 1] + 1;
        best_op = kIns;
      }
      cur[k] = best;
      if (cur_op) cur_op[k] = best_op;
    }
    prev_row = cost + off_[i];
  }
  return cost[cell(n_, m_)];
}

void ShiftSearch::trace_alignment() {
  trace_.clear();
  std::size_t i = n_, j = m_;
  while (i > 0 || j > 0) {
    const uint8_t op = j >= span_lo_[i] && j < span_hi_[i] ? base_op_[cell(i, j)] : uint8_t{kUndef};
    trace_.push_back(op);
    if (op == kNop || op == kSub) {
      --i;
      --j;
    } else if (op == kIns) {
      --j;
    } else if (op == kDel) {
      --i;
    } else {
      throw Error("TER: the edit-distance band lost the path (a segment of " + std::to_string(n_) +
                  " words against " + std::to_string(m_) + ")");
    }
  }
  // sacreBLEU flips the trace (reference rewritten into hypothesis) and
  // reads the alignment from it; the cases below are that flipped reading.
  int64_t h = -1, r = -1;
  hyp_err_[0] = 0;
  ref_err_[0] = 0;
  for (auto it = trace_.rbegin(); it != trace_.rend(); ++it) {
    switch (*it) {
      case kNop:
      case kSub: {
        const int32_t err = *it == kSub ? 1 : 0;
        ++h;
        ++r;
        align_[r] = h;
        hyp_err_[h + 1] = hyp_err_[h] + err;
        ref_err_[r + 1] = ref_err_[r] + err;
        break;
      }
      case kDel:  // a hypothesis word the reference lacks
        ++h;
        hyp_err_[h + 1] = hyp_err_[h] + 1;
        break;
      default:  // kIns: a reference word the hypothesis lacks
        ++r;
        align_[r] = h;
        ref_err_[r + 1] = ref_err_[r] + 1;
    }
  }
}

// lib_ter._perform_shift, into shifted_; Python's slice clamping included.
void ShiftSearch::perform_shift(std::size_t start, std::size_t length, std::size_t target) {
  const int* w = words_.data();
  int* out = shifted_.data();
  const auto copy = [&](std::size_t from, std::size_t to) {
    to = std::min(to, n_);
    if (from < to) out = std::copy(w + from, w + to, out);
  };
  if (target < start) {
    copy(0, target);
    copy(start, start + length);
    copy(target, start);
    copy(start + length, n_);
  } else if (target > start + length) {
    copy(0, start);
    copy(start + length, target);
    copy(start, start + length);
    copy(target, n_);
  } else {
    copy(0, start);
    copy(start + length, length + target);
    copy(start, start + length);
    copy(length + target, n_);
  }
}

int32_t ShiftSearch::candidate_cost() {
  std::size_t p = 0;
  while (p < n_ && shifted_[p] == words_[p]) ++p;
  if (p == n_) return base_cost_[cell(n_, m_)];
  return fill_rows(shifted_.data(), p, base_cost_.data() + off_[p], cand_cost_.data(), nullptr);
}

int64_t ShiftSearch::edits(const std::vector<int>& hyp, const std::vector<int>& ref) {
  if (ref.empty()) return static_cast<int64_t>(hyp.size());
  ref_ = &ref;
  prepare(hyp.size(), ref.size());
  words_ = hyp;
  fill_rows(words_.data(), 0, base_cost_.data(), base_cost_.data(), base_op_.data());

  int64_t shifts = 0;
  int64_t checked = 0;
  const int* r = ref.data();
  for (;;) {
    const int32_t pre = base_cost_[cell(n_, m_)];
    trace_alignment();
    bool found = false;
    int32_t best_delta = 0;
    std::size_t best_len = 0, best_start = 0, best_idx = 0;
    // Candidates in sacreBLEU's order: hypothesis start, reference start,
    // growing length; ranked by gain, then length, then earliest start,
    // then earliest target.
    for (std::size_t sh = 0; sh < n_ && checked < kMaxShiftCandidates; ++sh) {
      const std::size_t sr_begin = sh > kMaxShiftDist ? sh - kMaxShiftDist : 0;
      const std::size_t sr_end = std::min(m_, sh + kMaxShiftDist + 1);
      for (std::size_t sr = sr_begin; sr < sr_end && checked < kMaxShiftCandidates; ++sr) {
        for (std::size_t len = 0; len < kMaxShiftSize && words_[sh + len] == r[sr + len];) {
          ++len;
          // Shift only a wrong block, onto a wrong place, not into itself.
          if (hyp_err_[sh + len] != hyp_err_[sh] && ref_err_[sr + len] != ref_err_[sr] &&
              !(static_cast<int64_t>(sh) <= align_[sr] &&
                align_[sr] < static_cast<int64_t>(sh + len))) {
            int64_t prev_idx = -1;
            for (int64_t off = -1; off < static_cast<int64_t>(len); ++off) {
              // sacreBLEU inserts before the index where tercom inserts after.
              const int64_t pos = static_cast<int64_t>(sr) + off;
              const int64_t idx = pos == -1 ? 0 : align_[pos] + 1;
              if (idx == prev_idx) continue;
              prev_idx = idx;
              perform_shift(sh, len, static_cast<std::size_t>(idx));
              const int32_t delta = pre - candidate_cost();
              ++checked;
              const auto uidx = static_cast<std::size_t>(idx);
              if (!found || delta > best_delta ||
                  (delta == best_delta &&
                   (len > best_len ||
                    (len == best_len &&
                     (sh < best_start || (sh == best_start && uidx < best_idx)))))) {
                found = true;
                best_delta = delta;
                best_len = len;
                best_start = sh;
                best_idx = uidx;
                best_words_.swap(shifted_);
              }
            }
            if (checked >= kMaxShiftCandidates) break;
          }
          if (sh + len == n_ || sr + len == m_) break;
        }
      }
    }
    // sacreBLEU drops the shift found when the candidate budget ran out.
    if (checked >= kMaxShiftCandidates || !found || best_delta <= 0) break;
    ++shifts;
    std::size_t p = 0;
    while (p < n_ && best_words_[p] == words_[p]) ++p;
    words_.swap(best_words_);
    fill_rows(words_.data(), p, base_cost_.data() + off_[p], base_cost_.data(), base_op_.data());
  }
  return shifts + base_cost_[cell(n_, m_)];
}

// Per-segment word interning: equal strings, equal ids.
class Interner {
 public:
  void clear() { ids_.clear(); }
  void add(std::string_view text, std::vector<int>& out) {
    out.clear();
    for (std::string_view w : split_whitespace(text))
      out.push_back(ids_.try_emplace(w, static_cast<int>(ids_.size())).first->second);
  }
  void add(const std::vector<std::string_view>& words, std::vector<int>& out) {
    out.clear();
    for (std::string_view w : words)
      out.push_back(ids_.try_emplace(w, static_cast<int>(ids_.size())).first->second);
  }

 private:
  std::unordered_map<std::string_view, int> ids_;
};

struct Accumulator {
  int64_t edits = 0;
  double ref_length = 0.0;  // summed in segment order, as sacreBLEU sums floats
};

class Scorer {
 public:
  explicit Scorer(const TerOptions& opt) : opt_(opt) {}

  // The segment's fewest edits over its references and the sum of the
  // references' lengths (the average is that over refs.size()).
  TerEdits segment(std::string_view hyp, const std::vector<std::string_view>& refs) {
    const std::string hyp_tok = tokenize_tercom(hyp, opt_);
    ref_tok_.resize(refs.size());
    // sacreBLEU tokenises references twice (_cache_references, then
    // _extract_reference_info again), and normalisation is not idempotent:
    // "er's." becomes "er's ." and then "er 's .".
    for (std::size_t r = 0; r < refs.size(); ++r)
      ref_tok_[r] = tokenize_tercom(tokenize_tercom(refs[r], opt_), opt_);
    interner_.clear();
    interner_.add(hyp_tok, hyp_ids_);
    int64_t best = INT64_MAX;
    int64_t ref_lengths = 0;
    for (std::size_t r = 0; r < refs.size(); ++r) {
      interner_.add(ref_tok_[r], ref_ids_);
      best = std::min(best, search_.edits(hyp_ids_, ref_ids_));
      ref_lengths += static_cast<int64_t>(ref_ids_.size());
    }
    return {best, ref_lengths};
  }

  void add(std::string_view hyp, const std::vector<std::string_view>& refs, Accumulator& acc) {
    const TerEdits e = segment(hyp, refs);
    acc.edits += e.edits;
    acc.ref_length += static_cast<double>(e.ref_len) / static_cast<double>(refs.size());
  }

 private:
  const TerOptions& opt_;
  Interner interner_;
  ShiftSearch search_;
  std::vector<std::string> ref_tok_;
  std::vector<int> hyp_ids_, ref_ids_;
};

TerScore finish(const Accumulator& acc, const TerOptions& opt, int nrefs) {
  TerScore s;
  s.options = opt;
  s.nrefs = nrefs;
  s.num_edits = acc.edits;
  s.ref_length = acc.ref_length;
  double rate;
  if (acc.ref_length > 0)
    rate = static_cast<double>(acc.edits) / acc.ref_length;
  else
    rate = acc.edits > 0 ? 1.0 : 0.0;  // empty references: a non-empty hypothesis is all wrong
  s.score = 100 * rate;
  return s;
}

}  // namespace

std::string tokenize_tercom(std::string_view line, const TerOptions& opt) {
  line = rstrip_whitespace(line);
  if (line.empty()) return {};
  std::string s = opt.case_sensitive ? std::string(line) : lowercase(line);
  if (opt.normalized) {
    normalize_general_and_western(s);
    if (opt.asian_support) map_code_points(s, [](char32_t c) { return is_asian_split(c) ? 2 : 0; });
  }
  if (opt.no_punct) {
    std::string t;
    t.reserve(s.size());
    for (char c : s)
      if (std::string_view(".,?:;!\"()").find(c) == std::string_view::npos) t += c;
    s = std::move(t);
    if (opt.asian_support)
      map_code_points(
          s, [](char32_t c) { return is_asian_punct(c) || is_full_width_punct(c) ? 1 : 0; });
  }
  std::string out;
  out.reserve(s.size());
  for (std::string_view w : split_whitespace(s)) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

TerEdits translation_edit_rate(const std::vector<std::string_view>& hyp_words,
                               const std::vector<std::string_view>& ref_words) {
  Interner interner;
  std::vector<int> hyp, ref;
  interner.add(hyp_words, hyp);
  interner.add(ref_words, ref);
  ShiftSearch search;
  return {search.edits(hyp, ref), static_cast<int64_t>(ref.size())};
}

namespace {

void check_corpus(const std::vector<std::string>& hyps,
                  const std::vector<std::vector<std::string>>& refs) {
  if (refs.empty()) throw InputError("no reference given: TER needs at least one");
  for (std::size_t r = 0; r < refs.size(); ++r) {
    if (refs[r].size() != hyps.size())
      throw InputError("line count mismatch: the hypotheses have " + std::to_string(hyps.size()) +
                       " lines but reference " + std::to_string(r + 1) + " has " +
                       std::to_string(refs[r].size()));
  }
}

}  // namespace

TerScore corpus_ter(const std::vector<std::string>& hyps,
                    const std::vector<std::vector<std::string>>& refs, const TerOptions& options) {
  check_corpus(hyps, refs);
  Accumulator acc;
  Scorer scorer(options);
  std::vector<std::string_view> seg_refs(refs.size());
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    for (std::size_t r = 0; r < refs.size(); ++r) seg_refs[r] = refs[r][i];
    scorer.add(hyps[i], seg_refs, acc);
  }
  return finish(acc, options, static_cast<int>(refs.size()));
}

SegmentStats ter_segment_stats(const std::vector<std::string>& hyps,
                               const std::vector<std::vector<std::string>>& refs,
                               const TerOptions& options) {
  check_corpus(hyps, refs);
  SegmentStats out;
  out.segments = hyps.size();
  out.width = 2;
  out.nrefs = static_cast<int>(refs.size());
  out.values.reserve(2 * out.segments);
  Scorer scorer(options);
  std::vector<std::string_view> seg_refs(refs.size());
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    for (std::size_t r = 0; r < refs.size(); ++r) seg_refs[r] = refs[r][i];
    const TerEdits e = scorer.segment(hyps[i], seg_refs);
    out.values.push_back(e.edits);
    out.values.push_back(e.ref_len);
  }
  return out;
}

double ter_from_stats(const int64_t* sums, int nrefs, StatsArithmetic arithmetic) {
  const int64_t edits = sums[0], lengths = sums[1];
  if (lengths <= 0) return edits > 0 ? 100.0 : 0.0;
  if (arithmetic == StatsArithmetic::kNumpyFloat32) {
    // float32 sums: float32 / float32 stays float32; 100 * it is a float64.
    const float ref_length = static_cast<float>(lengths) / static_cast<float>(nrefs);
    return 100 * static_cast<double>(static_cast<float>(edits) / ref_length);
  }
  // Python floats, and float64 for approximate randomisation (a bool mask @
  // a list with float columns is a float64 matmul).
  const double ref_length = static_cast<double>(lengths) / static_cast<double>(nrefs);
  return 100 * (static_cast<double>(edits) / ref_length);
}

TerScore ter_score_from_stats(const int64_t* sums, int nrefs, const TerOptions& options) {
  TerScore s;
  s.options = options;
  s.nrefs = nrefs;
  s.num_edits = sums[0];
  s.ref_length = static_cast<double>(sums[1]) / static_cast<double>(nrefs);
  s.score = ter_from_stats(sums, nrefs, StatsArithmetic::kPython);
  return s;
}

TerScore sentence_ter(const std::string& hyp, const std::vector<std::string>& refs,
                      const TerOptions& options) {
  if (refs.empty()) throw InputError("no reference given: TER needs at least one");
  Accumulator acc;
  Scorer scorer(options);
  scorer.add(hyp, std::vector<std::string_view>(refs.begin(), refs.end()), acc);
  return finish(acc, options, static_cast<int>(refs.size()));
}

std::string TerScore::text(int width) const { return "TER = " + format_fixed(score, width); }

std::string TerScore::line(int width) const {
  return "TER|" + signature() + " = " + format_fixed(score, width);
}

std::string TerScore::signature() const {
  return "nrefs:" + std::to_string(nrefs) + "|case:" + (options.case_sensitive ? "mixed" : "lc") +
         "|tok:tercom|norm:" + (options.normalized ? "yes" : "no") +
         "|punct:" + (options.no_punct ? "no" : "yes") +
         "|asian:" + (options.asian_support ? "yes" : "no") + "|version:" + kSacrebleuVersion;
}

nlohmann::ordered_json TerScore::to_json(int width) const {
  nlohmann::ordered_json j;
  const std::string sig = signature();
  j["name"] = "TER";
  j["score"] = std::stod(format_fixed(score, width));
  j["signature"] = sig;
  std::string_view rest = sig;
  while (!rest.empty()) {
    const std::size_t bar = rest.find('|');
    const std::string_view field = rest.substr(0, bar);
    const std::size_t colon = field.find(':');
    j[std::string(field.substr(0, colon))] = std::string(field.substr(colon + 1));
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return j;
}

}  // namespace nmt::metrics
