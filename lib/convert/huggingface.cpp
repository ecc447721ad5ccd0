// Hugging Face checkpoint directories (config.json, the weights, the
// tokeniser's files) of the encoder-decoder Transformers nmt runs exactly:
// MarianMT (model_type "marian", OPUS-MT's) and M2M-100 / NLLB-200
// (model_type "m2m_100"). Names follow Transformers' modeling_marian.py and
// modeling_m2m_100.py; the tokenisers follow tokenization_marian.py,
// tokenization_m2m_100.py and tokenization_nllb.py. See convert.h.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "convert/checkpoint.h"
#include "convert/config_json.h"
#include "convert/convert.h"
#include "convert/formats.h"
#include "core/error.h"
#include "io/json.h"
#include "io/text_file.h"

namespace nmt::convert {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The architecture both model types share, from config.json.
ModelConfig read_architecture(const ConfigJson& cfg, const std::string& type, const fs::path& dir) {
  ModelConfig c;
  c.name = "hf:" + fs::path(dir).lexically_normal().filename().string();
  if (c.name == "hf:") c.name = "hf:" + fs::absolute(dir).parent_path().filename().string();
  c.d_model = cfg.integer("d_model", 512, 1, kMaxModelSize);
  c.encoder_layers = cfg.integer("encoder_layers", 6, 1, kMaxModelSize);
  c.decoder_layers = cfg.integer("decoder_layers", 6, 1, kMaxModelSize);
  c.heads = cfg.integer("encoder_attention_heads", 8, 1, kMaxModelSize);
  if (cfg.integer("decoder_attention_heads", c.heads, 1, kMaxModelSize) != c.heads)
    cfg.refuse("decoder_attention_heads", "nmt's encoder and decoder have as many heads");
  if (c.d_model % c.heads) cfg.refuse("d_model", "not a multiple of the heads");
  c.d_k = c.d_v = c.d_model / c.heads;
  c.d_ff = cfg.integer("encoder_ffn_dim", 2048, 1, kMaxModelSize);
  if (cfg.integer("decoder_ffn_dim", c.d_ff, 1, kMaxModelSize) != c.d_ff)
    cfg.refuse("decoder_ffn_dim", "nmt's encoder and decoder have one FFN width");
  const std::string act = cfg.text("activation_function", type == "marian" ? "swish" : "relu");
  if (act == "swish" || act == "silu")
    c.activation = "swish";
  else if (act == "relu" || act == "gelu")
    c.activation = act;
  else if (act == "gelu_new" || act == "gelu_pytorch_tanh")
    c.activation = "gelu-tanh";
  else
    cfg.refuse("activation_function", "nmt has relu, gelu, gelu_new and swish");
  c.scale_embeddings = cfg.flag("scale_embedding", type == "marian");
  c.max_positions = cfg.integer("max_position_embeddings", 1024, 2, 1 << 16);
  c.dropout = 0.f;
  c.layer_norm_eps = 1e-5f;  // torch.nn.LayerNorm's
  c.norm = type == "marian" ? "post" : "pre";
  c.final_norm = type != "marian";
  // What these model types may say but nmt has not.
  for (const char* k : {"normalize_embedding", "add_final_layer_norm", "normalize_before",
                        "layernorm_embedding", "add_bias_logits"})
    if (cfg.flag(k, false)) cfg.refuse(k, "nmt's Transformer has no such layer");
  if (!cfg.flag("static_position_embeddings", true))
    cfg.refuse("static_position_embeddings",
               "learned positions of this model type are not supported");
  return c;
}

// A tokeniser file beside the model: the first of names that exists.
std::string find_file(const fs::path& dir, std::initializer_list<const char*> names) {
  std::error_code ec;
  for (const char* n : names)
    if (fs::exists(dir / n, ec)) return (dir / n).string();
  return "";
}

// vocab.json: a token -> id object whose ids are 0..n-1, each once.
std::vector<std::string> read_vocab_json(const std::string& path) {
  const json j = io::parse_json(io::read_whole_file(path, "vocabulary"), path);
  if (!j.is_object()) throw InputError(path + ": expected an object of tokens and ids");
  std::vector<std::string> tokens(j.size());
  std::vector<uint8_t> seen(j.size());
  for (const auto& [token, id] : j.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(j.size()) || seen[id.get<size_t>()])
      throw InputError(path + ": \"" + token + "\" has id " + id.dump() + " (ids must be 0 to " +
                       std::to_string(j.size() - 1) + ", each once)");
    seen[id.get<size_t>()] = 1;
    tokens[id.get<size_t>()] = token;
  }
  check_tokens(tokens, path, /*one_per_line=*/false);
  return tokens;
}

// The tokens a tokeniser adds to its vocabulary (language codes, <mask>), by
// id: tokenizer_config.json's "added_tokens_decoder", else tokenizer.json's
// "added_tokens".
std::map<int64_t, std::string> added_tokens(const fs::path& dir) {
  std::map<int64_t, std::string> out;
  const ConfigJson tc = ConfigJson::read(dir / "tokenizer_config.json", false);
  if (tc.has("added_tokens_decoder") && tc.raw()["added_tokens_decoder"].is_object()) {
    for (const auto& [id, t] : tc.raw()["added_tokens_decoder"].items()) {
      if (!t.is_object() || !t.contains("content") || !t["content"].is_string() || id.empty() ||
          id.find_first_not_of("0123456789") != std::string::npos || id.size() > 9)
        throw InputError(tc.path() + ": \"added_tokens_decoder\": entry " + id + " is malformed");
      out[std::stoll(id)] = t["content"].get<std::string>();
    }
    return out;
  }
  const std::string tj = find_file(dir, {"tokenizer.json"});
  if (tj.empty()) return out;
  const json j = io::parse_json(io::read_whole_file(tj, "tokenizer"), tj);
  if (j.is_object() && j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const json& t : j["added_tokens"])
      if (t.is_object() && t.contains("id") && t["id"].is_number_unsigned() &&
          t.contains("content") && t["content"].is_string())
        out[t["id"].get<int64_t>()] = t["content"].get<std::string>();
  return out;
}

struct Tokens {
  std::vector<std::string> src, tgt;  // equal unless the vocabularies are separate
  std::string src_spm, tgt_spm;       // their files
  std::vector<std::string> read;      // the files read
};

// Fills a vocabulary to the embedding's rows with placeholders no text
// encodes to (Transformers pads vocab_size to a multiple); refuses more
// tokens than rows.
void fit_rows(std::vector<std::string>& tokens, int64_t rows, const std::string& what) {
  if (static_cast<int64_t>(tokens.size()) > rows)
    throw InputError(what + ": " + std::to_string(tokens.size()) + " tokens for an embedding of " +
                     std::to_string(rows) + " rows");
  for (int64_t i = static_cast<int64_t>(tokens.size()); i < rows; ++i)
    tokens.push_back("<unused_row_" + std::to_string(i) + ">");
}

// MarianTokenizer: source.spm and target.spm cut text; vocab.json (and
// target_vocab.json with separate_vocabs) maps their pieces to ids.
Tokens marian_tokens(const fs::path& dir) {
  Tokens t;
  t.src_spm = find_file(dir, {"source.spm"});
  t.tgt_spm = find_file(dir, {"target.spm"});
  const std::string vocab = find_file(dir, {"vocab.json"});
  if (t.src_spm.empty() || t.tgt_spm.empty() || vocab.empty())
    throw InputError(dir.string() +
                     ": a MarianMT model's tokeniser is source.spm, target.spm and vocab.json; "
                     "not all are here");
  const ConfigJson tc = ConfigJson::read(dir / "tokenizer_config.json", false);
  t.src = read_vocab_json(vocab);
  t.read = {t.src_spm, t.tgt_spm, vocab};
  if (tc.flag("separate_vocabs", false)) {
    const std::string tv = find_file(dir, {"target_vocab.json"});
    if (tv.empty()) throw InputError(dir.string() + ": separate_vocabs without target_vocab.json");
    t.tgt = read_vocab_json(tv);
    t.read.push_back(tv);
  } else {
    t.tgt = t.src;
  }
  return t;
}

// M2M100Tokenizer's language tokens, which its code appends to vocab.json's
// (tokenization_m2m_100.py's FAIRSEQ_LANGUAGE_CODES, in its order), then
// its "madeup words".
void append_m2m_languages(const ConfigJson& tc, std::vector<std::string>& tokens) {
  static const char* const m2m100[] = {
      "af", "am", "ar", "ast", "az", "ba", "be", "bg", "bn", "br",  "bs", "ca", "ceb", "cs", "cy",
      "da", "de", "el", "en",  "es", "et", "fa", "ff", "fi", "fr",  "fy", "ga", "gd",  "gl", "gu",
      "ha", "he", "hi", "hr",  "ht", "hu", "hy", "id", "ig", "ilo", "is", "it", "ja",  "jv", "ka",
      "kk", "km", "kn", "ko",  "lb", "lg", "ln", "lo", "lt", "lv",  "mg", "mk", "ml",  "mn", "mr",
      "ms", "my", "ne", "nl",  "no", "ns", "oc", "or", "pa", "pl",  "ps", "pt", "ro",  "ru", "sd",
      "si", "sk", "sl", "so",  "sq", "sr", "ss", "su", "sv", "sw",  "ta", "th", "tl",  "tn", "tr",
      "uk", "ur", "uz", "vi",  "wo", "xh", "yi", "yo", "zh", "zu"};
  static const char* const wmt21[] = {"en", "ha", "is", "ja", "cs", "ru", "zh", "de"};
  const std::string set = tc.text("language_codes", "m2m100");
  if (set == "m2m100")
    for (const char* c : m2m100) tokens.push_back(std::string("__") + c + "__");
  else if (set == "wmt21")
    for (const char* c : wmt21) tokens.push_back(std::string("__") + c + "__");
  else
    tc.refuse("language_codes", "M2M-100's tokeniser has \"m2m100\" and \"wmt21\"");
  const int madeup = tc.integer("num_madeup_words", 8, 0, 1024);
  for (int i = 0; i < madeup; ++i) {
    char w[32];
    std::snprintf(w, sizeof w, "madeupword%04d", i);
    tokens.push_back(w);
  }
}

// M2M100Tokenizer (vocab.json and sentencepiece.bpe.model) and
// NllbTokenizer (fairseq's ids: <s> <pad> </s> <unk>, then the
// SentencePiece model's pieces from its fourth, one id up), then the added
// tokens (language codes, <mask>) at their ids.
Tokens m2m_tokens(const fs::path& dir, const ModelConfig& c) {
  Tokens t;
  t.src_spm = t.tgt_spm = find_file(dir, {"sentencepiece.bpe.model", "spm.model"});
  if (t.src_spm.empty())
    throw InputError(dir.string() +
                     ": no sentencepiece.bpe.model (nmt reads the SentencePiece model of "
                     "M2M-100 and NLLB tokenisers, not tokenizer.json alone)");
  t.read.push_back(t.src_spm);
  const std::string vocab = find_file(dir, {"vocab.json"});
  if (!vocab.empty()) {
    t.src = read_vocab_json(vocab);
    t.read.push_back(vocab);
    append_m2m_languages(ConfigJson::read(dir / "tokenizer_config.json", false), t.src);
  } else {
    const std::vector<std::string> pieces = Vocab::sentencepiece_pieces(
        io::read_whole_file(t.src_spm, "SentencePiece model"), t.src_spm);
    t.src = {"<s>", "<pad>", "</s>", "<unk>"};
    for (size_t k = 3; k < pieces.size(); ++k) t.src.push_back(pieces[k]);
  }
  for (const auto& [id, token] : added_tokens(dir)) {
    if (id >= c.vocab_size)
      throw InputError(dir.string() + ": added token " + token + " has id " + std::to_string(id) +
                       ", past the vocabulary");
    if (id >= static_cast<int64_t>(t.src.size())) fit_rows(t.src, id + 1, dir.string());
    t.src[id] = token;
  }
  check_tokens(t.src, dir.string() + " (vocabulary)", false);
  t.tgt = t.src;
  return t;
}

// Token ids, decoder start and language framing.
void set_tokens(const ConfigJson& cfg, const ConfigJson& tc, const std::string& type,
                const Tokens& t, ModelConfig& c) {
  const int V = c.vocab_size;
  c.pad_id = cfg.integer("pad_token_id", type == "marian" ? V - 1 : 1, 0, V - 1);
  c.eos_id = cfg.integer("eos_token_id", type == "marian" ? 0 : 2, 0, V - 1);
  c.unk_id = id_of(t.tgt, "<unk>");
  // Transformers starts decoding from decoder_start_token_id: Marian's pad,
  // M2M-100's </s>.
  c.bos_id =
      cfg.integer("decoder_start_token_id", type == "marian" ? c.pad_id : c.eos_id, 0, V - 1);
  c.decoder_start = "bos";
  c.source_bos = false;
  c.source_eos = true;
  c.output_unk = true;  // Transformers' generate may output <unk>
  c.languages = language_tokens(t.src, type == "marian" ? "opus" : "fairseq");
  if (c.languages.empty()) {
    // MarianTokenizer keeps the pair an OPUS-MT model was trained on.
    const std::string src = tc.text("source_lang", ""), tgt = tc.text("target_lang", "");
    if (is_language_code(src) && is_language_code(tgt) && src != tgt)
      c.src_lang = src, c.tgt_lang = tgt;
    return;
  }
  if (type == "marian") {
    c.source_language = "none";
    c.target_language = "source";
    return;
  }
  const bool legacy = tc.flag("legacy_behaviour", false);
  c.source_language = legacy ? "after" : "before";
  c.source_eos = !legacy;
  c.target_language = "forced";
}

// Reads a tensor that may be stored under several names (tied weights are
// saved once, under any of them); the others, where present, must equal it
// (a view of the same data is not read again).
std::vector<float> read_tied(const Checkpoint& ck, const std::vector<std::string>& names,
                             const std::vector<int64_t>& shape) {
  std::vector<float> out;
  std::string first;
  for (const std::string& n : names) {
    if (!ck.has(n) || (!first.empty() && ck.same_data(n, first))) continue;
    std::vector<float> v = ck.read(n, shape);
    if (first.empty()) {
      out = std::move(v), first = n;
    } else if (v != out) {
      throw InputError(ck.files()[0] + ": " + n + " differs from " + first +
                       ", which config.json ties it to");
    }
  }
  if (first.empty())
    throw InputError(ck.files()[0] + ": the checkpoint has none of " + names[0] +
                     (names.size() > 1 ? " (or " + names[1] + ")" : ""));
  return out;
}

// Positions as a table: Marian's stored one, or sines and cosines as
// Transformers computes them (Marian: numpy in double, cosines in the
// second half; M2M-100: fairseq's, in float, from position 2 on).
std::vector<float> positions(const Checkpoint& ck, const std::string& side, const std::string& type,
                             const ModelConfig& c) {
  const int64_t P = c.max_positions, D = c.d_model;
  const std::string stored = "model." + side + ".embed_positions.weight";
  if (ck.has(stored)) return ck.read(stored, {P, D});
  std::vector<float> t(static_cast<size_t>(P * D));
  if (type == "marian") {
    const int64_t half = (D + 1) / 2;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t j = 0; j < D; ++j) {
        const double x =
            static_cast<double>(p) /
            std::pow(10000.0, 2.0 * static_cast<double>(j / 2) / static_cast<double>(D));
        if (j % 2 == 0)
          t[p * D + j / 2] = static_cast<float>(std::sin(x));
        else
          t[p * D + half + j / 2] = static_cast<float>(std::cos(x));
      }
    return t;
  }
  const int64_t half = D / 2;
  const float step = static_cast<float>(std::log(10000.0) / static_cast<double>(half - 1));
  for (int64_t p = 0; p < P; ++p)
    for (int64_t j = 0; j < half; ++j) {
      const float x = static_cast<float>(p + 2) * std::exp(static_cast<float>(j) * -step);
      t[p * D + j] = std::sin(x);
      t[p * D + half + j] = std::cos(x);
    }
  return t;
}

void copy_layers(const Checkpoint& ck, const ModelConfig& c,
                 std::map<std::string, std::vector<float>>& w) {
  const int64_t D = c.d_model, F = c.d_ff;
  auto cat = [](std::vector<std::vector<float>> parts) {
    std::vector<float> out;
    for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  auto linear = [&](const std::string& to, std::vector<std::string> from, int64_t out_dim,
                    int64_t in_dim) {
    std::vector<std::vector<float>> ws, bs;
    for (const std::string& f : from) {
      ws.push_back(ck.read(f + ".weight", {out_dim, in_dim}));
      bs.push_back(ck.read(f + ".bias", {out_dim}));
    }
    w[to + "/weight"] = cat(ws);
    w[to + "/bias"] = cat(bs);
  };
  auto norm = [&](const std::string& to, const std::string& from) {
    w[to + "/gamma"] = ck.read(from + ".weight", {D});
    w[to + "/beta"] = ck.read(from + ".bias", {D});
  };
  for (int l = 0; l < c.encoder_layers + c.decoder_layers; ++l) {
    const bool dec = l >= c.encoder_layers;
    const int i = dec ? l - c.encoder_layers : l;
    const std::string to = std::string(dec ? "decoder" : "encoder") + "/layer_" + std::to_string(i),
                      from = std::string("model.") + (dec ? "decoder" : "encoder") + ".layers." +
                             std::to_string(i);
    const std::string sa = from + ".self_attn.";
    linear(to + "/self_attn/qkv", {sa + "q_proj", sa + "k_proj", sa + "v_proj"}, D, D);
    linear(to + "/self_attn/out", {sa + "out_proj"}, D, D);
    norm(to + "/ln1", from + ".self_attn_layer_norm");
    if (dec) {
      const std::string ca = from + ".encoder_attn.";
      linear(to + "/cross_attn/q", {ca + "q_proj"}, D, D);
      linear(to + "/cross_attn/kv", {ca + "k_proj", ca + "v_proj"}, D, D);
      linear(to + "/cross_attn/out", {ca + "out_proj"}, D, D);
      norm(to + "/ln2", from + ".encoder_attn_layer_norm");
    }
    linear(to + "/ffn/w1", {from + ".fc1"}, F, D);
    linear(to + "/ffn/w2", {from + ".fc2"}, D, F);
    norm(to + (dec ? "/ln3" : "/ln2"), from + ".final_layer_norm");
  }
  if (c.final_norm) {
    norm("encoder/final_ln", "model.encoder.layer_norm");
    norm("decoder/final_ln", "model.decoder.layer_norm");
  }
}

// Embeddings, output layer and positions; which are tied comes from
// config.json as Transformers reads it.
void copy_embeddings(const Checkpoint& ck, const ConfigJson& cfg, const std::string& type,
                     ModelConfig& c, std::map<std::string, std::vector<float>>& w) {
  const int64_t D = c.d_model, Vt = c.vocab_size, Vs = c.source_vocab();
  const bool share_src_tgt =
      cfg.flag("share_encoder_decoder_embeddings", true) && !c.src_vocab_size;
  const bool tie_out = cfg.flag("tie_word_embeddings", true);
  const std::string shared = "model.shared.weight", enc = "model.encoder.embed_tokens.weight",
                    dec = "model.decoder.embed_tokens.weight", head = "lm_head.weight";
  c.tie_embeddings = share_src_tgt && tie_out;
  c.tie_output = !c.tie_embeddings && tie_out;
  if (c.tie_embeddings) {
    w["embed/tokens"] = read_tied(ck, {shared, enc, dec, head}, {Vt, D});
  } else if (share_src_tgt) {
    w["encoder/embed/tokens"] = w["decoder/embed/tokens"] =
        read_tied(ck, {shared, enc, dec}, {Vt, D});
    w["decoder/output/weight"] = read_tied(ck, {head}, {Vt, D});
  } else {
    w["encoder/embed/tokens"] = read_tied(ck, {enc, shared}, {Vs, D});
    w["decoder/embed/tokens"] = read_tied(
        ck, tie_out ? std::vector<std::string>{dec, head} : std::vector<std::string>{dec}, {Vt, D});
    if (!tie_out) w["decoder/output/weight"] = read_tied(ck, {head}, {Vt, D});
  }
  c.output_bias = ck.has("final_logits_bias");
  if (c.output_bias) w["decoder/output/bias"] = ck.read("final_logits_bias", {1, Vt});
  c.positional = "learned";
  w["encoder/embed/positions"] = positions(ck, "encoder", type, c);
  w["decoder/embed/positions"] = positions(ck, "decoder", type, c);
}

}  // namespace

Imported import_huggingface(const std::string& src, const ConvertOptions& opts) {
  if (!opts.spm.empty() || !opts.vocab.empty())
    throw UsageError("{spm}/{vocab}: a Hugging Face model directory holds its tokeniser");
  const fs::path dir = src;
  const ConfigJson cfg = ConfigJson::read(dir / "config.json", true);
  const std::string type = cfg.text("model_type", "");
  if (type != "marian" && type != "m2m_100")
    cfg.refuse("model_type",
               "nmt converts MarianMT (\"marian\") and M2M-100/NLLB-200 (\"m2m_100\") models");
  if (cfg.has("architectures") && cfg.raw()["architectures"].is_array())
    for (const json& a : cfg.raw()["architectures"])
      if (a.is_string() &&
          a.get<std::string>().find("ConditionalGeneration") == std::string::npos &&
          a.get<std::string>() != "MarianMTModel")
        cfg.refuse("architectures", "not a translation model");
  ModelConfig c = read_architecture(cfg, type, dir);
  c.vocab_size = cfg.integer("vocab_size", 0, 8, kMaxModelSize);
  const Checkpoint ck(src);
  Tokens t = type == "marian" ? marian_tokens(dir) : m2m_tokens(dir, c);
  // Separate vocabularies (MarianMT's separate_vocabs): the encoder's rows
  // are vocab_size, the decoder's decoder_vocab_size, even where equal.
  if (t.src != t.tgt) {
    c.src_vocab_size = c.vocab_size;
    c.vocab_size = cfg.integer("decoder_vocab_size", c.vocab_size, 8, kMaxModelSize);
  }
  fit_rows(t.tgt, c.vocab_size, dir.string() + " (target vocabulary)");
  if (c.src_vocab_size)
    fit_rows(t.src, c.src_vocab_size, dir.string() + " (source vocabulary)");
  else
    t.src = t.tgt;
  const ConfigJson tc = ConfigJson::read(dir / "tokenizer_config.json", false);
  set_tokens(cfg, tc, type, t, c);
  config_from_json(config_to_json(c), src + " (converted config)");
  Imported out;
  copy_embeddings(ck, cfg, type, c, out.weights);
  copy_layers(ck, c, out.weights);
  for (const std::string& n : ck.unused())
    throw InputError(ck.files()[0] + ": tensor " + n +
                     " belongs to nothing nmt's Transformer has (not converted)");
  const std::string src_spm = io::read_whole_file(t.src_spm, "SentencePiece model"),
                    tgt_spm = io::read_whole_file(t.tgt_spm, "SentencePiece model");
  out.vocab = Vocab::from_tokens(t.tgt, tgt_spm, c.unk_id, t.tgt_spm);
  if (c.src_vocab_size || src_spm != tgt_spm)
    out.source_vocab = Vocab::from_tokens(t.src, src_spm, c.unk_id, t.src_spm);
  out.config = c;
  out.provenance = {
      {"tool", "transformers"},
      {"source", src},
      {"model_type", type},
      {"config", cfg.raw()},
      {"summary", "from Hugging Face " + type + " (" + fs::path(ck.files()[0]).filename().string() +
                      "), " +
                      (c.languages.empty() ? "one language pair"
                                           : std::to_string(c.languages.size()) + " languages")}};
  out.read_from = ck.files();
  out.read_from.insert(out.read_from.end(), t.read.begin(), t.read.end());
  for (const char* f : {"config.json", "tokenizer_config.json", "tokenizer.json",
                        "generation_config.json", "special_tokens_map.json"})
    out.read_from.push_back((dir / f).string());
  return out;
}

}  // namespace nmt::convert
