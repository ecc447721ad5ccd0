// libnmt_http.so: nmt serve's HTTP transport on cpp-httplib (Debian's
// libcpp-httplib-dev, as llama.cpp's server uses): a thread per connection
// from a fixed pool, each waiting on the translation queue while the
// queue's one thread translates for all of them. Slow or vanished clients
// cost a pool thread for at most the read or write timeout; bodies over the
// limit are refused before they are read.
#include <httplib.h>

#include <cmath>
#include <limits>

#include "serve/http_transport.h"

namespace nmt {
namespace {

class HttplibTransport final : public HttpTransport {
 public:
  HttplibTransport(HttpHandler h, HttpOptions options)
      : handler(std::move(h)), o(std::move(options)) {
    configure();
  }
  int bind() override {
    const int port = o.port == 0                           ? server.bind_to_any_port(o.host)
                     : server.bind_to_port(o.host, o.port) ? o.port
                                                           : -1;
    // httplib listens with a backlog of 5: 64 clients connecting at once
    // overflow it, and the connections it drops wait for the kernel's
    // retries (1, 3, 7 s), which showed as a p99 of 6 s under load. Linux
    // takes a second listen() as the new backlog.
    if (port > 0 && listening >= 0) ::listen(listening, SOMAXCONN);
    return port;
  }
  void serve() override { server.listen_after_bind(); }
  void stop() override { server.stop(); }

 private:
  HttpHandler handler;
  HttpOptions o;
  httplib::Server server;
  socket_t listening = -1;  // the last socket httplib made to bind

  void answer(const httplib::Request& req, httplib::Response& res) {
    HttpRequest rq;
    rq.method = req.method;
    rq.path = req.path;
    rq.params.insert(req.params.begin(), req.params.end());
    for (const auto& [name, part] : req.files) rq.params.emplace(name, part.content);
    rq.content_type = req.get_header_value("Content-Type");
    rq.authorization = req.get_header_value("Authorization");
    // A multipart body is its fields, already read into params.
    if (req.files.empty()) rq.body = req.body;
    reply(handler(rq), res);
  }

  void reply(const HttpResponse& r, httplib::Response& res) const {
    res.status = r.status;
    res.set_content(r.body, r.content_type.c_str());
    cors(res);
  }

  void cors(httplib::Response& res) const {
    if (o.cors_origin.empty()) return;
    res.set_header("Access-Control-Allow-Origin", o.cors_origin);
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Content-Type, Authorization");
  }

  void configure() {
    const int threads = std::max(1, o.threads);
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    const double whole = std::floor(o.client_timeout);
    const auto sec = static_cast<time_t>(whole),
               usec = static_cast<time_t>((o.client_timeout - whole) * 1e6);
    server.set_read_timeout(sec, usec);
    server.set_write_timeout(sec, usec);
    server.set_keep_alive_timeout(std::max<time_t>(1, sec));
    server.set_keep_alive_max_count(1000);
    server.set_payload_max_length(o.body_bytes ? o.body_bytes : std::numeric_limits<size_t>::max());
    server.set_tcp_nodelay(true);
    // SO_REUSEADDR alone: httplib's default adds SO_REUSEPORT, with which a
    // second server on a port in use shares it silently instead of failing.
    server.set_socket_options([this](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
      listening = sock;
    });
    auto to_api = [this](const httplib::Request& req, httplib::Response& res) { answer(req, res); };
    server.Get(".*", to_api);
    server.Post(".*", to_api);
    // Other methods reach the API too, which says which it allows.
    server.Put(".*", to_api);
    server.Delete(".*", to_api);
    server.Patch(".*", to_api);
    server.Options(".*", [this](const httplib::Request&, httplib::Response& res) {
      res.status = o.cors_origin.empty() ? 405 : 204;
      cors(res);
    });
    // What httplib refuses itself (a body over the limit, a request it
    // cannot parse) is answered by the API, in its shape.
    server.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          HttpRequest rq;
          rq.method = req.method;
          rq.path = req.path;
          rq.refused = res.status;
          rq.refused_why = res.status == 413 ? "The request body exceeds the limit of " +
                                                   std::to_string(o.body_bytes) + " bytes"
                                             : "The request is not valid HTTP";
          reply(handler(rq), res);
          return httplib::Server::HandlerResponse::Handled;
        }));
    server.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
          res.status = 500;
          res.set_content(R"({"error":"Internal error"})", "application/json");
        });
  }
};

}  // namespace
}  // namespace nmt

extern "C" __attribute__((visibility("default"))) const char* nmt_http_abi() {
  return NMT_HTTP_ABI;
}

extern "C" __attribute__((visibility("default"))) nmt::HttpTransport* nmt_http_transport(
    const nmt::HttpHandler* handler, const nmt::HttpOptions* options) {
  return new nmt::HttplibTransport(*handler, *options);
}

extern "C" __attribute__((visibility("default"))) void nmt_http_build_info(std::string* out) {
  *out = std::string("cpp-httplib ") + CPPHTTPLIB_VERSION;
}
