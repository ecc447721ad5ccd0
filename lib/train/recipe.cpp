#include "train/recipe.h"

#include <unicode/uchar.h>
#include <unicode/uscript.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/format.h"

namespace nmt {

using json = nlohmann::json;

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
    *reason = short_count(pairs) + " pairs: " +
              (base ? std::string("300k pairs or more take the paper's base model")
                    : std::string("under 300k pairs, a 3+3-layer model of width 256 learns as "
                                  "much as a larger one and trains several times faster"));
  return base ? "transformer-base" : "transformer-small";
}

void recipe_layers(ModelConfig& cfg, const TrainOptions& o, Recipe& r) {
  const std::string split =
      std::to_string(cfg.encoder_layers) + "+" + std::to_string(cfg.decoder_layers);
  const std::string goal = "{optimize} " + std::string(optimize_name(o.optimize));
  if (o.was_given("config")) {
    r.given("layers", split,
            o.optimize == Optimize::Quality
                ? "given ({config})"
                : "given ({config}; " + goal + " keeps a given config's layers)");
    return;
  }
  const int decoder = o.optimize == Optimize::Student ? 1 : 2;
  if (o.optimize == Optimize::Quality || cfg.decoder_layers <= decoder) {
    r.choose("layers", split,
             o.optimize == Optimize::Quality
                 ? goal + ": the config's balanced split"
                 : goal + ": the config's decoder has " +
                       (cfg.decoder_layers == 1 ? std::string("one layer")
                                                : std::to_string(cfg.decoder_layers) + " layers") +
                       " already");
    return;
  }
  cfg.decoder_layers = decoder;
  const std::string shape = std::to_string(cfg.encoder_layers) + "+" + std::to_string(decoder);
  cfg.name += "-" + std::to_string(cfg.encoder_layers) + "x" + std::to_string(decoder);
  const std::string why =
      goal +
      ": the decoder runs for every output token of every beam, the encoder once per "
      "source token, so the config's " +
      split + " keeps its encoder and " +
      (decoder == 1 ? std::string("one decoder layer, for a teacher's translations: nmt "
                                  "distill's student, which came within a BLEU of a 60-minute "
                                  "teacher on Multi30k")
                    : std::string("two decoder layers: 1.3-1.4 times the translation speed in the "
                                  "same weights, at a BLEU within a run's variation on Multi30k "
                                  "in 10 minutes on 2 cores, 1.2 lower in one 60-minute run "
                                  "(bench/recipe.sh's speed variant)")) +
      "; a deeper encoder, as Kasai et al. 2021 use for converged models, learned several times "
      "more slowly on such budgets";
  r.choose("layers", shape, why);
}

namespace {

// bf16 where the machine trains in it (revised by a measured update with a
// budget of time: recipe_compute_by_speed), else f32.
void choose_compute_type(TrainOptions& o, const std::string& bf16_why_not, Recipe& r) {
  if (o.was_given("compute_type")) {
    r.given("compute_type", compute_type_name(o.compute_type));
  } else if (bf16_why_not.empty()) {
    o.compute_type = ComputeType::BF16;
    r.choose("compute_type", "bf16",
             "this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX)" +
                 std::string(o.max_minutes > 0
                                 ? ": bf16 if an update times faster in it than in f32 on the "
                                   "built model (revised below)"
                                 : ": the products in bf16 with f32 accumulation, weights, Adam "
                                   "and loss in f32 (with a budget of time, the faster of bf16 "
                                   "and f32 as measured)"));
  } else {
    o.compute_type = ComputeType::F32;
    r.choose("compute_type", "f32", "no bf16 training on this machine (" + bf16_why_not + ")");
  }
}

}  // namespace

DataRecipe recipe_for_data(const CorpusFacts& f, const ModelConfig& cfg, TrainOptions& o,
                           const std::string& bf16_why_not, Recipe& r,
                           const std::string& mecab_why_not) {
  DataRecipe d;
  const std::string from_config = "from the config " + cfg.name;
  if (o.was_given("config")) {
    r.given("config", cfg.name, "given ({config})");
  } else {
    std::string why;
    recipe_config_name(f.pairs, &why);
    r.choose("config", cfg.name, why);
  }

  if (o.was_given("vocab_size")) {
    d.vocab_size = o.vocab_size > 0 ? o.vocab_size : cfg.vocab_size;
    r.given("vocab_size", d.vocab_size,
            o.vocab_size > 0 ? "given ({vocab_size})" : "given ({spm})");
  } else if (o.was_given("config")) {
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
             short_count(p) +
                 " pairs: joint vocabularies of 1k (<2k pairs), 4k (<10k), 8k (<100k), "
                 "16k (<500k), 32k pieces above");
    o.vocab_size = d.vocab_size;
  }

  const double cjk = std::max(f.src_cjk, f.tgt_cjk);
  if (!o.spm.empty()) {
    r.given("character_coverage", "the {spm} model's", "given ({spm})");
  } else if (cjk >= 0.3) {
    d.character_coverage = 0.9995;
    r.choose("character_coverage", d.character_coverage,
             format_number("%.0f", 100 * cjk) +
                 "% of a side's characters are Han, kana or Hangul: "
                 "SentencePiece's recommendation for such large character sets; the rarest "
                 "0.05% are spelled in UTF-8 byte pieces (byte fallback), never <unk>");
  } else {
    r.choose("character_coverage", 1.0,
             "an alphabetic script (" + format_number("%.1f", 100 * cjk) +
                 "% Han, kana or Hangul): every character gets a piece");
  }

  // Validation BLEU as it is reported for the target language: 13a's
  // spaces would make a Chinese or Japanese sentence one word, and every
  // validation score 0, which picks the best model and stops early.
  if (o.was_given("valid_tokenize")) {
    r.given("valid_tokenize", metrics::tokenizer_name(o.valid_tokenize));
  } else if (f.tgt_cjk >= 0.3 && f.tgt_kana >= 0.05) {
    o.valid_tokenize =
        mecab_why_not.empty() ? metrics::TokenizerKind::kJaMecab : metrics::TokenizerKind::kChar;
    r.choose(
        "valid_tokenize", metrics::tokenizer_name(o.valid_tokenize),
        "Japanese target text (" + format_number("%.0f", 100 * f.tgt_kana) + "% kana): " +
            (mecab_why_not.empty() ? "MeCab's words, as sacreBLEU's -tok ja-mecab"
                                   : "characters (ja-mecab cannot run: " + mecab_why_not + ")"));
  } else if (f.tgt_cjk >= 0.3) {
    o.valid_tokenize = metrics::TokenizerKind::kZh;
    r.choose("valid_tokenize", "zh",
             "Chinese target text (" + format_number("%.0f", 100 * f.tgt_cjk) +
                 "% Han): each character a word, as sacreBLEU's -tok zh");
  } else {
    o.valid_tokenize = metrics::TokenizerKind::k13a;
    r.choose("valid_tokenize", "13a", "space-separated target text: sacreBLEU's default");
  }

  choose_compute_type(o, bf16_why_not, r);
  return d;
}

bool recipe_compute_by_speed(double bf16_s, double f32_s, int64_t batch, TrainOptions& o,
                             Recipe& r) {
  if (o.was_given("compute_type") || o.compute_type != ComputeType::BF16 || bf16_s <= 0 ||
      f32_s <= 0)
    return false;
  const bool keep = bf16_s * 1.05 <= f32_s;
  o.compute_type = keep ? ComputeType::BF16 : ComputeType::F32;
  const std::string timing = "measured on this model: an update of " + std::to_string(batch) +
                             " tokens takes " + format_number("%.3f", bf16_s) + " s in bf16, " +
                             format_number("%.3f", f32_s) + " s in f32";
  r.revise("compute_type", compute_type_name(o.compute_type),
           keep ? "this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX) and " + timing +
                      ": the products in bf16 with f32 accumulation, weights, Adam and loss in "
                      "f32 (bench/recipe.sh's recipe-f32 variant compares their BLEU)"
                : "this CPU has bf16 instructions, but " + timing +
                      ": bf16 is not at least 5% faster here, so f32");
  return !keep;
}

}  // namespace nmt
