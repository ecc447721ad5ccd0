// The public train() over the library's training run, its options gathered
// as `nmt train` gathers them: the config's "training" object, then the
// caller's keys, each marked as the user's so that the recipe leaves it.
#include "nmt/train.h"

#include <nlohmann/json.hpp>

#include "api/guard.h"
#include "core/device.h"
#include "model/config.h"
#include "train/train_run.h"

namespace nmt::api {

TrainResult train(const TrainSpec& spec, const std::function<void(const std::string&)>& log,
                  const std::function<void(const TrainProgress&)>& progress,
                  const std::atomic<int>* stop) {
  return guarded([&] {
    TrainOptions o;
    o.train_src = spec.train_src, o.train_tgt = spec.train_tgt;
    o.valid_src = spec.valid_src, o.valid_tgt = spec.valid_tgt;
    o.out = spec.out, o.spm = spec.spm;
    o.vocab_size = spec.vocab_size;
    o.dropout = spec.dropout, o.label_smoothing = spec.label_smoothing;
    o.resume = spec.resume;
    o.recipe = spec.recipe, o.filter = spec.filter, o.shortlist = spec.shortlist;
    o.device = open_device(spec.device);
    if (spec.vocab_size > 0 || !spec.spm.empty()) o.given.insert("vocab_size");
    if (spec.dropout >= 0) o.given.insert("dropout");
    if (spec.label_smoothing >= 0) o.given.insert("label_smoothing");

    ModelConfig cfg = read_training_config(spec.config.empty() ? kDefaultConfig : spec.config,
                                           !spec.config.empty(), "config", o);
    nlohmann::json given;
    try {
      given = nlohmann::json::parse(spec.training_json);
    } catch (const nlohmann::json::exception& e) {
      throw about_option<UsageError>("training_json", std::string(": not JSON: ") + e.what());
    }
    if (!given.is_object())
      throw about_option<UsageError>("training_json", ": expected a JSON object");
    apply_given_training(given, o, "training_json");

    TrainCallbacks cb;
    if (log)
      cb.log = [&log](const std::string& line) {
        log(name_options(line, [](const std::string& key) { return key; }));
      };
    if (progress)
      cb.progress = [&progress](const nmt::TrainProgress& p) {
        progress({p.stats.step, p.stats.loss, p.tokens_per_second, p.eta_seconds});
      };
    cb.stop = stop;
    const nmt::TrainResult r = nmt::train(cfg, o, cb);
    return TrainResult{r.steps, r.interrupted, r.stop_reason, r.model_path, r.best_path};
  });
}

}  // namespace nmt::api
