// Forced decoding: the log-probability of given targets under the model,
// from the same teacher-forced forward pass that training uses. Serves
// `nmt score -m` and checks beam scores in the tests.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/transformer.h"

namespace nmt {

struct ForcedScore {
  std::vector<float> token_logprobs;  // one per target token, then </s>
  double total() const;
  double mean() const;  // per token
};

// Batches by target tokens (at most batch_tokens padded tokens a batch);
// results are in input order. on_batch, when set, hears the pairs scored
// so far after each batch (progress).
std::vector<ForcedScore> score_pairs(const Transformer& model,
                                     const std::vector<std::vector<int32_t>>& src,
                                     const std::vector<std::vector<int32_t>>& tgt,
                                     int64_t batch_tokens = 4096,
                                     const std::function<void(int64_t)>& on_batch = {});

// A lower estimate of the memory a batch of this many padded target tokens
// takes in score_pairs: its logits and their log-softmax (f32, one per
// vocabulary entry) and a few vectors of the model's width per layer. A
// batch size refused by it would not have fitted.
double score_batch_memory(const ModelConfig& cfg, int64_t tokens);

}  // namespace nmt
