#include "decode/ensemble.h"

#include <cmath>

#include "core/error.h"
#include "model/config.h"
#include "model/model_file.h"
#include "ops/ops.h"

namespace nmt {

Ensemble::Ensemble(std::vector<const Transformer*> members) : members_(std::move(members)) {
  if (members_.empty()) throw Error("an ensemble needs a model");
  for (const Transformer* m : members_)
    if (m->device() != members_[0]->device())
      throw Error("an ensemble's models must be on one device");
}

void Ensemble::mirror(DecodeState& st) const {
  const DecodeState& first = st.ensemble.members[0];
  st.B = first.B, st.beam = first.beam, st.S = first.S;
}

void Ensemble::share_vocab(DecodeState& st) const {
  for (DecodeState& m : st.ensemble.members) {
    m.out.vocab = st.out.vocab;
    m.out.own_columns = st.out.own_columns;
  }
  mask_columns(st);
}

// The members' log-probabilities are combined over each sentence's own
// columns alone (a shortlist): own_columns as a mask of 0 and -inf.
void Ensemble::mask_columns(DecodeState& st) const {
  const ops::ColumnLists& own = st.out.own_columns;
  if (own.size() <= 0) {
    st.ensemble.column_mask.resize(Shape{0});
    return;
  }
  const int64_t W = st.out.vocab.empty() ? members_[0]->config().vocab_size
                                         : static_cast<int64_t>(st.out.vocab.size());
  std::vector<float> mask(static_cast<size_t>(own.size() * W), -INFINITY);
  for (int64_t s = 0; s < own.size(); ++s)
    for (int64_t i = own.offsets[s]; i < own.offsets[s + 1]; ++i) mask[s * W + own.cols[i]] = 0.f;
  st.ensemble.column_mask.resize(Shape{own.size(), W}, members_[0]->device());
  ops::upload(mask.data(), st.ensemble.column_mask);
}

void Ensemble::start_decoding(const int32_t* src, int64_t B, int64_t S, int64_t beam,
                              int64_t max_len, DecodeState& st, int64_t max_sentences) const {
  st.ensemble.members.resize(members_.size());
  share_vocab(st);
  for (size_t m = 0; m < members_.size(); ++m)
    members_[m]->start_decoding(src, B, S, beam, max_len, st.ensemble.members[m], max_sentences);
  mirror(st);
}

void Ensemble::add_sentences(const int32_t* src, int64_t n, int64_t S, DecodeState& st) const {
  share_vocab(st);
  for (size_t m = 0; m < members_.size(); ++m)
    members_[m]->add_sentences(src, n, S, st.ensemble.members[m]);
  mirror(st);
}

const Tensor& Ensemble::step(DecodeState& st, const int32_t* last_tokens) const {
  for (size_t m = 0; m < members_.size(); ++m) {
    DecodeState& ms = st.ensemble.members[m];
    members_[m]->step(ms, last_tokens);
    if (st.ensemble.column_mask.numel())
      ops::add_group_rows_(ms.step.logits, st.ensemble.column_mask, ms.beam);
    if (m == 0) {
      ops::log_softmax(ms.step.logits, st.step.logits);
    } else {
      ops::log_softmax(ms.step.logits, ms.step.logits);
      ops::log_add_exp_(st.step.logits, ms.step.logits);
    }
  }
  mirror(st);
  return st.step.logits;
}

void Ensemble::reorder(DecodeState& st, const std::vector<int64_t>& keep,
                       const std::vector<int64_t>& rows, int64_t new_beam) const {
  for (size_t m = 0; m < members_.size(); ++m)
    members_[m]->reorder(st.ensemble.members[m], keep, rows, new_beam);
  mirror(st);
  const ops::ColumnLists& kept = st.ensemble.members[0].out.own_columns;
  if (kept.offsets != st.out.own_columns.offsets || kept.cols != st.out.own_columns.cols) {
    st.out.own_columns = kept;
    mask_columns(st);
  }
}

std::string ensemble_mismatch(const std::vector<LoadedModel>& models,
                              const std::vector<std::string>& names) {
  auto vocab = [](const LoadedModel& l) {
    return vocab_tensors(l.vocab, l.source_vocab ? &*l.source_vocab : nullptr);
  };
  const ModelConfig& a = models[0].config;
  const VocabTensors va = vocab(models[0]);
  for (size_t m = 1; m < models.size(); ++m) {
    const ModelConfig& b = models[m].config;
    const std::string who = names[m] + ": ", than = " differs from " + names[0] + "'s";
    if (vocab(models[m]) != va || b.vocab_size != a.vocab_size ||
        b.source_vocab() != a.source_vocab())
      return who + "its vocabulary" + than + " (an ensemble reads and writes one vocabulary)";
    if (b.pad_id != a.pad_id || b.unk_id != a.unk_id || b.bos_id != a.bos_id ||
        b.eos_id != a.eos_id || b.decoder_start != a.decoder_start ||
        b.source_bos != a.source_bos || b.source_eos != a.source_eos ||
        b.output_unk != a.output_unk)
      return who + "its token ids or sentence framing" + than;
    if (b.max_positions != a.max_positions)
      return who + "its max_positions " + std::to_string(b.max_positions) + than + " (" +
             std::to_string(a.max_positions) + ")";
  }
  return "";
}

std::vector<const Transformer*> networks(const std::vector<LoadedModel>& models) {
  std::vector<const Transformer*> nets;
  for (const LoadedModel& l : models) nets.push_back(l.net.get());
  return nets;
}

std::vector<ForcedScore> score_pairs(const std::vector<const Transformer*>& members,
                                     const std::vector<std::vector<int32_t>>& src,
                                     const std::vector<std::vector<int32_t>>& tgt,
                                     int64_t batch_tokens,
                                     const std::function<void(int64_t)>& on_batch) {
  if (members.empty()) throw Error("an ensemble needs a model");
  std::vector<std::vector<ForcedScore>> each;
  for (size_t m = 0; m < members.size(); ++m)
    each.push_back(score_pairs(*members[m], src, tgt, batch_tokens, [&](int64_t done) {
      if (on_batch)
        on_batch((static_cast<int64_t>(m) * static_cast<int64_t>(src.size()) + done) /
                 static_cast<int64_t>(members.size()));
    }));
  // log((1/M) sum_m exp(lp_m)), per token, from the largest term.
  std::vector<ForcedScore> out = each[0];
  const double log_m = std::log(static_cast<double>(members.size()));
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t t = 0; t < out[i].token_logprobs.size(); ++t) {
      double hi = -INFINITY;
      for (const auto& e : each) hi = std::max(hi, static_cast<double>(e[i].token_logprobs[t]));
      if (hi == -INFINITY) continue;  // every member rules the token out
      double sum = 0;
      for (const auto& e : each) sum += std::exp(e[i].token_logprobs[t] - hi);
      out[i].token_logprobs[t] = static_cast<float>(hi + std::log(sum) - log_m);
    }
  return out;
}

}  // namespace nmt
