// `nmt translate`: raw source text in, raw target text out, one output line
// per input line and in input order, whatever the batching. Lines are read
// in windows; a window is cut short as soon as more input would block, so
// an interactive `cat | nmt translate` answers each line promptly.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/cpu_kernels.h"
#include "core/error.h"
#include "decode/translator.h"
#include "io/text_file.h"
#include "model/loaded_model.h"

namespace nmt::app {
namespace {

struct Opts {
  std::string model;
  std::vector<std::string> inputs;
  std::string output, output_dir, format = "text";
  SearchOptions search;
  bool scores = false;
  int64_t batch_tokens = 4096;
  int window = 1024;
  int threads = 0;
};

// Thrown when stdout is closed under us (`| head`): the run ends quietly.
struct OutputClosed {};

class Output {
 public:
  explicit Output(const std::string& path) {
    if (path.empty() || path == "-") {
      f_ = stdout;
    } else {
      f_ = std::fopen(path.c_str(), "w");
      if (!f_) throw InputError("cannot write " + path + ": " + std::strerror(errno));
      owned_ = true;
    }
    path_ = path.empty() ? "stdout" : path;
  }
  ~Output() {
    if (owned_) std::fclose(f_);
  }
  void write(const std::string& s) {
    if (std::fwrite(s.data(), 1, s.size(), f_) != s.size()) fail();
  }
  void flush() {
    if (std::fflush(f_) != 0) fail();
  }

 private:
  void fail() {
    if (errno == EPIPE) throw OutputClosed{};
    throw Error("cannot write " + path_ + ": " + std::strerror(errno));
  }
  FILE* f_ = nullptr;
  bool owned_ = false;
  std::string path_;
};

std::string format_result(const TranslationResult& r, const Opts& o, int64_t line_no) {
  std::string out;
  if (o.format == "jsonl") {
    nlohmann::json j = {{"line", line_no}, {"translation", r.text}, {"score", r.score}};
    if (o.search.n_best > 1) {
      nlohmann::json nb = nlohmann::json::array();
      for (const auto& [text, score] : r.n_best)
        nb.push_back({{"translation", text}, {"score", score}});
      j["n_best"] = nb;
    }
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  if (o.search.n_best > 1) {
    // Moses-style n-best: index ||| translation ||| score, best first.
    for (const auto& [text, score] : r.n_best)
      out += std::to_string(line_no - 1) + " ||| " + text + " ||| " + std::to_string(score) + "\n";
    if (r.n_best.empty()) out += std::to_string(line_no - 1) + " ||| ||| 0\n";
    return out;
  }
  if (o.scores) out = std::to_string(r.score) + "\t";
  return out + r.text + "\n";
}

void translate_stream(io::LineReader& in, Output& out, Translator& tr, const Opts& o) {
  std::vector<std::string> window;
  std::string line;
  int64_t first = 1;
  auto flush = [&] {
    const auto results = tr.translate(window, first);
    for (size_t i = 0; i < results.size(); ++i)
      out.write(format_result(results[i], o, first + static_cast<int64_t>(i)));
    out.flush();
    first += static_cast<int64_t>(window.size());
    window.clear();
  };
  while (in.next(line)) {
    window.push_back(std::move(line));
    if (static_cast<int>(window.size()) >= o.window || in.would_block()) flush();
  }
  if (!window.empty()) flush();
}

std::string basename_of(const std::string& path) {
  std::string b = path.substr(path.find_last_of('/') + 1);
  if (b.size() > 3 && b.compare(b.size() - 3, 3, ".gz") == 0) b.resize(b.size() - 3);
  return b;
}

}  // namespace

void register_translate(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "translate", "Translate text with a trained model (stdin to stdout by default)");
  cmd->add_option("-m,--model", o->model, "Model file written by nmt train")->required();
  cmd->add_option("-i,--input", o->inputs, "Input files (plain or .gz); default stdin");
  auto* out_opt = cmd->add_option("-o,--output", o->output, "Output file; default stdout");
  cmd->add_option("--output-dir", o->output_dir,
                  "Write one output per input file into this directory")
      ->excludes(out_opt);
  cmd->add_option("--beam", o->search.beam, "Beam size (1: greedy)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--alpha", o->search.alpha, "GNMT length penalty exponent")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  cmd->add_flag("--length-norm", o->search.length_norm,
                "Divide scores by length instead of the GNMT penalty");
  cmd->add_option("--n-best", o->search.n_best, "Print this many hypotheses per input (<= beam)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_flag("--scores", o->scores,
                "Print the normalised log-probability before each translation");
  cmd->add_option("--format", o->format, "Output format")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "jsonl"}));
  cmd->add_option("--batch-tokens", o->batch_tokens, "Source tokens per batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--window", o->window, "Lines read ahead and sorted by length")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--max-length-a", o->search.max_len_a,
                  "Max output length = a * source length + b")
      ->capture_default_str();
  cmd->add_option("--max-length-b", o->search.max_len_b, "See --max-length-a")
      ->capture_default_str();
  cmd->callback([o] {
    if (o->search.n_best > o->search.beam)
      throw InputError("--n-best " + std::to_string(o->search.n_best) + " exceeds --beam " +
                       std::to_string(o->search.beam));
    if (!o->output.empty() && o->inputs.size() > 1)
      throw InputError("-o takes one input; use --output-dir for several");
    cpu::set_num_threads(o->threads);
    LoadedModel model = load_model(o->model);
    Translator tr(model, o->search, o->batch_tokens,
                  [](const std::string& w) { std::cerr << "nmt: warning: " << w << "\n"; });
    try {
      if (o->inputs.empty()) o->inputs.push_back("-");
      if (!o->output_dir.empty()) {
        for (const auto& in_path : o->inputs) {
          io::LineReader in(in_path);
          Output out(o->output_dir + "/" + (in_path == "-" ? "stdin.out" : basename_of(in_path)));
          translate_stream(in, out, tr, *o);
        }
      } else {
        Output out(o->output);
        for (const auto& in_path : o->inputs) {
          io::LineReader in(in_path);
          translate_stream(in, out, tr, *o);
        }
      }
    } catch (const OutputClosed&) {
      // The reader went away; nothing left to say.
    }
  });
}

}  // namespace nmt::app
