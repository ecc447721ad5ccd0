// The public Translator over the library's TranslationService: its options
// turned into the service's, and every error into an api::Error.
#include "nmt/translator.h"

#include <istream>
#include <mutex>
#include <ostream>
#include <shared_mutex>

#include "api/guard.h"
#include "core/device.h"
#include "io/output_file.h"
#include "io/text_file.h"
#include "service/translation_service.h"

namespace nmt::api {

namespace {

nmt::TranslateOptions service_options(const std::vector<std::string>& models,
                                      const TranslateOptions& o) {
  nmt::TranslateOptions t;
  for (const auto& m : models) io::check_input_path(m, "model");
  t.models = models;
  t.compute = o.compute_type;
  SearchOptions& s = t.search;
  s.beam = o.beam;
  s.alpha = static_cast<float>(o.alpha);
  s.length_norm = o.length_norm;
  s.n_best = o.n_best;
  s.max_len_a = static_cast<float>(o.max_length_a);
  s.max_len_b = o.max_length_b;
  s.temperature = static_cast<float>(o.sampling_temperature);
  s.seed = o.seed;
  if (!o.sampling.empty()) parse_sampling(o.sampling, s);
  if (o.beam != SearchOptions{}.beam) t.given.insert("beam");
  t.shortlist = o.shortlist == Shortlist::on    ? ShortlistUse::on
                : o.shortlist == Shortlist::off ? ShortlistUse::off
                                                : ShortlistUse::automatic;
  t.batch_tokens = o.batch_tokens;
  t.continuous = o.continuous_batching;
  t.window = o.window;
  t.threads = o.threads;
  t.workers = o.workers;
  t.input_format = o.input_format == InputFormat::tsv     ? nmt::InputFormat::tsv
                   : o.input_format == InputFormat::jsonl ? nmt::InputFormat::jsonl
                                                          : nmt::InputFormat::text;
  // By the option table, as nmt translate --split reads them.
  nlohmann::json split = nlohmann::json::object();
  if (!o.split.empty()) split["split"] = o.split;
  if (!o.source_language.empty()) split["source_language"] = o.source_language;
  apply_translate_json(split, t);
  t.output.format = o.format == OutputFormat::jsonl  ? nmt::OutputFormat::jsonl
                    : o.format == OutputFormat::html ? nmt::OutputFormat::html
                                                     : nmt::OutputFormat::text;
  t.output.scores = o.scores;
  t.output.alignments = o.alignments;
  t.output.attention = o.attention;
  t.alignment_layer = o.alignment_layer;
  check_options(t);
  t.device = open_device(o.device);
  return t;
}

// One input to its end, each window's translations handed to write as they
// are done; returns the units (lines) translated.
int64_t translate_to(TranslationService& service, io::LineReader& in, const std::string& name,
                     const std::function<void(const std::string&)>& write) {
  int64_t lines = 0;
  StreamSink sink;
  sink.write = write;
  sink.progress = [&lines](int64_t done, double) { lines = done; };
  service.translate(in, name, sink);
  return lines;
}

void translate_to(TranslationService& service, io::LineReader& in, const std::string& name,
                  std::ostream& out) {
  translate_to(service, in, name, [&out](const std::string& text) {
    out << text;
    out.flush();
    if (!out) throw nmt::Error("cannot write the translations: the output stream failed");
  });
}

// attention: the pieces and map asked for (as jsonl's "attention" gives
// them: a line translated in pieces has its pieces but no map).
api::TranslationResult result_of(nmt::TranslationResult& r, bool attention) {
  api::TranslationResult out;
  if (attention && !r.text.empty()) {
    out.source_pieces = std::move(r.src_pieces);
    out.target_pieces = std::move(r.out_pieces);
    out.source_pieces.emplace_back("</s>");
    out.target_pieces.emplace_back("</s>");
    for (int64_t t = 0; t < r.attention.rows; ++t)
      out.attention.emplace_back(r.attention.w.begin() + t * r.attention.cols,
                                 r.attention.w.begin() + (t + 1) * r.attention.cols);
  }
  for (auto& [text, score] : r.n_best) {
    out.hypotheses.push_back(std::move(text));
    out.scores.push_back(score);
  }
  if (out.hypotheses.empty()) {
    out.hypotheses.push_back(std::move(r.text));
    out.scores.push_back(r.score);
  }
  out.logprob = r.logprob;
  out.tokens = r.tokens;
  out.alignment = std::move(r.alignment);
  return out;
}

}  // namespace

TranslateOptions::TranslateOptions() {
  const nmt::TranslateOptions t;
  const SearchOptions& s = t.search;
  device = device_name(t.device);
  beam = s.beam;
  alpha = s.alpha;
  length_norm = s.length_norm;
  n_best = s.n_best;
  sampling_temperature = s.temperature;
  seed = s.seed;
  max_length_a = s.max_len_a;
  max_length_b = s.max_len_b;
  shortlist = Shortlist::automatic;
  batch_tokens = t.batch_tokens;
  continuous_batching = t.continuous;
  window = t.window;
  threads = t.threads;
  workers = t.workers;
  input_format = InputFormat::text;
  split = "";
  format = OutputFormat::text;
  scores = t.output.scores;
  alignments = t.output.alignments;
  attention = t.output.attention;
  alignment_layer = t.alignment_layer;
}

struct Translator::Impl {
  std::unique_ptr<TranslationService> service;
  std::vector<std::string> models;
  bool html = false, attention = false;
  // translate_batch's calls run side by side (the service's translate_texts
  // allows it); the other translate calls one at a time, and not beside
  // them.
  std::shared_mutex calls;
};

Translator::Translator(const std::vector<std::string>& models, const TranslateOptions& options,
                       std::function<void(const std::string&)> warn)
    : impl_(std::make_unique<Impl>()) {
  if (!warn) warn = [](const std::string&) {};
  guarded([&] {
    impl_->service = std::make_unique<TranslationService>(service_options(models, options), warn);
    impl_->models = models;
    impl_->html = options.format == OutputFormat::html;
    impl_->attention = options.attention;
  });
}

Translator::~Translator() = default;
Translator::Translator(Translator&&) noexcept = default;
Translator& Translator::operator=(Translator&&) noexcept = default;

std::vector<std::string> Translator::translate(const std::vector<std::string>& lines) {
  return guarded([&] {
    Impl& impl = held(impl_, "Translator");
    std::unique_lock lock(impl.calls);
    std::vector<std::string> out = impl.service->translate(lines);
    for (std::string& s : out)
      if (!s.empty() && s.back() == '\n') s.pop_back();
    return out;
  });
}

std::vector<TranslationResult> Translator::translate_batch(
    const std::vector<std::string>& sources) {
  return guarded([&] {
    Impl& impl = held(impl_, "Translator");
    std::vector<TextRequest> texts(sources.size());
    for (size_t i = 0; i < sources.size(); ++i) {
      // A text's lines would be translated each on its own and joined: one
      // source, one sentence (or paragraph), as a line of a file is.
      if (!impl.html && sources[i].find('\n') != std::string::npos)
        throw InputError("source " + std::to_string(i + 1) +
                         " holds a line break; give each line on its own");
      texts[i].text = sources[i];
      texts[i].html = impl.html;
    }
    std::shared_lock lock(impl.calls);
    std::vector<nmt::TranslationResult> results = impl.service->translate_texts(texts);
    lock.unlock();
    std::vector<TranslationResult> out;
    out.reserve(results.size());
    for (nmt::TranslationResult& r : results) out.push_back(result_of(r, impl.attention));
    return out;
  });
}

void Translator::translate(std::istream& in, std::ostream& out) {
  guarded([&] {
    Impl& impl = held(impl_, "Translator");
    std::unique_lock lock(impl.calls);
    TranslationService& service = *impl.service;
    io::LineReader reader(in, "<stream>", service.text_checks());
    translate_to(service, reader, "<stream>", out);
  });
}

void Translator::translate_file(const std::string& path, std::ostream& out) {
  guarded([&] {
    Impl& impl = held(impl_, "Translator");
    std::unique_lock lock(impl.calls);
    TranslationService& service = *impl.service;
    io::check_input_path(path, "input");
    io::LineReader reader(path, service.text_checks());
    translate_to(service, reader, path == "-" ? "<stdin>" : path, out);
  });
}

int64_t Translator::translate_file(const std::string& input, const std::string& output) {
  return guarded([&] {
    Impl& impl = held(impl_, "Translator");
    io::check_input_path(input, "input");
    io::check_output_path(output, "output", io::Content::Text);
    std::vector<io::NamedPath> inputs = {{"input", input}};
    for (const std::string& m : impl.models) inputs.push_back({"model", m});
    io::check_not_an_input({"output", output}, inputs);
    std::unique_lock lock(impl.calls);
    io::LineReader reader(input, impl.service->text_checks());
    io::OutputFile file(output, io::Content::Text);
    const int64_t lines = translate_to(*impl.service, reader, input, [&file](const std::string& s) {
      file.write(s);
      file.flush();
    });
    file.commit();
    return lines;
  });
}

std::string Translator::describe() const {
  return held(impl_, "Translator").service->describe();
}

}  // namespace nmt::api
