// CTranslate2's model directories: model.bin (the binary layout of
// python/ctranslate2/specs/model_spec.py, versions 1 to 6: what
// CTranslate2 4.x still loads), config.json
// and the vocabularies. A TransformerSpec's variables are named as its
// layers nest (encoder/layer_0/self_attention/linear_0/weight), matrices
// already (out, in); attributes are scalar variables. See convert.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

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

// One variable of model.bin.
struct Variable {
  std::vector<int64_t> shape;
  int type = 0;  // CTranslate2's DataType: 0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16
  std::string bytes;
  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

const char* type_name(int t) {
  static const char* names[] = {"float32", "int8", "int16", "int32", "float16", "bfloat16"};
  return t >= 0 && t < 6 ? names[t] : "unknown";
}
int type_size(int t) {
  static const int sizes[] = {4, 1, 2, 4, 2, 2};
  return t >= 0 && t < 6 ? sizes[t] : 0;
}

// Reads model.bin, every length checked against what is left.
class Reader {
 public:
  Reader(std::string bytes, std::string path) : b_(std::move(bytes)), path_(std::move(path)) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  // A name: its length with the terminating NUL, then its bytes and the
  // NUL, which must be there (a damaged file must not lose a byte silently)
  // and be the only one (CTranslate2 reads a name as a C string).
  std::string str() {
    const uint16_t n = get<uint16_t>();
    if (n == 0) fail("a string of length 0");
    need(n);
    std::string s(b_.data() + at_, n - 1);
    if (b_[at_ + n - 1] != '\0')
      fail("a string without its terminating NUL (\"" + s + b_[at_ + n - 1] + "\")");
    if (s.find('\0') != std::string::npos) fail("a string holding a NUL byte (\"" + s + "\")");
    at_ += n;
    return s;
  }
  std::string bytes(uint64_t n) {
    need(n);
    std::string s(b_.data() + at_, n);
    at_ += n;
    return s;
  }
  bool done() const { return at_ == b_.size(); }
  [[noreturn]] void fail(const std::string& why) const {
    throw InputError(path_ + ": not a readable CTranslate2 model: " + why + " at byte " +
                     std::to_string(at_));
  }

 private:
  void need(uint64_t n) const {
    if (n > b_.size() - at_) fail("truncated");
  }
  std::string b_;
  std::string path_;
  size_t at_ = 0;
};

// A version 1 variable's name, which was OpenNMT-tf's, as CTranslate2 maps
// it (models/transformer.cc): the first match of each pattern replaced.
std::string v1_name(std::string name) {
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = name.find(from);
    if (at != std::string::npos) name.replace(at, from.size(), to);
  };
  replace("transformer/", "");
  replace(":0", "");
  replace("w_embs", "embeddings/weight");
  replace("kernel", "weight");
  replace("LayerNorm", "layer_norm");
  replace("dense", "projection");
  replace("conv1d_", "linear_");
  replace("conv1d", "linear_0");
  if (name.find("encoder") != std::string::npos) {
    replace("multi_head", "self_attention");
  } else {
    replace("masked_multi_head", "self_attention");
    replace("multi_head", "attention");
  }
  return name;
}

class Model {
 public:
  explicit Model(const std::string& dir) : path_((fs::path(dir) / "model.bin").string()) {
    Reader r(io::read_whole_file(path_, "CTranslate2 model"), path_);
    version_ = r.get<uint32_t>();
    if (version_ < 1 || version_ > 6)
      throw InputError(path_ + ": CTranslate2 binary version " + std::to_string(version_) +
                       " (this nmt reads versions 1 to 6, written by CTranslate2 1.x to 4.x)");
    // Version 1 has neither a spec's name nor a revision: revision 1.
    if (version_ >= 2) {
      spec_ = r.str();
      revision_ = r.get<uint32_t>();
    } else {
      revision_ = 1;
    }
    const uint32_t n = r.get<uint32_t>();
    for (uint32_t i = 0; i < n; ++i) {
      std::string name = revision_ == 1 ? v1_name(r.str()) : r.str();
      Variable v;
      const uint8_t rank = r.get<uint8_t>();
      if (rank > 8) r.fail("variable " + name + " of rank " + std::to_string(rank));
      uint64_t count = 1;
      for (uint8_t k = 0; k < rank; ++k) {
        v.shape.push_back(r.get<uint32_t>());
        if (__builtin_mul_overflow(count, static_cast<uint64_t>(v.shape.back()), &count) ||
            count > (uint64_t{1} << 40))
          r.fail("variable " + name + " of an impossibly large shape");
      }
      uint64_t bytes;
      if (version_ >= 4) {
        v.type = r.get<uint8_t>();
        bytes = r.get<uint32_t>();
      } else {  // before 4: an item's size, then the count (4: f32, 2: i16, 1: i8)
        const uint8_t item = r.get<uint8_t>();
        v.type = item == 4 ? 0 : item == 2 ? 2 : item == 1 ? 1 : -1;
        bytes = uint64_t{r.get<uint32_t>()} * item;
      }
      if (type_size(v.type) == 0) r.fail("variable " + name + " of unknown type");
      if (count * static_cast<uint64_t>(type_size(v.type)) != bytes)
        r.fail("variable " + name + " whose size does not match its shape");
      v.bytes = r.bytes(bytes);
      // CTranslate2's converter writes each variable of its spec once.
      if (!vars_.emplace(name, std::move(v)).second) r.fail("variable " + name + " given twice");
    }
    const uint32_t aliases = version_ >= 3 ? r.get<uint32_t>() : 0;  // since version 3
    std::set<std::string> given;
    for (uint32_t i = 0; i < aliases; ++i) {
      std::string alias = r.str(), target = r.str();
      if (vars_.count(alias) || !given.insert(alias).second)
        r.fail("alias " + alias + " given twice, or also a variable");
      // CTranslate2 quantises after aliasing and skips aliases, so a tied
      // int8 weight's scale exists under the target's name only; its own
      // loader aliases the scale (and zero point) along with the weight.
      for (const char* suffix : {"_scale", "_zero"})
        if (!vars_.count(alias + suffix)) aliases_[alias + suffix] = target + suffix;
      aliases_[alias] = std::move(target);
    }
    if (!r.done()) r.fail("trailing bytes");
    // Before revision 5 the encoder's and decoder's attributes were one,
    // unscoped: aliased as CTranslate2 aliases them (encoder/pre_norm to
    // pre_norm).
    if (revision_ < 5)
      for (const char* a : {"num_heads", "pre_norm", "activation", "embeddings_merge",
                            "alignment_layer", "alignment_heads"})
        if (vars_.count(a))
          for (const char* side : {"encoder/", "decoder/"})
            if (!vars_.count(side + std::string(a))) aliases_[side + std::string(a)] = a;
  }

  const std::string& path() const { return path_; }
  const std::string& spec() const { return spec_; }
  uint32_t revision() const { return revision_; }
  bool has(const std::string& n) const { return find(n) != nullptr; }

  const Variable* find(const std::string& n) const {
    auto a = aliases_.find(n);
    const std::string& name = a == aliases_.end() ? n : a->second;
    auto it = vars_.find(name);
    return it == vars_.end() ? nullptr : &it->second;
  }
  // The type of a variable, -1 if absent.
  int type_of(const std::string& n) const {
    const Variable* v = find(n);
    return v ? v->type : -1;
  }
  // A scalar attribute (int8 flags, int16/int32 counts, f32 values).
  double scalar(const std::string& n, double fallback) const {
    const Variable* v = find(n);
    if (!v) return fallback;
    used_.insert(n);
    if (v->size() != 1) throw InputError(path_ + ": attribute " + n + " is not a scalar");
    switch (v->type) {
      case 0: {
        float f;
        std::memcpy(&f, v->bytes.data(), 4);
        return f;
      }
      case 1:
        return static_cast<int8_t>(v->bytes[0]);
      case 2: {
        int16_t x;
        std::memcpy(&x, v->bytes.data(), 2);
        return x;
      }
      case 3: {
        int32_t x;
        std::memcpy(&x, v->bytes.data(), 4);
        return x;
      }
    }
    throw InputError(path_ + ": attribute " + n + " has type " + type_name(v->type));
  }
  // A weight as f32 with this shape: int8 and int16 times their
  // "NAME_scale" (one per row, or one), f16 and bf16 widened.
  std::vector<float> weight(const std::string& n, const std::vector<int64_t>& shape) const {
    const Variable* v = find(n);
    if (!v) throw InputError(path_ + ": the model has no variable " + n);
    used_.insert(n);
    if (v->shape != shape)
      throw InputError(path_ + ": variable " + n + " has shape " + shape_text(v->shape) +
                       ", expected " + shape_text(shape));
    const int64_t count = v->size();
    std::vector<float> out(static_cast<size_t>(count));
    const char* p = v->bytes.data();
    switch (v->type) {
      case 0:
        copy_bytes(out.data(), p, out.size() * 4);
        break;
      case 4:
        widen_f16(p, count, out.data());
        break;
      case 5:
        for (int64_t i = 0; i < count; ++i) {
          uint16_t h;
          std::memcpy(&h, p + 2 * i, 2);
          out[i] = bf16_to_float(h);
        }
        break;
      case 1:
      case 2: {
        // CTranslate2 quantises value * scale and rounds: the weight is
        // value / scale, with a scale per output row (int8) or one (int16).
        const Variable* s = find(n + "_scale");
        // An int16 weight without a scale has CTranslate2's fixed one
        // (ops::Quantize::global_int16_scale), as early models were saved.
        if (!s && v->type != 2)
          throw InputError(path_ + ": quantised variable " + n + " has no " + n + "_scale");
        if (s) used_.insert(n + "_scale");
        const int64_t rows = shape.empty() ? 1 : shape[0],
                      cols = count / std::max<int64_t>(rows, 1);
        std::vector<float> scale = s ? as_f32(*s, n + "_scale") : std::vector<float>{1000.f};
        if (scale.size() != 1 && static_cast<int64_t>(scale.size()) != rows)
          throw InputError(path_ + ": " + n + "_scale has " + std::to_string(scale.size()) +
                           " values for " + std::to_string(rows) + " rows");
        for (size_t r = 0; r < scale.size(); ++r)
          if (!std::isfinite(scale[r]) || scale[r] == 0)
            throw InputError(path_ + ": variable " + n + "_scale holds " +
                             std::to_string(scale[r]) + " at element " + std::to_string(r) +
                             " (a scale must be finite and not 0)");
        for (int64_t i = 0; i < count; ++i) {
          const float q = v->type == 1 ? static_cast<float>(static_cast<int8_t>(p[i])) : [&] {
            int16_t x;
            std::memcpy(&x, p + 2 * i, 2);
            return static_cast<float>(x);
          }();
          out[i] = q / scale[scale.size() == 1 ? 0 : i / cols];
        }
        break;
      }
      default:
        throw InputError(path_ + ": variable " + n + " has type " + type_name(v->type));
    }
    check_finite(out, path_ + ": variable " + n);
    return out;
  }
  // The variables nothing read, directly or through an alias.
  std::vector<std::string> unused() const {
    std::set<const Variable*> read;
    for (const std::string& n : used_) read.insert(find(n));
    std::vector<std::string> out;
    for (const auto& [n, v] : vars_)
      if (!read.count(&v)) out.push_back(n);
    return out;
  }

 private:
  std::vector<float> as_f32(const Variable& v, const std::string& n) const {
    if (v.type != 0)
      throw InputError(path_ + ": " + n + " is " + type_name(v.type) + ", not float32");
    std::vector<float> out(static_cast<size_t>(v.size()));
    copy_bytes(out.data(), v.bytes.data(), out.size() * 4);
    return out;
  }
  std::string path_, spec_;
  uint32_t version_ = 0, revision_ = 0;
  std::map<std::string, Variable> vars_;
  std::map<std::string, std::string> aliases_;
  mutable std::set<std::string> used_;
};

// A vocabulary file: a JSON list of tokens, or one token per line.
std::vector<std::string> read_tokens(const std::string& path) {
  const std::string text = io::read_whole_file(path, "vocabulary");
  std::vector<std::string> out;
  const bool json_list = fs::path(path).extension() == ".json";
  if (json_list) {
    const json j = io::parse_json(text, path);
    if (!j.is_array()) throw InputError(path + ": expected a JSON list of tokens");
    for (const json& t : j) {
      if (!t.is_string())
        throw InputError(path + ": token " + std::to_string(out.size()) + " is a " +
                         t.type_name() + ", expected a string");
      out.push_back(t.get<std::string>());
    }
  } else {
    out = token_lines(text, /*first_field=*/false);
  }
  check_tokens(out, path, /*one_per_line=*/!json_list);
  return out;
}

std::string find_vocab(const fs::path& dir, const std::string& stem) {
  for (const char* ext : {".json", ".txt"}) {
    const fs::path p = dir / (stem + ext);
    std::error_code ec;
    if (fs::exists(p, ec)) return p.string();
  }
  return "";
}

// CTranslate2's own position encodings where a model stores none
// (layers/common.cc): sines then cosines, for positions from 1.
std::vector<float> ct2_sinusoids(int64_t rows, int64_t depth) {
  const float inc = std::log(10000.f) / static_cast<float>(depth / 2 - 1);
  std::vector<float> t(static_cast<size_t>(rows * depth));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < depth / 2; ++j) {
      const float ts = std::exp(-inc * static_cast<float>(j));
      const float x = static_cast<float>(i + 1) * ts;
      t[i * depth + j] = std::sin(x);
      t[i * depth + depth / 2 + j] = std::cos(x);
    }
  return t;
}


InputError refusal(const Model& m, const std::string& what, const std::string& why) {
  return InputError(m.path() + ": CTranslate2 " + what + ": " + why);
}

// Refuses, by name, a spec or an attribute that names a model nmt does not
// have; reads the attributes that only explain.
void check_supported(Model& m) {
  // "", TransformerBase and TransformerBig: versions 1 and 2's names of it.
  if (m.spec() != "TransformerSpec" && m.spec() != "TransformerBase" &&
      m.spec() != "TransformerBig" && !m.spec().empty())
    throw refusal(m, "spec " + m.spec(),
                  "only a TransformerSpec (an encoder-decoder Transformer) converts");
  for (const char* side : {"encoder", "decoder"}) {
    const std::string s = side;
    for (const char* flag : {"alibi", "multi_query_attention", "parallel_residual",
                             "shared_layer_norm", "rotary_interleave"})
      if (m.scalar(s + "/" + flag, 0) != 0)
        throw refusal(m, s + "/" + flag + " true", "not supported");
    for (const char* layer : {"layernorm_embedding", "project_in", "project_out"})
      if (m.has(s + "/" + layer + "/gamma") || m.has(s + "/" + layer + "/weight"))
        throw refusal(m, s + "/" + layer, "nmt's Transformer has no such layer");
    if (m.has(s + "/layer_0/self_attention/relative_position_keys") ||
        m.has(s + "/layer_0/self_attention/relative_attention_bias"))
      throw refusal(m, s + " relative positions", "nmt has absolute positions only");
    if (m.has(s + "/embeddings_1/weight"))
      throw refusal(m, s + "/embeddings_1",
                    "several source embeddings (features) are not supported");
  }
  // Read only to be known: meaningless without ALiBi, or only explaining
  // (the alignment head).
  m.scalar("decoder/alibi_use_positive_positions", 0);
  m.scalar("decoder/scale_alibi", 0);
  m.scalar("decoder/alignment_layer", -1);
  m.scalar("decoder/alignment_heads", 1);
  m.scalar("encoder/embeddings_merge", 0);
}

// A size the model takes from a shape, checked against nmt's limits before
// any tensor is built from it.
int64_t size_of(const Model& m, const Variable* v, const std::string& name, size_t axis,
                const char* what) {
  if (v->shape.size() != 2)
    throw InputError(m.path() + ": variable " + name + " has rank " +
                     std::to_string(v->shape.size()) + ", expected 2");
  const int64_t x = v->shape[axis];
  if (x < 1 || x > kMaxModelSize)
    throw InputError(m.path() + ": variable " + name + " has shape " + shape_text(v->shape) +
                     ": its " + what + " must be from 1 to " + std::to_string(kMaxModelSize));
  return x;
}

// Whether a side's embeddings are scaled by sqrt(D), as CTranslate2's
// build_embeddings_scale reads it: absent or an int8 flag set, times
// sqrt(depth); an int8 0 or a float 1, unscaled; another float, that factor
// (which nmt has only as sqrt(depth)).
bool embeddings_scaled(Model& m, const std::string& side, const std::string& emb, int64_t D) {
  std::string n = side + "/scale_embeddings";
  if (!m.has(n)) n = emb + "/multiply_by_sqrt_depth";
  if (!m.has(n)) return true;
  const double v = m.scalar(n, 1);
  if (m.type_of(n) == 1) return v != 0;
  if (v == 1) return false;
  if (std::abs(v - std::sqrt(static_cast<double>(D))) < 1e-4) return true;
  throw refusal(m, n + " " + std::to_string(v), "nmt scales embeddings by sqrt(d_model) or not at all");
}

// The architecture: norms, activation, heads, widths and layer counts.
// src_emb: the source embedding's scope; Vs, Vt: the vocabularies' rows.
ModelConfig read_architecture(Model& m, const std::string& src, const ConfigJson& config,
                              std::string& src_emb, int64_t& Vs, int64_t& Vt) {
  const int enc_pre = static_cast<int>(m.scalar("encoder/pre_norm", 1)),
            dec_pre = static_cast<int>(m.scalar("decoder/pre_norm", 1));
  if (enc_pre != dec_pre) throw refusal(m, "pre_norm", "the encoder and decoder differ");
  const int act_e = static_cast<int>(m.scalar("encoder/activation", 0)),
            act_d = static_cast<int>(m.scalar("decoder/activation", 0));
  if (act_e != act_d) throw refusal(m, "activation", "the encoder and decoder differ");
  static const char* acts[] = {"relu", "gelu-tanh", "swish", "gelu"};
  if (act_e < 0 || act_e > 3)
    throw refusal(m, "activation " + std::to_string(act_e),
                  "nmt has ReLU, GELU (erf and tanh) and swish (GELUSigmoid, Tanh, Sigmoid not)");
  // Before revision 3 the heads came from the spec's name.
  const int spec_heads = m.spec() == "TransformerBig" ? 16 : 8;
  const int heads_e = static_cast<int>(m.scalar("encoder/num_heads", spec_heads)),
            heads_d = static_cast<int>(m.scalar("decoder/num_heads", spec_heads));
  if (heads_e != heads_d) throw refusal(m, "num_heads", "the encoder and decoder differ");
  // Sizes from the embeddings and the layers present.
  const Variable* se = m.find("encoder/embeddings_0/weight");
  if (!se) se = m.find("encoder/embeddings/weight");
  const Variable* te = m.find("decoder/embeddings/weight");
  if (!se || !te) throw InputError(m.path() + ": the model has no encoder and decoder embeddings");
  src_emb = m.has("encoder/embeddings_0/weight") ? "encoder/embeddings_0" : "encoder/embeddings";
  const int64_t D = size_of(m, te, "decoder/embeddings/weight", 1, "width (d_model)");
  Vs = size_of(m, se, src_emb + "/weight", 0, "rows (the source vocabulary)");
  Vt = size_of(m, te, "decoder/embeddings/weight", 0, "rows (the target vocabulary)");
  auto count_layers = [&](const std::string& side) {
    int n = 0;
    while (m.has(side + "/layer_" + std::to_string(n) + "/ffn/linear_0/weight")) ++n;
    return n;
  };
  ModelConfig c;
  c.name = "ctranslate2:" + fs::path(src).filename().string();
  c.encoder_layers = count_layers("encoder");
  c.decoder_layers = count_layers("decoder");
  if (!c.encoder_layers || !c.decoder_layers)
    throw InputError(m.path() + ": the model has no encoder or no decoder layers");
  c.d_model = static_cast<int>(D);
  c.d_ff = static_cast<int>(size_of(m, m.find("encoder/layer_0/ffn/linear_0/weight"),
                                    "encoder/layer_0/ffn/linear_0/weight", 0, "rows (d_ff)"));
  c.heads = heads_e;
  if (c.heads <= 0 || D % c.heads) throw refusal(m, "num_heads", "d_model is not a multiple of it");
  c.d_k = c.d_v = static_cast<int>(D / c.heads);
  c.dropout = 0.f;
  c.norm = enc_pre ? "pre" : "post";
  c.final_norm = enc_pre && m.has("encoder/layer_norm/gamma");
  if (enc_pre && m.has("encoder/layer_norm/gamma") != m.has("decoder/layer_norm/gamma"))
    throw refusal(m, "layer_norm", "only one of the encoder and the decoder has a final layer norm");
  c.activation = acts[act_e];
  // CTranslate2's default for a norm with a bias.
  c.layer_norm_eps = static_cast<float>(config.fraction("layer_norm_epsilon", 1e-5));
  const bool scale_e = embeddings_scaled(m, "encoder", src_emb, D),
             scale_d = embeddings_scaled(m, "decoder", "decoder/embeddings", D);
  if (scale_e != scale_d)
    throw refusal(m, "scale_embeddings", "nmt scales both embeddings by sqrt(d_model), or neither");
  c.scale_embeddings = scale_e;
  if (m.has("decoder/scale_outputs")) throw refusal(m, "decoder/scale_outputs", "not supported");
  return c;
}

struct Ct2Vocabs {
  std::string sv, tv;                   // their files
  std::vector<std::string> src, tgt;  // their tokens
};

// The vocabularies (shared, or source and target), checked against the
// embeddings' rows.
Ct2Vocabs read_vocabularies(const fs::path& dir, const std::string& src, int64_t Vs, int64_t Vt,
                            const std::string& unk) {
  Ct2Vocabs v;
  v.sv = v.tv = find_vocab(dir, "shared_vocabulary");
  if (v.sv.empty()) {
    v.sv = find_vocab(dir, "source_vocabulary");
    v.tv = find_vocab(dir, "target_vocabulary");
  }
  if (v.sv.empty() || v.tv.empty())
    throw InputError(src +
                     ": no vocabulary (shared_vocabulary, or source_vocabulary and "
                     "target_vocabulary, .json or .txt)");
  v.src = read_tokens(v.sv);
  v.tgt = v.tv == v.sv ? v.src : read_tokens(v.tv);
  // CTranslate2 appends the unknown token to a vocabulary without it (as
  // OpenNMT-tf's vocabularies are).
  for (auto* t : {&v.src, &v.tgt})
    if (id_of(*t, unk) < 0) t->push_back(unk);
  if (static_cast<int64_t>(v.src.size()) != Vs)
    throw InputError(v.sv + ": " + std::to_string(v.src.size()) +
                     " tokens for a source embedding of " + std::to_string(Vs) + " rows");
  if (static_cast<int64_t>(v.tgt.size()) != Vt)
    throw InputError(v.tv + ": " + std::to_string(v.tgt.size()) +
                     " tokens for a target embedding of " + std::to_string(Vt) + " rows");
  return v;
}

// The special tokens' ids and how sources are framed and decoding starts.
void set_special_tokens(Model& m, const ConfigJson& config, const Ct2Vocabs& v, ModelConfig& c) {
  const std::string unk = config.text("unk_token", "<unk>"),
                    bos = config.text("bos_token", "<s>"), eos = config.text("eos_token", "</s>");
  const bool zero_start = m.scalar("decoder/start_from_zero_embedding", 0) != 0;
  const std::string start = config.text_or_null("decoder_start_token", bos.c_str());
  c.vocab_size = static_cast<int>(v.tgt.size());
  c.src_vocab_size = v.src == v.tgt ? 0 : static_cast<int>(v.src.size());
  c.eos_id = id_of(v.tgt, eos);
  c.unk_id = id_of(v.tgt, unk);
  if (id_of(v.src, unk) != c.unk_id) c.src_unk_id = id_of(v.src, unk);
  c.pad_id = -1;  // CTranslate2 bans no token from its output
  if (c.eos_id < 0) throw InputError(v.tv + ": the vocabulary has no " + eos + " (eos_token)");
  c.source_bos = config.flag("add_source_bos", false);
  c.source_eos = config.flag("add_source_eos", false);
  if (zero_start) {
    c.decoder_start = "zero";
    c.bos_id = c.source_bos ? id_of(v.tgt, bos) : -1;
  } else {
    if (start.empty()) throw refusal(m, "decoder_start_token null", "the decoder needs a start");
    c.bos_id = id_of(v.tgt, start);
    if (c.bos_id < 0)
      throw InputError(v.tv + ": the vocabulary has no " + start + " (decoder_start_token)");
    if (c.source_bos && start != bos)
      throw refusal(m, "add_source_bos", "nmt's source <s> is the decoder's start token (" +
                                             start + " here, bos_token " + bos + ")");
  }
  if ((c.source_bos && id_of(v.src, bos) != c.bos_id) ||
      (c.source_eos && id_of(v.src, eos) != c.eos_id))
    throw InputError(v.sv + ": the source's " + (c.source_bos ? bos : eos) +
                     " has another id than the target's");
}

// Position encodings (stored, else CTranslate2's computed ones; a table)
// and which embeddings are one.
void set_positions_and_ties(Model& m, const std::string& src_emb, ModelConfig& c) {
  const int64_t D = c.d_model;
  c.positional = "learned";
  c.max_positions = 1024;
  for (const char* n :
       {"encoder/position_encodings/encodings", "decoder/position_encodings/encodings"})
    if (const Variable* pe = m.find(n)) {
      if (pe->shape.size() != 2 || pe->shape[1] != D || pe->shape[0] < 2)
        throw InputError(m.path() + ": variable " + std::string(n) + " has shape " +
                         shape_text(pe->shape) + ", expected (positions, " + std::to_string(D) +
                         ")");
      c.max_positions = static_cast<int>(std::min<int64_t>(pe->shape[0], 1 << 16));
    }
  if (m.has("encoder/position_encodings/encodings") &&
      m.has("decoder/position_encodings/encodings"))
    c.max_positions = static_cast<int>(
        std::min({m.find("encoder/position_encodings/encodings")->shape[0],
                  m.find("decoder/position_encodings/encodings")->shape[0], int64_t{1} << 16}));
  const bool tied_all =
      c.src_vocab_size == 0 && m.find(src_emb + "/weight") == m.find("decoder/embeddings/weight");
  const bool proj_is_emb =
      m.find("decoder/projection/weight") == m.find("decoder/embeddings/weight");
  c.tie_embeddings = tied_all && proj_is_emb;
  c.tie_output = !c.tie_embeddings && proj_is_emb;
  c.output_bias = m.has("decoder/projection/bias");
}

// Every weight, under nmt's names; a variable left over is refused.
void copy_weights(Model& m, const ModelConfig& c, const std::string& src_emb, int64_t Vs,
                  int64_t Vt, std::map<std::string, std::vector<float>>& w) {
  const int64_t D = c.d_model, F = c.d_ff;
  auto positions = [&](const std::string& side) {
    const std::string n = side + "/position_encodings/encodings";
    if (m.has(n)) {
      std::vector<float> t = m.weight(n, m.find(n)->shape);
      t.resize(static_cast<size_t>(c.max_positions * D));
      return t;
    }
    return ct2_sinusoids(c.max_positions, D);
  };
  w["encoder/embed/positions"] = positions("encoder");
  w["decoder/embed/positions"] = positions("decoder");
  if (c.tie_embeddings) {
    w["embed/tokens"] = m.weight("decoder/embeddings/weight", {Vt, D});
    m.weight(src_emb + "/weight", {Vs, D});
  } else {
    w["encoder/embed/tokens"] = m.weight(src_emb + "/weight", {Vs, D});
    w["decoder/embed/tokens"] = m.weight("decoder/embeddings/weight", {Vt, D});
    if (!c.tie_output) w["decoder/output/weight"] = m.weight("decoder/projection/weight", {Vt, D});
  }
  if (c.output_bias) w["decoder/output/bias"] = m.weight("decoder/projection/bias", {Vt});
  auto linear = [&](const std::string& to, const std::string& from, int64_t out_dim,
                    int64_t in_dim) {
    w[to + "/weight"] = m.weight(from + "/weight", {out_dim, in_dim});
    w[to + "/bias"] = m.has(from + "/bias") ? m.weight(from + "/bias", {out_dim})
                                            : std::vector<float>(static_cast<size_t>(out_dim), 0.f);
  };
  auto norm = [&](const std::string& to, const std::string& from) {
    // Without a beta CTranslate2's layer is an RMSNorm, which nmt has not.
    if (m.has(from + "/gamma") && !m.has(from + "/beta"))
      throw refusal(m, from + " (no beta)", "an RMS norm; nmt has layer normalisation only");
    w[to + "/gamma"] = m.weight(from + "/gamma", {D});
    w[to + "/beta"] = m.weight(from + "/beta", {D});
  };
  // CTranslate2 scopes its layers as nmt names them (encoder/layer_0/...).
  for (int l = 0; l < c.encoder_layers + c.decoder_layers; ++l) {
    const bool dec = l >= c.encoder_layers;
    const std::string to = std::string(dec ? "decoder" : "encoder") + "/layer_" +
                           std::to_string(dec ? l - c.encoder_layers : l),
                      &from = to;
    linear(to + "/self_attn/qkv", from + "/self_attention/linear_0", 3 * D, D);
    linear(to + "/self_attn/out", from + "/self_attention/linear_1", D, D);
    norm(to + "/ln1", from + "/self_attention/layer_norm");
    if (dec) {
      linear(to + "/cross_attn/q", from + "/attention/linear_0", D, D);
      linear(to + "/cross_attn/kv", from + "/attention/linear_1", 2 * D, D);
      linear(to + "/cross_attn/out", from + "/attention/linear_2", D, D);
      norm(to + "/ln2", from + "/attention/layer_norm");
    }
    linear(to + "/ffn/w1", from + "/ffn/linear_0", F, D);
    linear(to + "/ffn/w2", from + "/ffn/linear_1", D, F);
    norm(to + (dec ? "/ln3" : "/ln2"), from + "/ffn/layer_norm");
  }
  if (c.final_norm) {
    norm("encoder/final_ln", "encoder/layer_norm");
    norm("decoder/final_ln", "decoder/layer_norm");
  }
  for (const std::string& n : m.unused())
    throw InputError(m.path() + ": variable " + n +
                     " belongs to nothing nmt's Transformer has (not converted)");
}

// Tokenisation: a SentencePiece model given (one for both sides, or the
// source's and the target's), else space-separated tokens.
std::vector<std::string> attach_vocabs(const Ct2Vocabs& v, const ModelConfig& c,
                                       const ConvertOptions& opts, Imported& out) {
  const std::vector<std::string> spm = spm_pair(opts.spm);
  if (spm.size() > 2)
    throw InputError(
        "{spm}: give one SentencePiece model for both sides, or the source's and "
        "the target's");
  const std::string src_spm = spm.empty() ? "" : io::read_whole_file(spm[0], "{spm}"),
                    tgt_spm = spm.empty() ? "" : io::read_whole_file(spm[1], "{spm}");
  out.vocab = Vocab::from_tokens(v.tgt, tgt_spm, c.unk_id, tgt_spm.empty() ? "" : spm[1]);
  if (c.src_vocab_size || src_spm != tgt_spm)
    out.source_vocab =
        Vocab::from_tokens(v.src, src_spm, c.source_unk(), src_spm.empty() ? "" : spm[0]);
  if (!tgt_spm.empty()) check_tokeniser(out.vocab, spm[1], v.tv, out);
  if (out.source_vocab && !src_spm.empty()) check_tokeniser(*out.source_vocab, spm[0], v.sv, out);
  return spm;
}

}  // namespace

Imported import_ctranslate2(const std::string& src, const ConvertOptions& opts) {
  const fs::path dir = src;
  Model m(src);
  check_supported(m);
  const ConfigJson config = ConfigJson::read(dir / "config.json", /*required=*/false);
  std::string src_emb;
  int64_t Vs = 0, Vt = 0;
  ModelConfig c = read_architecture(m, src, config, src_emb, Vs, Vt);
  const Ct2Vocabs vocabs = read_vocabularies(dir, src, Vs, Vt, config.text("unk_token", "<unk>"));
  set_special_tokens(m, config, vocabs, c);
  set_positions_and_ties(m, src_emb, c);
  // The whole configuration is checked before any weight is built from it.
  config_from_json(config_to_json(c), m.path() + " (converted config)");
  Imported out;
  copy_weights(m, c, src_emb, Vs, Vt, out.weights);
  const std::vector<std::string> spm = attach_vocabs(vocabs, c, opts, out);
  out.config = c;
  out.provenance = {
      {"tool", "ctranslate2"},
      {"source", src},
      {"spec_revision", m.revision()},
      {"sentencepiece", spm},
      {"config", config.raw()},
      {"summary", "from CTranslate2 (" + m.spec() + " revision " + std::to_string(m.revision()) +
                      "), " +
                      (spm.empty() ? "space-separated tokens"
                                   : "SentencePiece " + fs::path(spm[0]).filename().string())}};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) out.read_from.push_back(e.path().string());
  out.read_from.insert(out.read_from.end(), spm.begin(), spm.end());
  return out;
}

}  // namespace nmt::convert
