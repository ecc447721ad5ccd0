// The encoder-decoder Transformer assembled from a ModelConfig: embeddings
// (shared between source, target and the pre-softmax projection when
// tie_embeddings), encoder, decoder and output projection.
//
// Token ids follow the SentencePiece model trained by `nmt train`:
// 0 <pad>, 1 <unk>, 2 <s>, 3 </s>. Sources end in </s>; the decoder input is
// <s> followed by the target, and its output is the target followed by </s>.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/decoder.h"
#include "model/embeddings.h"
#include "model/encoder.h"
#include "model/params.h"

namespace nmt {

constexpr int32_t kPad = 0, kUnk = 1, kBos = 2, kEos = 3;

// A padded batch of token ids, row-major.
struct TokenBatch {
  int64_t B = 0, S = 0, T = 0;
  std::vector<int32_t> src;      // (B, S), </s>-terminated, kPad after
  std::vector<int32_t> tgt_in;   // (B, T): <s> y1 .. y_{n}
  std::vector<int32_t> tgt_out;  // (B, T): y1 .. y_n </s>, kPad after
  int64_t src_tokens() const;
  int64_t tgt_tokens() const;  // non-pad targets
};

// Builds a TokenBatch from id sequences (without </s>, <s>).
TokenBatch make_batch(const std::vector<const std::vector<int32_t>*>& src,
                      const std::vector<const std::vector<int32_t>*>& tgt);

class Transformer {
 public:
  explicit Transformer(const ModelConfig& cfg);
  // Allocates the parameters and initialises them from the seed.
  void init(uint64_t seed);

  const ModelConfig& config() const { return cfg_; }
  ParamStore& params() { return store_; }

  // Teacher-forced pass: logits() becomes (B*T, V).
  void forward(const TokenBatch& batch, bool training, uint64_t seed);
  const Tensor& logits() const { return logits_; }
  // Accumulates every parameter gradient from dlogits (B*T, V).
  void backward(const TokenBatch& batch, const Tensor& dlogits);

  // Decoding: runs the encoder once over src (B, S), computes every layer's
  // cross-attention K/V, and sizes the caches for up to max_len positions.
  void start_decoding(const int32_t* src, int64_t B, int64_t S, int64_t beam, int64_t max_len,
                      DecodeState& st);
  // Feeds last_tokens (B*beam) at position st.step; log_probs (B*beam, V).
  void step(DecodeState& st, const int32_t* last_tokens, Tensor& log_probs) const;
  // Keeps sentences `keep` (indices into the current B), and for the new
  // rows takes the cache of old row `rows[i]`; beam becomes new_beam.
  void reorder(DecodeState& st, const std::vector<int64_t>& keep, const std::vector<int64_t>& rows,
               int64_t new_beam) const;

  // Parameter count and forward FLOPs per target token (for summaries/bench).
  int64_t parameter_count() const;
  double flops_per_token(int64_t src_len, int64_t tgt_len) const;

 private:
  void build_src_mask(const int32_t* src, int64_t B, int64_t S, Tensor& mask) const;
  void project_output(const Tensor& h, Tensor& logits) const;

  ModelConfig cfg_;
  ParamStore store_;
  Param* src_table_ = nullptr;
  Param* tgt_table_ = nullptr;
  Param* out_proj_ = nullptr;  // == tgt_table_ when tied
  std::unique_ptr<Embeddings> src_embed_, tgt_embed_;
  std::unique_ptr<Encoder> encoder_;
  std::unique_ptr<Decoder> decoder_;

  // Training activations and gradients.
  Tensor src_x_, tgt_x_, src_mask_, causal_, logits_;
  Tensor dh_, dtgt_x_, denc_, dsrc_x_;
};

}  // namespace nmt
