// Subcommand registry, and `nmt summary`: load a config, build the model with
// random weights, run a forward pass and print its size and cost.
#include "commands.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "cmd_score.h"
#include "core/cpu_kernels.h"
#include "model/config.h"
#include "model/transformer.h"

namespace nmt::app {

int& exit_code() {
  static int code = 0;
  return code;
}

void register_summary(CLI::App& app) {
  struct Opts {
    std::string config = "transformer-base";
    int batch = 32, length = 30, threads = 0;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("summary", "Build a model from a config and time a forward pass");
  cmd->add_option("-c,--config", opts->config, "Config file or name in models/")
      ->capture_default_str();
  cmd->add_option("--batch", opts->batch, "Sentences in the batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--length", opts->length, "Tokens per sentence")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--threads", opts->threads, "CPU threads (0: all)")->capture_default_str();
  cmd->callback([opts] {
    cpu::set_num_threads(opts->threads);
    const std::string path = find_config(opts->config);
    ModelConfig cfg = load_config(path);
    Transformer model(cfg);
    model.init(1);
    std::mt19937 g(1);
    std::uniform_int_distribution<int32_t> tok(4, cfg.vocab_size - 1);
    std::vector<std::vector<int32_t>> sents(opts->batch, std::vector<int32_t>(opts->length - 1));
    for (auto& s : sents)
      for (auto& t : s) t = tok(g);
    std::vector<const std::vector<int32_t>*> ptrs;
    for (auto& s : sents) ptrs.push_back(&s);
    TokenBatch b = make_batch(ptrs, ptrs);
    model.forward(b, false, 0);  // warm-up: builds the primitives
    const int reps = 3;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) model.forward(b, false, 0);
    const double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    const double fpt = model.flops_per_token(b.S, b.T);
    std::printf("model        %s (%s)\n", cfg.name.c_str(), path.c_str());
    std::printf("layers       %d encoder + %d decoder, d_model %d, d_ff %d, heads %d, %s-LN\n",
                cfg.encoder_layers, cfg.decoder_layers, cfg.d_model, cfg.d_ff, cfg.heads,
                cfg.norm.c_str());
    std::printf("parameters   %lld (%.1fM)\n", static_cast<long long>(model.parameter_count()),
                model.parameter_count() / 1e6);
    std::printf("forward      %.2f GFLOP per target token (source and target length %lld)\n",
                fpt / 1e9, static_cast<long long>(b.T));
    std::printf(
        "forward pass %d sentences x %d tokens on %d threads: %.1f ms, %.0f target tokens/s, %.1f "
        "GFLOP/s\n",
        opts->batch, opts->length, cpu::num_threads(), sec * 1e3, b.B * b.T / sec,
        fpt * b.B * b.T / sec / 1e9);
  });
}

void register_all(CLI::App& app) {
  register_summary(app);
  register_train(app);
  register_translate(app);
  register_score(app);
}

}  // namespace nmt::app
