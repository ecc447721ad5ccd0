#include "serve/http_server.h"

#include "core/dynlib.h"
#include "core/error.h"

namespace nmt {

namespace {

const Module& http_module() {
  static const Module m =
      open_module("NMT_HTTP_LIBRARY", NMT_HTTP_LIBRARY_NAME, NMT_HTTP_LIBRARY_BUILT, "nmt_http_abi",
                  NMT_HTTP_ABI, /*global=*/false, {"nmt_http_transport", "nmt_http_build_info"});
  return m;
}

}  // namespace

HttpServer::HttpServer(TranslationApi& api, HttpOptions options) : options_(std::move(options)) {
  const Module& m = http_module();
  if (!m.handle) throw Error("the HTTP server could not be loaded: " + m.error);
  const HttpHandler handler = [&api](const HttpRequest& rq) { return api.handle(rq); };
  transport_.reset(m.entry<HttpTransport* (*)(const HttpHandler*, const HttpOptions*)>(
      "nmt_http_transport")(&handler, &options_));
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const int port = transport_->bind();
  if (port <= 0)
    throw InputError("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                     " (in use, or not an address of this machine)");
  return port;
}

void HttpServer::serve() { transport_->serve(); }

void HttpServer::stop() { transport_->stop(); }

std::string http_build_info() { return http_module().describe("nmt_http_build_info"); }

}  // namespace nmt
