// The decoder: N identical layers of masked self-attention, encoder-decoder
// attention and FFN, with the same residual + LayerNorm wrapping as the
// encoder. Training runs whole target sequences under the causal mask;
// translation runs one position at a time against a DecodeState.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/attention.h"
#include "model/config.h"
#include "model/encoder.h"
#include "model/layers.h"
#include "model/params.h"
#include "ops/ops.h"

namespace nmt {

struct DecoderLayerActs {
  AttnActs self_attn, cross_attn;
  Tensor ffn_hidden;                           // (B*T, d_ff)
  Tensor ffn_pre;                              // (B*T, d_ff), training, not ReLU
  Tensor n1, a, r1, h1, c, r2, h2, f, r3, h3;  // (B*T, D); n1: pre-LN, h3: post-LN
  NormStats ln1, ln2, ln3;
};

struct DecodeState;

// What the model keeps of a batch between steps: the additive source mask
// (B, 1, 1, S), per layer the cross-attention keys and values (B*S,
// H*dk + H*dv), computed once per source, and the self-attention caches.
struct DecodeCaches {
  Tensor src_mask;
  std::vector<Tensor> cross_kv;
  std::vector<KVCache> self;
};

// The encoder pass over a batch's sources (start_decoding, add_sentences).
struct SourcePass {
  Tensor src_ids{Shape{0}, Device::CPU, DType::I32};  // (B*S)
  Tensor src_x;                                       // (B*S, D)
  EncoderActs encoder;
};

// Sentences joining a running batch (Transformer::add_sentences): their
// sources padded to the batch's width, their mask rows and keys and values.
struct JoinScratch {
  Tensor ids{Shape{0}, Device::CPU, DType::I32}, mask, kv;
  std::vector<int32_t> host;  // staging for ids
};

// One step: the input tokens, embeddings, the layers' activations (two
// sets taken in turn: layer i reads layer i-1's output from the other set)
// and the logits the step returns.
struct StepScratch {
  Tensor ids{Shape{0}, Device::CPU, DType::I32};
  Tensor x, y, logits;
  std::array<DecoderLayerActs, 2> layer_acts;
  AttnScratch attn;
  // (rows, L) additive: each row's positions after its own, when the rows
  // are at different positions; empty when they are all at one.
  Tensor self_mask{Shape{0}};
  std::vector<float> self_mask_host;  // staging for self_mask
};

// A reorder's plans (beam rows; sentences), each made once for all the
// caches it applies to and placed on the device in one copy, and its
// staging; spare is the gather target, swapped in to avoid allocation.
struct ReorderScratch {
  std::vector<int32_t> pos;
  std::vector<int64_t> cache_order;  // the rows over the caches' positions
  Tensor spare;
  ops::RowOrder row_order, sentence_order;
};

// A shortlist's output columns, set by the caller before start_decoding.
// vocab: empty for the whole vocabulary, else these target ids ascending
// (the union of the batch's shortlists); the logits are then (rows,
// vocab.size()), column c being id vocab[c]. own_columns: empty, or each of
// the B sentences' own pieces among those columns: its search takes only
// those (ops::topk_log_softmax's allowed), so that no sentence's result
// depends on the rest of its batch; step() leaves the logits whole. w, b
// hold vocab's rows of the output projection and bias (scales their row
// scales, where the model holds int8), and prepared those rows as the
// backend prepared them, in a model prepared to translate.
struct OutputRows {
  std::vector<int32_t> vocab;
  ops::ColumnLists own_columns;
  ops::RowIndices rows;
  Tensor w, b, scales;
  std::shared_ptr<PreparedWeight> prepared;
};

// An ensemble's: each member model's own state (the batch's fields then
// mirror the first member's, and the step's logits hold the combination),
// and own_columns as a (B, columns) mask, 0 or -inf, added to each
// member's logits before they are combined.
struct EnsembleStates {
  std::vector<DecodeState> members;
  Tensor column_mask{Shape{0}};
};

// Per-request decoding state, kept apart from the immutable model, in its
// parts. One model serves any number of these.
struct DecodeState {
  int64_t B = 0;      // live sentences
  int64_t beam = 1;   // hypotheses per sentence (rows B*beam)
  int64_t S = 0;      // source length (padded)
  int64_t max_B = 0;  // sentences the buffers are sized for
  // Per row: the position its next token takes. Rows are at different
  // positions once sentences join a running batch (Transformer::add_sentences).
  std::vector<int32_t> pos;
  DecodeCaches cache;
  SourcePass source;
  JoinScratch join;
  StepScratch step;
  ReorderScratch reorder;
  OutputRows out;
  EnsembleStates ensemble;

  int64_t rows() const { return B * beam; }
};

// What one pass of a decoder layer attends to: whole target sequences
// (training, scoring: the causal mask over them, the encoder's output), or
// one position of a search, whose caches in `st` (the layer's keys and
// values so far, its cross-attention keys and values) the pass extends.
struct DecoderPass {
  const Tensor* enc = nullptr;  // (B*S, D)
  int64_t B = 0, T = 0, S = 0;
  const Tensor* causal = nullptr;    // (1,1,T,T)
  const Tensor* src_mask = nullptr;  // (B,1,1,S)
  bool training = false;
  uint64_t seed = 0;
  DecodeState* st = nullptr;  // set: one step against its caches
  size_t layer = 0;
};

class DecoderLayer {
 public:
  DecoderLayer(ParamStore& store, const std::string& name, const ModelConfig& cfg);
  // x (rows, D) -> output(a): rows B*T for whole sequences, B*beam for a
  // step. One definition of the layer for both: each sub-layer with its
  // residual and its norm (before it, pre-norm; after the sum, post-norm).
  void forward(const Tensor& x, const DecoderPass& p, DecoderLayerActs& a) const;
  const Tensor& output(const DecoderLayerActs& a) const { return pre_ ? a.r3 : a.h3; }
  // dx assigned; denc added to.
  void backward(const Tensor& x, const Tensor& enc, int64_t B, int64_t T, int64_t S,
                const DecoderLayerActs& a, const Tensor& dy, LayerGrads& s, Tensor& dx,
                Tensor& denc, Grads& g, uint64_t seed) const;
  const MultiHeadAttention& cross_attention() const { return cross_; }

 private:
  void self_attention(const Tensor& h, const DecoderPass& p, DecoderLayerActs& a) const;
  void cross_attention(const Tensor& h, const DecoderPass& p, DecoderLayerActs& a) const;
  Tensor* ffn_pre(DecoderLayerActs& a, bool training) const {
    return training && ffn_.keeps_pre() ? &a.ffn_pre : nullptr;
  }
  const Tensor* ffn_pre(const DecoderLayerActs& a, bool training) const {
    return training && ffn_.keeps_pre() ? &a.ffn_pre : nullptr;
  }

  bool pre_;
  float dropout_;
  MultiHeadAttention self_, cross_;
  FeedForward ffn_;
  LayerNorm ln1_, ln2_, ln3_;
};

struct DecoderActs {
  std::vector<DecoderLayerActs> layers;
  Tensor final_out;  // pre-LN with final_norm only
  NormStats final_ln;
};

class Decoder {
 public:
  Decoder(ParamStore& store, const ModelConfig& cfg);
  void forward(const Tensor& x, const Tensor& enc, int64_t B, int64_t T, int64_t S,
               const Tensor& causal, const Tensor& src_mask, DecoderActs& a, bool training,
               uint64_t seed) const;
  const Tensor& output(const DecoderActs& a) const;
  // ping, pong: (B*T, D) scratch.
  void backward(const Tensor& x, const Tensor& enc, int64_t B, int64_t T, int64_t S,
                const DecoderActs& a, const Tensor& dy, LayerGrads& s, Tensor& ping, Tensor& pong,
                Tensor& dx, Tensor& denc, Grads& g, uint64_t seed) const;

  // One position of a search, x (B*beam, D), extending st's caches: the
  // output, in y when a final norm writes it there, else in st's
  // activations (valid until the next step).
  const Tensor& step(const Tensor& x, DecodeState& st, Tensor& y) const;
  const std::vector<DecoderLayer>& layers() const { return layers_; }
  bool pre_norm() const { return pre_; }
  bool final_norm() const { return final_; }

 private:
  std::vector<DecoderLayer> layers_;
  bool pre_;
  bool final_;  // pre-LN and the config's final_norm
  LayerNorm final_ln_;
  // Each layer's parameters in the flat buffer, for Grads::ready().
  std::vector<std::pair<int64_t, int64_t>> ranges_;
};

}  // namespace nmt
