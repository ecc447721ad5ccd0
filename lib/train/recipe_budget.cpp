// The recipe's second stage, from the budget and the measured speed: see
// recipe.h.
#include <algorithm>
#include <cmath>

#include "core/format.h"
#include "train/recipe.h"

namespace nmt {

using json = nlohmann::json;

namespace {

// A round number near x (two significant digits), at least 1.
int64_t round_nicely(double x) {
  if (x < 100) return std::max<int64_t>(1, std::llround(x));
  const double p = std::pow(10.0, std::floor(std::log10(x)) - 1);
  return static_cast<int64_t>(std::llround(x / p) * p);
}

// The largest batch a corpus of this many pairs takes.
int64_t batch_cap(int64_t pairs) { return pairs < 100000 ? 4096 : pairs < 1000000 ? 8192 : 16384; }

}  // namespace

int64_t updates_in_time(double seconds_left, double seconds_per_update, double reserve_seconds) {
  if (seconds_per_update <= 0) return 0;
  const double left = std::max(0.0, seconds_left - reserve_seconds);
  return std::max<int64_t>(1, static_cast<int64_t>(left / seconds_per_update));
}

namespace {

// What the budget stage plans with.
struct Budget {
  bool timed, known;  // a measured budget of time; any budget at all
  double fill;        // target tokens per batch token
  double tokens;      // target tokens of the corpus
  double budget_s, reserve_s, s_per_token;

  Budget(const BudgetFacts& f, const TrainOptions& o) {
    timed = o.max_minutes > 0 && f.probe_seconds > 0;
    known = o.max_steps > 0 || o.max_epochs > 0 || timed;
    fill = std::clamp(f.fill, 0.05, 1.0);
    tokens = double(std::max<int64_t>(f.target_tokens, 1));
    budget_s = o.max_minutes * 60;
    // The last validation, the averaged model's and the final save.
    reserve_s = std::min(0.05 * budget_s, 60.0);
    s_per_token = f.probe_batch_tokens > 0 ? f.probe_seconds / double(f.probe_batch_tokens) : 0;
  }

  // The updates the budget allows at batches of `batch` tokens: the
  // smallest of steps, epochs and time, whichever are given.
  int64_t updates_for(const TrainOptions& o, int64_t batch) const {
    int64_t u = 0;
    auto take = [&](int64_t x) { u = u == 0 ? x : std::min(u, x); };
    if (o.max_steps > 0) take(o.max_steps);
    if (o.max_epochs > 0)
      take(std::max<int64_t>(
          1, static_cast<int64_t>(std::ceil(double(o.max_epochs) * tokens / (fill * double(batch)) /
                                            double(o.update_freq)))));
    if (timed)
      take(updates_in_time(budget_s, s_per_token * double(batch) * double(o.update_freq),
                           reserve_s));
    return u;
  }
};

// Batch size. Larger corpora take larger batches; a corpus is cut into at
// least 20 batches an epoch; a budget of time takes the batch that gives
// about 2000 updates, since a short run gains more from more updates than
// from less noisy ones.
void choose_batch(const BudgetFacts& f, const Budget& p, TrainOptions& o, Recipe& r) {
  if (o.was_given("batch_tokens")) return r.given("batch_tokens", o.batch_tokens);
  const int64_t cap = batch_cap(f.pairs);
  const int64_t smallest = std::max<int64_t>(f.widest_pair, 256);
  int64_t b = cap;
  std::string why = short_count(f.pairs) + " pairs take batches of up to " + std::to_string(cap) +
                    " tokens (4096 below 100k pairs, 8192 below 1M, 16384 above)";
  const int64_t per_epoch = static_cast<int64_t>(p.tokens / p.fill / 20);
  if (per_epoch < b) {
    b = per_epoch;
    why = "an epoch of " + short_count(f.target_tokens) + " target tokens cut into 20 batches";
  }
  if (p.timed && o.max_steps == 0 && o.max_epochs == 0) {
    const double padded = std::max(0.0, p.budget_s - p.reserve_s) / std::max(p.s_per_token, 1e-12) /
                          double(o.update_freq);
    const int64_t t = std::clamp<int64_t>(static_cast<int64_t>(padded / 2000), 2048, cap);
    if (t < b) {
      b = t;
      why = format_number("%g", o.max_minutes) + " minutes at the measured " +
            format_number("%.0f", 1.0 / p.s_per_token) + " padded tokens/s allow about " +
            short_count(static_cast<int64_t>(padded)) +
            " tokens: batches that give ~2000 updates (at least 2048 tokens)";
    }
  }
  b = std::max(smallest, b / 256 * 256);
  if (b == smallest && smallest > 256)
    why += "; at least the widest pair (" + std::to_string(f.widest_pair) + ")";
  o.batch_tokens = b;
  r.choose("batch_tokens", b, why);
}

// The updates the budget allows, recorded with the budget in words.
int64_t choose_updates(const Budget& p, const TrainOptions& o, Recipe& r) {
  const int64_t updates = p.known ? p.updates_for(o, o.batch_tokens) : 0;
  std::string budget_text;
  if (o.max_steps > 0) budget_text = "{max_steps} " + std::to_string(o.max_steps);
  if (o.max_epochs > 0)
    budget_text += std::string(budget_text.empty() ? "" : ", ") + "{max_epochs} " +
                   std::to_string(o.max_epochs);
  if (o.max_minutes > 0)
    budget_text +=
        std::string(budget_text.empty() ? "" : ", ") + "{max_minutes} " +
        format_number("%g", o.max_minutes) +
        (p.timed ? " at " + format_number("%.2f", p.s_per_token * double(o.batch_tokens)) +
                       " s per update measured on this machine"
                 : std::string());
  if (p.known)
    r.choose("updates", updates,
             "the budget (" + budget_text + ") allows about " + std::to_string(updates) +
                 " updates" +
                 (p.timed ? "; revised as training goes, from the measured speed" : ""));
  else
    r.choose("updates", 0, "no budget ({max_minutes}, {max_steps} or {max_epochs}): no end");
  return updates;
}

// Schedule: linear warmup over a tenth of the run (200 to 4000 updates),
// then linear decay to 0 at the end of the budget; without a budget, the
// paper's inverse square root after 4000.
void choose_schedule(bool known, int64_t updates, const ModelConfig& cfg, TrainOptions& o,
                     Recipe& r) {
  if (o.was_given("lr_schedule")) {
    r.given("lr_schedule", lr_shape_name(o.lr_schedule));
  } else {
    o.lr_schedule = known ? LrShape::Linear : LrShape::InverseSqrt;
    r.choose("lr_schedule", lr_shape_name(o.lr_schedule),
             known ? "decays linearly to 0 at the end of the budget: ends the run at its best "
                     "weights, where an inverse square root would still be far from its end "
                     "(bench/recipe.sh compares the shapes)"
                   : "the paper's inverse square root, which needs no end");
  }
  if (o.was_given("warmup_steps")) {
    r.given("warmup_steps", o.warmup_steps);
  } else {
    int64_t w = 4000;
    if (known)
      w = std::clamp<int64_t>(updates / 10,
                              std::min<int64_t>(200, std::max<int64_t>(updates / 4, 1)), 4000);
    o.warmup_steps = w;
    r.choose("warmup_steps", w,
             known ? "a tenth of the " + std::to_string(updates) +
                         " updates, at least 200 (or a quarter of a shorter run), at most 4000"
                   : "the paper's 4000");
  }
  if (o.was_given("lr_scale")) return r.given("lr_scale", o.lr_scale);
  // Peak 1.5e-3 for width 256, falling as 1/sqrt(width) (the paper's base,
  // 512, peaks at 7e-4 with its 25k-token batches) and as sqrt(batch) below
  // 4096 tokens.
  const double d = double(cfg.d_model);
  const double peak = known ? 1.5e-3 * std::sqrt(256.0 / d) *
                                  std::min(1.0, std::sqrt(double(o.batch_tokens) / 4096.0))
                            : std::pow(d, -0.5) * std::pow(double(o.warmup_steps), -0.5);
  // Four decimals, as printed and recorded.
  o.lr_scale = std::round(peak * std::sqrt(d) * std::sqrt(double(o.warmup_steps)) * 1e4) / 1e4;
  r.choose("lr_scale", o.lr_scale,
           "peak learning rate " + format_number("%.2e", peak) +
               (known ? " (1.5e-3 at width 256, times sqrt(256/d_model) = " +
                            format_number("%.2f", std::sqrt(256.0 / d)) +
                            " and sqrt(batch/4096) below 4096 tokens)"
                      : " (the paper's)"));
}

// Regularisation: dropout by corpus size, less when the budget allows few
// epochs (a model that sees each pair a few times cannot overfit it, and
// dropout slows its learning).
void choose_regularisation(const BudgetFacts& f, const Budget& p, int64_t updates, ModelConfig& cfg,
                           const TrainOptions& o, Recipe& r) {
  const double epochs = updates > 0 ? double(updates) * double(o.update_freq) *
                                          double(o.batch_tokens) * p.fill / p.tokens
                                    : 0;
  if (o.was_given("dropout")) {
    r.given("dropout", o.dropout, "given ({dropout})");
  } else if (o.was_given("config")) {
    r.given("dropout", std::round(double(cfg.dropout) * 1e4) / 1e4, "from the config " + cfg.name);
  } else {
    const double d0 = f.pairs < 100000 ? 0.3 : f.pairs < 1000000 ? 0.2 : 0.1;
    double d = d0;
    std::string why =
        short_count(f.pairs) + " pairs: 0.3 below 100k pairs, 0.2 below 1M, 0.1 above";
    if (updates > 0 && epochs < 3) {
      d = 0.1;
      why += "; the budget allows only " + format_number("%.1f", epochs) + " epochs: 0.1";
    } else if (updates > 0 && epochs < 10 && d0 > 0.1) {
      d = d0 - 0.1;
      why +=
          "; the budget allows " + format_number("%.1f", epochs) + " epochs (under 10): 0.1 less";
    }
    d = std::round(d * 100) / 100;
    cfg.dropout = static_cast<float>(d);
    r.choose("dropout", d, why);
  }
  if (o.was_given("label_smoothing")) {
    r.given("label_smoothing", o.label_smoothing, "given ({label_smoothing})");
  } else if (o.was_given("config")) {
    r.given("label_smoothing", std::round(double(cfg.label_smoothing) * 1e4) / 1e4,
            "from the config " + cfg.name);
  } else {
    cfg.label_smoothing = 0.1f;
    r.choose("label_smoothing", 0.1,
             "the paper's 0.1 at every corpus size (it regularises the output distribution, "
             "which dropout does not)");
  }
}

// Cadence: 8 validations and 20 checkpoints over a known budget; the final
// model is the average of the last 4 checkpoints (the last fifth of the
// run) if that validates better than the last weights.
void choose_cadence(const BudgetFacts& f, const Budget& p, int64_t updates, TrainOptions& o,
                    Recipe& r) {
  auto set = [&](const char* key, int64_t& field, int64_t value, const std::string& why) {
    if (o.was_given(key)) {
      r.given(key, field);
      return;
    }
    field = value;
    r.choose(key, value, why);
  };
  const bool known = p.known, short_run = p.timed && o.max_minutes <= 20;
  if (f.has_valid) {
    set("valid_every", o.valid_every, known ? round_nicely(double(updates) / 8) : 1000,
        known ? "8 validations over the run" : "every 1000 updates (no budget)");
    set("valid_sentences", o.valid_sentences, short_run ? 200 : 500,
        short_run ? "a short budget: 200 sentences decoded per validation"
                  : "500 sentences decoded per validation");
    if (o.valid_every > 0)
      set("early_stop", o.early_stop, 5, "stop after 5 validations without a better one");
  }
  set("checkpoint_every", o.checkpoint_every, known ? round_nicely(double(updates) / 20) : 1000,
      known ? "20 checkpoints over the run" : "every 1000 updates (no budget)");
  set("average_last", o.average_last, 4,
      "the final model averages the last 4 checkpoints when that validates better than the "
      "last weights");
}

}  // namespace

int64_t recipe_for_budget(const BudgetFacts& f, ModelConfig& cfg, TrainOptions& o, Recipe& r) {
  const Budget p(f, o);
  choose_batch(f, p, o, r);
  const int64_t updates = choose_updates(p, o, r);
  choose_schedule(p.known, updates, cfg, o, r);
  choose_regularisation(f, p, updates, cfg, o, r);
  choose_cadence(f, p, updates, o, r);
  return updates;
}

BudgetPlan plan_budget(BudgetFacts f, ModelConfig& cfg, TrainOptions& o, Recipe& r,
                       const UpdateProbe& probe) {
  BudgetPlan plan;
  const bool timed = o.max_minutes > 0;
  auto measure = [&](int64_t batch, ComputeType type) {
    f.probe_batch_tokens = std::max(batch, f.widest_pair);
    const ProbeTiming t = probe(f.probe_batch_tokens, type);
    f.probe_seconds = t.seconds;
    f.fill = t.fill;
  };
  // The batch the plan starts from: the corpus's cap, at most 8192 for a
  // first measurement.
  const int64_t first_batch =
      o.was_given("batch_tokens") ? o.batch_tokens : std::min<int64_t>(batch_cap(f.pairs), 8192);
  if (timed && !o.was_given("compute_type") && o.compute_type == ComputeType::BF16) {
    measure(first_batch, ComputeType::BF16);
    const double bf16_s = f.probe_seconds, bf16_fill = f.fill;
    measure(first_batch, ComputeType::F32);
    if (!recipe_compute_by_speed(bf16_s, f.probe_seconds, f.probe_batch_tokens, o, r))
      f.probe_seconds = bf16_s, f.fill = bf16_fill;
    plan.compute_revised = true;
  }
  if (timed) {
    const ComputeType type = o.compute_type;
    if (f.probe_batch_tokens == 0) measure(first_batch, type);
    if (!o.was_given("batch_tokens")) {
      TrainOptions scratch_opts = o;
      ModelConfig scratch_cfg = cfg;
      Recipe scratch;
      recipe_for_budget(f, scratch_cfg, scratch_opts, scratch);
      if (scratch_opts.batch_tokens != f.probe_batch_tokens)
        measure(scratch_opts.batch_tokens, type);
    }
  }
  plan.updates = recipe_for_budget(f, cfg, o, r);
  if (f.probe_batch_tokens > 0)
    plan.seconds_per_update =
        f.probe_seconds * double(o.batch_tokens) / double(f.probe_batch_tokens);
  return plan;
}

}  // namespace nmt
