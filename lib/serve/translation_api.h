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
// (The size of a body is the transport's to limit: HttpOptions.)
struct ServeLimits {
  size_t characters = 20000;  // of all a request's texts
  size_t texts = 128;         // in one request
  size_t queue = 4096;        // texts waiting, of every request
  double seconds = 60;        // from arrival to answer
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
  // The models and the pairs they serve, a line each; verbose: how each
  // translates too (TranslationService::describe).
  std::string describe(bool verbose) const;
  // Takes no more requests; returns once every queued one is translated.
  void close();

 private:
  class Engine;
  struct Endpoint;
  using Clock = TranslationQueue::Clock;
  struct Route;
  Route route(const std::string& source, const std::string& target) const;
  size_t check_size(const std::vector<std::string>& texts) const;
  std::vector<TranslationResult> translate(std::vector<std::string> texts, size_t characters,
                                           const Route& r, bool html, Clock::time_point deadline);
  HttpResponse libretranslate(const HttpRequest& rq, Clock::time_point start);
  HttpResponse deepl(const HttpRequest& rq, Clock::time_point start);
  HttpResponse languages(const HttpRequest& rq, Clock::time_point start);
  HttpResponse deepl_languages(const HttpRequest& rq, Clock::time_point start);
  HttpResponse deepl_usage(const HttpRequest& rq, Clock::time_point start);
  HttpResponse settings(const HttpRequest& rq, Clock::time_point start);
  HttpResponse health(const HttpRequest& rq, Clock::time_point start);
  HttpResponse metrics(const HttpRequest& rq, Clock::time_point start);
  HttpResponse page(const HttpRequest& rq, Clock::time_point start);
  // The key a DeepL request gives (Authorization: DeepL-Auth-Key KEY, or
  // auth_key) checked.
  void check_deepl_key(const HttpRequest& rq) const;
  bool key_ok(const std::string& given) const;
  size_t queued() const;
  // What the lists of languages and the settings say, which the models fix.
  void describe_languages();

  std::vector<std::unique_ptr<Engine>> engines_;
  ServeLimits limits_;
  std::vector<std::string> api_keys_;
  ServerMetrics metrics_;
  std::string languages_, deepl_sources_, deepl_targets_, settings_;
};

// The page GET / serves (serve/page.html, built in).
const std::string& translate_page();

}  // namespace nmt
