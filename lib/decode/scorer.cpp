#include "decode/scorer.h"

#include <algorithm>
#include <numeric>

#include "core/token_batches.h"
#include "ops/ops.h"

namespace nmt {

double ForcedScore::total() const {
  return std::accumulate(token_logprobs.begin(), token_logprobs.end(), 0.0);
}

double ForcedScore::mean() const {
  return token_logprobs.empty() ? 0.0 : total() / static_cast<double>(token_logprobs.size());
}

std::vector<ForcedScore> score_pairs(const Transformer& model,
                                     const std::vector<std::vector<int32_t>>& src,
                                     const std::vector<std::vector<int32_t>>& tgt,
                                     int64_t batch_tokens,
                                     const std::function<void(int64_t)>& on_batch) {
  const size_t n = src.size();
  std::vector<ForcedScore> out(n);
  // Sort by length so batches carry little padding; results go back by index.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::max(src[a].size(), tgt[a].size()) < std::max(src[b].size(), tgt[b].size());
  });
  Activations acts;
  Tensor logp;
  std::vector<float> picked;
  size_t i = 0;
  for (size_t end : token_batch_ends(n, batch_tokens, [&](size_t k) {
         return static_cast<int64_t>(std::max(src[order[k]].size(), tgt[order[k]].size())) + 1;
       })) {
    std::vector<const std::vector<int32_t>*> bs, bt;
    std::vector<size_t> idx;
    for (; i < end; ++i) {
      bs.push_back(&src[order[i]]);
      bt.push_back(&tgt[order[i]]);
      idx.push_back(order[i]);
    }
    TokenBatch b = make_batch(bs, bt, model.config());
    model.forward(b, acts, /*training=*/false, 0);
    ops::log_softmax(acts.logits, logp);
    ops::pick(logp, b.tgt_out, picked);  // padding picks nothing
    for (int64_t r = 0; r < b.B; ++r) {
      auto& s = out[idx[r]].token_logprobs;
      for (int64_t t = 0; t < b.T; ++t) {
        if (b.tgt_out[r * b.T + t] == kNoToken) break;
        s.push_back(picked[r * b.T + t]);
      }
    }
    if (on_batch) on_batch(static_cast<int64_t>(i));
  }
  return out;
}

double score_batch_memory(const ModelConfig& cfg, int64_t tokens) {
  const double per_token =
      4.0 * (2.0 * double(cfg.vocab_size) +
             4.0 * double(cfg.d_model) * double(cfg.encoder_layers + cfg.decoder_layers));
  return per_token * static_cast<double>(tokens);
}

}  // namespace nmt
