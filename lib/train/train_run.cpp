// A training run, in the order it happens:
//   1. check the options and paths, lock OUT, clear what a killed run left;
//      open the checkpoint to resume and check it against this run's
//      config, vocabulary and options, or load {spm}: all before reading any
//      data (train/previous_run.h);
//   2. read and check every input, drop exact duplicate pairs
//      (train/training_data.h); the recipe's first stage (model config,
//      vocabulary, compute type: train/recipe.h); train a vocabulary if none
//      is given;
//   3. encode the data and drop pairs of implausible length ratio; the
//      recipe's second stage (batch, schedule, regularisation, cadence),
//      timed on a throwaway model of the chosen shape: the plan
//      (train/plan.h) is whole; {explain} stops here;
//   4. the session trains the model from the plan and writes it
//      (train/session.h).
#include "train/train_run.h"

#include <memory>
#include <optional>
#include <random>
#include <utility>

#include "core/backend.h"
#include "core/comm.h"
#include "core/device.h"
#include "core/error.h"
#include "core/format.h"
#include "core/rng.h"
#include "io/file_lock.h"
#include "io/output_file.h"
#include "metrics/tokenizers.h"
#include "model/languages.h"
#include "model/transformer.h"
#include "ops/ops.h"
#include "train/checkpoints.h"
#include "train/plan.h"
#include "train/previous_run.h"
#include "train/session.h"
#include "train/training_data.h"

namespace nmt {

namespace {

// What nmt train cannot make: its one SentencePiece vocabulary is joint,
// with ids pad 0, unk 1, bos 2, eos 3 (a config may otherwise describe a
// model converted from another toolkit).
void check_trainable(const ModelConfig& cfg) {
  const std::string where = "config " + (cfg.name.empty() ? std::string("(unnamed)") : cfg.name);
  if (cfg.src_vocab_size)
    throw InputError(where + ": src_vocab_size " + std::to_string(cfg.src_vocab_size) +
                     ": nmt train makes one joint vocabulary (src_vocab_size 0)");
  const std::pair<const char*, int> ids[] = {{"pad_id", cfg.pad_id},
                                             {"unk_id", cfg.unk_id},
                                             {"bos_id", cfg.bos_id},
                                             {"eos_id", cfg.eos_id}};
  for (int i = 0; i < 4; ++i)
    if (ids[i].second != i)
      throw InputError(where + ": " + ids[i].first + " " + std::to_string(ids[i].second) +
                       ": the vocabulary nmt train makes has pad 0, unk 1, bos 2, eos 3");
  // Its data limits count one </s> per source (encode_corpus_releasing).
  if (cfg.source_bos || !cfg.source_eos)
    throw InputError(where + ": " + (cfg.source_bos ? "source_bos true" : "source_eos false") +
                     ": nmt train ends each source with </s> and starts it with nothing");
}

class TrainRun {
 public:
  TrainRun(ModelConfig cfg, const TrainOptions& opts, const TrainCallbacks& cb) : cb_(cb) {
    plan_.cfg = std::move(cfg);
    plan_.opts = opts;
  }

  TrainResult run() {
    validate_options(opts_);
    check_trainable(plan_.cfg);
    // Before reading any data: every op training needs, in the compute type
    // asked for (f32 where the recipe will choose: it tries bf16 itself).
    const bool chosen_later = opts_.recipe && !opts_.was_given("compute_type");
    require_compute_type(opts_.device, chosen_later ? ComputeType::F32 : opts_.compute_type,
                         /*training=*/true);
    for (size_t k = 0; k < opts_.train_src.size(); ++k)
      if (io::file_id(opts_.train_src[k]) == io::file_id(opts_.train_tgt[k]))
        log("warning: {train_src} and {train_tgt} are the same file (" + opts_.train_src[k] +
            "): the model will learn to copy its input");
    apply_given_regularisation();
    name_language_pair();
    std::optional<io::FileLock> lock;
    if (root()) {
      lock.emplace(lock_path(opts_.out), opts_.out);
      if (cb_.on_locked) cb_.on_locked();
      if (const int removed = clear_stale_temps(opts_.out))
        log("removed " + std::to_string(removed) + " temporary file(s) left by an interrupted run");
    }
    // Everything that does not need the data is checked before reading it.
    Resumption resumption = open_previous_run(plan_, comm_.size(), logger());
    check_bounds_before_data();
    const int64_t max_len = plan_.cfg.max_positions - 1;
    data_.read(opts_, max_len, logger());
    check_data_unchanged(data_.digests, resumption, opts_.resume_with_new_data, logger());
    data_.select(opts_, max_len);
    choose_data_recipe();
    make_vocabulary();
    data_.encode(plan_.vocab, opts_, plan_.cfg.max_positions - 1, logger());
    if (opts_.recipe && !plan_.recipe_restored) {
      choose_budget_recipe();
      check_bounds();
    }
    TrainResult result;
    if (opts_.explain) {
      result.stop_reason = "explain";
      log("{explain}: the recipe above is what this run would train with; stopping before "
          "training");
      return result;
    }
    TrainSession session(plan_, data_, cb_, start_);
    return session.run(std::move(resumption.checkpoint));
  }

 private:
  bool root() const { return comm_.rank() == 0; }
  void log(const std::string& s) const {
    if (root() && cb_.log) cb_.log(s);
  }
  RunLog logger() const {
    return [this](const std::string& s) { log(s); };
  }
  void apply_given_regularisation();
  void name_language_pair();
  void check_bounds_before_data();
  void check_bounds();
  void choose_data_recipe();
  void make_vocabulary();
  void choose_budget_recipe();
  ProbeTiming probe(int64_t batch_tokens, ComputeType type);
  void log_recipe(size_t from);

  TrainPlan plan_;
  TrainOptions& opts_ = plan_.opts;
  const TrainCallbacks& cb_;
  Comm& comm_ = world();
  const TrainSession::Clock::time_point start_ = TrainSession::Clock::now();
  TrainingData data_;
  DataRecipe data_recipe_;
  std::unique_ptr<Transformer> probe_model_;  // the recipe's timing probe, then freed
};

// The pair the corpora's names give (train.en, train.de), where every
// corpus agrees, so that a service can route requests to the model.
void TrainRun::name_language_pair() {
  std::string src, tgt;
  for (size_t k = 0; k < opts_.train_src.size(); ++k) {
    const std::string s = language_of_path(opts_.train_src[k]),
                      t = language_of_path(opts_.train_tgt[k]);
    if (s.empty() || t.empty() || s == t || (k > 0 && (s != src || t != tgt))) return;
    src = s, tgt = t;
  }
  plan_.cfg.src_lang = src, plan_.cfg.tgt_lang = tgt;
}

void TrainRun::apply_given_regularisation() {
  if (opts_.dropout >= 0) plan_.cfg.dropout = static_cast<float>(opts_.dropout);
  if (opts_.label_smoothing >= 0)
    plan_.cfg.label_smoothing = static_cast<float>(opts_.label_smoothing);
}

void TrainRun::check_bounds() {
  check_memory_bounds(opts_, plan_.cfg,
                      !plan_.spm.empty()     ? plan_.vocab.size()
                      : opts_.vocab_size > 0 ? opts_.vocab_size
                                             : plan_.cfg.vocab_size);
}

void TrainRun::check_bounds_before_data() {
  if (!opts_.recipe || opts_.was_given("batch_tokens") || plan_.recipe_restored)
    return check_bounds();
  // The batch is the recipe's, chosen later: refuse now what its smallest
  // batch could not fit.
  TrainOptions smallest = opts_;
  smallest.batch_tokens = 256;
  check_memory_bounds(smallest, plan_.cfg,
                      opts_.vocab_size > 0 ? opts_.vocab_size : plan_.cfg.vocab_size);
}

void TrainRun::log_recipe(size_t from) {
  const auto lines = plan_.recipe.lines();
  for (size_t i = from; i < lines.size(); ++i) log("recipe: " + lines[i]);
}

void TrainRun::choose_data_recipe() {
  if (!opts_.recipe || plan_.recipe_restored) return;
  if (!opts_.was_given("config")) {
    plan_.cfg = load_config(find_config(recipe_config_name(data_.usable_pairs)));
    apply_given_regularisation();
    if (!plan_.spm.empty()) plan_.cfg.vocab_size = plan_.vocab.size();
  }
  std::string why_not;
  try {
    require_compute_type(opts_.device, ComputeType::BF16, /*training=*/true);
  } catch (const Error& e) {
    why_not = e.what();
  }
  CorpusFacts facts = corpus_facts(data_.src, data_.tgt);
  facts.pairs = data_.usable_pairs;
  std::string mecab_why_not;
  if (facts.tgt_kana >= 0.05) try {
      metrics::load_tokenizer(metrics::TokenizerKind::kJaMecab);
    } catch (const Error& e) {
      mecab_why_not = e.what();
    }
  data_recipe_ = recipe_for_data(facts, plan_.cfg, opts_, why_not, plan_.recipe, mecab_why_not);
  recipe_layers(plan_.cfg, opts_, plan_.recipe);
  log_recipe(0);
}

void TrainRun::make_vocabulary() {
  if (!plan_.spm.empty()) return;  // the checkpoint's, or --spm's
  {
    const int size = opts_.vocab_size > 0 ? opts_.vocab_size : plan_.cfg.vocab_size;
    // A joint vocabulary from a sample of both sides, pointing at the text
    // rather than copying it.
    constexpr size_t kSamplePerSide = 300000;
    std::vector<const std::string*> sample;
    std::mt19937_64 rng(mix_seed(opts_.seed, 0x5e9));
    for (const auto* side : {&data_.src, &data_.tgt}) {
      if (side->size() <= kSamplePerSide) {
        for (const std::string& line : *side) sample.push_back(&line);
      } else {
        for (size_t k = 0; k < kSamplePerSide; ++k)
          sample.push_back(&(*side)[rng() % side->size()]);
      }
    }
    log("training a joint SentencePiece vocabulary of " + std::to_string(size) + " pieces on " +
        std::to_string(sample.size()) + " sentences");
    // One vocabulary for all processes: rank 0 trains it and sends it.
    std::string bytes;
    if (root())
      bytes =
          Vocab::train(sample, size, data_recipe_.character_coverage, "unigram", ops::num_threads())
              .bytes();
    comm_.broadcast(bytes, 0);
    plan_.vocab = Vocab::from_bytes(bytes);
    log("vocabulary: " + std::to_string(plan_.vocab.size()) + " pieces");
  }
  plan_.spm = plan_.vocab.bytes();
  plan_.cfg.vocab_size = plan_.vocab.size();
}

// Timed on rank 0 and sent to all, so that every process plans alike; on a
// model of the chosen shape built for this and freed before the run's own
// (the weights a seed gives do not depend on dropout or label smoothing,
// which the plan may still change).
ProbeTiming TrainRun::probe(int64_t batch, ComputeType type) {
  std::string m;
  if (root()) {
    if (!probe_model_) {
      probe_model_ = std::make_unique<Transformer>(plan_.cfg, opts_.device);
      probe_model_->init(opts_.seed);
    }
    probe_model_->params().set_compute_type(type);
    double fill = 0.8;
    const double sec = measure_update_seconds(*probe_model_, data_.train, batch, opts_.seed, &fill);
    m = format_number("%.17g", sec) + " " + format_number("%.17g", fill);
  }
  comm_.broadcast(m, 0);
  ProbeTiming t;
  std::sscanf(m.c_str(), "%lf %lf", &t.seconds, &t.fill);
  log("measured " + format_number("%.2f", t.seconds) + " s per update of " + std::to_string(batch) +
      " tokens (" + format_number("%.0f", t.fill * double(batch) / std::max(t.seconds, 1e-9)) +
      " target tokens/s, " + compute_type_name(type) + ")");
  return t;
}

void TrainRun::choose_budget_recipe() {
  BudgetFacts f;
  f.pairs = data_.train.size();
  f.target_tokens = data_.train.tgt_tokens();
  f.widest_pair = data_.widest;
  f.has_valid = plan_.has_valid();
  size_t from = plan_.recipe.choices().size();
  const BudgetPlan b =
      plan_budget(f, plan_.cfg, opts_, plan_.recipe,
                  [this](int64_t batch, ComputeType type) { return probe(batch, type); });
  probe_model_.reset();
  plan_.schedule_steps = b.updates;
  plan_.seconds_per_update = b.seconds_per_update;
  if (b.compute_revised) from -= 1;  // the revised compute_type is logged with this stage
  log_recipe(from);
}

}  // namespace

TrainResult train(ModelConfig cfg, const TrainOptions& opts, const TrainCallbacks& cb) {
  TrainRun run(std::move(cfg), opts, cb);
  return run.run();
}

}  // namespace nmt
