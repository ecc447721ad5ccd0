#include "model/embeddings.h"

#include <cmath>

#include "core/elementwise.h"
#include "core/error.h"

namespace nmt {

void sinusoidal_positions(int64_t max_positions, int64_t D, Tensor& table) {
  table.resize(Shape{max_positions, D});
  for (int64_t pos = 0; pos < max_positions; ++pos)
    for (int64_t i = 0; i < D; i += 2) {
      // Computed in double: positions in the hundreds lose digits in float.
      const double angle = pos / std::pow(10000.0, static_cast<double>(i) / D);
      table.data()[pos * D + i] = static_cast<float>(std::sin(angle));
      if (i + 1 < D) table.data()[pos * D + i + 1] = static_cast<float>(std::cos(angle));
    }
}

Embeddings::Embeddings(ParamStore& store, const std::string& name, Param* table,
                       const ModelConfig& cfg)
    : table_(table),
      D_(cfg.d_model),
      V_(cfg.vocab_size),
      max_pos_(cfg.max_positions),
      dropout_(cfg.dropout) {
  if (cfg.positional == "learned")
    learned_pos_ = store.add(name + "/positions", Shape{max_pos_, D_}, Init::Normal,
                             1.f / std::sqrt(static_cast<float>(D_)));
}

void Embeddings::init_tables() {
  if (!learned_pos_ && sinusoids_.empty()) sinusoidal_positions(max_pos_, D_, sinusoids_);
}

void Embeddings::forward(const int32_t* tokens, int64_t B, int64_t T, int64_t pos0, Tensor& y,
                         bool training, uint64_t seed) {
  lookup(tokens, B, T, pos0, y);
  seed_ = seed;
  if (training) cpu::dropout(y.data(), y.numel(), dropout_, seed_);
}

void Embeddings::lookup(const int32_t* tokens, int64_t B, int64_t T, int64_t pos0,
                        Tensor& y) const {
  if (pos0 + T > max_pos_)
    throw Error("sequence of " + std::to_string(pos0 + T) + " tokens exceeds max_positions " +
                std::to_string(max_pos_));
  y.resize(Shape{B * T, D_});
  const float scale = std::sqrt(static_cast<float>(D_));
  const float* E = table_->value.data();
  const float* P = learned_pos_ ? learned_pos_->value.data() : sinusoids_.data();
  for (int64_t r = 0; r < B * T; ++r)
    if (tokens[r] < 0 || tokens[r] >= V_)
      throw Error("token id " + std::to_string(tokens[r]) + " is outside the vocabulary of " +
                  std::to_string(V_));
#pragma omp parallel for if (B * T * D_ > 65536)
  for (int64_t r = 0; r < B * T; ++r) {
    const float* e = E + static_cast<int64_t>(tokens[r]) * D_;
    const float* p = P + (pos0 + r % T) * D_;
    float* out = y.data() + r * D_;
    for (int64_t i = 0; i < D_; ++i) out[i] = e[i] * scale + p[i];
  }
}

void Embeddings::backward(const int32_t* tokens, int64_t B, int64_t T, const Tensor& dy) {
  dscaled_.resize(dy.shape());
  std::copy(dy.data(), dy.data() + dy.numel(), dscaled_.data());
  cpu::dropout_backward(dscaled_.data(), dscaled_.numel(), dropout_, seed_);
  const float scale = std::sqrt(static_cast<float>(D_));
  float* dE = table_->grad.data();
  // Sequential over rows: the same token may appear many times, and a fixed
  // order keeps training deterministic.
  for (int64_t r = 0; r < B * T; ++r) {
    const float* g = dscaled_.data() + r * D_;
    float* de = dE + static_cast<int64_t>(tokens[r]) * D_;
    for (int64_t i = 0; i < D_; ++i) de[i] += g[i] * scale;
    if (learned_pos_) {
      float* dp = learned_pos_->grad.data() + (r % T) * D_;
      for (int64_t i = 0; i < D_; ++i) dp[i] += g[i];
    }
  }
}

}  // namespace nmt
