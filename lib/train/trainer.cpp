#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <sstream>

#include "core/error.h"
#include "core/rng.h"
#include "decode/search.h"
#include "io/json.h"
#include "metrics/bleu.h"
#include "model/model_file.h"
#include "model/vocab.h"
#include "ops/ops.h"

namespace nmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

Trainer::Trainer(Transformer& model, const ParallelCorpus& train, const TrainOptions& opts,
                 Comm& comm)
    : model_(model),
      train_(train),
      opts_(opts),
      comm_(comm),
      stream_(train, opts.batch_tokens, opts.seed),
      adam_(model.params().size(), model.params().device()),
      grads_(model.params()),
      sync_(comm, grads_),
      shape_(opts.lr_schedule),
      step_totals_(Shape{4}, model.params().device(), DType::F64) {
  if (!model.params().values().numel()) throw Error("Trainer: the model is not initialised");
}

// An update takes update_freq x ranks batches off the stream, in an order
// that depends only on the seed; this process computes every ranks-th one,
// starting at its rank, so that N processes compute what one does with
// --update-freq N (the gradients summed, the loss normalised by all the
// update's target tokens).
StepStats Trainer::step() {
  const auto t0 = std::chrono::steady_clock::now();
  const int ranks = comm_.size(), rank = comm_.rank();
  std::vector<std::pair<int64_t, TokenBatch>> mine;  // (index within the update, batch)
  StepStats s;
  for (int64_t k = 0; k < opts_.update_freq * ranks; ++k) {
    const std::vector<int64_t>& idx = stream_.next();
    s.sentences += static_cast<int64_t>(idx.size());
    for (int64_t i : idx) {
      s.src_tokens += static_cast<int64_t>(train_.src[i].size()) + 1;
      s.tgt_tokens += static_cast<int64_t>(train_.tgt[i].size()) + 1;
    }
    if (k % ranks == rank) mine.emplace_back(k, gather_batch(train_, idx, model_.config()));
  }
  grads_.zero();
  const float grad_scale = 1.f / static_cast<float>(std::max<int64_t>(s.tgt_tokens, 1));
  const uint64_t step_seed = mix_seed(opts_.seed, static_cast<uint64_t>(step_ + 1));
  // This process's loss and nll over its batches, then the gradient's sum
  // of squares, summed on the model's device: the host reads them once,
  // after the update is queued, not between a batch's passes.
  step_totals_.zero();
  for (size_t j = 0; j < mine.size(); ++j) {
    const auto& [k, b] = mine[j];
    model_.forward(b, acts_, true, mix_seed(step_seed, static_cast<uint64_t>(k)));
    ops::add_label_smoothed_xent(acts_.logits, acts_.tgt_out_ids, model_.config().label_smoothing,
                                 kNoToken, &dlogits_, grad_scale, step_totals_);
    if (j + 1 == mine.size()) sync_.arm();  // the last pass: sum layers as they finish
    model_.backward(b, acts_, dlogits_, grads_);
  }
  sync_.finish();
  apply_update(s);
  double totals[4];  // step_totals_'s four
  ops::read_f64(step_totals_, totals);
  s.grad_norm = std::sqrt(totals[3]);
  comm_.sum(totals, 2);
  const double tok = static_cast<double>(std::max<int64_t>(s.tgt_tokens, 1));
  s.loss = totals[0] / tok;
  s.nll = totals[1] / tok;
  s.ppl = std::exp(s.nll);
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

void Trainer::apply_update(StepStats& s) {
  Tensor& grads = grads_.buffer();
  // The norm stays on the device: Adam clips by it there.
  ops::sum_squares(grads, step_totals_, 3);
  ++step_;
  s.lr = schedule_lr(shape_, step_, model_.config().d_model, opts_.warmup_steps, opts_.lr_scale,
                     schedule_steps_);
  adam_.update(model_.params().values(), grads, s.lr, &step_totals_, 3, opts_.clip_norm);
  s.step = step_;
  s.epoch = stream_.epoch();
  s.epoch_progress =
      static_cast<double>(stream_.epoch()) +
      static_cast<double>(stream_.index()) / static_cast<double>(stream_.batches_per_epoch());
}

double measure_update_seconds(Transformer& model, const ParallelCorpus& corpus,
                              int64_t batch_tokens, uint64_t seed, double* fill) {
  BatchStream stream(corpus, batch_tokens, seed);
  Activations acts;
  Grads grads(model.params());
  Tensor dlogits;
  std::vector<double> times;
  int64_t tgt = 0, budget = 0;
  // Each batch twice, timing the second pass: the first builds the
  // primitives of its shape, which a long run builds once and reuses. The
  // median of the batches, each scaled to a full batch.
  const int64_t n = std::min<int64_t>(5, stream.batches_per_epoch());
  for (int64_t k = 0; k < n; ++k) {
    const std::vector<int64_t>& idx = stream.next();
    const TokenBatch b = gather_batch(corpus, idx, model.config());
    int64_t t = 0;
    size_t ls = 0, lt = 0;
    for (int64_t i : idx) {
      ls = std::max(ls, corpus.src[i].size() + 1);
      lt = std::max(lt, corpus.tgt[i].size() + 1);
      t += static_cast<int64_t>(corpus.tgt[i].size()) + 1;
    }
    const auto padded = static_cast<int64_t>(std::max(ls, lt) * idx.size());
    double sec = 0;
    for (int pass = 0; pass < 2; ++pass) {
      const auto t0 = std::chrono::steady_clock::now();
      grads.zero();
      model.forward(b, acts, true, mix_seed(seed, 0x9e0be + static_cast<uint64_t>(k)));
      ops::label_smoothed_xent(acts.logits, acts.tgt_out_ids, model.config().label_smoothing,
                               kNoToken, &dlogits,
                               1.f / static_cast<float>(std::max<int64_t>(t, 1)));
      model.backward(b, acts, dlogits, grads);
      sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    tgt += t;
    budget += padded;
    times.push_back(sec * double(batch_tokens) / double(std::max<int64_t>(padded, 1)));
  }
  if (fill) *fill = budget ? double(tgt) / double(budget) : 1.0;
  if (times.empty()) return 0;
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

namespace {

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(ids[i]);
  }
  return s;
}

}  // namespace

ValidStats Trainer::validate(const ParallelCorpus& valid, const Vocab* vocab,
                             const std::vector<std::string>* ref_lines, int64_t max_bleu) {
  const ModelConfig& cfg = model_.config();
  ValidStats v;
  double loss = 0, nll = 0;
  for (const auto& idx : sequential_batches(valid, opts_.batch_tokens)) {
    throw_if_stopped(stop_);
    const TokenBatch b = gather_batch(valid, idx, cfg);
    model_.forward(b, acts_, false, 0);
    const ops::LossTotals l = ops::label_smoothed_xent(acts_.logits, acts_.tgt_out_ids,
                                                       cfg.label_smoothing, kNoToken, nullptr, 1.f);
    loss += l.loss;
    nll += l.nll;
    v.tokens += l.tokens;
  }
  v.sentences = valid.size();
  const double tok = static_cast<double>(std::max<int64_t>(v.tokens, 1));
  v.loss = loss / tok;
  v.nll = nll / tok;
  v.ppl = std::exp(v.nll);
  if (max_bleu < 0 || valid.size() == 0) return v;
  greedy_bleu(valid, vocab, ref_lines, max_bleu, v);
  return v;
}

void Trainer::greedy_bleu(const ParallelCorpus& valid, const Vocab* vocab,
                          const std::vector<std::string>* ref_lines, int64_t max_bleu,
                          ValidStats& v) const {
  // Greedy decoding of the first n sentences, in length-sorted groups.
  const ModelConfig& cfg = model_.config();
  const int64_t n = max_bleu == 0 ? valid.size() : std::min<int64_t>(valid.size(), max_bleu);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return valid.src[a].size() < valid.src[b].size(); });
  std::vector<std::string> hyps(n), refs(n);
  DecodeState state;
  SearchOptions so;
  so.beam = 1;
  so.n_best = 1;
  so.stop = stop_;
  constexpr int64_t kGroup = 64;
  for (int64_t g = 0; g < n; g += kGroup) {
    std::vector<std::vector<int32_t>> src;
    int64_t longest = 0;
    for (int64_t k = g; k < std::min(n, g + kGroup); ++k) {
      src.push_back(valid.src[order[k]]);
      longest = std::max<int64_t>(longest, valid.src[order[k]].size());
    }
    // A bound that an untrained model (which rarely stops) reaches quickly,
    // and that stays within the model's positions.
    so.max_len_a = 0.f;
    so.max_len_b = static_cast<int>(std::min<int64_t>(cfg.max_positions - 1, longest * 3 / 2 + 10));
    const auto out = search(model_, src, so, state);
    for (size_t k = 0; k < out.size(); ++k) {
      const int64_t i = order[g + static_cast<int64_t>(k)];
      const std::vector<int32_t> empty;
      const std::vector<int32_t>& toks = out[k].empty() ? empty : out[k][0].tokens;
      hyps[i] = vocab ? vocab->decode(toks) : join_ids(toks);
    }
  }
  for (int64_t i = 0; i < n; ++i)
    refs[i] = (vocab && ref_lines) ? (*ref_lines)[valid.line[i]] : join_ids(valid.tgt[i]);
  metrics::BleuOptions bo;
  bo.tokenizer = opts_.valid_tokenize;
  const metrics::BleuScore b = metrics::corpus_bleu(hyps, {refs}, bo);
  v.has_bleu = true;
  v.bleu = b.score;
  v.bleu_text = b.text();
  v.bleu_sentences = n;
  v.hyps = std::move(hyps);
}

void Trainer::save(const std::string& path, const std::string& spm_model, const json& extra) {
  std::map<std::string, std::string> meta;
  meta["format"] = "nmt";
  meta["format_version"] = std::to_string(kModelFormatVersion);
  meta["config"] = config_to_json(model_.config()).dump();
  const json st = {{"step", step_},
                   {"epoch", stream_.epoch()},
                   {"batch_index", stream_.index()},
                   {"seed", opts_.seed},
                   {"adam_t", adam_.t()},
                   {"batch_tokens", opts_.batch_tokens},
                   {"update_freq", opts_.update_freq},
                   {"train_pairs", train_.size()},
                   {"ranks", comm_.size()},
                   {"extra", extra}};
  meta["training_state"] = st.dump();
  std::vector<NamedTensor> tensors;
  // Host memory, or host copies of what lives on another device.
  std::vector<float> values_h, m_h, v_h;
  const float* values = ops::host_data(model_.params().values(), values_h);
  for (const auto& p : model_.params().params())
    tensors.push_back({p.name, p.shape, values + p.offset});
  const int64_t n = model_.params().size();
  tensors.push_back({kAdamMTensor, Shape{n}, ops::host_data(adam_.m(), m_h)});
  tensors.push_back({kAdamVTensor, Shape{n}, ops::host_data(adam_.v(), v_h)});
  std::map<std::string, std::string> bytes;
  if (!spm_model.empty()) bytes["vocab/sentencepiece"] = spm_model;
  meta["checksum"] = content_checksum(meta, tensors, bytes);
  write_safetensors(path, meta, tensors, bytes);
}

TrainState Trainer::load(const FileContents& f, bool new_data) {
  TrainState s = read_train_state(f);
  if (s.seed != opts_.seed)
    throw Error(f.source + ": checkpoint seed " + std::to_string(s.seed) +
                " differs from the trainer's " + std::to_string(opts_.seed));
  const int64_t bt = s.batch_tokens;
  if (bt != opts_.batch_tokens)
    throw InputError(f.source + ": the checkpoint was trained with {batch_tokens} " +
                     std::to_string(bt) + ", not " + std::to_string(opts_.batch_tokens) +
                     "; resume with the same value");
  const int64_t pairs = s.train_pairs;
  if (pairs != train_.size() && !new_data)
    throw InputError(f.source + ": the checkpoint was trained on " + std::to_string(pairs) +
                     " sentence pairs but the training data now has " +
                     std::to_string(train_.size()) + "; resume with the same data");
  load_weights(f, model_);
  const int64_t n = model_.params().size();
  std::vector<float> staging(static_cast<size_t>(n));
  for (auto [name, moment] :
       {std::pair{kAdamMTensor, &adam_.m()}, std::pair{kAdamVTensor, &adam_.v()}}) {
    f.read_f32(name, Shape{n}, staging.data());
    ops::upload(staging.data(), *moment);
  }
  adam_.set_t(s.adam_t);
  step_ = s.step;
  try {
    stream_.seek(s.epoch, s.batch_index);
  } catch (const InputError&) {
    if (!new_data) throw;
    stream_.seek(s.epoch + 1, 0);  // fewer batches now: the epoch is over
  }
  return s;
}

}  // namespace nmt
