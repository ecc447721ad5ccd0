// The training options, declared once: each key's type, range or choices,
// whether the recipe chooses it, whether it belongs to one invocation, its
// help, and where it lives in TrainOptions. The config's "training" object
// is read, checked and written through this table, and `nmt train`
// registers its command-line options from it (app/cmd_train.cpp).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/format.h"
#include "core/suggest.h"
#include "metrics/tokenizers.h"
#include "train/options.h"

namespace nmt {

using json = nlohmann::json;

namespace {

// get and set of one TrainOptions member, by its type.
template <class T>
TrainingOption option(const char* key, OptionInfo::Type type, T TrainOptions::*member,
                      const char* help) {
  TrainingOption o;
  o.key = key;
  o.type = type;
  o.help = help;
  o.get = [member](const TrainOptions& t) { return json(t.*member); };
  o.set = [member](TrainOptions& t, const json& v) { t.*member = v.get<T>(); };
  return o;
}

// A mode: one of `values`, by name in JSON and on the command line.
template <class E>
TrainingOption choice(const char* key, E TrainOptions::*member, std::vector<E> values,
                      const char* (*name)(E), const char* help) {
  TrainingOption o;
  o.key = key;
  o.type = OptionInfo::kChoice;
  o.help = help;
  for (E v : values) o.choices.push_back(name(v));
  o.get = [member, name](const TrainOptions& t) { return json(name(t.*member)); };
  o.set = [member, values, name](TrainOptions& t, const json& v) {
    for (E e : values)
      if (v == name(e)) t.*member = e;
  };
  return o;
}

TrainingOption at_least(TrainingOption o, double min, bool strict = false) {
  o.min = min;
  o.strict_min = strict;
  return o;
}

TrainingOption recipe(TrainingOption o) {
  o.recipe = true;
  return o;
}

TrainingOption per_run(TrainingOption o) {
  o.per_run = true;
  return o;
}

std::vector<metrics::TokenizerKind> validation_tokenizers() {
  std::vector<metrics::TokenizerKind> kinds;
  for (const char* name : metrics::kValidationTokenizerNames)
    kinds.push_back(metrics::parse_tokenizer(name));
  return kinds;
}

std::vector<TrainingOption> make_table() {
  using O = TrainOptions;
  constexpr auto kInt = OptionInfo::kInt, kNumber = OptionInfo::kNumber;
  return {
      recipe(at_least(option("batch_tokens", kInt, &O::batch_tokens,
                             "Padded tokens per batch, max of source and target"),
                      2)),
      at_least(option("update_freq", kInt, &O::update_freq, "Batches per update, gradients summed"),
               1),
      per_run(at_least(
          option("max_steps", kInt, &O::max_steps, "Stop after this many updates (0: no limit)"),
          0)),
      per_run(at_least(
          option("max_epochs", kInt, &O::max_epochs, "Stop after this many epochs (0: no limit)"),
          0)),
      per_run(at_least(option("max_minutes", kNumber, &O::max_minutes,
                              "Stop after this many minutes of this run (0: no limit)"),
                       0)),
      per_run(at_least(
          option("seed", kInt, &O::seed, "Random seed: initialisation, batch order, dropout"), 0)),
      recipe(at_least(option("warmup_steps", kInt, &O::warmup_steps,
                             "Warmup steps of the learning-rate schedule"),
                      1)),
      recipe(at_least(option("lr_scale", kNumber, &O::lr_scale,
                             "Multiplies the paper's learning rate (its value at the end of "
                             "warmup is the peak)"),
                      0, /*strict=*/true)),
      recipe(choice("lr_schedule", &O::lr_schedule,
                    {LrShape::InverseSqrt, LrShape::Linear, LrShape::Cosine}, lr_shape_name,
                    "After warmup: inverse-sqrt (the paper's), or linear or cosine decay to 0 at "
                    "the end of the budget ({max_steps}, {max_epochs} or {max_minutes})")),
      at_least(
          option("clip_norm", kNumber, &O::clip_norm, "Clip the gradient norm to this (0: off)"),
          0),
      recipe(at_least(option("valid_every", kInt, &O::valid_every, "Validate every N updates"), 0)),
      recipe(at_least(option("valid_sentences", kInt, &O::valid_sentences,
                             "Validation sentences decoded for BLEU (0: all)"),
                      0)),
      recipe(at_least(
          option("checkpoint_every", kInt, &O::checkpoint_every, "Checkpoint every N updates"), 0)),
      at_least(option("checkpoint_minutes", kNumber, &O::checkpoint_minutes,
                      "Also checkpoint every M minutes (0: off)"),
               0),
      at_least(option("keep_checkpoints", kInt, &O::keep_checkpoints,
                      "Keep the last K checkpoints (0: all)"),
               0),
      recipe(at_least(option("average_last", kInt, &O::average_last,
                             "Final model: the average of the last K checkpoints, if it validates "
                             "better than the last weights"),
                      0)),
      recipe(at_least(option("early_stop", kInt, &O::early_stop,
                             "Stop after N validations without improvement (0: never)"),
                      0)),
      choice("best_metric", &O::best_metric, {BestMetric::Bleu, BestMetric::Loss}, best_metric_name,
             "Metric that picks OUT.best: bleu or loss"),
      recipe(choice("valid_tokenize", &O::valid_tokenize, validation_tokenizers(),
                    metrics::tokenizer_name,
                    "sacreBLEU's tokeniser for the validation BLEU: 13a, intl, char, zh, "
                    "ja-mecab, none")),
      per_run(at_least(option("log_every", kInt, &O::log_every,
                              "Steps between progress lines when stderr is not a terminal"),
                       1)),
      recipe(choice("compute_type", &O::compute_type, {ComputeType::F32, ComputeType::BF16},
                    compute_type_name,
                    "f32, or bf16: mixed precision, the products in bf16 with f32 accumulation "
                    "(weights, gradients, Adam and the loss stay f32); needs AVX512-BF16 or "
                    "AMX")),
      choice("optimize", &O::optimize, {Optimize::Quality, Optimize::Speed, Optimize::Student},
             optimize_name,
             "What the recipe's model shape is for: quality (the best BLEU for the budget), "
             "speed (a two-layer decoder, and int8 weights where they validate as well: "
             "translates over twice as fast), or student (a one-layer decoder, for a teacher's "
             "translations: nmt distill's); a given {config} keeps its layers"),
  };
}

}  // namespace

const char* best_metric_name(BestMetric m) { return m == BestMetric::Loss ? "loss" : "bleu"; }
const char* optimize_name(Optimize o) {
  return o == Optimize::Speed ? "speed" : o == Optimize::Student ? "student" : "quality";
}

const std::vector<TrainingOption>& training_options() {
  static const std::vector<TrainingOption> table = make_table();
  return table;
}

const TrainingOption* find_training_option(const std::string& key) {
  for (const TrainingOption& o : training_options())
    if (key == o.key) return &o;
  return nullptr;
}

void validate_training_json(const json& j, const std::string& source, bool cli) {
  if (!j.is_object())
    throw InputError(source + ": key \"training\": expected an object, got " +
                     std::string(j.type_name()));
  std::vector<std::string> names;
  for (const TrainingOption& o : training_options()) names.push_back(o.key);
  for (auto it = j.begin(); it != j.end(); ++it) {
    // The option as the caller names it ({batch_tokens}), or the key.
    const std::string name = cli ? "{" + it.key() + "}" : source + ": training." + it.key();
    const TrainingOption* o = find_training_option(it.key());
    if (!o) {
      if (cli) throw InputError("unknown training option " + name);
      throw InputError(source + ": unknown key \"training." + it.key() + "\"" +
                       did_you_mean(it.key(), names));
    }
    if (const std::string why = o->problem(it.value()); !why.empty())
      throw InputError(name + ": " + why);
  }
}

}  // namespace nmt
