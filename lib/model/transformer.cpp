#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/row_ops.h"
#include "ops/ops.h"

namespace nmt {

int64_t TokenBatch::src_tokens() const {
  return std::count_if(src.begin(), src.end(), [](int32_t t) { return t != kNoToken; });
}
int64_t TokenBatch::tgt_tokens() const {
  return std::count_if(tgt_out.begin(), tgt_out.end(), [](int32_t t) { return t != kNoToken; });
}

void frame_source(const std::vector<int32_t>& ids, const ModelConfig& cfg, int32_t* row) {
  if (cfg.source_bos) *row++ = cfg.bos_id;
  row = std::copy(ids.begin(), ids.end(), row);
  if (cfg.source_eos) *row = cfg.eos_id;
}

TokenBatch make_batch(const std::vector<const std::vector<int32_t>*>& src,
                      const std::vector<const std::vector<int32_t>*>& tgt, const ModelConfig& cfg) {
  TokenBatch b;
  b.B = static_cast<int64_t>(src.size());
  for (auto* s : src) b.S = std::max<int64_t>(b.S, cfg.source_tokens(s->size()));
  for (auto* t : tgt) b.T = std::max<int64_t>(b.T, t->size() + 1);
  b.src.assign(b.B * b.S, kNoToken);
  b.tgt_in.assign(b.B * b.T, kNoToken);
  b.tgt_out.assign(b.B * b.T, kNoToken);
  for (int64_t i = 0; i < b.B; ++i) {
    frame_source(*src[i], cfg, b.src.data() + i * b.S);
    if (i < static_cast<int64_t>(tgt.size())) {
      const auto& t = *tgt[i];
      b.tgt_in[i * b.T] = cfg.start_token();
      std::copy(t.begin(), t.end(), b.tgt_in.begin() + i * b.T + 1);
      std::copy(t.begin(), t.end(), b.tgt_out.begin() + i * b.T);
      b.tgt_out[i * b.T + t.size()] = cfg.eos_id;
    }
  }
  return b;
}

TokenBatch make_batch(const std::vector<const std::vector<int32_t>*>& src,
                      const std::vector<const std::vector<int32_t>*>& tgt, int32_t eos,
                      int32_t start) {
  ModelConfig cfg;
  cfg.eos_id = eos;
  if (start < 0)
    cfg.decoder_start = "zero";
  else
    cfg.bos_id = start;
  return make_batch(src, tgt, cfg);
}

Transformer::Transformer(const ModelConfig& cfg, Device device) : cfg_(cfg), store_(device) {
  const float emb_std = 1.f / std::sqrt(static_cast<float>(cfg.d_model));
  const Shape table{cfg.vocab_size, cfg.d_model};
  if (cfg.tie_embeddings) {
    src_table_ = tgt_table_ = out_proj_ = store_.add("embed/tokens", table, Init::Normal, emb_std);
  } else {
    src_table_ = store_.add("encoder/embed/tokens", Shape{cfg.source_vocab(), cfg.d_model},
                            Init::Normal, emb_std);
    tgt_table_ = store_.add("decoder/embed/tokens", table, Init::Normal, emb_std);
    out_proj_ = cfg.tie_output ? tgt_table_
                               : store_.add("decoder/output/weight", table, Init::XavierUniform);
  }
  if (cfg.output_bias)
    out_bias_ = store_.add("decoder/output/bias", Shape{cfg.vocab_size}, Init::Zeros);
  // Its rows are gathered for shortlists, and a tied one is an embedding.
  store_.multiplied(out_proj_, false, /*products_only=*/false);
  src_embed_ = std::make_unique<Embeddings>(store_, "encoder/embed", src_table_, cfg);
  tgt_embed_ = std::make_unique<Embeddings>(store_, "decoder/embed", tgt_table_, cfg);
  encoder_ = std::make_unique<Encoder>(store_, cfg);
  decoder_ = std::make_unique<Decoder>(store_, cfg);
}

void Transformer::init(uint64_t seed) {
  store_.allocate(seed);
  src_embed_->init_tables(store_.device());
  tgt_embed_->init_tables(store_.device());
}

void Transformer::init_for_loading(bool int8) {
  if (int8)
    store_.allocate_int8();
  else
    store_.allocate_zeros();
  src_embed_->init_tables(store_.device());
  tgt_embed_->init_tables(store_.device());
}

void Transformer::lay_out(Activations& a, int64_t B, int64_t S, int64_t T, bool training) const {
  a.B = B, a.S = S, a.T = T, a.training = training;
  const int64_t D = cfg_.d_model, F = cfg_.d_ff, H = cfg_.heads, Wk = cfg_.qk_width(),
                Wv = cfg_.v_width(), V = cfg_.vocab_size;
  const int64_t Ns = B * S, Nt = B * T, M = std::max(S, T), Nmax = B * M;
  const int64_t drop = training && cfg_.attention_dropout > 0.f ? B : 0;
  const int64_t stat = training ? 1 : 0;
  const int64_t enc_final = encoder_->final_norm() ? 1 : 0,
                dec_final = decoder_->final_norm() ? 1 : 0;
  // A training pass keeps the FFN's units before an activation other than
  // ReLU (whose derivative reads its output).
  const int64_t pre_act = training && cfg_.ffn_activation() != Activation::Relu ? 1 : 0;
  a.encoder.layers.resize(encoder_->depth());
  a.decoder.layers.resize(decoder_->layers().size());
  a.arena.lay_out(store_.device(), [&](Arena& ar) {
    // Weights are kept for training, for attention maps, and where a causal
    // mask needs the GEMMs (decoder self-attention).
    auto attn = [&](AttnActs& x, int64_t rows_q, int64_t rows_kv, int64_t Tq, int64_t Sk, bool self,
                    bool causal) {
      x.keep_probs = training || a.keep_attention || causal;
      ar.take(x.proj_q, Shape{rows_q, self ? 2 * Wk + Wv : Wk});
      ar.take(x.proj_kv, Shape{self ? 0 : rows_kv, Wk + Wv});
      ar.take(x.probs, Shape{x.keep_probs ? B : 0, H, Tq, Sk});
      ar.take(x.probs_drop, Shape{drop, H, Tq, Sk});
      ar.take(x.ctx, Shape{rows_q, Wv});
    };
    auto stats = [&](NormStats& s, int64_t rows) {
      ar.take(s.mean, Shape{stat * rows});
      ar.take(s.var, Shape{stat * rows});
    };
    ar.take(a.src_ids, Shape{Ns}, DType::I32);
    ar.take(a.tgt_ids, Shape{Nt}, DType::I32);
    ar.take(a.tgt_out_ids, Shape{Nt}, DType::I32);
    ar.take(a.src_mask, Shape{B, 1, 1, S});
    ar.take(a.causal, Shape{1, 1, T, T});
    ar.take(a.src_x, Shape{Ns, D});
    ar.take(a.tgt_x, Shape{Nt, D});
    for (EncoderLayerActs& l : a.encoder.layers) {
      attn(l.attn, Ns, Ns, S, S, true, false);
      ar.take(l.ffn_hidden, Shape{Ns, F});
      ar.take(l.ffn_pre, Shape{pre_act * Ns, F});
      for (Tensor* t : {&l.n1, &l.a, &l.r1, &l.h1, &l.f, &l.r2, &l.h2}) ar.take(*t, Shape{Ns, D});
      stats(l.ln1, Ns), stats(l.ln2, Ns);
    }
    ar.take(a.encoder.final_out, Shape{enc_final * Ns, D});
    stats(a.encoder.final_ln, enc_final * Ns);
    for (DecoderLayerActs& l : a.decoder.layers) {
      attn(l.self_attn, Nt, Nt, T, T, true, true);
      attn(l.cross_attn, Nt, Ns, T, S, false, false);
      ar.take(l.ffn_hidden, Shape{Nt, F});
      ar.take(l.ffn_pre, Shape{pre_act * Nt, F});
      for (Tensor* t : {&l.n1, &l.a, &l.r1, &l.h1, &l.c, &l.r2, &l.h2, &l.f, &l.r3, &l.h3})
        ar.take(*t, Shape{Nt, D});
      stats(l.ln1, Nt), stats(l.ln2, Nt), stats(l.ln3, Nt);
    }
    ar.take(a.decoder.final_out, Shape{dec_final * Nt, D});
    stats(a.decoder.final_ln, dec_final * Nt);
    ar.take(a.logits, Shape{Nt, V});
    if (!training) return;
    // The backward pass's scratch, shared by the layers: sized for the
    // larger of the encoder's and decoder's shapes.
    LayerGrads& g = a.grads;
    ar.take(g.attn.dctx, Shape{Nmax, Wv});
    ar.take(g.attn.dprobs, Shape{B, H, M, M});
    ar.take(g.attn.dscores, Shape{B, H, M, M});
    ar.take(g.attn.dproj_q, Shape{Nmax, 2 * Wk + Wv});
    ar.take(g.attn.dproj_kv, Shape{Ns, Wk + Wv});
    ar.take(g.dhidden, Shape{Nmax, F});
    for (Tensor* t : {&g.g1, &g.g2, &g.g3, &g.g4, &a.ping, &a.pong, &a.demb})
      ar.take(*t, Shape{Nmax, D});
    ar.take(a.dh, Shape{Nt, D});
    ar.take(a.dtgt_x, Shape{Nt, D});
    ar.take(a.denc, Shape{Ns, D});
    ar.take(a.dsrc_x, Shape{Ns, D});
  });
}

void Transformer::project_output(const Tensor& h, Tensor& logits) const {
  ops::linear(h, weight_of(*out_proj_, out_bias_), logits);
}

void Transformer::forward(const TokenBatch& b, Activations& a, bool training, uint64_t seed) const {
  lay_out(a, b.B, b.S, b.T, training);
  a.seed = seed;
  ops::upload(b.src.data(), a.src_ids);
  ops::upload(b.tgt_in.data(), a.tgt_ids);
  ops::upload(b.tgt_out.data(), a.tgt_out_ids);
  ops::padding_mask(a.src_ids, kNoToken, a.src_mask);
  ops::causal_mask(a.causal);
  src_embed_->forward(a.src_ids, b.S, 0, a.src_x, training, mix_seed(seed, 11));
  encoder_->forward(a.src_x, b.B, b.S, a.src_mask, a.encoder, training, mix_seed(seed, 12));
  tgt_embed_->forward(a.tgt_ids, b.T, 0, a.tgt_x, training, mix_seed(seed, 13));
  decoder_->forward(a.tgt_x, encoder_->output(a.encoder), b.B, b.T, b.S, a.causal, a.src_mask,
                    a.decoder, training, mix_seed(seed, 14));
  project_output(decoder_->output(a.decoder), a.logits);
}

void Transformer::backward(const TokenBatch& b, Activations& a, const Tensor& dlogits,
                           Grads& g) const {
  if (!a.training || a.B != b.B || a.S != b.S || a.T != b.T)
    throw Error("backward: the activations are not from a training pass over this batch");
  const Tensor& h = decoder_->output(a.decoder);
  // dh = dlogits E ; dE += dlogits^T h
  Tensor dE = g.of(out_proj_);
  Tensor db;
  if (out_bias_) db = g.of(out_bias_);
  ops::linear_backward(h, dlogits, out_proj_->value, &a.dh, false, dE, out_bias_ ? &db : nullptr,
                       store_.compute_type());
  a.denc.zero();
  const Tensor& enc = encoder_->output(a.encoder);
  decoder_->backward(a.tgt_x, enc, b.B, b.T, b.S, a.decoder, a.dh, a.grads, a.ping, a.pong,
                     a.dtgt_x, a.denc, g, mix_seed(a.seed, 14));
  tgt_embed_->backward(a.tgt_ids, b.T, a.dtgt_x, a.demb, g, mix_seed(a.seed, 13));
  encoder_->backward(a.src_x, b.B, b.S, a.encoder, a.denc, a.grads, a.ping, a.pong, a.dsrc_x, g,
                     mix_seed(a.seed, 12));
  src_embed_->backward(a.src_ids, b.S, a.dsrc_x, a.demb, g, mix_seed(a.seed, 11));
}

void Decodable::add_sentences(const int32_t*, int64_t, int64_t, DecodeState&) const {
  throw Error("add_sentences: this decoder cannot add sentences to a running batch");
}

void Transformer::start_decoding(const int32_t* src, int64_t B, int64_t S, int64_t beam,
                                 int64_t max_len, DecodeState& st, int64_t max_sentences) const {
  // Rounded up to a multiple of 32, so that the caches' sizes take a few
  // values over a file, and the buffers settle at the largest.
  max_len = std::min<int64_t>((max_len + 31) / 32 * 32, cfg_.max_positions);
  const int64_t cap = std::max(B, max_sentences);
  st.B = B;
  st.beam = 1;  // beams fan out after the first step
  st.S = S;
  st.max_B = cap;
  st.pos.assign(static_cast<size_t>(B), 0);
  st.step.self_mask.resize(Shape{0}, store_.device());
  st.source.src_ids.resize(Shape{B * S}, store_.device());
  ops::upload(src, st.source.src_ids);
  // Sized for cap sentences first: sentences that join later grow these
  // within their capacity, which keeps what they hold.
  st.cache.src_mask.resize(Shape{cap, 1, 1, S}, store_.device());
  st.cache.src_mask.resize(Shape{B, 1, 1, S}, store_.device());
  ops::padding_mask(st.source.src_ids, kNoToken, st.cache.src_mask);
  src_embed_->forward(st.source.src_ids, S, 0, st.source.src_x, false, 0);
  // Two sets of activations, taken in turn: a 6-layer base model's encoder
  // scratch is then a third of one set per layer.
  st.source.encoder.layers.resize(std::min<size_t>(encoder_->depth(), 2));
  for (EncoderLayerActs& l : st.source.encoder.layers) l.attn.keep_probs = false;
  encoder_->forward(st.source.src_x, B, S, st.cache.src_mask, st.source.encoder, false, 0);
  const auto& layers = decoder_->layers();
  st.cache.cross_kv.resize(layers.size());
  st.cache.self.resize(layers.size());
  const int64_t kvw = cfg_.qk_width() + cfg_.v_width();
  // int8 decoding keeps the self-attention caches in bf16: half the bytes
  // that every step's attention reads and every beam reorder copies.
  const DType kv_type = store_.compute_type() == ComputeType::INT8 ? DType::BF16 : DType::F32;
  for (size_t i = 0; i < layers.size(); ++i) {
    st.cache.cross_kv[i].resize(Shape{cap * S, kvw}, store_.device());
    layers[i].cross_attention().project_kv(encoder_->output(st.source.encoder),
                                           st.cache.cross_kv[i]);
    KVCache& c = st.cache.self[i];
    c.len = 0;
    c.capacity = max_len;
    for (Tensor* t : {&c.k, &c.v})
      if (t->dtype() != kv_type) *t = Tensor(Shape{0}, store_.device(), kv_type);
    c.k.resize(Shape{max_len, cap * beam, cfg_.qk_width()}, store_.device());
    c.v.resize(Shape{max_len, cap * beam, cfg_.v_width()}, store_.device());
  }
  select_output_rows(st);
}

// The shortlist's rows of the output projection (st.out.vocab), gathered once
// per batch and packed by the backend on the next step.
void Transformer::select_output_rows(DecodeState& st) const {
  const int64_t cols =
      st.out.vocab.empty() ? cfg_.vocab_size : static_cast<int64_t>(st.out.vocab.size());
  const ops::ColumnLists& own = st.out.own_columns;
  if (own.size() != 0) {
    if (own.size() != st.B || own.offsets.back() != static_cast<int64_t>(own.cols.size()))
      throw Error("start_decoding: the shortlist's columns are not one list per sentence");
    for (int32_t c : own.cols)
      if (c < 0 || c >= cols) throw Error("start_decoding: a shortlisted column is out of range");
  }
  if (st.out.vocab.empty()) return;
  std::vector<int64_t> rows(st.out.vocab.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (st.out.vocab[i] < 0 || st.out.vocab[i] >= cfg_.vocab_size ||
        (i > 0 && st.out.vocab[i] <= st.out.vocab[i - 1]))
      throw Error("start_decoding: the output ids are not ascending vocabulary ids");
    rows[i] = st.out.vocab[i];
  }
  st.out.rows.assign(rows, cfg_.vocab_size, store_.device());
  ops::gather_rows(out_proj_->value, st.out.rows, st.out.w);
  if (out_proj_->int8_scales()) ops::gather_rows(out_proj_->scales, st.out.rows, st.out.scales);
  if (out_bias_) ops::gather_rows(out_bias_->value, st.out.rows, st.out.b);
  if (store_.prepared())
    st.out.prepared =
        ops::prepare_weight(st.out.w, out_proj_->int8_scales() ? &st.out.scales : nullptr,
                            store_.compute_type(), false, std::move(st.out.prepared));
}

void Transformer::add_sentences(const int32_t* src, int64_t n, int64_t S,
                                DecodeState& st) const {
  if (n <= 0) return;
  if (S < 1 || S > st.S) throw Error("add_sentences: the sources are wider than the batch's");
  if (st.B + n > st.max_B) throw Error("add_sentences: more sentences than the batch was sized for");
  const int64_t B0 = st.B, K = st.beam, W = st.S;
  // Encoded as a batch of their own (a sentence's encoding never depends on
  // its batch), in the encoder's scratch, which nothing reads after
  // start_decoding.
  st.source.src_ids.resize(Shape{n * S}, store_.device());
  ops::upload(src, st.source.src_ids);
  st.join.mask.resize(Shape{n, 1, 1, S}, store_.device());
  ops::padding_mask(st.source.src_ids, kNoToken, st.join.mask);
  src_embed_->forward(st.source.src_ids, S, 0, st.source.src_x, false, 0);
  encoder_->forward(st.source.src_x, n, S, st.join.mask, st.source.encoder, false, 0);
  // Their rows of the batch's source mask, at the batch's width W.
  st.join.host.assign(static_cast<size_t>(n * W), kNoToken);
  for (int64_t b = 0; b < n; ++b)
    std::copy(src + b * S, src + (b + 1) * S, st.join.host.begin() + b * W);
  st.join.ids.resize(Shape{n * W}, store_.device());
  ops::upload(st.join.host.data(), st.join.ids);
  st.cache.src_mask.grow(Shape{B0 + n, 1, 1, W});
  Tensor mask_rows = st.cache.src_mask.rows(B0, B0 + n);
  ops::padding_mask(st.join.ids, kNoToken, mask_rows);
  // Their cross-attention keys and values, each sentence's S rows at the
  // start of its W (the rest is masked).
  const auto& layers = decoder_->layers();
  const int64_t kvw = cfg_.qk_width() + cfg_.v_width();
  for (size_t i = 0; i < layers.size(); ++i) {
    layers[i].cross_attention().project_kv(encoder_->output(st.source.encoder), st.join.kv);
    Tensor& kv = st.cache.cross_kv[i];
    kv.grow(Shape{(B0 + n) * W, kvw});
    Tensor dst = kv.strided(Shape{n, S * kvw}, {W * kvw, 1, 0, 0}, B0 * W * kvw);
    ops::copy_rows(st.join.kv.view(Shape{n, S * kvw}), dst);
  }
  // Their rows of the self-attention caches follow the others' at every
  // position: start_decoding made room for max_B sentences.
  st.pos.resize(static_cast<size_t>((B0 + n) * K), 0);
  st.B = B0 + n;
  select_output_rows(st);
}

const Tensor& Transformer::step(DecodeState& st, const int32_t* last_tokens) const {
  const int64_t N = st.rows();
  if (static_cast<int64_t>(st.pos.size()) != N) throw Error("decoder step: a position per row needed");
  st.step.ids.resize(Shape{N}, store_.device());
  ops::upload(last_tokens, st.step.ids);
  int32_t lo = st.pos.empty() ? 0 : st.pos[0], last = lo;
  for (int32_t p : st.pos) lo = std::min(lo, p), last = std::max(last, p);
  if (lo == last) {
    tgt_embed_->forward(st.step.ids, 1, lo, st.step.x, false, 0);
    st.step.self_mask.resize(Shape{0}, store_.device());
  } else {
    // A run of rows per position; and the mask that hides, from each row,
    // the positions after its own.
    st.step.x.resize(Shape{N, cfg_.d_model}, store_.device());
    for (int64_t r0 = 0, r1 = 0; r0 < N; r0 = r1) {
      for (r1 = r0 + 1; r1 < N && st.pos[r1] == st.pos[r0];) ++r1;
      Tensor x = st.step.x.rows(r0, r1);
      tgt_embed_->forward(st.step.ids.rows(r0, r1), 1, st.pos[r0], x, false, 0);
    }
    const int64_t L = last + 1;
    st.step.self_mask_host.assign(static_cast<size_t>(N * L), 0.f);
    for (int64_t r = 0; r < N; ++r)
      std::fill(st.step.self_mask_host.begin() + r * L + st.pos[r] + 1,
                st.step.self_mask_host.begin() + (r + 1) * L, kMask);
    st.step.self_mask.resize(Shape{N, L}, store_.device());
    ops::upload(st.step.self_mask_host.data(), st.step.self_mask);
  }
  const Tensor& y = decoder_->step(st.step.x, st, st.step.y);
  if (st.out.vocab.empty()) {
    project_output(y, st.step.logits);
  } else {
    // The batch's rows of the output projection, prepared with them.
    ops::Weight w = weight_of(*out_proj_, out_bias_);
    w.out = st.out.w.dim(0);
    w.value = &st.out.w;
    w.scales = out_proj_->int8_scales() ? &st.out.scales : nullptr;
    w.bias = out_bias_ ? &st.out.b : nullptr;
    w.prepared = st.out.prepared.get();
    ops::linear(y, w, st.step.logits);
  }
  for (int32_t& p : st.pos) ++p;
  return st.step.logits;
}

void Transformer::reorder(DecodeState& st, const std::vector<int64_t>& keep,
                          const std::vector<int64_t>& rows, int64_t new_beam) const {
  const int64_t newB = static_cast<int64_t>(keep.size());
  const int64_t N = static_cast<int64_t>(rows.size());
  if (N != newB * new_beam) throw Error("reorder: rows do not match sentences x beam");
  if (newB > st.B) throw Error("reorder: more sentences than the batch holds");
  bool identity_rows = N == st.rows();
  for (int64_t i = 0; identity_rows && i < N; ++i) identity_rows = rows[i] == i;
  if (!identity_rows) {
    // Each filled position's R rows take the new order: one plan over the
    // caches' filled prefix, (len * R) rows of one position each, shared by
    // every layer's caches (they hold the same rows). Only the rows whose
    // history changes are copied.
    if (!st.cache.self.empty() && st.cache.self[0].len > 0) {
      const int64_t R = st.cache.self[0].rows(), len = st.cache.self[0].len;
      if (N > R) throw Error("reorder: more rows than the caches hold");
      st.reorder.cache_order.resize(static_cast<size_t>(len * R));
      for (int64_t t = 0; t < len; ++t) {
        int64_t* o = st.reorder.cache_order.data() + t * R;
        for (int64_t i = 0; i < R; ++i) o[i] = t * R + (i < N ? rows[i] : i);
      }
      st.reorder.row_order.plan(st.reorder.cache_order, len * R, store_.device());
      for (KVCache& c : st.cache.self) {
        for (Tensor* kv : {&c.k, &c.v}) {
          Tensor filled = kv->rows(0, len).view(Shape{len * R, 1, kv->dim(2)});
          ops::reorder_cache(filled, st.reorder.row_order, 1, st.reorder.spare);
        }
      }
    }
    st.reorder.pos.resize(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) st.reorder.pos[i] = st.pos.at(static_cast<size_t>(rows[i]));
    st.pos.swap(st.reorder.pos);
  }
  bool identity_keep = newB == st.B;
  for (int64_t i = 0; identity_keep && i < newB; ++i) identity_keep = keep[i] == i;
  if (!identity_keep) {
    // Sentence-major: one row per sentence, all its source positions.
    // In place, as the self-attention caches: sentences that stay put are
    // not copied (keep never holds more sentences than before).
    const int64_t S = st.S, kvw = cfg_.qk_width() + cfg_.v_width();
    st.reorder.sentence_order.plan(keep, st.B, store_.device());
    for (Tensor& kv : st.cache.cross_kv) {
      Tensor rows3 = kv.view(Shape{st.B, S, kvw});
      ops::reorder_cache(rows3, st.reorder.sentence_order, S, st.reorder.spare);
      kv.resize(Shape{newB * S, kvw}, store_.device());
    }
    Tensor mask3 = st.cache.src_mask.view(Shape{st.B, 1, S});
    ops::reorder_cache(mask3, st.reorder.sentence_order, 1, st.reorder.spare);
    st.cache.src_mask.resize(Shape{newB, 1, 1, S}, store_.device());
    if (st.out.own_columns.size() > 0) st.out.own_columns.keep(keep);
  }
  st.B = newB;
  st.beam = new_beam;
}

int64_t Transformer::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : store_.params()) n += p.shape.numel();
  return n;
}

double Transformer::flops_per_token(int64_t S, int64_t T) const {
  const double D = cfg_.d_model, F = cfg_.d_ff, Wk = cfg_.qk_width(), Wv = cfg_.v_width();
  const double V = cfg_.vocab_size;
  const double enc_tok = 2 * (D * (2 * Wk + Wv) + Wv * D + 2 * D * F) + 2 * S * (Wk + Wv);
  const double dec_tok = 2 * (D * (2 * Wk + Wv) + Wv * D + 2 * D * F) + 2 * T * (Wk + Wv) / 2 +
                         2 * (D * Wk + Wv * D) + 2 * S * (Wk + Wv);
  const double kv_src = 2 * D * (Wk + Wv);
  const double per_sentence = S * (enc_tok * cfg_.encoder_layers + kv_src * cfg_.decoder_layers) +
                              T * (dec_tok * cfg_.decoder_layers + 2 * D * V);
  return per_sentence / T;
}

}  // namespace nmt
