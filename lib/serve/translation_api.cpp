#include "serve/translation_api.h"

#include <unicode/locid.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/format.h"
#include "metrics/tokenizers.h"
#include "model/config.h"

namespace nmt {

using json = nlohmann::json;
using metrics::lowercase;

namespace {

std::string upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

// The language of a code without its script or region: "zh-Hans" -> "zh".
std::string base_language(const std::string& code) {
  return lowercase(code.substr(0, code.find_first_of("-_")));
}

// ISO 639-3 of a two-letter code ("de" -> "deu"), as ICU knows it.
std::string iso3(const std::string& language) {
  if (language.size() != 2) return language;
  const std::string three = icu::Locale(language.c_str()).getISO3Language();
  return three.empty() ? language : three;
}

size_t characters(const std::string& s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// An error in the shape of the API it answers: LibreTranslate's
// {"error": ...}, DeepL's {"message": ...}.
struct ApiError {
  int status;
  std::string message;
};

HttpResponse error_response(bool deepl, const ApiError& e) {
  return {e.status, "application/json", dump(json{{deepl ? "message" : "error", e.message}})};
}

// A request's fields, from a JSON object or a form (and the query).
class Fields {
 public:
  explicit Fields(const HttpRequest& rq) : rq_(rq) {
    if (lowercase(rq.content_type).find("json") == std::string::npos) return;
    json_ = json::parse(rq.body, nullptr, false);
    if (json_.is_discarded()) throw ApiError{400, "Invalid request: the body is not valid JSON"};
    if (!json_.is_object()) throw ApiError{400, "Invalid request: the body is not a JSON object"};
  }
  // A string, or nullopt where the field is missing (or null).
  std::optional<std::string> text(const std::string& key) const {
    if (json_.is_object()) {
      const auto it = json_.find(key);
      if (it == json_.end() || it->is_null()) return std::nullopt;
      if (it->is_string()) return it->get<std::string>();
      if (it->is_number() || it->is_boolean()) return it->dump();
      throw ApiError{400, "Invalid request: " + key + " must be a string"};
    }
    const auto it = rq_.params.find(key);
    if (it == rq_.params.end()) return std::nullopt;
    return it->second;
  }
  // A string or a list of strings (JSON), or the field's every value (a
  // form); nullopt where missing. list: whether it came as a list.
  std::optional<std::vector<std::string>> texts(const std::string& key, bool& list) const {
    list = false;
    if (json_.is_object()) {
      const auto it = json_.find(key);
      if (it == json_.end() || it->is_null()) return std::nullopt;
      if (it->is_string()) return std::vector<std::string>{it->get<std::string>()};
      if (!it->is_array())
        throw ApiError{400, "Invalid request: " + key + " must be a string or a list of strings"};
      list = true;
      std::vector<std::string> out;
      for (const json& v : *it) {
        if (!v.is_string()) throw ApiError{400, "Invalid request: " + key + " holds a non-string"};
        out.push_back(v.get<std::string>());
      }
      return out;
    }
    std::vector<std::string> out;
    for (auto [it, end] = rq_.params.equal_range(key); it != end; ++it) out.push_back(it->second);
    for (auto [it, end] = rq_.params.equal_range(key + "[]"); it != end; ++it)
      out.push_back(it->second);
    if (out.empty()) return std::nullopt;
    list = out.size() > 1;
    return out;
  }
  // A whole number from 0 to hi; fallback where missing.
  int integer(const std::string& key, int fallback, int hi) const {
    const std::optional<std::string> v = text(key);
    if (!v || v->empty()) return fallback;
    char* end = nullptr;
    const long n = std::strtol(v->c_str(), &end, 10);
    if (*end != '\0' || n < 0 || n > hi)
      throw ApiError{400, "Invalid request: " + key + " must be a whole number from 0 to " +
                              std::to_string(hi)};
    return static_cast<int>(n);
  }

 private:
  const HttpRequest& rq_;
  json json_;
};

// A language's English name, as ICU gives it ("de": "German", "zho_Hans":
// "Chinese (Simplified)"); the code where ICU knows none.
std::string language_name(const std::string& code) {
  icu::UnicodeString name;
  icu::Locale(code.c_str()).getDisplayName(icu::Locale::getEnglish(), name);
  std::string out;
  name.toUTF8String(out);
  return out.empty() ? code : out;
}

}  // namespace

// A model loaded, its queue, and the languages it translates.
class TranslationApi::Engine {
 public:
  Engine(const ServedModel& m, const TranslateOptions& options, const ServeLimits& limits,
         ServerMetrics& metrics, const std::function<void(const std::string&)>& warn)
      : name(m.path) {
    TranslateOptions o = options;
    o.models = {m.path};
    auto service = std::make_unique<TranslationService>(std::move(o), warn);
    const ModelConfig& c = service->model_config();
    for (const auto& [code, id] : c.languages) codes.push_back(code);
    src = m.src_lang.empty() ? c.src_lang : m.src_lang;
    tgt = m.tgt_lang.empty() ? c.tgt_lang : m.tgt_lang;
    if (codes.empty() && (src.empty() || tgt.empty()))
      throw InputError(m.path +
                       ": the model does not say which languages it translates; name its pair");
    queue = std::make_unique<TranslationQueue>(
        std::move(service), limits.queue ? limits.queue : SIZE_MAX, options.window,
        [&metrics](size_t texts, size_t segments, double seconds) {
          metrics.window(texts, segments, seconds);
        });
  }
  bool multilingual() const { return !codes.empty(); }
  // The model's code for a language a request names; empty: not one of its.
  std::string code_of(const std::string& asked) const {
    if (!multilingual()) {
      for (const std::string* c : {&src, &tgt})
        if (lowercase(asked) == lowercase(*c) || base_language(asked) == base_language(*c))
          return *c;
      return "";
    }
    for (const std::string& c : codes)
      if (lowercase(c) == lowercase(asked)) return c;
    // A language without its script or region: the model's first code of it.
    if (asked.find_first_of("-_") == std::string::npos || asked.size() > 3) {
      const std::string want = base_language(asked), want3 = iso3(want);
      for (const std::string& c : codes)
        if (base_language(c) == want || base_language(c) == want3) return c;
    }
    return "";
  }
  // The languages a request may name as the source, and each one's targets.
  std::map<std::string, std::vector<std::string>> pairs() const {
    if (!multilingual()) return {{src, {tgt}}};
    std::map<std::string, std::vector<std::string>> out;
    for (const std::string& s : codes)
      for (const std::string& t : codes)
        if (s != t) out[s].push_back(t);
    return out;
  }

  std::string name;
  std::string src, tgt;            // a model of one pair
  std::vector<std::string> codes;  // a multilingual one's
  std::unique_ptr<TranslationQueue> queue;
};

TranslationApi::TranslationApi(const std::vector<ServedModel>& models,
                               const TranslateOptions& options, const ServeLimits& limits,
                               std::vector<std::string> api_keys,
                               std::function<void(const std::string&)> warn)
    : limits_(limits), api_keys_(std::move(api_keys)) {
  for (const ServedModel& m : models)
    engines_.push_back(std::make_unique<Engine>(m, options, limits_, metrics_, warn));
  describe_languages();
}

TranslationApi::~TranslationApi() { close(); }

void TranslationApi::close() {
  for (auto& e : engines_) e->queue->close();
}

size_t TranslationApi::queued() const {
  size_t n = 0;
  for (const auto& e : engines_) n += e->queue->queued();
  return n;
}

std::string TranslationApi::describe(bool verbose) const {
  std::string out;
  for (const auto& e : engines_)
    out += e->name + ": " +
           (e->multilingual() ? std::to_string(e->codes.size()) + " languages"
                              : e->src + " -> " + e->tgt) +
           "\n" + (verbose ? e->queue->service().describe() : "");
  return out;
}

// Every stored key is compared in full, whatever the given one matches: the
// time taken says nothing of how much of a key was right.
bool TranslationApi::key_ok(const std::string& given) const {
  if (api_keys_.empty()) return true;
  unsigned any = 0;
  for (const std::string& key : api_keys_) {
    unsigned diff = key.size() != given.size() ? 1u : 0u;
    for (size_t i = 0; i < key.size(); ++i)
      diff |= static_cast<unsigned char>(key[i]) ^
              static_cast<unsigned char>(i < given.size() ? given[i] : 0);
    any |= diff == 0 ? 1u : 0u;
  }
  return any != 0;
}

namespace {

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s > 0 ? s : 1e9));
}

}  // namespace

// Which engine translates source into target, and by which of its codes.
struct TranslationApi::Route {
  Engine* engine = nullptr;
  std::string src, tgt;
};

TranslationApi::Route TranslationApi::route(const std::string& source,
                                            const std::string& target) const {
  if (lowercase(source) == "auto") {
    // nmt detects no language: a target that one language pair serves
    // says the source.
    std::vector<Route> found;
    for (const auto& e : engines_)
      if (!e->multilingual() && e->code_of(target) == e->tgt)
        found.push_back({e.get(), e->src, e->tgt});
    if (found.size() == 1) return found[0];
    throw ApiError{400,
                   "Invalid request: source auto: nmt does not detect languages, and " +
                       std::string(found.empty() ? "no model translates into " + target
                                                 : "several languages translate into " + target) +
                       "; name the source"};
  }
  bool source_known = false;
  for (const auto& e : engines_) {
    const std::string s = e->code_of(source), t = e->code_of(target);
    if (e->multilingual() ? !s.empty() : s == e->src) source_known = true;
    if (e->multilingual() ? !s.empty() && !t.empty() && s != t : s == e->src && t == e->tgt)
      return {e.get(), s, t};
  }
  throw ApiError{400, source_known ? target + " is not supported as a target for " + source
                                   : source + " is not supported"};
}

std::vector<TranslationResult> TranslationApi::translate(std::vector<std::string> texts,
                                                         size_t characters, const Route& r,
                                                         bool html, Clock::time_point deadline) {
  if (html && r.engine->multilingual())
    throw ApiError{400,
                   "Invalid request: format html is not yet available for multilingual "
                   "models"};
  std::vector<TextRequest> requests(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    requests[i].text = std::move(texts[i]);
    requests[i].html = html;
    if (r.engine->multilingual()) requests[i].source_lang = r.src, requests[i].target_lang = r.tgt;
  }
  std::optional<TranslationQueue::Ticket> ticket = r.engine->queue->submit(std::move(requests));
  if (!ticket)
    throw ApiError{429, "Too many texts are waiting to be translated (" + std::to_string(queued()) +
                            "); try again later"};
  metrics_.add_characters(characters);
  std::optional<TranslationQueue::Outcome> o = ticket->wait_until(deadline);
  if (!o)
    throw ApiError{503, "The translation did not finish within " +
                            format_number("%g", limits_.seconds) + " s; try again later"};
  if (!o->error.empty()) throw ApiError{500, "Cannot translate text: " + o->error};
  return std::move(o->results);
}

// The texts of a request within the limits on their number and size: their
// characters.
size_t TranslationApi::check_size(const std::vector<std::string>& texts) const {
  if (limits_.texts && texts.size() > limits_.texts)
    throw ApiError{400, "Invalid request: request (" + std::to_string(texts.size()) +
                            " texts) exceeds text limit (" + std::to_string(limits_.texts) + ")"};
  size_t chars = 0;
  for (const std::string& t : texts) chars += characters(t);
  if (limits_.characters && chars > limits_.characters)
    throw ApiError{400, "Invalid request: request (" + std::to_string(chars) +
                            " characters) exceeds character limit (" +
                            std::to_string(limits_.characters) + ")"};
  return chars;
}

HttpResponse TranslationApi::libretranslate(const HttpRequest& rq, Clock::time_point start) {
  const Fields f(rq);
  const std::optional<std::string> key = f.text("api_key");
  if (!key_ok(key.value_or("")))
    throw ApiError{403, key ? "Invalid API key" : "This server needs an API key"};
  bool list = false;
  std::optional<std::vector<std::string>> q = f.texts("q", list);
  if (!q) throw ApiError{400, "Invalid request: missing q parameter"};
  const std::optional<std::string> source = f.text("source"), target = f.text("target");
  if (!source || source->empty()) throw ApiError{400, "Invalid request: missing source parameter"};
  if (!target || target->empty()) throw ApiError{400, "Invalid request: missing target parameter"};
  const std::string format = f.text("format").value_or("text");
  if (format != "text" && format != "html")
    throw ApiError{400, "Invalid request: format " + format + ": expected text or html"};
  const int alternatives = f.integer("alternatives", 0, 64);
  const size_t chars = check_size(*q);
  const Route r = route(*source, *target);
  std::vector<TranslationResult> results =
      translate(std::move(*q), chars, r, format == "html", start + seconds(limits_.seconds));
  json texts = json::array(), alts = json::array();
  for (TranslationResult& t : results) {
    texts.push_back(std::move(t.text));
    json a = json::array();
    for (size_t k = 1; k < t.n_best.size() && static_cast<int>(k) <= alternatives; ++k)
      a.push_back(std::move(t.n_best[k].first));
    alts.push_back(std::move(a));
  }
  json out = {{"translatedText", list ? texts : texts[0]}};
  if (alternatives > 0) out["alternatives"] = list ? alts : alts[0];
  if (lowercase(*source) == "auto") {
    const json detected = {{"confidence", 100}, {"language", r.src}};
    out["detectedLanguage"] = list ? json(std::vector<json>(texts.size(), detected)) : detected;
  }
  return {200, "application/json", dump(out)};
}

HttpResponse TranslationApi::deepl(const HttpRequest& rq, Clock::time_point start) {
  check_deepl_key(rq);
  const Fields f(rq);
  bool list = false;
  std::optional<std::vector<std::string>> text = f.texts("text", list);
  if (!text) throw ApiError{400, "Value for 'text' not supported."};
  const std::optional<std::string> target = f.text("target_lang");
  if (!target || target->empty()) throw ApiError{400, "Value for 'target_lang' not supported."};
  const std::string tags = f.text("tag_handling").value_or("");
  if (!tags.empty() && tags != "html")
    throw ApiError{400, "Value for 'tag_handling' not supported: " + tags + " (html is)"};
  const size_t chars = check_size(*text);
  const Route r = route(f.text("source_lang").value_or("auto"), *target);
  std::vector<TranslationResult> results =
      translate(std::move(*text), chars, r, tags == "html", start + seconds(limits_.seconds));
  json out = json::array();
  const std::string detected = upper(r.src);
  for (TranslationResult& t : results)
    out.push_back({{"detected_source_language", detected}, {"text", std::move(t.text)}});
  return {200, "application/json", dump(json{{"translations", out}})};
}

void TranslationApi::check_deepl_key(const HttpRequest& rq) const {
  std::string key = Fields(rq).text("auth_key").value_or("");
  for (const char* scheme : {"DeepL-Auth-Key ", "Bearer "})
    if (rq.authorization.rfind(scheme, 0) == 0) key = rq.authorization.substr(strlen(scheme));
  if (!key_ok(key)) throw ApiError{403, "Authorization failed: give a valid key"};
}

void TranslationApi::describe_languages() {
  // LibreTranslate's list: each source language and its targets.
  std::map<std::string, std::set<std::string>> pairs;
  std::set<std::string> targets;
  for (const auto& e : engines_)
    for (const auto& [s, ts] : e->pairs()) {
      pairs[s].insert(ts.begin(), ts.end());
      targets.insert(ts.begin(), ts.end());
    }
  json list = json::array(), sources = json::array(), deepl_targets = json::array();
  for (const auto& [s, ts] : pairs) {
    list.push_back({{"code", s}, {"name", language_name(s)}, {"targets", ts}});
    sources.push_back({{"language", upper(s)}, {"name", language_name(s)}});
  }
  for (const std::string& t : targets)
    deepl_targets.push_back(
        {{"language", upper(t)}, {"name", language_name(t)}, {"supports_formality", false}});
  languages_ = dump(list);
  deepl_sources_ = dump(sources);
  deepl_targets_ = dump(deepl_targets);
  json one_pair = json::array();
  for (const auto& e : engines_)
    if (!e->multilingual()) one_pair.push_back(e->src + "-" + e->tgt);
  settings_ = dump({{"charLimit", limits_.characters ? json(limits_.characters) : json(-1)},
                    {"batchLimit", limits_.texts ? json(limits_.texts) : json(-1)},
                    {"keyRequired", !api_keys_.empty()},
                    {"suggestions", false},
                    {"supportedFilesFormat", json::array()},
                    {"pairs", one_pair}});
}

HttpResponse TranslationApi::languages(const HttpRequest&, Clock::time_point) {
  return {200, "application/json", languages_};
}

HttpResponse TranslationApi::deepl_languages(const HttpRequest& rq, Clock::time_point) {
  check_deepl_key(rq);
  const bool targets = Fields(rq).text("type").value_or("source") == "target";
  return {200, "application/json", targets ? deepl_targets_ : deepl_sources_};
}

// DeepL's quota: the characters accepted so far, against no limit (DeepL's
// clients read count >= limit as a quota used up, so the limit is not 0).
HttpResponse TranslationApi::deepl_usage(const HttpRequest& rq, Clock::time_point) {
  check_deepl_key(rq);
  return {200, "application/json",
          dump({{"character_count", metrics_.characters()},
                {"character_limit", uint64_t{1000000000000}}})};
}

HttpResponse TranslationApi::settings(const HttpRequest&, Clock::time_point) {
  return {200, "application/json", settings_};
}

HttpResponse TranslationApi::health(const HttpRequest&, Clock::time_point) {
  return {200, "application/json", R"({"status":"ok"})"};
}

HttpResponse TranslationApi::metrics(const HttpRequest&, Clock::time_point) {
  return {200, "text/plain; version=0.0.4", metrics_.text(queued())};
}

HttpResponse TranslationApi::page(const HttpRequest&, Clock::time_point) {
  return {200, "text/html; charset=utf-8", translate_page()};
}

// Each path, the methods it takes (GET takes HEAD too) and what answers it.
struct TranslationApi::Endpoint {
  const char* path;
  bool get, post;
  HttpResponse (TranslationApi::*answer)(const HttpRequest&, Clock::time_point);
};

HttpResponse TranslationApi::handle(const HttpRequest& rq) {
  static const Endpoint endpoints[] = {
      {"/translate", false, true, &TranslationApi::libretranslate},
      {"/languages", true, true, &TranslationApi::languages},
      {"/frontend/settings", true, false, &TranslationApi::settings},
      {"/v2/translate", false, true, &TranslationApi::deepl},
      {"/v2/languages", true, true, &TranslationApi::deepl_languages},
      {"/v2/usage", true, true, &TranslationApi::deepl_usage},
      {"/health", true, false, &TranslationApi::health},
      {"/metrics", true, false, &TranslationApi::metrics},
      {"/", true, false, &TranslationApi::page},
      {"/index.html", true, false, &TranslationApi::page}};
  const Clock::time_point start = Clock::now();
  const Endpoint* endpoint = nullptr;
  for (const Endpoint& e : endpoints)
    if (rq.path == e.path) endpoint = &e;
  HttpResponse res;
  try {
    if (rq.refused) throw ApiError{rq.refused, rq.refused_why};
    if (!endpoint) throw ApiError{404, "Not found: " + rq.path};
    const bool get = rq.method == "GET" || rq.method == "HEAD", post = rq.method == "POST";
    if (!(get && endpoint->get) && !(post && endpoint->post))
      throw ApiError{405, rq.method + " is not allowed on " + rq.path};
    res = (this->*endpoint->answer)(rq, start);
  } catch (const ApiError& e) {
    res = error_response(rq.path.rfind("/v2/", 0) == 0, e);
  } catch (const std::exception& e) {
    res = error_response(rq.path.rfind("/v2/", 0) == 0,
                         {500, std::string("Internal error: ") + e.what()});
  }
  metrics_.request(endpoint ? endpoint->path : "other", res.status,
                   std::chrono::duration<double>(Clock::now() - start).count());
  return res;
}

}  // namespace nmt
