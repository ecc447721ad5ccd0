// The encoder-decoder Transformer assembled from a ModelConfig: embeddings
// (shared between source, target and the pre-softmax projection when
// tie_embeddings), encoder, decoder and output projection.
//
// The model is immutable once loaded: every pass is a const member that
// reads the weights and writes only the run state it is given, an
// Activations arena for teacher-forced passes (training, scoring) or a
// DecodeState for translation, so one model serves many threads.
//
// Token ids are the config's (pad_id, unk_id, bos_id, eos_id; the
// SentencePiece models `nmt train` makes have 0 <pad>, 1 <unk>, 2 <s>,
// 3 </s>). Sources end in </s> (or are framed as source_bos and source_eos
// say); the decoder input is the start (<s>, or no
// token: a zero embedding) followed by the target, and its output is the
// target followed by </s>. Padding is kNoToken, never a vocabulary id, so a
// vocabulary whose </s> is 0 (Marian's) pads the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/arena.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/embeddings.h"
#include "model/encoder.h"
#include "model/params.h"

namespace nmt {

// The ids of the vocabularies `nmt train` makes (a model's own are in its config).
constexpr int32_t kPad = 0, kUnk = 1, kBos = 2, kEos = 3;
// Not a token: what a batch is padded with (masked in attention, ignored by
// the loss) and the decoder's first input when it starts from a zero
// embedding. It embeds as zeros.
constexpr int32_t kNoToken = -1;

// A padded batch of token ids, row-major.
struct TokenBatch {
  int64_t B = 0, S = 0, T = 0;
  std::vector<int32_t> src;      // (B, S), </s>-terminated, kNoToken after
  std::vector<int32_t> tgt_in;   // (B, T): start y1 .. y_{n}, kNoToken after
  std::vector<int32_t> tgt_out;  // (B, T): y1 .. y_n </s>, kNoToken after
  int64_t src_tokens() const;
  int64_t tgt_tokens() const;  // non-pad targets
};

// Builds a TokenBatch from id sequences (without </s>, <s>): eos ends each
// sequence and start begins the decoder input (the config's overload: its
// eos_id, start_token() and source framing).
TokenBatch make_batch(const std::vector<const std::vector<int32_t>*>& src,
                      const std::vector<const std::vector<int32_t>*>& tgt, int32_t eos = kEos,
                      int32_t start = kBos);
// Writes a source of ids (without framing) as the config frames it (<s>
// before it with source_bos, </s> after it with source_eos) into row, which
// holds cfg.source_tokens(ids.size()) entries.
void frame_source(const std::vector<int32_t>& ids, const ModelConfig& cfg, int32_t* row);
TokenBatch make_batch(const std::vector<const std::vector<int32_t>*>& src,
                      const std::vector<const std::vector<int32_t>*>& tgt, const ModelConfig& cfg);

// The run state of one teacher-forced step: every tensor the forward pass
// keeps for the backward pass, and the backward pass's scratch, as views
// into one arena laid out for the batch's shape.
struct Activations {
  int64_t B = 0, S = 0, T = 0;
  bool training = false;
  bool keep_attention = false;  // inference keeps every layer's weights (attention maps)
  uint64_t seed = 0;            // dropout masks are regenerated from it
  Tensor src_ids, tgt_ids;      // (B*S), (B*T) I32: source, decoder input
  Tensor tgt_out_ids;           // (B*T) I32: the targets the loss reads
  Tensor src_mask, causal;      // (B,1,1,S), (1,1,T,T)
  Tensor src_x, tgt_x;          // embeddings (B*S, D), (B*T, D)
  EncoderActs encoder;
  DecoderActs decoder;
  Tensor logits;  // (B*T, V)
  // Backward scratch (training only).
  LayerGrads grads;
  Tensor dh, dtgt_x, denc, dsrc_x, ping, pong, demb;
  Arena arena;
};

// What a search steps through: one Transformer, or an ensemble of them
// (decode/ensemble.h) that combines its members' distributions.
class Decodable {
 public:
  virtual ~Decodable() = default;
  virtual const ModelConfig& config() const = 0;
  // Where its weights and decoding state live.
  virtual Device device() const = 0;
  // See Transformer's.
  virtual void start_decoding(const int32_t* src, int64_t B, int64_t S, int64_t beam,
                              int64_t max_len, DecodeState& st,
                              int64_t max_sentences = 0) const = 0;
  virtual const Tensor& step(DecodeState& st, const int32_t* last_tokens) const = 0;
  virtual void reorder(DecodeState& st, const std::vector<int64_t>& keep,
                       const std::vector<int64_t>& rows, int64_t new_beam) const = 0;
  // Continuous batching (see Transformer's); a Decodable without it never
  // has sentences added.
  virtual bool can_add_sentences() const { return false; }
  virtual void add_sentences(const int32_t* src, int64_t n, int64_t S, DecodeState& st) const;
};

class Transformer : public Decodable {
 public:
  // The weights, and every activation and decoding state the model lays
  // out, live on `device`.
  explicit Transformer(const ModelConfig& cfg, Device device = Device::CPU);
  // Allocates the parameters and initialises them from the seed.
  void init(uint64_t seed);
  // Allocates them as zeros, to be loaded: in f32, or, to translate in
  // int8, with the weight matrices as s8 rows (ParamStore::allocate_int8).
  void init_for_loading(bool int8 = false);

  const ModelConfig& config() const override { return cfg_; }
  Device device() const override { return store_.device(); }
  ParamStore& params() { return store_; }
  const ParamStore& params() const { return store_; }

  // Teacher-forced pass; a.logits becomes (B*T, V). Training: dropout from
  // the seed, and what backward() needs is kept in a.
  void forward(const TokenBatch& batch, Activations& a, bool training, uint64_t seed) const;
  // Accumulates every parameter gradient from dlogits (B*T, V), after a
  // training forward pass over the same batch into the same a.
  void backward(const TokenBatch& batch, Activations& a, const Tensor& dlogits, Grads& g) const;

  // Decoding: runs the encoder once over src (B, S), computes every layer's
  // cross-attention K/V, and sizes the caches for up to max_len positions
  // and max_sentences sentences of `beam` rows (at least B).
  void start_decoding(const int32_t* src, int64_t B, int64_t S, int64_t beam, int64_t max_len,
                      DecodeState& st, int64_t max_sentences = 0) const override;
  // Feeds last_tokens (B*beam), each row at its own position st.pos[r];
  // returns the logits (B*beam, V), valid until the next step.
  const Tensor& step(DecodeState& st, const int32_t* last_tokens) const override;
  // Keeps sentences `keep` (indices into the current B), and for the new
  // rows takes the cache of old row `rows[i]`; beam becomes new_beam.
  void reorder(DecodeState& st, const std::vector<int64_t>& keep, const std::vector<int64_t>& rows,
               int64_t new_beam) const override;
  // Continuous batching: appends n sentences (src (n, S) framed, S at most
  // st.S) after the st.B there, with st.beam rows each at position 0, while
  // the others go on from where they are. Their source is encoded alone and
  // each row attends to its own positions only, so a sentence decodes the
  // same whenever it joins. The caller has set st.out.vocab and st.out.own_columns
  // for all st.B + n sentences. At most start_decoding's max_sentences.
  bool can_add_sentences() const override { return true; }
  void add_sentences(const int32_t* src, int64_t n, int64_t S, DecodeState& st) const override;

  // Parameter count and forward FLOPs per target token (for summaries/bench).
  int64_t parameter_count() const;
  double flops_per_token(int64_t src_len, int64_t tgt_len) const;

 private:
  void lay_out(Activations& a, int64_t B, int64_t S, int64_t T, bool training) const;
  void select_output_rows(DecodeState& st) const;
  void project_output(const Tensor& h, Tensor& logits) const;

  ModelConfig cfg_;
  ParamStore store_;
  const Param* src_table_ = nullptr;
  const Param* tgt_table_ = nullptr;
  const Param* out_proj_ = nullptr;  // == tgt_table_ when tied
  const Param* out_bias_ = nullptr;  // output_bias only
  std::unique_ptr<Embeddings> src_embed_, tgt_embed_;
  std::unique_ptr<Encoder> encoder_;
  std::unique_ptr<Decoder> decoder_;
};

}  // namespace nmt
