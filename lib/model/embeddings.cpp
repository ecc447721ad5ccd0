#include "model/embeddings.h"

#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

#include "ops/ops.h"

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

void sinusoidal_positions_concat(int64_t max_positions, int64_t D, Tensor& table) {
  table.resize(Shape{max_positions, D});
  const int64_t n = D / 2;
  const float increment = std::log(10000.f) / (static_cast<float>(D) / 2 - 1.f);
  for (int64_t pos = 0; pos < max_positions; ++pos)
    for (int64_t i = 0; i < D; ++i) {
      const float v = static_cast<float>(pos) * std::exp(static_cast<float>(i % n) * -increment);
      table.data()[pos * D + i] = i < n ? std::sin(v) : std::cos(v);
    }
}

Embeddings::Embeddings(ParamStore& store, const std::string& name, const Param* table,
                       const ModelConfig& cfg)
    : table_(table),
      D_(cfg.d_model),
      max_pos_(cfg.max_positions),
      concat_(cfg.positional == "sinusoidal-concat"),
      scale_(cfg.scale_embeddings ? std::sqrt(static_cast<float>(cfg.d_model)) : 1.f),
      dropout_(cfg.dropout) {
  if (cfg.positional == "learned")
    learned_pos_ = store.add(name + "/positions", Shape{max_pos_, D_}, Init::Normal,
                             1.f / std::sqrt(static_cast<float>(D_)), /*quantisable=*/false);
}

namespace {

// One table per shape, kind and device, alive while an Embeddings holds it:
// 0.5 MiB at transformer-base's 256 x 512, which a second copy would add to
// an int8 model of 53.
std::shared_ptr<const Tensor> shared_sinusoids(int64_t max_pos, int64_t D, bool concat,
                                               Device device) {
  static std::mutex mu;
  static std::map<std::tuple<int64_t, int64_t, bool, Device>, std::weak_ptr<const Tensor>> tables;
  std::lock_guard<std::mutex> lock(mu);
  std::weak_ptr<const Tensor>& slot = tables[{max_pos, D, concat, device}];
  if (auto t = slot.lock()) return t;
  Tensor host;  // computed on the host, then placed
  if (concat)
    sinusoidal_positions_concat(max_pos, D, host);
  else
    sinusoidal_positions(max_pos, D, host);
  auto t = std::make_shared<Tensor>();
  if (device == Device::CPU) {
    *t = std::move(host);
  } else {
    t->resize(host.shape(), device);
    ops::upload(host.data(), *t);
  }
  slot = t;
  return t;
}

}  // namespace

void Embeddings::init_tables(Device device) {
  if (learned_pos_ || sinusoids_) return;
  sinusoids_ = shared_sinusoids(max_pos_, D_, concat_, device);
}

void Embeddings::forward(const Tensor& tokens, int64_t T, int64_t pos0, Tensor& y, bool training,
                         uint64_t seed) const {
  ops::embedding(table_->value, tokens, learned_pos_ ? learned_pos_->value : *sinusoids_, pos0, T,
                 scale_, y, table_->int8_scales());
  if (training) ops::dropout_(y, dropout_, seed);
}

void Embeddings::backward(const Tensor& tokens, int64_t T, const Tensor& dy, Tensor& dscaled,
                          Grads& g, uint64_t seed) const {
  ops::copy(dy, dscaled);
  ops::dropout_(dscaled, dropout_, seed);
  Tensor dtable = g.of(table_);
  Tensor dpos;
  if (learned_pos_) dpos = g.of(learned_pos_);
  ops::embedding_backward(tokens, dscaled, T, scale_, dtable, learned_pos_ ? &dpos : nullptr);
}

}  // namespace nmt
