#include "train/data.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string_view>

#include "core/error.h"
#include "core/rng.h"
#include "core/token_batches.h"
#include "io/text_file.h"
#include "model/vocab.h"

namespace nmt {

namespace {

// Sentences are sorted by length within chunks of this many, so batches are
// tight without every epoch seeing the same batches.
constexpr int64_t kSortChunk = 1 << 16;

// Fisher-Yates with our own index draw, so the order is the same with any
// standard library.
template <typename T>
void shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i)
    std::swap(v[i], v[rng() % static_cast<uint64_t>(i + 1)]);
}

}  // namespace

void read_parallel(const std::string& src_path, const std::string& tgt_path,
                   std::vector<std::string>& src, std::vector<std::string>& tgt,
                   const io::TextChecks& checks) {
  src = io::read_lines(src_path, checks);
  tgt = io::read_lines(tgt_path, checks);
  if (src.empty())
    throw InputError(src_path + ": the file is empty (expected one sentence per line)");
  if (tgt.empty())
    throw InputError(tgt_path + ": the file is empty (expected one sentence per line)");
  if (src.size() != tgt.size())
    throw InputError("parallel files differ in length: " + src_path + " has " +
                     std::to_string(src.size()) + " lines but " + tgt_path + " has " +
                     std::to_string(tgt.size()));
  // Without a warning callback the reader leaves lines as they are; the
  // tokeniser still needs well-formed text.
  if (!checks.warn)
    for (auto* side : {&src, &tgt})
      for (std::string& line : *side)
        if (!io::is_valid_utf8(line)) line = io::sanitize_utf8(line);
}

bool has_usable_text(const std::string& line) {
  const auto* p = reinterpret_cast<const uint8_t*>(line.data());
  const int32_t n = static_cast<int32_t>(std::min<size_t>(line.size(), INT32_MAX));
  for (int32_t i = 0; i < n;) {
    if (p[i] < 0x80) {  // ASCII, most text: printable and not a space
      if (p[i] > 0x20 && p[i] < 0x7f) return true;
      ++i;
      continue;
    }
    UChar32 c;
    U8_NEXT(p, i, n, c);
    if (c < 0) return true;  // ill-formed: replaced by U+FFFD, which is kept
    const int8_t type = u_charType(c);
    if (!u_isUWhiteSpace(c) && type != U_CONTROL_CHAR && type != U_FORMAT_CHAR) return true;
  }
  return false;
}

uint64_t lines_digest(const std::vector<std::string>& lines) {
  // Blocks of lines hashed in parallel, then chained in order; each line
  // eight bytes at a time through splitmix64, after its length.
  constexpr int64_t kBlock = 4096;
  const int64_t n = static_cast<int64_t>(lines.size());
  std::vector<uint64_t> block((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t b = 0; b < static_cast<int64_t>(block.size()); ++b) {
    uint64_t h = static_cast<uint64_t>(b);
    for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
      const std::string& line = lines[static_cast<size_t>(i)];
      h = mix_seed(h, line.size());
      size_t k = 0;
      for (uint64_t w; k + 8 <= line.size(); k += 8) {
        std::memcpy(&w, line.data() + k, 8);
        h = mix_seed(h, w);
      }
      uint64_t tail = 0;
      std::memcpy(&tail, line.data() + k, line.size() - k);
      h = mix_seed(h, tail);
    }
    block[static_cast<size_t>(b)] = h;
  }
  uint64_t h = mix_seed(static_cast<uint64_t>(n), 0x6c696e6573ull);
  for (uint64_t x : block) h = mix_seed(h, x);
  return h;
}

int64_t clear_unusable_pairs(std::vector<std::string>& src, std::vector<std::string>& tgt) {
  const int64_t n = static_cast<int64_t>(std::min(src.size(), tgt.size()));
  int64_t left = 0;
#pragma omp parallel for reduction(+ : left) schedule(dynamic, 1024)
  for (int64_t i = 0; i < n; ++i) {
    if (has_usable_text(src[i]) && has_usable_text(tgt[i])) {
      ++left;
    } else {
      src[i].clear();
      tgt[i].clear();
    }
  }
  return left;
}

TokenCoverage token_coverage(const std::vector<std::vector<int32_t>>& ids, int32_t unk_id) {
  TokenCoverage c;
  for (const auto& line : ids) {
    c.tokens += static_cast<int64_t>(line.size());
    if (unk_id >= 0) c.unknown += std::count(line.begin(), line.end(), unk_id);
  }
  return c;
}

std::string check_known_tokens(const TokenCoverage& c, const std::string& side,
                               const std::string& file) {
  if (c.tokens == 0 || c.unknown == 0) return "";
  if (c.unknown == c.tokens)
    throw InputError("no " + side + " token of " + file + " is in the model's vocabulary (all " +
                     std::to_string(c.tokens) +
                     " are <unk>): is it tokenised as the model expects?");
  const double share = static_cast<double>(c.unknown) / static_cast<double>(c.tokens);
  if (share <= kWarnUnknownShare) return "";
  char pct[16];
  std::snprintf(pct, sizeof pct, "%.0f%%", 100 * share);
  return std::string(pct) + " of the " + side + " tokens of " + file + " (" +
         std::to_string(c.unknown) + " of " + std::to_string(c.tokens) +
         ") are not in the model's vocabulary (<unk>): is it tokenised as the model expects?";
}

int64_t ParallelCorpus::tgt_tokens() const {
  int64_t n = 0;
  for (const auto& t : tgt) n += static_cast<int64_t>(t.size()) + 1;
  return n;
}

ParallelCorpus make_corpus(std::vector<std::vector<int32_t>> src,
                           std::vector<std::vector<int32_t>> tgt, int64_t max_len) {
  if (src.size() != tgt.size()) throw Error("make_corpus: source and target counts differ");
  ParallelCorpus c;
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i].empty() || tgt[i].empty()) {
      ++c.skipped_empty;
      continue;
    }
    if (static_cast<int64_t>(src[i].size()) > max_len ||
        static_cast<int64_t>(tgt[i].size()) > max_len) {
      ++c.skipped_long;
      continue;
    }
    c.src.push_back(std::move(src[i]));
    c.tgt.push_back(std::move(tgt[i]));
    c.line.push_back(static_cast<int64_t>(i));
  }
  return c;
}

ParallelCorpus encode_corpus(const Vocab& vocab, const std::vector<std::string>& src,
                             const std::vector<std::string>& tgt, int64_t max_len) {
  const int64_t n = static_cast<int64_t>(src.size());
  std::vector<std::vector<int32_t>> s(n), t(n);
  // SentencePieceProcessor::Encode is const and thread-safe.
#pragma omp parallel for schedule(dynamic, 256)
  for (int64_t i = 0; i < n; ++i) {
    s[i] = vocab.encode(src[i]);
    t[i] = vocab.encode(tgt[i]);
  }
  return make_corpus(std::move(s), std::move(t), max_len);
}

ParallelCorpus encode_corpus_releasing(const Vocab& vocab, std::vector<std::string>& src,
                                       std::vector<std::string>& tgt, int64_t max_len) {
  const int64_t n = static_cast<int64_t>(src.size());
  std::vector<std::vector<int32_t>> s(n), t(n);
#pragma omp parallel for schedule(dynamic, 256)
  for (int64_t i = 0; i < n; ++i) {
    s[i] = vocab.encode(src[i]);
    std::string().swap(src[i]);
    t[i] = vocab.encode(tgt[i]);
    std::string().swap(tgt[i]);
  }
  std::vector<std::string>().swap(src);
  std::vector<std::string>().swap(tgt);
  return make_corpus(std::move(s), std::move(t), max_len);
}

int64_t drop_duplicate_pairs(std::vector<std::string>& src, std::vector<std::string>& tgt,
                             std::vector<int64_t>& line) {
  const size_t n = std::min(src.size(), tgt.size());
  std::vector<std::pair<uint64_t, int64_t>> keys;  // (hash of the pair, index)
  keys.reserve(n);
  const std::hash<std::string_view> h;
  for (size_t i = 0; i < n; ++i) {
    if (src[i].empty() || tgt[i].empty()) continue;
    const uint64_t a = h(src[i]), b = h(tgt[i]);
    keys.emplace_back(a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2)),
                      static_cast<int64_t>(i));
  }
  std::sort(keys.begin(), keys.end());
  std::vector<uint8_t> drop(n, 0);
  int64_t dropped = 0;
  for (size_t k = 0; k < keys.size();) {
    size_t e = k + 1;
    while (e < keys.size() && keys[e].first == keys[k].first) ++e;
    // The same hash: compare the text, so only exact copies go (a hash
    // collision keeps both). Indices are sorted: the first copy stays.
    for (size_t x = k + 1; x < e; ++x)
      for (size_t y = k; y < x; ++y) {
        const int64_t i = keys[y].second, j = keys[x].second;
        if (!drop[i] && src[i] == src[j] && tgt[i] == tgt[j]) {
          drop[j] = 1;
          ++dropped;
          break;
        }
      }
    k = e;
  }
  if (dropped == 0) return 0;
  size_t w = 0;
  for (size_t i = 0; i < n; ++i) {
    if (drop[i]) continue;
    if (w != i) {
      src[w] = std::move(src[i]);
      tgt[w] = std::move(tgt[i]);
      if (i < line.size()) line[w] = line[i];
    }
    ++w;
  }
  src.resize(w);
  tgt.resize(w);
  if (line.size() >= n) line.resize(w);
  return dropped;
}

RatioFilter filter_length_ratio(ParallelCorpus& c, double factor, int64_t min_longer) {
  RatioFilter f;
  f.factor = factor;
  f.min_longer = min_longer;
  const int64_t n = c.size();
  if (n == 0) return f;
  auto ratio = [&](int64_t i) { return double(c.tgt[i].size() + 1) / double(c.src[i].size() + 1); };
  std::vector<double> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[i] = ratio(i);
  std::nth_element(r.begin(), r.begin() + n / 2, r.end());
  f.median = r[n / 2];
  f.lo = f.median / factor;
  f.hi = f.median * factor;
  int64_t w = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double q = ratio(i);
    const int64_t longer = static_cast<int64_t>(std::max(c.src[i].size(), c.tgt[i].size())) + 1;
    if (longer >= min_longer && (q < f.lo || q > f.hi)) {
      ++f.dropped;
      continue;
    }
    if (w != i) {
      c.src[w] = std::move(c.src[i]);
      c.tgt[w] = std::move(c.tgt[i]);
      c.line[w] = c.line[i];
    }
    ++w;
  }
  c.src.resize(w);
  c.tgt.resize(w);
  c.line.resize(w);
  return f;
}

namespace {

int64_t pair_width(const ParallelCorpus& c, int64_t i) {
  return static_cast<int64_t>(std::max(c.src[i].size(), c.tgt[i].size())) + 1;
}

// Cuts an ordered list of sentences into batches of at most batch_tokens
// padded tokens (core/token_batches.h).
std::vector<std::vector<int64_t>> cut(const ParallelCorpus& c, const std::vector<int64_t>& order,
                                      int64_t batch_tokens) {
  std::vector<std::vector<int64_t>> out;
  size_t begin = 0;
  for (size_t end : token_batch_ends(order.size(), batch_tokens,
                                     [&](size_t k) { return pair_width(c, order[k]); })) {
    out.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(begin),
                     order.begin() + static_cast<std::ptrdiff_t>(end));
    begin = end;
  }
  return out;
}

}  // namespace

std::vector<std::vector<int64_t>> make_batches(const ParallelCorpus& corpus, int64_t batch_tokens,
                                               uint64_t seed, int64_t epoch) {
  std::mt19937_64 rng(mix_seed(seed, 0x5eed0000ull + static_cast<uint64_t>(epoch)));
  std::vector<int64_t> order(corpus.size());
  std::iota(order.begin(), order.end(), 0);
  shuffle(order, rng);
  for (size_t begin = 0; begin < order.size(); begin += kSortChunk) {
    const auto first = order.begin() + begin;
    const auto last = order.begin() + std::min(order.size(), begin + kSortChunk);
    std::stable_sort(first, last, [&](int64_t a, int64_t b) {
      const int64_t wa = pair_width(corpus, a), wb = pair_width(corpus, b);
      if (wa != wb) return wa < wb;
      return corpus.src[a].size() < corpus.src[b].size();
    });
  }
  auto batches = cut(corpus, order, batch_tokens);
  shuffle(batches, rng);
  return batches;
}

std::vector<std::vector<int64_t>> sequential_batches(const ParallelCorpus& corpus,
                                                     int64_t batch_tokens) {
  std::vector<int64_t> order(corpus.size());
  std::iota(order.begin(), order.end(), 0);
  // Length-sorted for tight batches; the result does not depend on order.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return pair_width(corpus, a) < pair_width(corpus, b);
  });
  return cut(corpus, order, batch_tokens);
}

TokenBatch gather_batch(const ParallelCorpus& corpus, const std::vector<int64_t>& indices,
                        const ModelConfig& cfg) {
  std::vector<const std::vector<int32_t>*> s, t;
  s.reserve(indices.size());
  t.reserve(indices.size());
  for (int64_t i : indices) {
    s.push_back(&corpus.src[i]);
    t.push_back(&corpus.tgt[i]);
  }
  return make_batch(s, t, cfg);
}

BatchStream::BatchStream(const ParallelCorpus& corpus, int64_t batch_tokens, uint64_t seed)
    : corpus_(corpus), batch_tokens_(batch_tokens), seed_(seed) {
  if (corpus.size() == 0) throw InputError("no training sentence pairs left after filtering");
}

void BatchStream::build() {
  if (built_for_ == epoch_) return;
  batches_ = make_batches(corpus_, batch_tokens_, seed_, epoch_);
  built_for_ = epoch_;
}

int64_t BatchStream::batches_per_epoch() {
  build();
  return static_cast<int64_t>(batches_.size());
}

const std::vector<int64_t>& BatchStream::next() {
  build();
  const std::vector<int64_t>& b = batches_[index_];
  if (++index_ == static_cast<int64_t>(batches_.size())) {
    // The reference stays valid: the next epoch's batches are built lazily,
    // on the following call.
    ++epoch_;
    index_ = 0;
  }
  return b;
}

void BatchStream::seek(int64_t epoch, int64_t index) {
  epoch_ = epoch;
  index_ = 0;
  if (index < 0 || index >= batches_per_epoch())
    throw InputError("checkpoint data position (epoch " + std::to_string(epoch) + ", batch " +
                     std::to_string(index) + ") does not fit the training data");
  index_ = index;
}

}  // namespace nmt
