#include "service/translation_service.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "core/backend.h"
#include "core/error.h"
#include "core/memory.h"
#include "decode/attention_maps.h"
#include "decode/shortlist_cost.h"
#include "model/languages.h"
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
      // HTML's inline elements follow the words' alignments.
      AttentionOutput{opts_.output.alignments || opts_.output.format == OutputFormat::html,
                      opts_.output.attention, opts_.alignment_layer - 1},
      ensemble_ ? &*ensemble_ : nullptr);
  translator_->set_continuous(opts_.continuous);
  check_languages(model.config);
  if (opts_.split != SplitMode::none)
    splitter_.emplace(opts_.source_language.empty() ? "en" : opts_.source_language);
  check_memory();
  request_format_.format = opts_.input_format;
  if (opts_.input_format != InputFormat::text) {
    request_format_.max_text_bytes = text_cap();
    request_format_.why_limit = why_limit();
  }
}

TranslationService::~TranslationService() = default;

const ModelConfig& TranslationService::model_config() const { return models_[0].config; }

void TranslationService::warn_input(const std::string& what) const {
  warn_((input_name_.empty() ? "" : input_name_ + " ") + what);
}

void TranslationService::check_languages(const ModelConfig& c) const {
  if (!c.languages.empty() && (opts_.output.alignments || opts_.output.attention ||
                               opts_.output.format == OutputFormat::html))
    throw UsageError(
        "alignments, attention and HTML are not yet available for multilingual models (their "
        "language tokens would be counted as words)");
  // jsonl lines may give what the options leave out: what is given is checked.
  const bool per_line = opts_.input_format == InputFormat::jsonl;
  const std::string any = per_line && !c.languages.empty() ? c.languages.begin()->first : "";
  language_framing(c, opts_.source_lang.empty() ? any : opts_.source_lang,
                   opts_.target_lang.empty() ? any : opts_.target_lang);
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

// A line is translated in pieces the model can take, up to this many times
// the bytes it could take at once (SentencePiece's longest pieces at every
// position it has): 65 KB for 255 subwords, some 10,000 words of a
// paragraph on one line, while a 10 MB line costs a few times that and not
// its whole length.
constexpr size_t kModelLengthsPerLine = 4;

size_t TranslationService::text_cap() const {
  return kModelLengthsPerLine * io::kMaxBytesPerSubword *
         static_cast<size_t>(models_[0].config.max_positions - 1);
}

std::string TranslationService::model_limit() const {
  return "the model takes at most " + std::to_string(models_[0].config.max_positions - 1) +
         " subwords at once";
}

std::string TranslationService::why_limit() const {
  return "a line is translated in pieces up to " + std::to_string(kModelLengthsPerLine) +
         " times what " + model_limit();
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
  // A line is cut while it is read at text_cap() (more for tsv and jsonl,
  // which carry a prefix and constraints too), so that a 10 MB line costs a
  // few times the model's length and not 1.7 GB.
  io::TextChecks checks;
  const size_t cap = text_cap();
  checks.why_limit = why_limit();
  checks.max_line_bytes = cap;
  if (opts_.input_format != InputFormat::text || opts_.output.format == OutputFormat::html) {
    // tsv and jsonl lines hold a prefix and constraints too, and JSON's
    // escapes take up to 12 bytes a character: they are cut only far beyond
    // that, and their fields once parsed (parse_request). A JSON object
    // means nothing in part, nor does a tag: a jsonl or HTML line is read
    // whole, as long as the machine can parse it at ease (a 32nd of its
    // memory, up to 256 MB), so that its text is cut as a text line is; a
    // longer one is read as an empty line.
    checks.max_line_bytes = 16 * cap;
    if (opts_.input_format == InputFormat::jsonl || opts_.output.format == OutputFormat::html) {
      checks.whole_lines = true;
      const uint64_t phys = physical_memory_bytes();
      checks.max_line_bytes = std::max<uint64_t>(
          checks.max_line_bytes, std::min<uint64_t>(uint64_t{256} << 20, phys / 32));
    }
  }
  checks.warn = warn_;
  return checks;
}

bool TranslationService::fits(const std::string& text) const {
  const LoadedModel& model = models_[0];
  const size_t max_src =
      static_cast<size_t>(model.config.max_positions - model.config.source_tokens(0));
  // A piece holds a character at least (and a word's first may stand
  // alone): a text of fewer bytes fits without being encoded.
  if (text.size() + 1 <= max_src) return true;
  return model.src_vocab().encode(text).size() <= max_src;
}

Segmented TranslationService::segments_of(const std::string& text, int64_t line) const {
  Segmented segmented = splitter_ ? splitter_->split(text) : whole_line(text);
  std::vector<Segment> pieces;
  for (const Segment& s : segmented.segments) {
    std::vector<Segment> p = pieces_that_fit(s, [this](const std::string& t) { return fits(t); });
    if (p.size() > 1)
      warn_input("line " + std::to_string(line) + ": a sentence of " +
                 std::to_string(s.text.size()) + " bytes is longer than " + model_limit() +
                 "; it is translated in " + std::to_string(p.size()) +
                 " pieces cut at clause boundaries");
    pieces.insert(pieces.end(), p.begin(), p.end());
  }
  segmented.segments = std::move(pieces);
  return segmented;
}

TranslationService::Flow TranslationService::flow_of(Segmented segments, int64_t line,
                                                     const std::string& prefix,
                                                     std::vector<TranslationRequest>& requests) {
  Flow f{requests.size(), requests.size(), std::move(segments)};
  for (const Segment& s : f.segments.segments) {
    TranslationRequest part;
    part.source = s.text;
    part.line = line;
    if (requests.size() == f.begin) part.prefix = prefix;
    requests.push_back(std::move(part));
  }
  f.end = requests.size();
  return f;
}

TranslationService::LineLayout TranslationService::lay_out(
    TranslationRequest rq, bool html, std::vector<TranslationRequest>& requests) {
  LineLayout l;
  auto add = [&](const std::string& text) {
    l.flows.push_back(flow_of(segments_of(text, rq.line), rq.line, {}, requests));
  };
  if (html && !rq.skip) {
    try {
      l.html.emplace(rq.source);
    } catch (const InputError& e) {
      warn_input("line " + std::to_string(rq.line) + ": not well-formed HTML (" + e.what() +
                 "); translated as text");
    }
    if (l.html) {
      l.whole = false;
      // Inline tags follow the words' alignment.
      const size_t first = requests.size();
      for (const std::string& text : l.html->flows()) add(text);
      for (size_t k = first; k < requests.size(); ++k) requests[k].align = true;
      return l;
    }
  }
  // A text of several lines (HTML that is not well formed, a program's
  // request): each line on its own, as a file's would be.
  if (!rq.skip && (html || rq.source.find('\n') != std::string::npos)) {
    l.whole = false;
    for (size_t at = 0; at <= rq.source.size();) {
      size_t end = std::min(rq.source.find('\n', at), rq.source.size());
      const size_t next = end + 1;
      if (end > at && rq.source[end - 1] == '\r') --end;
      add(rq.source.substr(at, end - at));
      at = next;
    }
    return l;
  }
  // Constraints belong to the whole line (a prefix, to its first segment).
  if (!rq.skip && rq.constraints.empty()) {
    Segmented segments = segments_of(rq.source, rq.line);
    l.whole = !splitter_ && segments.segments.size() <= 1;
    if (!l.whole) {
      l.flows.push_back(flow_of(std::move(segments), rq.line, rq.prefix, requests));
      return l;
    }
  }
  // As it came: one request.
  l.flows.assign(1, Flow{requests.size(), requests.size() + 1, {}});
  requests.push_back(std::move(rq));
  return l;
}

namespace {

// Words in a translation's pieces, as word_alignment() counts them.
int words_in(const std::vector<std::string>& pieces) {
  const std::vector<int> word = word_of_piece(pieces);
  return word.empty() ? 0 : word.back() + 1;
}

}  // namespace

TranslationResult TranslationService::join_flow(const Flow& f,
                                                const std::vector<TranslationRequest>& requests,
                                                std::vector<TranslationResult>& results,
                                                AlignedText* aligned) const {
  TranslationResult out;
  std::vector<std::string> texts;
  size_t n_best = 0;
  int src_words = 0, out_words = 0;
  for (size_t i = f.begin; i < f.end; ++i) {
    const TranslationResult& r = results[i];
    texts.push_back(r.text);
    out.score += r.score;
    out.logprob += r.logprob;
    out.tokens += r.tokens;
    n_best = std::max(n_best, r.n_best.size());
    for (const auto& [s, t] : r.alignment) out.alignment.emplace_back(s + src_words, t + out_words);
    src_words += words_in(r.src_pieces);
    out_words += words_in(r.out_pieces);
    out.src_pieces.insert(out.src_pieces.end(), r.src_pieces.begin(), r.src_pieces.end());
    out.out_pieces.insert(out.out_pieces.end(), r.out_pieces.begin(), r.out_pieces.end());
    out.parts.push_back({requests[i].source, r.text, r.score,
                         r.tokens > 0 ? r.logprob / static_cast<double>(r.tokens) : 0.0});
  }
  std::vector<size_t> starts;
  out.text = join_segments(f.segments, texts, &starts);
  if (aligned) {
    // Each segment's words where they stand in the flow and in its
    // translation; its alignment indexed by them.
    aligned->text = out.text;
    size_t at = f.segments.lead.size();
    for (size_t k = 0; k < texts.size(); ++k) {
      const Segment& s = f.segments.segments[k];
      const std::vector<TextSpan> src = words_of(s.text, at);
      const std::vector<TextSpan> tgt = words_of(texts[k], starts[k]);
      const int src_base = static_cast<int>(aligned->source_words.size());
      const int tgt_base = static_cast<int>(aligned->target_words.size());
      for (const auto& [a, b] : results[f.begin + k].alignment)
        if (static_cast<size_t>(a) < src.size() && static_cast<size_t>(b) < tgt.size())
          aligned->alignment.emplace_back(a + src_base, b + tgt_base);
      aligned->source_words.insert(aligned->source_words.end(), src.begin(), src.end());
      aligned->target_words.insert(aligned->target_words.end(), tgt.begin(), tgt.end());
      at += s.text.size() + s.after.size();
    }
  }
  // The k-th hypothesis of the line: each segment's k-th (or its last).
  for (size_t k = 0; k < n_best; ++k) {
    std::vector<std::string> kth;
    double score = 0;
    for (size_t i = f.begin; i < f.end; ++i) {
      const auto& nb = results[i].n_best;
      if (nb.empty()) {
        kth.emplace_back();
        continue;
      }
      kth.push_back(nb[std::min(k, nb.size() - 1)].first);
      score += nb[std::min(k, nb.size() - 1)].second;
    }
    out.n_best.emplace_back(join_segments(f.segments, kth), score);
  }
  return out;
}

TranslationResult TranslationService::join(const LineLayout& l,
                                           const std::vector<TranslationRequest>& requests,
                                           std::vector<TranslationResult>& results) const {
  if (l.whole) return std::move(results[l.flows[0].begin]);
  if (!l.html && l.flows.size() == 1) return join_flow(l.flows[0], requests, results, nullptr);
  // A document: its flows rendered into its markup, or its lines (their
  // k-th hypotheses too).
  TranslationResult out;
  std::vector<AlignedText> aligned(l.flows.size());
  for (size_t i = 0; i < l.flows.size(); ++i) {
    TranslationResult r = join_flow(l.flows[i], requests, results, l.html ? &aligned[i] : nullptr);
    out.score += r.score;
    out.logprob += r.logprob;
    out.tokens += r.tokens;
    if (l.html) continue;
    out.text += (i ? "\n" : "") + r.text;
    if (out.n_best.size() < r.n_best.size()) out.n_best.resize(r.n_best.size());
    for (size_t k = 0; k < out.n_best.size(); ++k) {
      const auto& kth = r.n_best.empty() ? std::pair<std::string, double>()
                                         : r.n_best[std::min(k, r.n_best.size() - 1)];
      out.n_best[k].first += (i ? "\n" : "") + kth.first;
      out.n_best[k].second += kth.second;
    }
  }
  if (l.html) out.text = l.html->render(aligned);
  return out;
}

std::vector<TranslationResult> TranslationService::translate_requests(
    std::vector<std::string>& lines, int64_t first) {
  // One write per warning, so that ranks' warnings do not interleave.
  auto warn_line = [this](int64_t line_no, const std::string& what) {
    warn_input("line " + std::to_string(line_no) + ": " + what);
  };
  std::vector<TranslationRequest> parsed;
  parsed.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const int64_t line_no = first + static_cast<int64_t>(i);
    parsed.push_back(parse_request(std::move(lines[i]), request_format_, line_no, warn_line));
    parsed.back().line = line_no;
  }
  return translate_parsed(
      std::move(parsed), std::vector<char>(lines.size(), opts_.output.format == OutputFormat::html),
      first, nullptr);
}

std::vector<TranslationResult> TranslationService::translate_parsed(
    std::vector<TranslationRequest> parsed, const std::vector<char>& html, int64_t first,
    size_t* segments) {
  std::vector<TranslationRequest> requests;
  requests.reserve(parsed.size());
  std::vector<LineLayout> layouts;
  layouts.reserve(parsed.size());
  // The splitter is one object; the translator takes windows from several
  // threads at once.
  std::unique_lock<std::mutex> prepare(prepare_mu_);
  for (size_t i = 0; i < parsed.size(); ++i) {
    TranslationRequest& rq = parsed[i];
    // The line's languages, or the options', go with each request it becomes.
    const std::string source_lang = rq.source_lang.empty() ? opts_.source_lang : rq.source_lang,
                      target_lang = rq.target_lang.empty() ? opts_.target_lang : rq.target_lang;
    const size_t before = requests.size();
    layouts.push_back(lay_out(std::move(rq), html[i], requests));
    for (size_t k = before; k < requests.size(); ++k)
      requests[k].source_lang = source_lang, requests[k].target_lang = target_lang;
  }
  prepare.unlock();
  if (segments) *segments = requests.size();
  std::vector<TranslationResult> results = translator_->translate(requests, first);
  std::vector<TranslationResult> out;
  out.reserve(layouts.size());
  for (const LineLayout& l : layouts) out.push_back(join(l, requests, results));
  return out;
}

void TranslationService::wait_for_idle_worker() const { translator_->wait_for_idle_worker(); }

int TranslationService::workers() const { return translator_->workers(); }

std::vector<TranslationResult> TranslationService::translate_texts(
    const std::vector<TextRequest>& texts, size_t* segments) {
  {
    // Written once: warnings of other threads' windows read it.
    std::lock_guard<std::mutex> lock(prepare_mu_);
    if (input_name_ != kRequestName) input_name_ = kRequestName;
  }
  std::vector<TranslationRequest> parsed(texts.size());
  std::vector<char> html(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    parsed[i].source = io::sanitize_utf8(texts[i].text);
    parsed[i].source_lang = texts[i].source_lang;
    parsed[i].target_lang = texts[i].target_lang;
    parsed[i].line = static_cast<int64_t>(i) + 1;
    html[i] = texts[i].html;
  }
  return translate_parsed(std::move(parsed), html, 1, segments);
}

namespace {

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\f\v") == std::string::npos;
}

}  // namespace

// The input's units: its lines; with paragraphs, each block of lines
// between blank lines joined into one (as wrapped text: a space between
// lines, none between lines of Chinese or Japanese), and each blank line;
// with HTML, each fragment that closes what it opens (HtmlFragments).
class TranslationService::Units {
 public:
  Units(io::LineReader& in, const TranslateOptions& opts, size_t max_bytes)
      : in_(in), paragraphs_(opts.split == SplitMode::paragraphs) {
    if (opts.output.format == OutputFormat::html) html_.emplace(max_bytes);
  }
  bool next(std::string& unit) {
    if (html_) {
      std::string line;
      while (in_.next(line))
        if (html_->add(line)) break;
      if (html_->empty()) return false;
      unit = html_->take();
      return true;
    }
    if (!paragraphs_) return in_.next(unit);
    std::string line;
    if (!read(line)) return false;
    unit = std::move(line);
    if (blank(unit)) {
      unit.clear();
      return true;
    }
    while (read(line)) {
      if (blank(line)) {
        ahead_ = std::move(line);
        break;
      }
      const size_t end = unit.find_last_not_of(" \t\r");
      unit.resize(end + 1);
      const std::string rest = line.substr(line.find_first_not_of(" \t"));
      if (!(ends_unspaced(unit) && starts_unspaced(rest))) unit += ' ';
      unit += rest;
    }
    return true;
  }
  bool would_block() const { return !ahead_ && in_.would_block(); }
  double fraction_read() const { return in_.fraction_read(); }

 private:
  bool read(std::string& line) {
    if (!ahead_) return in_.next(line);
    line = std::move(*ahead_);
    ahead_.reset();
    return true;
  }
  io::LineReader& in_;
  const bool paragraphs_;
  std::optional<std::string> ahead_;  // a blank line read past a paragraph's end
  std::optional<HtmlFragments> html_;
};

void TranslationService::translate(io::LineReader& reader, const std::string& name,
                                   const StreamSink& sink, Comm* comm) {
  input_name_ = name;
  Units in(reader, opts_, text_checks().max_line_bytes);
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
  input_name_ = "<lines>";
  std::vector<std::string> out, window;
  out.reserve(lines.size());
  auto flush = [&] {
    const int64_t first = static_cast<int64_t>(out.size()) + 1;
    std::vector<TranslationResult> results = translate_requests(window, first);
    for (size_t i = 0; i < results.size(); ++i)
      out.push_back(format_results({std::move(results[i])}, opts_.output,
                                   first + static_cast<int64_t>(i)));
    window.clear();
  };
  auto add = [&](std::string unit) {
    window.push_back(std::move(unit));
    if (static_cast<int>(window.size()) >= opts_.window) flush();
  };
  if (opts_.output.format == OutputFormat::html) {
    // Each is a fragment or a document, line breaks and all.
    for (const std::string& l : lines) add(io::sanitize_utf8(l));
  } else {
    std::string text;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].find('\n') != std::string::npos)
        throw InputError("line " + std::to_string(i + 1) +
                         " holds a line break; give each line on its own");
      text += lines[i];
      text += '\n';
    }
    std::istringstream stream(std::move(text));
    io::TextChecks checks = text_checks();
    io::LineReader reader(stream, input_name_, checks);
    Units in(reader, opts_, checks.max_line_bytes);
    for (std::string unit; in.next(unit);) add(std::move(unit));
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
void TranslationService::translate_as_root(Units& in, const StreamSink& sink, Comm& comm) {
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
