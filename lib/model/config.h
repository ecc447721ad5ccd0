// The model configuration: one plain struct, read from models/*.json and
// validated in one place. Unknown keys, wrong types, missing keys and
// inconsistent sizes are errors that name the file, the key and what was
// expected.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/activation.h"

namespace nmt {

// The limits config_from_json holds every model to: each size and count
// (layers, widths, vocabularies), and the elements of one matrix. Importers
// check the sizes they read from another tool's shapes against them before
// any tensor is built, naming the variable.
inline constexpr int kMaxModelSize = 1 << 20;
inline constexpr int64_t kMaxMatrixElements = int64_t{1} << 31;

struct ModelConfig {
  std::string name;
  int encoder_layers = 6;
  int decoder_layers = 6;
  int d_model = 512;
  int d_ff = 2048;
  int heads = 8;
  int d_k = 64;  // per head; the paper has d_k = d_v = d_model / h
  int d_v = 64;
  float dropout = 0.1f;            // P_drop: embeddings + PE, and every sub-layer output
  float attention_dropout = 0.0f;  // on attention weights (not in the paper)
  float relu_dropout = 0.0f;       // inside the FFN (not in the paper)
  float label_smoothing = 0.1f;    // epsilon_ls
  // "sinusoidal": PE(pos, 2i) = sin, PE(pos, 2i+1) = cos (the paper);
  // "sinusoidal-concat": the sines in the first half of the vector, the
  // cosines in the second (tensor2tensor, Marian, fairseq); "learned": a
  // table in the model file (Table 3 row E, or positions a model was
  // imported with).
  std::string positional = "sinusoidal";
  int max_positions = 256;       // longest sequence, in subword tokens incl. EOS
  bool scale_embeddings = true;  // token embeddings times sqrt(d_model)
  bool tie_embeddings = true;    // one matrix for source, target and pre-softmax
  // Without tie_embeddings: the target embedding is also the pre-softmax
  // projection (Marian's --tied-embeddings).
  bool tie_output = false;
  bool output_bias = false;   // a bias on the pre-softmax projection
  std::string norm = "post";  // "post" (the paper) or "pre"
  bool final_norm = true;     // pre-norm: a LayerNorm after the last layer of each stack
  float layer_norm_eps = 1e-6f;
  std::string activation = "relu";  // the FFN's: "relu", "swish", "gelu" (erf), "gelu-tanh"
  int vocab_size = 8000;            // the target vocabulary (joint: the source's too)
  int src_vocab_size = 0;  // the source vocabulary when it is another one; 0: the joint one
  // Token ids (-1: the vocabulary has none). The decoder starts from bos_id
  // or, with decoder_start "zero", from a zero embedding (Marian).
  int pad_id = 0, unk_id = 1, bos_id = 2, eos_id = 3;
  // A source vocabulary of its own whose unknown token has another id
  // (CTranslate2 appends one to each vocabulary lacking it); -1: unk_id.
  int src_unk_id = -1;
  std::string decoder_start = "bos";
  // What a source sentence is framed with: </s> after it (nmt, Marian), and
  // <s> before it (some CTranslate2 models have neither, or both).
  bool source_bos = false, source_eos = true;
  // Whether a search may output unk_id (Marian's never does, unless told
  // --allow-unk).
  bool output_unk = true;
  // Multilingual models (model/languages.h): each language's code and the
  // id of its token, and where the tokens go. source_language: the source's
  // token before the source ("before": M2M-100, NLLB), after it ("after":
  // NLLB's legacy order, with source_eos false and </s> before the token),
  // or nowhere ("none"). target_language: the target's token forced as the
  // output's first ("forced": M2M-100, NLLB; Transformers' forced BOS, with
  // log-probability 0), or before the source ("source": OPUS-MT's >>xxx<<).
  // Empty: one language pair.
  std::map<std::string, int> languages;
  std::string source_language = "none";
  std::string target_language = "forced";
  // The language pair of a model of one pair, by its codes ("en", "de"), as
  // a translation service routes requests by them; empty: not known.
  std::string src_lang, tgt_lang;

  // Training options that may also come from the config ("training": {...});
  // kept as JSON so that `nmt train` owns their meaning and validation.
  nlohmann::json training = nlohmann::json::object();

  // heads * d_k and heads * d_v; validation keeps them within int range.
  int qk_width() const { return heads * d_k; }
  int v_width() const { return heads * d_v; }
  bool pre_norm() const { return norm == "pre"; }
  Activation ffn_activation() const {
    return activation == "swish"       ? Activation::Swish
           : activation == "gelu"      ? Activation::Gelu
           : activation == "gelu-tanh" ? Activation::GeluTanh
                                       : Activation::Relu;
  }
  int source_vocab() const { return src_vocab_size ? src_vocab_size : vocab_size; }
  int source_unk() const { return src_unk_id >= 0 ? src_unk_id : unk_id; }
  // Tokens a source of n pieces becomes, framing included.
  int64_t source_tokens(int64_t n) const { return n + (source_bos ? 1 : 0) + (source_eos ? 1 : 0); }
  // The ids a search never outputs: padding, the start token (where they
  // are tokens and not also </s>), and <unk> unless output_unk.
  std::vector<int32_t> never_output() const {
    std::vector<int32_t> ids;
    for (int id : {pad_id, bos_id, output_unk ? -1 : unk_id})
      if (id >= 0 && id != eos_id && std::find(ids.begin(), ids.end(), id) == ids.end())
        ids.push_back(id);
    return ids;
  }
  // The decoder's first input: bos_id, or -1 (no token: a zero embedding).
  int start_token() const { return decoder_start == "zero" ? -1 : bos_id; }
};

// Parses and validates; `source` names the file in error messages. Stored
// configs (in model files) go through the same function as config files.
ModelConfig config_from_json(const nlohmann::json& j, const std::string& source);
ModelConfig load_config(const std::string& path);
// Parses config text (depth-limited, duplicate keys refused) and validates it.
ModelConfig parse_config(const std::string& text, const std::string& source);

nlohmann::json config_to_json(const ModelConfig& c);

// Resolves a config argument: a path, or the name of one in models/
// ("transformer-small" finds models/transformer-small.json).
std::string find_config(const std::string& name_or_path);

// A language's code as models and requests name it: printable ASCII
// without spaces, at most 64 bytes.
bool is_language_code(const std::string& code);

}  // namespace nmt
