#include "serve/server_metrics.h"

#include <algorithm>

#include "core/format.h"

namespace nmt {

void ServerMetrics::request(const std::string& endpoint, int status, double seconds) {
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(kBuckets.begin(), kBuckets.end(), seconds) - kBuckets.begin());
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
  ++latency_[bucket];
  latency_sum_ += seconds;
}

void ServerMetrics::window(size_t texts, size_t segments, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  texts_ += texts;
  segments_ += segments;
  ++windows_;
  translate_seconds_ += seconds;
}

void ServerMetrics::add_characters(size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  characters_ += n;
}

uint64_t ServerMetrics::characters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return characters_;
}

std::string ServerMetrics::text(size_t queued) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out += printf_string("# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
                         static_cast<unsigned long long>(v));
  };
  out +=
      "# HELP nmt_requests_total HTTP requests answered, by endpoint and status.\n"
      "# TYPE nmt_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out += printf_string("nmt_requests_total{endpoint=\"%s\",code=\"%d\"} %llu\n",
                         key.first.c_str(), key.second, static_cast<unsigned long long>(n));
  counter("nmt_texts_total", "Texts translated (a request's q holds one or more).", texts_);
  counter("nmt_sentences_total", "Sentences (segments) the model translated.", segments_);
  counter("nmt_characters_total", "Characters of source text accepted for translation.",
          characters_);
  counter("nmt_windows_total", "Windows of texts from concurrent requests translated together.",
          windows_);
  out += printf_string(
      "# HELP nmt_translate_seconds_total Time spent translating windows.\n"
      "# TYPE nmt_translate_seconds_total counter\nnmt_translate_seconds_total %.6f\n",
      translate_seconds_);
  out += printf_string(
      "# HELP nmt_queue_texts Texts waiting for a window.\n"
      "# TYPE nmt_queue_texts gauge\nnmt_queue_texts %zu\n",
      queued);
  out +=
      "# HELP nmt_request_duration_seconds Time from a request's arrival to its answer.\n"
      "# TYPE nmt_request_duration_seconds histogram\n";
  uint64_t cumulative = 0;
  for (size_t b = 0; b < kBuckets.size(); ++b) {
    cumulative += latency_[b];
    out += printf_string("nmt_request_duration_seconds_bucket{le=\"%g\"} %llu\n", kBuckets[b],
                         static_cast<unsigned long long>(cumulative));
  }
  cumulative += latency_.back();
  out += printf_string(
      "nmt_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
      "nmt_request_duration_seconds_sum %.6f\nnmt_request_duration_seconds_count %llu\n",
      static_cast<unsigned long long>(cumulative), latency_sum_,
      static_cast<unsigned long long>(cumulative));
  return out;
}

}  // namespace nmt
