#include "train/options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/memory.h"
#include "io/output_file.h"
#include "io/text_file.h"
#include "model/config.h"
#include "ops/ops.h"
#include "train/checkpoints.h"

namespace nmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

void apply_training_json(const json& j, TrainOptions& o, const std::string& source, bool cli) {
  validate_training_json(j, source, cli);
  for (auto it = j.begin(); it != j.end(); ++it) find_training_option(it.key())->set(o, it.value());
}

namespace {

// The check every command makes of an input (io::check_input_path).
void check_file(const std::string& path, const char* option) {
  if (path.empty()) throw InputError(std::string(option) + " is required");
  io::check_input_path(path, option);
}

}  // namespace

namespace {

// One file as a string (as models trained before several corpora were
// possible record it), several as a list.
json files_json(const std::vector<std::string>& files) {
  if (files.size() == 1) return files[0];
  return files;
}

}  // namespace

json options_to_json(const TrainOptions& o) {
  json j = {{"train_src", files_json(o.train_src)},
            {"train_tgt", files_json(o.train_tgt)},
            {"valid_src", o.valid_src},
            {"valid_tgt", o.valid_tgt},
            {"out", o.out},
            {"spm", o.spm},
            {"vocab_size", o.vocab_size},
            {"threads", ops::num_threads()}};
  for (const TrainingOption& t : training_options()) j[t.key] = t.get(o);
  return j;
}

ModelConfig read_training_config(const std::string& name, bool config_given,
                                 const std::string& option, TrainOptions& opts) {
  const std::string path = find_config(name);
  io::check_input_path(path, option, /*nonempty=*/true);
  ModelConfig cfg = load_config(path);
  if (config_given) {
    opts.config = path;
    opts.given.insert("config");
  }
  // A config's own "training" values are the user's too.
  apply_given_training(cfg.training, opts, path);
  return cfg;
}

void apply_given_training(const nlohmann::json& given, TrainOptions& opts,
                          const std::string& source, bool cli) {
  for (auto it = given.begin(); it != given.end(); ++it) opts.given.insert(it.key());
  apply_training_json(given, opts, source, cli);
}

void validate_options(const TrainOptions& o) {
  if (o.train_src.empty()) throw InputError("{train_src} is required");
  if (o.train_tgt.empty()) throw InputError("{train_tgt} is required");
  if (o.train_src.size() != o.train_tgt.size())
    throw OptionError("{train_src} names " + std::to_string(o.train_src.size()) +
                      " file(s) and {train_tgt} " + std::to_string(o.train_tgt.size()) +
                      ": give one target file for each source file, in the same order");
  for (const std::string& f : o.train_src) check_file(f, "{train_src}");
  for (const std::string& f : o.train_tgt) check_file(f, "{train_tgt}");
  if (o.valid_src.empty() != o.valid_tgt.empty())
    throw OptionError("{valid_src} and {valid_tgt} go together: give both or neither");
  if (!o.valid_src.empty()) {
    check_file(o.valid_src, "{valid_src}");
    check_file(o.valid_tgt, "{valid_tgt}");
  }
  if (!o.spm.empty()) check_file(o.spm, "{spm}");
  // Empty, a directory, in a directory that does not exist, or a .gz name
  // (models are not compressed): refused as every command refuses them.
  io::check_output_path(o.out, "{out}");
  std::error_code ec;
  if (o.vocab_size < 0 || (o.vocab_size > 0 && o.vocab_size < 8))
    throw OptionError("{vocab_size}: expected 0 or at least 8, got " +
                      std::to_string(o.vocab_size));
  if (o.optimize != Optimize::Quality && !o.recipe && !o.was_given("config"))
    throw OptionError("{optimize} " + std::string(optimize_name(o.optimize)) +
                      " shapes the model the recipe chooses, but the recipe is off: give a "
                      "{config} with the layers wanted");
  if (o.early_stop > 0 && o.valid_src.empty())
    throw OptionError("{early_stop} needs a validation set ({valid_src}, {valid_tgt})");
  if (o.early_stop > 0 && o.valid_every == 0)
    throw OptionError("{early_stop} needs validations during the run, but {valid_every} is 0");
  if (o.batch_tokens < 2)
    throw OptionError("{batch_tokens}: expected an integer >= 2, got " +
                      std::to_string(o.batch_tokens));
  // Nothing that training writes may be one of its inputs: not the files
  // beside OUT, nor anything in OUT.ckpt/, where checkpoints are written and
  // pruned.
  std::vector<std::pair<std::string, const char*>> inputs = {{o.valid_src, "{valid_src}"},
                                                             {o.valid_tgt, "{valid_tgt}"},
                                                             {o.spm, "{spm}"},
                                                             {o.config, "{config}"}};
  for (const std::string& f : o.train_src) inputs.emplace_back(f, "{train_src}");
  for (const std::string& f : o.train_tgt) inputs.emplace_back(f, "{train_tgt}");
  const std::string ckpt = o.out + ".ckpt";
  for (const std::string& out : {o.out, o.out + ".best", o.out + ".log.jsonl", o.out + ".curve.svg",
                                 o.out + ".lock", partial_path(o.out), ckpt})
    for (const auto& [in, name] : inputs)
      if (!in.empty() && io::file_id(out) == io::file_id(in))
        throw OptionError("{out}: " + out + " would overwrite the " + name + " file " + in);
  const io::FileId ckpt_dir = io::file_id(ckpt);
  for (const auto& [in, name] : inputs) {
    if (in.empty()) continue;
    const fs::path dir = fs::path(in).parent_path();
    if (ckpt_dir.exists && io::file_id(dir.empty() ? "." : dir.string()) == ckpt_dir)
      throw OptionError("{out}: the " + std::string(name) + " file " + in + " is in " + ckpt +
                        "/, where this run writes and removes checkpoints");
  }
  // Checked now, not at the first checkpoint, validation or the end, when
  // the work would be lost.
  for (const std::string& out :
       {o.out + ".best", o.out + ".log.jsonl", o.out + ".curve.svg", partial_path(o.out)})
    if (fs::is_directory(out, ec))
      throw InputError("{out}: " + out + " is a directory (nmt train writes a file there): " +
                       "remove it or choose another {out}");
  if (fs::exists(fs::symlink_status(ckpt, ec)) && !fs::is_directory(ckpt, ec))
    throw InputError(ckpt +
                     " exists and is not a directory (checkpoints go there): remove it "
                     "or choose another {out}");
}


void check_memory_bounds(const TrainOptions& o, const ModelConfig& cfg, int64_t vocab,
                         uint64_t memory) {
  if (memory == 0) memory = physical_memory_bytes();
  if (memory == 0) return;
  const double mem = static_cast<double>(memory);
  // A lower estimate of one batch's activations per padded token: the logits
  // and their gradient (f32, one per vocabulary entry), and a few vectors of
  // the model's width per layer. Refusing only what this estimate already
  // rules out never refuses a run that would fit.
  const double per_token =
      4.0 * (2.0 * double(std::max<int64_t>(vocab, 1)) +
             4.0 * double(cfg.d_model) * double(cfg.encoder_layers + cfg.decoder_layers));
  const double tokens = static_cast<double>(o.batch_tokens);
  if (tokens * per_token > mem) {
    const auto most = static_cast<int64_t>(mem / per_token);
    throw OptionError("{batch_tokens} " + std::to_string(o.batch_tokens) +
                      ": a batch would need at least " + gigabytes(tokens * per_token) +
                      " for its activations (vocabulary " + std::to_string(vocab) + ", d_model " +
                      std::to_string(cfg.d_model) + "), more than this machine's " + gigabytes(mem) +
                      "; expected at most " + std::to_string(most));
  }
  // The batches of an update are gathered (source, target input and output
  // ids: 3 x 4 bytes per token, and the vectors' own size) before the first
  // is computed; they may take at most half the memory.
  const double per_batch = 12.0 * tokens + 128.0;
  const double gathered = static_cast<double>(o.update_freq) * per_batch;
  if (gathered > mem / 2) {
    const auto most = static_cast<int64_t>(mem / 2 / per_batch);
    throw OptionError("{update_freq} " + std::to_string(o.update_freq) +
                      ": an update gathers its batches (of up to " +
                      std::to_string(o.batch_tokens) + " tokens) before computing them, " +
                      gigabytes(gathered) + ", more than half this machine's " + gigabytes(mem) +
                      "; expected at most " + std::to_string(most));
  }
}

}  // namespace nmt
