// What a translation server has done, in Prometheus' text format (version
// 0.0.4): requests by endpoint and status, texts, sentences and characters
// translated, windows, the texts waiting, and a histogram of request
// latency. Counted from many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace nmt {

class ServerMetrics {
 public:
  // A request answered: its endpoint ("/translate"), status and time.
  void request(const std::string& endpoint, int status, double seconds);
  // A window translated: its texts, sentences and time.
  void window(size_t texts, size_t segments, double seconds);
  void add_characters(size_t n);
  // Characters accepted so far (DeepL's /v2/usage).
  uint64_t characters() const;
  // The exposition; queued: texts waiting now.
  std::string text(size_t queued) const;

  // Latency buckets' upper bounds, in seconds.
  static constexpr std::array<double, 14> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                      1,     2.5,  5,     10,   30,  60,   120};

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::array<uint64_t, kBuckets.size() + 1> latency_{};  // the last: above every bound
  double latency_sum_ = 0;
  uint64_t texts_ = 0, segments_ = 0, windows_ = 0, characters_ = 0;
  double translate_seconds_ = 0;
};

}  // namespace nmt
