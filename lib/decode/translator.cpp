#include "decode/translator.h"

#include <algorithm>
#include <thread>

#include "io/text_file.h"
#include "ops/ops.h"

namespace nmt {

Translator::Translator(const LoadedModel& model, SearchOptions opts, int64_t batch_tokens,
                       std::function<void(const std::string&)> warn, int workers,
                       int threads_per_worker)
    : model_(model),
      opts_(opts),
      batch_tokens_(std::max<int64_t>(batch_tokens, 1)),
      warn_(std::move(warn)) {
  validate(opts_);
  cores_ = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Several single-threaded workers beat one multi-threaded one on batch
  // throughput (decoding's small products scale poorly across threads);
  // four bound the memory their decoding states take.
  if (workers <= 0) workers = std::min(cores_, 4);
  workers_ = workers;
  adapt_threads_ = threads_per_worker <= 0;
  threads_per_worker_ = threads_per_worker > 0 ? threads_per_worker : std::max(1, cores_ / workers);
  for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { work(w); });
}

Translator::~Translator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : threads_) t.join();
}

// A worker: its own CPU threads and decoding state for its whole life, so
// that its primitives and buffers are built once.
void Translator::work(int) {
  int threads = threads_per_worker_;
  ops::set_num_threads(threads);
  DecodeState state;
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    work_ready_.wait(lock, [&] { return stopping_ || (generation_ != seen && jobs_); });
    if (stopping_) return;
    if (next_job_ >= jobs_->size()) {
      seen = generation_;  // this window is handed out; wait for the next
      continue;
    }
    // Fewer batches than workers leave workers idle: those busy take their cores.
    const int busy = static_cast<int>(std::min<size_t>(jobs_->size(), workers_));
    const int want = adapt_threads_ ? std::max(1, cores_ / busy) : threads_per_worker_;
    Batch& b = (*jobs_)[next_job_++];
    lock.unlock();
    if (want != threads) ops::set_num_threads(threads = want);
    try {
      b.hyps = search(*model_.net, b.src, opts_, state);
    } catch (...) {
      std::lock_guard<std::mutex> g(mu_);
      if (!error_) error_ = std::current_exception();
    }
    lock.lock();
    if (++jobs_done_ == jobs_->size()) work_done_.notify_all();
  }
}

// Cleaned, encoded and truncated lines of a window; empty ones stay empty.
std::vector<std::vector<int32_t>> Translator::encode(const std::vector<std::string>& lines,
                                                     int64_t first_line) const {
  std::vector<std::vector<int32_t>> ids(lines.size());
  const int64_t max_src = model_.config.max_positions - 1;
  for (size_t i = 0; i < lines.size(); ++i) {
    bool bad = false;
    const std::string clean = io::sanitize_utf8(lines[i], &bad);
    const int64_t line_no = first_line + static_cast<int64_t>(i);
    if (bad && warn_)
      warn_("line " + std::to_string(line_no) + ": invalid UTF-8 replaced with U+FFFD");
    if (clean.find_first_not_of(" \t\r") == std::string::npos) continue;  // empty in, empty out
    ids[i] = model_.vocab.encode(clean);
    if (static_cast<int64_t>(ids[i].size()) > max_src) {
      if (warn_)
        warn_("line " + std::to_string(line_no) + ": " + std::to_string(ids[i].size()) +
              " subwords exceed the model's limit of " + std::to_string(max_src) + "; truncated");
      ids[i].resize(max_src);
    }
  }
  return ids;
}

// Longest first, so each batch's padding is small; a batch costs
// (sentences x beam) rows of its longest sentence, at most batch_tokens.
std::vector<Translator::Batch> Translator::make_batches(
    std::vector<std::vector<int32_t>>& ids) const {
  std::vector<size_t> order;
  for (size_t i = 0; i < ids.size(); ++i)
    if (!ids[i].empty()) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ids[a].size() > ids[b].size(); });
  std::vector<Batch> batches;
  int64_t longest = 0;
  for (size_t i : order) {
    const int64_t len = static_cast<int64_t>(ids[i].size()) + 1;
    if (batches.empty() ||
        std::max(longest, len) * static_cast<int64_t>(batches.back().src.size() + 1) >
            batch_tokens_) {
      batches.emplace_back();
      longest = 0;
    }
    longest = std::max(longest, len);
    batches.back().src.push_back(std::move(ids[i]));
    batches.back().index.push_back(i);
  }
  return batches;
}

// Hands the batches to the workers and waits for all of them.
void Translator::run(std::vector<Batch>& batches) {
  std::unique_lock<std::mutex> lock(mu_);
  jobs_ = &batches;
  next_job_ = jobs_done_ = 0;
  ++generation_;
  work_ready_.notify_all();
  work_done_.wait(lock, [&] { return jobs_done_ == batches.size(); });
  jobs_ = nullptr;
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

std::vector<TranslationResult> Translator::translate(const std::vector<std::string>& lines,
                                                     int64_t first_line) {
  std::vector<TranslationResult> out(lines.size());
  std::vector<std::vector<int32_t>> ids = encode(lines, first_line);
  std::vector<Batch> batches = make_batches(ids);
  if (batches.empty()) return out;
  run(batches);
  for (const Batch& b : batches)
    for (size_t k = 0; k < b.src.size(); ++k) {
      TranslationResult& r = out[b.index[k]];
      for (const Hypothesis& h : b.hyps[k]) {
        std::string text = model_.vocab.decode(h.tokens);
        if (r.n_best.empty()) {
          r.text = text;
          r.score = h.score;
          r.logprob = h.logprob;
          r.tokens = static_cast<int64_t>(h.tokens.size()) + 1;
        }
        r.n_best.emplace_back(std::move(text), h.score);
      }
    }
  return out;
}

}  // namespace nmt
