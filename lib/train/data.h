// Training data: parallel text read and checked up front, encoded to subword
// ids, and cut into batches of similar-length sentence pairs.
//
// Batching is a pure function of (corpus, batch_tokens, seed, epoch): the
// sentence order is shuffled, sorted by length inside large chunks, cut into
// batches of at most batch_tokens padded tokens (max of source and target
// side, each counting its </s> or <s>), and the batch order is shuffled
// again. A data position is then just (epoch, batch index), which is what a
// checkpoint stores to resume exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/text_file.h"
#include "model/transformer.h"

namespace nmt {

class Vocab;

// Reads both sides (plain or gzip) through the checks every text input gets
// (io::TextChecks: ill-formed UTF-8 replaced and warned about by file and
// line; lines cut while read past max_line_bytes, so a line of 100 MB costs
// what the model can use of it). Throws InputError naming the file when one
// is missing or empty or when the line counts differ.
void read_parallel(const std::string& src_path, const std::string& tgt_path,
                   std::vector<std::string>& src, std::vector<std::string>& tgt,
                   const io::TextChecks& checks = {});

// Whether a line holds a character that SentencePiece keeps: anything but
// Unicode white space, control (Cc) and format (Cf) characters (zero-width
// spaces, BOMs). A line without one encodes to nothing.
bool has_usable_text(const std::string& line);

// A 64-bit digest of text as read (its lines, their order and their ends),
// which a checkpoint records of every data file so that a resumed run can
// tell whether the data changed since. Over the lines already in memory, in
// parallel: no second read of the file.
uint64_t lines_digest(const std::vector<std::string>& lines);
// Empties both sides of every pair where a side has no usable text, so the
// pair is counted and skipped "with an empty side" before SentencePiece
// sees it (it aborts the process on text with no usable character). Returns
// the number of pairs left with text on both sides.
int64_t clear_unusable_pairs(std::vector<std::string>& src, std::vector<std::string>& tgt);

// How much of an encoded text a vocabulary knows: its tokens, and how many
// of them are unk_id (none where unk_id < 0).
struct TokenCoverage {
  int64_t tokens = 0, unknown = 0;
};
TokenCoverage token_coverage(const std::vector<std::vector<int32_t>>& ids, int32_t unk_id);
// Text that is not tokenised as the vocabulary expects (raw words for a
// model that reads pieces, or the other way) encodes mostly to unk_id, and
// what is built from it (a shortlist, a measurement) means nothing. Throws
// InputError when there are tokens and the vocabulary knows none of them
// ("no source token of FILE is in the model's vocabulary: ..."); returns a
// warning naming the share when more than kWarnUnknownShare of them are
// unknown, else "". side: "source" or "target".
constexpr double kWarnUnknownShare = 0.1;
std::string check_known_tokens(const TokenCoverage& c, const std::string& side,
                               const std::string& file);

struct ParallelCorpus {
  std::vector<std::vector<int32_t>> src, tgt;  // without </s>, <s>
  std::vector<int64_t> line;                   // 0-based input line of each pair
  int64_t skipped_long = 0;                    // a side longer than max_positions - 1 subwords
  int64_t skipped_empty = 0;                   // an empty side
  int64_t size() const { return static_cast<int64_t>(src.size()); }
  int64_t tgt_tokens() const;  // including </s>
};

// Keeps pairs whose sides both fit in max_len subwords (max_positions - 1,
// leaving room for </s>) and are non-empty; counts the others.
ParallelCorpus make_corpus(std::vector<std::vector<int32_t>> src,
                           std::vector<std::vector<int32_t>> tgt, int64_t max_len);
// Encodes text with the vocabulary (in parallel) and then filters as above.
ParallelCorpus encode_corpus(const Vocab& vocab, const std::vector<std::string>& src,
                             const std::vector<std::string>& tgt, int64_t max_len);
// The same, freeing each line's text as it is encoded and both vectors at
// the end, so the text and its ids are never both held whole.
ParallelCorpus encode_corpus_releasing(const Vocab& vocab, std::vector<std::string>& src,
                                       std::vector<std::string>& tgt, int64_t max_len);

// Removes every pair that repeats an earlier pair exactly (both sides
// byte-identical), keeping the first; pairs with an empty side are left for
// the empty-side count. `line` (the input line of each pair) is compacted
// alike. Returns the number removed. Memory: 16 bytes a pair.
int64_t drop_duplicate_pairs(std::vector<std::string>& src, std::vector<std::string>& tgt,
                             std::vector<int64_t>& line);

// The length-ratio filter: a pair is implausible when its target/source
// ratio of subwords (each side counting its </s>) is more than `factor`
// times off the corpus median, either way, and its longer side has at
// least `min_longer` subwords (short pairs vary too much to judge).
struct RatioFilter {
  double factor = 3.0;
  int64_t min_longer = 10;
  double median = 1.0;    // the corpus's median target/source ratio
  double lo = 0, hi = 0;  // the ratios kept: [median / factor, median * factor]
  int64_t dropped = 0;
};
// Removes the implausible pairs from the corpus (with their `line`).
RatioFilter filter_length_ratio(ParallelCorpus& corpus, double factor = 3.0,
                                int64_t min_longer = 10);

// Sentence indices of each batch of one epoch, in training order.
std::vector<std::vector<int64_t>> make_batches(const ParallelCorpus& corpus, int64_t batch_tokens,
                                               uint64_t seed, int64_t epoch);

// Sentence indices in order, cut by tokens only (validation).
std::vector<std::vector<int64_t>> sequential_batches(const ParallelCorpus& corpus,
                                                     int64_t batch_tokens);

// The batch of those sentences, with the config's </s> and decoder start.
TokenBatch gather_batch(const ParallelCorpus& corpus, const std::vector<int64_t>& indices,
                        const ModelConfig& cfg);

// Walks the batches epoch after epoch; its position is (epoch, index).
class BatchStream {
 public:
  BatchStream(const ParallelCorpus& corpus, int64_t batch_tokens, uint64_t seed);
  // The next batch; advances the position (and the epoch at its end).
  const std::vector<int64_t>& next();
  int64_t epoch() const { return epoch_; }  // completed epochs
  int64_t index() const { return index_; }  // next batch within the epoch
  int64_t batches_per_epoch();
  void seek(int64_t epoch, int64_t index);

 private:
  void build();
  const ParallelCorpus& corpus_;
  int64_t batch_tokens_;
  uint64_t seed_;
  int64_t epoch_ = 0, index_ = 0;
  int64_t built_for_ = -1;
  std::vector<std::vector<int64_t>> batches_;
};

}  // namespace nmt
