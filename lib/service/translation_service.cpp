#include "service/translation_service.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "core/backend.h"
#include "core/error.h"
#include "core/memory.h"
#include "decode/shortlist_cost.h"
#include "model/loaded_model.h"

namespace nmt {

TranslationService::TranslationService(TranslateOptions opts,
                                       std::function<void(const std::string&)> warn)
    : opts_(std::move(opts)), warn_(std::move(warn)) {
  // Only the first model's shortlist can serve (an ensemble shares its
  // vocabulary), and sampling never uses one.
  ShortlistLoad first_shortlist = ShortlistLoad::Skip;
  if (opts_.search.sampling.empty() && opts_.shortlist != ShortlistUse::off)
    first_shortlist =
        opts_.shortlist == ShortlistUse::on ? ShortlistLoad::Read : ShortlistLoad::IfOnByDefault;
  models_.reserve(opts_.models.size());
  for (const auto& m : opts_.models)
    models_.push_back(load_model(m, opts_.compute, nullptr, opts_.device,
                                 models_.empty() ? first_shortlist : ShortlistLoad::Skip,
                                 WeightsUse::ProductsOnly));
  const LoadedModel& model = models_[0];
  if (models_.size() > 1) {
    if (const std::string why = ensemble_mismatch(models_, opts_.models); !why.empty())
      throw about_option<InputError>("model", why);
    ensemble_.emplace(networks(models_));
  }
  if (opts_.shortlist == ShortlistUse::on && !model.shortlist)
    throw InputError(opts_.models[0] +
                     " has no vocabulary shortlist; nmt shortlist makes one from parallel text");
  if (model.shortlist) opts_.search.shortlist = &*model.shortlist;  // read only if used
  translator_ = std::make_unique<Translator>(
      model, opts_.search, opts_.batch_tokens,
      [this](const std::string& what) { warn_input(what); }, opts_.workers, opts_.threads,
      AttentionOutput{opts_.output.alignments, opts_.output.attention, opts_.alignment_layer - 1},
      ensemble_ ? &*ensemble_ : nullptr);
  translator_->set_continuous(opts_.continuous);
  check_memory();
  request_format_.format = opts_.input_format;
  if (opts_.input_format != InputFormat::text) {
    request_format_.max_text_bytes = text_cap();
    request_format_.why_limit = why_limit();
  }
}

TranslationService::~TranslationService() = default;

void TranslationService::warn_input(const std::string& what) const {
  warn_((input_name_.empty() ? "" : input_name_ + " ") + what);
}

// Every worker may hold a batch at once: a beam or batch size that could
// take more than the machine has is refused before any work.
void TranslationService::check_memory() const {
  const uint64_t phys = physical_memory_bytes();
  if (!phys) return;
  const Translator& tr = *translator_;
  const double need = double(tr.workers()) * double(models_.size()) *
                      decode_memory_bound(models_[0].config, opts_.search, tr.batch_tokens(),
                                          opts_.window);
  if (need <= double(phys)) return;
  const bool beam = opts_.search.beam > 1 && opts_.given.count("beam") > 0;
  throw about_option<UsageError>(
      beam ? "beam" : "batch_tokens",
      std::to_string(beam ? opts_.search.beam : tr.batch_tokens()) + ": " +
          std::to_string(tr.workers()) + " worker(s)' batches could need up to " +
          gigabytes(need) + ", more than this machine's " + gigabytes(double(phys)) +
          "; use a smaller beam, fewer tokens per batch or fewer workers");
}

// The bytes of text the model could take: SentencePiece's longest pieces
// at every position it has.
size_t TranslationService::text_cap() const {
  return io::kMaxBytesPerSubword * static_cast<size_t>(models_[0].config.max_positions - 1);
}

std::string TranslationService::why_limit() const {
  return "the model takes at most " + std::to_string(models_[0].config.max_positions - 1) +
         " subwords";
}

std::string TranslationService::describe() const {
  const Translator& tr = *translator_;
  const LoadedModel& model = models_[0];
  const SearchOptions& s = opts_.search;
  return opts_.models[0] + " in " + compute_type_name(model.compute) + " on the " +
         device_name(opts_.device) + ", " + std::to_string(tr.workers()) + " worker(s) x " +
         std::to_string(tr.threads_per_worker()) + " thread(s), batches of " +
         std::to_string(tr.batch_tokens()) + " tokens, " +
         (s.sampling.empty() ? "beam " + std::to_string(s.beam) : "sampling " + sampling_spec(s)) +
         (s.shortlist ? ", vocabulary shortlist" : "") +
         "\nnumerics: " + backend(opts_.device).numerics() +
         "\nweights: " + model.net->params().prepared_forms() + "\n";
}

io::TextChecks TranslationService::text_checks() const {
  // A line is cut while it is read at what the model could take of it
  // (more for tsv and jsonl, which carry a prefix and constraints too), so
  // that a 10 MB line costs a few times the model's length and not 1.7 GB.
  io::TextChecks checks;
  const size_t cap = text_cap();
  checks.why_limit = why_limit();
  checks.max_line_bytes = cap;
  if (opts_.input_format != InputFormat::text) {
    // tsv and jsonl lines hold a prefix and constraints too, and JSON's
    // escapes take up to 12 bytes a character: they are cut only far beyond
    // that, and their fields once parsed (parse_request). A JSON object
    // means nothing in part: a jsonl line is read whole, as long as the
    // machine can parse it at ease (a 32nd of its memory, up to 256 MB), so
    // that its text is cut as a text line is; a longer one is read as an
    // empty line.
    checks.max_line_bytes = 64 * cap;
    if (opts_.input_format == InputFormat::jsonl) {
      checks.whole_lines = true;
      const uint64_t phys = physical_memory_bytes();
      checks.max_line_bytes = std::max<uint64_t>(
          checks.max_line_bytes, std::min<uint64_t>(uint64_t{256} << 20, phys / 32));
    }
  }
  checks.warn = warn_;
  return checks;
}

std::vector<TranslationResult> TranslationService::translate_requests(
    std::vector<std::string>& lines, int64_t first) {
  // One write per warning, so that ranks' warnings do not interleave.
  auto warn_line = [this](int64_t line_no, const std::string& what) {
    warn_input("line " + std::to_string(line_no) + ": " + what);
  };
  std::vector<TranslationRequest> requests;
  requests.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i)
    requests.push_back(parse_request(std::move(lines[i]), request_format_,
                                     first + static_cast<int64_t>(i), warn_line));
  return translator_->translate(requests, first);
}

void TranslationService::translate(io::LineReader& in, const std::string& name,
                                   const StreamSink& sink, Comm* comm) {
  input_name_ = name;
  if (comm && comm->size() > 1) return translate_as_root(in, sink, *comm);
  std::vector<std::string> window;
  std::string line;
  int64_t first = 1;
  auto flush = [&] {
    sink.write(format_results(translate_requests(window, first), opts_.output, first));
    first += static_cast<int64_t>(window.size());
    window.clear();
    if (sink.progress) sink.progress(first - 1, in.fraction_read());
  };
  while (in.next(line)) {
    window.push_back(std::move(line));
    if (static_cast<int>(window.size()) >= opts_.window || in.would_block()) flush();
  }
  if (!window.empty()) flush();
}

std::vector<std::string> TranslationService::translate(const std::vector<std::string>& lines) {
  std::string text;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find('\n') != std::string::npos)
      throw InputError("line " + std::to_string(i + 1) +
                       " holds a line break; give each line on its own");
    text += lines[i];
    text += '\n';
  }
  input_name_ = "<lines>";
  std::istringstream stream(std::move(text));
  io::TextChecks checks = text_checks();
  io::LineReader in(stream, input_name_, checks);
  std::vector<std::string> out, window;
  out.reserve(lines.size());
  std::string line;
  auto flush = [&] {
    const int64_t first = static_cast<int64_t>(out.size()) + 1;
    std::vector<TranslationResult> results = translate_requests(window, first);
    for (size_t i = 0; i < results.size(); ++i)
      out.push_back(format_results({std::move(results[i])}, opts_.output,
                                   first + static_cast<int64_t>(i)));
    window.clear();
  };
  while (in.next(line)) {
    window.push_back(std::move(line));
    if (static_cast<int>(window.size()) >= opts_.window) flush();
  }
  if (!window.empty()) flush();
  return out;
}

// A distributed run (mpirun/srun): rank 0 reads the input in rounds of one
// window per rank and scatters them; every rank translates its window with
// its own workers; rank 0 gathers the translations and writes them in
// input order. A line's translation depends only on the line, its number
// and the options (batch invariance; sampling's draws are keyed by the
// line), so the bytes are those one process writes. Windows travel as: a
// flag byte (1: lines follow; 0: no more input), the 1-based number of the
// first line, the number of lines, then each line's length and bytes. One
// round must stay below MPI's 2 GiB a message.
namespace {

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

}  // namespace

// One rank's share of a round: its window in, its translations' text out.
std::string TranslationService::translate_window(const std::string& packed) {
  int64_t first = 0;
  std::vector<std::string> lines;
  if (!unpack_window(packed, first, lines) || lines.empty()) return {};
  return format_results(translate_requests(lines, first), opts_.output, first);
}

// Rank 0: one input, round by round, until it is read.
void TranslationService::translate_as_root(io::LineReader& in, const StreamSink& sink,
                                           Comm& comm) {
  const size_t ranks = static_cast<size_t>(comm.size()), full = ranks * opts_.window;
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
    std::string text;
    for (const auto& part : comm.gather(translate_window(mine), 0)) text += part;
    sink.write(text);
    if (sink.progress) sink.progress(next_line - 1, in.fraction_read());
  }
}

void TranslationService::serve_windows(Comm& comm) {
  for (;;) {
    const std::string mine = comm.scatter({}, 0);
    if (mine.empty() || mine[0] == '\0') return;
    comm.gather(translate_window(mine), 0);
  }
}

void TranslationService::end_windows(Comm& comm) {
  comm.scatter(std::vector<std::string>(static_cast<size_t>(comm.size()),
                                        pack_window(false, 0, nullptr, nullptr)),
               0);
}

}  // namespace nmt
