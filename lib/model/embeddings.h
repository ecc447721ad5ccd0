// Token embeddings scaled by sqrt(d_model) (unless the config says
// scale_embeddings false) plus positional encodings (sinusoidal in either
// layout, or a table: learned as in Table 3 row E, or imported), followed by
// dropout. A token id of -1 (padding, a decoder's zero start) contributes
// nothing but its position.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "model/config.h"
#include "model/params.h"

namespace nmt {

// PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(pos / 10000^(2i/D)).
void sinusoidal_positions(int64_t max_positions, int64_t D, Tensor& table);
// The tensor2tensor layout Marian and fairseq use: with n = D/2 timescales,
// PE(pos, i) = sin(pos * 10000^(-i/(n-1))) for i < n and
// PE(pos, n + i) = cos(pos * 10000^(-i/(n-1))), computed in float as Marian
// computes it, so an imported model sees the positions it was trained with.
void sinusoidal_positions_concat(int64_t max_positions, int64_t D, Tensor& table);

class Embeddings {
 public:
  Embeddings() = default;
  // table: the (V, D) token matrix, possibly shared with another Embeddings
  // and with the pre-softmax projection.
  Embeddings(ParamStore& store, const std::string& name, const Param* table,
             const ModelConfig& cfg);
  // Computes the sinusoid table, or takes the one that another Embeddings of
  // the same shape computed (a model's encoder and decoder, an ensemble's
  // models); done with the parameters' allocation, so that a model file is
  // checked before its sizes cost any memory.
  void init_tables(Device device);

  // tokens (B*T) ids, I32; the position of column t is pos0 + t. Dropout
  // (seeded) only when training.
  void forward(const Tensor& tokens, int64_t T, int64_t pos0, Tensor& y, bool training,
               uint64_t seed) const;
  // Adds into the token (and learned position) gradients; dscaled: scratch
  // the size of dy.
  void backward(const Tensor& tokens, int64_t T, const Tensor& dy, Tensor& dscaled, Grads& g,
                uint64_t seed) const;

  const Param* table() const { return table_; }
  // The sinusoid table (null with learned positions, or before init_tables).
  const Tensor* sinusoids() const { return sinusoids_.get(); }

 private:
  const Param* table_ = nullptr;
  const Param* learned_pos_ = nullptr;
  std::shared_ptr<const Tensor> sinusoids_;  // (max_positions, D), shared
  int64_t D_ = 0, max_pos_ = 0;
  bool concat_ = false;  // positional "sinusoidal-concat"
  float scale_ = 1.f;
  float dropout_ = 0.f;
};

}  // namespace nmt
