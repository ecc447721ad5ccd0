// Shared helpers for the tests: random tensors, a tiny model factory and the
// central finite-difference gradient checker.
#pragma once

#include <catch2/catch.hpp>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"
#include "model/params.h"

#ifndef NMT_DATA_DIR
#define NMT_DATA_DIR "../shared/data"
#endif
#ifndef NMT_SOURCE_DIR
#define NMT_SOURCE_DIR "."
#endif

namespace nmt::test {

inline void fill_random(Tensor& t, uint32_t seed, float scale = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = d(g);
}

constexpr float kInf = std::numeric_limits<float>::infinity();

// n normal draws of `scale` around `offset`.
inline std::vector<float> randv(int64_t n, uint32_t seed, float scale = 1.f, float offset = 0.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = offset + d(g);
  return v;
}

inline double dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += double(a.data()[i]) * b.data()[i];
  return s;
}

inline ModelConfig tiny_config(int vocab = 24) {
  ModelConfig c;
  c.name = "test";
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.d_model = 16;
  c.d_ff = 32;
  c.heads = 4;
  c.d_k = c.d_v = 4;
  c.dropout = 0.f;
  c.label_smoothing = 0.1f;
  c.max_positions = 64;
  c.vocab_size = vocab;
  return c;
}

// Checks analytic gradients against central differences at a sample of
// entries of each (value, grad) pair. `loss` recomputes the forward pass.
struct GradTarget {
  std::string name;
  float* value;
  const float* grad;
  int64_t n;
};

inline void check_gradients(const std::function<double()>& loss,
                            const std::vector<GradTarget>& targets, int samples = 12,
                            double h = 1e-2, double rtol = 3e-2, double atol = 2e-3) {
  std::mt19937 g(7);
  for (const auto& t : targets) {
    std::uniform_int_distribution<int64_t> pick(0, t.n - 1);
    for (int s = 0; s < samples; ++s) {
      const int64_t i = pick(g);
      const float old = t.value[i];
      t.value[i] = old + static_cast<float>(h);
      const double up = loss();
      t.value[i] = old - static_cast<float>(h);
      const double down = loss();
      t.value[i] = old;
      double numeric = (up - down) / (2 * h);
      const double analytic = t.grad[i];
      auto fd = [&](double hh) {
        t.value[i] = old + static_cast<float>(hh);
        const double u = loss();
        t.value[i] = old - static_cast<float>(hh);
        const double d = loss();
        t.value[i] = old;
        return (u - d) / (2 * hh);
      };
      // A ReLU kink inside [-h, h] spoils a central difference; a retry
      // at smaller steps tells a kink from a wrong gradient.
      for (double hh : {h / 4, h / 16, h / 64})
        if (std::abs(analytic - numeric) > atol + rtol * std::abs(analytic)) numeric = fd(hh);
      INFO(t.name << "[" << i << "]: analytic " << analytic << " numeric " << numeric);
      CHECK(std::abs(analytic - numeric) <=
            atol + rtol * std::max(std::abs(analytic), std::abs(numeric)));
    }
  }
}

inline std::vector<GradTarget> param_targets(ParamStore& store, Grads& grads) {
  std::vector<GradTarget> out;
  for (const Param& p : store.params())
    out.push_back({p.name, store.value(&p).data(), grads.of(&p).data(), p.shape.numel()});
  return out;
}

// Fills every parameter of a store with random values (non-zero biases and
// shifts too, so that their gradients are exercised).
inline void randomize(ParamStore& store, uint32_t seed, float scale = 0.5f) {
  for (const Param& p : store.params()) {
    Tensor v = store.value(&p);
    fill_random(v, seed++, scale);
  }
}

}  // namespace nmt::test

#include "model/transformer.h"
#include "ops/ops.h"
#include "train/optimizer.h"

namespace nmt::test {

// Random id sequences over the symbols 4 .. vocab-1.
inline std::vector<std::vector<int32_t>> random_sequences(int n, int min_len, int max_len,
                                                          int vocab, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> len(min_len, max_len), sym(4, vocab - 1);
  std::vector<std::vector<int32_t>> out(n);
  for (auto& s : out) {
    s.resize(len(g));
    for (auto& t : s) t = sym(g);
  }
  return out;
}

// Trains `model` to copy its input (reverse=true: to reverse it) with the
// library's Adam; returns the last batch's mean label-smoothed loss per token.
inline double train_copy_task(Transformer& model, int steps, bool reverse = false,
                              uint32_t seed = 1) {
  ops::set_num_threads(0);  // also flushes denormals (see cpu/onednn.h)
  ParamStore& ps = model.params();
  Grads grads(ps);
  Activations acts;
  Adam adam(ps.size(), ps.device());
  double last = 0;
  Tensor dlogits;
  for (int step = 1; step <= steps; ++step) {
    const ModelConfig& cfg = model.config();
    auto src = random_sequences(32, 2, 8, std::min(cfg.vocab_size, cfg.source_vocab()),
                                seed * 100003u + step);
    auto tgt = src;
    if (reverse)
      for (auto& t : tgt) std::reverse(t.begin(), t.end());
    std::vector<const std::vector<int32_t>*> ps_src, ps_tgt;
    for (size_t i = 0; i < src.size(); ++i) ps_src.push_back(&src[i]), ps_tgt.push_back(&tgt[i]);
    TokenBatch b = make_batch(ps_src, ps_tgt, cfg);
    grads.zero();
    model.forward(b, acts, true, step);
    const auto stats = ops::label_smoothed_xent(acts.logits, acts.tgt_out_ids, 0.0f, kNoToken,
                                                &dlogits, 1.f / static_cast<float>(b.tgt_tokens()));
    last = stats.loss / stats.tokens;
    model.backward(b, acts, dlogits, grads);
    // Warm up, then decay linearly to a tenth: the last steps settle the model.
    const float lr = 3e-3f * std::min(1.f, step / 50.f) * (1.f - 0.9f * step / steps);
    adam.update(ps.values(), grads.buffer(), lr);
  }
  return last;
}

}  // namespace nmt::test
