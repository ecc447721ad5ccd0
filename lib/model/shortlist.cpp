#include "model/shortlist.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "io/json.h"

namespace nmt {

namespace {

// The distinct ids of a sequence that lie in [0, V), through a stamp array
// (stamp[id] == mark: already taken).
void distinct(const std::vector<int32_t>& seq, int32_t V, std::vector<int64_t>& stamp, int64_t mark,
              std::vector<int32_t>& out) {
  out.clear();
  for (int32_t id : seq)
    if (id >= 0 && id < V && stamp[id] != mark) stamp[id] = mark, out.push_back(id);
}

// What Shortlist::build counts in the corpus.
struct PairCounts {
  std::vector<int64_t> cs, ct;    // pairs holding each source and target piece: c(s), c(t)
  std::vector<int64_t> tokens;    // each target piece's tokens (ranks the frequent pieces)
  std::vector<int64_t> tgt_off;   // each pair's distinct target pieces (CSR) ...
  std::vector<int32_t> tgt_types;  // ... in these
};

using Corpus = std::vector<const std::vector<int32_t>*>;

// Stop checks every 4096 pairs, and for every source piece below: each
// costs a relaxed load.
PairCounts count_pairs(const Corpus& src, const Corpus& tgt, int32_t src_vocab, int32_t tgt_vocab,
                       const StopFlag* stop) {
  const int64_t n = static_cast<int64_t>(src.size());
  PairCounts c;
  c.cs.assign(src_vocab, 0), c.ct.assign(tgt_vocab, 0), c.tokens.assign(tgt_vocab, 0);
  c.tgt_off.assign(n + 1, 0);
  std::vector<int64_t> stamp_s(src_vocab, -1), stamp_t(tgt_vocab, -1);
  std::vector<int32_t> types;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 4096 == 0) throw_if_stopped(stop);
    distinct(*src[i], src_vocab, stamp_s, i, types);
    for (int32_t s : types) ++c.cs[s];
    distinct(*tgt[i], tgt_vocab, stamp_t, i, types);
    for (int32_t t : types) ++c.ct[t];
    c.tgt_types.insert(c.tgt_types.end(), types.begin(), types.end());
    c.tgt_off[i + 1] = static_cast<int64_t>(c.tgt_types.size());
    for (int32_t t : *tgt[i])
      if (t >= 0 && t < tgt_vocab) ++c.tokens[t];
  }
  return c;
}

// Per source piece, the per_source target pieces (not frequent) with the
// largest c(s, t): the largest p(t | s); ties go to the rarer piece (the
// more specific), then the lower id.
std::vector<std::vector<int32_t>> likeliest_targets(const PairCounts& c, const Corpus& src,
                                                    int32_t src_vocab, int32_t tgt_vocab,
                                                    const std::vector<uint8_t>& is_frequent,
                                                    int64_t per_source, const StopFlag* stop) {
  // The pairs that hold each source piece (CSR).
  const int64_t n = static_cast<int64_t>(src.size());
  std::vector<int64_t> sent_off(src_vocab + 1, 0);
  for (int32_t s = 0; s < src_vocab; ++s) sent_off[s + 1] = sent_off[s] + c.cs[s];
  std::vector<int64_t> sents(sent_off.back()), fill(sent_off.begin(), sent_off.end() - 1);
  std::vector<int64_t> stamp_s(src_vocab, -1);
  std::vector<int32_t> types;
  for (int64_t i = 0; i < n; ++i) {
    distinct(*src[i], src_vocab, stamp_s, i, types);
    for (int32_t s : types) sents[fill[s]++] = i;
  }
  std::vector<std::vector<int32_t>> cand(src_vocab);
  std::vector<int64_t> count(tgt_vocab, 0);
  std::vector<int32_t> touched;
  for (int32_t s = 0; s < src_vocab; ++s) {
    throw_if_stopped(stop);
    touched.clear();
    for (int64_t j = sent_off[s]; j < sent_off[s + 1]; ++j) {
      const int64_t i = sents[j];
      for (int64_t k = c.tgt_off[i]; k < c.tgt_off[i + 1]; ++k) {
        const int32_t t = c.tgt_types[k];
        if (!is_frequent[t] && count[t]++ == 0) touched.push_back(t);
      }
    }
    const auto better = [&](int32_t a, int32_t b) {
      if (count[a] != count[b]) return count[a] > count[b];
      if (c.ct[a] != c.ct[b]) return c.ct[a] < c.ct[b];
      return a < b;
    };
    const size_t keep = std::min<size_t>(touched.size(), static_cast<size_t>(per_source));
    std::partial_sort(touched.begin(), touched.begin() + static_cast<std::ptrdiff_t>(keep),
                      touched.end(), better);
    cand[s].assign(touched.begin(), touched.begin() + static_cast<std::ptrdiff_t>(keep));
    for (int32_t t : touched) count[t] = 0;
  }
  return cand;
}

// Coverage: every target piece of every pair reachable from its source
// (added to the pair's rarest source piece where no candidate list has it).
void cover_every_pair(const PairCounts& c, const Corpus& src, int32_t src_vocab, int32_t tgt_vocab,
                      const std::vector<uint8_t>& is_frequent,
                      std::vector<std::vector<int32_t>>& cand, const StopFlag* stop) {
  std::vector<int64_t> stamp_s(src_vocab, -1), stamp_t(tgt_vocab, -1);
  std::vector<int32_t> types;
  for (int64_t i = 0; i < static_cast<int64_t>(src.size()); ++i) {
    if (i % 4096 == 0) throw_if_stopped(stop);
    distinct(*src[i], src_vocab, stamp_s, i, types);
    if (types.empty()) continue;  // nothing to hang a piece on
    int32_t rarest = types[0];
    for (int32_t s : types) {
      if (c.cs[s] < c.cs[rarest] || (c.cs[s] == c.cs[rarest] && s < rarest)) rarest = s;
      for (int32_t t : cand[s]) stamp_t[t] = i;
    }
    for (int64_t k = c.tgt_off[i]; k < c.tgt_off[i + 1]; ++k) {
      const int32_t t = c.tgt_types[k];
      if (is_frequent[t] || stamp_t[t] == i) continue;
      cand[rarest].push_back(t);
      stamp_t[t] = i;
    }
  }
}

constexpr uint32_t kMagic = 0x4c53544e;  // "NTSL"
constexpr uint32_t kVersion = 1;

void put(std::string& out, int64_t v) {
  const auto u = static_cast<uint32_t>(v);
  for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((u >> (8 * b)) & 0xff));
}

}  // namespace

std::vector<int32_t> Shortlist::frequent() const {
  return {by_frequency_.begin(), by_frequency_.begin() + n_frequent_};
}

Shortlist Shortlist::build(const std::vector<const std::vector<int32_t>*>& src,
                           const std::vector<const std::vector<int32_t>*>& tgt, int32_t src_vocab,
                           int32_t tgt_vocab, const ShortlistOptions& opts, const StopFlag* stop) {
  if (src.size() != tgt.size()) throw Error("shortlist: sources and targets differ in number");
  if (src_vocab <= 0 || tgt_vocab <= 0) throw Error("shortlist: an empty vocabulary");
  if (opts.per_source < 0 || (opts.frequent < 0 && opts.frequent != ShortlistOptions::kEighth))
    throw InputError("shortlist: the candidate counts must not be negative");
  Shortlist sl;
  sl.src_vocab_ = src_vocab, sl.tgt_vocab_ = tgt_vocab, sl.opts_ = opts;
  if (opts.frequent == ShortlistOptions::kEighth) sl.opts_.frequent = tgt_vocab / 8;
  const PairCounts c = count_pairs(src, tgt, src_vocab, tgt_vocab, stop);
  sl.by_frequency_.resize(tgt_vocab);
  std::iota(sl.by_frequency_.begin(), sl.by_frequency_.end(), 0);
  std::stable_sort(sl.by_frequency_.begin(), sl.by_frequency_.end(),
                   [&](int32_t a, int32_t b) { return c.tokens[a] > c.tokens[b]; });
  while (sl.n_frequent_ < std::min<int64_t>(sl.opts_.frequent, tgt_vocab) &&
         c.tokens[sl.by_frequency_[sl.n_frequent_]] > 0)
    ++sl.n_frequent_;
  std::vector<uint8_t> is_frequent(tgt_vocab, 0);
  for (int64_t i = 0; i < sl.n_frequent_; ++i) is_frequent[sl.by_frequency_[i]] = 1;
  auto cand = likeliest_targets(c, src, src_vocab, tgt_vocab, is_frequent, opts.per_source, stop);
  cover_every_pair(c, src, src_vocab, tgt_vocab, is_frequent, cand, stop);
  sl.offsets_.assign(src_vocab + 1, 0);
  for (int32_t s = 0; s < src_vocab; ++s) {
    std::sort(cand[s].begin(), cand[s].end());
    sl.targets_.insert(sl.targets_.end(), cand[s].begin(), cand[s].end());
    sl.offsets_[s + 1] = static_cast<int64_t>(sl.targets_.size());
  }
  return sl;
}

bool Shortlist::allows_other_than(const std::vector<int32_t>& special) const {
  const auto other = [&](int32_t t) {
    return std::find(special.begin(), special.end(), t) == special.end();
  };
  return std::any_of(by_frequency_.begin(), by_frequency_.begin() + n_frequent_, other) ||
         std::any_of(targets_.begin(), targets_.end(), other);
}

int64_t Shortlist::round_width(int64_t n) {
  for (int64_t w = 64;; w *= 2) {
    if (n <= w) return w;
    if (n <= w + w / 2) return w + w / 2;
  }
}

void Shortlist::batch_vocab(const std::vector<const std::vector<int32_t>*>& sources,
                            const std::vector<int32_t>& extra, int64_t min_size,
                            std::vector<int32_t>& out, std::vector<uint8_t>& mark) const {
  out.clear();
  if (empty()) return;
  mark.resize(static_cast<size_t>(tgt_vocab_), 0);
  const auto add = [&](int32_t t) {
    if (t >= 0 && t < tgt_vocab_ && !mark[t]) mark[t] = 1, out.push_back(t);
  };
  for (int64_t i = 0; i < n_frequent_; ++i) add(by_frequency_[i]);
  for (const auto* src : sources)
    for (int32_t s : *src)
      if (s >= 0 && s < src_vocab_)
        for (const int32_t* t = begin(s); t != end(s); ++t) add(*t);
  for (int32_t t : extra) add(t);
  const int64_t want = round_width(std::max<int64_t>(min_size, static_cast<int64_t>(out.size())));
  if (static_cast<double>(want) > kFullShare * tgt_vocab_) {
    for (int32_t t : out) mark[t] = 0;
    out.clear();
    return;
  }
  for (int32_t i = static_cast<int32_t>(n_frequent_);
       static_cast<int64_t>(out.size()) < want && i < tgt_vocab_; ++i)
    add(by_frequency_[i]);
  for (int32_t t : out) mark[t] = 0;
  std::sort(out.begin(), out.end());
}

std::string Shortlist::serialise() const {
  std::string out;
  for (int64_t v : {int64_t{kMagic}, int64_t{kVersion}, int64_t{src_vocab_}, int64_t{tgt_vocab_},
                    int64_t{opts_.per_source}, int64_t{opts_.frequent}, n_frequent_,
                    static_cast<int64_t>(targets_.size())})
    put(out, v);
  for (int64_t o : offsets_) put(out, o);
  for (int32_t t : targets_) put(out, t);
  for (int32_t t : by_frequency_) put(out, t);
  return out;
}

Shortlist Shortlist::parse(const std::string& bytes, int32_t src_vocab, int32_t tgt_vocab,
                           const std::string& what) {
  const auto bad = [&](const std::string& why) {
    return InputError(what + ": the shortlist is malformed (" + why + ")");
  };
  size_t at = 0;
  const auto get = [&]() -> int64_t {
    if (bytes.size() - at < 4) throw bad("it ends early");
    uint32_t u = 0;
    for (int b = 0; b < 4; ++b) u |= uint32_t(static_cast<unsigned char>(bytes[at + b])) << (8 * b);
    at += 4;
    return static_cast<int32_t>(u);
  };
  if (static_cast<uint32_t>(get()) != kMagic) throw bad("not a shortlist");
  if (const int64_t v = get(); v != kVersion)
    throw bad("version " + std::to_string(v) + "; this nmt reads version " +
              std::to_string(kVersion));
  Shortlist sl;
  const int64_t sv = get(), tv = get();
  if (sv != src_vocab || tv != tgt_vocab)
    throw InputError(what + ": the shortlist is for vocabularies of " + std::to_string(sv) +
                     " and " + std::to_string(tv) + " pieces, the model's are " +
                     std::to_string(src_vocab) + " and " + std::to_string(tgt_vocab));
  sl.src_vocab_ = src_vocab, sl.tgt_vocab_ = tgt_vocab;
  sl.opts_.per_source = static_cast<int>(get());
  sl.opts_.frequent = static_cast<int>(get());
  sl.n_frequent_ = get();
  const int64_t entries = get();
  if (sl.opts_.per_source < 0 || sl.opts_.frequent < 0 || sl.n_frequent_ < 0 ||
      sl.n_frequent_ > tgt_vocab || entries < 0)
    throw bad("negative or oversized counts");
  const uint64_t need = 4ull * (8 + (src_vocab + 1ull) + entries + tgt_vocab);
  if (bytes.size() != need)
    throw bad(std::to_string(bytes.size()) + " bytes where its counts need " + std::to_string(need));
  sl.offsets_.resize(src_vocab + 1);
  for (auto& o : sl.offsets_) o = get();
  if (sl.offsets_[0] != 0 || sl.offsets_.back() != entries) throw bad("offsets out of range");
  sl.targets_.resize(static_cast<size_t>(entries));
  for (auto& t : sl.targets_) {
    t = static_cast<int32_t>(get());
    if (t < 0 || t >= tgt_vocab) throw bad("a target id out of range");
  }
  for (int32_t s = 0; s < src_vocab; ++s)  // so each lies in [0, entries]
    if (sl.offsets_[s + 1] < sl.offsets_[s]) throw bad("offsets out of order");
  for (int32_t s = 0; s < src_vocab; ++s) {
    for (int64_t k = sl.offsets_[s] + 1; k < sl.offsets_[s + 1]; ++k)
      if (sl.targets_[k] <= sl.targets_[k - 1]) throw bad("a candidate list out of order");
  }
  sl.by_frequency_.resize(tgt_vocab);
  std::vector<uint8_t> seen(tgt_vocab, 0);
  for (auto& t : sl.by_frequency_) {
    t = static_cast<int32_t>(get());
    if (t < 0 || t >= tgt_vocab || seen[t]++) throw bad("the frequency order is not a permutation");
  }
  return sl;
}

bool shortlist_on_by_default(const std::map<std::string, std::string>& metadata) {
  const auto it = metadata.find("shortlist");
  if (it == metadata.end()) return false;
  try {
    const auto j = io::parse_json(it->second, "the shortlist metadata");
    return j.is_object() && j.value("default", false);
  } catch (const std::exception&) {
    return false;  // unreadable: the shortlist is only used when asked for
  }
}

}  // namespace nmt
