// `nmt serve`: models behind LibreTranslate's and DeepL's HTTP APIs
// (serve/translation_api.h), on loopback unless told otherwise. SIGTERM or
// SIGINT stops accepting connections, finishes what is in flight and exits
// 0.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "core/error.h"
#include "io/text_file.h"
#include "serve/http_server.h"
#include "serve/translation_api.h"

namespace nmt::app {
namespace {

struct Opts {
  std::vector<std::string> models, pairs;
  std::string compute, device = "cpu";
  std::string api_keys, cors;
  HttpOptions http;
  ServeLimits limits;
  bool verbose = false;
  nlohmann::json given = nlohmann::json::object();
};

// "en-de" or "en:de" (a code with a region or script: "zh-Hans:en").
std::pair<std::string, std::string> parse_pair(const std::string& pair) {
  size_t cut = pair.find(':');
  if (cut == std::string::npos && std::count(pair.begin(), pair.end(), '-') == 1)
    cut = pair.find('-');
  const std::string src = cut == std::string::npos ? "" : pair.substr(0, cut),
                    tgt = cut == std::string::npos ? "" : pair.substr(cut + 1);
  if (!is_language_code(src) || !is_language_code(tgt) || src.find(':') != std::string::npos ||
      tgt.find(':') != std::string::npos)
    throw UsageError("--lang " + pair + ": expected SRC-TGT or SRC:TGT (en-de, zh-Hans:en)");
  return {src, tgt};
}

std::vector<ServedModel> served_models(const Opts& o) {
  if (!o.pairs.empty() && o.pairs.size() != o.models.size())
    throw UsageError("--lang names " + std::to_string(o.pairs.size()) + " pairs for " +
                     std::to_string(o.models.size()) +
                     " models; give one per -m, in order (- keeps a model's own)");
  std::vector<ServedModel> out;
  for (size_t i = 0; i < o.models.size(); ++i) {
    io::check_input_path(o.models[i], "-m");
    ServedModel m{o.models[i], "", ""};
    if (!o.pairs.empty() && o.pairs[i] != "-")
      std::tie(m.src_lang, m.tgt_lang) = parse_pair(o.pairs[i]);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<std::string> read_api_keys(const std::string& path) {
  if (path.empty()) return {};
  io::check_input_path(path, "--api-keys");
  std::vector<std::string> keys;
  for (std::string key : io::read_lines(path)) {
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ' || key.back() == '\t'))
      key.pop_back();
    if (!key.empty() && key[0] != '#') keys.push_back(std::move(key));
  }
  if (keys.empty())
    throw InputError("--api-keys " + path + ": no keys (one per line; # starts a comment)");
  return keys;
}

void run(Opts& o) {
  // Before any thread starts, so that every thread inherits the mask and
  // only the waiting thread below takes the signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  TranslateOptions t;
  t.compute = o.compute;
  apply_translate_json(o.given, t);
  // A request's text is paragraphs, as a page's or a document's is.
  if (!o.given.contains("split")) t.split = SplitMode::sentences;
  t.models = o.models;
  check_options(t);
  const std::vector<ServedModel> models = served_models(o);
  const std::vector<std::string> keys = read_api_keys(o.api_keys);
  o.http.cors_origin = o.cors;
  t.device = open_device(o.device);
  TranslationApi api(models, t, o.limits, keys, io::warn_on_stderr);
  HttpServer server(api, o.http);
  const int port = server.bind();
  std::fprintf(stderr, "nmt serve: listening on http://%s:%d/ (%s)\n%s", o.http.host.c_str(), port,
               keys.empty() ? "no API keys" : (std::to_string(keys.size()) + " API keys").c_str(),
               api.describe(o.verbose).c_str());
  std::thread([&server, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::fprintf(stderr, "nmt serve: %s: finishing what is in flight\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    server.stop();
  }).detach();
  server.serve();
  api.close();
  std::fprintf(stderr, "nmt serve: stopped\n");
  exit_without_teardown();
}

void add_server_options(CLI::App* cmd, const std::shared_ptr<Opts>& o) {
  cmd->add_option("--host", o->http.host,
                  "Address to listen on; 0.0.0.0 (or ::) for every interface")
      ->capture_default_str();
  cmd->add_option("--port", o->http.port, "Port to listen on (0: a free one, printed)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--api-keys", o->api_keys,
                  "File of API keys, one per line: /translate needs one (api_key), /v2/translate "
                  "too (Authorization: DeepL-Auth-Key KEY); 403 without")
      ->type_name("FILE");
  cmd->add_option("--cors", o->cors,
                  "Answer browsers from other origins: * or one origin (off by default)")
      ->expected(0, 1)
      ->default_str("*");
  cmd->add_option("--char-limit", o->limits.characters,
                  "Characters per request, all its texts together (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--batch-limit", o->limits.texts, "Texts per request (q or text as a list)")
      ->capture_default_str();
  cmd->add_option("--body-limit", o->http.body_bytes, "Bytes of a request's body")
      ->check(CLI::Range(size_t{1}, size_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--max-queue", o->limits.queue,
                  "Texts waiting to be translated, of every request, before 429 (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--timeout", o->limits.seconds,
                  "Seconds a request may take from arrival to answer before 503 (0: no limit)")
      ->check(finite_range(0, 86400))
      ->capture_default_str();
  cmd->add_option("--client-timeout", o->http.client_timeout,
                  "Seconds a client may take to send a request or read its answer")
      ->check(finite_range(0.001, 3600))
      ->capture_default_str();
  cmd->add_option("--http-threads", o->http.threads,
                  "Connections served at once (more wait their turn)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Serve models over HTTP: LibreTranslate's API (/translate, /languages), DeepL's v2 "
      "(/v2/translate), /health, /metrics and a page to translate in (/)");
  cmd->add_option("-m,--model", o->models,
                  "Model file; several (-m a -m b) serve several language pairs, each request "
                  "routed by its source and target")
      ->type_name("FILE")
      ->required()
      ->allow_extra_args(false);
  cmd->add_option("--lang", o->pairs,
                  "The pair each -m translates, in order (en-de, or zh-Hans:en), for models "
                  "that do not say (nmt info shows it); - keeps a model's own")
      ->allow_extra_args(false);
  add_compute_type_option(cmd, o->compute,
                          "f32, bf16 or int8 for the weight products; default: the model's");
  add_device_option(cmd, o->device);
  add_server_options(cmd, o);
  cmd->add_flag("--verbose", o->verbose, "Print how it translates on stderr before it starts");
  // The search and batches as nmt translate takes them; requests say their
  // own format and languages.
  add_translate_table(cmd,
                      {"format", "input_format", "scores", "alignments", "attention",
                       "alignment_layer", "source_lang", "target_lang"},
                      {},
                      [o](const std::string& key, const nlohmann::json& v) { o->given[key] = v; });
  cmd->callback([o] { run(*o); });
}

}  // namespace nmt::app
