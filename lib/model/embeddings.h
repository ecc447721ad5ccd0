// Token embeddings scaled by sqrt(d_model) plus positional encodings
// (sinusoidal, or learned as in Table 3 row E), followed by dropout.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "model/config.h"
#include "model/params.h"

namespace nmt {

// PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(pos / 10000^(2i/D)).
void sinusoidal_positions(int64_t max_positions, int64_t D, Tensor& table);

class Embeddings {
 public:
  Embeddings() = default;
  // table: the (V, D) token matrix, possibly shared with another Embeddings
  // and with the pre-softmax projection.
  Embeddings(ParamStore& store, const std::string& name, const Param* table,
             const ModelConfig& cfg);
  // Computes the sinusoid table; done with the parameters' allocation, so
  // that a model file is checked before its sizes cost any memory.
  void init_tables();

  // tokens (B*T) ids, I32; the position of column t is pos0 + t. Dropout
  // (seeded) only when training.
  void forward(const Tensor& tokens, int64_t T, int64_t pos0, Tensor& y, bool training,
               uint64_t seed) const;
  // Adds into the token (and learned position) gradients; dscaled: scratch
  // the size of dy.
  void backward(const Tensor& tokens, int64_t T, const Tensor& dy, Tensor& dscaled, Grads& g,
                uint64_t seed) const;

  const Param* table() const { return table_; }

 private:
  const Param* table_ = nullptr;
  const Param* learned_pos_ = nullptr;
  Tensor sinusoids_;  // (max_positions, D)
  int64_t D_ = 0, max_pos_ = 0;
  float dropout_ = 0.f;
};

}  // namespace nmt
