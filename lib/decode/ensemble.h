// Several models translating as one: at every step each member scores the
// same hypotheses from its own caches, and the ensemble's distribution is
// the mean of the members' probabilities (as fairseq averages them; the
// result is a distribution again, so search and scores need nothing else).
// The members share one vocabulary and framing (ensemble_mismatch).
#pragma once

#include <string>
#include <vector>

#include "decode/scorer.h"
#include "model/loaded_model.h"
#include "model/transformer.h"

namespace nmt {

class Ensemble final : public Decodable {
 public:
  explicit Ensemble(std::vector<const Transformer*> members);
  const ModelConfig& config() const override { return members_[0]->config(); }
  Device device() const override { return members_[0]->device(); }
  void start_decoding(const int32_t* src, int64_t B, int64_t S, int64_t beam, int64_t max_len,
                      DecodeState& st, int64_t max_sentences = 0) const override;
  // Returns log(sum of the members' probabilities): log-probabilities up to
  // the constant log(members), which a search's log-softmax takes off.
  const Tensor& step(DecodeState& st, const int32_t* last_tokens) const override;
  void reorder(DecodeState& st, const std::vector<int64_t>& keep, const std::vector<int64_t>& rows,
               int64_t new_beam) const override;
  bool can_add_sentences() const override { return true; }
  void add_sentences(const int32_t* src, int64_t n, int64_t S, DecodeState& st) const override;
  const std::vector<const Transformer*>& members() const { return members_; }

 private:
  void mirror(DecodeState& st) const;
  // One shortlist for all: the members' output columns are combined.
  void share_vocab(DecodeState& st) const;
  void mask_columns(DecodeState& st) const;
  std::vector<const Transformer*> members_;
};

// Empty if the models (loaded from `names`) can form an ensemble, else why
// not ("b.nmt: its vocabulary differs from a.nmt's"): the same
// vocabularies, token ids, framing, decoder start and position limit.
std::string ensemble_mismatch(const std::vector<LoadedModel>& models,
                              const std::vector<std::string>& names);
// The models' networks, for Ensemble and score_pairs.
std::vector<const Transformer*> networks(const std::vector<LoadedModel>& models);

// Forced decoding with an ensemble: per token, the log of the mean of the
// members' probabilities.
std::vector<ForcedScore> score_pairs(const std::vector<const Transformer*>& members,
                                     const std::vector<std::vector<int32_t>>& src,
                                     const std::vector<std::vector<int32_t>>& tgt,
                                     int64_t batch_tokens = 4096,
                                     const std::function<void(int64_t)>& on_batch = {});

}  // namespace nmt
