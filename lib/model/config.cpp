#include "model/config.h"

#include <sys/stat.h>

#include <fstream>
#include <set>

#include "core/error.h"

namespace nmt {
namespace {

using json = nlohmann::json;

class Reader {
 public:
  Reader(const json& j, const std::string& source) : j_(j), source_(source) {}

  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    throw InputError(source_ + ": key \"" + key + "\": " + msg);
  }

  const json* find(const std::string& key, bool required) {
    seen_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) fail(key, "missing (required)");
      return nullptr;
    }
    return &*it;
  }

  void get(const std::string& key, int& out, bool required, int lo = 1) {
    if (const json* v = find(key, required)) {
      if (!v->is_number_integer())
        fail(key, "expected an integer, got " + std::string(v->type_name()));
      const auto x = v->get<int64_t>();
      if (x < lo || x > 1 << 20)
        fail(key, "expected an integer >= " + std::to_string(lo) + ", got " + std::to_string(x));
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

  void reject_unknown() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!seen_.count(it.key())) fail(it.key(), "unknown key");
  }

 private:
  const json& j_;
  std::string source_;
  std::set<std::string> seen_;
};

}  // namespace

ModelConfig config_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) throw InputError(source + ": expected a JSON object at the top level");
  ModelConfig c;
  Reader r(j, source);
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
  r.get("positional", c.positional, false, {"sinusoidal", "learned"});
  r.get("max_positions", c.max_positions, false, 2);
  r.get("tie_embeddings", c.tie_embeddings, false);
  r.get("norm", c.norm, false, {"post", "pre"});
  r.get("layer_norm_eps", c.layer_norm_eps, false, 0.f, 1.f);
  r.get("vocab_size", c.vocab_size, false, 8);
  if (const json* t = r.find("training", false)) {
    if (!t->is_object())
      r.fail("training", "expected an object, got " + std::string(t->type_name()));
    c.training = *t;
  }
  r.reject_unknown();
  return c;
}

ModelConfig load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot open config " + path);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw InputError(path + ": not valid JSON: " + e.what());
  }
  return config_from_json(j, path);
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
            {"tie_embeddings", c.tie_embeddings},
            {"norm", c.norm},
            {"layer_norm_eps", c.layer_norm_eps},
            {"vocab_size", c.vocab_size}};
  if (!c.training.empty()) j["training"] = c.training;
  return j;
}

std::string find_config(const std::string& name) {
  struct stat st;
  if (stat(name.c_str(), &st) == 0) return name;
#ifdef NMT_SOURCE_DIR
  for (const std::string& dir :
       {std::string("models/"), std::string(NMT_SOURCE_DIR) + "/models/"}) {
#else
  for (const std::string& dir : {std::string("models/")}) {
#endif
    const std::string p =
        dir + name + (name.size() > 5 && name.substr(name.size() - 5) == ".json" ? "" : ".json");
    if (stat(p.c_str(), &st) == 0) return p;
  }
  throw InputError("config not found: " + name + " (give a path, or a name from models/)");
}

}  // namespace nmt
