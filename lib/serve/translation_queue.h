// Requests from many threads, translated together: a service's requests
// (an HTTP server's, one thread per connection) wait here until a
// translator worker has nothing to start, and then whatever has gathered
// goes to the TranslationService as one window. Sentences of concurrent
// requests so share batches, and a worker that finishes its batch of one
// window starts the next window while the last one's other batches run
// (one thread per worker hands windows over). Each request's translation is
// what it would be alone (the translator's batch-invariance), so its result
// does not depend on what else was in flight.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "service/translation_service.h"

namespace nmt {

class TranslationQueue {
 public:
  using Clock = std::chrono::steady_clock;
  struct Outcome {
    std::vector<TranslationResult> results;  // one per text, in order
    std::string error;                       // non-empty: the texts failed (results empty)
  };
  // What the queue did, as it does it: texts and segments of a window
  // translated, in seconds.
  using WindowDone = std::function<void(size_t texts, size_t segments, double seconds)>;

  // max_queued: texts that may wait at once; window: the most texts one
  // window takes (whole requests: a larger one goes alone).
  TranslationQueue(std::unique_ptr<TranslationService> service, size_t max_queued, size_t window,
                   WindowDone on_window = {});
  // Finishes what is queued (close()).
  ~TranslationQueue();
  TranslationQueue(const TranslationQueue&) = delete;
  TranslationQueue& operator=(const TranslationQueue&) = delete;

  class Ticket {
   public:
    // The outcome, or nothing once `deadline` has passed (the texts are
    // then not translated if they have not started).
    std::optional<Outcome> wait_until(Clock::time_point deadline);

   private:
    friend class TranslationQueue;
    struct Job;
    std::shared_ptr<Job> job_;
  };
  // Texts queued. Refused (nullopt) when the queue is full or closed.
  std::optional<Ticket> submit(std::vector<TextRequest> texts);
  // Texts waiting, not yet in a window.
  size_t queued() const { return queued_.load(); }
  const TranslationService& service() const { return *service_; }
  // Takes no more; returns once everything queued is translated.
  void close();

 private:
  void loop();
  // Whatever has gathered, up to a window (empty: nothing has).
  std::vector<std::shared_ptr<Ticket::Job>> take();
  void translate(std::vector<std::shared_ptr<Ticket::Job>>& jobs);

  std::unique_ptr<TranslationService> service_;
  size_t max_queued_, window_;
  WindowDone on_window_;
  std::atomic<size_t> queued_{0};
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::shared_ptr<Ticket::Job>> jobs_;
  bool closed_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace nmt
