// `nmt translate`: raw source text in, raw target text out, one output line
// per input line and in input order, whatever the batching. Lines are read
// in windows; a window is cut short as soon as more input would block, so
// an interactive `cat | nmt translate` answers each line promptly.
//
// Output files never destroy input: every output is planned and checked
// before the model is even loaded (an output that is an input, by device and
// inode, or two inputs that would write one output, are refused), and each
// is written to a temporary file beside it and renamed when complete.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "commands.h"
#include "core/backend.h"
#include "core/comm.h"
#include "core/error.h"
#include "core/memory.h"
#include "decode/ensemble.h"
#include "decode/shortlist_cost.h"
#include "decode/translator.h"
#include "io/json.h"
#include "io/output_file.h"
#include "io/std_streams.h"
#include "io/text_file.h"
#include "model/loaded_model.h"
#include "model/model_file.h"
#include "ops/ops.h"
#include "progress.h"

namespace nmt::app {
namespace {

namespace fs = std::filesystem;

struct Opts {
  std::vector<std::string> models;  // one, or an ensemble
  std::vector<std::string> inputs;
  std::string output, output_dir, suffix, format = "text", input_format = "text";
  // What a tsv or jsonl source or prefix is cut to (set once the model is
  // loaded; 0 for text, which the reader cuts): the bytes the model could
  // take of it.
  size_t max_text_bytes = 0;
  std::string why_limit;
  // The input being read, as its warnings name it ("a.jsonl", "<stdin>"):
  // with several inputs, line numbers start again in each.
  std::string input_name;
  bool alignments = false, attention = false;
  int alignment_layer = 0;  // 1-based; 0: the second-to-last
  SearchOptions search;
  bool scores = false;
  int64_t batch_tokens = 0;  // auto_batch_tokens()
  int window = 1024;
  int threads = 0;
  int workers = 0;
  std::string batching = "static";
  std::string compute;        // empty: the model file's
  std::string device = "cpu";
  bool output_given = false;  // -o "" is an error, not stdout
  bool beam_given = false;
  std::string sampling;   // "topk:K", "topp:P" or "full" as given
  bool progress = false;  // plain progress lines where stderr is no terminal
  bool verbose = false;   // how it will translate, on stderr
  std::string shortlist = "auto";
};

// --sampling topk:K | topp:P | full into the search options.
void parse_sampling(const std::string& spec, SearchOptions& o) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon),
                    arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  auto bad = [&] {
    return UsageError("--sampling " + spec +
                      ": expected topk:K (K from 1 to 1000000), topp:P "
                      "(P in (0, 1]) or full");
  };
  o.sampling = kind;
  try {
    size_t used = 0;
    if (kind == "topk" && !arg.empty()) {
      const long k = std::stol(arg, &used);
      if (used != arg.size() || k < 1 || k > 1000000) throw bad();
      o.sampling_k = static_cast<int>(k);
    } else if (kind == "topp" && !arg.empty()) {
      const double p = std::stod(arg, &used);
      if (used != arg.size() || !(p > 0 && p <= 1)) throw bad();
      o.sampling_p = static_cast<float>(p);
    } else if (!(kind == "full" && arg.empty())) {
      throw bad();
    }
  } catch (const std::logic_error&) {
    throw bad();
  }
}

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

// A warning about a line of the input being read.
void warn_line(const Opts& o, int64_t line_no, const std::string& what) {
  io::warn_on_stderr((o.input_name.empty() ? "" : o.input_name + " ") + "line " +
                     std::to_string(line_no) + ": " + what);
}

// A tsv or jsonl line is read whole (up to a much larger cap) and parsed
// before its fields are cut, as a text line is, at what the model could take
// (at a character's start), so that a long record is translated in part
// rather than broken into a parse error.
void cut_field(std::string& field, const char* what, const Opts& o, int64_t line_no) {
  if (o.max_text_bytes == 0 || field.size() <= o.max_text_bytes) return;
  size_t n = o.max_text_bytes;
  while (n > 0 && (static_cast<unsigned char>(field[n]) & 0xC0) == 0x80) --n;
  warn_line(o, line_no,
            std::string(what) + " is " + std::to_string(field.size()) +
                " bytes; only the first " + std::to_string(n) + " are read (" + o.why_limit + ")");
  field.resize(n);
}

// One input line as a request. tsv: source<TAB>prefix. jsonl: an object
// with "text" and optionally "prefix" and "constraints" (strings). A line
// that does not parse is warned about and skipped (an empty output line).
TranslationRequest parse_request(std::string line, const Opts& o, int64_t line_no) {
  TranslationRequest rq;
  auto skip = [&](const std::string& why) {
    // One write, so that ranks' warnings do not interleave mid-line.
    warn_line(o, line_no, why + "; an empty line is written instead");
    rq.skip = true;
    return rq;
  };
  // An empty source translates to an empty line; a prefix or constraints
  // given with it would be dropped without a word.
  auto empty_source = [&](TranslationRequest& r) {
    if (r.source.find_first_not_of(" \t\r") != std::string::npos ||
        (r.prefix.empty() && r.constraints.empty()))
      return r;
    return skip(std::string("the source is empty, so its ") +
                (r.prefix.empty() ? "constraints are" : "prefix is") + " not used");
  };
  if (o.input_format == "tsv") {
    const auto tab = line.find('\t');
    if (tab == std::string::npos)
      return skip("no TAB (--input-format tsv reads source<TAB>prefix)");
    rq.source = line.substr(0, tab);
    rq.prefix = line.substr(tab + 1);
    cut_field(rq.source, "the source", o, line_no);
    cut_field(rq.prefix, "the prefix", o, line_no);
    return empty_source(rq);
  }
  if (o.input_format != "jsonl") {
    rq.source = std::move(line);
    return rq;
  }
  if (line.find_first_not_of(" \t\r") == std::string::npos) return rq;  // empty in, empty out
  nlohmann::json j;
  try {
    j = io::parse_json(line, "the line");
  } catch (const InputError& e) {
    return skip(e.what());
  }
  if (!j.is_object()) return skip("expected a JSON object like {\"text\": \"...\"}");
  for (const auto& [key, value] : j.items()) {
    if (key == "text" && value.is_string()) {
      rq.source = value.get<std::string>();
    } else if (key == "prefix" && value.is_string()) {
      rq.prefix = value.get<std::string>();
    } else if (key == "constraints" && value.is_array()) {
      for (const auto& c : value) {
        if (!c.is_string()) return skip("\"constraints\" must be a list of strings");
        rq.constraints.push_back(c.get<std::string>());
      }
    } else if (key == "text" || key == "prefix" || key == "constraints") {
      return skip("\"" + key + "\" must be a " +
                  (key == "constraints" ? "list of strings" : "string"));
    } else {
      return skip("unknown key \"" + key + "\" (expected text, prefix, constraints)");
    }
  }
  if (!j.contains("text")) return skip("no \"text\"");
  cut_field(rq.source, "\"text\"", o, line_no);
  cut_field(rq.prefix, "\"prefix\"", o, line_no);
  return empty_source(rq);
}

nlohmann::json attention_json(const TranslationResult& r) {
  auto with_end = [](std::vector<std::string> pieces) {
    pieces.push_back("</s>");
    return pieces;
  };
  nlohmann::json weights = nlohmann::json::array();
  for (int64_t t = 0; t < r.attention.rows; ++t) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t s = 0; s < r.attention.cols; ++s)
      row.push_back(std::round(static_cast<double>(r.attention.at(t, s)) * 1e4) / 1e4);
    weights.push_back(row);
  }
  return {
      {"source", with_end(r.src_pieces)}, {"target", with_end(r.out_pieces)}, {"weights", weights}};
}

// A translation as a field of a line whose fields ' ||| ' separates (Moses'
// n-best, --alignments): its "|||" is written "&#124;&#124;&#124;", Moses'
// escape for '|', so that the line splits where it should.
std::string moses_field(const std::string& text) {
  std::string out;
  for (size_t at = 0;;) {
    const size_t bars = text.find("|||", at);
    out.append(text, at, bars == std::string::npos ? std::string::npos : bars - at);
    if (bars == std::string::npos) return out;
    out += "&#124;&#124;&#124;";
    at = bars + 3;
  }
}

std::string format_result(const TranslationResult& r, const Opts& o, int64_t line_no) {
  if (o.format == "jsonl") {
    nlohmann::json j = {{"line", line_no},
                        {"translation", r.text},
                        {"score", r.score},
                        {"logprob", r.logprob},
                        {"tokens", r.tokens}};
    if (!r.constraints_met) j["constraints_met"] = false;
    if (o.alignments) j["alignment"] = format_alignment(r.alignment);
    if (o.attention) j["attention"] = r.text.empty() ? nlohmann::json() : attention_json(r);
    if (o.search.n_best > 1) {
      nlohmann::json nb = nlohmann::json::array();
      for (const auto& [text, score] : r.n_best)
        nb.push_back({{"translation", text}, {"score", score}});
      j["n_best"] = nb;
    }
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  if (o.search.n_best > 1) {
    // Moses-style n-best: line ||| translation ||| score, best first; lines
    // count from 1 here as in every other format.
    std::string out;
    for (const auto& [text, score] : r.n_best)
      out += std::to_string(line_no) + " ||| " + moses_field(text) + " ||| " +
             std::to_string(score) + "\n";
    if (r.n_best.empty()) out += std::to_string(line_no) + " ||| ||| 0\n";
    return out;
  }
  return (o.scores ? std::to_string(r.score) + "\t" : "") +
         (o.alignments ? moses_field(r.text) + " ||| " + format_alignment(r.alignment) : r.text) +
         "\n";
}

std::string format_results(const std::vector<TranslationResult>& results, const Opts& o,
                           int64_t first) {
  std::string text;
  for (size_t i = 0; i < results.size(); ++i)
    text += format_result(results[i], o, first + static_cast<int64_t>(i));
  return text;
}

Progress make_progress(const io::LineReader& in, const Output& out, const Opts& o) {
  return Progress("nmt translate " + (in.path() == "-" ? std::string("stdin") : in.path()),
                  o.progress, in.fraction_read() >= 0, out.is_stdout());
}

void translate_stream(io::LineReader& in, Output& out, Translator& tr, const Opts& o) {
  std::vector<TranslationRequest> window;
  std::string line;
  int64_t first = 1;
  Progress progress = make_progress(in, out, o);
  auto flush = [&] {
    out.write(format_results(tr.translate(window, first), o, first));
    out.flush();
    first += static_cast<int64_t>(window.size());
    window.clear();
    progress.update(first - 1, in.fraction_read());
  };
  while (in.next(line)) {
    window.push_back(
        parse_request(std::move(line), o, first + static_cast<int64_t>(window.size())));
    if (static_cast<int>(window.size()) >= o.window || in.would_block()) flush();
  }
  if (!window.empty()) flush();
  progress.finish();
}

// A distributed run (mpirun/srun): rank 0 reads the input in rounds of one
// window of --window lines per rank and scatters them; every rank
// translates its window with its own workers; rank 0 gathers the
// translations and writes them in input order. A line's translation depends
// only on the line, its number and the options (batch invariance; sampling's
// draws are keyed by the line), so the bytes are those one process writes.
// Windows travel as: a flag byte (1: lines follow; 0: no more input), the
// 1-based number of the first line, the number of lines, then each line's
// length and bytes. One round must stay below MPI's 2 GiB a message.
std::string pack_window(bool more, int64_t first, const std::string* begin,
                        const std::string* end) {
  std::string b(1, more ? '\1' : '\0');
  auto put = [&b](uint64_t v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(static_cast<uint64_t>(first));
  put(static_cast<uint64_t>(end - begin));
  for (const std::string* l = begin; l != end; ++l) {
    put(l->size());
    b += *l;
  }
  return b;
}

bool unpack_window(const std::string& b, int64_t& first, std::vector<std::string>& lines) {
  size_t at = 1;
  auto get = [&] {
    uint64_t v = 0;
    if (b.size() - at < sizeof v) throw Error("a window from rank 0 is cut short");
    std::memcpy(&v, b.data() + at, sizeof v);
    at += sizeof v;
    return v;
  };
  if (b.empty() || b[0] == '\0') return false;
  first = static_cast<int64_t>(get());
  const uint64_t count = get();
  if (count > (b.size() - at) / sizeof(uint64_t)) throw Error("a window from rank 0 is cut short");
  lines.resize(count);
  for (auto& l : lines) {
    const uint64_t n = get();
    if (n > b.size() - at) throw Error("a window from rank 0 is cut short");
    l.assign(b, at, n);
    at += n;
  }
  return true;
}

// One rank's share of a round: its window in, its translations' text out.
std::string translate_window(const std::string& packed, Translator& tr, const Opts& o) {
  int64_t first = 0;
  std::vector<std::string> lines;
  if (!unpack_window(packed, first, lines) || lines.empty()) return {};
  std::vector<TranslationRequest> requests;
  requests.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i)
    requests.push_back(parse_request(std::move(lines[i]), o, first + static_cast<int64_t>(i)));
  return format_results(tr.translate(requests, first), o, first);
}

// Rank 0: one input, round by round, until it is read.
void translate_stream_as_root(io::LineReader& in, Output& out, Translator& tr, const Opts& o,
                              Comm& comm) {
  Progress progress = make_progress(in, out, o);
  const size_t ranks = static_cast<size_t>(comm.size()), full = ranks * o.window;
  int64_t next_line = 1;
  std::string line;
  std::vector<std::string> lines;
  for (;;) {
    // A round ends early where more input would block (a line typed into a
    // pipe is answered at once, as by one process). A short round is
    // shared out evenly: at the end of a file, no rank waits for another's
    // whole window.
    lines.clear();
    while (lines.size() < full && in.next(line)) {
      lines.push_back(std::move(line));
      if (in.would_block()) break;
    }
    if (lines.empty()) break;
    const size_t per = (lines.size() + ranks - 1) / ranks;
    std::vector<std::string> parts;
    for (size_t k = 0; k < ranks; ++k) {
      const size_t from = std::min(lines.size(), k * per), to = std::min(lines.size(), from + per);
      parts.push_back(pack_window(true, next_line + static_cast<int64_t>(from), lines.data() + from,
                                  lines.data() + to));
    }
    next_line += static_cast<int64_t>(lines.size());
    const std::string mine = comm.scatter(parts, 0);
    parts.clear();
    for (const auto& text : comm.gather(translate_window(mine, tr, o), 0)) out.write(text);
    out.flush();
    progress.update(next_line - 1, in.fraction_read());
  }
  progress.finish();
}

// The other ranks: windows until rank 0 says there are no more.
void serve_windows(Translator& tr, const Opts& o, Comm& comm) {
  for (;;) {
    const std::string mine = comm.scatter({}, 0);
    if (mine.empty() || mine[0] == '\0') return;
    comm.gather(translate_window(mine, tr, o), 0);
  }
}

void end_windows(Comm& comm) {
  comm.scatter(std::vector<std::string>(static_cast<size_t>(comm.size()),
                                        pack_window(false, 0, nullptr, nullptr)),
               0);
}

// test.en.gz -> test.en.hyp, or with --suffix de -> test.de: ".gz" and the
// language extension give way to the suffix.
std::string output_name(const std::string& input, const std::string& suffix) {
  std::string b = fs::path(input).filename().string();
  if (b.size() > 3 && b.compare(b.size() - 3, 3, ".gz") == 0) b.resize(b.size() - 3);
  if (suffix.empty()) return b + ".hyp";
  const auto dot = b.find_last_of('.');
  if (dot != std::string::npos && dot > 0) b.resize(dot);
  return b + (suffix[0] == '.' ? "" : ".") + suffix;
}

// One output path per input ("" for stdout), checked against every input
// and the model before anything is written.
std::vector<std::string> plan_outputs(const Opts& o) {
  std::vector<std::string> outs;
  if (o.suffix.find('/') != std::string::npos)
    throw UsageError("--suffix " + o.suffix + " holds a '/'; it names files inside --output-dir");
  if (!o.output_dir.empty()) {
    struct stat st;
    if (::stat(o.output_dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      throw InputError("--output-dir " + o.output_dir + " exists and is not a directory");
    for (const auto& in : o.inputs)
      outs.push_back(
          (fs::path(o.output_dir) / output_name(in == "-" ? "stdin" : in, o.suffix)).string());
  } else {
    if (o.output_given && o.output.empty()) io::check_output_path(o.output, "-o");
    outs.assign(o.inputs.size(), "");
    if (!o.output.empty() && o.output != "-") outs.assign(1, o.output);
  }
  std::vector<io::NamedPath> inputs;
  for (const auto& m : o.models) inputs.push_back({"-m", m});
  for (const auto& in : o.inputs) inputs.push_back({"-i", in});
  if (std::find(outs.begin(), outs.end(), "") != outs.end()) io::check_stdout_not_an_input(inputs);
  // --output-dir's names too, where the folder exists already: a name that
  // is a directory is refused before the first input is translated.
  struct stat st;
  const bool check_paths = o.output_dir.empty() || ::stat(o.output_dir.c_str(), &st) == 0;
  const std::string option = o.output_dir.empty() ? "-o" : "--output-dir";
  std::map<std::string, std::string> claimed;  // normalised output -> its input
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].empty()) continue;
    if (check_paths) io::check_output_path(outs[i], option, io::Content::Text);
    std::error_code ec;
    std::string key = fs::weakly_canonical(fs::absolute(outs[i]), ec).string();
    if (ec) key = outs[i];
    const std::string& input = o.inputs[std::min(i, o.inputs.size() - 1)];
    if (auto it = claimed.find(key); it != claimed.end())
      throw UsageError("inputs " + it->second + " and " + input + " would both be written to " +
                       outs[i] + "; give them different names or use --suffix");
    claimed[key] = input;
    io::check_not_an_input({option, outs[i]}, inputs);
  }
  return outs;
}

void run(Opts& o) {
  if (!o.sampling.empty()) {
    parse_sampling(o.sampling, o.search);
    if (o.beam_given && o.search.beam > 1)
      throw UsageError(
          "--sampling draws one token at a time: it takes --beam 1 (--n-best N "
          "draws N samples)");
    o.search.beam = o.search.n_best;  // the rows a sentence holds: one per sample
  }
  validate(o.search);
  if (o.search.n_best > o.search.beam)
    throw UsageError("--n-best " + std::to_string(o.search.n_best) + " exceeds --beam " +
                     std::to_string(o.search.beam));
  if (!o.output.empty() && o.inputs.size() > 1)
    throw UsageError("-o takes one input; use --output-dir for several");
  if (!o.suffix.empty() && o.output_dir.empty())
    throw UsageError("--suffix names the files of --output-dir; give --output-dir too");
  if (o.alignments && o.search.n_best > 1 && o.format == "text")
    throw UsageError(
        "--alignments belongs to the best translation; with --n-best use --format jsonl");
  if (o.attention && o.format != "jsonl")
    throw UsageError("--attention writes a matrix per line; it needs --format jsonl");
  if (o.inputs.empty()) o.inputs.push_back("-");
  for (const auto& m : o.models) io::check_input_path(m, "-m");
  // Distributed, rank 0 alone reads the inputs and writes the outputs: only
  // its node need hold them.
  Comm& comm = world();
  const bool root = comm.rank() == 0;
  std::vector<std::string> outs;
  on_root_then_share(comm, [&] {
    for (const auto& in : o.inputs) io::check_input_path(in, "-i");
    outs = plan_outputs(o);
    if (!o.output_dir.empty()) {
      std::error_code ec;
      fs::create_directories(o.output_dir, ec);
      if (ec) throw InputError("cannot create --output-dir " + o.output_dir + ": " + ec.message());
    }
  });
  // -m a -m b: an ensemble, which the first model's vocabulary reads and
  // writes for (each must have the same).
  std::vector<LoadedModel> loaded;
  loaded.reserve(o.models.size());
  const Device device = open_device(o.device);
  // Only the first model's shortlist can serve (see below), and sampling
  // never uses one.
  ShortlistLoad first_shortlist = ShortlistLoad::Skip;
  if (o.sampling.empty() && o.shortlist != "off")
    first_shortlist = o.shortlist == "on" ? ShortlistLoad::Read : ShortlistLoad::IfOnByDefault;
  for (const auto& m : o.models)
    loaded.push_back(load_model(m, o.compute, nullptr, device,
                                loaded.empty() ? first_shortlist : ShortlistLoad::Skip,
                                WeightsUse::ProductsOnly));
  LoadedModel& model = loaded[0];
  std::optional<Ensemble> ensemble;
  if (loaded.size() > 1) {
    if (const std::string why = ensemble_mismatch(loaded, o.models); !why.empty())
      throw InputError("-m " + why);
    ensemble.emplace(networks(loaded));
  }
  // The first model's shortlist serves an ensemble too: they share one vocabulary.
  if (o.shortlist == "on") {
    if (!o.sampling.empty())
      throw UsageError("--shortlist on restricts the search; --sampling draws from the whole "
                       "vocabulary");
    if (!model.shortlist)
      throw InputError(o.models[0] +
                       " has no vocabulary shortlist; nmt shortlist makes one from parallel text");
  }
  if (model.shortlist) o.search.shortlist = &*model.shortlist;  // read only if this run uses it
  auto warn = [&o](const std::string& what) {
    io::warn_on_stderr((o.input_name.empty() ? "" : o.input_name + " ") + what);
  };
  Translator tr(model, o.search, o.batch_tokens, warn, o.workers, o.threads,
                AttentionOutput{o.alignments, o.attention, o.alignment_layer - 1},
                ensemble ? &*ensemble : nullptr);
  tr.set_continuous(o.batching == "continuous");
  // Every worker may hold a batch at once: a --beam or --batch-tokens that
  // could take more than the machine has is refused before any work.
  if (const uint64_t phys = physical_memory_bytes()) {
    const double need = double(tr.workers()) * double(loaded.size()) *
                        decode_memory_bound(model.config, o.search, tr.batch_tokens(), o.window);
    if (need > double(phys)) {
      const bool beam = o.search.beam > 1 && o.beam_given;
      throw UsageError(std::string(beam ? "--beam " + std::to_string(o.search.beam)
                                        : "--batch-tokens " + std::to_string(tr.batch_tokens())) +
                       ": " + std::to_string(tr.workers()) +
                       " worker(s)' batches could need up to " + gigabytes(need) +
                       ", more than this machine's " + gigabytes(double(phys)) +
                       "; use a smaller --beam, --batch-tokens or --workers");
    }
  }
  if (o.verbose && root)
    std::fprintf(stderr,
                 "nmt translate: %s in %s on the %s, %d worker(s) x %d thread(s), batches of %lld "
                 "tokens, %s%s\nnumerics: %s\nweights: %s\n",
                 o.models[0].c_str(), compute_type_name(model.compute), device_name(device),
                 tr.workers(), tr.threads_per_worker(), static_cast<long long>(tr.batch_tokens()),
                 o.search.sampling.empty() ? ("beam " + std::to_string(o.search.beam)).c_str()
                                           : ("sampling " + o.sampling).c_str(),
                 o.search.shortlist ? ", vocabulary shortlist" : "",
                 backend(device).numerics().c_str(),
                 model.net->params().prepared_forms().c_str());
  // A line is cut while it is read at what the model could take of it (more
  // for tsv and jsonl, which carry a prefix and constraints too), so that a
  // 10 MB line costs a few times the model's length and not 1.7 GB.
  const int64_t max_src = model.config.max_positions - 1;
  io::TextChecks checks;
  const size_t cap = io::kMaxBytesPerSubword * static_cast<size_t>(max_src);
  checks.why_limit = "the model takes at most " + std::to_string(max_src) + " subwords";
  if (o.input_format == "text") {
    checks.max_line_bytes = cap;
  } else {
    // tsv and jsonl lines hold a prefix and constraints too, and JSON's
    // escapes take up to 12 bytes a character: they are cut only far beyond
    // that, and their fields once parsed (cut_field). A JSON object means
    // nothing in part: a jsonl line is read whole, as long as the machine
    // can parse it at ease (a 32nd of its memory, up to 256 MB), so that its
    // text is cut as a text line is; a longer one is read as an empty line.
    checks.max_line_bytes = 64 * cap;
    if (o.input_format == "jsonl") {
      checks.whole_lines = true;
      const uint64_t phys = physical_memory_bytes();
      checks.max_line_bytes =
          std::max<uint64_t>(checks.max_line_bytes, std::min<uint64_t>(uint64_t{256} << 20, phys / 32));
    }
    o.max_text_bytes = cap;
    o.why_limit = checks.why_limit;
  }
  checks.warn = io::warn_on_stderr;
  if (!root) return serve_windows(tr, o, comm);
  auto translate_input = [&](io::LineReader& in, Output& out) {
    if (comm.size() > 1)
      translate_stream_as_root(in, out, tr, o, comm);
    else
      translate_stream(in, out, tr, o);
  };
  try {
    if (!o.output_dir.empty()) {
      for (size_t i = 0; i < o.inputs.size(); ++i) {
        io::LineReader in(o.inputs[i], checks);
        o.input_name = in.path() == "-" ? "<stdin>" : in.path();
        Output out(outs[i]);
        translate_input(in, out);
        out.commit();
      }
    } else {
      Output out(outs[0]);
      for (const auto& in_path : o.inputs) {
        io::LineReader in(in_path, checks);
        o.input_name = in.path() == "-" ? "<stdin>" : in.path();
        translate_input(in, out);
      }
      out.commit();
    }
  } catch (const io::StdoutClosed&) {
    // The reader went away; nothing left to say. Writes come after a
    // round's gather, so the other ranks wait for the next window: none.
    if (comm.size() > 1) end_windows(comm);
    return;
  }
  if (comm.size() > 1) {
    end_windows(comm);
    return;
  }
  // Every output is committed: nothing the model, translator or kernels
  // hold is needed any more.
  if (!launched_distributed()) exit_without_teardown();
}

}  // namespace

void register_translate(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "translate", "Translate text with a trained model (stdin to stdout by default)");
  cmd->add_option("-m,--model", o->models,
                  "Model file (nmt train's or nmt convert's); several (-m a -m b) translate as "
                  "an ensemble, the mean of their probabilities at every step (they must share "
                  "one vocabulary; alignments come from the first)")
      ->required()
      ->allow_extra_args(false);  // one file per -m, so a stray argument is not a model
  cmd->add_option("-i,--input", o->inputs, "Input files (plain or .gz); default stdin");
  auto* out_opt = cmd->add_option("-o,--output", o->output,
                                  "Output file, written when complete (gzip if it ends in .gz; a "
                                  "device or FIFO is written through); default stdout")
                      ->each([o](const std::string&) { o->output_given = true; });
  cmd->add_option("--output-dir", o->output_dir,
                  "Write one output per input into this directory (created if missing)")
      ->excludes(out_opt);
  cmd->add_option("--suffix", o->suffix,
                  "With --output-dir, replace each input's language extension (and .gz) by "
                  "this (test.en.gz -> test.de); by default .hyp is appended (test.en.hyp)");
  add_compute_type_option(cmd, o->compute,
                          "f32, bf16 (AVX512-BF16 or AMX CPUs) or int8 for the weight products; "
                          "default: the model's (int8 after nmt quantize, else f32)");
  add_device_option(cmd, o->device);
  cmd->add_option("--beam", o->search.beam, "Beam size (1: greedy)")
      ->check(CLI::Range(1, 1024))
      ->each([o](const std::string&) { o->beam_given = true; });
  cmd->add_option("--alpha", o->search.alpha, "GNMT length penalty exponent")
      ->check(finite_range(0.0, 10.0));
  cmd->add_flag("--length-norm", o->search.length_norm,
                "Divide scores by length instead of the GNMT penalty");
  cmd->add_option("--n-best", o->search.n_best,
                  "Print this many hypotheses per input (<= beam); with --sampling, this many "
                  "independent samples")
      ->check(CLI::Range(1, 1024));
  auto* sampling = cmd->add_option("--sampling", o->sampling,
                  "Sample instead of searching (back-translation): topk:K from the K most "
                  "probable tokens, topp:P from the fewest reaching probability P (nucleus), or "
                  "full; with --beam 1. A line's samples depend only on --seed, its line number "
                  "and its text");
  // Both mean nothing to a search: given without --sampling, they are a
  // mistake to say, not to ignore.
  cmd->add_option("--sampling-temperature", o->search.temperature,
                  "Divide the logits by this before sampling (below 1: sharper)")
      ->check(finite_range(1e-3, 100.0))
      ->needs(sampling);
  cmd->add_option("--seed", o->search.seed, "Seed of --sampling")
      ->check(unsigned_integer())
      ->needs(sampling)
      ->capture_default_str();
  cmd->add_flag("--verbose", o->verbose,
                "Print how it will translate (compute type, device, workers, threads, batch size, "
                "the backend's numerics) on stderr before it starts");
  cmd->add_flag("--progress", o->progress,
                "Print a progress line (lines, lines/s, share of the file, ETA) every 10 s on "
                "stderr; on a terminal a live line is shown anyway for a file input");
  cmd->add_flag("--scores", o->scores,
                "Print each translation's search score first: its log-probability divided by "
                "the GNMT length penalty ((5 + tokens) / 6)^alpha, or by tokens with "
                "--length-norm (the 'score' column of nmt score -m)");
  cmd->add_option("--format", o->format,
                  "text, or jsonl (line, translation, score, logprob, tokens)")
      ->check(CLI::IsMember({"text", "jsonl"}));
  cmd->add_option("--input-format", o->input_format,
                  "text; tsv: source<TAB>prefix, the translation starts with the prefix; jsonl: "
                  "{\"text\": ..., \"constraints\": [...], \"prefix\": ...}, every constraint "
                  "(target text) appears in the translation. A line that does not parse gets a "
                  "warning and an empty output line")
      ->check(CLI::IsMember({"text", "tsv", "jsonl"}));
  cmd->add_flag("--alignments", o->alignments,
                "Append ' ||| 0-0 1-2 ...' (source word-target word, counted from 0 as in Moses "
                "and fast_align) from the cross-attention averaged over heads; jsonl: an "
                "\"alignment\" field");
  cmd->add_option("--alignment-layer", o->alignment_layer,
                  "Decoder layer of --alignments and --attention, from 1 (0: the second-to-last)")
      ->check(CLI::Range(0, 1024));
  cmd->add_flag("--attention", o->attention,
                "With --format jsonl: the best translation's cross-attention (target piece x "
                "source piece, heads averaged) and the pieces, as \"attention\"");
  cmd->add_option("--batch-tokens", o->batch_tokens,
                  "Source tokens per batch (0: " + std::to_string(kBatchTokensOneThread) +
                      " for workers of one thread (" + std::to_string(kBatchTokensOneThreadInt8) +
                      " in int8), " + std::to_string(kBatchTokensThreaded) +
                      " for workers of several)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--batching", o->batching,
                  "static: each batch runs until its last sentence ends; continuous: as sentences "
                  "finish, the next ones join the running batch (the output is the same)")
      ->check(CLI::IsMember({"continuous", "static"}));
  cmd->add_option("--window", o->window, "Lines read ahead and sorted by length")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--threads", o->threads,
                  "CPU threads of each worker (0: the cores shared out among the workers "
                  "that a window keeps busy)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--workers", o->workers,
                  "Translators sharing the one loaded model, each on its own threads; batches "
                  "are shared out among them, and the output is the same for any number "
                  "(0: min(cores, 4))")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--shortlist", o->shortlist,
                  "Restrict each sentence's output to the model's vocabulary shortlist for its "
                  "source: on, off, or auto (on where the model's training run measured it to "
                  "cost at most " +
                      shortlist_cost_limit() +
                      " BLEU on its validation set; nmt info shows what it measured)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_option("--max-length-a", o->search.max_len_a,
                  "Max output length = a * source length + b")
      ->check(finite_range(0.0, 100.0));
  cmd->add_option("--max-length-b", o->search.max_len_b, "See --max-length-a")
      ->check(CLI::Range(0, 100000));
  cmd->callback([o] { run(*o); });
}

}  // namespace nmt::app
