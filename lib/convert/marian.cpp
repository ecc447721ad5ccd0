// Marian's transformer (src/models/transformer.h), as its .npz files hold
// it: parameters named encoder_l1_self_Wq and so on, matrices stored
// (in, out), the options in "special:model.yml" (or in MODEL.npz.yml beside
// it). See convert.h.
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "convert/convert.h"
#include "convert/formats.h"
#include "convert/npz.h"
#include "core/error.h"
#include "io/text_file.h"

namespace nmt::convert {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Marian's options as YAML: a few KB.
constexpr uint64_t kMaxYaml = 1 << 24;

// YAML text as a node; errors name the source and where in it.
YAML::Node load_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    throw InputError(source + ": not readable YAML: line " + std::to_string(e.mark.line + 1) +
                     ", column " + std::to_string(e.mark.column + 1) +
                     ": collections nested too deep for yaml-cpp");
  } catch (const YAML::Exception& e) {
    throw InputError(source + ": not readable YAML: line " + std::to_string(e.mark.line + 1) +
                     ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

// Marian's options, read from its YAML with the defaults Marian has.
class Options {
 public:
  Options(YAML::Node n, std::string source) : n_(std::move(n)), source_(std::move(source)) {}

  bool has(const std::string& k) const { return n_[k].IsDefined() && !n_[k].IsNull(); }
  template <typename T>
  T get(const std::string& k, const T& fallback) const {
    if (!has(k)) return fallback;
    try {
      return n_[k].as<T>();
    } catch (const YAML::Exception&) {
      throw InputError(source_ + ": Marian option " + k + " has an unexpected value: " + dump(k));
    }
  }
  std::string dump(const std::string& k) const {
    if (!has(k)) return "(not set)";
    YAML::Emitter e;
    e << YAML::Flow << n_[k];
    return e.c_str();
  }
  // The one-line refusal: the option, its value, and why.
  [[noreturn]] void refuse(const std::string& k, const std::string& why) const {
    throw InputError(source_ + ": Marian option --" + k + " " + dump(k) + ": " + why);
  }

 private:
  YAML::Node n_;
  std::string source_;
};

// The tokens of a Marian vocabulary in id order: a YAML or JSON map of
// token to id (vocab.yml), a SentencePiece model (its pieces), or a list of
// one token per line (SentencePiece's .vocab, first field).
std::vector<std::string> vocab_tokens(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".spm" || ext == ".model") {  // a SentencePiece model: its own ids
    std::vector<std::string> pieces =
        Vocab::sentencepiece_pieces(io::read_whole_file(path, "vocabulary"), path);
    check_tokens(pieces, path, /*one_per_line=*/false);
    return pieces;
  }
  const std::string text = io::read_whole_file(path, "vocabulary");
  std::vector<std::string> out;
  if (ext == ".yml" || ext == ".yaml" || ext == ".json") {
    const YAML::Node n = load_yaml(text, path);
    if (!n.IsMap()) throw InputError(path + ": expected a map of token to id");
    std::vector<std::pair<int64_t, std::string>> ids;
    for (const auto& kv : n) {
      if (!kv.first.IsScalar())
        throw InputError(path + " line " + std::to_string(kv.first.Mark().line + 1) +
                         ": a key that is not a token (a YAML " +
                         (kv.first.IsSequence() ? "list" : "map or null") + ")");
      int64_t id;
      try {
        id = kv.second.as<int64_t>();
      } catch (const YAML::Exception&) {
        throw InputError(path + ": the id of \"" + kv.first.Scalar() + "\" is not an integer");
      }
      if (id < 0 || id > (1 << 24))
        throw InputError(path + ": id " + std::to_string(id) + " is out of range");
      ids.push_back({id, kv.first.Scalar()});
    }
    std::sort(ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i].first != static_cast<int64_t>(i))
        throw InputError(path + ": ids are not 0.." + std::to_string(ids.size() - 1) + " (id " +
                         std::to_string(i) + " is " +
                         (ids[i].first > static_cast<int64_t>(i) ? "missing" : "given twice") +
                         ")");
      out.push_back(ids[i].second);
    }
    check_tokens(out, path, /*one_per_line=*/false);
    return out;
  }
  out = token_lines(text, /*first_field=*/true);
  check_tokens(out, path, /*one_per_line=*/true);
  return out;
}

// Where the pieces are: the model, its vocabularies and SentencePiece models.
struct Files {
  std::string npz;
  std::vector<std::string> vocabs;  // source, target
  std::vector<std::string> spms;    // source, target, or none
};

Files locate(const std::string& src, const ConvertOptions& opts, const Options* decoder_yml) {
  Files f;
  fs::path dir;
  std::error_code ec;
  if (fs::is_directory(src, ec)) {
    dir = src;
    std::vector<std::string> npz;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".npz") npz.push_back(e.path().string());
    std::sort(npz.begin(), npz.end());
    if (npz.empty()) throw InputError(src + ": the directory holds no Marian .npz model");
    if (npz.size() > 1)
      throw InputError(src + ": the directory holds " + std::to_string(npz.size()) +
                       " .npz models (" + npz[0] + ", " + npz[1] + (npz.size() > 2 ? ", ..." : "") +
                       "): give the one to convert");
    f.npz = npz[0];
  } else {
    f.npz = src;
    dir = fs::path(src).parent_path();
  }
  auto in_dir = [&](const std::string& name) {
    return (dir.empty() ? fs::path(name) : dir / name).string();
  };
  auto exists = [&](const std::string& p) { return fs::exists(p, ec); };
  f.vocabs = opts.vocab;
  if (f.vocabs.empty() && decoder_yml && decoder_yml->has("vocabs")) {
    // decoder.yml names them relative to the model's directory (OPUS-MT's
    // do), else where they were when it was written.
    for (const std::string& v : decoder_yml->get<std::vector<std::string>>("vocabs", {})) {
      const std::string rel = fs::path(v).is_absolute() ? v : in_dir(v);
      const std::string here = in_dir(fs::path(v).filename().string());
      f.vocabs.push_back(exists(rel) ? rel : exists(v) ? v : here);
    }
  }
  if (f.vocabs.empty())
    for (const auto& e : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() >= 9 && name.compare(name.size() - 9, 9, "vocab.yml") == 0)
        f.vocabs.push_back(e.path().string());
    }
  if (f.vocabs.size() == 1) f.vocabs.push_back(f.vocabs[0]);
  if (f.vocabs.size() != 2)
    throw InputError(f.npz + ": " +
                     (f.vocabs.empty() ? std::string("no vocabulary found beside the model")
                                       : std::to_string(f.vocabs.size()) + " vocabularies found") +
                     ": give {vocab} FILE (both sides) or {vocab} SRC TGT");
  f.spms = opts.spm;
  auto is_spm = [](const std::string& p) {
    const std::string e = fs::path(p).extension().string();
    return e == ".spm" || e == ".model";
  };
  if (f.spms.empty() && is_spm(f.vocabs[0]) && is_spm(f.vocabs[1])) {
    f.spms = f.vocabs;  // Marian's SentencePiece vocabularies cut the text themselves
  } else if (f.spms.empty()) {
    if (exists(in_dir("source.spm")) && exists(in_dir("target.spm")))
      f.spms = {in_dir("source.spm"), in_dir("target.spm")};
    else if (exists(in_dir("spm.model")))
      f.spms = {in_dir("spm.model")};
  }
  f.spms = spm_pair(f.spms);
  if (f.spms.size() > 2)
    throw InputError(
        "{spm}: give one SentencePiece model for both sides, or the source's and "
        "the target's");
  return f;
}

// The .npy header NumPy writes is padded to 64 bytes and rarely longer; a
// parameter's entry may hold this much besides its values.
constexpr uint64_t kMaxNpyHeader = 1 << 16;
// One parameter of the archive, checked for its shape, as f32. An entry is
// inflated only once the size its shape needs is known, and only if it
// claims no more than that.
class Params {
 public:
  explicit Params(const std::string& path) : npz_(path) {}
  bool has(const std::string& n) const { return npz_.has(n); }
  std::vector<int64_t> shape(const std::string& n) const {
    if (!has(n)) throw InputError(npz_.path() + ": the model has no parameter " + n);
    return npz_.shape(n);
  }
  // An array of at most max_bytes of values, whatever its shape.
  NpyArray read(const std::string& n, uint64_t max_bytes) {
    if (!has(n)) throw InputError(npz_.path() + ": the model has no parameter " + n);
    const uint64_t claimed = npz_.entries().at(n);
    if (claimed > max_bytes + kMaxNpyHeader)
      throw InputError(npz_.path() + ": " + n + " claims " + std::to_string(claimed) +
                       " bytes, more than the " + std::to_string(max_bytes) +
                       " its values can take");
    used_.insert(n);
    return npz_.read(n);
  }
  std::vector<float> get(const std::string& n, std::vector<int64_t> shape) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    const NpyArray a = read(n, static_cast<uint64_t>(count) * 4);
    // Marian stores vectors as (1, n).
    std::vector<int64_t> s = a.shape;
    if (s.size() == 2 && s[0] == 1 && shape.size() == 1) s.erase(s.begin());
    if (s != shape)
      throw InputError(npz_.path() + ": parameter " + n + " has shape " + shape_text(a.shape) +
                       ", expected " + shape_text(shape));
    std::vector<float> v = a.to_f32(npz_.path() + ": " + n);
    check_finite(v, npz_.path() + ": parameter " + n);
    return v;
  }
  // Names of parameters nothing read: what the importer does not know.
  std::vector<std::string> unused() const {
    std::vector<std::string> out;
    for (const auto& [n, size] : npz_.entries())
      if (!used_.count(n) && n.rfind("special:", 0) != 0) out.push_back(n);
    return out;
  }

 private:
  NpzArchive npz_;
  std::set<std::string> used_;
};

// (in, out) -> (out, in).
std::vector<float> transposed(const std::vector<float>& w, int64_t in, int64_t out) {
  std::vector<float> t(w.size());
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; ++o) t[o * in + i] = w[i * out + o];
  return t;
}

void append(std::vector<float>& dst, const std::vector<float>& src) {
  dst.insert(dst.end(), src.begin(), src.end());
}

// Drops Marian's dropout steps ('d'), which inference does not run.
std::string without_dropout(std::string ops) {
  ops.erase(std::remove(ops.begin(), ops.end(), 'd'), ops.end());
  return ops;
}


// The options marian-decoder was given (OPUS-MT ships decoder.yml; marian
// itself writes MODEL.npz.decoder.yml beside the model it trains), if any;
// its path in `path`.
std::optional<Options> find_decoder_yml(const std::string& src, std::string& path) {
  std::error_code ec;
  const bool is_dir = fs::is_directory(src, ec);
  const fs::path dir = is_dir ? fs::path(src) : fs::path(src).parent_path();
  const fs::path here = dir.empty() ? fs::path(".") : dir;
  const std::vector<fs::path> ymls =
      is_dir ? std::vector<fs::path>{here / "decoder.yml", here / "model.npz.decoder.yml"}
             : std::vector<fs::path>{fs::path(src + ".decoder.yml"), here / "decoder.yml"};
  for (const fs::path& dyml : ymls) {
    if (!fs::is_regular_file(dyml, ec)) continue;
    path = dyml.string();
    return Options(load_yaml(io::read_whole_file(path, "Marian decoder options"), path), path);
  }
  return std::nullopt;
}

// The model's options: embedded in the archive as marian writes them
// (special:model.yml), or, for models saved without them, the training
// config marian writes beside the model (MODEL.npz.yml), which holds the
// same keys. source: where they were read; embedded: whether in the archive.
Options model_options(const Files& files, Params& p, std::string& source, bool& embedded) {
  std::string text;
  embedded = p.has("special:model.yml");
  if (embedded) {
    const NpyArray yml = p.read("special:model.yml", kMaxYaml);
    text.assign(yml.data.begin(), yml.data.end());
    text = text.substr(0, text.find('\0'));
    source = files.npz + ": special:model.yml";
  } else {
    std::error_code ec;
    const std::string beside = files.npz + ".yml";
    if (!fs::is_regular_file(beside, ec))
      throw InputError(files.npz + ": no special:model.yml in the archive and no " +
                       fs::path(beside).filename().string() +
                       " beside it: not a Marian model, or its options are missing");
    text = io::read_whole_file(beside, "Marian model options");
    source = beside;
  }
  const YAML::Node node = load_yaml(text, source);
  if (!node.IsMap()) throw InputError(source + " is not a YAML map of Marian's options");
  return Options(node, embedded ? files.npz : source);
}

// What the options say of the architecture, once checked.
struct MarianArch {
  int F;  // transformer-dim-ffn
  std::string act, top;
  bool pre_norm, learned, tied_all, tied_src, tied_out, bias;
};

// Everything the options can say that nmt's Transformer cannot do is
// refused, by option.
MarianArch check_architecture(const Options& o) {
  if (o.get<std::string>("type", "") != "transformer")
    o.refuse("type", "only Marian's transformer converts");
  if (o.get<int>("transformer-ffn-depth", 2) != 2)
    o.refuse("transformer-ffn-depth", "nmt's feed-forward blocks have 2 layers");
  if (int d = o.get<int>("transformer-decoder-ffn-depth", 0); d != 0 && d != 2)
    o.refuse("transformer-decoder-ffn-depth", "nmt's feed-forward blocks have 2 layers");
  MarianArch a;
  a.F = o.get<int>("transformer-dim-ffn", 2048);
  if (int d = o.get<int>("transformer-decoder-dim-ffn", 0); d != 0 && d != a.F)
    o.refuse("transformer-decoder-dim-ffn", "nmt's decoder has the encoder's feed-forward width");
  if (o.get<std::string>("transformer-decoder-autoreg", "self-attention") != "self-attention")
    o.refuse("transformer-decoder-autoreg", "nmt's decoder uses self-attention");
  if (!o.get<std::vector<int>>("transformer-tied-layers", {}).empty())
    o.refuse("transformer-tied-layers", "nmt's layers each have their own weights");
  if (o.get<bool>("transformer-pool", false)) o.refuse("transformer-pool", "not supported");
  if (o.get<bool>("right-left", false)) o.refuse("right-left", "nmt decodes left to right only");
  if (o.get<int>("lemma-dim-emb", 0) != 0) o.refuse("lemma-dim-emb", "factors are not supported");
  if (o.get<bool>("ulr", false)) o.refuse("ulr", "not supported");
  if (o.has("input-types") && !o.get<std::vector<std::string>>("input-types", {}).empty())
    o.refuse("input-types", "not supported");
  a.act = o.get<std::string>("transformer-ffn-activation", "swish");
  if (a.act != "swish" && a.act != "relu")
    o.refuse("transformer-ffn-activation",
             "nmt has Marian's swish and relu (Marian's gelu is x * sigmoid(1.702 x), "
             "which is not nmt's erf or tanh GELU)");
  const std::string pre = without_dropout(o.get<std::string>("transformer-preprocess", "")),
                    post = without_dropout(o.get<std::string>("transformer-postprocess", "dan")),
                    emb = without_dropout(o.get<std::string>("transformer-postprocess-emb", "d"));
  a.top = without_dropout(o.get<std::string>("transformer-postprocess-top", ""));
  if (pre.empty() && post == "an")
    a.pre_norm = false;
  else if (pre == "n" && post == "a")
    a.pre_norm = true;
  else
    o.refuse(pre.empty() ? "transformer-postprocess" : "transformer-preprocess",
             "nmt has post-norm (--transformer-preprocess \"\" --transformer-postprocess dan) and "
             "pre-norm (n, da); this model has preprocess \"" +
                 pre + "\", postprocess \"" + post + "\"");
  if (!emb.empty())
    o.refuse("transformer-postprocess-emb", "nmt has no operation on the embeddings but dropout");
  if (!a.top.empty() && !(a.top == "n" && a.pre_norm))
    o.refuse("transformer-postprocess-top",
             "nmt has a final layer norm after pre-norm layers only (n)");
  a.learned = o.get<bool>("transformer-train-position-embeddings", false);
  a.tied_all = o.get<bool>("tied-embeddings-all", false);
  a.tied_src = o.get<bool>("tied-embeddings-src", false);
  a.tied_out = o.get<bool>("tied-embeddings", false);
  if (a.tied_src && !a.tied_all && !a.tied_out)
    o.refuse("tied-embeddings-src",
             "nmt shares the source and target embeddings only with the output layer too");
  a.bias = !o.get<bool>("output-omit-bias", false);
  return a;
}

ModelConfig marian_config(const Options& o, const MarianArch& a, const std::string& npz,
                          const std::optional<Options>& decoder_yml) {
  ModelConfig c;
  c.name = "marian:" + fs::path(npz).stem().string();
  c.d_model = o.get<int>("dim-emb", 512);
  c.heads = o.get<int>("transformer-heads", 8);
  if (c.heads <= 0 || c.d_model % c.heads)
    o.refuse("transformer-heads",
             "d_model " + std::to_string(c.d_model) + " is not a multiple of the heads");
  c.d_k = c.d_v = c.d_model / c.heads;
  c.d_ff = a.F;
  c.encoder_layers = o.get<int>("enc-depth", 6);
  c.decoder_layers = o.get<int>("dec-depth", 6);
  c.dropout = 0.f;
  c.norm = a.pre_norm ? "pre" : "post";
  c.final_norm = a.pre_norm && a.top == "n";
  c.activation = a.act;
  c.layer_norm_eps = 1e-6f;  // Marian's layerNorm(x, prefix)
  c.tie_embeddings = a.tied_all || (a.tied_src && a.tied_out);
  c.tie_output = !c.tie_embeddings && a.tied_out;
  c.output_bias = a.bias;
  c.positional = a.learned ? "learned" : "sinusoidal-concat";
  c.scale_embeddings = !a.learned;  // Marian scales only with sinusoids
  c.decoder_start = "zero";
  c.pad_id = -1;
  c.bos_id = -1;
  // marian-decoder never outputs <unk> unless told --allow-unk.
  c.output_unk = decoder_yml && decoder_yml->get<bool>("allow-unk", false);
  return c;
}

// The vocabularies' sizes and special ids: Marian's ids are its vocabulary
// files' order.
void set_vocabularies(const Options& o, const Files& files, const std::vector<std::string>& src,
                      const std::vector<std::string>& tgt, ModelConfig& c) {
  const std::vector<int> dims = o.get<std::vector<int>>("dim-vocabs", {});
  if (dims.size() != 2) o.refuse("dim-vocabs", "expected the source and target sizes");
  if (dims[0] != static_cast<int>(src.size()))
    throw InputError(files.vocabs[0] + ": " + std::to_string(src.size()) +
                     " tokens, but the model's source vocabulary (--dim-vocabs) has " +
                     std::to_string(dims[0]));
  if (dims[1] != static_cast<int>(tgt.size()))
    throw InputError(files.vocabs[1] + ": " + std::to_string(tgt.size()) +
                     " tokens, but the model's target vocabulary (--dim-vocabs) has " +
                     std::to_string(dims[1]));
  c.vocab_size = dims[1];
  c.src_vocab_size = src == tgt ? 0 : dims[0];
  if (c.src_vocab_size && c.tie_embeddings)
    o.refuse("tied-embeddings-all", "the source and target vocabularies differ");
  c.eos_id = id_of(tgt, "</s>");
  c.unk_id = id_of(tgt, "<unk>");
  if (c.eos_id < 0) throw InputError(files.vocabs[1] + ": the vocabulary has no </s>");
  if (id_of(src, "</s>") != c.eos_id || id_of(src, "<unk>") != c.unk_id)
    throw InputError(files.vocabs[0] + ": </s> and <unk> have other ids than in " +
                     files.vocabs[1]);
  // A model into several languages takes the target's >>xxx<< token first.
  c.languages = language_tokens(src, "opus");
  if (!c.languages.empty()) c.source_language = "none", c.target_language = "source";
}

// Embeddings, output layer and positions under nmt's names.
void copy_embeddings(Params& p, const ModelConfig& c, const MarianArch& a,
                     const std::vector<float>& wpos, std::map<std::string, std::vector<float>>& w) {
  const int64_t D = c.d_model, Vs = c.source_vocab(), Vt = c.vocab_size;
  if (c.tie_embeddings) {
    w["embed/tokens"] = p.get("Wemb", {Vt, D});
  } else {
    w["encoder/embed/tokens"] = p.get(a.tied_src ? "Wemb" : "encoder_Wemb", {Vs, D});
    w["decoder/embed/tokens"] = p.get(a.tied_src ? "Wemb" : "decoder_Wemb", {Vt, D});
    // marian 1.12 writes an untied output layer vocabulary-major (_Wt, found
    // on tests/fixtures/peers/marian-prenorm); older models dim-major (_W).
    if (!c.tie_output)
      w["decoder/output/weight"] =
          p.has("decoder_ff_logit_out_Wt")
              ? p.get("decoder_ff_logit_out_Wt", {Vt, D})
              : transposed(p.get("decoder_ff_logit_out_W", {D, Vt}), D, Vt);
  }
  if (a.bias) w["decoder/output/bias"] = p.get("decoder_ff_logit_out_b", {Vt});
  if (a.learned) w["encoder/embed/positions"] = w["decoder/embed/positions"] = wpos;
}

// The layers' weights under nmt's names (Marian's are dim-major: each
// matrix transposed); a parameter nothing reads is refused, not dropped.
void copy_layers(Params& p, const ModelConfig& c, const MarianArch& a, const std::string& npz,
                 std::map<std::string, std::vector<float>>& w) {
  const int64_t D = c.d_model, F = c.d_ff;
  auto attention_block = [&](const std::string& to, const std::string& from, bool self) {
    std::vector<float> wq = transposed(p.get(from + "_Wq", {D, D}), D, D),
                       wk = transposed(p.get(from + "_Wk", {D, D}), D, D),
                       wv = transposed(p.get(from + "_Wv", {D, D}), D, D);
    std::vector<float> bq = p.get(from + "_bq", {D}), bk = p.get(from + "_bk", {D}),
                       bv = p.get(from + "_bv", {D});
    const std::string in = self ? "/qkv" : "/kv";
    if (!self) w[to + "/q/weight"] = wq, w[to + "/q/bias"] = bq;
    std::vector<float>& wi = w[to + in + "/weight"];
    std::vector<float>& bi = w[to + in + "/bias"];
    if (self) append(wi, wq), append(bi, bq);
    append(wi, wk), append(wi, wv), append(bi, bk), append(bi, bv);
    w[to + "/out/weight"] = transposed(p.get(from + "_Wo", {D, D}), D, D);
    w[to + "/out/bias"] = p.get(from + "_bo", {D});
  };
  const std::string ln_suffix = a.pre_norm ? "_pre" : "";
  auto norm = [&](const std::string& to, const std::string& from) {
    w[to + "/gamma"] = p.get(from + "_ln_scale" + ln_suffix, {D});
    w[to + "/beta"] = p.get(from + "_ln_bias" + ln_suffix, {D});
  };
  auto ffn = [&](const std::string& to, const std::string& from) {
    w[to + "/w1/weight"] = transposed(p.get(from + "_W1", {D, F}), D, F);
    w[to + "/w1/bias"] = p.get(from + "_b1", {F});
    w[to + "/w2/weight"] = transposed(p.get(from + "_W2", {F, D}), F, D);
    w[to + "/w2/bias"] = p.get(from + "_b2", {D});
  };
  for (int l = 0; l < c.encoder_layers; ++l) {
    const std::string to = "encoder/layer_" + std::to_string(l),
                      from = "encoder_l" + std::to_string(l + 1);
    attention_block(to + "/self_attn", from + "_self", true);
    norm(to + "/ln1", from + "_self_Wo");
    ffn(to + "/ffn", from + "_ffn");
    norm(to + "/ln2", from + "_ffn_ffn");
  }
  for (int l = 0; l < c.decoder_layers; ++l) {
    const std::string to = "decoder/layer_" + std::to_string(l),
                      from = "decoder_l" + std::to_string(l + 1);
    attention_block(to + "/self_attn", from + "_self", true);
    norm(to + "/ln1", from + "_self_Wo");
    attention_block(to + "/cross_attn", from + "_context", false);
    norm(to + "/ln2", from + "_context_Wo");
    ffn(to + "/ffn", from + "_ffn");
    norm(to + "/ln3", from + "_ffn_ffn");
  }
  if (c.final_norm)
    for (const char* side : {"encoder", "decoder"}) {
      w[std::string(side) + "/final_ln/gamma"] = p.get(std::string(side) + "_top_ln_scale", {D});
      w[std::string(side) + "/final_ln/beta"] = p.get(std::string(side) + "_top_ln_bias", {D});
    }
  for (const std::string& n : p.unused())
    throw InputError(npz + ": parameter " + n +
                     " belongs to nothing nmt's Transformer has (not converted)");
}

// The SentencePiece models (required: Marian's vocabularies cut text).
void attach_vocabs(const Files& files, const std::vector<std::string>& src_tokens,
                   const std::vector<std::string>& tgt_tokens, const ModelConfig& c,
                   Imported& m) {
  const std::string src_spm = files.spms.empty() ? "" : io::read_whole_file(files.spms[0], "{spm}"),
                    tgt_spm = files.spms.empty() ? "" : io::read_whole_file(files.spms[1], "{spm}");
  if (tgt_spm.empty())
    throw InputError(files.npz +
                     ": no SentencePiece model found (source.spm and target.spm "
                     "beside the model): give {spm} FILE (both sides) or {spm} SRC TGT");
  m.vocab = Vocab::from_tokens(tgt_tokens, tgt_spm, c.unk_id, files.spms[1]);
  if (c.src_vocab_size || src_spm != tgt_spm)
    m.source_vocab =
        Vocab::from_tokens(src_tokens, src_spm, c.unk_id, src_spm.empty() ? "" : files.spms[0]);
  check_tokeniser(m.vocab, files.spms[1], files.vocabs[1], m);
  if (m.source_vocab && !src_spm.empty())
    check_tokeniser(*m.source_vocab, files.spms[0], files.vocabs[0], m);
}

}  // namespace

Imported import_marian(const std::string& src, const ConvertOptions& opts) {
  std::string decoder_yml_path, yml_source;
  const std::optional<Options> decoder_yml = find_decoder_yml(src, decoder_yml_path);
  const Files files = locate(src, opts, decoder_yml ? &*decoder_yml : nullptr);
  Params p(files.npz);
  bool embedded = false;
  const Options o = model_options(files, p, yml_source, embedded);
  const MarianArch a = check_architecture(o);
  ModelConfig c = marian_config(o, a, files.npz, decoder_yml);
  const std::vector<std::string> src_tokens = vocab_tokens(files.vocabs[0]),
                                 tgt_tokens = files.vocabs[1] == files.vocabs[0]
                                                  ? src_tokens
                                                  : vocab_tokens(files.vocabs[1]);
  set_vocabularies(o, files, src_tokens, tgt_tokens, c);
  // Positions: Marian's sinusoids have no limit; nmt's table is sized once.
  c.max_positions = 1024;
  if (a.learned) {
    const std::vector<int64_t> s = p.shape("Wpos");
    if (s.size() != 2 || s[0] < 2 || s[0] > (1 << 16))
      throw InputError(files.npz + ": parameter Wpos has shape " + shape_text(s) +
                       ", expected (positions, dim-emb) with 2 to 65536 positions");
    c.max_positions = static_cast<int>(s[0]);
  }
  // The whole configuration is checked before any weight is read.
  config_from_json(config_to_json(c), yml_source + " (converted config)");
  std::vector<float> wpos;
  if (a.learned) wpos = p.get("Wpos", {c.max_positions, c.d_model});
  Imported m;
  copy_embeddings(p, c, a, wpos, m.weights);
  copy_layers(p, c, a, files.npz, m.weights);
  attach_vocabs(files, src_tokens, tgt_tokens, c, m);
  m.config = c;
  m.provenance = {{"tool", "marian"},
                  {"source", files.npz},
                  {"vocabularies", files.vocabs},
                  {"sentencepiece", files.spms},
                  {"options",
                   {{"transformer-preprocess", o.dump("transformer-preprocess")},
                    {"transformer-postprocess", o.dump("transformer-postprocess")},
                    {"transformer-ffn-activation", a.act},
                    {"tied-embeddings-all", a.tied_all},
                    {"tied-embeddings", a.tied_out}}},
                  {"summary", "from Marian " + o.get<std::string>("version", "(version unknown)") +
                                  ", " + fs::path(files.npz).filename().string()}};
  m.read_from = {files.npz};
  for (const auto* list : {&files.vocabs, &files.spms})
    m.read_from.insert(m.read_from.end(), list->begin(), list->end());
  if (!embedded) m.read_from.push_back(yml_source);
  if (!decoder_yml_path.empty()) m.read_from.push_back(decoder_yml_path);
  return m;
}

}  // namespace nmt::convert
