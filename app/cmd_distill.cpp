// `nmt distill`: parses its options, installs the SIGINT/SIGTERM handler
// and calls nmt::distill() (distill/distill.h), printing its lines and the
// trainings' progress on stderr.
//
// Exit status: 0 when OUT is written (or was already); 128 + signal (130
// for SIGINT) when a signal stopped it, with what was done kept for
// --resume; 1 on error, 2 on a usage error.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "core/error.h"
#include "distill/distill.h"
#include "ops/ops.h"

namespace nmt::app {

namespace {

std::atomic<int> g_stop{0};

extern "C" void on_distill_signal(int sig) {
  g_stop.store(sig);
  static const char msg[] =
      "\nnmt distill: stopping: what is done is kept for --resume (again to abort)\n";
  ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)ignored;
  std::signal(sig, SIG_DFL);  // a second signal ends the process at once
}

struct DistillCli {
  DistillOptions opts;
  std::string original = "auto", device = "cpu";
  bool no_quantize = false;
  int threads = 0;
};

void say(const std::string& line) {
  std::fprintf(stderr, "nmt distill: %s\n", name_options(line, option_name).c_str());
}

void run_distill(DistillCli& cli) {
  ops::set_num_threads(cli.threads);
  DistillOptions o = cli.opts;
  o.original = cli.original == "mix"    ? OriginalTargets::Mix
               : cli.original == "none" ? OriginalTargets::None
                                        : OriginalTargets::Auto;
  o.quantize = !cli.no_quantize;
  o.device = open_device(cli.device);
  DistillCallbacks cb;
  cb.log = say;
  cb.progress = [](const std::string& name, const TrainProgress& p) {
    if (p.stats.step == 1 || p.stats.step % 100 == 0) say(name + ": " + train_progress_line(p));
  };
  g_stop.store(0);
  cb.stop = &g_stop;
  std::signal(SIGINT, on_distill_signal);
  std::signal(SIGTERM, on_distill_signal);
  DistillResult r;
  try {
    r = distill(o, cb);
  } catch (const OptionError& e) {
    throw UsageError(e.what());
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (r.interrupted) exit_code() = 128 + g_stop.load();
}

void add_files(CLI::App* cmd, DistillCli* cli) {
  DistillOptions& o = cli->opts;
  cmd->add_option("--teacher", o.teachers,
                  "The teacher model; several: an ensemble sharing one vocabulary")
      ->type_name("FILE")
      ->required()
      ->expected(1, -1);
  cmd->add_option("--train-src", o.train_src, "Training source text, one sentence per line")
      ->type_name("FILE")
      ->required();
  cmd->add_option("--train-tgt", o.train_tgt, "Its original targets, line-aligned")
      ->type_name("FILE")
      ->required();
  cmd->add_option("--valid-src", o.valid_src,
                  "Validation source text (measures int8, the pilots and the student)")
      ->type_name("FILE");
  cmd->add_option("--valid-tgt", o.valid_tgt, "Validation references")->type_name("FILE");
  cmd->add_option("-o,--out", o.out, "The student model to write (its work in OUT.distill/)")
      ->type_name("FILE")
      ->required();
  cmd->add_option("-c,--config", o.config,
                  "The student's config (default: the recipe's, with a one-layer decoder)")
      ->type_name("FILE");
}

void add_choices(CLI::App* cmd, DistillCli* cli) {
  DistillOptions& o = cli->opts;
  cmd->add_option("--max-minutes", o.max_minutes,
                  "The whole run's budget: teacher, pilots and student, over every --resume")
      ->required()
      ->check(finite_range(0, 1e7));
  cmd->add_flag("--resume", o.resume, "Go on with the work in OUT.distill/ where it stopped");
  cmd->add_option("--original", cli->original,
                  "The original targets beside the teacher's: mix, none, or auto (two pilots "
                  "decide on validation chrF)")
      ->check(CLI::IsMember({"auto", "mix", "none"}));
  cmd->add_option("--pilot-minutes", o.pilot_minutes,
                  "Each pilot's budget (0: a tenth of the budget left, at most 4; none under 1)")
      ->check(finite_range(0, 1e6));
  cmd->add_option("--beam", o.beam, "The teacher's beam")->check(CLI::Range(1, 64));
  cmd->add_option("--drop-share", o.drop_share,
                  "The share of pairs whose translations the teacher scored lowest, dropped")
      ->check(finite_range(0, 0.49));
  cmd->add_flag("--no-quantize", cli->no_quantize, "Write the student in f32, not int8");
  cmd->add_option("--seed", o.seed, "Seed of the pilots' and student's training")
      ->check(unsigned_integer());
  add_threads_option(cmd, cli->threads);
  add_device_option(cmd, cli->device);
}

}  // namespace

void register_distill(CLI::App& app) {
  auto cli = std::make_shared<DistillCli>();
  auto* cmd = app.add_subcommand(
      "distill",
      "Make a fast student of a teacher model (sequence-level knowledge distillation): the "
      "teacher translates the training source, its weakest translations are dropped, a model "
      "with a one-layer decoder trains on the rest with the recipe, and is written in int8. "
      "Every step is printed with its reason and time; --resume goes on after a stop");
  add_files(cmd, cli.get());
  add_choices(cmd, cli.get());
  cmd->callback([cli] { run_distill(*cli); });
}

}  // namespace nmt::app
