#include "train/previous_run.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/backend.h"
#include "core/error.h"
#include "io/file_lock.h"
#include "io/output_file.h"
#include "train/checkpoints.h"

namespace nmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

int clear_stale_temps(const std::string& out) {
  int removed = 0;
  for (const std::string& target :
       {out, out + ".best", out + ".log.jsonl", out + ".curve.svg", partial_path(out)})
    removed += io::remove_stale_temps_of(target);
  // The final model of a run killed before it was whole; only where a run
  // of this OUT left checkpoints (it wrote one before it), so that a file
  // of that name beside a new run is not removed but refused
  // (check_side_outputs).
  std::error_code ec;
  if (!list_checkpoints(out).empty() && fs::remove(partial_path(out), ec)) ++removed;
  if (fs::is_directory(checkpoint_dir(out)))
    removed += io::remove_stale_temps_in(checkpoint_dir(out));
  return removed;
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

// Opens the checkpoint to resume from into plan and resumption.
class Opener {
 public:
  Opener(TrainPlan& plan, Resumption& r, int ranks, const RunLog& log)
      : plan_(plan), opts_(plan.opts), r_(r), ranks_(ranks), log_(log) {}
  void open();

 private:
  std::string newest_whole_checkpoint(const std::vector<std::string>& ckpts, ModelConfig& ccfg);
  void resume_from(const std::string& chosen, const ModelConfig& ccfg);
  void restore_recipe_options(const TrainState& rs, const std::string& chosen);
  void check_resume(const std::string& path, const ModelConfig& ccfg, const TrainState& rs);
  bool given(const char* key) const { return opts_.was_given(key); }
  void log(const std::string& s) const { log_(s); }

  TrainPlan& plan_;
  TrainOptions& opts_;
  Resumption& r_;
  int ranks_;
  const RunLog& log_;
};

void Opener::open() {
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
    plan_.vocab = Vocab::from_file(opts_.spm);
    if (opts_.vocab_size > 0 && opts_.vocab_size != plan_.vocab.size())
      throw OptionError("{vocab_size} " + std::to_string(opts_.vocab_size) +
                        " differs from {spm} " + opts_.spm + ", which has " +
                        std::to_string(plan_.vocab.size()) +
                        " pieces: leave out {vocab_size} (the vocabulary is the {spm} model's)");
    log("vocabulary: " + opts_.spm + " (" + std::to_string(plan_.vocab.size()) + " pieces)");
    plan_.spm = plan_.vocab.bytes();
    plan_.cfg.vocab_size = plan_.vocab.size();
  }
}

// The newest checkpoint that is whole, opened into r_.checkpoint (its config
// in ccfg); a damaged one is named and passed over.
std::string Opener::newest_whole_checkpoint(const std::vector<std::string>& ckpts,
                                            ModelConfig& ccfg) {
  std::vector<std::string> damaged;
  std::string chosen;
  for (auto it = ckpts.rbegin(); it != ckpts.rend() && chosen.empty(); ++it) {
    std::string why;
    try {
      auto f = std::make_unique<FileContents>(open_model(*it, ccfg, plan_.spm));
      why = checkpoint_problem(*f, checkpoint_step(*it));
      if (why.empty() && plan_.spm.empty()) why = "it holds no SentencePiece vocabulary";
      if (why.empty()) {
        r_.checkpoint = std::move(f);
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

// The run goes on from checkpoint `chosen` (open in r_.checkpoint): its
// state, seed, data digests and recipe.
void Opener::resume_from(const std::string& chosen, const ModelConfig& ccfg) {
  const TrainState rs = read_train_state(*r_.checkpoint);
  if (rs.extra.contains("data") && rs.extra["data"].is_array()) r_.digests = rs.extra["data"];
  r_.name = name_of(chosen);
  if (opts_.recipe) restore_recipe_options(rs, chosen);
  check_resume(chosen, ccfg, rs);
  plan_.cfg = ccfg;
  plan_.vocab = Vocab::from_bytes(plan_.spm);
  if (rs.seed != opts_.seed) log("resuming with the checkpoint's seed " + std::to_string(rs.seed));
  opts_.seed = rs.seed;
  if (rs.update_freq != opts_.update_freq)
    log("warning: {update_freq} differs from the checkpoint's (" + std::to_string(rs.update_freq) +
        "); the run will not repeat an uninterrupted one exactly");
  if (rs.ranks != ranks_)
    log("warning: the checkpoint was trained by " + std::to_string(rs.ranks) +
        " process(es), this run has " + std::to_string(ranks_) + ": an update now takes " +
        std::to_string(ranks_) + " x {update_freq} batches, so the batch size and the " +
        "order in which batches meet the optimiser change from here on");
  log("resuming from " + chosen + " at step " + std::to_string(rs.step) + " (epoch " +
      std::to_string(rs.epoch) + ", batch " + std::to_string(rs.batch_index) + ")");
}

// A resumed run goes on as it began: the options it chose (or was given
// then) stay, unless given now.
void Opener::restore_recipe_options(const TrainState& rs, const std::string& chosen) {
  plan_.recipe_restored = true;
  if (rs.extra.contains("recipe")) plan_.recipe = Recipe::from_json(rs.extra["recipe"]);
  const json old = rs.extra.contains("options") && rs.extra["options"].is_object()
                       ? rs.extra["options"]
                       : json::object();
  json restore = json::object();
  for (const TrainingOption& o : training_options())
    if (!o.per_run && !given(o.key.c_str()) && old.contains(o.key)) restore[o.key] = old[o.key];
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
  require_compute_type(opts_.device, opts_.compute_type, /*training=*/true);
  if (!plan_.recipe.empty()) log("resuming with the recipe the run began with");
}

// What this run is given against what the checkpoint was trained with: a
// different model or vocabulary cannot continue it; other options can, but
// each that differs is named.
void Opener::check_resume(const std::string& path, const ModelConfig& ccfg, const TrainState& rs) {
  const std::string ckpt = name_of(path);
  const json was = config_to_json(ccfg), now = config_to_json(plan_.cfg);
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
  if (!opts_.spm.empty() && Vocab::from_file(opts_.spm).bytes() != plan_.spm)
    throw InputError("{resume}: {spm} " + opts_.spm + " is not the vocabulary of checkpoint " +
                     ckpt + ": resume without {spm} (the checkpoint holds its vocabulary)");
  if (rs.batch_tokens != opts_.batch_tokens)
    throw InputError("{resume}: checkpoint " + ckpt + " was trained with {batch_tokens} " +
                     std::to_string(rs.batch_tokens) + ", not " +
                     std::to_string(opts_.batch_tokens) + "; resume with the same value");
  const json old = rs.extra.contains("options") && rs.extra["options"].is_object()
                       ? rs.extra["options"]
                       : json::object();
  const int pieces = Vocab::from_bytes(plan_.spm).size();
  if (opts_.vocab_size > 0 && opts_.vocab_size != pieces &&
      old.value("vocab_size", json()) != json(opts_.vocab_size))
    throw InputError("{resume}: {vocab_size} " + std::to_string(opts_.vocab_size) +
                     " differs from the vocabulary of checkpoint " + ckpt + " (" +
                     std::to_string(pieces) +
                     " pieces): resume without {vocab_size}, or with the same value");
  // Options that only say how long to go on, or how to log, may change;
  // those checked or warned of above, and where the output goes, are not
  // named again.
  const json cur = options_to_json(opts_);
  for (auto it = old.begin(); it != old.end(); ++it) {
    const std::string& k = it.key();
    const TrainingOption* o = find_training_option(k);
    if ((o && o->per_run) || k == "out" || k == "threads" || k == "update_freq" ||
        k == "batch_tokens" || k == "vocab_size" || k == "spm" || !cur.contains(k) || cur[k] == *it)
      continue;
    if (it->is_string() && cur[k].is_string() && !it->get<std::string>().empty() &&
        io::file_id(it->get<std::string>()) == io::file_id(cur[k].get<std::string>()))
      continue;  // the same file, named another way
    log("warning: {" + k + "} is " + cur[k].dump() + " here but was " + it->dump() +
        " when checkpoint " + ckpt + " was written; continuing with " + cur[k].dump());
  }
}

}  // namespace

Resumption open_previous_run(TrainPlan& plan, int ranks, const RunLog& log) {
  Resumption r;
  Opener(plan, r, ranks, log).open();
  return r;
}

// A resumed run repeats the uninterrupted one only on the same data: each
// file is compared, by its role and place, with what the checkpoint
// recorded (one from before digests recorded nothing; a validation set
// given or left out is named by the options' warning).
void check_data_unchanged(const json& digests, const Resumption& from, bool resume_with_new_data,
                          const RunLog& log) {
  std::string changed;
  auto add = [&](const std::string& what) { changed += (changed.empty() ? "" : "; ") + what; };
  for (const char* role : {"train_src", "train_tgt", "valid_src", "valid_tgt"}) {
    std::vector<json> was, now;
    for (const json& e : from.digests)
      if (e.is_object() && e.value("role", "") == role) was.push_back(e);
    for (const json& e : digests)
      if (e["role"] == role) now.push_back(e);
    if (was.empty() || now.empty()) continue;
    if (was.size() != now.size()) {  // train_src and train_tgt alike: said once
      if (std::string(role) == "train_src")
        add("the training data is " + std::to_string(now.size()) + " file pair(s), but was " +
            std::to_string(was.size()) + " when checkpoint " + from.name + " was written");
      continue;
    }
    for (size_t i = 0; i < now.size(); ++i) {
      if (was[i].value("digest", "") == now[i]["digest"].get<std::string>()) continue;
      const int64_t then = was[i].value("lines", int64_t{-1}), lines = now[i]["lines"];
      add(now[i]["file"].get<std::string>() + " has changed since checkpoint " + from.name +
          " was written (" +
          (then == lines
               ? "the same " + std::to_string(lines) + " lines in number, other text"
               : std::to_string(then) + " lines then, " + std::to_string(lines) + " now") +
          ")");
    }
  }
  if (changed.empty()) return;
  if (!resume_with_new_data) throw DataChanged(changed);
  log("warning: " + changed +
      "; going on with the data as they are now, so the run will not repeat an uninterrupted one");
}

}  // namespace nmt
