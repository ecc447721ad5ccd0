// Every layer's backward pass against central finite differences. The loss
// is L = sum(y * R) for a fixed random R, so dL/dy = R.
#include "model/attention.h"
#include "model/decoder.h"
#include "model/embeddings.h"
#include "model/encoder.h"
#include "model/layers.h"
#include "model/transformer.h"
#include "ops/ops.h"
#include "test_helpers.h"

using namespace nmt;
using namespace nmt::test;

namespace {
// A padded source of B=2: the second sentence is 2 tokens shorter.
Tensor pad_mask(int64_t B, int64_t S) {
  Tensor m(Shape{B, 1, 1, S});
  for (int64_t s = S - 2; s < S; ++s) m.data()[S + s] = -1e9f;
  return m;
}

Tensor causal_mask(int64_t T) {
  Tensor m(Shape{1, 1, T, T});
  ops::causal_mask(m);
  return m;
}
}  // namespace

TEST_CASE("Linear and FeedForward backward match finite differences", "[grad]") {
  for (Activation act :
       {Activation::Relu, Activation::Swish, Activation::Gelu, Activation::GeluTanh}) {
    ParamStore store;
    Linear lin(store, "lin", 6, 5);
    FeedForward ffn(store, "ffn", 6, 12, 0.f, act);
    store.allocate(1);
    Grads g(store);
    randomize(store, 3);  // non-zero biases too
    Tensor x(Shape{7, 6}), R5(Shape{7, 5}), R6(Shape{7, 6}), y, hidden, pre, dhidden, dx, dx2;
    fill_random(x, 1);
    fill_random(R5, 2);
    fill_random(R6, 4);
    // The loss runs the inference path (the activation fused into the
    // GEMM); the gradients come from the training path.
    auto loss = [&] {
      lin.forward(x, y);
      double l = dot(y, R5);
      ffn.forward(x, hidden, nullptr, y, false, 0);
      return l + dot(y, R6);
    };
    loss();
    lin.forward(x, y);
    lin.backward(x, R5, &dx, false, g);
    Tensor* kept = ffn.keeps_pre() ? &pre : nullptr;
    ffn.forward(x, hidden, kept, y, true, 0);
    ffn.backward(x, hidden, kept, R6, dhidden, dx2, g, 0);
    ops::add_(dx, dx2);
    auto targets = param_targets(store, g);
    targets.push_back({"x", x.data(), dx.data(), x.numel()});
    INFO("activation " << static_cast<int>(act));
    check_gradients(loss, targets, 12, 1e-2, 2e-2, 1e-3);
  }
}

TEST_CASE("LayerNorm backward matches finite differences", "[grad]") {
  ParamStore store;
  LayerNorm ln(store, "ln", 8, 1e-5f);
  store.allocate(1);
  Grads g(store);
  randomize(store, 3, 1.f);
  Tensor x(Shape{5, 8}), R(Shape{5, 8}), y, dx;
  NormStats stats;
  fill_random(x, 1);
  fill_random(R, 2);
  auto loss = [&] {
    ln.forward(x, y, &stats);
    return dot(y, R);
  };
  loss();
  ln.backward(x, R, stats, dx, g);
  auto targets = param_targets(store, g);
  targets.push_back({"x", x.data(), dx.data(), x.numel()});
  check_gradients(loss, targets, 12, 1e-2, 3e-2, 2e-3);
}

TEST_CASE("multi-head attention backward matches finite differences (self, causal, cross)",
          "[grad]") {
  const int64_t B = 2, T = 5, S = 6, D = 8, H = 2;
  for (int mode = 0; mode < 3; ++mode) {
    ParamStore store;
    MultiHeadAttention attn(store, "attn", D, H, 4, 3, 0.f, mode != 2);
    store.allocate(11);
    Grads g(store);
    const int64_t Skv = mode == 2 ? S : T;
    Tensor xq(Shape{B * T, D}), xkv(Shape{B * Skv, D}), R(Shape{B * T, D}), y, dxq, dxkv;
    fill_random(xq, 1);
    fill_random(xkv, 2);
    fill_random(R, 3);
    Tensor causal = causal_mask(T), pad = pad_mask(B, Skv);
    const Tensor* mask = mode == 1 ? &causal : &pad;
    const Tensor* kv = mode == 2 ? &xkv : nullptr;
    AttnActs acts;
    AttnGrads scratch;
    auto loss = [&] {
      attn.forward(xq, kv, B, T, Skv, mask, acts, y, true, 5);
      return dot(y, R);
    };
    loss();
    dxkv.resize(xkv.shape());
    dxkv.zero();
    attn.backward(xq, kv, B, T, Skv, acts, R, scratch, dxq, mode == 2 ? &dxkv : nullptr, g, 5);
    auto targets = param_targets(store, g);
    targets.push_back({"xq", xq.data(), dxq.data(), xq.numel()});
    if (mode == 2) targets.push_back({"xkv", xkv.data(), dxkv.data(), xkv.numel()});
    INFO("mode " << mode);
    check_gradients(loss, targets, 10, 1e-2, 3e-2, 2e-3);
  }
}

TEST_CASE("attention dropout backward matches finite differences", "[grad]") {
  const int64_t B = 1, T = 4, D = 8;
  ParamStore store;
  MultiHeadAttention attn(store, "attn", D, 2, 4, 4, 0.3f, true);
  store.allocate(3);
  Grads g(store);
  Tensor x(Shape{B * T, D}), R(Shape{B * T, D}), y, dx;
  fill_random(x, 1);
  fill_random(R, 2);
  AttnActs acts;
  AttnGrads scratch;
  auto loss = [&] {
    attn.forward(x, nullptr, B, T, T, nullptr, acts, y, true, 99);  // same seed: same mask
    return dot(y, R);
  };
  loss();
  attn.backward(x, nullptr, B, T, T, acts, R, scratch, dx, nullptr, g, 99);
  check_gradients(loss, {{"x", x.data(), dx.data(), x.numel()}}, 12, 1e-2, 3e-2, 2e-3);
}

TEST_CASE("encoder and decoder layers backward match finite differences, post-LN and pre-LN",
          "[grad]") {
  // Every FFN activation, each in one norm placement or both.
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"post", "relu"}, {"pre", "relu"},  {"post", "swish"},
      {"pre", "swish"}, {"post", "gelu"}, {"pre", "gelu-tanh"}};
  for (const auto& [norm, activation] : cases) {
    ModelConfig cfg = tiny_config();
    cfg.norm = norm;
    cfg.activation = activation;
    cfg.dropout = 0.2f;  // hash-based masks are fixed for a fixed seed
    const int64_t B = 2, S = 5, T = 4;
    ParamStore store;
    EncoderLayer enc(store, "enc", cfg);
    DecoderLayer dec(store, "dec", cfg);
    store.allocate(5);
    Grads g(store);
    for (const Param& p : store.params())
      if (p.name.find("beta") != std::string::npos || p.name.find("bias") != std::string::npos) {
        Tensor v = store.value(&p);
        fill_random(v, 9, 0.1f);
      }
    Tensor x(Shape{B * S, cfg.d_model}), t(Shape{B * T, cfg.d_model});
    Tensor R1(Shape{B * S, cfg.d_model}), R2(Shape{B * T, cfg.d_model});
    fill_random(x, 1);
    fill_random(t, 2);
    fill_random(R1, 3);
    fill_random(R2, 4);
    Tensor pad = pad_mask(B, S), causal = causal_mask(T);
    EncoderLayerActs ea;
    DecoderLayerActs da;
    auto loss = [&] {
      enc.forward(x, B, S, pad, ea, true, 21);
      DecoderPass pass;
      pass.enc = &enc.output(ea), pass.B = B, pass.T = T, pass.S = S;
      pass.causal = &causal, pass.src_mask = &pad, pass.training = true, pass.seed = 22;
      dec.forward(t, pass, da);
      return dot(enc.output(ea), R1) + dot(dec.output(da), R2);
    };
    loss();
    LayerGrads scratch;
    Tensor dt, denc(Shape{B * S, cfg.d_model}), dx;
    dec.backward(t, enc.output(ea), B, T, S, da, R2, scratch, dt, denc, g, 22);
    ops::add_(denc, R1);
    enc.backward(x, B, S, ea, denc, scratch, dx, g, 21);
    auto targets = param_targets(store, g);
    targets.push_back({"x", x.data(), dx.data(), x.numel()});
    targets.push_back({"t", t.data(), dt.data(), t.numel()});
    INFO("norm " << norm << ", activation " << activation);
    check_gradients(loss, targets, 6, 1e-2, 4e-2, 3e-3);
  }
}

TEST_CASE("whole Transformer with label-smoothed loss matches finite differences", "[grad]") {
  for (int variant = 0; variant < 4; ++variant) {
    ModelConfig cfg = tiny_config();
    if (variant == 1) {
      cfg.tie_embeddings = false;
      cfg.positional = "learned";
    }
    if (variant >= 2) {
      // What imported models have: a source vocabulary of its own, the
      // target embedding as the output projection with a bias, a zero
      // start, Marian's position layout without scaled embeddings, swish,
      // and (variant 3) pre-LN without the final LayerNorms, with </s> = 0.
      cfg.tie_embeddings = false;
      cfg.tie_output = true;
      cfg.src_vocab_size = 30;
      cfg.output_bias = true;
      cfg.decoder_start = "zero";
      cfg.positional = "sinusoidal-concat";
      cfg.scale_embeddings = false;
      cfg.activation = "swish";
      if (variant == 3) {
        cfg.norm = "pre";
        cfg.final_norm = false;
        cfg.eos_id = 0, cfg.unk_id = 1, cfg.pad_id = -1, cfg.bos_id = -1;
      }
    }
    Transformer model(cfg);
    model.init(3);
    if (cfg.output_bias)  // zero at initialisation: make its gradient matter
      for (const Param& p : model.params().params())
        if (p.name == "decoder/output/bias") {
          Tensor v = model.params().value(&p);
          fill_random(v, 8, 0.1f);
        }
    Grads g(model.params());
    // 27 is a source id beyond the target vocabulary where there are two.
    std::vector<int32_t> s1{5, 6, 7, 8}, s2{9, 10, variant >= 2 ? 27 : 19}, t1{11, 12, 13},
        t2{14, 15, 16, 17, 18};
    TokenBatch b = make_batch({&s1, &s2}, {&t1, &t2}, cfg);
    Activations acts;
    Tensor dlogits;
    auto loss = [&] {
      model.forward(b, acts, true, 1);
      return ops::label_smoothed_xent(acts.logits, acts.tgt_out_ids, 0.1f, kNoToken, nullptr, 1.f)
          .loss;
    };
    model.forward(b, acts, true, 1);
    ops::label_smoothed_xent(acts.logits, acts.tgt_out_ids, 0.1f, kNoToken, &dlogits, 1.f);
    model.backward(b, acts, dlogits, g);
    INFO("variant " << variant);
    check_gradients(loss, param_targets(model.params(), g), 4, 1e-2, 5e-2, 3e-3);
  }
}
