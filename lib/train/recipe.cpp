#include "train/recipe.h"

#include <unicode/uchar.h>
#include <unicode/uscript.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace nmt {

using json = nlohmann::json;

namespace {

std::string num(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string count(int64_t n) {
  if (n >= 1000000) return num("%.1fM", double(n) / 1e6);
  if (n >= 10000) return num("%.0fk", double(n) / 1e3);
  return std::to_string(n);
}

bool given(const TrainOptions& o, const char* key) { return o.given.count(key) > 0; }

// A round number near x (two significant digits), at least 1.
int64_t round_nicely(double x) {
  if (x < 100) return std::max<int64_t>(1, std::llround(x));
  const double p = std::pow(10.0, std::floor(std::log10(x)) - 1);
  return static_cast<int64_t>(std::llround(x / p) * p);
}

}  // namespace

void Recipe::choose(const std::string& key, json value, std::string reason) {
  choices_.push_back({key, std::move(value), std::move(reason), false});
}

void Recipe::given(const std::string& key, json value, std::string where) {
  choices_.push_back({key, std::move(value), std::move(where), true});
}

void Recipe::revise(const std::string& key, json value, std::string reason) {
  choices_.erase(std::remove_if(choices_.begin(), choices_.end(),
                                [&](const RecipeChoice& c) { return c.key == key; }),
                 choices_.end());
  choose(key, std::move(value), std::move(reason));
}

const RecipeChoice* Recipe::find(const std::string& key) const {
  for (const auto& c : choices_)
    if (c.key == key) return &c;
  return nullptr;
}

std::vector<std::string> Recipe::lines() const {
  std::vector<std::string> out;
  for (const auto& c : choices_)
    out.push_back(c.key + " " + (c.value.is_string() ? c.value.get<std::string>() : c.value.dump()) +
                  ": " + c.reason);
  return out;
}

json Recipe::to_json() const {
  json a = json::array();
  for (const auto& c : choices_)
    a.push_back({{"key", c.key}, {"value", c.value}, {"reason", c.reason}, {"given", c.given}});
  return a;
}

Recipe Recipe::from_json(const json& j) {
  Recipe r;
  if (!j.is_array()) return r;
  for (const auto& c : j)
    if (c.is_object() && c.contains("key") && c["key"].is_string() && c.contains("value"))
      r.choices_.push_back({c["key"].get<std::string>(), c["value"],
                            c.value("reason", std::string()), c.value("given", false)});
  return r;
}

CorpusFacts corpus_facts(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                         size_t sample) {
  CorpusFacts f;
  f.pairs = static_cast<int64_t>(std::min(src.size(), tgt.size()));
  auto cjk_share = [&](const std::vector<std::string>& side, double* kana_share = nullptr) {
    int64_t cjk = 0, all = 0, kana = 0;
    const size_t n = side.size(), step = std::max<size_t>(1, n / std::max<size_t>(sample, 1));
    for (size_t i = 0; i < n; i += step) {
      const auto* p = reinterpret_cast<const uint8_t*>(side[i].data());
      const int32_t len = static_cast<int32_t>(std::min<size_t>(side[i].size(), INT32_MAX));
      for (int32_t k = 0; k < len;) {
        if (p[k] < 0x80) {  // ASCII letters and digits count, spaces and punctuation do not
          all += std::isalnum(p[k]) != 0;
          ++k;
          continue;
        }
        UChar32 c;
        U8_NEXT(p, k, len, c);
        if (c < 0 || u_isUWhiteSpace(c) || u_ispunct(c)) continue;
        ++all;
        UErrorCode err = U_ZERO_ERROR;
        const UScriptCode s = uscript_getScript(c, &err);
        if (U_SUCCESS(err) && (s == USCRIPT_HAN || s == USCRIPT_HIRAGANA ||
                               s == USCRIPT_KATAKANA || s == USCRIPT_HANGUL))
          ++cjk;
        if (U_SUCCESS(err) && (s == USCRIPT_HIRAGANA || s == USCRIPT_KATAKANA)) ++kana;
      }
    }
    if (kana_share) *kana_share = all ? double(kana) / double(all) : 0.0;
    return all ? double(cjk) / double(all) : 0.0;
  };
  f.src_cjk = cjk_share(src);
  f.tgt_cjk = cjk_share(tgt, &f.tgt_kana);
  return f;
}

std::string recipe_config_name(int64_t pairs, std::string* reason) {
  // transformer-small (3+3 layers of 256) is what a corpus of up to a few
  // hundred thousand pairs can fit without overfitting it and what 2 CPU
  // cores train to good BLEU in an hour; more data pays for the paper's base.
  const bool base = pairs >= 300000;
  if (reason)
    *reason = count(pairs) + " pairs: " +
              (base ? std::string("300k pairs or more take the paper's base model")
                    : std::string("under 300k pairs, a 3+3-layer model of width 256 learns as "
                                  "much as a larger one and trains several times faster"));
  return base ? "transformer-base" : "transformer-small";
}

namespace {

// bf16 where the machine trains in it (revised by a measured update with a
// budget of time: recipe_compute_by_speed), else f32.
void choose_compute_type(TrainOptions& o, const std::string& bf16_why_not, Recipe& r) {
  if (given(o, "compute_type")) {
    r.given("compute_type", o.compute_type);
  } else if (bf16_why_not.empty()) {
    o.compute_type = "bf16";
    r.choose("compute_type", "bf16",
             "this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX)" +
                 std::string(o.max_minutes > 0
                                 ? ": bf16 if an update times faster in it than in f32 on the "
                                   "built model (revised below)"
                                 : ": the products in bf16 with f32 accumulation, weights, Adam "
                                   "and loss in f32 (with a budget of time, the faster of bf16 "
                                   "and f32 as measured)"));
  } else {
    o.compute_type = "f32";
    r.choose("compute_type", "f32", "no bf16 training on this machine (" + bf16_why_not + ")");
  }
}

}  // namespace

DataRecipe recipe_for_data(const CorpusFacts& f, const ModelConfig& cfg, TrainOptions& o,
                           const std::string& bf16_why_not, Recipe& r,
                           const std::string& mecab_why_not) {
  DataRecipe d;
  const std::string from_config = "from the config " + cfg.name;
  if (given(o, "config")) {
    r.given("config", cfg.name, "given (-c)");
  } else {
    std::string why;
    recipe_config_name(f.pairs, &why);
    r.choose("config", cfg.name, why);
  }

  if (given(o, "vocab_size")) {
    d.vocab_size = o.vocab_size > 0 ? o.vocab_size : cfg.vocab_size;
    r.given("vocab_size", d.vocab_size, o.vocab_size > 0 ? "given (--vocab-size)" : "given (--spm)");
  } else if (given(o, "config")) {
    d.vocab_size = cfg.vocab_size;
    r.given("vocab_size", d.vocab_size, from_config);
  } else {
    // A joint vocabulary grows with the data: each piece needs enough
    // occurrences to learn an embedding (Sennrich & Zhang 2019 find small
    // vocabularies best for small corpora).
    const int64_t p = f.pairs;
    d.vocab_size = p < 2000 ? 1000 : p < 10000 ? 4000 : p < 100000 ? 8000 : p < 500000 ? 16000
                                                                                      : 32000;
    r.choose("vocab_size", d.vocab_size,
             count(p) + " pairs: joint vocabularies of 1k (<2k pairs), 4k (<10k), 8k (<100k), "
                        "16k (<500k), 32k pieces above");
    o.vocab_size = d.vocab_size;
  }

  const double cjk = std::max(f.src_cjk, f.tgt_cjk);
  if (!o.spm.empty()) {
    r.given("character_coverage", "the --spm model's", "given (--spm)");
  } else if (cjk >= 0.3) {
    d.character_coverage = 0.9995;
    r.choose("character_coverage", d.character_coverage,
             num("%.0f", 100 * cjk) + "% of a side's characters are Han, kana or Hangul: "
             "SentencePiece's recommendation for such large character sets; the rarest "
             "0.05% are spelled in UTF-8 byte pieces (byte fallback), never <unk>");
  } else {
    r.choose("character_coverage", 1.0,
             "an alphabetic script (" + num("%.1f", 100 * cjk) +
                 "% Han, kana or Hangul): every character gets a piece");
  }

  // Validation BLEU as it is reported for the target language: 13a's
  // spaces would make a Chinese or Japanese sentence one word, and every
  // validation score 0, which picks the best model and stops early.
  if (given(o, "valid_tokenize")) {
    r.given("valid_tokenize", o.valid_tokenize);
  } else if (f.tgt_cjk >= 0.3 && f.tgt_kana >= 0.05) {
    o.valid_tokenize = mecab_why_not.empty() ? "ja-mecab" : "char";
    r.choose("valid_tokenize", o.valid_tokenize,
             "Japanese target text (" + num("%.0f", 100 * f.tgt_kana) + "% kana): " +
                 (mecab_why_not.empty() ? "MeCab's words, as sacreBLEU's -tok ja-mecab"
                                        : "characters (ja-mecab cannot run: " + mecab_why_not + ")"));
  } else if (f.tgt_cjk >= 0.3) {
    o.valid_tokenize = "zh";
    r.choose("valid_tokenize", "zh",
             "Chinese target text (" + num("%.0f", 100 * f.tgt_cjk) +
                 "% Han): each character a word, as sacreBLEU's -tok zh");
  } else {
    o.valid_tokenize = "13a";
    r.choose("valid_tokenize", "13a", "space-separated target text: sacreBLEU's default");
  }

  choose_compute_type(o, bf16_why_not, r);
  return d;
}

bool recipe_compute_by_speed(double bf16_s, double f32_s, int64_t batch, TrainOptions& o,
                             Recipe& r) {
  if (given(o, "compute_type") || o.compute_type != "bf16" || bf16_s <= 0 || f32_s <= 0)
    return false;
  const bool keep = bf16_s * 1.05 <= f32_s;
  o.compute_type = keep ? "bf16" : "f32";
  const std::string timing = "measured on this model: an update of " + std::to_string(batch) +
                             " tokens takes " + num("%.3f", bf16_s) + " s in bf16, " +
                             num("%.3f", f32_s) + " s in f32";
  r.revise("compute_type", o.compute_type,
           keep ? "this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX) and " + timing +
                      ": the products in bf16 with f32 accumulation, weights, Adam and loss in "
                      "f32 (bench/recipe.sh's recipe-f32 variant compares their BLEU)"
                : "this CPU has bf16 instructions, but " + timing +
                      ": bf16 is not at least 5% faster here, so f32");
  return !keep;
}

int64_t updates_in_time(double seconds_left, double seconds_per_update, double reserve_seconds) {
  if (seconds_per_update <= 0) return 0;
  const double left = std::max(0.0, seconds_left - reserve_seconds);
  return std::max<int64_t>(1, static_cast<int64_t>(left / seconds_per_update));
}

namespace {

// What the budget stage plans with.
struct BudgetPlan {
  bool timed, known;  // a measured budget of time; any budget at all
  double fill;        // target tokens per batch token
  double tokens;      // target tokens of the corpus
  double budget_s, reserve_s, s_per_token;

  BudgetPlan(const BudgetFacts& f, const TrainOptions& o) {
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
      take(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(
                                    double(o.max_epochs) * tokens / (fill * double(batch)) /
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
void choose_batch(const BudgetFacts& f, const BudgetPlan& p, TrainOptions& o, Recipe& r) {
  if (given(o, "batch_tokens")) return r.given("batch_tokens", o.batch_tokens);
  const int64_t cap = f.pairs < 100000 ? 4096 : f.pairs < 1000000 ? 8192 : 16384;
  const int64_t smallest = std::max<int64_t>(f.widest_pair, 256);
  int64_t b = cap;
  std::string why = count(f.pairs) + " pairs take batches of up to " + std::to_string(cap) +
                    " tokens (4096 below 100k pairs, 8192 below 1M, 16384 above)";
  const int64_t per_epoch = static_cast<int64_t>(p.tokens / p.fill / 20);
  if (per_epoch < b) {
    b = per_epoch;
    why = "an epoch of " + count(f.target_tokens) + " target tokens cut into 20 batches";
  }
  if (p.timed && o.max_steps == 0 && o.max_epochs == 0) {
    const double padded = std::max(0.0, p.budget_s - p.reserve_s) /
                          std::max(p.s_per_token, 1e-12) / double(o.update_freq);
    const int64_t t = std::clamp<int64_t>(static_cast<int64_t>(padded / 2000), 2048, cap);
    if (t < b) {
      b = t;
      why = num("%g", o.max_minutes) + " minutes at the measured " +
            num("%.0f", 1.0 / p.s_per_token) + " padded tokens/s allow about " +
            count(static_cast<int64_t>(padded)) +
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
int64_t choose_updates(const BudgetPlan& p, const TrainOptions& o, Recipe& r) {
  const int64_t updates = p.known ? p.updates_for(o, o.batch_tokens) : 0;
  std::string budget_text;
  if (o.max_steps > 0) budget_text = "--max-steps " + std::to_string(o.max_steps);
  if (o.max_epochs > 0)
    budget_text += std::string(budget_text.empty() ? "" : ", ") + "--max-epochs " +
                   std::to_string(o.max_epochs);
  if (o.max_minutes > 0)
    budget_text += std::string(budget_text.empty() ? "" : ", ") + "--max-minutes " +
                   num("%g", o.max_minutes) +
                   (p.timed ? " at " + num("%.2f", p.s_per_token * double(o.batch_tokens)) +
                                  " s per update measured on this machine"
                            : std::string());
  if (p.known)
    r.choose("updates", updates,
             "the budget (" + budget_text + ") allows about " + std::to_string(updates) +
                 " updates" +
                 (p.timed ? "; revised as training goes, from the measured speed" : ""));
  else
    r.choose("updates", 0, "no budget (--max-minutes, --max-steps or --max-epochs): no end");
  return updates;
}

// Schedule: linear warmup over a tenth of the run (200 to 4000 updates),
// then linear decay to 0 at the end of the budget; without a budget, the
// paper's inverse square root after 4000.
void choose_schedule(bool known, int64_t updates, const ModelConfig& cfg, TrainOptions& o,
                     Recipe& r) {
  if (given(o, "lr_schedule")) {
    r.given("lr_schedule", o.lr_schedule);
  } else {
    o.lr_schedule = known ? "linear" : "inverse-sqrt";
    r.choose("lr_schedule", o.lr_schedule,
             known ? "decays linearly to 0 at the end of the budget: ends the run at its best "
                     "weights, where an inverse square root would still be far from its end "
                     "(bench/recipe.sh compares the shapes)"
                   : "the paper's inverse square root, which needs no end");
  }
  if (given(o, "warmup_steps")) {
    r.given("warmup_steps", o.warmup_steps);
  } else {
    int64_t w = 4000;
    if (known)
      w = std::clamp<int64_t>(updates / 10, std::min<int64_t>(200, std::max<int64_t>(updates / 4, 1)),
                              4000);
    o.warmup_steps = w;
    r.choose("warmup_steps", w,
             known ? "a tenth of the " + std::to_string(updates) +
                         " updates, at least 200 (or a quarter of a shorter run), at most 4000"
                   : "the paper's 4000");
  }
  if (given(o, "lr_scale")) return r.given("lr_scale", o.lr_scale);
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
           "peak learning rate " + num("%.2e", peak) +
               (known ? " (1.5e-3 at width 256, times sqrt(256/d_model) = " +
                            num("%.2f", std::sqrt(256.0 / d)) +
                            " and sqrt(batch/4096) below 4096 tokens)"
                      : " (the paper's)"));
}

// Regularisation: dropout by corpus size, less when the budget allows few
// epochs (a model that sees each pair a few times cannot overfit it, and
// dropout slows its learning).
void choose_regularisation(const BudgetFacts& f, const BudgetPlan& p, int64_t updates,
                           ModelConfig& cfg, const TrainOptions& o, Recipe& r) {
  const double epochs = updates > 0 ? double(updates) * double(o.update_freq) *
                                          double(o.batch_tokens) * p.fill / p.tokens
                                    : 0;
  if (given(o, "dropout")) {
    r.given("dropout", o.dropout, "given (--dropout)");
  } else if (given(o, "config")) {
    r.given("dropout", std::round(double(cfg.dropout) * 1e4) / 1e4, "from the config " + cfg.name);
  } else {
    const double d0 = f.pairs < 100000 ? 0.3 : f.pairs < 1000000 ? 0.2 : 0.1;
    double d = d0;
    std::string why = count(f.pairs) + " pairs: 0.3 below 100k pairs, 0.2 below 1M, 0.1 above";
    if (updates > 0 && epochs < 3) {
      d = 0.1;
      why += "; the budget allows only " + num("%.1f", epochs) + " epochs: 0.1";
    } else if (updates > 0 && epochs < 10 && d0 > 0.1) {
      d = d0 - 0.1;
      why += "; the budget allows " + num("%.1f", epochs) + " epochs (under 10): 0.1 less";
    }
    d = std::round(d * 100) / 100;
    cfg.dropout = static_cast<float>(d);
    r.choose("dropout", d, why);
  }
  if (given(o, "label_smoothing")) {
    r.given("label_smoothing", o.label_smoothing, "given (--label-smoothing)");
  } else if (given(o, "config")) {
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
void choose_cadence(const BudgetFacts& f, const BudgetPlan& p, int64_t updates, TrainOptions& o,
                    Recipe& r) {
  auto set = [&](const char* key, int64_t& field, int64_t value, const std::string& why) {
    if (given(o, key)) {
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
  const BudgetPlan p(f, o);
  choose_batch(f, p, o, r);
  const int64_t updates = choose_updates(p, o, r);
  choose_schedule(p.known, updates, cfg, o, r);
  choose_regularisation(f, p, updates, cfg, o, r);
  choose_cadence(f, p, updates, o, r);
  return updates;
}

}  // namespace nmt
