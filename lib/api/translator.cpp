// The public Translator over the library's TranslationService: its options
// turned into the service's, and every error into an api::Error.
#include "nmt/translator.h"

#include <istream>
#include <ostream>

#include "api/guard.h"
#include "core/device.h"
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

// One input to its end, each window's translations written to out as they
// are done.
void translate_to(TranslationService& service, io::LineReader& in, const std::string& name,
                  std::ostream& out) {
  StreamSink sink;
  sink.write = [&out](const std::string& text) {
    out << text;
    out.flush();
    if (!out) throw nmt::Error("cannot write the translations: the output stream failed");
  };
  service.translate(in, name, sink);
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
};

Translator::Translator(const std::vector<std::string>& models, const TranslateOptions& options,
                       std::function<void(const std::string&)> warn)
    : impl_(std::make_unique<Impl>()) {
  if (!warn) warn = [](const std::string&) {};
  guarded([&] {
    impl_->service = std::make_unique<TranslationService>(service_options(models, options), warn);
  });
}

Translator::~Translator() = default;
Translator::Translator(Translator&&) noexcept = default;
Translator& Translator::operator=(Translator&&) noexcept = default;

std::vector<std::string> Translator::translate(const std::vector<std::string>& lines) {
  return guarded([&] {
    std::vector<std::string> out = held(impl_, "Translator").service->translate(lines);
    for (std::string& s : out)
      if (!s.empty() && s.back() == '\n') s.pop_back();
    return out;
  });
}

void Translator::translate(std::istream& in, std::ostream& out) {
  guarded([&] {
    TranslationService& service = *held(impl_, "Translator").service;
    io::LineReader reader(in, "<stream>", service.text_checks());
    translate_to(service, reader, "<stream>", out);
  });
}

void Translator::translate_file(const std::string& path, std::ostream& out) {
  guarded([&] {
    TranslationService& service = *held(impl_, "Translator").service;
    io::check_input_path(path, "input");
    io::LineReader reader(path, service.text_checks());
    translate_to(service, reader, path == "-" ? "<stdin>" : path, out);
  });
}

std::string Translator::describe() const {
  return held(impl_, "Translator").service->describe();
}

}  // namespace nmt::api
