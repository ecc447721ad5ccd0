// Training: the learning-rate schedule and Adam against their formulas,
// batching, a golden loss curve, a copy task learnt to near-zero loss,
// exact resumption from a checkpoint (in the Trainer and through the whole
// `nmt train` entry point), and the errors for bad inputs.
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "capability.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/token_batches.h"
#include "model/model_file.h"
#include "ops/ops.h"
#include "test_helpers.h"
#include "train/checkpoints.h"
#include "train/data.h"
#include "train/learning_curve.h"
#include "train/optimizer.h"
#include "train/train_run.h"

namespace fs = std::filesystem;
using namespace nmt;

namespace {

// A scratch directory removed at the end of each test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path =
        fs::temp_directory_path() / ("nmt_test_train_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream o(path);
  for (const auto& l : lines) o << l << "\n";
}

void write_gz(const std::string& path, const std::vector<std::string>& lines) {
  gzFile f = gzopen(path.c_str(), "wb");
  for (const auto& l : lines) {
    gzwrite(f, l.data(), static_cast<unsigned>(l.size()));
    gzwrite(f, "\n", 1);
  }
  gzclose(f);
}

// Random id sequences (ids 4..20, length 3..8); the target is the source,
// or the source reversed.
ParallelCorpus id_task(int n, uint32_t seed, bool reverse) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> len(3, 8), tok(4, 20);
  std::vector<std::vector<int32_t>> s(n), t(n);
  for (int i = 0; i < n; ++i) {
    s[i].resize(len(g));
    for (auto& x : s[i]) x = tok(g);
    t[i] = s[i];
    if (reverse) std::reverse(t[i].begin(), t[i].end());
  }
  return make_corpus(std::move(s), std::move(t), 63);
}

ModelConfig small_config(float dropout) {
  ModelConfig c = test::tiny_config(24);
  c.d_model = 32;
  c.d_ff = 64;
  c.heads = 4;
  c.d_k = c.d_v = 8;
  c.dropout = dropout;
  return c;
}

TrainOptions id_options() {
  TrainOptions o;
  o.batch_tokens = 160;
  o.warmup_steps = 50;
  o.lr_scale = 0.25;  // peak lr 4.4e-3 at d_model 32
  o.seed = 7;
  return o;
}

std::vector<double> run_steps(Trainer& t, int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(t.step().loss);
  return out;
}

// Sentences of a small artificial language: the target words are the
// source words with a suffix, in reverse order.
void make_text(int n, uint32_t seed, std::vector<std::string>& src, std::vector<std::string>& tgt) {
  const char* words[] = {"the", "cat",  "sat",   "on",  "a",      "mat",   "dog",
                         "ran", "to",   "house", "red", "big",    "small", "tree",
                         "saw", "bird", "sings", "in",  "garden", "blue"};
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> len(2, 7), w(0, 19);
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> ws(len(g));
    for (auto& x : ws) x = words[w(g)];
    std::string s, t;
    for (size_t k = 0; k < ws.size(); ++k) {
      s += (k ? " " : "") + ws[k];
      t += (k ? " " : "") + ws[ws.size() - 1 - k] + "en";
    }
    src.push_back(s);
    tgt.push_back(t);
  }
}

}  // namespace

TEST_CASE("learning-rate schedule follows the paper's formula", "[train]") {
  const double d = 512, w = 4000;
  for (int64_t step : {1, 10, 100, 3999, 4000, 4001, 10000, 100000}) {
    const double expected =
        std::pow(d, -0.5) * std::min(std::pow(double(step), -0.5), step * std::pow(w, -1.5));
    CHECK(noam_lr(step, 512, 4000) == Approx(expected).epsilon(1e-12));
    CHECK(noam_lr(step, 512, 4000, 2.5) == Approx(2.5 * expected).epsilon(1e-12));
  }
  // The peak is at the end of warmup.
  CHECK(noam_lr(4000, 512, 4000) > noam_lr(3999, 512, 4000));
  CHECK(noam_lr(4000, 512, 4000) > noam_lr(4001, 512, 4000));
  CHECK(noam_lr(4000, 512, 4000) == Approx(1.0 / std::sqrt(512.0 * 4000.0)));
}

TEST_CASE("Adam matches a double-precision reference with bias correction", "[train]") {
  ops::set_num_threads(2);
  const int64_t n = 1000;
  std::vector<float> p(n), g(n);
  std::vector<double> rp(n), rm(n, 0), rv(n, 0);
  std::mt19937 gen(3);
  std::normal_distribution<float> d(0.f, 1.f);
  for (int64_t i = 0; i < n; ++i) rp[i] = p[i] = d(gen);
  Adam adam(n);
  const double b1 = 0.9, b2 = 0.98, eps = 1e-9;
  for (int t = 1; t <= 5; ++t) {
    for (int64_t i = 0; i < n; ++i) g[i] = d(gen) * (i % 7 == 0 ? 1e-3f : 1.f);
    const double lr = 1e-3 * t;
    Tensor pt = Tensor::view_of(p.data(), Shape{n}), gt = Tensor::view_of(g.data(), Shape{n});
    adam.update(pt, gt, lr);
    for (int64_t i = 0; i < n; ++i) {
      rm[i] = b1 * rm[i] + (1 - b1) * g[i];
      rv[i] = b2 * rv[i] + (1 - b2) * double(g[i]) * g[i];
      const double mh = rm[i] / (1 - std::pow(b1, t)), vh = rv[i] / (1 - std::pow(b2, t));
      rp[i] -= lr * mh / (std::sqrt(vh) + eps);
    }
  }
  CHECK(adam.t() == 5);
  for (int64_t i = 0; i < n; ++i) {
    INFO("i = " << i);
    REQUIRE(p[i] == Approx(rp[i]).margin(1e-6).epsilon(1e-5));
    REQUIRE(adam.m().data()[i] == Approx(rm[i]).margin(1e-7).epsilon(1e-5));
  }
  // The first step moves every parameter by about lr (sign of the gradient).
  Adam fresh(3);
  std::vector<float> q = {0.f, 0.f, 0.f}, gq = {2.f, -0.5f, 1e-4f};
  Tensor qt = Tensor::view_of(q.data(), Shape{3}), gqt = Tensor::view_of(gq.data(), Shape{3});
  fresh.update(qt, gqt, 0.01);
  CHECK(q[0] == Approx(-0.01).epsilon(1e-4));
  CHECK(q[1] == Approx(0.01).epsilon(1e-4));
  CHECK(q[2] == Approx(-0.01).epsilon(1e-3));
  CHECK(ops::l2_norm(gqt) == Approx(std::sqrt(4.0 + 0.25 + 1e-8)));
}

TEST_CASE("batching by tokens: each batch the longest prefix within the budget", "[train]") {
  // The reference: from each start, the most items whose count times their
  // widest fits the budget, and at least one.
  auto naive = [](const std::vector<int64_t>& w, int64_t budget) {
    std::vector<size_t> ends;
    for (size_t begin = 0; begin < w.size();) {
      size_t end = begin + 1;
      while (end < w.size()) {
        const int64_t widest = *std::max_element(w.begin() + begin, w.begin() + end + 1);
        if (widest * static_cast<int64_t>(end + 1 - begin) > budget) break;
        ++end;
      }
      ends.push_back(end);
      begin = end;
    }
    return ends;
  };
  std::mt19937 g(11);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<int64_t> w(g() % 8);
    for (auto& x : w) x = 1 + g() % 9;
    const int64_t budget = 1 + g() % 30;
    INFO("trial " << trial);
    CHECK(token_batch_ends(w.size(), budget, [&](size_t k) { return w[k]; }) == naive(w, budget));
  }
}

TEST_CASE("batches hold similar lengths within the token budget and cover the data once",
          "[train]") {
  ParallelCorpus c = id_task(500, 1, false);
  // Too long and empty pairs are skipped and counted.
  ParallelCorpus f = make_corpus({{4, 5}, std::vector<int32_t>(40, 6), {}, {7}},
                                 {{4, 5}, {6}, {8}, std::vector<int32_t>(31, 7)}, 30);
  CHECK(f.size() == 1);
  CHECK(f.skipped_long == 2);
  CHECK(f.skipped_empty == 1);

  const auto b0 = make_batches(c, 100, 5, 0);
  std::multiset<int64_t> seen;
  for (const auto& b : b0) {
    int64_t w = 0;
    for (int64_t i : b) {
      seen.insert(i);
      w = std::max<int64_t>(w, std::max(c.src[i].size(), c.tgt[i].size()) + 1);
    }
    CHECK(int64_t(b.size()) * w <= 100);
    const TokenBatch tb = gather_batch(c, b, ModelConfig{});
    CHECK(tb.B * std::max(tb.S, tb.T) <= 100);
  }
  CHECK(seen.size() == 500);
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 500);
  CHECK(make_batches(c, 100, 5, 0) == b0);  // deterministic
  CHECK(make_batches(c, 100, 5, 1) != b0);  // reshuffled each epoch
  CHECK(make_batches(c, 100, 6, 0) != b0);

  BatchStream s(c, 100, 5);
  const int64_t n = s.batches_per_epoch();
  for (int64_t i = 0; i < n + 2; ++i) s.next();
  CHECK(s.epoch() == 1);
  CHECK(s.index() == 2);
}

namespace {

// The formula tests/reference/golden_curve.py initialises its weights with:
// the sine of the element index, its phase taken from the parameter's name.
void golden_init(ParamStore& store) {
  for (const Param& p : store.params()) {
    int h = 0;
    for (unsigned char c : p.name) h += c;
    h %= 97;
    Tensor v = store.value(&p);
    const auto ends = [&](const std::string& suffix) {
      return p.name.size() >= suffix.size() &&
             p.name.compare(p.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    for (int64_t i = 0; i < v.numel(); ++i) {
      const double x = std::sin(0.37 * double(i) + 1.11 * h);
      double value;
      if (ends("/gamma"))
        value = 1 + 0.1 * x;
      else if (ends("/beta") || ends("/bias"))
        value = 0.1 * x;
      else
        value = 1.4 / std::sqrt(double(p.shape[1])) * x;
      v.data()[i] = static_cast<float>(value);
    }
  }
}

// Its ten batches: six sentences each, ids 4..23, lengths 2..7, reversed.
TokenBatch golden_batch(int step) {
  std::vector<std::vector<int32_t>> src, tgt;
  for (int j = 0; j < 6; ++j) {
    const int n = 2 + (step * 7 + j * 3) % 6;
    std::vector<int32_t> s;
    for (int k = 0; k < n; ++k) s.push_back(4 + (step * 13 + j * 5 + k * 7) % 20);
    src.push_back(s);
    tgt.emplace_back(s.rbegin(), s.rend());
  }
  std::vector<const std::vector<int32_t>*> ps, pt;
  for (int j = 0; j < 6; ++j) ps.push_back(&src[j]), pt.push_back(&tgt[j]);
  return make_batch(ps, pt);
}

std::vector<double> fixture_losses(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  const nlohmann::json j = nlohmann::json::parse(in);
  return j.at("losses").get<std::vector<double>>();
}

}  // namespace

TEST_CASE("the loss curve matches an independent PyTorch implementation", "[train]") {
  // tests/reference/golden_curve.py built the same model from scratch in
  // PyTorch, with the same weights and batches and no dropout, and recorded
  // its losses (tests/fixtures/golden_curve.json).
  const std::vector<double> reference =
      fixture_losses(std::string(NMT_SOURCE_DIR) + "/tests/fixtures/golden_curve.json");
  ops::set_num_threads(2);
  Transformer model(test::tiny_config(24));
  model.init(1);
  golden_init(model.params());
  Grads grads(model.params());
  Activations acts;
  Adam adam(model.params().size());
  Tensor dlogits;
  for (size_t step = 1; step <= reference.size(); ++step) {
    const TokenBatch b = golden_batch(static_cast<int>(step - 1));
    grads.zero();
    model.forward(b, acts, true, 0);
    const auto l = ops::label_smoothed_xent(acts.logits, acts.tgt_out_ids, 0.1f, kNoToken, &dlogits,
                                            1.f / static_cast<float>(b.tgt_tokens()));
    model.backward(b, acts, dlogits, grads);
    adam.update(model.params().values(), grads.buffer(), noam_lr(int64_t(step), 16, 4, 0.5));
    INFO("step " << step << ": nmt " << std::setprecision(9) << l.loss / l.tokens << ", PyTorch "
                 << reference[step - 1]);
    CHECK(l.loss / l.tokens == Approx(reference[step - 1]).epsilon(1e-5));
  }
}

// A record of this implementation's own curve (dropout, two batches per
// update): it detects change, not correctness; the test above does that.
TEST_CASE("loss curve regression record of a tiny model", "[train]") {
  ops::set_num_threads(2);
  ParallelCorpus c = id_task(300, 11, true);
  Transformer model(small_config(0.1f));
  model.init(7);
  TrainOptions o = id_options();
  o.update_freq = 2;
  Trainer t(model, c, o);
  const std::vector<double> losses = run_steps(t, 30);
  // Recorded from this implementation (2 threads) after checking that it
  // learns: reversal with label smoothing, dropout 0.1, two batches per
  // update. Recorded again when dropout's masks took one hash per pair of
  // elements (the curve before ended at 2.776159, this one at 2.758357).
  const std::vector<double> golden = {
      3.941127, 3.900818, 3.730374, 3.800779, 3.612705, 3.560350, 3.428800, 3.373188,
      3.228568, 3.105393, 3.274377, 3.037633, 3.116486, 3.006518, 3.067843, 2.935313,
      2.932021, 2.964991, 3.039321, 2.936546, 2.904190, 2.833807, 2.771625, 2.915413,
      2.838234, 2.832840, 2.681839, 2.774001, 2.773577, 2.758357,
  };
  std::string got;
  for (double l : losses) got += std::to_string(l) + ", ";
  INFO("losses: " << got);
  REQUIRE(losses.size() == golden.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(losses[i] == Approx(golden[i]).epsilon(1e-3));
  }
  CHECK(losses.back() < losses.front() - 0.3);
}

TEST_CASE("a tiny model learns to copy to near-zero loss", "[train]") {
  ops::set_num_threads(2);
  ParallelCorpus c = id_task(1000, 21, false);
  ParallelCorpus valid = id_task(100, 22, false);
  ModelConfig cfg = small_config(0.f);
  cfg.d_model = 64;
  cfg.d_ff = 128;
  cfg.d_k = cfg.d_v = 16;
  cfg.label_smoothing = 0.f;
  Transformer model(cfg);
  model.init(3);
  TrainOptions o = id_options();
  o.batch_tokens = 400;
  o.warmup_steps = 50;
  o.lr_scale = 0.4;  // peak lr 7e-3 at d_model 64
  Trainer t(model, c, o);
  const auto t0 = std::chrono::steady_clock::now();
  const int steps = 500;
  // The median of the last 20 updates: a batch of 400 tokens now and then
  // costs several times the others (0.6 nats among 0.03s), and their mean
  // followed those few (0.12 on an AVX2 machine's rounding, where the median
  // is 0.065).
  std::vector<double> last;
  for (int i = 0; i < steps; ++i) {
    const double l = t.step().nll;
    if (i >= steps - 20) last.push_back(l);
  }
  std::nth_element(last.begin(), last.begin() + 10, last.end());
  const double loss = last[10];
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ValidStats v = t.validate(valid, nullptr, nullptr, 0);
  WARN("copy task: train nll " << loss << " after " << steps << " steps, " << sec
                               << " s; valid nll " << v.nll << ", greedy BLEU " << v.bleu);
  // The loss of the last updates varies with rounding and seed (0.065 on an
  // AVX2 machine, 0.129 on an AVX-512 Xeon's, from about 3 at the start);
  // unseen sequences tell whether it learned.
  CHECK(loss < 0.2);
  CHECK(v.nll < 0.15);  // unseen sequences
  CHECK(v.bleu > 90);
}

// Tagged [bf16]: run by the ctest entry nmt_tests_bf16, skipped without bf16.
TEST_CASE("bf16 mixed precision: gradients within bf16 rounding of f32, and a copy model learns",
          "[train][bf16]") {
  using namespace nmt::test;
  ModelConfig cfg = tiny_config(30);
  Transformer model(cfg);
  model.init(3);
  require_compute(model.params().values().device(), ComputeType::BF16);
  auto src = random_sequences(6, 3, 9, 30, 5), tgt = random_sequences(6, 3, 9, 30, 6);
  std::vector<const std::vector<int32_t>*> ps, pt;
  for (size_t i = 0; i < src.size(); ++i) ps.push_back(&src[i]), pt.push_back(&tgt[i]);
  TokenBatch b = make_batch(ps, pt);
  auto gradients = [&](ComputeType ct) {
    model.params().set_compute_type(ct);
    Grads g(model.params());
    Activations acts;
    Tensor dlogits;
    g.zero();
    model.forward(b, acts, true, 1);
    ops::label_smoothed_xent(acts.logits, acts.tgt_out_ids, 0.1f, kNoToken, &dlogits, 1.f);
    model.backward(b, acts, dlogits, g);
    const float* p = g.buffer().data();  // a CPU model: host memory
    return std::vector<float>(p, p + g.buffer().numel());
  };
  const auto g32 = gradients(ComputeType::F32), g16 = gradients(ComputeType::BF16);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < g32.size(); ++i)
    diff += double(g16[i] - g32[i]) * (g16[i] - g32[i]), norm += double(g32[i]) * g32[i];
  const double rel = std::sqrt(diff / norm);
  INFO("relative L2 difference of the gradients " << rel);
  // Every layer's products round to 8-bit mantissas, and backward passes
  // through softmax and layer norm add their own: about 0.5% per product at
  // the output, 5-10% at the embeddings of a random tiny model (cosine
  // similarity above 0.99); the copy task below shows training still works.
  CHECK(rel > 0);  // the bf16 products did run
  CHECK(rel < 0.12);

  ModelConfig small = tiny_config(20);
  small.d_model = 32;
  small.d_ff = 64;
  small.d_k = small.d_v = 8;
  Transformer copier(small);
  copier.init(42);
  copier.params().set_compute_type(ComputeType::BF16);
  const double loss = train_copy_task(copier, 500);
  INFO("bf16 copy-task loss " << loss);
  CHECK(loss < 0.1);
}

TEST_CASE("resuming from a checkpoint repeats the uninterrupted losses exactly", "[train]") {
  ops::set_num_threads(2);
  TempDir dir("resume");
  ParallelCorpus c = id_task(120, 31, true);  // a few batches: the run crosses epochs
  const ModelConfig cfg = small_config(0.2f);
  TrainOptions o = id_options();
  o.update_freq = 2;

  Transformer a(cfg);
  a.init(9);
  Trainer ta(a, c, o);
  const auto full = run_steps(ta, 14);
  REQUIRE(ta.epoch() >= 1);

  Transformer b(cfg);
  b.init(9);
  Trainer tb(b, c, o);
  auto first = run_steps(tb, 6);
  tb.save(dir / "ckpt.nmt", "", {{"note", "x"}});

  Transformer r(cfg);
  r.init(12345);  // overwritten by the checkpoint
  Trainer tr(r, c, o);
  const TrainState st = tr.load(read_safetensors(dir / "ckpt.nmt"));
  CHECK(st.step == 6);
  CHECK(st.extra["note"] == "x");
  auto rest = run_steps(tr, 8);
  first.insert(first.end(), rest.begin(), rest.end());
  REQUIRE(first.size() == full.size());
  for (size_t i = 0; i < full.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(first[i] == full[i]);
  }
}

TEST_CASE("nmt train end to end: interrupt, resume, logs, best model, averaging", "[train]") {
  ops::set_num_threads(2);
  TempDir dir("e2e");
  std::vector<std::string> src, tgt, vsrc, vtgt;
  make_text(400, 41, src, tgt);
  make_text(30, 42, vsrc, vtgt);
  // One pair too long for max_positions: skipped and counted.
  std::string longer;
  for (int i = 0; i < 40; ++i) longer += "garden tree ";
  src.push_back(longer);
  tgt.push_back("treeen");
  write_gz(dir / "train.src.gz", src);
  write_lines(dir / "train.tgt", tgt);
  write_lines(dir / "valid.src", vsrc);
  write_lines(dir / "valid.tgt", vtgt);

  ModelConfig cfg = small_config(0.1f);
  cfg.name = "e2e";
  cfg.max_positions = 32;
  cfg.vocab_size = 60;
  TrainOptions o;
  o.train_src = {std::string(dir / "train.src.gz")};
  o.train_tgt = {std::string(dir / "train.tgt")};
  o.valid_src = dir / "valid.src";
  o.valid_tgt = dir / "valid.tgt";
  o.batch_tokens = 300;
  o.max_steps = 8;
  o.warmup_steps = 20;
  o.valid_every = 4;
  o.checkpoint_every = 2;
  o.keep_checkpoints = 2;
  o.average_last = 3;  // keeps 3 despite keep_checkpoints 2
  o.seed = 5;

  TrainOptions full = o;
  full.out = dir / "full.nmt";
  std::vector<std::string> lines;
  TrainCallbacks quiet;
  quiet.log = [&](const std::string& l) { lines.push_back(l); };
  const TrainResult rf = train(cfg, full, quiet);
  CHECK(rf.stop_reason == "max-steps");
  CHECK(rf.losses.size() == 8);
  CHECK(fs::exists(full.out));
  CHECK(fs::exists(full.out + ".best"));
  CHECK(fs::exists(full.out + ".curve.svg"));
  CHECK(list_checkpoints(full.out).size() == 3);
  bool counted = false;
  for (const auto& l : lines)
    counted |= l.find("skipped 1 longer than 31 subwords") != std::string::npos;
  CHECK(counted);
  {
    std::ifstream log(full.out + ".log.jsonl");
    std::string line;
    int train_lines = 0, valid_lines = 0;
    bool data = false;
    while (std::getline(log, line)) {
      const auto j = nlohmann::json::parse(line);
      train_lines += j["type"] == "train";
      valid_lines += j["type"] == "valid" && j.contains("bleu");
      if (j["type"] == "data") data = j["skipped_long"] == 1;
    }
    CHECK(train_lines == 8);
    CHECK(valid_lines >= 2);
    CHECK(data);
  }
  // The written model loads as a model.
  ModelConfig back;
  std::string spm;
  open_model(full.out, back, spm);
  CHECK(!spm.empty());
  CHECK(back.vocab_size <= 60);

  // Interrupted after step 3 (a signal would set the flag the same way).
  TrainOptions part = o;
  part.out = dir / "part.nmt";
  std::atomic<int> stop{0};
  TrainCallbacks cb;
  cb.stop = &stop;
  cb.progress = [&](const TrainProgress& p) {
    if (p.stats.step == 3) stop = 2;
  };
  const TrainResult r1 = train(cfg, part, cb);
  CHECK(r1.interrupted);
  CHECK(r1.steps == 3);
  CHECK(!fs::exists(part.out));
  REQUIRE(!list_checkpoints(part.out).empty());
  CHECK(list_checkpoints(part.out).back().find("step-000000003.nmt") != std::string::npos);

  // Without --resume, an existing run is not overwritten.
  CHECK_THROWS_AS(train(cfg, part, {}), InputError);

  part.resume = true;
  const TrainResult r2 = train(cfg, part, {});
  CHECK(!r2.interrupted);
  REQUIRE(r1.losses.size() + r2.losses.size() == rf.losses.size());
  for (size_t i = 0; i < rf.losses.size(); ++i) {
    const double l = i < r1.losses.size() ? r1.losses[i] : r2.losses[i - r1.losses.size()];
    INFO("step " << i + 1);
    CHECK(l == rf.losses[i]);
  }
  // The log was continued, not duplicated.
  std::ifstream log(part.out + ".log.jsonl");
  std::string line;
  int train_lines = 0;
  while (std::getline(log, line)) train_lines += nlohmann::json::parse(line)["type"] == "train";
  CHECK(train_lines == 8);
  // Final models agree too.
  const auto fa = read_safetensors(full.out), fb = read_safetensors(part.out);
  CHECK(fa.data.str(0, fa.data.size()) == fb.data.str(0, fb.data.size()));
}

TEST_CASE("a stop in the final phase writes no OUT; --resume refuses changed data", "[train]") {
  ops::set_num_threads(2);
  TempDir dir("final-stop");
  std::vector<std::string> src, tgt, vsrc, vtgt;
  make_text(300, 51, src, tgt);
  make_text(30, 52, vsrc, vtgt);
  write_lines(dir / "train.src", src);
  write_lines(dir / "train.tgt", tgt);
  write_lines(dir / "valid.src", vsrc);
  write_lines(dir / "valid.tgt", vtgt);
  ModelConfig cfg = small_config(0.f);
  cfg.max_positions = 32;
  cfg.vocab_size = 60;
  TrainOptions o;
  o.train_src = {dir / "train.src"};
  o.train_tgt = {dir / "train.tgt"};
  o.valid_src = dir / "valid.src";
  o.valid_tgt = dir / "valid.tgt";
  o.out = dir / "m.nmt";
  o.batch_tokens = 300;
  o.max_steps = 4;
  o.valid_every = 2;
  o.checkpoint_every = 2;
  o.average_last = 2;
  o.shortlist = true;
  // Stopped once the final weights are chosen: inside the shortlist's build
  // or measurement.
  std::atomic<int> stop{0};
  std::vector<std::string> lines;
  TrainCallbacks cb;
  cb.stop = &stop;
  cb.log = [&](const std::string& l) {
    lines.push_back(l);
    if (l.rfind("final model:", 0) == 0) stop = 15;
  };
  const TrainResult r = train(cfg, o, cb);
  CHECK(r.interrupted);
  CHECK(r.steps == 4);
  CHECK(r.model_path.empty());
  CHECK(!fs::exists(o.out));
  CHECK(!fs::exists(partial_path(o.out)));
  REQUIRE(!list_checkpoints(o.out).empty());
  CHECK(checkpoint_step(list_checkpoints(o.out).back()) == 4);
  CHECK(lines.back().find("interrupted at step 4, before") == 0);

  // The training text changed since (the same number of lines): refused,
  // naming the file, unless the run is told to go on with new data.
  src[7] += " garden";
  write_lines(dir / "train.src", src);
  o.resume = true;
  o.max_steps = 5;
  std::string why;
  try {
    train(cfg, o, {});
  } catch (const DataChanged& e) {
    why = e.what();
  }
  CHECK(why.find(dir / "train.src" + " has changed since checkpoint step-000000004.nmt was " +
                 "written (the same 300 lines in number, other text)") == 0);
  CHECK(!fs::exists(o.out));
  o.resume_with_new_data = true;
  lines.clear();
  TrainCallbacks quiet;
  quiet.log = [&](const std::string& l) { lines.push_back(l); };
  const TrainResult r2 = train(cfg, o, quiet);
  CHECK(!r2.interrupted);
  CHECK(r2.steps == 5);
  CHECK(fs::exists(o.out));
  bool warned = false;
  for (const auto& l : lines) warned |= l.find("warning: " + dir / "train.src" + " has changed") == 0;
  CHECK(warned);
}

TEST_CASE("text tokenised otherwise than the vocabulary: refused when none is known, else warned",
          "[train]") {
  const int32_t unk = 1;
  CHECK(check_known_tokens(token_coverage({{4, 5}, {6}}, unk), "source", "a.src").empty());
  CHECK(check_known_tokens(token_coverage({{}, {}}, unk), "source", "blank").empty());
  CHECK(check_known_tokens(token_coverage({{4, 1}, {5, 6, 7, 8, 9, 10, 11, 12, 13}}, unk),
                           "source", "a.src")
            .empty());  // one in ten: within kWarnUnknownShare
  CHECK(check_known_tokens(token_coverage({{4, 1}, {1}}, unk), "target", "b.tgt") ==
        "67% of the target tokens of b.tgt (2 of 3) are not in the model's vocabulary (<unk>): "
        "is it tokenised as the model expects?");
  CHECK_THROWS_WITH(check_known_tokens(token_coverage({{1, 1}, {1}}, unk), "source", "raw.src"),
                    "no source token of raw.src is in the model's vocabulary (all 3 are <unk>): "
                    "is it tokenised as the model expects?");
  // A vocabulary without <unk> knows everything it encodes.
  CHECK(check_known_tokens(token_coverage({{1, 1}}, -1), "source", "a.src").empty());
}

TEST_CASE("lines_digest tells text, order and line ends apart, and stays put", "[train]") {
  const std::vector<std::string> a = {"ein Haus", "zwei", ""};
  CHECK(lines_digest(a) == lines_digest(std::vector<std::string>(a)));
  CHECK(lines_digest(a) != lines_digest({"ein Haus", "zwei"}));
  CHECK(lines_digest(a) != lines_digest({"zwei", "ein Haus", ""}));
  CHECK(lines_digest({"ab", "c"}) != lines_digest({"a", "bc"}));
  CHECK(lines_digest({"ein Haus!"}) != lines_digest({"ein Haus?"}));
  CHECK(lines_digest({}) != lines_digest({""}));
  // Past one block of lines (hashed in parallel): the last line counts.
  std::vector<std::string> many(10000, "a longer line of text");
  const uint64_t d = lines_digest(many);
  many.back() += ".";
  CHECK(lines_digest(many) != d);
  // Checkpoints record it: a change to the function refuses every resume.
  CHECK(lines_digest({"ein Haus", "zwei", ""}) == 0x3d705366ac3e2b95ull);
}

TEST_CASE("bad training inputs give one clear error before training", "[train]") {
  TempDir dir("bad");
  write_lines(dir / "a.src", {"one", "two", "three"});
  write_lines(dir / "a.tgt", {"eins", "zwei"});
  write_lines(dir / "b.tgt", {"eins", "zwei", "drei"});
  write_lines(dir / "empty.txt", {});
  ModelConfig cfg = small_config(0.f);
  auto opts = [&](const std::string& s, const std::string& t) {
    TrainOptions o;
    o.train_src = {s};
    o.train_tgt = {t};
    o.out = dir / "m.nmt";
    o.max_steps = 1;
    return o;
  };
  auto message = [&](const TrainOptions& o) -> std::string {
    try {
      train(cfg, o, {});
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no InputError)";
  };
  std::string m = message(opts(dir / "a.src", dir / "a.tgt"));
  // Whole messages: the folder's name holds the pid, so a digit or a word of
  // the file names ("empty") would match whatever the message said.
  const std::string differ = "parallel files differ in length: " + dir / "a.src" +
                             " has 3 lines but " + dir / "a.tgt" + " has 2";
  CHECK(m == differ);
  m = message(opts(dir / "missing.src", dir / "a.tgt"));
  CHECK(m == "{train_src} " + dir / "missing.src" + ": No such file or directory");
  m = message(opts(dir / "empty.txt", dir / "a.tgt"));
  CHECK(m == dir / "empty.txt" + ": the file is empty (expected one sentence per line)");
  TrainOptions v = opts(dir / "a.src", dir / "b.tgt");
  v.valid_src = dir / "a.src";
  CHECK(message(v) == "{valid_src} and {valid_tgt} go together: give both or neither");
  v.valid_tgt = dir / "a.tgt";
  CHECK(message(v) == differ);  // the validation pair this time
  CHECK(!fs::exists(dir / "m.nmt"));

  // The library names an option by its key, {batch_tokens}, which nmt
  // writes as its flag (--batch-tokens) and a program as it likes.
  TrainOptions o;
  auto opt_error = [&](const nlohmann::json& j, bool cli) -> std::string {
    try {
      apply_training_json(j, o, "models/x.json", cli);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no InputError)";
  };
  CHECK(opt_error({{"batch_tokens", 0}}, true) ==
        "{batch_tokens}: expected an integer >= 2, got 0");
  CHECK(opt_error({{"max_steps", -5}}, true) == "{max_steps}: expected an integer >= 0, got -5");
  CHECK(opt_error({{"warmup_steps", 0}}, true) == "{warmup_steps}: expected an integer >= 1, got 0");
  CHECK(opt_error({{"update_freq", 1.5}}, false) ==
        "models/x.json: training.update_freq: expected an integer >= 1, got 1.5");
  CHECK(opt_error({{"lr_scale", 0}}, true) == "{lr_scale}: expected a number > 0, got 0");
  CHECK(opt_error({{"best_metric", "ter"}}, true) ==
        "{best_metric}: expected \"bleu\" or \"loss\", got \"ter\"");
  CHECK(opt_error({{"warmup", 10}}, false) ==
        "models/x.json: unknown key \"training.warmup\" (did you mean warmup_steps?)");
  apply_training_json({{"warmup_steps", 10}, {"batch_tokens", 999}, {"max_minutes", 1.5}}, o, "x");
  CHECK(o.warmup_steps == 10);
  CHECK(o.batch_tokens == 999);
  CHECK(o.max_minutes == 1.5);
}

TEST_CASE("the learning curve labels small BLEU values with enough decimals", "[train]") {
  CurveData d;
  d.title = "t";
  for (int s = 1; s <= 5; ++s) {
    d.train_loss.push_back({double(s), 5.0 - 0.1 * s});
    d.valid_loss.push_back({double(s), 5.0 - 0.1 * s});
    d.valid_bleu.push_back({double(s), 0.01 * s});
  }
  // The BLEU axis (from zero, as the chart draws it) must not read the same
  // at every tick.
  const plot::LineChart chart = learning_curve(d);
  REQUIRE(chart.series.size() == 3);
  CHECK(chart.series[2].right_axis);
  const plot::Ticks t = plot::ticks(0, 0.05, 5);
  const std::set<std::string> labels(t.labels.begin(), t.labels.end());
  CHECK(labels.size() == t.labels.size());
  CHECK(labels.size() >= 3);
  CHECK(!labels.count("0.0"));
  CHECK(t.values.back() >= 0.05 - 1e-12);
  // Cairo writes each format: a PNG signature, an SVG document, a PDF header.
  const std::string png = plot::render(chart, plot::Format::PNG);
  CHECK(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  const std::string svg = plot::render(chart, plot::Format::SVG);
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(plot::render(chart, plot::Format::PDF).compare(0, 5, "%PDF-") == 0);
}

TEST_CASE("text with nothing SentencePiece keeps is an empty side", "[train]") {
  for (const char* blank : {"", "   ", "\t \r", "\xe3\x80\x80 \xe3\x80\x80", "\x01\x02\x03\x7f",
                            "\xe2\x80\x8b\xef\xbb\xbf", "\xc2\x85\xc2\xa0"})
    CHECK_FALSE(has_usable_text(blank));
  for (const char* text : {"a", " \xe3\x80\x80x", "\xc3\xa9", "\xff",
                           "\xe2\x80\x8b"
                           "1"})
    CHECK(has_usable_text(text));
  std::vector<std::string> src = {"one", "   ", "three", "\xe2\x80\x8b"};
  std::vector<std::string> tgt = {"eins", "zwei", "\x01", "vier"};
  CHECK(clear_unusable_pairs(src, tgt) == 1);
  CHECK(src == std::vector<std::string>{"one", "", "", ""});
  CHECK(tgt == std::vector<std::string>{"eins", "", "", ""});
}

TEST_CASE("options that multiply memory are bounded by the machine's, naming the option",
          "[train]") {
  const ModelConfig cfg = small_config(0.f);
  const uint64_t gib8 = uint64_t{8} << 30;
  TrainOptions o;
  CHECK_NOTHROW(check_memory_bounds(o, cfg, 32000, gib8));
  o.update_freq = 1000000000;
  CHECK_THROWS_WITH(
      check_memory_bounds(o, cfg, 32000, gib8),
      Catch::StartsWith("{update_freq} 1000000000:") && Catch::Contains("expected at most"));
  o.update_freq = 1;
  o.batch_tokens = 1000000000;
  CHECK_THROWS_AS(check_memory_bounds(o, cfg, 32000, gib8), OptionError);
  CHECK_THROWS_WITH(check_memory_bounds(o, cfg, 32000, gib8),
                    Catch::StartsWith("{batch_tokens} 1000000000:"));
  CHECK(physical_memory_bytes() > 0);
}

TEST_CASE("a checkpoint's checksum covers its data and metadata; damage is named", "[train]") {
  TempDir dir("ckpt_sum");
  const std::vector<float> w = {1.f, -2.f, 3.f}, m = {0.1f, 0.2f, 0.3f}, v = {0.f, 0.5f, 1.f};
  std::map<std::string, std::string> meta = {
      {"training_state",
       R"({"step":6,"epoch":0,"batch_index":1,"seed":1,"adam_t":6,"batch_tokens":100,)"
       R"("update_freq":1,"train_pairs":3})"}};
  auto write = [&](const std::vector<float>& vv, bool with_sum) {
    const std::vector<NamedTensor> t = {{"w", Shape{3}, w.data()},
                                        {"optimizer/adam_m", Shape{3}, m.data()},
                                        {"optimizer/adam_v", Shape{3}, vv.data()}};
    auto mm = meta;
    if (with_sum) mm["checksum"] = content_checksum(mm, t, {{"vocab/sentencepiece", "spm"}});
    write_safetensors(dir / "c.nmt", mm, t, {{"vocab/sentencepiece", "spm"}});
    return read_safetensors(dir / "c.nmt");
  };
  FileContents f = write(v, true);
  CHECK(f.metadata.at("checksum").rfind("crc32:", 0) == 0);
  CHECK(content_checksum(f) == f.metadata.at("checksum"));
  CHECK(checkpoint_problem(f, 6).empty());
  CHECK_THAT(checkpoint_problem(f, 7), Catch::Contains("step 6") && Catch::Contains("step 7"));
  const std::string bytes = f.data.str(0, f.data.size());
  std::vector<char> flipped(bytes.begin(), bytes.end());
  flipped[5] ^= 0x04;  // a flipped bit in w
  f.data.hold(std::move(flipped));
  CHECK_THAT(checkpoint_problem(f, 6), Catch::Contains("checksum does not match"));
  f = write(v, true);
  f.metadata["training_state"][8] = '9';  // "step":9
  CHECK_THAT(checkpoint_problem(f, 6), Catch::Contains("checksum does not match"));
  // Without a checksum (an older checkpoint): checked structurally only.
  f = write(v, false);
  CHECK(checkpoint_problem(f, 6).empty());
  f = write({0.f, -0.5f, 1.f}, false);
  CHECK_THAT(checkpoint_problem(f, 6),
             Catch::Contains("optimizer/adam_v holds a negative value at element 1"));
  f = write({0.f, NAN, 1.f}, false);
  CHECK_THAT(checkpoint_problem(f, 6), Catch::Contains("non-finite"));
}
