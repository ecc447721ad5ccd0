// `nmt translate`: raw source text in, raw target text out, one output line
// per input line and in input order, whatever the batching. Lines are read
// in windows; a window is cut short as soon as more input would block, so
// an interactive `cat | nmt translate` answers each line promptly.
//
// Output files never destroy input: every output is planned and checked
// before the model is even loaded (an output that is an input, by device and
// inode, or two inputs that would write one output, are refused), and each
// is written to a temporary file beside it and renamed when complete.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "core/comm.h"
#include "core/error.h"
#include "decode/translator.h"
#include "io/output_file.h"
#include "io/output_plan.h"
#include "io/std_streams.h"
#include "io/text_file.h"
#include "progress.h"
#include "service/translation_service.h"

namespace nmt::app {
namespace {

namespace fs = std::filesystem;

// The command line: the files, what stderr says, and the translation
// options named on it, by key (translate_options()).
struct Opts {
  std::vector<std::string> models;  // one, or an ensemble
  std::vector<std::string> inputs;
  std::string output, output_dir, suffix;
  std::string compute;        // empty: the model file's
  std::string device = "cpu";
  bool output_given = false;  // -o "" is an error, not stdout
  bool progress = false;      // plain progress lines where stderr is no terminal
  bool verbose = false;       // how it will translate, on stderr
  nlohmann::json given = nlohmann::json::object();
};

// Standard output, or a file written as what it is (io::OutputFile).
class Output {
 public:
  explicit Output(const std::string& path) {
    if (path.empty() || path == "-") return;
    file_.emplace(path, io::Content::Text);
  }
  bool is_stdout() const { return !file_; }
  void write(const std::string& s) {
    if (file_)
      file_->write(s);
    else if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size())
      io::stdout_failed(errno);
  }
  void flush() {
    if (file_)
      file_->flush();
    else if (std::fflush(stdout) != 0)
      io::stdout_failed(errno);
  }
  void commit() {
    if (file_) file_->commit();
  }

 private:
  std::optional<io::OutputFile> file_;
};

Progress make_progress(const io::LineReader& in, const Output& out, const Opts& o) {
  return Progress("nmt translate " + (in.path() == "-" ? std::string("stdin") : in.path()),
                  o.progress, in.fraction_read() >= 0, out.is_stdout());
}

// The service's options, checked before any file is read (the device is
// opened later, once the files are known to be there).
TranslateOptions service_options(const Opts& o) {
  TranslateOptions t;
  t.models = o.models;
  t.compute = o.compute;
  apply_translate_json(o.given, t);
  check_options(t);
  if (!o.output.empty() && o.inputs.size() > 1)
    throw UsageError("-o takes one input; use --output-dir for several");
  if (!o.suffix.empty() && o.output_dir.empty())
    throw UsageError("--suffix names the files of --output-dir; give --output-dir too");
  return t;
}

void run(Opts& o) {
  TranslateOptions t = service_options(o);
  if (o.inputs.empty()) o.inputs.push_back("-");
  for (const auto& m : o.models) io::check_input_path(m, "-m");
  // Distributed, rank 0 alone reads the inputs and writes the outputs: only
  // its node need hold them.
  Comm& comm = world();
  const bool root = comm.rank() == 0;
  std::vector<std::string> outs;
  on_root_then_share(comm, [&] {
    for (const auto& in : o.inputs) io::check_input_path(in, "-i");
    outs = io::plan_outputs({o.output, o.output_given, o.output_dir, o.suffix}, o.inputs, o.models);
    if (!o.output_dir.empty()) {
      std::error_code ec;
      fs::create_directories(o.output_dir, ec);
      if (ec) throw InputError("cannot create --output-dir " + o.output_dir + ": " + ec.message());
    }
  });
  t.device = open_device(o.device);
  TranslationService service(std::move(t), io::warn_on_stderr);
  if (o.verbose && root) std::fprintf(stderr, "nmt translate: %s", service.describe().c_str());
  if (!root) return service.serve_windows(comm);
  const io::TextChecks checks = service.text_checks();
  auto translate_input = [&](const std::string& path, Output& out) {
    io::LineReader in(path, checks);
    Progress progress = make_progress(in, out, o);
    StreamSink sink;
    sink.write = [&out](const std::string& text) {
      out.write(text);
      out.flush();
    };
    sink.progress = [&progress](int64_t lines, double fraction) {
      progress.update(lines, fraction);
    };
    service.translate(in, in.path() == "-" ? "<stdin>" : in.path(), sink, &comm);
    progress.finish();
  };
  try {
    if (!o.output_dir.empty()) {
      for (size_t i = 0; i < o.inputs.size(); ++i) {
        Output out(outs[i]);
        translate_input(o.inputs[i], out);
        out.commit();
      }
    } else {
      Output out(outs[0]);
      for (const auto& in_path : o.inputs) translate_input(in_path, out);
      out.commit();
    }
  } catch (const io::StdoutClosed&) {
    // The reader went away; nothing left to say. Writes come after a
    // round's gather, so the other ranks wait for the next window: none.
    if (comm.size() > 1) TranslationService::end_windows(comm);
    return;
  }
  if (comm.size() > 1) {
    TranslationService::end_windows(comm);
    return;
  }
  // Every output is committed: nothing the model, translator or kernels
  // hold is needed any more.
  if (!launched_distributed()) exit_without_teardown();
}

// Models, inputs and outputs, compute type and device.
void add_file_options(CLI::App* cmd, const std::shared_ptr<Opts>& o) {
  cmd->add_option("-m,--model", o->models,
                  "Model file (nmt train's or nmt convert's); several (-m a -m b) translate as "
                  "an ensemble, the mean of their probabilities at every step (they must share "
                  "one vocabulary; alignments come from the first)")
      ->type_name("FILE")
      ->required()
      ->allow_extra_args(false);  // one file per -m, so a stray argument is not a model
  cmd->add_option("-i,--input", o->inputs, "Input files (plain or .gz); default stdin")
      ->type_name("FILE");
  auto* out_opt = cmd->add_option("-o,--output", o->output,
                                  "Output file, written when complete (gzip if it ends in .gz; a "
                                  "device or FIFO is written through); default stdout")
                      ->type_name("FILE")
                      ->each([o](const std::string&) { o->output_given = true; });
  cmd->add_option("--output-dir", o->output_dir,
                  "Write one output per input into this directory (created if missing)")
      ->type_name("DIR")
      ->excludes(out_opt);
  cmd->add_option("--suffix", o->suffix,
                  "With --output-dir, replace each input's language extension (and .gz) by "
                  "this (test.en.gz -> test.de); by default .hyp is appended (test.en.hyp)");
  add_compute_type_option(cmd, o->compute,
                          "f32, bf16 (AVX512-BF16 or AMX CPUs) or int8 for the weight products; "
                          "default: the model's (int8 after nmt quantize, else f32)");
  add_device_option(cmd, o->device);
}

// What stderr says besides warnings.
void add_report_options(CLI::App* cmd, const std::shared_ptr<Opts>& o) {
  cmd->add_flag("--verbose", o->verbose,
                "Print how it will translate (compute type, device, workers, threads, batch size, "
                "the backend's numerics) on stderr before it starts");
  cmd->add_flag("--progress", o->progress,
                "Print a progress line (lines, lines/s, share of the file, ETA) every 10 s on "
                "stderr; on a terminal a live line is shown anyway for a file input");
}

// The search, the output, batches and workers: translate_options(), each
// gathered under its key.
void add_translation_options(CLI::App* cmd, const std::shared_ptr<Opts>& o) {
  add_translate_table(
      cmd, {},
      [cmd, o](const std::string& key) {
        if (key == "scores") add_report_options(cmd, o);
      },
      [o](const std::string& key, const nlohmann::json& v) { o->given[key] = v; });
}

}  // namespace

void register_translate(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "translate", "Translate text with a trained model (stdin to stdout by default)");
  add_file_options(cmd, o);
  add_translation_options(cmd, o);
  cmd->callback([o] { run(*o); });
}

}  // namespace nmt::app
