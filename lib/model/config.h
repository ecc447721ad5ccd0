// The model configuration: one plain struct, read from models/*.json and
// validated in one place. Unknown keys, wrong types, missing keys and
// inconsistent sizes are errors that name the file, the key and what was
// expected.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nmt {

struct ModelConfig {
  std::string name;
  int encoder_layers = 6;
  int decoder_layers = 6;
  int d_model = 512;
  int d_ff = 2048;
  int heads = 8;
  int d_k = 64;  // per head; the paper has d_k = d_v = d_model / h
  int d_v = 64;
  float dropout = 0.1f;                   // P_drop: embeddings + PE, and every sub-layer output
  float attention_dropout = 0.0f;         // on attention weights (not in the paper)
  float relu_dropout = 0.0f;              // inside the FFN (not in the paper)
  float label_smoothing = 0.1f;           // epsilon_ls
  std::string positional = "sinusoidal";  // or "learned" (Table 3 row E)
  int max_positions = 256;                // longest sequence, in subword tokens incl. EOS
  bool tie_embeddings = true;             // one matrix for source, target and pre-softmax
  std::string norm = "post";              // "post" (the paper) or "pre"
  float layer_norm_eps = 1e-6f;
  int vocab_size = 8000;  // joint SentencePiece vocabulary

  // Training options that may also come from the config ("training": {...});
  // kept as JSON so that `nmt train` owns their meaning and validation.
  nlohmann::json training = nlohmann::json::object();

  // heads * d_k and heads * d_v; validation keeps them within int range.
  int qk_width() const { return heads * d_k; }
  int v_width() const { return heads * d_v; }
  bool pre_norm() const { return norm == "pre"; }
};

// Parses and validates; `source` names the file in error messages. Stored
// configs (in model files) go through the same function as config files.
ModelConfig config_from_json(const nlohmann::json& j, const std::string& source);
ModelConfig load_config(const std::string& path);
// Parses config text (depth-limited, duplicate keys refused) and validates it.
ModelConfig parse_config(const std::string& text, const std::string& source);

// The options a config's "training" object may set (`nmt train` applies
// them, and its command line sets the same ones): each key's name and what
// its value must be.
struct TrainingKey {
  enum Kind { kInt, kNumber, kMetric, kCompute, kSchedule, kTokenizer };
  const char* name;
  Kind kind;
  double min;   // smallest allowed value
  bool strict;  // the value must exceed min
};
const std::vector<TrainingKey>& training_keys();
// Checks every key and value of a "training" object. Throws InputError
// naming `source` and the key (with cli, naming the option: --batch-tokens).
void validate_training_json(const nlohmann::json& j, const std::string& source, bool cli = false);
nlohmann::json config_to_json(const ModelConfig& c);

// Resolves a config argument: a path, or the name of one in models/
// ("transformer-small" finds models/transformer-small.json).
std::string find_config(const std::string& name_or_path);

}  // namespace nmt
