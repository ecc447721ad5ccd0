#include "train/options.h"

#include <filesystem>
#include <vector>

#include "core/error.h"
#include "io/output_file.h"
#include "model/config.h"
#include "ops/ops.h"

namespace nmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

void apply_training_json(const json& j, TrainOptions& o, const std::string& source, bool cli) {
  validate_training_json(j, source, cli);
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    auto i64 = [&] { return v.get<int64_t>(); };
    if (k == "batch_tokens")
      o.batch_tokens = i64();
    else if (k == "update_freq")
      o.update_freq = i64();
    else if (k == "max_steps")
      o.max_steps = i64();
    else if (k == "max_epochs")
      o.max_epochs = i64();
    else if (k == "max_minutes")
      o.max_minutes = v.get<double>();
    else if (k == "seed")
      o.seed = v.get<uint64_t>();
    else if (k == "warmup_steps")
      o.warmup_steps = i64();
    else if (k == "lr_scale")
      o.lr_scale = v.get<double>();
    else if (k == "clip_norm")
      o.clip_norm = v.get<double>();
    else if (k == "valid_every")
      o.valid_every = i64();
    else if (k == "valid_sentences")
      o.valid_sentences = i64();
    else if (k == "checkpoint_every")
      o.checkpoint_every = i64();
    else if (k == "checkpoint_minutes")
      o.checkpoint_minutes = v.get<double>();
    else if (k == "keep_checkpoints")
      o.keep_checkpoints = i64();
    else if (k == "average_last")
      o.average_last = i64();
    else if (k == "early_stop")
      o.early_stop = i64();
    else if (k == "log_every")
      o.log_every = i64();
    else if (k == "best_metric")
      o.best_metric = v.get<std::string>();
    else if (k == "compute_type")
      o.compute_type = v.get<std::string>();
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

}  // namespace

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
              {"log_every", o.log_every},
              {"compute_type", o.compute_type},
              {"threads", ops::num_threads()}};
}

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
  // Nothing that training writes may be one of its inputs.
  const std::vector<std::pair<std::string, const char*>> inputs = {{o.train_src, "--train-src"},
                                                                   {o.train_tgt, "--train-tgt"},
                                                                   {o.valid_src, "--valid-src"},
                                                                   {o.valid_tgt, "--valid-tgt"},
                                                                   {o.spm, "--spm"}};
  for (const std::string& out :
       {o.out, o.out + ".best", o.out + ".log.jsonl", o.out + ".curve.svg"})
    for (const auto& [in, name] : inputs)
      if (!in.empty() && io::file_id(out) == io::file_id(in))
        throw InputError("--out: " + out + " would overwrite the " + name + " file " + in);
}

}  // namespace nmt
