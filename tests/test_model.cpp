// The model against the paper: attention against an explicit
// softmax(QK^T/sqrt(d))V, padding and causality invariants, positional
// encodings against the formula, config validation, and the model file.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "capability.h"
#include "core/error.h"
#include "model/attention.h"
#include "model/config.h"
#include "model/embeddings.h"
#include "model/loaded_model.h"
#include "model/model_file.h"
#include "model/transformer.h"
#include "model/vocab.h"
#include "test_helpers.h"
#include "train/options.h"

using namespace nmt;
using namespace nmt::test;

TEST_CASE("multi-head attention equals the per-head reference loop", "[model]") {
  const int64_t B = 2, T = 3, S = 5, D = 12, H = 3, dk = 4, dv = 4;
  ParamStore store;
  MultiHeadAttention attn(store, "a", D, H, dk, dv, 0.f, false);
  store.allocate(1);
  randomize(store, 2, 0.3f);
  Tensor xq(Shape{B * T, D}), xkv(Shape{B * S, D}), mask(Shape{B, 1, 1, S}), y;
  fill_random(xq, 3);
  fill_random(xkv, 4);
  mask.data()[S + 3] = mask.data()[S + 4] = -1e9f;  // sentence 1 has 3 real tokens
  AttnActs acts;
  attn.forward(xq, &xkv, B, T, S, &mask, acts, y, false, 0);

  auto P = [&](const char* n) { return store.find(std::string("a/") + n)->value.data(); };
  const float *Wq = P("q/weight"), *bq = P("q/bias"), *Wkv = P("kv/weight"), *bkv = P("kv/bias");
  const float *Wo = P("out/weight"), *bo = P("out/bias");
  auto proj = [](const float* x, const float* W, const float* b, int64_t row, int64_t in) {
    double s = b[row];
    for (int64_t i = 0; i < in; ++i) s += double(W[row * in + i]) * x[i];
    return s;
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> ctx(H * dv, 0.0);
      for (int64_t h = 0; h < H; ++h) {
        std::vector<double> q(dk), score(S);
        for (int64_t i = 0; i < dk; ++i)
          q[i] = proj(&xq.data()[(b * T + t) * D], Wq, bq, h * dk + i, D);
        double mx = -1e300;
        for (int64_t s = 0; s < S; ++s) {
          double d = 0;
          for (int64_t i = 0; i < dk; ++i)
            d += q[i] * proj(&xkv.data()[(b * S + s) * D], Wkv, bkv, h * dk + i, D);
          score[s] = d / std::sqrt(double(dk)) + mask.data()[b * S + s];
          mx = std::max(mx, score[s]);
        }
        double z = 0;
        for (auto& sc : score) z += (sc = std::exp(sc - mx));
        for (int64_t s = 0; s < S; ++s)
          for (int64_t i = 0; i < dv; ++i)
            ctx[h * dv + i] +=
                score[s] / z * proj(&xkv.data()[(b * S + s) * D], Wkv, bkv, H * dk + h * dv + i, D);
      }
      for (int64_t o = 0; o < D; ++o) {
        double r = bo[o];
        for (int64_t i = 0; i < H * dv; ++i) r += double(Wo[o * H * dv + i]) * ctx[i];
        REQUIRE(y.data()[(b * T + t) * D + o] == Approx(r).margin(1e-4));
      }
    }
}

TEST_CASE("padding never changes the outputs at real positions", "[model]") {
  for (int variant = 0; variant < 3; ++variant) {
    ModelConfig cfg = tiny_config(30);
    cfg.norm = variant == 1 ? "pre" : "post";
    if (variant == 2) {
      // Marian's ids: </s> is 0, which the padding must not be taken for.
      cfg.eos_id = 0, cfg.unk_id = 1, cfg.pad_id = -1, cfg.bos_id = -1;
      cfg.decoder_start = "zero";
      cfg.activation = "swish";
    }
    INFO("variant " << variant);
    Transformer model(cfg);
    model.init(2);
    Activations acts;
    std::vector<int32_t> s1{5, 6, 7}, t1{8, 9}, s2{10, 11, 12, 13, 14, 15, 16},
        t2{17, 18, 19, 20, 21, 22};
    TokenBatch alone = make_batch({&s1}, {&t1}, cfg);
    model.forward(alone, acts, false, 0);
    std::vector<float> ref(acts.logits.data(), acts.logits.data() + acts.logits.numel());
    TokenBatch padded = make_batch({&s1, &s2}, {&t1, &t2}, cfg);
    model.forward(padded, acts, false, 0);
    const int64_t V = cfg.vocab_size;
    for (int64_t t = 0; t < alone.T; ++t)
      for (int64_t v = 0; v < V; ++v)
        REQUIRE(acts.logits.data()[t * V + v] == Approx(ref[t * V + v]).margin(1e-4));
  }
}

TEST_CASE("no decoder position sees a later one", "[model]") {
  ModelConfig cfg = tiny_config(30);
  Transformer model(cfg);
  model.init(4);
  Activations acts;
  std::vector<int32_t> s{5, 6, 7, 8}, a{9, 10, 11, 12, 13}, b{9, 10, 11, 25, 26};
  model.forward(make_batch({&s}, {&a}), acts, false, 0);
  std::vector<float> la(acts.logits.data(), acts.logits.data() + acts.logits.numel());
  model.forward(make_batch({&s}, {&b}), acts, false, 0);
  const int64_t V = cfg.vocab_size;
  // Decoder inputs are <s> y1.., so positions 0..3 see only a[0..2] == b[0..2].
  for (int64_t t = 0; t <= 3; ++t)
    for (int64_t v = 0; v < V; ++v)
      REQUIRE(acts.logits.data()[t * V + v] == Approx(la[t * V + v]).margin(1e-5));
  bool changed = false;
  for (int64_t v = 0; v < V; ++v)
    changed |= std::abs(acts.logits.data()[4 * V + v] - la[4 * V + v]) > 1e-4;
  CHECK(changed);
}

TEST_CASE("sinusoidal positional encodings follow the formula", "[model]") {
  Tensor pe;
  const int64_t D = 512;
  sinusoidal_positions(100, D, pe);
  for (int64_t pos : {0, 1, 7, 50, 99})
    for (int64_t i = 0; i < D / 2; i += 37) {
      const double angle = pos / std::pow(10000.0, 2.0 * i / D);
      CHECK(pe.data()[pos * D + 2 * i] == Approx(std::sin(angle)).margin(1e-6));
      CHECK(pe.data()[pos * D + 2 * i + 1] == Approx(std::cos(angle)).margin(1e-6));
    }
}

TEST_CASE("embeddings of one shape share one sinusoid table", "[model]") {
  ModelConfig cfg = tiny_config(40);
  ParamStore store;
  const Param* table = store.add("emb", Shape{40, cfg.d_model}, Init::Normal, 1.f, true);
  Embeddings a(store, "a", table, cfg), b(store, "b", table, cfg);
  ModelConfig concat = cfg;
  concat.positional = "sinusoidal-concat";
  Embeddings c(store, "c", table, concat);
  for (Embeddings* e : {&a, &b, &c}) e->init_tables(Device::CPU);
  REQUIRE(a.sinusoids());
  CHECK(a.sinusoids() == b.sinusoids());  // an encoder's and a decoder's: one copy
  CHECK(c.sinusoids() != a.sinusoids());  // another layout: a table of its own
  Tensor pe;
  sinusoidal_positions(cfg.max_positions, cfg.d_model, pe);
  CHECK(std::memcmp(a.sinusoids()->data(), pe.data(), pe.bytes()) == 0);
}

TEST_CASE("Marian's sinusoid layout: sines, then cosines, over n-1 timescale steps", "[model]") {
  Tensor pe;
  const int64_t D = 512, n = D / 2;
  sinusoidal_positions_concat(100, D, pe);
  for (int64_t pos : {0, 1, 7, 50, 99})
    for (int64_t i = 0; i < n; i += 37) {
      // tensor2tensor's get_timing_signal_1d, as Marian and fairseq compute it.
      const double angle = pos * std::exp(-std::log(10000.0) * i / (n - 1.0));
      CHECK(pe.data()[pos * D + i] == Approx(std::sin(angle)).margin(1e-5));
      CHECK(pe.data()[pos * D + n + i] == Approx(std::cos(angle)).margin(1e-5));
    }
}

TEST_CASE("a config without the keys imported models add reads as the paper's model", "[model]") {
  // The keys a model file written before them lacks.
  nlohmann::json j = config_to_json(tiny_config());
  for (const char* k : {"scale_embeddings", "tie_output", "output_bias", "final_norm", "activation",
                        "src_vocab_size", "pad_id", "unk_id", "bos_id", "eos_id", "decoder_start",
                        "source_bos", "source_eos", "output_unk"})
    j.erase(k);
  const ModelConfig c = config_from_json(j, "old.json");
  CHECK(c.scale_embeddings);
  CHECK_FALSE(c.tie_output);
  CHECK_FALSE(c.output_bias);
  CHECK(c.final_norm);
  CHECK(c.ffn_activation() == Activation::Relu);
  CHECK(c.source_vocab() == c.vocab_size);
  CHECK((c.pad_id == 0 && c.unk_id == 1 && c.bos_id == 2 && c.eos_id == 3));
  CHECK(c.start_token() == 2);
  CHECK((!c.source_bos && c.source_eos && c.output_unk));
  CHECK(c.never_output() == std::vector<int32_t>{0, 2});
  CHECK(config_to_json(c) == config_to_json(tiny_config()));
}

TEST_CASE("the shipped configs load with the paper's values", "[model]") {
  const std::string dir = std::string(NMT_SOURCE_DIR) + "/models/";
  ModelConfig base = load_config(dir + "transformer-base.json");
  CHECK(base.encoder_layers == 6);
  CHECK(base.decoder_layers == 6);
  CHECK(base.d_model == 512);
  CHECK(base.d_ff == 2048);
  CHECK(base.heads == 8);
  CHECK(base.dropout == Approx(0.1));
  CHECK(base.label_smoothing == Approx(0.1));
  ModelConfig big = load_config(dir + "transformer-big.json");
  CHECK(big.d_model == 1024);
  CHECK(big.d_ff == 4096);
  CHECK(big.heads == 16);
  CHECK(big.dropout == Approx(0.3));
  ModelConfig small = load_config(dir + "transformer-small.json");
  CHECK(small.encoder_layers == 3);
  CHECK(small.d_model == 256);
  CHECK(small.heads == 4);
  CHECK(small.d_ff == 1024);
  CHECK(small.dropout == Approx(0.3));
  CHECK_NOTHROW(load_config(dir + "transformer-tiny.json"));
  // Table 3 base has 65M parameters with a 37k vocabulary.
  base.vocab_size = 37000;
  Transformer m(base);
  CHECK(m.parameter_count() / 1e6 == Approx(63.1).margin(2.0));
}

TEST_CASE("config errors name the file, the key and what was expected", "[model]") {
  const nlohmann::json good = config_to_json(tiny_config());
  auto error_of = [](const nlohmann::json& j) -> std::string {
    try {
      config_from_json(j, "cfg.json");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  auto j = good;
  j["colour"] = "blue";
  CHECK(error_of(j) == "cfg.json: key \"colour\": unknown key");
  j = good;
  j["d_model"] = "512";
  CHECK(error_of(j) == "cfg.json: key \"d_model\": expected an integer, got string");
  j = good;
  j.erase("heads");
  CHECK(error_of(j) == "cfg.json: key \"heads\": missing (required)");
  j = good;
  j["d_model"] = 30;
  j["heads"] = 4;
  CHECK(error_of(j) == "cfg.json: key \"heads\": d_model (30) must be divisible by heads (4)");
  j = good;
  j["dropout"] = 1.5;
  CHECK(error_of(j).find("key \"dropout\": expected a number in [0") != std::string::npos);
  j = good;
  j["norm"] = "middle";
  CHECK(error_of(j) == "cfg.json: key \"norm\": expected \"post\" or \"pre\", got \"middle\"");
  j = good;
  j["activation"] = "tanh";
  CHECK(error_of(j).find("cfg.json: key \"activation\": expected ") == 0);
  j = good;
  j["src_vocab_size"] = 100;  // tied embeddings: one vocabulary
  CHECK(error_of(j).find("cfg.json: key \"src_vocab_size\": tie_embeddings shares") == 0);
  j["tie_embeddings"] = false;
  CHECK(error_of(j).empty());
  j = good;
  j["tie_output"] = true;
  CHECK(error_of(j).find("cfg.json: key \"tie_output\": tie_embeddings already") == 0);
  j = good;
  j["eos_id"] = -1;
  CHECK(error_of(j) == "cfg.json: key \"eos_id\": a model needs an end-of-sentence token");
  j = good;
  j["eos_id"] = j["vocab_size"];
  CHECK(error_of(j).find("cfg.json: key \"eos_id\": expected an integer from -1 to ") == 0);
  j = good;
  j["bos_id"] = -1;
  CHECK(error_of(j).find("cfg.json: key \"bos_id\": decoder_start \"bos\" needs") == 0);
  j["decoder_start"] = "zero";
  CHECK(error_of(j).empty());
  j = good;
  j["positional"] = "sinusoidal-concat";
  j["d_model"] = 2;
  j["heads"] = 1;
  j["d_k"] = j["d_v"] = 2;
  CHECK(error_of(j).find("cfg.json: key \"positional\": ") == 0);
  CHECK(error_of(good).empty());

  const std::string path = "/tmp/nmt_test_bad_config.json";
  std::ofstream(path) << "{ \"d_model\": 5,";
  try {
    load_config(path);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find(path + ": not valid JSON") == 0);
  }
}

namespace {
// A real SentencePiece model of exactly n pieces, trained on words over five
// letters (so that even n = 30 leaves room beyond the characters): every
// loader checks the vocabulary as it checks the weights.
std::string vocab_bytes(int n) {
  std::mt19937 g(7);
  std::vector<std::string> lines;
  for (int i = 0; i < 400; ++i) {
    std::string line;
    for (int w = 0; w < 6; ++w) {
      line += w ? " " : "";
      for (int k = 0, len = 1 + int(g() % 4); k < len; ++k) line += char('a' + g() % 5);
    }
    lines.push_back(line);
  }
  return Vocab::train(lines, n).bytes();
}

std::string error_loading(const std::string& path) {
  try {
    ModelConfig cfg;
    std::string spm;
    FileContents f = open_model(path, cfg, spm);
    Transformer m(cfg);
    load_weights(f, m);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
}  // namespace

TEST_CASE("the model file round-trips and rejects every corruption", "[model]") {
  ModelConfig cfg = tiny_config(30);
  cfg.tie_embeddings = false;
  Transformer model(cfg);
  model.init(8);
  const std::string path = "/tmp/nmt_test_model.nmt";
  const std::string vocab = vocab_bytes(30);
  save_model(path, model, vocab);

  ModelConfig cfg2;
  std::string spm;
  FileContents f = open_model(path, cfg2, spm);
  CHECK(spm == vocab);
  CHECK(config_to_json(cfg2) == config_to_json(cfg));
  Transformer loaded(cfg2);
  load_weights(f, loaded);
  REQUIRE(loaded.params().size() == model.params().size());
  CHECK(std::equal(model.params().values().data(),
                   model.params().values().data() + model.params().size(),
                   loaded.params().values().data()));
  CHECK(f.metadata.at("format_version") == "1");

  const std::string good = slurp(path), bad = "/tmp/nmt_test_bad.nmt";
  spit(bad, good.substr(0, good.size() - 100));
  // Whole messages: a phrase such as "truncated" would also match another
  // error's "(truncated?)".
  const std::string invalid = bad + ": not a valid model file: ";
  CHECK(error_loading(bad).rfind(invalid + "tensor ", 0) == 0);
  CHECK(error_loading(bad).find("'s data [") != std::string::npos);
  CHECK(error_loading(bad).find(") extends past the end of the data (") != std::string::npos);
  spit(bad, good.substr(0, 5));
  CHECK(error_loading(bad) == invalid + "file is only 5 bytes (truncated?)");
  std::string h = good;
  h[8] = '#';  // the header's opening brace
  spit(bad, h);
  CHECK_THAT(error_loading(bad), Catch::StartsWith(invalid + "header: not valid JSON: "));
  h = good;
  REQUIRE(h[3] == 0);
  h[0] = '\xff', h[1] = '\xff', h[2] = '\xff';  // absurd header length
  spit(bad, h);
  CHECK(error_loading(bad) == invalid + "header length 16777215 exceeds the file size " +
                                  std::to_string(h.size()) + " (truncated?)");
  CHECK(error_loading("/tmp/does/not/exist.nmt") ==
        "cannot open model file /tmp/does/not/exist.nmt: No such file or directory");

  // A missing tensor, a wrongly shaped one and an unknown version.
  auto rewrite = [&](auto&& edit) {
    std::vector<NamedTensor> ts;
    for (const auto& p : model.params().params()) ts.push_back({p.name, p.shape, p.value.data()});
    std::map<std::string, std::string> meta{
        {"format", "nmt"}, {"format_version", "1"}, {"config", config_to_json(cfg).dump()}};
    std::map<std::string, std::string> bytes{{"vocab/sentencepiece", vocab}};
    edit(ts, meta, bytes);
    write_safetensors(bad, meta, ts, bytes);
    return error_loading(bad);
  };
  const Param& p2 = model.params().params()[2];
  const Param& p3 = model.params().params()[3];
  CHECK(rewrite([](auto& ts, auto&, auto&) { ts.erase(ts.begin() + 3); }) ==
        bad + ": missing tensor " + p3.name);
  CHECK(rewrite([](auto& ts, auto&, auto&) { ts[2].shape = Shape{ts[2].shape.numel()}; }) ==
        bad + ": tensor " + p2.name + " has shape (" + std::to_string(p2.shape.numel()) +
            ") F32, expected " + p2.shape.str() + " F32");
  CHECK(rewrite([](auto&, auto& meta, auto&) {
          meta["format_version"] = "99";
        }).find("unsupported model format version 99") != std::string::npos);
  CHECK(rewrite([](auto&, auto& meta, auto&) {
          meta.erase("format");
        }).find("not an nmt model file") != std::string::npos);
  // The vocabulary: missing, corrupt, smaller than the embedding, a step
  // that is not a number: each refused by every loader (open_model).
  CHECK(rewrite([](auto&, auto&, auto& bytes) {
          bytes.clear();
        }).find("holds no SentencePiece vocabulary") != std::string::npos);
  CHECK(rewrite([](auto&, auto&, auto& bytes) {
          bytes["vocab/sentencepiece"] = "not a SentencePiece model";
        }).find("vocab/sentencepiece: invalid SentencePiece model") != std::string::npos);
  CHECK(rewrite([](auto&, auto&, auto& bytes) {
          bytes["vocab/sentencepiece"] = vocab_bytes(24);
        }).find("the vocabulary has 24 pieces but the model's embedding 30 rows") !=
        std::string::npos);
  CHECK(rewrite([](auto&, auto& meta, auto&) {
          meta["step"] = "12x";
        }).find("metadata \"step\" is not a non-negative integer: \"12x\"") != std::string::npos);
  CHECK(rewrite([](auto&, auto& meta, auto&) { meta["step"] = "12"; }).empty());
  std::remove(path.c_str());
  std::remove(bad.c_str());
}

namespace {

// A model file with a hand-written header over `data`, to forge what no
// writer would produce.
std::string forge(const std::string& header, const std::string& data) {
  std::string h = header;
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

}  // namespace

TEST_CASE(
    "an imported vocabulary: pieces by a SentencePiece model or at spaces, looked up in a list",
    "[model]") {
  const std::string spm = vocab_bytes(30);
  // Marian's order: </s> 0, <unk> 1, then the SentencePiece model's pieces.
  std::vector<std::string> tokens = {"</s>", "<unk>"};
  for (const std::string& p : Vocab::sentencepiece_pieces(spm))
    if (p != "<unk>" && p != "<s>" && p != "</s>" && p != "<pad>") tokens.push_back(p);
  const Vocab native = Vocab::from_bytes(spm);
  const Vocab v = Vocab::from_tokens(tokens, spm, 1);
  CHECK(v.imported());
  CHECK(v.size() == static_cast<int>(tokens.size()));
  const std::string text = "abc de a";
  const std::vector<int32_t> ids = v.encode(text);
  REQUIRE(!ids.empty());
  // The same pieces as the SentencePiece model cuts, under the list's ids.
  CHECK(v.pieces(ids) == native.pieces(native.encode(text)));
  CHECK(v.decode(ids) == text);
  // A piece the list lacks (characters the SentencePiece model never saw) is <unk>.
  const std::vector<int32_t> unknown = v.encode("zzz qqq");
  CHECK(std::count(unknown.begin(), unknown.end(), 1) > 0);
  // Tokenised text: the tokens are what the spaces separate.
  const Vocab plain = Vocab::from_tokens({"<unk>", "</s>", "a", "b@@", "c", "d", "e", "f"}, "", 0);
  CHECK(plain.encode("  a b@@ c\tx ") == std::vector<int32_t>{2, 3, 4, 0});
  CHECK(plain.decode({2, 3, 4}) == "a b@@ c");
  // Whatever a token holds, a translation is one line: a model file that
  // holds a line break in a token (which convert refuses) cannot split an
  // output line.
  const Vocab breaking = Vocab::from_tokens({"<unk>", "</s>", "x\ny", "a\r", "b"}, "", 0);
  CHECK(breaking.decode({2, 3, 4}) == "x y a  b");
  // The SentencePiece model against the list: every ordinary piece of it is
  // a token here; none is in the tokenised list's.
  const Vocab::Coverage own = v.tokeniser_coverage();
  CHECK(own.pieces > 0);
  CHECK(own.outside.empty());
  const Vocab other = Vocab::from_tokens({"<unk>", "</s>", "a", "b"}, spm, 0);
  CHECK(other.tokeniser_coverage().outside.size() >= own.outside.size() + 1);
  CHECK(plain.tokeniser_coverage().pieces == 0);
  CHECK_THROWS_WITH(Vocab::from_tokens({"a", "b"}, "", -1).encode("c"),
                    "\"c\" is not in the vocabulary, which has no unknown token");
  CHECK_THROWS_WITH(Vocab::from_tokens({"a"}, "", 5),
                    "the unknown-token id 5 is outside the 1 tokens of the vocabulary");

  // In a model file: the list and the SentencePiece model, a source side of
  // its own under vocab/source/; nmt quantize keeps them (vocab_tensors).
  ModelConfig cfg = tiny_config(static_cast<int>(tokens.size()));
  cfg.tie_embeddings = false;
  cfg.src_vocab_size = 8;
  cfg.eos_id = 0, cfg.unk_id = 1, cfg.pad_id = -1, cfg.bos_id = -1;
  cfg.decoder_start = "zero";
  Transformer model(cfg);
  model.init(3);
  const std::string path = "/tmp/nmt_test_imported.nmt";
  save_model(path, model, vocab_tensors(v, &plain));
  ModelConfig back;
  std::string spm_back;
  Vocab tv, sv;
  FileContents f = open_model(path, back, spm_back, &tv, nullptr, &sv);
  CHECK(spm_back == spm);
  CHECK(tv.tokens() == tokens);
  CHECK(sv.tokens() == plain.tokens());
  CHECK(vocab_tensors(f) == vocab_tensors(v, &plain));
  // The sizes are checked against the embeddings, side by side.
  save_model(path, model, vocab_tensors(v, nullptr));
  CHECK(error_loading(path) == path +
                                   ": the model has a source embedding of its own "
                                   "(src_vocab_size 8) but no source vocabulary");
  save_model(path, model, vocab_tensors(v, &v));
  CHECK(error_loading(path).find(path + ": the source vocabulary has " +
                                 std::to_string(tokens.size()) +
                                 " pieces but the model's source embedding 8 rows") == 0);
  VocabTensors broken = vocab_tensors(v, &plain);
  broken["vocab/tokens"] = "{\"not\": \"a list\"}";
  save_model(path, model, broken);
  CHECK(error_loading(path) == path + ": vocab/tokens: not a JSON list of tokens");
}

TEST_CASE("the model reader refuses forged headers, bad numbers and deep or invalid configs",
          "[model]") {
  const std::string bad = "/tmp/nmt_test_forged.nmt";
  const std::string meta = R"("__metadata__":{"format":"nmt","format_version":"1"})";
  const std::string eight(8, '\0');
  auto error_of = [&](const std::string& bytes) {
    spit(bad, bytes);
    return error_loading(bad);
  };
  // Duplicate names, overlapping offsets, a gap, trailing bytes, an
  // impossible shape: each refused by name before anything is trusted.
  CHECK(error_of(forge("{" + meta + R"(,"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)" +
                           R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                       eight))
            .find("key \"a\" appears twice in one object") != std::string::npos);
  CHECK(error_of(forge("{" + meta + R"(,"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)" +
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                       eight))
            .find(": not a valid model file: tensor b overlaps another tensor's data") !=
        std::string::npos);
  // A gap is named once the missing tensors have been looked for (by
  // load_weights); read_safetensors alone names it at once.
  auto strict_error = [&](const std::string& bytes) {
    spit(bad, bytes);
    try {
      read_safetensors(bad);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(strict_error(forge("{" + meta + R"(,"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           eight)) ==
        bad + ": not a valid model file: 4 bytes before tensor a's data belong to no tensor");
  CHECK(strict_error(forge("{" + meta + R"(,"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                           eight)) ==
        bad + ": not a valid model file: 4 bytes after the last tensor's data");
  CHECK(strict_error(
            forge("{" + meta + R"(,"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight))
            .find("tensor a's data [0, 16) extends past the end of the data (8 bytes") !=
        std::string::npos);
  CHECK(error_of(forge("{" + meta + R"(,"a":{"dtype":"F32","shape":[4294967296,4294967296],)" +
                           R"("data_offsets":[0,8]}})",
                       eight))
            .find(": not a valid model file: tensor a has an impossibly large shape") !=
        std::string::npos);
  CHECK(error_of(
            forge("{" + meta + R"(,"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", eight))
            .find(": not a valid model file: tensor a has a malformed shape") != std::string::npos);

  // A model whose stored config is nested 200k deep, or whose training
  // object fails validation: refused exactly as a config file would be.
  ModelConfig cfg = tiny_config(30);
  Transformer model(cfg);
  model.init(3);
  const std::string vocab = vocab_bytes(30);
  auto with_config = [&](const std::string& config_text) {
    std::vector<NamedTensor> ts;
    for (const auto& p : model.params().params()) ts.push_back({p.name, p.shape, p.value.data()});
    write_safetensors(bad, {{"format", "nmt"}, {"format_version", "1"}, {"config", config_text}},
                      ts, {{"vocab/sentencepiece", vocab}});
    return error_loading(bad);
  };
  std::string cj = config_to_json(cfg).dump();
  cj.pop_back();
  const int depth = 200000;
  CHECK(with_config(cj + R"(,"training":{"seed":)" + std::string(depth, '[') +
                    std::string(depth, ']') + "}}")
            .find("nested deeper than 64") != std::string::npos);
  CHECK(with_config(cj + R"(,"training":[1]})") ==
        bad + " (stored config): key \"training\": expected an object, got array");
  // Its keys and values are the training tier's to check, where a run
  // applies them (train/options.h); a stored one is never applied.
  TrainOptions o;
  CHECK_THROWS_WITH(apply_training_json({{"seed", -3}}, o, bad + " (stored config)"),
                    bad + " (stored config): training.seed: expected an integer >= 0, got -3");
  CHECK_THROWS_WITH(apply_training_json({{"warmup_stpes", 3}}, o, bad),
                    Catch::Contains("did you mean warmup_steps"));
  // A stored config edited to enormous sizes is refused by the shapes,
  // before its parameters are allocated (this would be 8 GiB; the
  // vocabulary is left as it is, which would be refused first).
  ModelConfig huge = cfg;
  huge.d_ff = 1 << 20;
  huge.d_model = 2048;
  huge.heads = 4;
  huge.d_k = huge.d_v = 512;
  CHECK(with_config(config_to_json(huge).dump()) ==
        bad + ": tensor embed/tokens has shape (30, 16) F32, expected (30, 2048) F32");

  // All-zero weights are refused: such a model translates everything to "".
  Transformer zero(cfg);
  zero.init(3);
  zero.params().values().zero();  // the padding between parameters is zero already
  {
    std::vector<NamedTensor> ts;
    for (const auto& p : zero.params().params()) ts.push_back({p.name, p.shape, p.value.data()});
    write_safetensors(
        bad, {{"format", "nmt"}, {"format_version", "1"}, {"config", config_to_json(cfg).dump()}},
        ts, {{"vocab/sentencepiece", vocab}});
    CHECK(error_loading(bad).find("every weight is zero") != std::string::npos);
  }
  // Non-finite weights are refused with the tensor's name.
  model.params().value(&model.params().params()[2]).data()[1] = std::nanf("");
  CHECK(with_config(config_to_json(cfg).dump())
            .find(model.params().params()[2].name + " holds a non-finite value") !=
        std::string::npos);
  std::remove(bad.c_str());
}

TEST_CASE("an f32 file loaded as int8 is rounded block by block as nmt quantize rounds it whole",
          "[model][int8]") {
  require_compute(Device::CPU, ComputeType::INT8);
  // d_ff 5000: the FFN's second matrix (16 x 5000) is read 13 rows at a
  // time (256 KB blocks), so its rows come from two blocks.
  ModelConfig cfg = tiny_config(30);
  cfg.d_ff = 5000;
  Transformer model(cfg);
  model.init(9);
  const std::string f32_path = "/tmp/nmt_test_int8_blocks_f32.nmt",
                    int8_path = "/tmp/nmt_test_int8_blocks.nmt";
  save_model(f32_path, model, vocab_bytes(30));
  save_model(int8_path, model, vocab_bytes(30), {}, /*int8=*/true);
  const LoadedModel from_f32 = load_model(f32_path, "int8"), from_int8 = load_model(int8_path);
  const auto& a = from_f32.net->params().params();
  const auto& b = from_int8.net->params().params();
  int checked = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].value.dtype() != DType::S8) continue;
    INFO(a[i].name);
    const int64_t rows = a[i].shape[0], cols = a[i].shape[1];
    const int8_t *qa = a[i].value.data_as<int8_t>(), *qb = b[i].value.data_as<int8_t>();
    CHECK(std::equal(qa, qa + rows * cols, qb));
    CHECK(std::equal(a[i].scales.data(), a[i].scales.data() + rows, b[i].scales.data()));
    checked += cols == 5000;
  }
  CHECK(checked == cfg.encoder_layers + cfg.decoder_layers);  // every layer's w2
  // A non-finite weight in a later block is named with its element.
  const std::string w2 = "decoder/layer_0/ffn/w2/weight";
  for (const auto& p : model.params().params())
    if (p.name == w2) model.params().value(&p).data()[13 * 5000 + 7] = std::nanf("");
  save_model(f32_path, model, vocab_bytes(30));
  try {
    load_model(f32_path, "int8");
    FAIL("a NaN weight loaded");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          f32_path + ": tensor " + w2 + " holds a non-finite value (nan at element 65007)");
  }
  std::remove(f32_path.c_str());
  std::remove(int8_path.c_str());
}

TEST_CASE("int8 loads as s8 rows, never floats: from an int8 file, and from an f32 file rounded alike",
          "[model][int8]") {
  require_compute(Device::CPU, ComputeType::INT8);
  ModelConfig cfg = tiny_config(30);
  cfg.positional = "learned";  // a table added, not multiplied: stays f32
  Transformer model(cfg);
  model.init(8);
  const std::string f32_path = "/tmp/nmt_test_int8_f32.nmt", int8_path = "/tmp/nmt_test_int8.nmt";
  save_model(f32_path, model, vocab_bytes(30));
  save_model(int8_path, model, vocab_bytes(30), {}, /*int8=*/true);
  CHECK(read_safetensors(int8_path).tensors.at("encoder/embed/positions").dtype == "F32");
  CHECK(read_safetensors(int8_path).tensors.at("encoder/layer_0/ffn/w1/weight").dtype == "I8");

  const LoadedModel from_int8 = load_model(int8_path);  // int8 by default
  const LoadedModel from_f32 = load_model(f32_path, "int8");
  const LoadedModel widened = load_model(int8_path, "f32");
  CHECK(from_int8.compute == ComputeType::INT8);
  REQUIRE(from_int8.net->params().holds_int8());
  const auto& a = from_int8.net->params().params();
  const auto& b = from_f32.net->params().params();
  const auto& w = widened.net->params().params();
  REQUIRE(a.size() == model.params().params().size());
  int matrices = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].name);
    const bool positions = a[i].name.find("/positions") != std::string::npos;
    CHECK(a[i].quantisable == (a[i].shape.ndim == 2 && !positions));
    if (!a[i].quantisable) {
      CHECK(a[i].value.dtype() == DType::F32);
      CHECK(std::equal(a[i].value.data(), a[i].value.data() + a[i].value.numel(),
                       model.params().params()[i].value.data()));
      continue;
    }
    ++matrices;
    REQUIRE(a[i].value.dtype() == DType::S8);
    const int64_t rows = a[i].shape[0], cols = a[i].shape[1];
    const int8_t* qa = a[i].value.data_as<int8_t>();
    const int8_t* qb = b[i].value.data_as<int8_t>();
    CHECK(std::equal(qa, qa + rows * cols, qb));
    CHECK(std::equal(a[i].scales.data(), a[i].scales.data() + rows, b[i].scales.data()));
    // Each row's largest weight is +-127 times its scale; f32 widens q * scale.
    for (int64_t r = 0; r < rows; ++r) {
      int amax = 0;
      for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::abs(int{qa[r * cols + c]}));
      CHECK(amax == 127);
      for (int64_t c = 0; c < cols; ++c)
        CHECK(w[i].value.data()[r * cols + c] == qa[r * cols + c] * a[i].scales.data()[r]);
    }
  }
  CHECK(matrices > 10);
  std::remove(f32_path.c_str());
  std::remove(int8_path.c_str());
}

TEST_CASE("a model file cut short after it was opened, and int8 scales that overflow, are refused",
          "[model][int8]") {
  require_compute(Device::CPU, ComputeType::INT8);
  ModelConfig cfg = tiny_config(30);
  Transformer model(cfg);
  model.init(4);
  const std::string path = "/tmp/nmt_test_cut.nmt";
  save_model(path, model, vocab_bytes(30), {}, /*int8=*/true);
  for (bool int8 : {false, true}) {
    // The weights are read after the header: a file cut short in between
    // (another process rewriting it) is an error naming it, not a crash.
    ModelConfig c;
    std::string spm;
    FileContents f = open_model(path, c, spm);
    const auto header = std::filesystem::file_size(path) - f.data.size();
    std::filesystem::resize_file(path, header + 64);  // into the first weights
    Transformer m(c);
    if (int8) m.init_for_loading(/*int8=*/true);
    try {
      load_weights(f, m);
      FAIL("a model cut short loaded");
    } catch (const InputError& e) {
      CHECK_THAT(e.what(), Catch::StartsWith(path + ": the file ended at byte") &&
                               Catch::Contains("cut short since it was opened"));
    }
    save_model(path, model, vocab_bytes(30), {}, /*int8=*/true);
  }
  // A scale that is finite but overflows once it multiplies the row's
  // largest value: refused in int8 as in f32, naming the tensor.
  FileContents f = read_safetensors(path);
  std::vector<NamedTensor> ts;
  std::vector<std::string> keep;  // the tensors' bytes
  keep.reserve(f.tensors.size());
  std::map<std::string, std::string> bytes;
  for (const Param& p : model.params().params()) {
    for (const std::string& name : {p.name, p.name + ".scale"}) {
      if (!f.has(name)) continue;
      const auto& e = f.tensors.at(name);
      keep.push_back(f.data.str(e.begin, e.end - e.begin));
      if (name == "decoder/layer_0/ffn/w2/weight.scale") {
        const float huge = 3e38f;
        std::memcpy(keep.back().data(), &huge, 4);
      }
      Shape shape;
      shape.ndim = static_cast<int>(e.shape.size());
      for (int i = 0; i < shape.ndim; ++i) shape.dims[i] = e.shape[i];
      ts.push_back({name, shape, keep.back().data(), e.dtype == "I8" ? DType::S8 : DType::F32});
    }
  }
  const std::string bad = "/tmp/nmt_test_overflow.nmt";
  write_safetensors(bad, f.metadata, ts, vocab_tensors(f));
  for (const char* compute : {"int8", "f32"}) {
    INFO(compute);
    try {
      load_model(bad, compute);
      FAIL("an overflowing scale loaded");
    } catch (const InputError& e) {
      CHECK_THAT(e.what(), Catch::StartsWith(bad + ": tensor decoder/layer_0/ffn/w2/weight holds "
                                                   "a non-finite value"));
    }
  }
  CHECK_NOTHROW(load_model(path));
  std::remove(path.c_str());
  std::remove(bad.c_str());
}
