// The seam between nmt serve and its HTTP library: requests and answers as
// plain values, and a transport that serves them. The transport lives in a
// module of its own, libnmt_http.so (serve/httplib_transport.cpp, on
// cpp-httplib), opened by `nmt serve` alone: linked into nmt, cpp-httplib
// and what it pulls in (OpenSSL, brotli) were mapped by every run.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace nmt {

struct HttpRequest {
  std::string method, path;
  std::multimap<std::string, std::string> params;  // the query's and a form body's fields
  std::string content_type;
  std::string_view body;      // the transport's, for the call
  std::string authorization;  // the Authorization header
  // Where the transport refused the request itself (413: a body over the
  // limit; 400: not HTTP), its status and why: the answer is that error,
  // in the shape of the API the path names.
  int refused = 0;
  std::string refused_why;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

struct HttpOptions {
  std::string host = "127.0.0.1";              // loopback unless told otherwise
  int port = 5000;                             // 0: a free one
  int threads = 64;                            // connections served at once (more wait their turn)
  double client_timeout = 5;                   // seconds a client may take to send or to read
  size_t body_bytes = size_t{1} << 20;
  std::string cors_origin;  // empty: no CORS headers; "*" or an origin
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  // The port bound, or -1 where the address cannot be bound.
  virtual int bind() = 0;
  // Serves until stop(); returns once every request being answered is.
  virtual void serve() = 0;
  virtual void stop() = 0;
};

}  // namespace nmt
