// Placement: a model built, trained, saved, loaded and decoded on a device
// other than the CPU. Without a GPU the device is a GuardedDevice, the CPU's
// arithmetic on memory the host cannot touch (tests/guarded_device.h), so
// every result must equal the CPU's exactly, and any code above the seam
// that reads a device tensor on the host crashes the test. On a machine with
// a GPU the same cases run again on it ([gpu], skipped without one).
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "capability.h"
#include "core/backend.h"
#include "core/dynlib.h"
#include "decode/ensemble.h"
#include "decode/search.h"
#include "decode/translator.h"
#include "guarded_device.h"
#include "model/loaded_model.h"
#include "model/model_file.h"
#include "model/quantise.h"
#include "model/shortlist.h"
#include "ops/ops.h"
#include "test_helpers.h"
#include "train/data.h"
#include "train/train_run.h"
#include "train/trainer.h"

using namespace nmt;
using namespace nmt::test;
namespace fs = std::filesystem;

namespace {

struct Scratch {
  fs::path path;
  explicit Scratch(const std::string& name)
      : path(fs::temp_directory_path() /
             ("nmt_test_device_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

// Sentences of a small artificial language (no data files: the GPU machine
// has only the checkout): the target is the source's words reversed, each
// with a suffix.
void synthetic_text(int n, uint32_t seed, std::vector<std::string>& src,
                    std::vector<std::string>& tgt) {
  static const char* words[] = {"red",  "blue", "dog",  "cat",   "runs", "sleeps", "big",
                                "tiny", "the",  "a",    "house", "tree", "over",   "under",
                                "old",  "new",  "bird", "sings", "eats", "grass"};
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> len(2, 7), word(0, 19);
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> w(len(g));
    for (auto& x : w) x = words[word(g)];
    std::string a, b;
    for (size_t k = 0; k < w.size(); ++k) {
      a += (k ? " " : "") + w[k];
      b += (k ? " " : "") + w[w.size() - 1 - k] + "en";
    }
    src.push_back(a), tgt.push_back(b);
  }
}

ParallelCorpus reverse_task(int n, uint32_t seed) {
  auto src = random_sequences(n, 3, 8, 24, seed);
  auto tgt = src;
  for (auto& t : tgt) std::reverse(t.begin(), t.end());
  return make_corpus(std::move(src), std::move(tgt), 63);
}

ModelConfig small_config() {
  ModelConfig c = tiny_config(24);
  c.d_model = 32;
  c.d_ff = 64;
  c.d_k = c.d_v = 8;
  c.dropout = 0.1f;  // dropout masks must not depend on the device
  c.attention_dropout = 0.1f;
  return c;
}

TrainOptions train_options() {
  TrainOptions o;
  o.batch_tokens = 160;
  o.warmup_steps = 20;
  o.lr_scale = 0.25;
  o.seed = 7;
  return o;
}

std::vector<float> host_values(const ParamStore& store) {
  std::vector<float> staging;
  const float* v = ops::host_data(store.values(), staging);
  return std::vector<float>(v, v + store.values().numel());
}

// Results on `d` against the CPU's: equal on the stand-in, within `tol`
// relative on a GPU.
struct Compare {
  double tol;
  void operator()(double cpu, double dev) const {
    if (tol == 0)
      CHECK(cpu == dev);
    else
      CHECK(dev == Approx(cpu).epsilon(tol));
  }
};

void trains_and_saves_as_on_the_cpu(Device d, Compare same,
                                    ComputeType ct = ComputeType::F32) {
  Scratch dir("train");
  const ParallelCorpus c = reverse_task(200, 5);
  const ModelConfig cfg = small_config();
  Transformer cpu(cfg), dev(cfg, d);
  cpu.init(3);
  dev.init(3);
  cpu.params().set_compute_type(ct);
  dev.params().set_compute_type(ct);
  CHECK(dev.params().device() == d);
  CHECK(dev.params().values().device() == d);
  REQUIRE(host_values(dev.params()) == host_values(cpu.params()));  // one draw, any device

  Trainer tc(cpu, c, train_options()), td(dev, c, train_options());
  for (int i = 0; i < 10; ++i) {
    INFO("step " << i + 1);
    const auto a = tc.step(), b = td.step();
    same(a.loss, b.loss);
    same(a.nll, b.nll);
  }
  if (same.tol == 0) CHECK(host_values(dev.params()) == host_values(cpu.params()));

  // A checkpoint written from the device resumes on the CPU as on the device.
  td.save(dir / "ckpt.nmt", "", nlohmann::json::object());
  Transformer resumed(cfg);
  resumed.init(99);  // overwritten by the checkpoint
  Trainer tr(resumed, c, train_options());
  REQUIRE(tr.load(read_safetensors(dir / "ckpt.nmt")).step == 10);
  for (int i = 0; i < 3; ++i) {
    INFO("resumed step " << i + 11);
    same(td.step().loss, tr.step().loss);
  }
  // And the other way: the CPU's checkpoint resumes on the device.
  tc.save(dir / "ckpt_cpu.nmt", "", nlohmann::json::object());
  Transformer on_device(cfg, d);
  on_device.init(99);
  Trainer tdr(on_device, c, train_options());
  REQUIRE(tdr.load(read_safetensors(dir / "ckpt_cpu.nmt")).step == 10);
  for (int i = 0; i < 2; ++i) same(tc.step().loss, tdr.step().loss);

  // A model file written from the device is the CPU's: the same weights,
  // which translate there as on the device.
  save_model(dir / "m.nmt", dev, "", {}, false);
  Transformer back(cfg);
  load_weights(read_safetensors(dir / "m.nmt"), back);
  CHECK(host_values(back.params()) == host_values(dev.params()));
  {
    Transformer cpu_copy(cfg), dev_copy(cfg, d);
    load_weights(read_safetensors(dir / "m.nmt"), cpu_copy);
    load_weights(read_safetensors(dir / "m.nmt"), dev_copy);
    prepare_for_inference(cpu_copy.params(), ComputeType::F32);
    prepare_for_inference(dev_copy.params(), ComputeType::F32);
    const auto src = random_sequences(8, 2, 8, 24, 78);
    SearchOptions o;
    o.beam = 4;
    DecodeState sa, sb;
    const auto ra = search(cpu_copy, src, o, sa), rb = search(dev_copy, src, o, sb);
    for (size_t i = 0; i < src.size(); ++i) CHECK(ra[i][0].tokens == rb[i][0].tokens);
  }
  // Averaging checkpoints on the device: their mean, as on the CPU.
  average_checkpoints({dir / "ckpt.nmt", dir / "ckpt_cpu.nmt"}, dev);
  average_checkpoints({dir / "ckpt.nmt", dir / "ckpt_cpu.nmt"}, back);
  const auto a = host_values(dev.params()), b = host_values(back.params());
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) FAIL("averaged value " << i << ": " << a[i] << " against " << b[i]);
}

void decodes_as_on_the_cpu(Device d, Compare same) {
  Scratch dir("decode");
  ModelConfig cfg = small_config();
  cfg.dropout = cfg.attention_dropout = 0.f;
  Transformer trained(cfg);
  trained.init(42);
  REQUIRE(train_copy_task(trained, 300, /*reverse=*/true) < 0.5);
  save_model(dir / "m.nmt", trained, "", {}, false);
  Transformer cpu(cfg), dev(cfg, d);
  load_weights(read_safetensors(dir / "m.nmt"), cpu);
  load_weights(read_safetensors(dir / "m.nmt"), dev);
  prepare_for_inference(cpu.params(), ComputeType::F32);
  prepare_for_inference(dev.params(), ComputeType::F32);

  auto src = random_sequences(12, 2, 8, 24, 77);
  std::vector<const std::vector<int32_t>*> sp;
  for (const auto& s : src) sp.push_back(&s);
  const Shortlist sl = Shortlist::build(sp, sp, 24, 24, {4, 3});
  auto check_same = [&](const Decodable& a, const Decodable& b, const SearchOptions& o) {
    DecodeState sa, sb;
    const auto ra = search(a, src, o, sa), rb = search(b, src, o, sb);
    REQUIRE(ra.size() == rb.size());
    for (size_t i = 0; i < ra.size(); ++i) {
      REQUIRE(ra[i].size() == rb[i].size());
      for (size_t k = 0; k < ra[i].size(); ++k) {
        INFO("sentence " << i << ", hypothesis " << k);
        CHECK(ra[i][k].tokens == rb[i][k].tokens);
        same(ra[i][k].score, rb[i][k].score);
      }
    }
  };
  for (int beam : {1, 4}) {
    INFO("beam " << beam);
    SearchOptions o;
    o.beam = beam;
    o.n_best = beam;
    check_same(cpu, dev, o);
    o.shortlist = &sl;
    check_same(cpu, dev, o);
  }
  {  // an ensemble
    Transformer cpu2(cfg), dev2(cfg, d);
    cpu2.init(5), dev2.init(5);
    prepare_for_inference(cpu2.params(), ComputeType::F32);
    prepare_for_inference(dev2.params(), ComputeType::F32);
    const Ensemble ec({&cpu, &cpu2}), ed({&dev, &dev2});
    SearchOptions o;
    o.beam = 3;
    check_same(ec, ed, o);
    CHECK_THROWS_WITH(Ensemble({&cpu, &dev2}), "an ensemble's models must be on one device");
  }
  {  // sampling
    SearchOptions o;
    o.sampling = "topk";
    o.sampling_k = 5;
    o.n_best = 2;
    o.seed = 11;
    check_same(cpu, dev, o);
  }
}

void translates_as_on_the_cpu(Device d) {
  Scratch dir("translate");
  std::vector<std::string> lines, unused;
  synthetic_text(300, 8, lines, unused);
  const Vocab vocab = Vocab::train(lines, 60);
  ModelConfig cfg = tiny_config(vocab.size());
  cfg.d_model = 32;
  cfg.d_ff = 64;
  cfg.d_k = cfg.d_v = 8;
  cfg.max_positions = 48;
  Transformer m(cfg);
  m.init(17);
  // Trained (to copy its pieces), so that its choices are not near-ties a
  // GPU's rounding could flip.
  REQUIRE(train_copy_task(m, 300) < 0.5);
  save_model(dir / "m.nmt", m, vocab.bytes(), {}, false);
  const LoadedModel cpu = load_model(dir / "m.nmt");
  const LoadedModel dev = load_model(dir / "m.nmt", "", nullptr, d);
  CHECK(dev.net->device() == d);
  std::vector<std::string> in(lines.begin() + 200, lines.begin() + 240);
  SearchOptions o;
  o.beam = 3;
  o.max_len_a = 0;
  o.max_len_b = 8;
  for (bool continuous : {false, true}) {
    INFO("continuous " << continuous);
    // One worker each: the stand-in device opens its memory to every thread
    // during any thread's call, so a second worker would blur what it checks.
    Translator tc(cpu, o, 120, {}, 1), td(dev, o, 120, {}, 1);
    tc.set_continuous(continuous);
    td.set_continuous(continuous);
    const auto a = tc.translate(in), b = td.translate(in);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("line " << i);
      CHECK(a[i].text == b[i].text);
    }
  }
  // int8 is held on the CPU only: refused before any work, naming the
  // option by its key.
  try {
    load_model(dir / "m.nmt", "int8", nullptr, d);
    FAIL("int8 loaded on the device");
  } catch (const InputError& e) {
    CHECK(e.option() == "compute_type");
    CHECK_THAT(e.what(), Catch::StartsWith("int8:") && Catch::EndsWith(" (gemm, embedding)"));
  }
}

// `nmt train` as the command runs it (validation, checkpoints, averaging,
// the shortlist's measurement) on the CPU and on `d`.
void train_run_as_on_the_cpu(Device d, Compare same) {
  Scratch dir("run");
  std::vector<std::string> src, tgt;
  synthetic_text(400, 9, src, tgt);
  auto write = [&](const std::string& name, const std::vector<std::string>& lines, size_t from,
                   size_t to) {
    std::ofstream f(dir / name);
    for (size_t i = from; i < to; ++i) f << lines[i] << "\n";
  };
  write("train.en", src, 0, 370), write("train.de", tgt, 0, 370);
  write("valid.en", src, 370, 400), write("valid.de", tgt, 370, 400);
  ModelConfig cfg = small_config();
  cfg.vocab_size = 60;
  cfg.max_positions = 64;
  TrainOptions o;
  o.train_src = {dir / "train.en"};
  o.train_tgt = {dir / "train.de"};
  o.valid_src = dir / "valid.en";
  o.valid_tgt = dir / "valid.de";
  o.batch_tokens = 400;
  o.max_steps = 6;
  o.warmup_steps = 10;
  o.valid_every = 3;
  o.checkpoint_every = 2;
  o.average_last = 2;
  o.shortlist = true;
  o.seed = 3;
  TrainOptions on_cpu = o, on_device = o;
  on_cpu.out = dir / "cpu.nmt";
  on_device.out = dir / "dev.nmt";
  on_device.device = d;
  const TrainResult a = train(cfg, on_cpu), b = train(cfg, on_device);
  REQUIRE(a.losses.size() == b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) same(a.losses[i], b.losses[i]);
  for (const char* suffix : {"", ".best"}) {
    const LoadedModel ma = load_model(on_cpu.out + suffix, "", nullptr, Device::CPU,
                                      ShortlistLoad::Read),
                      mb = load_model(on_device.out + suffix, "", nullptr, Device::CPU,
                                      ShortlistLoad::Read);
    if (same.tol == 0) CHECK(host_values(ma.net->params()) == host_values(mb.net->params()));
    CHECK(ma.shortlist.has_value() == mb.shortlist.has_value());
  }
  // The model the device trained translates on the CPU as on the device.
  const LoadedModel on_host = load_model(on_device.out), here = load_model(on_device.out, "",
                                                                          nullptr, d);
  SearchOptions so;
  so.beam = 4;
  so.max_len_a = 0;
  so.max_len_b = 10;
  Translator th(on_host, so, 500, {}, 1), td(here, so, 500, {}, 1);
  const std::vector<std::string> in(src.begin() + 370, src.begin() + 380);
  const auto ta = th.translate(in), tb = td.translate(in);
  REQUIRE(ta.size() == in.size());
  REQUIRE(tb.size() == in.size());
  // Six updates leave near-ties that a GPU's rounding may flip: the text is
  // compared where the arithmetic is the CPU's.
  if (same.tol == 0)
    for (size_t i = 0; i < in.size(); ++i) CHECK(ta[i].text == tb[i].text);
}

}  // namespace

TEST_CASE("nmt train runs on another device as on the CPU: validation, checkpoints, averaging",
          "[device]") {
  GuardedDeviceScope guarded;
  train_run_as_on_the_cpu(Device::CUDA, Compare{0});
  CHECK(guarded.device().calls() > 1000);
}

TEST_CASE("a model trains on another device as on the CPU, and its files are the same",
          "[device]") {
  GuardedDeviceScope guarded;
  trains_and_saves_as_on_the_cpu(Device::CUDA, Compare{0});
  CHECK(guarded.device().calls() > 1000);
}

TEST_CASE("a model decodes on another device as on the CPU: greedy, beam, shortlist, ensemble, "
          "sampling",
          "[device]") {
  GuardedDeviceScope guarded;
  decodes_as_on_the_cpu(Device::CUDA, Compare{0});
  CHECK(guarded.device().calls() > 100);
}

TEST_CASE("a model file loads onto another device and translates as on the CPU", "[device]") {
  GuardedDeviceScope guarded;
  translates_as_on_the_cpu(Device::CUDA);
  CHECK(guarded.device().calls() > 100);
}

TEST_CASE("the capability query: a device lacking an op is refused by name before any work",
          "[device]") {
  GuardedDeviceScope guarded;
  CHECK(missing_ops(Device::CUDA, ComputeType::F32, true).empty());
  CHECK(missing_ops(Device::CUDA, ComputeType::INT8, false) ==
        "int8 is held on the CPU only (gemm, embedding)");
  guarded.device().lacking = {{Op::Attend, "no fused attention"},
                              {Op::Xent, "no loss kernel"},
                              {Op::Adam, "no loss kernel"}};
  // Translation needs the attention only; training the loss and Adam too,
  // grouped by reason.
  CHECK(missing_ops(Device::CUDA, ComputeType::F32, false) == "no fused attention (attend)");
  CHECK(missing_ops(Device::CUDA, ComputeType::F32, true) ==
        "no fused attention (attend); no loss kernel (xent, adam)");
  CHECK_THROWS_WITH(require_compute_type(Device::CUDA, ComputeType::BF16, true),
                    "the cuda backend cannot run this model: no fused attention (attend); no loss "
                    "kernel (xent, adam)");
  // A model file is refused at load, before any device memory is taken.
  Scratch dir("capability");
  Transformer m(tiny_config(24));
  m.init(5);
  save_model(dir / "m.nmt", m, "", {}, false);
  const int64_t calls = guarded.device().calls();
  CHECK_THROWS_WITH(load_model(dir / "m.nmt", "", nullptr, Device::CUDA),
                    Catch::Contains("cannot run this model: no fused attention (attend)"));
  CHECK(guarded.device().calls() == calls);
  // And a training run, before it reads its data.
  TrainOptions o = train_options();
  for (const char* name : {"t.en", "t.de"}) std::ofstream(dir / name) << "a b c\n";
  o.train_src = {dir / "t.en"};
  o.train_tgt = {dir / "t.de"};
  o.out = dir / "t.nmt";
  o.device = Device::CUDA;
  CHECK_THROWS_WITH(train(tiny_config(24), o), Catch::Contains("no loss kernel (xent, adam)"));
  // Every op has a name, and training needs every op but bf16 operands
  // (no model holds bf16 activations yet).
  CHECK(ops_needed(true).size() == static_cast<size_t>(kNumOps) - 1);
  for (int i = 0; i < kNumOps; ++i) CHECK(std::string(op_name(static_cast<Op>(i))).size() > 3);
}

TEST_CASE("the guarded device catches host access to device memory", "[device]") {
  GuardedDeviceScope guarded;
  {
    // A host read of its memory outside its calls kills the process (in a
    // child, which must die of SIGSEGV; a read that went through would
    // exit 0).
    Tensor t(Shape{4}, Device::CUDA);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // The default action, not Catch's handler, which would print the
      // child's expected fault as a failed test.
      signal(SIGSEGV, SIG_DFL);
      volatile float x = t.data()[0];
      (void)x;
      _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGSEGV);
  }
  Tensor t(Shape{4}, Device::CUDA);
  Tensor host(Shape{4});
  CHECK_THROWS_WITH(ops::add_(t, host),
                    Catch::Contains("operands on different devices"));
  // A host pointer where device memory belongs is refused by the stand-in
  // itself (as a GPU would fault on it).
  CHECK_THROWS_WITH(backend(Device::CUDA).zero(host.data(), 16),
                    Catch::Contains("was given host memory where device memory belongs"));
  ModelConfig cfg = tiny_config(24);
  Transformer m(cfg, Device::CUDA);
  CHECK_THROWS_WITH(m.init_for_loading(/*int8=*/true),
                    Catch::Contains("int8 weights are held on the CPU only"));
}

// On a GPU (the ctest entry nmt_tests_gpu, which exits 77 without one): the
// same cases, to the GPU's rounding.
TEST_CASE("[gpu] ten training steps on the GPU match the CPU's losses (f32 1e-4, bf16 2e-2)",
          "[gpu]") {
  REQUIRE(cuda_available());
  trains_and_saves_as_on_the_cpu(Device::CUDA, Compare{1e-4});
  if (unsupported_here(Device::CPU, ComputeType::BF16).empty())
    trains_and_saves_as_on_the_cpu(Device::CUDA, Compare{2e-2}, ComputeType::BF16);
}

TEST_CASE("[gpu] greedy and beam translations are the CPU's on the GPU", "[gpu]") {
  REQUIRE(cuda_available());
  decodes_as_on_the_cpu(Device::CUDA, Compare{1e-4});
  translates_as_on_the_cpu(Device::CUDA);
}

TEST_CASE("[gpu] nmt train on the GPU: a model that translates on the CPU", "[gpu]") {
  REQUIRE(cuda_available());
  train_run_as_on_the_cpu(Device::CUDA, Compare{1e-4});
}

// cairo, libzip and MeCab are opened on first use (core/dynlib.h): one that
// is not installed is named with what needed it, and so is a missing function.
TEST_CASE("a library opened on first use is named when it or a function is missing", "[device]") {
  CHECK_THROWS_WITH(DynLib("libnmt-no-such-library.so.7", "testing", "nmt-none"),
                    Catch::Contains("testing needs libnmt-no-such-library.so.7 (Debian package "
                                    "nmt-none), which could not be opened: "));
  const DynLib libc("libc.so.6", "testing", "libc6");
  using Strlen = size_t (*)(const char*);
  CHECK(reinterpret_cast<Strlen>(libc.symbol("strlen"))("four") == 4);
  CHECK_THROWS_WITH(libc.symbol("nmt_no_such_function"),
                    Catch::Contains("testing: libc.so.6 has no function nmt_no_such_function"));
}
