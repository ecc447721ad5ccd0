// Vocabulary shortlists: the target pieces a batch's translations may use,
// so that each decoding step projects onto and normalises over those alone
// instead of the whole vocabulary (the largest product of a step).
//
// nmt makes its own from parallel text, where Marian needs fast_align's
// lexical table and CTranslate2 a vocabulary map made elsewhere. For each
// source piece s the table keeps the target pieces t that most often
// translate it, ranked by p(t | s) = c(s, t) / c(s) over the sentence pairs
// that contain them, beside the most frequent target pieces, which every
// batch gets. Then every target piece of every pair it was built from is
// made reachable: one that no piece of its source lists is added to the
// list of that source's rarest piece (the list that the fewest other
// batches read). A batch may use the union of its sources' lists, the
// frequent pieces and whatever its requests force (</s>, prefixes,
// constraints).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/stop.h"

namespace nmt {

// The defaults were chosen on Multi30k En-De (transformer-small, 8000
// target pieces, beam 4, `nmt shortlist` on val; BLEU cost, and seconds
// for val against 3.2-3.7 s without a shortlist): 50 per source piece and
// 100 frequent cost 0.25 (2.8 s), 20/500 0.29 (2.6 s), 20/1000 0.14
// (2.9 s), 10/1000 0.09 (2.6 s); on test_2016_flickr 10/1000 costs 0.04.
// What the model writes is mostly common pieces, which the frequent ones
// give every sentence, while a batch's union of per-source lists, which
// sets the width of its output product, grows with the lists' length.
// 1000 of 8000 is an eighth: the share is the default for any vocabulary.
struct ShortlistOptions {
  int per_source = 10;  // target pieces ranked per source piece (before the coverage pass)
  // Most frequent target pieces, in every batch; kEighth: an eighth of the
  // target vocabulary.
  static constexpr int kEighth = -1;
  int frequent = kEighth;
};

class Shortlist {
 public:
  Shortlist() = default;
  // From parallel id sequences, without framing (ids in [0, src_vocab) and
  // [0, tgt_vocab); others are ignored). A large corpus takes a while:
  // once *stop is non-zero it throws Stopped.
  static Shortlist build(const std::vector<const std::vector<int32_t>*>& src,
                         const std::vector<const std::vector<int32_t>*>& tgt, int32_t src_vocab,
                         int32_t tgt_vocab, const ShortlistOptions& opts = {},
                         const StopFlag* stop = nullptr);

  bool empty() const { return tgt_vocab_ == 0; }
  int32_t src_vocab() const { return src_vocab_; }
  int32_t tgt_vocab() const { return tgt_vocab_; }
  const ShortlistOptions& options() const { return opts_; }
  // The candidates of one source piece (ascending ids), and the pieces every
  // batch gets. options().frequent is the number a built or parsed table
  // holds (never kEighth).
  const int32_t* begin(int32_t s) const { return targets_.data() + offsets_[s]; }
  const int32_t* end(int32_t s) const { return targets_.data() + offsets_[s + 1]; }
  std::vector<int32_t> frequent() const;
  // Calls fn(t) for every piece that a source allows: the frequent pieces
  // and its pieces' candidates (some more than once).
  template <typename Fn>
  void for_each_allowed(const std::vector<int32_t>& src, Fn&& fn) const {
    for (int64_t i = 0; i < n_frequent_; ++i) fn(by_frequency_[i]);
    for (int32_t s : src)
      if (s >= 0 && s < src_vocab_)
        for (const int32_t* t = begin(s); t != end(s); ++t) fn(*t);
  }
  // Candidates over all source pieces (the frequent ones not counted).
  int64_t entries() const { return static_cast<int64_t>(targets_.size()); }
  // Whether it lets any piece through but these (the special ones): a table
  // built from text the vocabulary does not know lets through <unk> alone,
  // and a search restricted to it writes garbage.
  bool allows_other_than(const std::vector<int32_t>& special) const;

  // The target ids a batch may output, ascending, into out: its sources'
  // candidates, the frequent pieces and `extra`; then the next most frequent
  // pieces up to at least min_size and a width of round_width() (so that
  // the products see a few widths, each a primitive per row count). out is
  // left empty (meaning the whole vocabulary) when that would cover more
  // than kFullShare of it. mark is scratch of the caller's (one per thread).
  static constexpr double kFullShare = 0.6;
  // The smallest of 64, 96, 128, 192, 256, 384, ... (2^k and 1.5 * 2^k)
  // that holds n: two widths an octave, at most a third more columns.
  static int64_t round_width(int64_t n);
  void batch_vocab(const std::vector<const std::vector<int32_t>*>& sources,
                   const std::vector<int32_t>& extra, int64_t min_size, std::vector<int32_t>& out,
                   std::vector<uint8_t>& mark) const;

  // The table as the model file's "shortlist" byte tensor (little-endian
  // int32s), and back; parse() throws InputError naming `what` for anything
  // malformed or for vocabulary sizes other than the model's.
  std::string serialise() const;
  static Shortlist parse(const std::string& bytes, int32_t src_vocab, int32_t tgt_vocab,
                         const std::string& what);

 private:
  int32_t src_vocab_ = 0, tgt_vocab_ = 0;
  ShortlistOptions opts_;
  std::vector<int64_t> offsets_;      // (src_vocab + 1) into targets_
  std::vector<int32_t> targets_;      // each source piece's candidates, ascending
  std::vector<int32_t> by_frequency_;  // every target id, most frequent first
  int64_t n_frequent_ = 0;            // the first of them that every batch gets
};

// The model file's byte tensor that holds a shortlist.
inline constexpr const char* kShortlistTensor = "shortlist";

// Whether a model file's "shortlist" metadata (decode/shortlist_cost.h
// writes it) says that translation uses the shortlist when not told.
bool shortlist_on_by_default(const std::map<std::string, std::string>& metadata);

}  // namespace nmt
