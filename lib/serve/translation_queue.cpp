#include "serve/translation_queue.h"

#include <exception>

namespace nmt {

struct TranslationQueue::Ticket::Job {
  std::vector<TextRequest> texts;
  std::promise<Outcome> outcome;
  std::future<Outcome> future = outcome.get_future();
  std::atomic<bool> abandoned{false};
};

std::optional<TranslationQueue::Outcome> TranslationQueue::Ticket::wait_until(
    Clock::time_point deadline) {
  if (job_->future.wait_until(deadline) != std::future_status::ready) {
    job_->abandoned = true;
    return std::nullopt;
  }
  return job_->future.get();
}

TranslationQueue::TranslationQueue(std::unique_ptr<TranslationService> service, size_t max_queued,
                                   size_t window, WindowDone on_window)
    : service_(std::move(service)),
      max_queued_(max_queued),
      window_(std::max<size_t>(1, window)),
      on_window_(std::move(on_window)) {
  for (int w = 0; w < std::max(1, service_->workers()); ++w)
    threads_.emplace_back([this] { loop(); });
}

TranslationQueue::~TranslationQueue() { close(); }

void TranslationQueue::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

std::optional<TranslationQueue::Ticket> TranslationQueue::submit(std::vector<TextRequest> texts) {
  Ticket t;
  t.job_ = std::make_shared<Ticket::Job>();
  const size_t n = texts.size();
  t.job_->texts = std::move(texts);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || queued_ + n > max_queued_) return std::nullopt;
    queued_ += n;
    jobs_.push_back(t.job_);
  }
  ready_.notify_one();
  return t;
}

void TranslationQueue::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [&] { return closed_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // closed, and everything translated
    }
    // Requests go on gathering while every worker is busy.
    service_->wait_for_idle_worker();
    std::vector<std::shared_ptr<Ticket::Job>> window = take();
    if (!window.empty()) translate(window);
  }
}

std::vector<std::shared_ptr<TranslationQueue::Ticket::Job>> TranslationQueue::take() {
  std::vector<std::shared_ptr<Ticket::Job>> window;
  std::lock_guard<std::mutex> lock(mu_);
  size_t texts = 0;
  while (!jobs_.empty() && (window.empty() || texts + jobs_.front()->texts.size() <= window_)) {
    texts += jobs_.front()->texts.size();
    window.push_back(std::move(jobs_.front()));
    jobs_.pop_front();
  }
  queued_ -= texts;
  return window;
}

void TranslationQueue::translate(std::vector<std::shared_ptr<Ticket::Job>>& jobs) {
  // A request whose client stopped waiting is not translated.
  std::vector<std::shared_ptr<Ticket::Job>> live;
  std::vector<TextRequest> texts;
  for (auto& job : jobs) {
    if (job->abandoned) continue;
    texts.insert(texts.end(), job->texts.begin(), job->texts.end());
    live.push_back(std::move(job));
  }
  if (live.empty()) return;
  const auto start = Clock::now();
  size_t segments = 0;
  std::vector<TranslationResult> results;
  try {
    results = service_->translate_texts(texts, &segments);
  } catch (const std::exception& e) {
    // One request's failure is its own: each is tried alone, and only the
    // one that fails again fails.
    if (live.size() == 1) return live[0]->outcome.set_value(Outcome{{}, e.what()});
    for (auto& job : live) {
      std::vector<std::shared_ptr<Ticket::Job>> one{job};
      translate(one);
    }
    return;
  }
  if (on_window_)
    on_window_(texts.size(), segments, std::chrono::duration<double>(Clock::now() - start).count());
  size_t at = 0;
  for (auto& job : live) {
    Outcome o;
    o.results.assign(std::make_move_iterator(results.begin() + at),
                     std::make_move_iterator(results.begin() + at + job->texts.size()));
    at += job->texts.size();
    job->outcome.set_value(std::move(o));
  }
}

}  // namespace nmt
