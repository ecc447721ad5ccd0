// Translation speed.
//
// The fixed protocol, so figures compare with other engines on this
// machine: random weights, a vocabulary of 8000, sources of 20-30 random
// tokens, outputs of exactly 30 tokens (an output bias of -1e9 rules </s>
// out, and the length limit ends each output at 30),
// greedy and beam 4, batch 1 and 32:
//   build/bench/bench_translate [threads] [sentences] [--compute-type f32|bf16|int8]
//
// Real text, which the fixed protocol hides the costs of (varied lengths,
// sentences leaving the batch, new shapes as the cache grows): a trained
// model through the whole translate pipeline (SentencePiece in and out,
// length-sorted windows, token batches), on test_2016_flickr by default,
// with BLEU against the reference:
//   build/bench/bench_translate --real MODEL [--src F] [--ref F] [--threads N]
//                               [--workers W] [--beam K] [--batch-tokens N] [--repeat R]
//                               [--warmup-lines N] [--compute-type f32|bf16|int8]
//                               [--shortlist on|off] [--alpha A] [--max-length-a A]
//                               [--max-length-b B] [--device cpu|cuda] [--latency N]
// (threads: per worker; 0 and 0, the defaults, are nmt translate's: min(cores, 4)
// workers sharing the cores). Primitives counts the primitives built during a
// timed pass: 0 once the shapes of real text have been seen. --latency N
// then translates the first N sentences one call each (interactive use,
// batch 1), after one untimed call on each of the first 10, and prints the
// latency's p50 and p90.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "decode/search.h"
#include "decode/translator.h"
#include "io/text_file.h"
#include "metrics/bleu.h"
#include "model/config.h"
#include "model/loaded_model.h"
#include "model/quantise.h"
#include "model/transformer.h"
#include "ops/ops.h"

using namespace nmt;

namespace {

using Ids = std::vector<std::vector<int32_t>>;

int real_text(const bench::Args& args) {
  const std::string data = std::string(NMT_SOURCE_DIR) + "/../shared/data/multi30k/";
  const std::string model_path = args.value("--real", "");
  const std::string src_path = args.value("--src", data + "test_2016_flickr.en.gz");
  const std::string ref_path = args.value("--ref", data + "test_2016_flickr.de.gz");
  // 0, 0: nmt translate's defaults (workers and threads chosen for the machine).
  const int threads = std::stoi(args.value("--threads", "0"));
  const int workers = std::stoi(args.value("--workers", "0"));
  const int repeat = std::stoi(args.value("--repeat", "3"));
  SearchOptions opts;
  opts.beam = std::stoi(args.value("--beam", "4"));
  // The search of another engine's settings (bench/ct2.py: no length
  // normalisation, a fixed length limit); nmt translate's defaults otherwise.
  opts.alpha = std::stof(args.value("--alpha", std::to_string(opts.alpha)));
  opts.max_len_a = std::stof(args.value("--max-length-a", std::to_string(opts.max_len_a)));
  opts.max_len_b = std::stoi(args.value("--max-length-b", std::to_string(opts.max_len_b)));
  validate(opts);
  const int64_t batch_tokens = std::stoll(args.value("--batch-tokens", "0"));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ops::set_num_threads(cores);
  double nominal, measured;
  bench::print_peak(cores, &nominal, &measured);
  const Device device = parse_device(args.value("--device", "cpu"));
  require_device(device);
  // --shortlist on: the model's vocabulary shortlist restricts the output.
  const bool shortlist = args.value("--shortlist", "off") == "on";
  LoadedModel model =
      load_model(model_path, args.value("--compute-type", ""), nullptr, device,
                 shortlist ? ShortlistLoad::Read : ShortlistLoad::Skip, WeightsUse::ProductsOnly);
  if (shortlist) {
    if (!model.shortlist) {
      std::fprintf(stderr, "bench_translate: %s has no shortlist (nmt shortlist adds one)\n",
                   model_path.c_str());
      return 1;
    }
    opts.shortlist = &*model.shortlist;
  }
  std::vector<std::string> src = io::read_lines(src_path);
  std::vector<std::string> ref = io::read_lines(ref_path);
  Translator tr(model, opts, batch_tokens,
                [](const std::string& m) { std::fprintf(stderr, "bench_translate: %s\n", m.c_str()); },
                workers, threads);
  // --batching continuous: sentences join running batches as others finish.
  tr.set_continuous(args.value("--batching", "static") == "continuous");
  // Warm-up: by default a pass over the same text (every shape it needs is
  // then built); --warmup-lines N warms up on the first N lines only and
  // times the rest, whose shapes are new.
  const size_t warm = std::stoul(args.value("--warmup-lines", "0"));
  if (warm > 0 && warm < src.size()) {
    tr.translate(
        std::vector<std::string>(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(warm)));
    src.erase(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(warm));
    ref.erase(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(warm));
  } else {
    // The cold pass is what a one-shot `nmt translate` of this file pays
    // on top of the timed passes: primitives, layout timing, first touches.
    const int64_t prims = ops::primitives_created();
    const double t0 = bench::now();
    tr.translate(src);
    const double sec = bench::now() - t0;
    std::printf("cold pass: %.2f s (%.2f sent/s), %lld primitives\n", sec, src.size() / sec,
                static_cast<long long>(ops::primitives_created() - prims));
  }
  std::printf(
      "real text: %s, %zu sentences, %s, beam %d%s, batch-tokens %lld, %d worker(s) x %d "
      "thread(s)\n",
      src_path.c_str(), src.size(), compute_type_name(model.compute), opts.beam,
      shortlist ? ", shortlist" : "",
      static_cast<long long>(tr.batch_tokens()), tr.workers(), tr.threads_per_worker());
  std::printf("%8s %10s %12s %12s %8s\n", "run", "sent/s", "tgt tok/s", "primitives", "BLEU");
  for (int r = 0; r < repeat; ++r) {
    const int64_t prims = ops::primitives_created();
    const double t0 = bench::now();
    const auto out = tr.translate(src);
    const double sec = bench::now() - t0;
    int64_t tokens = 0;
    std::vector<std::string> hyps;
    for (const auto& o : out) tokens += o.tokens, hyps.push_back(o.text);
    const double bleu = metrics::corpus_bleu(hyps, {ref}).score;
    std::printf("%8d %10.2f %12.1f %12lld %8.2f\n", r + 1, src.size() / sec, tokens / sec,
                static_cast<long long>(ops::primitives_created() - prims), bleu);
  }
  const size_t latency = std::stoul(args.value("--latency", "0"));
  if (latency > 0) {
    // Warm-up as bench/ct2.py's CTranslate2 side: one call on each of the
    // first 10 sentences (timed again below), which builds the shapes of a
    // batch of one.
    for (size_t i = 0; i < std::min<size_t>(10, src.size()); ++i) tr.translate({src[i]});
    std::vector<double> ms;
    for (size_t i = 0; i < std::min(latency, src.size()); ++i) {
      const double t0 = bench::now();
      tr.translate({src[i]});
      ms.push_back((bench::now() - t0) * 1e3);
    }
    if (ms.empty()) {
      std::fprintf(stderr, "bench_translate: --latency: %s has no sentences\n", src_path.c_str());
      return 1;
    }
    std::sort(ms.begin(), ms.end());
    std::printf("latency, batch 1: p50 %.2f ms, p90 %.2f ms over %zu sentences\n",
                ms[ms.size() / 2], ms[ms.size() * 9 / 10], ms.size());
  }
  std::printf("peak memory %.0f MiB\n", bench::peak_rss_mib());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage =
      "Translation speed: the fixed protocol, or a trained model on real text.\n"
      "  bench_translate [threads] [sentences] [--compute-type f32|bf16|int8]\n"
      "  bench_translate --real MODEL [--src F] [--ref F] [--threads N] [--workers W]\n"
      "                  [--beam K] [--batch-tokens N] [--batching static|continuous]\n"
      "                  [--repeat R] [--warmup-lines N] [--latency N]\n"
      "                  [--compute-type f32|bf16|int8] [--shortlist on|off] [--alpha A]\n"
      "                  [--max-length-a A] [--max-length-b B] [--device cpu|cuda]\n";
  const bool real =
      std::any_of(argv + 1, argv + argc, [](const char* a) { return std::string(a) == "--real"; });
  if (real) {
    const bench::Args args = bench::check_args(
        argc, argv, usage,
        {"--real", "--src", "--ref", "--threads", "--workers", "--beam", "--batch-tokens",
         "--batching", "--repeat", "--warmup-lines", "--latency", "--compute-type", "--shortlist",
         "--alpha", "--max-length-a", "--max-length-b", "--device"},
        {"--threads", "--workers", "--beam", "--batch-tokens", "--repeat", "--warmup-lines",
         "--latency", "--alpha", "--max-length-a", "--max-length-b"},
        0);
    // Bad values (a search option out of range, an unreadable model) are
    // one line and exit 2, not an uncaught exception.
    try {
      return real_text(args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
      return 2;
    }
  }
  const bench::Args args = bench::check_args(argc, argv, usage, {"--compute-type"}, {}, 2);
  const std::vector<long>& pos = args.positional;
  const int threads = pos.size() > 0 ? static_cast<int>(pos[0]) : 2;
  // Batches of 32 sentences are timed, so at least 32.
  const int n = pos.size() > 1 ? static_cast<int>(pos[1]) : 64;
  if (n < 32) {
    std::fprintf(stderr, "%s: sentences: at least 32 (batches of 32 are timed), got %d\n", argv[0],
                 n);
    return 2;
  }
  const ComputeType compute = parse_compute_type(args.value("--compute-type", "f32"));
  ops::set_num_threads(threads);
  double nominal, measured;
  bench::print_peak(threads, &nominal, &measured);
  std::mt19937 g(1);
  std::uniform_int_distribution<int> len(20, 30), tok(4, 7999);
  std::vector<std::vector<int32_t>> src(n);
  for (auto& s : src) {
    s.resize(len(g));
    for (auto& t : s) t = tok(g);
  }
  const int out_len = 30;
  std::printf("fixed protocol, %s\n", compute_type_name(compute));
  std::printf("%-18s %5s %6s %10s %12s %10s %8s\n", "model", "beam", "batch", "sent/s", "tgt tok/s",
              "GFLOP/s", "%peak");
  for (const char* name : {"transformer-small", "transformer-base"}) {
    ModelConfig cfg = load_config(find_config(name));
    cfg.vocab_size = 8000;
    cfg.output_bias = true;  // to rule </s> out: every output is out_len tokens long
    Transformer model(cfg);
    model.init(1);
    {
      Tensor bias = model.params().value(model.params().find("decoder/output/bias"));
      std::vector<float> b(static_cast<size_t>(cfg.vocab_size), 0.f);
      b[static_cast<size_t>(cfg.eos_id)] = -1e9f;
      ops::upload(b.data(), bias);
    }
    prepare_for_inference(model.params(), compute, /*drop_values=*/true);  // as a loaded model is
    const double flops_per_tok = model.flops_per_token(25, out_len);
    for (int beam : {1, 4}) {
      for (int batch : {1, 32}) {
        SearchOptions opts;
        opts.beam = beam;
        opts.max_len_a = 0;
        opts.max_len_b = out_len;
        DecodeState st;
        // Warm-up on one batch so that primitives exist, as in a long run.
        search(model, Ids(src.begin(), src.begin() + batch), opts, st);
        const int count = batch == 1 ? std::min(n, beam == 1 ? 32 : 16) : n;
        std::vector<double> lat;
        const double t0 = bench::now();
        for (int i = 0; i < count; i += batch) {
          const double s0 = bench::now();
          search(model, Ids(src.begin() + i, src.begin() + std::min(count, i + batch)), opts, st);
          lat.push_back(bench::now() - s0);
        }
        const double sec = bench::now() - t0;
        // Work per sentence: out_len target positions per hypothesis (beam
        // hypotheses each), counted with the forward FLOPs per token.
        const double gflops = flops_per_tok * out_len * beam * count / sec / 1e9;
        std::printf("%-18s %5d %6d %10.2f %12.1f %10.1f %7.1f%%\n", name, beam, batch, count / sec,
                    count * out_len / sec, gflops, 100 * gflops / measured);
        if (batch == 1 && std::string(name) == "transformer-small") {
          std::sort(lat.begin(), lat.end());
          std::printf("%-18s %5d %6s latency p50 %.1f ms, p90 %.1f ms\n", name, beam, "1",
                      1e3 * lat[lat.size() / 2], 1e3 * lat[lat.size() * 9 / 10]);
        }
      }
    }
  }
  std::printf("peak memory %.0f MiB\n", bench::peak_rss_mib());
}
