#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <sstream>

#include "core/cpu_kernels.h"
#include "core/elementwise.h"
#include "core/error.h"
#include "decode/search.h"
#include "metrics/bleu.h"
#include "model/model_file.h"
#include "model/vocab.h"
#include "train/curve_svg.h"
#include "train/loss.h"

namespace nmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---------------------------------------------------------------------------
// Options

namespace {

std::string option_name(const std::string& key, const std::string& source, bool cli) {
  if (!cli) return source + ": training." + key;
  std::string s = "--" + key;
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

int64_t get_int(const json& v, const std::string& name, int64_t min) {
  if (!v.is_number_integer())
    throw InputError(name + ": expected an integer >= " + std::to_string(min) + ", got " +
                     v.dump());
  const int64_t x =
      v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>();
  if (x < min)
    throw InputError(name + ": expected an integer >= " + std::to_string(min) + ", got " +
                     v.dump());
  return x;
}

double get_num(const json& v, const std::string& name, double min, bool strict) {
  const std::string want =
      std::string("a number ") + (strict ? "> " : ">= ") + (min == 0 ? "0" : std::to_string(min));
  if (!v.is_number()) throw InputError(name + ": expected " + want + ", got " + v.dump());
  const double x = v.get<double>();
  if (!std::isfinite(x) || (strict ? x <= min : x < min))
    throw InputError(name + ": expected " + want + ", got " + v.dump());
  return x;
}

}  // namespace

void apply_training_json(const json& j, TrainOptions& o, const std::string& source, bool cli) {
  if (!j.is_object())
    throw InputError(source + ": \"training\" must be an object, got " +
                     std::string(j.type_name()));
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    const std::string n = option_name(k, source, cli);
    if (k == "batch_tokens")
      o.batch_tokens = get_int(v, n, 1);
    else if (k == "update_freq")
      o.update_freq = get_int(v, n, 1);
    else if (k == "max_steps")
      o.max_steps = get_int(v, n, 0);
    else if (k == "max_epochs")
      o.max_epochs = get_int(v, n, 0);
    else if (k == "max_minutes")
      o.max_minutes = get_num(v, n, 0, false);
    else if (k == "seed")
      o.seed = static_cast<uint64_t>(get_int(v, n, 0));
    else if (k == "warmup_steps")
      o.warmup_steps = get_int(v, n, 1);
    else if (k == "lr_scale")
      o.lr_scale = get_num(v, n, 0, true);
    else if (k == "clip_norm")
      o.clip_norm = get_num(v, n, 0, false);
    else if (k == "valid_every")
      o.valid_every = get_int(v, n, 0);
    else if (k == "valid_sentences")
      o.valid_sentences = get_int(v, n, 0);
    else if (k == "checkpoint_every")
      o.checkpoint_every = get_int(v, n, 0);
    else if (k == "checkpoint_minutes")
      o.checkpoint_minutes = get_num(v, n, 0, false);
    else if (k == "keep_checkpoints")
      o.keep_checkpoints = get_int(v, n, 0);
    else if (k == "average_last")
      o.average_last = get_int(v, n, 0);
    else if (k == "early_stop")
      o.early_stop = get_int(v, n, 0);
    else if (k == "log_every")
      o.log_every = get_int(v, n, 1);
    else if (k == "best_metric") {
      if (!v.is_string() || (v != "bleu" && v != "loss"))
        throw InputError(n + ": expected \"bleu\" or \"loss\", got " + v.dump());
      o.best_metric = v.get<std::string>();
    } else {
      throw InputError(
          cli ? "unknown training option " + n
              : source + ": unknown key \"training." + k +
                    "\" (known: batch_tokens, update_freq, max_steps, max_epochs, "
                    "max_minutes, seed, warmup_steps, lr_scale, clip_norm, valid_every, "
                    "valid_sentences, checkpoint_every, checkpoint_minutes, "
                    "keep_checkpoints, average_last, early_stop, best_metric, log_every)");
    }
  }
}

namespace {

void check_file(const std::string& path, const char* option) {
  if (path.empty()) throw InputError(std::string(option) + " is required");
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw InputError(std::string(option) + ": cannot open " + path + ": no such file");
  if (fs::is_directory(path, ec))
    throw InputError(std::string(option) + ": " + path + " is a directory");
}

json options_to_json(const TrainOptions& o) {
  return json{{"train_src", o.train_src},
              {"train_tgt", o.train_tgt},
              {"valid_src", o.valid_src},
              {"valid_tgt", o.valid_tgt},
              {"out", o.out},
              {"spm", o.spm},
              {"vocab_size", o.vocab_size},
              {"batch_tokens", o.batch_tokens},
              {"update_freq", o.update_freq},
              {"max_steps", o.max_steps},
              {"max_epochs", o.max_epochs},
              {"max_minutes", o.max_minutes},
              {"seed", o.seed},
              {"warmup_steps", o.warmup_steps},
              {"lr_scale", o.lr_scale},
              {"clip_norm", o.clip_norm},
              {"valid_every", o.valid_every},
              {"valid_sentences", o.valid_sentences},
              {"checkpoint_every", o.checkpoint_every},
              {"checkpoint_minutes", o.checkpoint_minutes},
              {"keep_checkpoints", o.keep_checkpoints},
              {"average_last", o.average_last},
              {"early_stop", o.early_stop},
              {"best_metric", o.best_metric},
              {"threads", cpu::num_threads()}};
}

}  // namespace

void validate_options(const TrainOptions& o) {
  check_file(o.train_src, "--train-src");
  check_file(o.train_tgt, "--train-tgt");
  if (o.valid_src.empty() != o.valid_tgt.empty())
    throw InputError("--valid-src and --valid-tgt go together: give both or neither");
  if (!o.valid_src.empty()) {
    check_file(o.valid_src, "--valid-src");
    check_file(o.valid_tgt, "--valid-tgt");
  }
  if (!o.spm.empty()) check_file(o.spm, "--spm");
  if (o.out.empty()) throw InputError("--out is required");
  if (fs::is_directory(o.out)) throw InputError("--out: " + o.out + " is a directory");
  const fs::path parent = fs::path(o.out).parent_path();
  if (!parent.empty() && !fs::is_directory(parent))
    throw InputError("--out: directory " + parent.string() + " does not exist");
  if (o.vocab_size < 0 || (o.vocab_size > 0 && o.vocab_size < 8))
    throw InputError("--vocab-size: expected at least 8, got " + std::to_string(o.vocab_size));
  if (o.early_stop > 0 && o.valid_src.empty())
    throw InputError("--early-stop needs a validation set (--valid-src, --valid-tgt)");
  if (o.batch_tokens < 2)
    throw InputError("--batch-tokens: expected at least 2, got " + std::to_string(o.batch_tokens));
}

// ---------------------------------------------------------------------------
// Trainer

Trainer::Trainer(Transformer& model, const ParallelCorpus& train, const TrainOptions& opts)
    : model_(model),
      train_(train),
      opts_(opts),
      stream_(train, opts.batch_tokens, opts.seed),
      adam_(model.params().size()) {
  if (!model.params().values().numel()) throw Error("Trainer: the model is not initialised");
  model.params().enable_grads();
}

StepStats Trainer::step() {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& cfg = model_.config();
  std::vector<TokenBatch> batches;
  batches.reserve(opts_.update_freq);
  for (int64_t k = 0; k < opts_.update_freq; ++k)
    batches.push_back(gather_batch(train_, stream_.next()));
  StepStats s;
  for (const auto& b : batches) {
    s.tgt_tokens += b.tgt_tokens();
    s.src_tokens += b.src_tokens();
    s.sentences += b.B;
  }
  ParamStore& ps = model_.params();
  ps.zero_grads();
  // The loss of an update is normalised by all its target tokens, so K
  // accumulated batches equal one K times as large.
  const float grad_scale = 1.f / static_cast<float>(std::max<int64_t>(s.tgt_tokens, 1));
  const uint64_t step_seed = cpu::mix_seed(opts_.seed, static_cast<uint64_t>(step_ + 1));
  double loss = 0, nll = 0;
  for (size_t k = 0; k < batches.size(); ++k) {
    const TokenBatch& b = batches[k];
    model_.forward(b, true, cpu::mix_seed(step_seed, k));
    const LossStats l = label_smoothed_xent(model_.logits(), b.tgt_out.data(), cfg.label_smoothing,
                                            kPad, &dlogits_, grad_scale);
    loss += l.loss;
    nll += l.nll;
    model_.backward(b, dlogits_);
  }
  Tensor& grads = ps.grads();
  s.grad_norm = l2_norm(grads.data(), grads.numel());
  if (opts_.clip_norm > 0 && s.grad_norm > opts_.clip_norm)
    scale_buffer(grads.data(), grads.numel(), static_cast<float>(opts_.clip_norm / s.grad_norm));
  ++step_;
  s.lr = noam_lr(step_, cfg.d_model, opts_.warmup_steps, opts_.lr_scale);
  adam_.update(ps.values().data(), grads.data(), s.lr);

  const double tok = static_cast<double>(std::max<int64_t>(s.tgt_tokens, 1));
  s.step = step_;
  s.loss = loss / tok;
  s.nll = nll / tok;
  s.ppl = std::exp(s.nll);
  s.epoch = stream_.epoch();
  s.epoch_progress =
      static_cast<double>(stream_.epoch()) +
      static_cast<double>(stream_.index()) / static_cast<double>(stream_.batches_per_epoch());
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
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
    const TokenBatch b = gather_batch(valid, idx);
    model_.forward(b, false, 0);
    const LossStats l = label_smoothed_xent(model_.logits(), b.tgt_out.data(), cfg.label_smoothing,
                                            kPad, nullptr, 1.f);
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

  // Greedy decoding of the first n sentences, in length-sorted groups.
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
  const metrics::BleuScore b = metrics::corpus_bleu(hyps, {refs});
  v.has_bleu = true;
  v.bleu = b.score;
  v.bleu_text = b.text();
  v.bleu_sentences = n;
  v.hyps = std::move(hyps);
  return v;
}

namespace {
constexpr const char* kAdamM = "optimizer/adam_m";
constexpr const char* kAdamV = "optimizer/adam_v";
}  // namespace

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
                   {"extra", extra}};
  meta["training_state"] = st.dump();
  std::vector<NamedTensor> tensors;
  for (const auto& p : model_.params().params())
    tensors.push_back({p.name, p.shape, p.value.data()});
  const int64_t n = model_.params().size();
  tensors.push_back({kAdamM, Shape{n}, adam_.m().data()});
  tensors.push_back({kAdamV, Shape{n}, adam_.v().data()});
  std::map<std::string, std::string> bytes;
  if (!spm_model.empty()) bytes["vocab/sentencepiece"] = spm_model;
  write_safetensors(path, meta, tensors, bytes);
}

namespace {

TrainState read_state(const FileContents& f) {
  auto it = f.metadata.find("training_state");
  if (it == f.metadata.end())
    throw InputError(f.source + ": not a training checkpoint (no training_state in its metadata)");
  TrainState s;
  try {
    const json j = json::parse(it->second);
    s.step = j.at("step").get<int64_t>();
    s.epoch = j.at("epoch").get<int64_t>();
    s.batch_index = j.at("batch_index").get<int64_t>();
    s.seed = j.at("seed").get<uint64_t>();
    s.extra = j.value("extra", json::object());
    s.extra["_adam_t"] = j.at("adam_t");
    s.extra["_batch_tokens"] = j.at("batch_tokens");
    s.extra["_update_freq"] = j.at("update_freq");
    s.extra["_train_pairs"] = j.at("train_pairs");
  } catch (const json::exception& e) {
    throw InputError(f.source + ": damaged training_state: " + e.what());
  }
  return s;
}

}  // namespace

TrainState Trainer::load(const FileContents& f) {
  TrainState s = read_state(f);
  if (s.seed != opts_.seed)
    throw Error(f.source + ": checkpoint seed " + std::to_string(s.seed) +
                " differs from the trainer's " + std::to_string(opts_.seed));
  const int64_t bt = s.extra["_batch_tokens"].get<int64_t>();
  if (bt != opts_.batch_tokens)
    throw InputError(f.source + ": the checkpoint was trained with --batch-tokens " +
                     std::to_string(bt) + ", not " + std::to_string(opts_.batch_tokens) +
                     "; resume with the same value");
  const int64_t pairs = s.extra["_train_pairs"].get<int64_t>();
  if (pairs != train_.size())
    throw InputError(f.source + ": the checkpoint was trained on " + std::to_string(pairs) +
                     " sentence pairs but the training data now has " +
                     std::to_string(train_.size()) + "; resume with the same data");
  load_weights(f, model_);
  const int64_t n = model_.params().size();
  f.read_f32(kAdamM, Shape{n}, adam_.m().data());
  f.read_f32(kAdamV, Shape{n}, adam_.v().data());
  adam_.set_t(s.extra["_adam_t"].get<int64_t>());
  step_ = s.step;
  stream_.seek(s.epoch, s.batch_index);
  return s;
}

void average_checkpoints(const std::vector<std::string>& paths, Transformer& model) {
  if (paths.empty()) throw Error("average_checkpoints: no files");
  Tensor& values = model.params().values();
  const int64_t n = values.numel();
  std::vector<double> acc(n, 0.0);
  for (const std::string& p : paths) {
    const FileContents f = read_safetensors(p);
    load_weights(f, model);
    const float* v = values.data();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) acc[i] += v[i];
  }
  const double inv = 1.0 / static_cast<double>(paths.size());
  float* v = values.data();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(acc[i] * inv);
}

// ---------------------------------------------------------------------------
// The whole command

std::string checkpoint_dir(const std::string& out) { return out + ".ckpt"; }

std::vector<std::string> list_checkpoints(const std::string& out) {
  std::vector<std::string> files;
  const fs::path dir = checkpoint_dir(out);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    // step-NNNNNNNNN.nmt; temp files of an interrupted write do not match.
    if (name.size() == 18 && name.rfind("step-", 0) == 0 && name.substr(14) == ".nmt")
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());  // zero-padded: name order is step order
  return files;
}

namespace {

std::string checkpoint_path(const std::string& out, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%09lld.nmt", static_cast<long long>(step));
  return (fs::path(checkpoint_dir(out)) / name).string();
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void write_text_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    o << text;
    if (!o) throw Error("cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error("cannot rename " + tmp + " to " + path + ": " + ec.message());
}

// JSON lines: every metric of the run, appended and flushed as it happens.
class JsonLog {
 public:
  // On resume the entries after the checkpoint's step are dropped (they
  // will be redone); the kept ones are returned.
  JsonLog(const std::string& path, bool resume, int64_t keep_until, std::vector<json>& kept)
      : path_(path) {
    if (resume) {
      std::ifstream in(path);
      std::string line, text;
      while (std::getline(in, line)) {
        json j = json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) continue;
        if (j.contains("step") && j["step"].is_number() && j["step"].get<int64_t>() > keep_until)
          continue;
        text += line + "\n";
        kept.push_back(std::move(j));
      }
      write_text_atomic(path, text);
    }
    out_.open(path, resume ? std::ios::app : std::ios::trunc);
    if (!out_) throw InputError("cannot write the training log " + path);
  }
  void write(const json& j) {
    out_ << j.dump() << "\n";
    out_.flush();
  }

 private:
  std::string path_;
  std::ofstream out_;
};

// Downsamples a per-step series to at most n points (bucket means), so the
// SVG of a long run stays small.
std::vector<std::pair<double, double>> downsample(const std::vector<std::pair<double, double>>& p,
                                                  size_t n) {
  if (p.size() <= n) return p;
  std::vector<std::pair<double, double>> out;
  const size_t per = (p.size() + n - 1) / n;
  for (size_t i = 0; i < p.size(); i += per) {
    double sx = 0, sy = 0;
    const size_t end = std::min(p.size(), i + per);
    for (size_t k = i; k < end; ++k) sx += p[k].first, sy += p[k].second;
    out.push_back({sx / (end - i), sy / (end - i)});
  }
  return out;
}

}  // namespace

TrainResult train(ModelConfig cfg, const TrainOptions& opts_in, const TrainCallbacks& cb) {
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  auto seconds_since = [](clock::time_point t) {
    return std::chrono::duration<double>(clock::now() - t).count();
  };
  auto log = [&](const std::string& s) {
    if (cb.log) cb.log(s);
  };
  auto stop_requested = [&] { return cb.stop && cb.stop->load() != 0; };
  TrainOptions opts = opts_in;
  validate_options(opts);

  // 1. Every input is read and checked before anything is trained.
  std::vector<std::string> src, tgt, vsrc, vtgt;
  int64_t bad_utf8 = 0;
  read_parallel(opts.train_src, opts.train_tgt, src, tgt, &bad_utf8);
  if (bad_utf8)
    log("warning: " + std::to_string(bad_utf8) +
        " training lines were not valid UTF-8 (bytes replaced)");
  const bool has_valid = !opts.valid_src.empty();
  if (has_valid) read_parallel(opts.valid_src, opts.valid_tgt, vsrc, vtgt);

  // 2. A previous run: resume it, or refuse to mix with it.
  const auto ckpts = list_checkpoints(opts.out);
  if (!ckpts.empty() && !opts.resume)
    throw InputError(checkpoint_dir(opts.out) + " holds checkpoints of an earlier run (latest " +
                     ckpts.back() +
                     "): pass --resume to continue it, or remove the directory to start over");
  std::unique_ptr<FileContents> resume_file;
  TrainState rs;
  Vocab vocab;
  std::string spm;
  if (opts.resume && !ckpts.empty()) {
    ModelConfig ccfg;
    resume_file = std::make_unique<FileContents>(open_model(ckpts.back(), ccfg, spm));
    if (spm.empty())
      throw InputError(ckpts.back() + ": the checkpoint holds no SentencePiece vocabulary");
    cfg = ccfg;
    vocab = Vocab::from_bytes(spm);
    rs = read_state(*resume_file);
    if (rs.seed != opts.seed) log("resuming with the checkpoint's seed " + std::to_string(rs.seed));
    opts.seed = rs.seed;
    if (rs.extra["_update_freq"].get<int64_t>() != opts.update_freq)
      log("warning: --update-freq differs from the checkpoint's (" +
          rs.extra["_update_freq"].dump() +
          "); the run will not repeat an uninterrupted one exactly");
    log("resuming from " + ckpts.back() + " at step " + std::to_string(rs.step) + " (epoch " +
        std::to_string(rs.epoch) + ", batch " + std::to_string(rs.batch_index) + ")");
  } else {
    if (opts.resume)
      log("--resume: no checkpoint in " + checkpoint_dir(opts.out) + "; starting from scratch");
    if (!opts.spm.empty()) {
      vocab = Vocab::from_file(opts.spm);
      log("vocabulary: " + opts.spm + " (" + std::to_string(vocab.size()) + " pieces)");
    } else {
      const int size = opts.vocab_size > 0 ? opts.vocab_size : cfg.vocab_size;
      // A joint vocabulary from a sample of both sides.
      constexpr size_t kSamplePerSide = 300000;
      std::vector<std::string> sample;
      std::mt19937_64 rng(cpu::mix_seed(opts.seed, 0x5e9));
      for (const auto* side : {&src, &tgt}) {
        if (side->size() <= kSamplePerSide) {
          sample.insert(sample.end(), side->begin(), side->end());
        } else {
          for (size_t k = 0; k < kSamplePerSide; ++k)
            sample.push_back((*side)[rng() % side->size()]);
        }
      }
      log("training a joint SentencePiece vocabulary of " + std::to_string(size) + " pieces on " +
          std::to_string(sample.size()) + " sentences");
      vocab = Vocab::train(sample, size, "unigram", cpu::num_threads());
      log("vocabulary: " + std::to_string(vocab.size()) + " pieces");
    }
    spm = vocab.bytes();
    cfg.vocab_size = vocab.size();
  }

  // 3. Subword ids; pairs too long for the model are skipped and counted.
  const int64_t max_len = cfg.max_positions - 1;
  ParallelCorpus train_c = encode_corpus(vocab, src, tgt, max_len);
  const int64_t train_lines = static_cast<int64_t>(src.size());
  src = {};
  tgt = {};
  ParallelCorpus valid_c;
  if (has_valid) valid_c = encode_corpus(vocab, vsrc, vtgt, max_len);
  if (train_c.size() == 0)
    throw InputError(opts.train_src + ": no usable sentence pairs (" +
                     std::to_string(train_c.skipped_long) + " longer than " +
                     std::to_string(max_len) + " subwords, " +
                     std::to_string(train_c.skipped_empty) + " with an empty side)");
  log("training data: " + std::to_string(train_c.size()) + " of " + std::to_string(train_lines) +
      " pairs, " + std::to_string(train_c.tgt_tokens()) + " target tokens; skipped " +
      std::to_string(train_c.skipped_long) + " longer than " + std::to_string(max_len) +
      " subwords and " + std::to_string(train_c.skipped_empty) + " with an empty side");
  if (has_valid)
    log("validation data: " + std::to_string(valid_c.size()) + " of " +
        std::to_string(vsrc.size()) + " pairs; skipped " + std::to_string(valid_c.skipped_long) +
        " too long, " + std::to_string(valid_c.skipped_empty) + " empty");

  // 4. Model and trainer.
  Transformer model(cfg);
  model.init(opts.seed);
  Trainer trainer(model, train_c, opts);
  double best = 0;
  int64_t best_step = -1, bad_valids = 0, last_valid_step = -1;
  double train_seconds_before = 0;
  if (resume_file) {
    rs = trainer.load(*resume_file);
    const json& e = rs.extra;
    best = e.value("best", 0.0);
    best_step = e.value("best_step", int64_t{-1});
    bad_valids = e.value("bad_validations", int64_t{0});
    last_valid_step = e.value("last_valid_step", int64_t{-1});
    train_seconds_before = e.value("train_seconds", 0.0);
    resume_file.reset();
  }
  const std::string best_path = opts.out + ".best";
  const bool bleu_metric = opts.best_metric == "bleu";

  // 5. Log, curve.
  std::vector<json> kept;
  JsonLog jlog(opts.out + ".log.jsonl", opts.resume && trainer.steps() > 0, trainer.steps(), kept);
  CurveData curve;
  curve.title = cfg.name + ": " + fs::path(opts.out).filename().string();
  for (const json& j : kept) {
    const std::string type = j.value("type", "");
    if (type == "train")
      curve.train_loss.push_back({j["step"].get<double>(), j["loss"].get<double>()});
    if (type == "valid" && !j.value("averaged", false)) {
      curve.valid_loss.push_back({j["step"].get<double>(), j["loss"].get<double>()});
      if (j.contains("bleu"))
        curve.valid_bleu.push_back({j["step"].get<double>(), j["bleu"].get<double>()});
    }
  }
  auto write_curve = [&] {
    CurveData d = curve;
    d.train_loss = downsample(curve.train_loss, 1000);
    write_text_atomic(opts.out + ".curve.svg", curve_svg(d));
  };
  const int64_t bpe = trainer.batches_per_epoch();
  jlog.write({{"type", "start"},
              {"step", trainer.steps()},
              {"resumed", trainer.steps() > 0},
              {"options", options_to_json(opts)},
              {"config", config_to_json(cfg)},
              {"parameters", model.parameter_count()},
              {"batches_per_epoch", bpe}});
  jlog.write({{"type", "data"},
              {"step", trainer.steps()},
              {"train_lines", train_lines},
              {"train_pairs", train_c.size()},
              {"train_target_tokens", train_c.tgt_tokens()},
              {"skipped_long", train_c.skipped_long},
              {"skipped_empty", train_c.skipped_empty},
              {"max_subwords", max_len},
              {"valid_pairs", valid_c.size()},
              {"valid_skipped_long", valid_c.skipped_long},
              {"valid_skipped_empty", valid_c.skipped_empty},
              {"vocab_size", vocab.size()}});
  log("model: " + cfg.name + ", " + fmt("%.1fM", model.parameter_count() / 1e6) + " parameters; " +
      std::to_string(bpe) + " batches of <= " + std::to_string(opts.batch_tokens) +
      " tokens per epoch, " + std::to_string(opts.update_freq) + " per update; " +
      std::to_string(cpu::num_threads()) + " threads");

  // 6. The loop.
  TrainResult result;
  auto extra_state = [&] {
    return json{{"best", best},
                {"best_step", best_step},
                {"bad_validations", bad_valids},
                {"last_valid_step", last_valid_step},
                {"train_seconds", train_seconds_before + seconds_since(t_start)}};
  };
  int64_t last_ckpt_step = trainer.steps();
  auto last_ckpt_time = clock::now();
  const int64_t keep =
      opts.keep_checkpoints == 0 ? 0 : std::max(opts.keep_checkpoints, opts.average_last);
  auto save_checkpoint = [&] {
    fs::create_directories(checkpoint_dir(opts.out));
    const std::string path = checkpoint_path(opts.out, trainer.steps());
    trainer.save(path, spm, extra_state());
    last_ckpt_step = trainer.steps();
    last_ckpt_time = clock::now();
    auto all = list_checkpoints(opts.out);
    for (size_t i = 0; keep > 0 && i + keep < all.size(); ++i) fs::remove(all[i]);
    jlog.write({{"type", "checkpoint"}, {"step", trainer.steps()}, {"path", path}});
  };
  bool early_stopped = false;
  auto run_validation = [&](bool averaged) {
    const auto t0 = clock::now();
    const ValidStats v = trainer.validate(valid_c, &vocab, &vtgt, opts.valid_sentences);
    const int64_t step = trainer.steps();
    json j = {{"type", "valid"},
              {"step", step},
              {"loss", v.loss},
              {"nll_loss", v.nll},
              {"ppl", v.ppl},
              {"tokens", v.tokens},
              {"sentences", v.sentences},
              {"seconds", seconds_since(t0)}};
    if (v.has_bleu) {
      j["bleu"] = v.bleu;
      j["bleu_text"] = v.bleu_text;
      j["bleu_sentences"] = v.bleu_sentences;
    }
    std::string line = std::string(averaged ? "averaged model: " : "") + "validation at step " +
                       std::to_string(step) + ": loss " + fmt("%.3f", v.loss) + ", ppl " +
                       fmt("%.2f", v.ppl);
    if (v.has_bleu)
      line += ", BLEU " + fmt("%.2f", v.bleu) + " (greedy, " + std::to_string(v.bleu_sentences) +
              " sentences)";
    if (averaged) {
      j["averaged"] = true;
      jlog.write(j);
      log(line);
      return;
    }
    last_valid_step = step;
    const double metric = bleu_metric && v.has_bleu ? v.bleu : v.loss;
    const bool higher_better = bleu_metric && v.has_bleu;
    const bool improved = best_step < 0 || (higher_better ? metric > best : metric < best);
    if (improved) {
      best = metric;
      best_step = step;
      bad_valids = 0;
      save_model(best_path, model, spm, {{"step", std::to_string(step)}});
      line += " (best so far; saved " + best_path + ")";
    } else {
      ++bad_valids;
      line += " (best " + fmt("%.3f", best) + " at step " + std::to_string(best_step) + ")";
      if (opts.early_stop > 0 && bad_valids >= opts.early_stop) early_stopped = true;
    }
    j["best"] = best;
    j["best_step"] = best_step;
    jlog.write(j);
    log(line);
    curve.valid_loss.push_back({double(step), v.loss});
    if (v.has_bleu) curve.valid_bleu.push_back({double(step), v.bleu});
    write_curve();
  };

  double tok_ema = 0, sec_ema = 0;
  std::string reason;
  while (true) {
    if (opts.max_steps > 0 && trainer.steps() >= opts.max_steps) {
      reason = "max-steps";
      break;
    }
    if (opts.max_epochs > 0 && trainer.epoch() >= opts.max_epochs) {
      reason = "max-epochs";
      break;
    }
    if (opts.max_minutes > 0 && seconds_since(t_start) >= opts.max_minutes * 60) {
      reason = "max-minutes";
      break;
    }
    if (early_stopped) {
      reason = "early-stop";
      break;
    }
    if (stop_requested()) {
      reason = "interrupted";
      break;
    }

    const StepStats s = trainer.step();
    if (!std::isfinite(s.loss))
      throw Error("training diverged at step " + std::to_string(s.step) + " (loss " +
                  fmt("%g", s.loss) +
                  "); try a smaller --lr-scale, a longer --warmup or --clip-norm");
    result.losses.push_back(s.loss);
    tok_ema = tok_ema == 0 ? double(s.tgt_tokens) : 0.9 * tok_ema + 0.1 * double(s.tgt_tokens);
    sec_ema = sec_ema == 0 ? s.seconds : 0.9 * sec_ema + 0.1 * s.seconds;
    const double elapsed = seconds_since(t_start);
    jlog.write({{"type", "train"},
                {"step", s.step},
                {"epoch", s.epoch_progress},
                {"loss", s.loss},
                {"nll_loss", s.nll},
                {"ppl", s.ppl},
                {"lr", s.lr},
                {"grad_norm", s.grad_norm},
                {"tgt_tokens", s.tgt_tokens},
                {"src_tokens", s.src_tokens},
                {"sentences", s.sentences},
                {"step_seconds", s.seconds},
                {"tgt_tokens_per_s", s.tgt_tokens / std::max(s.seconds, 1e-9)},
                {"elapsed_s", elapsed}});
    curve.train_loss.push_back({double(s.step), s.loss});
    if (cb.progress) {
      TrainProgress p;
      p.stats = s;
      p.tokens_per_second = tok_ema / std::max(sec_ema, 1e-9);
      p.elapsed_seconds = elapsed;
      double eta = -1;
      auto take = [&](double e) { eta = eta < 0 ? e : std::min(eta, e); };
      if (opts.max_steps > 0) take(double(opts.max_steps - s.step) * sec_ema);
      if (opts.max_minutes > 0) take(std::max(0.0, opts.max_minutes * 60 - elapsed));
      if (opts.max_epochs > 0)
        take(std::max(0.0, (double(opts.max_epochs) - s.epoch_progress) * double(bpe) /
                               double(opts.update_freq) * sec_ema));
      p.eta_seconds = eta;
      cb.progress(p);
    }
    if (has_valid && opts.valid_every > 0 && s.step % opts.valid_every == 0) run_validation(false);
    if ((opts.checkpoint_every > 0 && s.step % opts.checkpoint_every == 0) ||
        (opts.checkpoint_minutes > 0 &&
         seconds_since(last_ckpt_time) >= opts.checkpoint_minutes * 60))
      save_checkpoint();
  }

  // 7. The end: a last checkpoint, a last validation, the final model.
  result.stop_reason = reason;
  result.interrupted = reason == "interrupted";
  result.steps = trainer.steps();
  if (trainer.steps() > last_ckpt_step || list_checkpoints(opts.out).empty()) save_checkpoint();
  if (!result.interrupted) {
    if (has_valid && last_valid_step != trainer.steps()) run_validation(false);
    const auto all = list_checkpoints(opts.out);
    if (opts.average_last > 1 && all.size() > 1) {
      const size_t k = std::min<size_t>(all.size(), opts.average_last);
      std::vector<std::string> last(all.end() - k, all.end());
      average_checkpoints(last, model);
      log("final model: the average of the last " + std::to_string(k) + " checkpoints");
      if (has_valid) run_validation(true);
    }
    save_model(opts.out, model, spm, {{"step", std::to_string(trainer.steps())}});
    result.model_path = opts.out;
    log("wrote " + opts.out + " after " + std::to_string(trainer.steps()) + " steps (" + reason +
        ")");
  } else {
    log("interrupted at step " + std::to_string(trainer.steps()) + "; checkpoint saved in " +
        checkpoint_dir(opts.out) + "; continue with --resume");
  }
  if (best_step >= 0) {
    result.best_path = best_path;
    result.best = best;
  }
  jlog.write({{"type", "end"},
              {"step", trainer.steps()},
              {"reason", reason},
              {"best", best},
              {"best_step", best_step},
              {"elapsed_s", seconds_since(t_start)}});
  write_curve();
  return result;
}

}  // namespace nmt
