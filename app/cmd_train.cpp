// `nmt train`: gathers the options (the config's "training" object, then the
// command line, which wins), installs the SIGINT/SIGTERM handler and calls
// nmt::train(). Progress goes to stderr: a live "\r" line on a terminal, a
// plain line every --log-every steps otherwise.
//
// Exit status: 0 when training ends (step/epoch/time budget, early stop)
// and OUT is written; 128 + signal (130 for SIGINT, 143 for SIGTERM) when a
// signal stopped it, during the updates or in the final phase (validation,
// averaging, the shortlist: OUT is then not written), with a checkpoint of
// the last step kept; 1 on error.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "commands.h"
#include "core/comm.h"
#include "core/error.h"
#include "io/output_file.h"
#include "io/text_file.h"
#include "model/config.h"
#include "ops/ops.h"
#include "train/checkpoints.h"
#include "train/train_run.h"

namespace nmt::app {

namespace {

std::atomic<int> g_stop{0};
// 0: no lock held yet, 1: holding OUT.lock (g_lock_path), 2: training.
// Before training a stop has nothing to save, so the process ends at once,
// even inside a blocking read of a FIFO or inside SentencePiece.
std::atomic<int> g_phase{0};
char g_lock_path[4096];

extern "C" void on_stop_signal(int sig) {
  const int phase = g_phase.load();
  if (phase < 2) {
    if (phase == 1) ::unlink(g_lock_path);  // ours: the kernel drops the flock itself
    io::remove_pending_temps();
    static const char msg[] = "\nnmt: stopped before training began (nothing to save)\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    std::signal(sig, SIG_DFL);
    std::raise(sig);  // delivered when the handler returns: exit status 128 + sig
    return;
  }
  // The library's long loops (an update, validation, the final model and
  // its shortlist) watch g_stop and end the run at their next step.
  g_stop.store(sig);
  static const char msg[] =
      "\nnmt: stopping: a checkpoint of the last step is kept (again to abort)\n";
  ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)ignored;
  std::signal(sig, SIG_DFL);  // a second signal ends the process at once
}

// What the command line holds: the files and switches, and the training
// options named on it by key.
struct TrainCli {
  std::string config = kDefaultConfig;
  TrainOptions opts;
  nlohmann::json given = nlohmann::json::object();  // training options named on the command line
  int threads = 0;
  std::string device = "cpu";
  CLI::App* app = nullptr;
  bool no_recipe = false, no_filter = false, no_shortlist = false;
};

// A value in [0, 1), or what is wrong with it.
CLI::Validator fraction(const char* what) {
  return CLI::Validator(
      [what](std::string& s) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(s, v) || !(v >= 0 && v < 1))
          return std::string(what) + ": expected a number in [0, 1), got " + s;
        return "";
      },
      "FLOAT in [0, 1)");
}

// The files, the config, the vocabulary, the switches, regularisation and
// the machine.
void add_file_options(CLI::App* cmd, TrainCli* cli) {
  TrainOptions& o = cli->opts;
  cmd->add_option("-c,--config", cli->config,
                  "Model config file or name in models/ (default: the recipe's, by corpus size)")
      ->type_name("FILE")
      ->default_str("recipe, or transformer-small");
  cmd->add_option("--train-src", o.train_src,
                  "Training source text, one sentence per line; several files for several "
                  "corpora")
      ->type_name("FILE")
      ->required()
      ->expected(1, -1)
      ->default_str("");
  cmd->add_option("--train-tgt", o.train_tgt,
                  "Training target text, line-aligned with --train-src (one file for each)")
      ->type_name("FILE")
      ->required()
      ->expected(1, -1)
      ->default_str("");
  cmd->add_option("--valid-src", o.valid_src, "Validation source text")->type_name("FILE");
  cmd->add_option("--valid-tgt", o.valid_tgt, "Validation target text")->type_name("FILE");
  cmd->add_option("-o,--out", o.out, "The model file to write (checkpoints in OUT.ckpt/)")
      ->type_name("FILE")
      ->required();
  cmd->add_option("--spm", o.spm, "Use this SentencePiece model instead of training one")
      ->type_name("FILE");
  cmd->add_option("--vocab-size", o.vocab_size, "Joint vocabulary size (0: the config's)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            int v = 0;
            if (!CLI::detail::lexical_cast(s, v) || v < 0 || (v > 0 && v < 8))
              return "expected 0 or an integer >= 8, got " + s;
            return "";
          },
          "0 or INT >= 8"));
  cmd->add_flag("--resume", o.resume,
                "Continue from the latest checkpoint in OUT.ckpt/ (refused where a training or "
                "validation file has changed since it was written)");
  cmd->add_flag("--resume-with-new-data", o.resume_with_new_data,
                "--resume, and go on where the training or validation data have changed since the "
                "checkpoint (with a warning naming the files; the run then does not repeat an "
                "uninterrupted one)");
  cmd->add_flag("--explain", o.explain,
                "Print the recipe (every option chosen, with its reason) and stop before training");
  cmd->add_flag("--no-recipe", cli->no_recipe,
                "Take no choice from the recipe: every option not given has its fixed default "
                "(the paper's schedule, f32, transformer-small)");
  cmd->add_flag("--no-filter", cli->no_filter,
                "Keep exact duplicate pairs and pairs of implausible length ratio");
  cmd->add_flag("--no-shortlist", cli->no_shortlist,
                "Store no vocabulary shortlist in the model (by default one is built from the "
                "training pairs, and its BLEU cost measured on the validation set decides "
                "whether translation uses it)");
  cmd->add_option("--dropout", o.dropout,
                  "Dropout on embeddings and sub-layer outputs (default: the config's or the "
                  "recipe's)")
      ->check(fraction("--dropout"))
      ->default_str("recipe, or the config's");
  cmd->add_option("--label-smoothing", o.label_smoothing,
                  "Label smoothing epsilon (default: the config's or the recipe's)")
      ->check(fraction("--label-smoothing"))
      ->default_str("recipe, or the config's");
  add_threads_option(cmd, cli->threads);
  add_device_option(cmd, cli->device);

}

// Options that the config's "training" object may also set, under the
// same name with underscores; given here they win. --help says which the
// recipe chooses, and what --no-recipe uses.
void add_training_options(CLI::App* cmd, const std::shared_ptr<TrainCli>& cli) {
  const TrainOptions defaults;
  for (const TrainingOption& t : training_options()) {
    const nlohmann::json d = t.get(defaults);
    const std::string v = d.is_string() ? d.get<std::string>() : d.dump();
    add_table_option(cmd, t, t.recipe ? "recipe, or " + v : v,
                     [cli, key = t.key](const nlohmann::json& v) { cli->given[key] = v; });
  }
}

// The options of the run, as the user gave them (the config's "training"
// object, then the command line), and its config.
TrainOptions train_options(const TrainCli& cli, ModelConfig& cfg) {
  ops::set_num_threads(cli.threads);
  TrainOptions opts = cli.opts;
  CLI::App* self = cli.app;
  cfg = read_training_config(cli.config, self->count("--config") > 0, "-c", opts);
  opts.device = open_device(cli.device);
  if (opts.device != Device::CPU && launched_distributed())
    throw UsageError("--device " + cli.device +
                     ": training on several processes runs on the CPU only for now");
  opts.recipe = !cli.no_recipe;
  opts.filter = !cli.no_filter;
  opts.shortlist = !cli.no_shortlist;
  opts.resume = opts.resume || opts.resume_with_new_data;
  if (self->count("--vocab-size") || self->count("--spm")) opts.given.insert("vocab_size");
  if (self->count("--dropout")) opts.given.insert("dropout");
  if (self->count("--label-smoothing")) opts.given.insert("label_smoothing");
  try {
    apply_given_training(cli.given, opts, "command line", /*cli=*/true);
  } catch (const InputError& e) {
    throw UsageError(e.what());
  }
  return opts;
}

void run_train(const TrainCli& cli) {
  ModelConfig cfg;
  const TrainOptions opts = train_options(cli, cfg);
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  bool live = false;  // a "\r" line is showing
  auto last_draw = std::chrono::steady_clock::now() - std::chrono::hours(1);
  TrainCallbacks cb;
  cb.log = [&](const std::string& line) {
    std::cerr << (live ? "\r\033[K" : "") << "nmt train: " << name_options(line, option_name)
              << "\n"
              << std::flush;
    live = false;
  };
  cb.progress = [&](const TrainProgress& p) {
    if (tty) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_draw < std::chrono::milliseconds(200)) return;
      last_draw = now;
      std::cerr << "\r\033[K" << train_progress_line(p) << std::flush;
      live = true;
    } else if (p.stats.step == 1 || p.stats.step % opts.log_every == 0) {
      std::cerr << "nmt train: " << train_progress_line(p) << "\n" << std::flush;
    }
  };
  g_stop.store(0);
  g_phase.store(0);
  std::snprintf(g_lock_path, sizeof g_lock_path, "%s", lock_path(opts.out).c_str());
  cb.stop = &g_stop;
  cb.on_locked = [] { g_phase.store(1); };
  cb.on_training = [] { g_phase.store(2); };
  auto restore = [&] {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    g_phase.store(0);
    if (live) std::cerr << "\n";
  };
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  TrainResult r;
  try {
    r = train(cfg, opts, cb);
  } catch (const OptionError& e) {
    restore();
    throw UsageError(e.what());
  } catch (const DataChanged& e) {
    restore();
    throw InputError(std::string(e.what()) +
                     ": resume with the data it was trained on, or pass "
                     "--resume-with-new-data to go on with the data as they are now");
  } catch (...) {
    restore();
    throw;
  }
  restore();
  if (r.interrupted) exit_code() = 128 + g_stop.load();
}

// h:mm:ss or m:ss; "-" for a time not known.
std::string hms(double s) {
  if (s < 0) return "-";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

}  // namespace

std::string train_progress_line(const TrainProgress& p) {
  const StepStats& s = p.stats;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "epoch %.2f | step %lld | loss %.3f | ppl %.2f | lr %.2e | %.0f tgt tok/s | "
                "elapsed %s | ETA %s",
                s.epoch_progress, static_cast<long long>(s.step), s.loss, s.ppl, s.lr,
                p.tokens_per_second, hms(p.elapsed_seconds).c_str(), hms(p.eta_seconds).c_str());
  return buf;
}

void register_train(CLI::App& app) {
  auto cli = std::make_shared<TrainCli>();
  auto* cmd = app.add_subcommand(
      "train",
      "Train a model on parallel text (plain or gzip). Give the data and a budget "
      "(--max-minutes, --max-steps or --max-epochs): the recipe chooses the model, vocabulary, "
      "compute type, batch, schedule, regularisation and cadence, each printed with its "
      "reason; an option given wins");
  cli->app = cmd;
  add_file_options(cmd, cli.get());
  add_training_options(cmd, cli);
  cmd->callback([cli] { run_train(*cli); });
}

}  // namespace nmt::app
