// A training run, in the order it happens:
//   1. check the options and paths, lock OUT, clear what a killed run left;
//      open the checkpoint to resume (the newest whole one; damaged ones are
//      named and passed over) and check it against this run's config,
//      vocabulary and options, or load --spm: all before reading any data;
//   2. read and check every input (several corpora, one after the other),
//      drop exact duplicate pairs; the recipe's first stage (model config,
//      vocabulary, compute type: train/recipe.h); train a vocabulary if none
//      is given;
//   3. encode the data and drop pairs of implausible length ratio; build the
//      model, measure how fast it trains and take the recipe's second stage
//      (batch, schedule, regularisation, cadence); --explain stops here;
//      build the Trainer; open the log;
//   4. the loop: an update, then validation, checkpoint and stop checks;
//   5. the end: a last checkpoint and validation, then the final model (the
//      better of the last weights and the checkpoint average, if asked),
//      written as OUT.partial and renamed onto OUT once whole, shortlist
//      included. A stop signal is honoured up to that rename: the run ends
//      as interrupted, its checkpoints kept, OUT not written.
//
// In a distributed run every process trains (Trainer::step sums their
// gradients); only rank 0 locks, logs, validates and writes files, and the
// decisions that depend on a clock, a signal or a validation are agreed on
// after every update (agree()), so that all processes stop at the same step.
#include "train/train_run.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <utility>

#include "core/backend.h"
#include "core/device.h"
#include "core/comm.h"
#include "core/error.h"
#include "core/format.h"
#include "core/memory.h"
#include "core/rng.h"
#include "core/stop.h"
#include "decode/shortlist_cost.h"
#include "io/file_lock.h"
#include "io/output_file.h"
#include "metrics/tokenizers.h"
#include "model/loaded_model.h"
#include "model/model_file.h"
#include "model/shortlist.h"
#include "model/vocab.h"
#include "ops/ops.h"
#include "train/recipe.h"
#include "train/train_log.h"

namespace nmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The metric that picks the best model, and which way is better.
struct Metric {
  double value = 0;
  bool higher_better = false;
  const char* name = "loss";
  bool better_than(double other) const { return higher_better ? value > other : value < other; }
};

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
  TrainRun(ModelConfig cfg, const TrainOptions& opts, const TrainCallbacks& cb)
      : cfg_(std::move(cfg)), opts_(opts), cb_(cb) {}

  TrainResult run() {
    validate_options(opts_);
    check_trainable(cfg_);
    // Before reading any data: every op training needs, in the compute type
    // asked for (f32 where the recipe will choose: it tries bf16 itself).
    const bool chosen_later = opts_.recipe && !given("compute_type");
    require_compute_type(opts_.device,
                         chosen_later ? ComputeType::F32 : parse_compute_type(opts_.compute_type),
                         /*training=*/true);
    for (size_t k = 0; k < opts_.train_src.size(); ++k)
      if (io::file_id(opts_.train_src[k]) == io::file_id(opts_.train_tgt[k]))
        log("warning: {train_src} and {train_tgt} are the same file (" + opts_.train_src[k] +
            "): the model will learn to copy its input");
    apply_given_regularisation();
    std::optional<io::FileLock> lock;
    if (root()) {
      lock.emplace(lock_path(opts_.out), opts_.out);
      if (cb_.on_locked) cb_.on_locked();
      clear_stale_temps();
    }
    // Everything that does not need the data is checked before reading it.
    open_previous_run();
    if (!opts_.recipe || given("batch_tokens") || resumed_recipe_) {
      check_bounds();
    } else {
      // The batch is the recipe's, chosen later: refuse now what its
      // smallest batch could not fit.
      TrainOptions smallest = opts_;
      smallest.batch_tokens = 256;
      check_memory_bounds(smallest, cfg_,
                          opts_.vocab_size > 0 ? opts_.vocab_size : cfg_.vocab_size);
    }
    read_data();
    choose_data_recipe();
    make_vocabulary();
    encode_data();
    build_model();
    if (opts_.explain) {
      result_.stop_reason = "explain";
      log("{explain}: the recipe above is what this run would train with; stopping before "
          "training");
      return std::move(result_);
    }
    if (cb_.on_training) cb_.on_training();
    if (root()) open_log();
    loop();
    if (root()) finish();
    result_.steps = trainer_->steps();
    result_.interrupted = result_.stop_reason == "interrupted";
    return std::move(result_);
  }

 private:
  bool root() const { return comm_.rank() == 0; }
  void log(const std::string& s) {
    if (root() && cb_.log) cb_.log(s);
  }
  void agree();
  bool has_valid() const { return !opts_.valid_src.empty(); }
  bool given(const char* key) const { return opts_.given.count(key) > 0; }
  void apply_given_regularisation();
  void check_bounds();
  void choose_data_recipe();
  void choose_budget_recipe();
  void log_recipe(size_t from);
  void revise_schedule(int64_t total);
  int64_t schedule_end() const;
  // "line 12 of a.en" for a line of the concatenated training corpora.
  std::string where(int64_t line) const;
  std::string train_files() const;

  void clear_stale_temps();
  void read_data();
  void record_digest(const char* role, const std::string& file,
                     const std::vector<std::string>& lines);
  void check_data_unchanged();
  void open_previous_run();
  std::string newest_whole_checkpoint(const std::vector<std::string>& ckpts, ModelConfig& ccfg);
  void resume_from(const std::string& chosen, const ModelConfig& ccfg);
  void restore_recipe_options(const TrainState& rs, const std::string& chosen);
  void check_resume(const std::string& path, const ModelConfig& ccfg, const TrainState& rs);
  void make_vocabulary();
  void encode_data();
  void build_model();
  void open_log();
  void loop();
  bool stop_now();
  void after_update(const StepStats& s);
  void report_progress(const StepStats& s);
  void save_checkpoint();
  Metric validate(bool averaged);
  bool validate_unless_stopped();  // false: a stop signal cut it short
  void choose_final_weights();
  void add_shortlist(const std::string& model_path, VocabTensors& tensors,
                     std::map<std::string, std::string>& meta);
  void write_final_model();
  void finish();
  json extra_state() const;
  json data_summary() const;
  std::map<std::string, std::string> model_metadata() const;

  ModelConfig cfg_;
  TrainOptions opts_;
  const TrainCallbacks& cb_;
  Comm& comm_ = world();
  // Agreed by every process after each update: a stop signal anywhere, and
  // rank 0's time budget and early stopping.
  bool signalled_ = false, out_of_time_ = false, early_stop_agreed_ = false;
  const Clock::time_point start_ = Clock::now();

  std::vector<std::string> src_, tgt_, vsrc_, vtgt_;
  // Each data file's role, name, lines and lines_digest(), as this run read
  // them and as the checkpoint it resumes recorded them (its name in
  // resumed_from_).
  json digests_ = json::array(), resumed_digests_ = json::array();
  std::string resumed_from_;
  int64_t train_lines_ = 0;
  std::vector<int64_t> file_starts_;  // first line of each training corpus
  std::vector<int64_t> line_of_;      // the input line of each pair still held as text
  int64_t usable_pairs_ = 0, duplicates_ = 0;
  RatioFilter ratio_;
  Recipe recipe_;
  DataRecipe data_recipe_;
  bool resumed_recipe_ = false;  // the options were restored from a checkpoint's recipe
  double probe_seconds_ = 0;     // one update, measured before training (0: not measured)
  int64_t recipe_updates_ = 0;   // the recipe's first estimate of the run's updates
  int64_t logged_end_ = 0;       // the schedule's end as last logged
  Clock::time_point loop_start_ = Clock::now();
  int64_t loop_start_step_ = 0;
  double last_valid_seconds_ = 0;
  int64_t widest_ = 0;  // subwords of the widest training pair, with </s>
  Vocab vocab_;
  std::string spm_;
  std::unique_ptr<FileContents> resume_file_;
  ParallelCorpus train_c_, valid_c_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<TrainLog> log_;

  // Carried across resumes in the checkpoints' extra state.
  double best_ = 0, last_metric_ = 0;
  int64_t best_step_ = -1, bad_valids_ = 0, last_valid_step_ = -1;
  double train_seconds_before_ = 0;

  int64_t last_ckpt_step_ = 0;
  Clock::time_point last_ckpt_time_ = Clock::now();
  bool early_stopped_ = false;
  double tok_ema_ = 0, sec_ema_ = 0;
  TrainResult result_;
};

void TrainRun::clear_stale_temps() {
  // Safe only under the lock: no other nmt is writing these names.
  int removed = 0;
  for (const std::string& target : {opts_.out, opts_.out + ".best", opts_.out + ".log.jsonl",
                                    opts_.out + ".curve.svg", partial_path(opts_.out)})
    removed += io::remove_stale_temps_of(target);
  // The final model of a run killed before it was whole; only where a run
  // of this OUT left checkpoints (it wrote one before it), so that a file
  // of that name beside a new run is not removed but refused
  // (check_side_outputs).
  std::error_code ec;
  if (!list_checkpoints(opts_.out).empty() && fs::remove(partial_path(opts_.out), ec)) ++removed;
  if (fs::is_directory(checkpoint_dir(opts_.out)))
    removed += io::remove_stale_temps_in(checkpoint_dir(opts_.out));
  if (removed)
    log("removed " + std::to_string(removed) + " temporary file(s) left by an interrupted run");
}

void TrainRun::read_data() {
  // Lines longer than any pair the model can take are cut while read (and
  // then skipped as too long), so memory follows the work.
  const int64_t max_len = cfg_.max_positions - 1;
  io::TextChecks checks;
  checks.max_line_bytes = io::kMaxBytesPerSubword * static_cast<size_t>(max_len);
  checks.why_limit = "the model takes at most " + std::to_string(max_len) + " subwords";
  checks.warn = [this](const std::string& w) { log("warning: " + w); };
  for (size_t k = 0; k < opts_.train_src.size(); ++k) {
    std::vector<std::string> s, t;
    read_parallel(opts_.train_src[k], opts_.train_tgt[k], s, t, checks);
    record_digest("train_src", opts_.train_src[k], s);
    record_digest("train_tgt", opts_.train_tgt[k], t);
    file_starts_.push_back(static_cast<int64_t>(src_.size()));
    if (src_.empty()) {
      src_ = std::move(s);
      tgt_ = std::move(t);
    } else {  // the strings move, their text is not copied
      src_.insert(src_.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
      tgt_.insert(tgt_.end(), std::make_move_iterator(t.begin()), std::make_move_iterator(t.end()));
    }
  }
  if (has_valid()) {
    read_parallel(opts_.valid_src, opts_.valid_tgt, vsrc_, vtgt_, checks);
    record_digest("valid_src", opts_.valid_src, vsrc_);
    record_digest("valid_tgt", opts_.valid_tgt, vtgt_);
  }
  check_data_unchanged();
  train_lines_ = static_cast<int64_t>(src_.size());
  // A side with nothing SentencePiece keeps (spaces, control or zero-width
  // characters) is an empty side: refused now if nothing else is left, not
  // by SentencePiece ending the process, nor by a validation set that scores
  // every model alike.
  auto none_left = [&](const std::string& file, int64_t lines, const char* what) {
    return InputError(file + ": no usable sentence pairs" + what + " (0 longer than " +
                      std::to_string(max_len) + " subwords, " + std::to_string(lines) +
                      " with an empty side: blank, or only spaces, control or zero-width "
                      "characters)");
  };
  usable_pairs_ = clear_unusable_pairs(src_, tgt_);
  if (usable_pairs_ == 0) throw none_left(train_files(), train_lines_, "");
  if (has_valid() && clear_unusable_pairs(vsrc_, vtgt_) == 0)
    throw none_left(opts_.valid_src, static_cast<int64_t>(vsrc_.size()), " in the validation set");
  line_of_.resize(src_.size());
  std::iota(line_of_.begin(), line_of_.end(), int64_t{0});
  if (opts_.filter) {
    duplicates_ = drop_duplicate_pairs(src_, tgt_, line_of_);
    usable_pairs_ -= duplicates_;
  }
}

void TrainRun::record_digest(const char* role, const std::string& file,
                             const std::vector<std::string>& lines) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(lines_digest(lines)));
  digests_.push_back({{"role", role}, {"file", file}, {"lines", lines.size()}, {"digest", hex}});
}

// A resumed run repeats the uninterrupted one only on the same data: each
// file is compared, by its role and place, with what the checkpoint
// recorded (one from before digests recorded nothing; a validation set
// given or left out is named by the options' warning).
void TrainRun::check_data_unchanged() {
  std::string changed;
  auto add = [&](const std::string& what) { changed += (changed.empty() ? "" : "; ") + what; };
  for (const char* role : {"train_src", "train_tgt", "valid_src", "valid_tgt"}) {
    std::vector<json> was, now;
    for (const json& e : resumed_digests_)
      if (e.is_object() && e.value("role", "") == role) was.push_back(e);
    for (const json& e : digests_)
      if (e["role"] == role) now.push_back(e);
    if (was.empty() || now.empty()) continue;
    if (was.size() != now.size()) {  // train_src and train_tgt alike: said once
      if (std::string(role) == "train_src")
        add("the training data is " + std::to_string(now.size()) + " file pair(s), but was " +
            std::to_string(was.size()) + " when checkpoint " + resumed_from_ + " was written");
      continue;
    }
    for (size_t i = 0; i < now.size(); ++i) {
      if (was[i].value("digest", "") == now[i]["digest"].get<std::string>()) continue;
      const int64_t then = was[i].value("lines", int64_t{-1}), lines = now[i]["lines"];
      add(now[i]["file"].get<std::string>() + " has changed since checkpoint " + resumed_from_ +
          " was written (" +
          (then == lines
               ? "the same " + std::to_string(lines) + " lines in number, other text"
               : std::to_string(then) + " lines then, " + std::to_string(lines) + " now") +
          ")");
    }
  }
  if (changed.empty()) return;
  if (!opts_.resume_with_new_data) throw DataChanged(changed);
  log("warning: " + changed +
      "; going on with the data as they are now, so the run will not repeat an uninterrupted one");
}

std::string TrainRun::train_files() const {
  std::string s;
  for (const std::string& f : opts_.train_src) s += (s.empty() ? "" : ", ") + f;
  return s;
}

std::string TrainRun::where(int64_t line) const {
  size_t k = 0;
  while (k + 1 < file_starts_.size() && file_starts_[k + 1] <= line) ++k;
  const int64_t first = file_starts_.empty() ? 0 : file_starts_[k];
  return "line " + std::to_string(line - first + 1) + " of " +
         (opts_.train_src.empty() ? std::string("?") : opts_.train_src[k]);
}

void TrainRun::apply_given_regularisation() {
  if (opts_.dropout >= 0) cfg_.dropout = static_cast<float>(opts_.dropout);
  if (opts_.label_smoothing >= 0) cfg_.label_smoothing = static_cast<float>(opts_.label_smoothing);
}

void TrainRun::check_bounds() {
  check_memory_bounds(opts_, cfg_,
                      !spm_.empty()          ? vocab_.size()
                      : opts_.vocab_size > 0 ? opts_.vocab_size
                                             : cfg_.vocab_size);
}

void TrainRun::log_recipe(size_t from) {
  const auto lines = recipe_.lines();
  for (size_t i = from; i < lines.size(); ++i) log("recipe: " + lines[i]);
}

void TrainRun::choose_data_recipe() {
  if (!opts_.recipe || resumed_recipe_) return;
  if (!given("config")) {
    cfg_ = load_config(find_config(recipe_config_name(usable_pairs_)));
    apply_given_regularisation();
    if (!spm_.empty()) cfg_.vocab_size = vocab_.size();
  }
  std::string why_not;
  try {
    require_compute_type(opts_.device, ComputeType::BF16, /*training=*/true);
  } catch (const Error& e) {
    why_not = e.what();
  }
  CorpusFacts facts = corpus_facts(src_, tgt_);
  facts.pairs = usable_pairs_;
  std::string mecab_why_not;
  if (facts.tgt_kana >= 0.05) try {
      metrics::load_tokenizer(metrics::TokenizerKind::kJaMecab);
    } catch (const Error& e) {
      mecab_why_not = e.what();
    }
  data_recipe_ = recipe_for_data(facts, cfg_, opts_, why_not, recipe_, mecab_why_not);
  log_recipe(0);
}

namespace {

// "damaged.nmt: not a valid model file: ..." without the path that the
// message is about to be given with.
std::string reason_about(const std::string& path, std::string why) {
  for (const std::string& p : {path, fs::path(path).filename().string()})
    if (why.rfind(p + ": ", 0) == 0) return why.substr(p.size() + 2);
  return why;
}

std::string name_of(const std::string& path) { return fs::path(path).filename().string(); }


// A new run (nothing to resume) replaces OUT.log.jsonl, OUT.curve.svg and
// OUT.best where an earlier nmt run of this --out left them, which its log
// shows. A regular file of those names beside any other log is someone
// else's (`--out Cargo` beside a Cargo.curve.svg of their own), and
// refused rather than overwritten. Devices and FIFOs are written through.
void check_side_outputs(const std::string& out) {
  const std::string log = out + ".log.jsonl";
  const auto regular = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  };
  bool earlier_run = false, empty_log = false;
  if (regular(log)) {
    std::ifstream in(log);
    std::string line;
    if (std::getline(in, line)) {
      const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
      earlier_run = j.is_object() && j.contains("type") && j["type"] == "start";
    } else {
      // Empty: what a run killed before its first record leaves, and
      // nothing to lose either way.
      empty_log = true;
    }
  }
  if (earlier_run) return;
  for (const std::string& p : {log, out + ".curve.svg", out + ".best", partial_path(out)})
    if (regular(p) && !(p == log && empty_log))
      throw InputError("{out} " + out + ": " + p +
                       " already exists and is not from an earlier nmt run of this {out}; " +
                       "refusing to overwrite it: move it away or choose another {out}");
}

}  // namespace

void TrainRun::open_previous_run() {
  const auto ckpts = list_checkpoints(opts_.out);
  if (!ckpts.empty() && !opts_.resume)
    throw InputError(checkpoint_dir(opts_.out) + " holds checkpoints of an earlier run (latest " +
                     ckpts.back() +
                     "): pass {resume} to continue it, or remove the directory to start over");
  std::error_code ec;
  if (ckpts.empty() && !opts_.resume && fs::exists(opts_.out, ec))
    throw InputError(
        "{out}: " + opts_.out +
        " already exists (the model of an earlier run?) and there is no checkpoint in " +
        checkpoint_dir(opts_.out) + "/ to resume: remove it or choose another {out}");
  if (ckpts.empty()) check_side_outputs(opts_.out);
  if (opts_.resume && !ckpts.empty()) {
    ModelConfig ccfg;
    const std::string chosen = newest_whole_checkpoint(ckpts, ccfg);
    return resume_from(chosen, ccfg);
  }
  if (opts_.resume)
    log("{resume}: no checkpoint in " + checkpoint_dir(opts_.out) + "; starting from scratch");
  if (!opts_.spm.empty()) {
    vocab_ = Vocab::from_file(opts_.spm);
    if (opts_.vocab_size > 0 && opts_.vocab_size != vocab_.size())
      throw OptionError("{vocab_size} " + std::to_string(opts_.vocab_size) +
                        " differs from {spm} " + opts_.spm + ", which has " +
                        std::to_string(vocab_.size()) +
                        " pieces: leave out {vocab_size} (the vocabulary is the {spm} model's)");
    log("vocabulary: " + opts_.spm + " (" + std::to_string(vocab_.size()) + " pieces)");
    spm_ = vocab_.bytes();
    cfg_.vocab_size = vocab_.size();
  }
}

// The newest checkpoint that is whole, opened into resume_file_ (its config
// in ccfg); a damaged one is named and passed over.
std::string TrainRun::newest_whole_checkpoint(const std::vector<std::string>& ckpts,
                                              ModelConfig& ccfg) {
  std::vector<std::string> damaged;
  std::string chosen;
  for (auto it = ckpts.rbegin(); it != ckpts.rend() && chosen.empty(); ++it) {
    std::string why;
    try {
      auto f = std::make_unique<FileContents>(open_model(*it, ccfg, spm_));
      why = checkpoint_problem(*f, checkpoint_step(*it));
      if (why.empty() && spm_.empty()) why = "it holds no SentencePiece vocabulary";
      if (why.empty()) {
        resume_file_ = std::move(f);
        chosen = *it;
      }
    } catch (const Error& e) {
      why = reason_about(*it, e.what());
    }
    if (!why.empty()) damaged.push_back(name_of(*it) + " is damaged (" + why + ")");
  }
  std::string list;
  for (const auto& d : damaged) list += (list.empty() ? "" : "; ") + d;
  if (chosen.empty())
    throw InputError("{resume}: no checkpoint in " + checkpoint_dir(opts_.out) +
                     " can be resumed from: " + list + "; remove the directory to start over");
  for (const auto& d : damaged)
    log("warning: " + d + "; resuming from " + name_of(chosen) +
        (damaged.size() > 1 ? " (the newest whole checkpoint)" : ""));
  return chosen;
}

// The run goes on from checkpoint `chosen` (open in resume_file_): its
// state, seed, data digests and recipe.
void TrainRun::resume_from(const std::string& chosen, const ModelConfig& ccfg) {
  const TrainState rs = read_train_state(*resume_file_);
  if (rs.extra.contains("data") && rs.extra["data"].is_array()) resumed_digests_ = rs.extra["data"];
  resumed_from_ = name_of(chosen);
  if (opts_.recipe) restore_recipe_options(rs, chosen);
  check_resume(chosen, ccfg, rs);
  cfg_ = ccfg;
  vocab_ = Vocab::from_bytes(spm_);
  if (rs.seed != opts_.seed) log("resuming with the checkpoint's seed " + std::to_string(rs.seed));
  opts_.seed = rs.seed;
  if (rs.update_freq != opts_.update_freq)
    log("warning: {update_freq} differs from the checkpoint's (" + std::to_string(rs.update_freq) +
        "); the run will not repeat an uninterrupted one exactly");
  if (rs.ranks != comm_.size())
    log("warning: the checkpoint was trained by " + std::to_string(rs.ranks) +
        " process(es), this run has " + std::to_string(comm_.size()) + ": an update now takes " +
        std::to_string(comm_.size()) + " x {update_freq} batches, so the batch size and the " +
        "order in which batches meet the optimiser change from here on");
  log("resuming from " + chosen + " at step " + std::to_string(rs.step) + " (epoch " +
      std::to_string(rs.epoch) + ", batch " + std::to_string(rs.batch_index) + ")");
}

// A resumed run goes on as it began: the options it chose (or was given
// then) stay, unless given now.
void TrainRun::restore_recipe_options(const TrainState& rs, const std::string& chosen) {
  resumed_recipe_ = true;
  if (rs.extra.contains("recipe")) recipe_ = Recipe::from_json(rs.extra["recipe"]);
  const json old = rs.extra.contains("options") && rs.extra["options"].is_object()
                       ? rs.extra["options"]
                       : json::object();
  json restore = json::object();
  for (const TrainingKey& k : training_keys()) {
    const std::string key = k.name;
    if (given(k.name) || !old.contains(key) || key == "max_steps" || key == "max_epochs" ||
        key == "max_minutes" || key == "log_every" || key == "seed")
      continue;
    restore[key] = old[key];
  }
  // The vocabulary size the recipe chose, so that the options recorded in
  // the final model are those of an uninterrupted run.
  if (!given("vocab_size") && old.contains("vocab_size") && old["vocab_size"].is_number_integer())
    opts_.vocab_size = old["vocab_size"].get<int>();
  try {
    apply_training_json(restore, opts_, chosen);
  } catch (const InputError&) {
    // An option of an older nmt that this one reads otherwise: the checks
    // below name what differs.
  }
  require_compute_type(opts_.device, parse_compute_type(opts_.compute_type), /*training=*/true);
  if (!recipe_.empty()) log("resuming with the recipe the run began with");
}

// What this run is given against what the checkpoint was trained with: a
// different model or vocabulary cannot continue it; other options can, but
// each that differs is named.
void TrainRun::check_resume(const std::string& path, const ModelConfig& ccfg,
                            const TrainState& rs) {
  const std::string ckpt = name_of(path);
  const json was = config_to_json(ccfg), now = config_to_json(cfg_);
  std::string differ;
  for (auto it = was.begin(); it != was.end(); ++it) {
    const std::string& k = it.key();
    if (k == "name" || k == "vocab_size" || k == "training") continue;
    if (!now.contains(k) || now[k] != *it)
      differ += (differ.empty() ? "" : "; ") + k + " " + it->dump() + " there, " +
                (now.contains(k) ? now[k].dump() : std::string("none")) + " here";
  }
  const std::string config_name = opts_.config.empty() ? "the config" : "{config} " + opts_.config;
  if (!differ.empty() && (given("config") || !opts_.recipe))
    throw InputError("{resume}: " + config_name + " differs from the model of checkpoint " + ckpt +
                     " (" + differ +
                     "): resume with the config it was trained with, or train into another {out}");
  if (was.value("name", "") != now.value("name", "") && (given("config") || !opts_.recipe))
    log("warning: " + config_name + " is named \"" + now.value("name", "") +
        "\", the checkpoint's config \"" + was.value("name", "") +
        "\" (the model's shape is the same)");
  if (!opts_.spm.empty() && Vocab::from_file(opts_.spm).bytes() != spm_)
    throw InputError("{resume}: {spm} " + opts_.spm + " is not the vocabulary of checkpoint " +
                     ckpt + ": resume without {spm} (the checkpoint holds its vocabulary)");
  if (rs.batch_tokens != opts_.batch_tokens)
    throw InputError("{resume}: checkpoint " + ckpt + " was trained with {batch_tokens} " +
                     std::to_string(rs.batch_tokens) + ", not " +
                     std::to_string(opts_.batch_tokens) + "; resume with the same value");
  const json old = rs.extra.contains("options") && rs.extra["options"].is_object()
                       ? rs.extra["options"]
                       : json::object();
  const int pieces = Vocab::from_bytes(spm_).size();
  if (opts_.vocab_size > 0 && opts_.vocab_size != pieces &&
      old.value("vocab_size", json()) != json(opts_.vocab_size))
    throw InputError("{resume}: {vocab_size} " + std::to_string(opts_.vocab_size) +
                     " differs from the vocabulary of checkpoint " + ckpt + " (" +
                     std::to_string(pieces) +
                     " pieces): resume without {vocab_size}, or with the same value");
  // Options that only say how long to go on, or how to log, may change.
  const json cur = options_to_json(opts_);
  for (auto it = old.begin(); it != old.end(); ++it) {
    const std::string& k = it.key();
    if (k == "out" || k == "max_steps" || k == "max_epochs" || k == "max_minutes" ||
        k == "log_every" || k == "threads" || k == "seed" || k == "update_freq" ||
        k == "batch_tokens" || k == "vocab_size" || k == "spm" || !cur.contains(k) || cur[k] == *it)
      continue;
    if (it->is_string() && cur[k].is_string() && !it->get<std::string>().empty() &&
        io::file_id(it->get<std::string>()) == io::file_id(cur[k].get<std::string>()))
      continue;  // the same file, named another way
    log("warning: {" + k + "} is " + cur[k].dump() + " here but was " + it->dump() +
        " when checkpoint " + ckpt + " was written; continuing with " + cur[k].dump());
  }
}

void TrainRun::make_vocabulary() {
  if (!spm_.empty()) return;  // the checkpoint's, or --spm's
  {
    const int size = opts_.vocab_size > 0 ? opts_.vocab_size : cfg_.vocab_size;
    // A joint vocabulary from a sample of both sides, pointing at the text
    // rather than copying it.
    constexpr size_t kSamplePerSide = 300000;
    std::vector<const std::string*> sample;
    std::mt19937_64 rng(mix_seed(opts_.seed, 0x5e9));
    for (const auto* side : {&src_, &tgt_}) {
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
    vocab_ = Vocab::from_bytes(bytes);
    log("vocabulary: " + std::to_string(vocab_.size()) + " pieces");
  }
  spm_ = vocab_.bytes();
  cfg_.vocab_size = vocab_.size();
}

void TrainRun::encode_data() {
  // Pairs too long for the model are skipped and counted.
  const int64_t max_len = cfg_.max_positions - 1;
  train_c_ = encode_corpus_releasing(vocab_, src_, tgt_, max_len);
  for (int64_t& l : train_c_.line) l = line_of_[static_cast<size_t>(l)];
  std::vector<int64_t>().swap(line_of_);
  if (opts_.filter) ratio_ = filter_length_ratio(train_c_);
  if (has_valid()) valid_c_ = encode_corpus(vocab_, vsrc_, vtgt_, max_len);
  if (train_c_.size() == 0)
    throw InputError(train_files() + ": no usable sentence pairs (" +
                     std::to_string(train_c_.skipped_long) + " longer than " +
                     std::to_string(max_len) + " subwords, " +
                     std::to_string(train_c_.skipped_empty) + " with an empty side)");
  if (has_valid() && valid_c_.size() == 0)
    throw InputError(opts_.valid_src + ": no usable sentence pairs in the validation set (" +
                     std::to_string(valid_c_.skipped_long) + " longer than " +
                     std::to_string(max_len) + " subwords, " +
                     std::to_string(valid_c_.skipped_empty) + " with an empty side)");
  // A batch holds at least one pair; a budget below the widest pair would
  // silently give such pairs a batch of their own.
  int64_t widest = 0, widest_line = 0;
  for (int64_t i = 0; i < train_c_.size(); ++i) {
    const int64_t w =
        static_cast<int64_t>(std::max(train_c_.src[i].size(), train_c_.tgt[i].size())) + 1;
    if (w > widest) widest = w, widest_line = train_c_.line[i];
  }
  if (opts_.batch_tokens < widest && (!opts_.recipe || given("batch_tokens")))
    throw OptionError("{batch_tokens} " + std::to_string(opts_.batch_tokens) +
                      " is smaller than the widest sentence pair (" + std::to_string(widest) +
                      " subwords with </s>, " + where(widest_line) +
                      "): a batch must hold at least one pair; use " + "{batch_tokens} " +
                      std::to_string(widest) + " or more");
  widest_ = widest;
  std::string filtered = "; {no_filter}: duplicates and length ratios kept";
  if (opts_.filter)
    filtered = "; dropped " + std::to_string(duplicates_) + " exact duplicate pairs and " +
               std::to_string(ratio_.dropped) + " of implausible length ratio (target/source " +
               "subwords outside " + fmt("%.2f", ratio_.lo) + "-" + fmt("%.2f", ratio_.hi) + ", " +
               fmt("%g", ratio_.factor) + "x off the median " + fmt("%.2f", ratio_.median) +
               ", pairs of " + std::to_string(ratio_.min_longer) + "+ subwords)";
  const uint64_t peak = peak_resident_bytes();
  log("training data: " + std::to_string(train_c_.size()) + " of " + std::to_string(train_lines_) +
      " pairs from " + std::to_string(opts_.train_src.size()) + " corpus file pair(s), " +
      std::to_string(train_c_.tgt_tokens()) + " target tokens; skipped " +
      std::to_string(train_c_.skipped_long) + " longer than " + std::to_string(max_len) +
      " subwords and " + std::to_string(train_c_.skipped_empty) + " with an empty side" + filtered +
      (peak ? "; peak memory " + fmt("%.0f", double(peak) / (1 << 20)) + " MiB" : ""));
  if (has_valid())
    log("validation data: " + std::to_string(valid_c_.size()) + " of " +
        std::to_string(vsrc_.size()) + " pairs; skipped " + std::to_string(valid_c_.skipped_long) +
        " too long, " + std::to_string(valid_c_.skipped_empty) + " empty");
}

void TrainRun::build_model() {
  model_ = std::make_unique<Transformer>(cfg_, opts_.device);
  model_->init(opts_.seed);
  model_->params().set_compute_type(parse_compute_type(opts_.compute_type));
  if (opts_.recipe && !resumed_recipe_) {
    const float dropout = cfg_.dropout, smoothing = cfg_.label_smoothing;
    choose_budget_recipe();
    if (cfg_.dropout != dropout || cfg_.label_smoothing != smoothing) {
      // The same weights (init depends on the seed and the shape only),
      // now with the recipe's regularisation in the config.
      model_ = std::make_unique<Transformer>(cfg_, opts_.device);
      model_->init(opts_.seed);
      model_->params().set_compute_type(parse_compute_type(opts_.compute_type));
    }
    check_bounds();
  }
  if (opts_.explain) return;
  trainer_ = std::make_unique<Trainer>(*model_, train_c_, opts_);
  trainer_->set_stop(cb_.stop);
  trainer_->set_schedule_steps(recipe_updates_);
  if (resume_file_) {
    const TrainState rs = trainer_->load(*resume_file_, opts_.resume_with_new_data);
    const json& e = rs.extra;
    auto num = [&](const char* key, double fallback) {
      return e.contains(key) && e[key].is_number() ? e[key].get<double>() : fallback;
    };
    best_ = num("best", 0.0);
    best_step_ = static_cast<int64_t>(num("best_step", -1));
    bad_valids_ = static_cast<int64_t>(num("bad_validations", 0));
    last_valid_step_ = static_cast<int64_t>(num("last_valid_step", -1));
    last_metric_ = num("last_metric", 0.0);
    // A checkpoint written by the validation that ran out the patience:
    // the run it resumes had decided to stop there.
    early_stopped_ = opts_.early_stop > 0 && bad_valids_ >= opts_.early_stop;
    train_seconds_before_ = num("train_seconds", 0.0);
    trainer_->set_schedule_steps(static_cast<int64_t>(num("schedule_steps", 0)));
    resume_file_.reset();
  }
  last_ckpt_step_ = trainer_->steps();
  loop_start_step_ = trainer_->steps();
}

void TrainRun::choose_budget_recipe() {
  BudgetFacts f;
  f.pairs = train_c_.size();
  f.target_tokens = train_c_.tgt_tokens();
  f.widest_pair = widest_;
  f.has_valid = has_valid();
  // Planned on rank 0's measurement, so that every process plans alike.
  auto measure = [&](int64_t batch) {
    batch = std::max(batch, widest_);
    std::string m;
    if (root()) {
      double fill = 0.8;
      const double sec = measure_update_seconds(*model_, train_c_, batch, opts_.seed, &fill);
      m = fmt("%.17g", sec) + " " + fmt("%.17g", fill);
    }
    comm_.broadcast(m, 0);
    std::sscanf(m.c_str(), "%lf %lf", &f.probe_seconds, &f.fill);
    f.probe_batch_tokens = batch;
    log("measured " + fmt("%.2f", f.probe_seconds) + " s per update of " + std::to_string(batch) +
        " tokens (" + fmt("%.0f", f.fill * double(batch) / std::max(f.probe_seconds, 1e-9)) +
        " target tokens/s, " + opts_.compute_type + ")");
  };
  const int64_t probe_batch =
      given("batch_tokens") ? opts_.batch_tokens : f.pairs < 100000 ? 4096 : 8192;
  size_t from = recipe_.choices().size();
  if (opts_.max_minutes > 0 && !given("compute_type") && opts_.compute_type == "bf16") {
    // bf16 only where it is faster (recipe_compute_by_speed); the faster
    // type's time is the probe a time budget plans with. Only for a budget
    // of time, which depends on the clock anyway: a budget of steps or
    // epochs must train the same model on every run of the same command
    // (a resumed run is checked against an uninterrupted one).
    measure(probe_batch);
    const double bf16_s = f.probe_seconds, bf16_fill = f.fill;
    model_->params().set_compute_type(ComputeType::F32);
    opts_.compute_type = "f32";
    measure(probe_batch);
    opts_.compute_type = "bf16";
    if (!recipe_compute_by_speed(bf16_s, f.probe_seconds, f.probe_batch_tokens, opts_, recipe_))
      f.probe_seconds = bf16_s, f.fill = bf16_fill;
    model_->params().set_compute_type(parse_compute_type(opts_.compute_type));
    from -= 1;  // the revised compute_type is logged with this stage
  }
  if (opts_.max_minutes > 0) {
    if (f.probe_batch_tokens == 0) measure(probe_batch);
    if (!given("batch_tokens")) {
      // Smaller batches run fewer tokens a second: plan again with the
      // speed of the batch the first plan chose.
      TrainOptions o = opts_;
      ModelConfig c = cfg_;
      Recipe scratch;
      recipe_for_budget(f, c, o, scratch);
      if (o.batch_tokens != f.probe_batch_tokens) measure(o.batch_tokens);
    }
  }
  recipe_updates_ = recipe_for_budget(f, cfg_, opts_, recipe_);
  if (f.probe_batch_tokens > 0)
    probe_seconds_ = f.probe_seconds * double(opts_.batch_tokens) / double(f.probe_batch_tokens);
  log_recipe(from);
}

// The update at which a linear or cosine schedule ends, from what is known
// now: the step and epoch budgets exactly, and a time budget from the
// speed so far (the measured probe before the first updates), keeping room
// for the last validations. 0: not known (decays as the inverse square root).
int64_t TrainRun::schedule_end() const {
  if (!trainer_ || opts_.lr_schedule == "inverse-sqrt") return 0;
  int64_t end = 0;
  auto take = [&](int64_t x) { end = end == 0 ? x : std::min(end, x); };
  if (opts_.max_steps > 0) take(opts_.max_steps);
  if (opts_.max_epochs > 0)
    take(std::max<int64_t>(
        1, opts_.max_epochs * trainer_->batches_per_epoch() / (opts_.update_freq * comm_.size())));
  if (opts_.max_minutes > 0) {
    const int64_t done = trainer_->steps() - loop_start_step_;
    const double elapsed = seconds_since(loop_start_);
    const double per_update = done >= 5 ? elapsed / double(done) : probe_seconds_;
    if (per_update > 0) {
      const double left = opts_.max_minutes * 60 - seconds_since(start_);
      const double reserve = 2 * last_valid_seconds_ + 0.02 * opts_.max_minutes * 60;
      take(trainer_->steps() + updates_in_time(left, per_update, reserve));
    }
  }
  return end;
}

void TrainRun::revise_schedule(int64_t end) {
  if (end <= 0 || end == trainer_->schedule_steps()) return;
  trainer_->set_schedule_steps(end);
  if (logged_end_ == 0 || std::abs(double(end - logged_end_)) > 0.1 * double(logged_end_)) {
    log("schedule: the learning rate reaches 0 at update " + std::to_string(end) +
        (opts_.max_minutes > 0 && trainer_->steps() > loop_start_step_
             ? " (" +
                   fmt("%.2f",
                       seconds_since(loop_start_) / double(trainer_->steps() - loop_start_step_)) +
                   " s per update so far)"
             : std::string()));
    logged_end_ = end;
  }
}

void TrainRun::open_log() {
  const bool resumed = opts_.resume && trainer_->steps() > 0;
  log_ = std::make_unique<TrainLog>(opts_.out, resumed, trainer_->steps(),
                                    cfg_.name + ": " + fs::path(opts_.out).filename().string());
  if (log_->unreadable())
    log("warning: dropped " + std::to_string(log_->unreadable()) + " unreadable line(s) of " +
        opts_.out + ".log.jsonl");
  const int64_t bpe = trainer_->batches_per_epoch();
  log_->write({{"type", "start"},
               {"step", trainer_->steps()},
               {"resumed", resumed},
               {"options", options_to_json(opts_)},
               {"config", config_to_json(cfg_)},
               {"parameters", model_->parameter_count()},
               {"batches_per_epoch", bpe},
               {"backends", backends_info()},
               // The arithmetic of the device it trains on (cpu/numerics.h).
               {"numerics", backend(opts_.device).numerics()}});
  json data = data_summary();
  data["type"] = "data";
  data["step"] = trainer_->steps();
  log_->write(data);
  log("model: " + cfg_.name + ", " + human_number(double(model_->parameter_count())) +
      " parameters; " + std::to_string(bpe) +
      " batches of <= " + std::to_string(opts_.batch_tokens) + " tokens per epoch, " +
      std::to_string(opts_.update_freq) + " per update per process; " +
      std::to_string(ops::num_threads()) + " threads; " + comm_.describe());
}

void TrainRun::agree() {
  int64_t flags[4] = {
      cb_.stop && cb_.stop->load() != 0,
      root() && opts_.max_minutes > 0 && seconds_since(start_) >= opts_.max_minutes * 60,
      root() && early_stopped_, root() ? schedule_end() : 0};
  comm_.max(flags, 4);
  signalled_ = flags[0], out_of_time_ = flags[1], early_stop_agreed_ = flags[2];
  revise_schedule(flags[3]);
}

// Every input here is the same in every process: step counts, epochs and
// the agreed flags.
bool TrainRun::stop_now() {
  agree();
  std::string& reason = result_.stop_reason;
  const int64_t steps = trainer_->steps();
  if (opts_.max_steps > 0 && steps >= opts_.max_steps)
    reason = "max-steps";
  else if (opts_.max_epochs > 0 && trainer_->epoch() >= opts_.max_epochs)
    reason = "max-epochs";
  else if (out_of_time_)
    reason = "max-minutes";
  else if (early_stop_agreed_)
    reason = "early-stop";
  else if (signalled_)
    reason = "interrupted";
  return !reason.empty();
}

void TrainRun::loop() {
  loop_start_ = Clock::now();
  loop_start_step_ = trainer_->steps();
  // A validation that a stop cut short left its step's checkpoint without
  // it: run it now, as the uninterrupted run did at this step.
  const int64_t step = trainer_->steps();
  if (root() && has_valid() && opts_.valid_every > 0 && step > 0 && step % opts_.valid_every == 0 &&
      last_valid_step_ < step)
    validate_unless_stopped();
  while (!stop_now()) {
    const StepStats s = trainer_->step();
    if (!std::isfinite(s.loss))
      throw Error("training diverged at step " + std::to_string(s.step) + " (loss " +
                  fmt("%g", s.loss) +
                  "); try a smaller {lr_scale}, a longer {warmup_steps} or {clip_norm}");
    after_update(s);
  }
}

void TrainRun::after_update(const StepStats& s) {
  result_.losses.push_back(s.loss);
  if (!root()) return;  // logs, validation and checkpoints are rank 0's
  log_->write({{"type", "train"},
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
               {"elapsed_s", seconds_since(start_)}});
  log_->add_train(s.step, s.loss);
  report_progress(s);
  // Stopped: the loop stops at once, and finish() saves this step's
  // checkpoint (without this validation, which a resumed run makes).
  if (has_valid() && opts_.valid_every > 0 && s.step % opts_.valid_every == 0 &&
      !validate_unless_stopped())
    return;
  if ((opts_.checkpoint_every > 0 && s.step % opts_.checkpoint_every == 0) ||
      (opts_.checkpoint_minutes > 0 &&
       seconds_since(last_ckpt_time_) >= opts_.checkpoint_minutes * 60))
    save_checkpoint();
}

void TrainRun::report_progress(const StepStats& s) {
  tok_ema_ = tok_ema_ == 0 ? double(s.tgt_tokens) : 0.9 * tok_ema_ + 0.1 * double(s.tgt_tokens);
  sec_ema_ = sec_ema_ == 0 ? s.seconds : 0.9 * sec_ema_ + 0.1 * s.seconds;
  if (!cb_.progress) return;
  TrainProgress p;
  p.stats = s;
  p.tokens_per_second = tok_ema_ / std::max(sec_ema_, 1e-9);
  p.elapsed_seconds = seconds_since(start_);
  double eta = -1;
  auto take = [&](double e) { eta = eta < 0 ? e : std::min(eta, e); };
  if (opts_.max_steps > 0) take(double(opts_.max_steps - s.step) * sec_ema_);
  if (opts_.max_minutes > 0) take(std::max(0.0, opts_.max_minutes * 60 - p.elapsed_seconds));
  if (opts_.max_epochs > 0)
    take(std::max(0.0, (double(opts_.max_epochs) - s.epoch_progress) *
                           double(trainer_->batches_per_epoch()) / double(opts_.update_freq) *
                           sec_ema_));
  p.eta_seconds = eta;
  cb_.progress(p);
}

json TrainRun::extra_state() const {
  return json{{"options", options_to_json(opts_)},
              {"best", best_},
              {"best_step", best_step_},
              {"bad_validations", bad_valids_},
              {"last_valid_step", last_valid_step_},
              {"last_metric", last_metric_},
              {"train_seconds", train_seconds_before_ + seconds_since(start_)},
              {"schedule_steps", trainer_->schedule_steps()},
              {"recipe", recipe_.to_json()},
              {"data", digests_}};
}

// Recorded in every model file a run writes, so `nmt info` can say how the
// model was made. Nothing here may depend on time or on resumption: a run
// resumed after a crash must write the same bytes as an uninterrupted one.
json TrainRun::data_summary() const {
  json files = options_to_json(opts_);
  return {{"train_src", files["train_src"]},
          {"train_tgt", files["train_tgt"]},
          {"train_lines", train_lines_},
          {"train_pairs", train_c_.size()},
          {"train_target_tokens", train_c_.tgt_tokens()},
          {"skipped_long", train_c_.skipped_long},
          {"skipped_empty", train_c_.skipped_empty},
          {"max_subwords", cfg_.max_positions - 1},
          {"valid_src", opts_.valid_src},
          {"valid_tgt", opts_.valid_tgt},
          {"valid_pairs", valid_c_.size()},
          {"valid_skipped_long", valid_c_.skipped_long},
          {"valid_skipped_empty", valid_c_.skipped_empty},
          {"vocab_size", vocab_.size()},
          {"filtered", opts_.filter},
          {"duplicates_dropped", duplicates_},
          {"ratio_dropped", ratio_.dropped},
          {"ratio_kept", json::array({ratio_.lo, ratio_.hi})}};
}

std::map<std::string, std::string> TrainRun::model_metadata() const {
  std::map<std::string, std::string> m = {{"step", std::to_string(trainer_->steps())},
                                          {"training_options", options_to_json(opts_).dump()},
                                          {"training_data", data_summary().dump()}};
  if (!recipe_.empty()) m["recipe"] = recipe_.to_json().dump();
  return m;
}

void TrainRun::save_checkpoint() {
  const int64_t step = trainer_->steps();
  const std::string path = checkpoint_path(opts_.out, step);
  fs::create_directories(checkpoint_dir(opts_.out));
  try {
    trainer_->save(path, spm_, extra_state());
  } catch (const Error& e) {
    const auto all = list_checkpoints(opts_.out);
    throw Error("the checkpoint of step " + std::to_string(step) + " was not saved (" + e.what() +
                "); " +
                (all.empty() ? std::string("there is no earlier checkpoint")
                             : "the previous checkpoint " + all.back() +
                                   " is intact: free some space and continue with {resume}"));
  }
  last_ckpt_step_ = step;
  last_ckpt_time_ = Clock::now();
  const int64_t keep =
      opts_.keep_checkpoints == 0 ? 0 : std::max(opts_.keep_checkpoints, opts_.average_last);
  prune_checkpoints(opts_.out, keep);
  log_->write({{"type", "checkpoint"}, {"step", step}, {"path", path}});
  log_->sync();
}

Metric TrainRun::validate(bool averaged) {
  const auto t0 = Clock::now();
  const ValidStats v = trainer_->validate(valid_c_, &vocab_, &vtgt_, opts_.valid_sentences);
  last_valid_seconds_ = seconds_since(t0);
  const int64_t step = trainer_->steps();
  Metric m;
  m.higher_better = opts_.best_metric == "bleu" && v.has_bleu;
  m.value = m.higher_better ? v.bleu : v.loss;
  m.name = m.higher_better ? "BLEU" : "loss";
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
    log_->write(j);
    log(line);
    return m;
  }
  last_valid_step_ = step;
  last_metric_ = m.value;
  if (best_step_ < 0 || m.better_than(best_)) {
    best_ = m.value;
    best_step_ = step;
    bad_valids_ = 0;
    save_model(opts_.out + ".best", *model_, spm_, model_metadata());
    line += " (best so far; saved " + opts_.out + ".best)";
  } else {
    ++bad_valids_;
    line += " (best " + fmt("%.3f", best_) + " at step " + std::to_string(best_step_) + ")";
    if (opts_.early_stop > 0 && bad_valids_ >= opts_.early_stop) early_stopped_ = true;
  }
  j["best"] = best_;
  j["best_step"] = best_step_;
  log_->write(j);
  log(line);
  const double bleu = v.bleu;
  log_->add_valid(step, v.loss, v.has_bleu ? &bleu : nullptr);
  log_->write_curve();
  return m;
}

bool TrainRun::validate_unless_stopped() {
  try {
    validate(false);
    return true;
  } catch (const Stopped&) {
    log("validation at step " + std::to_string(trainer_->steps()) + " stopped");
    return false;
  }
}

// With --average-last, the average of the last checkpoints usually beats the
// last weights, but not when the checkpoints span much of the run: keep
// whichever validates better, and say which and why.
void TrainRun::choose_final_weights() {
  result_.final_weights = "last";
  const auto all = list_checkpoints(opts_.out);
  if (opts_.average_last <= 1 || all.size() <= 1) return;
  const size_t k = std::min<size_t>(all.size(), static_cast<size_t>(opts_.average_last));
  const std::vector<std::string> last(all.end() - static_cast<std::ptrdiff_t>(k), all.end());
  average_checkpoints(last, *model_, cb_.stop);
  const std::string what = "the average of the last " + std::to_string(k) + " checkpoints";
  json entry = {{"type", "final"}, {"step", trainer_->steps()}, {"averaged_checkpoints", k}};
  std::string why;
  if (!has_valid()) {
    result_.final_weights = "average";
    why = what + " (no validation set to compare it with the last weights)";
  } else {
    const Metric avg = validate(/*averaged=*/true);
    entry["metric"] = avg.name;
    entry["average"] = avg.value;
    entry["last"] = last_metric_;
    if (!avg.better_than(last_metric_) && avg.value != last_metric_) {
      load_weights(read_safetensors(all.back()), *model_);  // the last weights
      why = "the last weights (validation " + std::string(avg.name) + " " +
            fmt("%.3f", last_metric_) + ") beat " + what + " (" + fmt("%.3f", avg.value) + ")";
    } else {
      result_.final_weights = "average";
      why = what + " (validation " + std::string(avg.name) + " " + fmt("%.3f", avg.value) +
            ", against " + fmt("%.3f", last_metric_) + " for the last weights)";
    }
  }
  entry["kept"] = result_.final_weights;
  entry["why"] = why;
  log_->write(entry);
  log("final model: " + why);
}

// The vocabulary shortlist, from the training pairs, and what it costs: the
// validation set (its first kShortlistSentences) translated at beam 4 with
// and without it by the model at model_path (the final weights), as `nmt
// translate` loads it. Translation uses it by default only if that cost is
// at most kMaxDefaultShortlistCost BLEU. The table goes into tensors, the
// measurement into meta.
void TrainRun::add_shortlist(const std::string& model_path, VocabTensors& tensors,
                             std::map<std::string, std::string>& meta) {
  constexpr int64_t kShortlistSentences = 1000;
  const auto t0 = Clock::now();
  std::vector<const std::vector<int32_t>*> src, tgt;
  for (int64_t i = 0; i < train_c_.size(); ++i)
    src.push_back(&train_c_.src[i]), tgt.push_back(&train_c_.tgt[i]);
  const Shortlist sl =
      Shortlist::build(src, tgt, cfg_.source_vocab(), cfg_.vocab_size, {}, cb_.stop);
  std::optional<ShortlistCost> cost;
  if (has_valid() && valid_c_.size() > 0) {
    const LoadedModel m = load_model(model_path, "", nullptr, opts_.device);
    const int64_t n = std::min(valid_c_.size(), kShortlistSentences);
    std::vector<std::string> src, refs;
    for (int64_t i = 0; i < n; ++i)
      src.push_back(vsrc_[valid_c_.line[i]]), refs.push_back(vtgt_[valid_c_.line[i]]);
    SearchOptions so;
    so.beam = 4;
    so.stop = cb_.stop;
    cost = measure_shortlist(m, sl, src, refs, so, opts_.valid_tokenize);
  }
  const std::string from = std::to_string(train_c_.size()) + " training pairs";
  meta["shortlist"] = shortlist_metadata(sl, from, cost ? &*cost : nullptr);
  tensors[kShortlistTensor] = sl.serialise();
  std::string line = "shortlist: the " + std::to_string(sl.options().per_source) +
                     " likeliest target pieces of each source piece and the " +
                     std::to_string(sl.options().frequent) + " most frequent, from " + from + " (" +
                     std::to_string(sl.entries()) + " entries)";
  json entry = {{"type", "shortlist"}, {"entries", sl.entries()}, {"seconds", seconds_since(t0)}};
  if (cost) {
    line += "; validation BLEU at beam 4 " + fmt("%.2f", cost->bleu_shortlist) + " with it, " +
            fmt("%.2f", cost->bleu_full) + " without (" + std::to_string(cost->sentences) +
            " sentences, " + fmt("%.1f", cost->seconds_shortlist) + " s against " +
            fmt("%.1f", cost->seconds_full) + " s): " +
            (cost->on_by_default() ? "translation uses it by default"
                                   : "it costs more than " +
                                         fmt("%.1f", kMaxDefaultShortlistCost) +
                                         " BLEU, so translation uses it only with {shortlist} on");
    entry["bleu"] = cost->bleu_full;
    entry["bleu_shortlist"] = cost->bleu_shortlist;
    entry["seconds_full"] = cost->seconds_full;
    entry["seconds_shortlist"] = cost->seconds_shortlist;
    entry["default"] = cost->on_by_default();
  } else {
    line += "; no validation set to measure it on, so translation uses it only with {shortlist} on";
    entry["default"] = false;
  }
  log_->write(entry);
  log(line);
}

// OUT appears once, whole (its shortlist included), as the run's last act:
// the final model is written as OUT.partial, where the shortlist is also
// measured, and renamed onto OUT. A kill before then leaves OUT.partial
// (the next run into OUT removes it), never an OUT that looks final; a stop
// signal is honoured up to the rename, by every long loop on the way.
void TrainRun::write_final_model() {
  throw_if_stopped(cb_.stop);
  if (has_valid() && last_valid_step_ != trainer_->steps()) validate(false);
  choose_final_weights();
  const std::string partial = partial_path(opts_.out);
  std::map<std::string, std::string> meta = model_metadata();
  VocabTensors tensors;
  if (!spm_.empty()) tensors["vocab/sentencepiece"] = spm_;
  save_model(partial, *model_, tensors, meta);
  if (opts_.shortlist) {
    add_shortlist(partial, tensors, meta);
    save_model(partial, *model_, tensors, meta);
  }
  throw_if_stopped(cb_.stop);
  // A symlink, device or FIFO at OUT is written through, as every output is.
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(opts_.out, ec);
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    save_model(opts_.out, *model_, tensors, meta);
    fs::remove(partial, ec);
    return;
  }
  if (::rename(partial.c_str(), opts_.out.c_str()) != 0)
    throw Error("cannot rename " + partial + " to " + opts_.out + ": " + std::strerror(errno));
  io::fsync_parent_dir(opts_.out);
}

void TrainRun::finish() {
  const int64_t steps = trainer_->steps();
  if (steps > last_ckpt_step_ || list_checkpoints(opts_.out).empty()) save_checkpoint();
  bool in_final_phase = false;
  if (result_.stop_reason != "interrupted") {
    in_final_phase = true;
    try {
      write_final_model();
      result_.model_path = opts_.out;
      log("wrote " + opts_.out + " after " + std::to_string(steps) + " steps (" +
          result_.stop_reason + ")");
    } catch (const Stopped&) {
      result_.stop_reason = "interrupted";
      std::error_code ec;
      fs::remove(partial_path(opts_.out), ec);
    }
  }
  result_.interrupted = result_.stop_reason == "interrupted";
  if (result_.interrupted)
    log("interrupted at step " + std::to_string(steps) +
        (in_final_phase ? ", before " + opts_.out + " was written" : std::string()) +
        "; checkpoint saved in " + checkpoint_dir(opts_.out) + "; continue with {resume}");
  if (best_step_ >= 0) {
    result_.best_path = opts_.out + ".best";
    result_.best = best_;
  }
  log_->write({{"type", "end"},
               {"step", steps},
               {"reason", result_.stop_reason},
               {"best", best_},
               {"best_step", best_step_},
               {"elapsed_s", seconds_since(start_)}});
  log_->sync();
  log_->write_curve();
}

}  // namespace

TrainResult train(ModelConfig cfg, const TrainOptions& opts, const TrainCallbacks& cb) {
  TrainRun run(std::move(cfg), opts, cb);
  return run.run();
}

}  // namespace nmt
