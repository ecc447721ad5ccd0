#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/cpu_kernels.h"
#include "core/elementwise.h"
#include "core/error.h"

namespace nmt {

namespace {
constexpr float kMasked = -1e9f;  // large but finite: no inf - inf in backward
}

int64_t TokenBatch::src_tokens() const {
  return std::count_if(src.begin(), src.end(), [](int32_t t) { return t != kPad; });
}
int64_t TokenBatch::tgt_tokens() const {
  return std::count_if(tgt_out.begin(), tgt_out.end(), [](int32_t t) { return t != kPad; });
}

TokenBatch make_batch(const std::vector<const std::vector<int32_t>*>& src,
                      const std::vector<const std::vector<int32_t>*>& tgt) {
  TokenBatch b;
  b.B = static_cast<int64_t>(src.size());
  for (auto* s : src) b.S = std::max<int64_t>(b.S, s->size() + 1);
  for (auto* t : tgt) b.T = std::max<int64_t>(b.T, t->size() + 1);
  b.src.assign(b.B * b.S, kPad);
  b.tgt_in.assign(b.B * b.T, kPad);
  b.tgt_out.assign(b.B * b.T, kPad);
  for (int64_t i = 0; i < b.B; ++i) {
    std::copy(src[i]->begin(), src[i]->end(), b.src.begin() + i * b.S);
    b.src[i * b.S + src[i]->size()] = kEos;
    if (i < static_cast<int64_t>(tgt.size())) {
      const auto& t = *tgt[i];
      b.tgt_in[i * b.T] = kBos;
      std::copy(t.begin(), t.end(), b.tgt_in.begin() + i * b.T + 1);
      std::copy(t.begin(), t.end(), b.tgt_out.begin() + i * b.T);
      b.tgt_out[i * b.T + t.size()] = kEos;
    }
  }
  return b;
}

Transformer::Transformer(const ModelConfig& cfg) : cfg_(cfg) {
  const float emb_std = 1.f / std::sqrt(static_cast<float>(cfg.d_model));
  const Shape table{cfg.vocab_size, cfg.d_model};
  if (cfg.tie_embeddings) {
    src_table_ = tgt_table_ = out_proj_ = store_.add("embed/tokens", table, Init::Normal, emb_std);
  } else {
    src_table_ = store_.add("encoder/embed/tokens", table, Init::Normal, emb_std);
    tgt_table_ = store_.add("decoder/embed/tokens", table, Init::Normal, emb_std);
    out_proj_ = store_.add("decoder/output/weight", table, Init::XavierUniform);
  }
  src_embed_ = std::make_unique<Embeddings>(store_, "encoder/embed", src_table_, cfg);
  tgt_embed_ = std::make_unique<Embeddings>(store_, "decoder/embed", tgt_table_, cfg);
  encoder_ = std::make_unique<Encoder>(store_, cfg);
  decoder_ = std::make_unique<Decoder>(store_, cfg);
}

void Transformer::init(uint64_t seed) {
  store_.allocate(seed);
  src_embed_->init_tables();
  tgt_embed_->init_tables();
}

void Transformer::build_src_mask(const int32_t* src, int64_t B, int64_t S, Tensor& mask) const {
  mask.resize(Shape{B, S});
  for (int64_t i = 0; i < B * S; ++i) mask.data()[i] = src[i] == kPad ? kMasked : 0.f;
}

void Transformer::project_output(const Tensor& h, Tensor& logits) const {
  const int64_t N = h.dim(0), D = cfg_.d_model, V = cfg_.vocab_size;
  logits.resize(Shape{N, V});
  cpu::gemm(cpu::mat(h.data(), N, D, D), cpu::mat_t(out_proj_->value.data(), V, D, D),
            cpu::mat(logits.data(), N, V, V));
}

void Transformer::forward(const TokenBatch& b, bool training, uint64_t seed) {
  build_src_mask(b.src.data(), b.B, b.S, src_mask_);
  causal_.resize(Shape{b.T, b.T});
  for (int64_t i = 0; i < b.T; ++i)
    for (int64_t j = 0; j < b.T; ++j) causal_.data()[i * b.T + j] = j > i ? kMasked : 0.f;
  const AttnMask src_mask{src_mask_.data(), {b.B, 1, 1, b.S}};
  const AttnMask causal{causal_.data(), {1, 1, b.T, b.T}};

  src_embed_->forward(b.src.data(), b.B, b.S, 0, src_x_, training, cpu::mix_seed(seed, 11));
  encoder_->forward(src_x_, b.B, b.S, src_mask, training, cpu::mix_seed(seed, 12));
  tgt_embed_->forward(b.tgt_in.data(), b.B, b.T, 0, tgt_x_, training, cpu::mix_seed(seed, 13));
  decoder_->forward(tgt_x_, encoder_->output(), b.B, b.T, b.S, causal, src_mask, training,
                    cpu::mix_seed(seed, 14));
  project_output(decoder_->output(), logits_);
}

void Transformer::backward(const TokenBatch& b, const Tensor& dlogits) {
  const int64_t N = b.B * b.T, D = cfg_.d_model, V = cfg_.vocab_size;
  const Tensor& h = decoder_->output();
  // dh = dlogits E ; dE += dlogits^T h
  dh_.resize(Shape{N, D});
  cpu::gemm(cpu::mat(dlogits.data(), N, V, V), cpu::mat(out_proj_->value.data(), V, D, D),
            cpu::mat(dh_.data(), N, D, D));
  cpu::GemmAttr acc;
  acc.accumulate = true;
  cpu::gemm(cpu::mat_t(dlogits.data(), N, V, V), cpu::mat(h.data(), N, D, D),
            cpu::mat(out_proj_->grad.data(), V, D, D), acc);

  denc_.resize(encoder_->output().shape());
  denc_.zero();
  decoder_->backward(tgt_x_, encoder_->output(), dh_, dtgt_x_, denc_);
  tgt_embed_->backward(b.tgt_in.data(), b.B, b.T, dtgt_x_);
  encoder_->backward(src_x_, denc_, dsrc_x_);
  src_embed_->backward(b.src.data(), b.B, b.S, dsrc_x_);
}

void Transformer::start_decoding(const int32_t* src, int64_t B, int64_t S, int64_t beam,
                                 int64_t max_len, DecodeState& st) {
  if (max_len > cfg_.max_positions) max_len = cfg_.max_positions;
  st.B = B;
  st.beam = 1;  // beams fan out after the first step
  st.S = S;
  st.step = 0;
  build_src_mask(src, B, S, st.src_mask);
  const AttnMask mask{st.src_mask.data(), {B, 1, 1, S}};
  src_embed_->lookup(src, B, S, 0, src_x_);
  encoder_->forward(src_x_, B, S, mask, /*training=*/false, 0);
  const auto& layers = decoder_->layers();
  st.cross_kv.resize(layers.size());
  st.self.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    layers[i].cross_attention().project_kv(encoder_->output(), st.cross_kv[i]);
    KVCache& c = st.self[i];
    c.len = 0;
    c.capacity = max_len;
    c.k.resize(Shape{B * beam, max_len, cfg_.qk_width()});
    c.v.resize(Shape{B * beam, max_len, cfg_.v_width()});
  }
}

void Transformer::step(DecodeState& st, const int32_t* last_tokens, Tensor& log_probs) const {
  const int64_t N = st.rows(), V = cfg_.vocab_size;
  tgt_embed_->lookup(last_tokens, N, 1, st.step, st.x);
  decoder_->step(st.x, st, st.y);
  project_output(st.y, st.logits);
  log_probs.resize(Shape{N, V});
  cpu::softmax(st.logits.data(), log_probs.data(), N, V, /*log=*/true);
  ++st.step;
}

void Transformer::reorder(DecodeState& st, const std::vector<int64_t>& keep,
                          const std::vector<int64_t>& rows, int64_t new_beam) const {
  const int64_t newB = static_cast<int64_t>(keep.size());
  const int64_t N = static_cast<int64_t>(rows.size());
  if (N != newB * new_beam) throw Error("reorder: rows do not match sentences x beam");
  // Gathers rows of row_elems floats; the first dimension scales with the
  // number of rows (it may hold several rows per index, as kv does).
  auto gather = [&](Tensor& t, const std::vector<int64_t>& idx, int64_t row_elems) {
    Shape s = t.shape();
    s.dims[0] = static_cast<int64_t>(idx.size()) * row_elems / (t.numel() / t.dim(0));
    st.spare.resize(s);
    for (size_t i = 0; i < idx.size(); ++i)
      std::memcpy(st.spare.data() + i * row_elems, t.data() + idx[i] * row_elems,
                  row_elems * sizeof(float));
    std::swap(t, st.spare);
  };
  bool identity_rows = N == st.rows();
  for (int64_t i = 0; identity_rows && i < N; ++i) identity_rows = rows[i] == i;
  if (!identity_rows) {
    for (KVCache& c : st.self) {
      // Only the filled prefix of each row matters, but rows are strided by
      // capacity; copy whole rows to keep the gather simple.
      gather(c.k, rows, c.capacity * cfg_.qk_width());
      gather(c.v, rows, c.capacity * cfg_.v_width());
    }
  }
  bool identity_keep = newB == st.B;
  for (int64_t i = 0; identity_keep && i < newB; ++i) identity_keep = keep[i] == i;
  if (!identity_keep) {
    const int64_t kvw = cfg_.qk_width() + cfg_.v_width();
    for (Tensor& kv : st.cross_kv) {
      gather(kv, keep, st.S * kvw);
    }
    gather(st.src_mask, keep, st.S);
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
