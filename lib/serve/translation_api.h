// The translation APIs that clients already speak, over loaded models:
// LibreTranslate's (POST /translate, GET /languages, /frontend/settings)
// and DeepL's v2 (POST /v2/translate, GET /v2/languages, /v2/usage), with
// GET /health, GET /metrics (Prometheus) and GET / (a page to translate
// in). An HTTP server (serve/http_server.h) hands each request here as an
// HttpRequest; nothing here knows sockets, so the APIs are tested without
// one.
//
// Models are routed by language pair: a model of one pair by its metadata
// (ModelConfig::src_lang, tgt_lang) or the pair it is served as; a
// multilingual one takes any two of its languages, named by its codes or
// by ISO 639-1 (en, de, zh) where one of its codes is that language's.
// Each model's requests wait in its own TranslationQueue, so concurrent
// requests share batches.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "serve/http_transport.h"
#include "serve/server_metrics.h"
#include "serve/translation_queue.h"
#include "service/translation_service.h"

namespace nmt {

// A model to serve, and the pair it translates where its file does not say
// (empty: the file's).
struct ServedModel {
  std::string path;
  std::string src_lang, tgt_lang;
};

// What one request may ask, and how long it may take. 0: no limit.
struct ServeLimits {
  size_t body_bytes = size_t{1} << 20;  // the HTTP server's to enforce
  size_t characters = 20000;            // of all a request's texts
  size_t texts = 128;                   // in one request
  size_t queue = 4096;                  // texts waiting, of every request
  double seconds = 60;                  // from arrival to answer
};

class TranslationApi {
 public:
  // Loads the models, each with `options` (its models replaced by the
  // one). warn: one-line warnings about requests. api_keys: empty, or the
  // keys of which a translation request must give one.
  TranslationApi(const std::vector<ServedModel>& models, const TranslateOptions& options,
                 const ServeLimits& limits, std::vector<std::string> api_keys,
                 std::function<void(const std::string&)> warn);
  ~TranslationApi();

  // Any request: its answer, an error in the shape of the API it was for.
  HttpResponse handle(const HttpRequest& request);
  // The models and the pairs they serve, a line each.
  std::string describe() const;
  // Takes no more requests; returns once every queued one is translated.
  void close();
  const ServeLimits& limits() const { return limits_; }

  class Engine;

 private:
  using Clock = TranslationQueue::Clock;
  struct Route;
  Route route(const std::string& source, const std::string& target) const;
  void check_size(const std::vector<std::string>& texts) const;
  std::vector<TranslationResult> translate(const std::vector<std::string>& texts, const Route& r,
                                           bool html, Clock::time_point deadline);
  HttpResponse libretranslate(const HttpRequest& rq, Clock::time_point start);
  HttpResponse deepl(const HttpRequest& rq, Clock::time_point start);
  HttpResponse languages() const;
  HttpResponse deepl_languages(const HttpRequest& rq) const;
  HttpResponse settings() const;
  bool key_ok(const std::string& given) const;
  size_t queued() const;

  std::vector<std::unique_ptr<Engine>> engines_;
  ServeLimits limits_;
  std::vector<std::string> api_keys_;
  ServerMetrics metrics_;
};

// A language's English name, as ICU gives it ("de": "German", "zho_Hans":
// "Chinese (Simplified)"); the code where ICU knows none.
std::string language_name(const std::string& code);

// The page GET / serves (serve/page.html, built in).
const std::string& translate_page();

}  // namespace nmt
