// The HTTP server in front of a TranslationApi: the transport of
// libnmt_http.so (serve/http_transport.h), opened when a server is made.
#pragma once

#include <memory>
#include <string>

#include "serve/http_transport.h"
#include "serve/translation_api.h"

namespace nmt {

class HttpServer {
 public:
  // An Error where libnmt_http.so cannot be opened.
  HttpServer(TranslationApi& api, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the address; the port it listens on. An InputError where it
  // cannot (in use, not an address of this machine).
  int bind();
  // Serves until stop(), then returns once every request being answered
  // is answered.
  void serve();
  // From any thread: stops accepting connections; serve() returns.
  void stop();

 private:
  HttpOptions options_;
  std::unique_ptr<HttpTransport> transport_;
};

// For --version: the module's HTTP library, or why it cannot be loaded.
std::string http_build_info();

}  // namespace nmt
