// Text in, text out: the translation pipeline around search(). Lines are
// cleaned (invalid UTF-8 replaced), encoded with SentencePiece, sorted by
// length within the window and packed into batches by tokens, translated,
// and returned in input order, one result per input line. Empty lines give
// empty translations without touching the model.
//
// Workers: the batches of a window are shared out among N worker threads
// (CTranslate2's inter_threads), each with its own decoding state, its own
// CPU threads and its own primitive cache, all reading the one immutable
// model. Continuous batching: as a worker's sentences finish, the window's
// next sentences not yet taken join its running batch (see SearchFeed), so
// that batches do not shrink to their last long sentence. A sentence's
// translation depends neither on its batch nor on when it joined, so the
// output depends neither on the batching nor on the number of workers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "decode/attention_maps.h"
#include "decode/search.h"
#include "model/loaded_model.h"

namespace nmt {

// One input line: the source and, from tsv or jsonl input, a target prefix
// and terminology constraints (target text, each of which must appear).
struct TranslationRequest {
  std::string source;
  std::string prefix;
  std::vector<std::string> constraints;
  // A multilingual model's languages, by its codes (model/languages.h).
  std::string source_lang, target_lang;
  bool skip = false;  // a malformed line, already warned about: an empty result
  // Its word alignment wanted, whatever AttentionOutput says (HTML's inline
  // tags follow it): a window holding one runs its batches static.
  bool align = false;
  // The input line it comes from (1-based; a line's sentences share it),
  // for warnings and sampling's draws; 0: first_line + its index.
  int64_t line = 0;
};

// What the translator adds to each result besides the text.
struct AttentionOutput {
  bool alignments = false;  // word alignment of the best translation
  bool matrix = false;      // its full cross-attention map, with the pieces
  int layer = -1;           // decoder layer, 0-based; -1: the second-to-last
};

struct TranslationResult {
  std::string text;
  // The best hypothesis's search score: logprob divided by the GNMT length
  // penalty ((5 + tokens) / 6)^alpha, or by tokens with length_norm.
  double score = 0;
  double logprob = 0;                                  // natural log, </s> included
  int64_t tokens = 0;                                  // subword tokens, </s> included
  std::vector<std::pair<std::string, double>> n_best;  // text, score (best first)
  bool constraints_met = true;
  // With AttentionOutput: the best translation's alignment, pieces and map.
  std::vector<std::pair<int, int>> alignment;
  std::vector<std::string> src_pieces, out_pieces;
  AttentionMap attention;
  // A line translated as several segments: each one's source, translation,
  // score and confidence (the mean log-probability of its tokens).
  struct Part {
    std::string source, translation;
    double score = 0, confidence = 0;
  };
  std::vector<Part> parts;
};

// Source tokens per batch by default, for workers of one CPU thread and of
// several. Measured on test_2016_flickr at beam 4 (transformer-small, two
// cores), batches of 512 against 4096: two one-thread workers ran f32 ~9%
// faster (the window's batches share out more evenly; one worker alone ran
// the same), int8 +50% and bf16 +27% (one int8 worker alone +30%: a step's
// caches and logits stay in the core's caches); greedy decoding ran the
// same. A worker of two threads wants large batches instead (f32: 160
// sentences/s at 512, 240 at 4096, 250 at 8192), its products being split
// across threads. Translations do not depend on the batch.
// int8 on one-thread workers wants smaller batches still: on a 2-vCPU AMD
// Zen 5 guest (test_2016_flickr, beam 4, no length normalisation), 128
// tokens against 512 ran the whole process in 0.98-1.16 s against
// 1.14-1.39 s (four runs each, alternated), the warm engine at 1083-1136
// sentences/s against 970-1054, in 59-66 MB against 111 and with half the
// primitives; f32 ran its warm engine faster at 512 (474-546 against
// 421-444 at 128), so it keeps 512. int8's products are quick enough that
// a step's working set (the caches, the logits) staying in the core's cache
// counts for more than rows.
constexpr int64_t kBatchTokensOneThread = 512, kBatchTokensOneThreadInt8 = 128,
                  kBatchTokensThreaded = 4096;
inline int64_t auto_batch_tokens(int threads_per_worker, ComputeType compute) {
  if (threads_per_worker > 1) return kBatchTokensThreaded;
  return compute == ComputeType::INT8 ? kBatchTokensOneThreadInt8 : kBatchTokensOneThread;
}

// An upper bound on the memory one worker's batch can take, over every
// sentence length the batch could hold (n sentences of S tokens, n * S <=
// batch_tokens, n <= max_sentences): the beam's self-attention caches to the
// longest output, the cross-attention keys and values, the logits. Short
// lines are the worst case: many rows, each with its own cache.
double decode_memory_bound(const ModelConfig& cfg, const SearchOptions& opts, int64_t batch_tokens,
                           int64_t max_sentences);

class Translator {
 public:
  // batch_tokens: source tokens per batch (padded); 0 picks
  // auto_batch_tokens(threads_per_worker(), the model's compute type).
  // warn receives one-line warnings (with the 1-based line number).
  // workers: 0 picks min(cores, 4). threads_per_worker: CPU threads of each
  // worker; 0 shares the cores out among the workers that a window keeps
  // busy, so a window of one batch (a line typed into a pipe) runs on all.
  // decoder: what the search steps through (an Ensemble of the model with
  // others); null: the model itself. Alignments and attention maps are the
  // model's.
  Translator(const LoadedModel& model, SearchOptions opts, int64_t batch_tokens,
             std::function<void(const std::string&)> warn = {}, int workers = 1,
             int threads_per_worker = 0, AttentionOutput attention = {},
             const Decodable* decoder = nullptr);
  // Continuous batching is off unless turned on here: on CPUs a batch that
  // shrinks costs less per step, so refilling it has not paid (README).
  // Asked for where it cannot apply (attention maps and sampling need each
  // batch to run to its end), it stays off and says why through `warn`.
  void set_continuous(bool on);
  // Sentences that joined running batches so far.
  int64_t joined() const {
    std::lock_guard<std::mutex> lock(mu_);
    return joined_;
  }
  ~Translator();
  Translator(const Translator&) = delete;
  Translator& operator=(const Translator&) = delete;

  // first_line: the 1-based number of lines[0] in the whole input.
  int workers() const { return workers_; }
  int threads_per_worker() const { return threads_per_worker_; }
  int64_t batch_tokens() const { return batch_tokens_; }

  // Windows given from several threads at once queue in the pool: a worker
  // that finishes a batch starts the next window's first while the last
  // window's other batches run.
  std::vector<TranslationResult> translate(const std::vector<std::string>& lines,
                                           int64_t first_line = 1);
  std::vector<TranslationResult> translate(const std::vector<TranslationRequest>& requests,
                                           int64_t first_line = 1);
  // Blocks until a worker waits with nothing to start: a window given now
  // would start at once. A caller with work arriving (a server) gathers it
  // until then, so that it goes out as one window instead of many small ones.
  void wait_for_idle_worker() const;

 private:
  struct Batch {
    std::vector<SearchRequest> src;
    std::vector<size_t> index;  // positions in the window
    std::vector<std::vector<Hypothesis>> hyps;
    std::vector<AttentionMap> maps;  // the best hypotheses' (with AttentionOutput)
    std::vector<char> align;         // which sentences' maps to draw
  };
  std::vector<SearchRequest> encode(const std::vector<TranslationRequest>& requests,
                                    int64_t first_line) const;
  bool encode_extras(const TranslationRequest& rq, int64_t line_no, SearchRequest& out) const;
  void warn_if_unknown(const std::vector<int32_t>& src, int64_t line_no) const;
  // A translate() call's batches in the pool.
  struct Window {
    std::vector<Batch>* batches = nullptr;
    size_t next_job = 0;       // the first batch no worker has started
    size_t next_sentence = 0;  // its first sentence no running batch has taken
    size_t sentences = 0, done = 0;
    bool continuous = false;  // its batches take in its later sentences: none wants a map
    std::exception_ptr error;
  };
  std::vector<Batch> make_batches(std::vector<SearchRequest>& ids) const;
  void attend(Batch& b, Activations& acts) const;
  void run(std::vector<Batch>& batches, bool continuous);
  void work(int worker);
  class Feed;

  const LoadedModel& model_;
  const Decodable& decoder_;
  SearchOptions opts_;
  int64_t batch_tokens_;
  std::function<void(const std::string&)> warn_;
  AttentionOutput attention_;
  int threads_per_worker_;  // when every worker is busy
  int cores_;
  int workers_;
  bool adapt_threads_;  // threads were not given: share the cores among busy workers
  bool continuous_;     // sentences join running batches (not with attention maps)
  mutable std::atomic<bool> warned_unknown_{false};

  // The pool: windows' batches, handed out one at a time in the order the
  // windows came.
  mutable std::mutex mu_;
  mutable std::condition_variable work_ready_, work_done_, worker_idle_;
  std::deque<Window*> windows_;  // those with batches no worker has started
  int running_ = 0, idle_ = 0;   // workers on a batch, workers waiting for one
  int64_t joined_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Every line, in order, translated by a Translator with translation's
// defaults (its batches and workers): the texts alone, as a measurement on
// a validation set needs them (a shortlist's cost, int8's).
std::vector<std::string> translate_lines(const LoadedModel& model,
                                         const std::vector<std::string>& src,
                                         const SearchOptions& opts);

}  // namespace nmt
