#include "model/config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "core/dynlib.h"
#include "core/error.h"
#include "core/suggest.h"
#include "io/json.h"
#include "io/text_file.h"

namespace nmt {
namespace {

using json = nlohmann::json;

class Reader {
 public:
  Reader(const json& j, const std::string& source) : j_(j), source_(source) {}

  // Unknown keys are reported first, so that a misspelt key is named as
  // such rather than as the required key it was meant to be.
  void reject_unknown(const std::vector<std::string>& known) const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (std::find(known.begin(), known.end(), it.key()) == known.end())
        fail(it.key(), "unknown key" + did_you_mean(it.key(), known));
  }

  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    throw InputError(source_ + ": key \"" + key + "\": " + msg);
  }

  const json* find(const std::string& key, bool required) {
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) fail(key, "missing (required)");
      return nullptr;
    }
    return &*it;
  }

  void get(const std::string& key, int& out, bool required, int lo = 1, int hi = kMaxModelSize) {
    if (const json* v = find(key, required)) {
      if (!v->is_number_integer())
        fail(key, "expected an integer, got " + std::string(v->type_name()));
      const auto x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{1} << 62
                         ? int64_t{1} << 62
                         : v->get<int64_t>();
      if (x < lo || x > hi)
        fail(key, "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
                      ", got " + v->dump());
      out = static_cast<int>(x);
    }
  }

  void get(const std::string& key, float& out, bool required, float lo, float hi) {
    if (const json* v = find(key, required)) {
      if (!v->is_number()) fail(key, "expected a number, got " + std::string(v->type_name()));
      const double x = v->get<double>();
      if (!(x >= lo && x <= hi))
        fail(key, "expected a number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                      "], got " + v->dump());
      out = static_cast<float>(x);
    }
  }

  void get(const std::string& key, bool& out, bool required) {
    if (const json* v = find(key, required)) {
      if (!v->is_boolean()) fail(key, "expected true or false, got " + std::string(v->type_name()));
      out = v->get<bool>();
    }
  }

  void get(const std::string& key, std::string& out, bool required,
           const std::set<std::string>& allowed = {}) {
    if (const json* v = find(key, required)) {
      if (!v->is_string()) fail(key, "expected a string, got " + std::string(v->type_name()));
      out = v->get<std::string>();
      if (!allowed.empty() && !allowed.count(out)) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : " or ") + ("\"" + a + "\"");
        fail(key, "expected " + list + ", got \"" + out + "\"");
      }
    }
  }

 private:
  const json& j_;
  std::string source_;
};

const std::vector<std::string> kConfigKeys = {"name",
                                              "encoder_layers",
                                              "decoder_layers",
                                              "d_model",
                                              "d_ff",
                                              "heads",
                                              "d_k",
                                              "d_v",
                                              "dropout",
                                              "attention_dropout",
                                              "relu_dropout",
                                              "label_smoothing",
                                              "positional",
                                              "max_positions",
                                              "scale_embeddings",
                                              "tie_embeddings",
                                              "tie_output",
                                              "output_bias",
                                              "norm",
                                              "final_norm",
                                              "layer_norm_eps",
                                              "activation",
                                              "vocab_size",
                                              "src_vocab_size",
                                              "pad_id",
                                              "unk_id",
                                              "bos_id",
                                              "eos_id",
                                              "src_unk_id",
                                              "decoder_start",
                                              "source_bos",
                                              "source_eos",
                                              "output_unk",
                                              "languages",
                                              "source_language",
                                              "target_language",
                                              "src_lang",
                                              "tgt_lang",
                                              "training"};

// Keeps every width and table size far from int overflow, computed in 64 bits.
void check_sizes(const ModelConfig& c, Reader& r) {
  constexpr int64_t kMaxWidth = kMaxModelSize;
  if (int64_t{c.heads} * c.d_k > kMaxWidth)
    r.fail("d_k", "heads x d_k = " + std::to_string(int64_t{c.heads} * c.d_k) + " exceeds " +
                      std::to_string(kMaxWidth));
  if (int64_t{c.heads} * c.d_v > kMaxWidth)
    r.fail("d_v", "heads x d_v = " + std::to_string(int64_t{c.heads} * c.d_v) + " exceeds " +
                      std::to_string(kMaxWidth));
  constexpr int64_t kMaxTable = kMaxMatrixElements;
  if (int64_t{c.vocab_size} * c.d_model > kMaxTable)
    r.fail("vocab_size", "vocab_size x d_model is too large");
  if (int64_t{c.src_vocab_size} * c.d_model > kMaxTable)
    r.fail("src_vocab_size", "src_vocab_size x d_model is too large");
  if (int64_t{c.max_positions} * c.d_model > kMaxTable)
    r.fail("max_positions", "max_positions x d_model is too large");
  if (int64_t{c.d_ff} * c.d_model > kMaxTable) r.fail("d_ff", "d_ff x d_model is too large");
}

}  // namespace

bool is_language_code(const std::string& code) {
  return !code.empty() && code.size() <= 64 &&
         std::all_of(code.begin(), code.end(), [](char ch) { return ch > ' ' && ch < 127; });
}

// A pair's codes are a language's code each, as a multilingual model's are.
static void read_pair(Reader& r, ModelConfig& c) {
  for (auto [key, out] :
       {std::pair<const char*, std::string*>{"src_lang", &c.src_lang}, {"tgt_lang", &c.tgt_lang}}) {
    r.get(key, *out, false);
    if (!out->empty() && !is_language_code(*out))
      r.fail(key, "\"" + *out + "\" is not a language code");
  }
  if (c.src_lang.empty() != c.tgt_lang.empty())
    r.fail(c.src_lang.empty() ? "src_lang" : "tgt_lang",
           "a language pair needs both src_lang and tgt_lang");
}

// A language's code names it on command lines and in requests: printable
// ASCII without spaces, and its token a row of the vocabulary.
static void read_languages(Reader& r, ModelConfig& c) {
  const json* langs = r.find("languages", false);
  if (!langs) return;
  if (!langs->is_object() || langs->empty())
    r.fail("languages", "expected an object of language codes and token ids");
  r.get("source_language", c.source_language, false, {"none", "before", "after"});
  r.get("target_language", c.target_language, false, {"forced", "source"});
  // A token before the source only (OPUS-MT's) is the source vocabulary's.
  const bool source_only = c.source_language == "none" && c.target_language == "source";
  const int lowest_vocab =
      source_only ? c.source_vocab() : std::min(c.vocab_size, c.source_vocab());
  for (const auto& [code, id] : langs->items()) {
    if (!is_language_code(code)) r.fail("languages", "\"" + code + "\" is not a language code");
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= lowest_vocab)
      r.fail("languages", "\"" + code + "\": expected a token id from 0 to " +
                              std::to_string(lowest_vocab - 1) + ", got " + id.dump());
    c.languages[code] = id.get<int>();
  }
  if (c.source_language == "after" && c.source_eos)
    r.fail("source_language",
           "\"after\" puts </s> before the language's token: source_eos must be false");
}

ModelConfig config_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) throw InputError(source + ": expected a JSON object at the top level");
  ModelConfig c;
  Reader r(j, source);
  r.reject_unknown(kConfigKeys);
  r.get("name", c.name, false);
  r.get("encoder_layers", c.encoder_layers, true);
  r.get("decoder_layers", c.decoder_layers, true);
  r.get("d_model", c.d_model, true);
  r.get("d_ff", c.d_ff, true);
  r.get("heads", c.heads, true);
  if (c.d_model % c.heads != 0)
    r.fail("heads", "d_model (" + std::to_string(c.d_model) + ") must be divisible by heads (" +
                        std::to_string(c.heads) + ")");
  c.d_k = c.d_v = c.d_model / c.heads;
  r.get("d_k", c.d_k, false);
  r.get("d_v", c.d_v, false);
  r.get("dropout", c.dropout, true, 0.f, 0.99f);
  r.get("attention_dropout", c.attention_dropout, false, 0.f, 0.99f);
  r.get("relu_dropout", c.relu_dropout, false, 0.f, 0.99f);
  r.get("label_smoothing", c.label_smoothing, true, 0.f, 0.99f);
  r.get("positional", c.positional, false, {"sinusoidal", "sinusoidal-concat", "learned"});
  // Its timescales step over n - 1 intervals of n = d_model / 2.
  if (c.positional == "sinusoidal-concat" && (c.d_model < 4 || c.d_model % 2))
    r.fail("positional", "\"sinusoidal-concat\" needs an even d_model of at least 4, got " +
                             std::to_string(c.d_model));
  r.get("max_positions", c.max_positions, false, 2, 1 << 16);
  r.get("scale_embeddings", c.scale_embeddings, false);
  r.get("tie_embeddings", c.tie_embeddings, false);
  r.get("tie_output", c.tie_output, false);
  r.get("output_bias", c.output_bias, false);
  r.get("norm", c.norm, false, {"post", "pre"});
  r.get("final_norm", c.final_norm, false);
  r.get("layer_norm_eps", c.layer_norm_eps, false, 0.f, 1.f);
  r.get("activation", c.activation, false, {"relu", "swish", "gelu", "gelu-tanh"});
  r.get("vocab_size", c.vocab_size, false, 8);
  r.get("src_vocab_size", c.src_vocab_size, false, 0);
  if (c.src_vocab_size && c.src_vocab_size < 8)
    r.fail("src_vocab_size", "expected 0 (the joint vocabulary) or at least 8, got " +
                                 std::to_string(c.src_vocab_size));
  if (c.tie_embeddings && c.src_vocab_size && c.src_vocab_size != c.vocab_size)
    r.fail("src_vocab_size",
           "tie_embeddings shares one matrix between the source and the "
           "target, so the vocabularies must be one (src_vocab_size " +
               std::to_string(c.src_vocab_size) + ", vocab_size " + std::to_string(c.vocab_size) +
               ")");
  if (c.tie_embeddings && c.tie_output)
    r.fail("tie_output", "tie_embeddings already shares the pre-softmax projection");
  // A token id must name a row of the vocabulary it is read from.
  const int lowest_vocab = std::min(c.vocab_size, c.source_vocab());
  for (auto [key, id] : {std::pair<const char*, int*>{"pad_id", &c.pad_id},
                         {"unk_id", &c.unk_id},
                         {"bos_id", &c.bos_id},
                         {"eos_id", &c.eos_id}})
    r.get(key, *id, false, -1, lowest_vocab - 1);
  if (c.eos_id < 0) r.fail("eos_id", "a model needs an end-of-sentence token");
  r.get("src_unk_id", c.src_unk_id, false, -1, c.source_vocab() - 1);
  if (c.src_unk_id >= 0 && !c.src_vocab_size)
    r.fail("src_unk_id",
           "only a source vocabulary of its own (src_vocab_size) has its own unknown token");
  r.get("decoder_start", c.decoder_start, false, {"bos", "zero"});
  if (c.decoder_start == "bos" && c.bos_id < 0)
    r.fail("bos_id", "decoder_start \"bos\" needs a bos_id (or decoder_start \"zero\")");
  r.get("source_bos", c.source_bos, false);
  r.get("source_eos", c.source_eos, false);
  r.get("output_unk", c.output_unk, false);
  if (c.source_bos && c.bos_id < 0) r.fail("source_bos", "the model has no bos_id");
  check_sizes(c, r);
  read_languages(r, c);
  read_pair(r, c);
  if (const json* t = r.find("training", false)) {
    // Its keys and values are the training tier's to check
    // (train/options.h), when a run applies them.
    if (!t->is_object())
      throw InputError(source + ": key \"training\": expected an object, got " +
                       std::string(t->type_name()));
    c.training = *t;
  }
  return c;
}

ModelConfig parse_config(const std::string& text, const std::string& source) {
  return config_from_json(io::parse_json(text, source), source);
}

ModelConfig load_config(const std::string& path) {
  return parse_config(io::read_whole_file(path, "config"), path);
}

json config_to_json(const ModelConfig& c) {
  json j = {{"name", c.name},
            {"encoder_layers", c.encoder_layers},
            {"decoder_layers", c.decoder_layers},
            {"d_model", c.d_model},
            {"d_ff", c.d_ff},
            {"heads", c.heads},
            {"d_k", c.d_k},
            {"d_v", c.d_v},
            {"dropout", c.dropout},
            {"attention_dropout", c.attention_dropout},
            {"relu_dropout", c.relu_dropout},
            {"label_smoothing", c.label_smoothing},
            {"positional", c.positional},
            {"max_positions", c.max_positions},
            {"scale_embeddings", c.scale_embeddings},
            {"tie_embeddings", c.tie_embeddings},
            {"tie_output", c.tie_output},
            {"output_bias", c.output_bias},
            {"norm", c.norm},
            {"final_norm", c.final_norm},
            {"layer_norm_eps", c.layer_norm_eps},
            {"activation", c.activation},
            {"vocab_size", c.vocab_size},
            {"src_vocab_size", c.src_vocab_size},
            {"pad_id", c.pad_id},
            {"unk_id", c.unk_id},
            {"bos_id", c.bos_id},
            {"eos_id", c.eos_id},
            {"decoder_start", c.decoder_start},
            {"source_bos", c.source_bos},
            {"source_eos", c.source_eos},
            {"output_unk", c.output_unk}};
  if (c.src_unk_id >= 0) j["src_unk_id"] = c.src_unk_id;
  if (!c.languages.empty()) {
    j["languages"] = c.languages;
    j["source_language"] = c.source_language;
    j["target_language"] = c.target_language;
  }
  if (!c.src_lang.empty()) j["src_lang"] = c.src_lang, j["tgt_lang"] = c.tgt_lang;
  if (!c.training.empty()) j["training"] = c.training;
  return j;
}

std::string find_config(const std::string& name) {
  struct stat st;
  if (stat(name.c_str(), &st) == 0) return name;
  // Where a name is looked for: ./models/, then where an installed nmt keeps
  // its configs (PREFIX/share/nmt/models beside PREFIX/bin or PREFIX/lib),
  // then the source tree's it was built from.
  std::vector<std::string> dirs = {"models/"};
  if (const std::string code = code_directory(); !code.empty())
    dirs.push_back(code + "/../share/nmt/models/");
#ifdef NMT_SOURCE_DIR
  dirs.push_back(std::string(NMT_SOURCE_DIR) + "/models/");
#endif
  for (const std::string& dir : dirs) {
    const std::string p =
        dir + name + (name.size() > 5 && name.substr(name.size() - 5) == ".json" ? "" : ".json");
    if (stat(p.c_str(), &st) == 0) return p;
  }
  throw InputError("config not found: " + name + " (give a path, or a name from models/)");
}

}  // namespace nmt
