#include "model/forward_timing.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/arena.h"

namespace nmt {

ForwardTiming time_forward_pass(const Transformer& model, int batch, int length) {
  const ModelConfig& cfg = model.config();
  if (length > cfg.max_positions)
    throw about_option<UsageError>("length", std::to_string(length) + " exceeds the model's " +
                                                 std::to_string(cfg.max_positions) + " positions");
  std::mt19937 g(1);
  std::uniform_int_distribution<int32_t> tok(4, std::min(cfg.vocab_size, cfg.source_vocab()) - 1);
  std::vector<std::vector<int32_t>> sents(batch, std::vector<int32_t>(length - 1));
  for (auto& s : sents)
    for (auto& t : s) t = tok(g);
  std::vector<const std::vector<int32_t>*> ptrs;
  for (auto& s : sents) ptrs.push_back(&s);
  TokenBatch b = make_batch(ptrs, ptrs, cfg);
  Activations acts;
  model.forward(b, acts, false, 0);  // warm-up: builds the primitives
  const int reps = 3;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) model.forward(b, acts, false, 0);
  ForwardTiming out;
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  out.flops_per_token = model.flops_per_token(b.S, b.T);
  out.length = b.T;
  out.target_tokens = b.B * b.T;
  return out;
}

}  // namespace nmt
