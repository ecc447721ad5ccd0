#include "decode/translator.h"

#include <algorithm>
#include <thread>

#include "core/comm.h"
#include "core/error.h"
#include "core/token_batches.h"
#include "io/text_file.h"
#include "model/languages.h"
#include "ops/ops.h"

namespace nmt {

double decode_memory_bound(const ModelConfig& cfg, const SearchOptions& opts, int64_t batch_tokens,
                           int64_t max_sentences) {
  const double kv = 2.0 * cfg.decoder_layers * cfg.d_model * sizeof(float);  // per token and row
  double worst = 0;
  for (int64_t S = 1; S < cfg.max_positions; ++S) {
    const double n = double(std::max<int64_t>(1, std::min(max_sentences, batch_tokens / S)));
    const double rows = n * opts.beam;
    const double T =
        std::min<double>(cfg.max_positions, opts.max_len_a * double(S) + opts.max_len_b);
    const double bytes =
        rows * (T * kv + double(S) * kv +
                (2.0 * cfg.vocab_size + 8.0 * cfg.d_model + cfg.d_ff) * sizeof(float));
    worst = std::max(worst, bytes);
  }
  return worst;
}

Translator::Translator(const LoadedModel& model, SearchOptions opts, int64_t batch_tokens,
                       std::function<void(const std::string&)> warn, int workers,
                       int threads_per_worker, AttentionOutput attention, const Decodable* decoder)
    : model_(model),
      decoder_(decoder ? *decoder : static_cast<const Decodable&>(*model.net)),
      opts_(opts),
      batch_tokens_(batch_tokens),
      warn_(std::move(warn)),
      attention_(attention) {
  validate(opts_);
  const int layers = model_.config.decoder_layers;
  if (attention_.layer < 0) attention_.layer = std::max(0, layers - 2);
  if (attention_.layer >= layers)
    throw about_option<UsageError>("alignment_layer", std::to_string(attention_.layer + 1) +
                                                          ": the decoder has layers 1.." +
                                                          std::to_string(layers));
  cores_ = cores_per_rank();
  // Several single-threaded workers beat one multi-threaded one on batch
  // throughput (decoding's small products scale poorly across threads);
  // four bound the memory their decoding states take.
  if (workers <= 0) workers = std::min(cores_, 4);
  workers_ = workers;
  adapt_threads_ = threads_per_worker <= 0;
  threads_per_worker_ = threads_per_worker > 0 ? threads_per_worker : std::max(1, cores_ / workers);
  if (batch_tokens_ <= 0) batch_tokens_ = auto_batch_tokens(threads_per_worker_, model_.compute);
  set_continuous(false);
  for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { work(w); });
}

Translator::~Translator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  worker_idle_.notify_all();
  for (auto& t : threads_) t.join();
}

void Translator::set_continuous(bool on) {
  std::string why;
  if (on && (attention_.alignments || attention_.matrix))
    why = "alignments and attention maps need each batch to run to its end";
  else if (on && !opts_.sampling.empty())
    why = "sampling runs each batch to its end";
  else if (on && !decoder_.can_add_sentences())
    why = "this model cannot take sentences into a running batch";
  continuous_ = on && why.empty();
  if (!why.empty() && warn_)
    warn_("continuous batching does not apply: " + why + "; batches run static");
}

// What a worker's search translates: the rest of the batch it started
// (another worker's search may have taken its first sentences), then, with
// continuous batching, its window's next sentences that no search has taken
// yet, in the window's order (longest first), as places free up.
class Translator::Feed final : public SearchFeed {
 public:
  // The batch's sentences from `from` are this worker's from here on, so
  // they count as done even if the search throws before it starts them.
  Feed(Translator& tr, Window& window, Batch& batch, size_t from)
      : tr_(tr), window_(window), batch_(batch), from_(from), taken_(batch.src.size() - from) {}
  void first(std::vector<const SearchRequest*>& reqs,
             std::vector<std::vector<Hypothesis>*>& outs) override {
    for (size_t k = from_; k < batch_.src.size(); ++k) {
      reqs.push_back(&batch_.src[k]);
      outs.push_back(&batch_.hyps[k]);
    }
  }
  void more(int64_t n, const std::function<bool(const SearchRequest&)>& fits,
            std::vector<const SearchRequest*>& reqs,
            std::vector<std::vector<Hypothesis>*>& outs) override {
    std::lock_guard<std::mutex> lock(tr_.mu_);
    Window& w = window_;
    std::vector<Batch>& jobs = *w.batches;
    while (n > 0 && w.next_job < jobs.size()) {
      Batch& b = jobs[w.next_job];
      const size_t k = w.next_sentence;
      if (!fits(b.src[k])) break;
      reqs.push_back(&b.src[k]);
      outs.push_back(&b.hyps[k]);
      ++taken_, ++tr_.joined_, --n;
      if (++w.next_sentence < b.src.size()) continue;
      w.next_sentence = 0;
      // Its last batch taken, the window leaves the queue (it is the
      // front: windows are handed out in order).
      if (++w.next_job == jobs.size()) tr_.windows_.pop_front();
    }
  }
  // A batch's own rule (sentences x their longest source, at most
  // batch_tokens) at the batch's source width.
  int64_t capacity(int64_t S) const override {
    return window_.continuous ? std::max<int64_t>(1, tr_.batch_tokens_ / std::max<int64_t>(1, S))
                              : 0;
  }
  size_t taken() const { return taken_; }

 private:
  Translator& tr_;
  Window& window_;
  Batch& batch_;
  size_t from_;
  size_t taken_;
};

// A worker: its own CPU threads and decoding state for its whole life, so
// that its primitives and buffers are built once.
void Translator::work(int) {
  int threads = threads_per_worker_;
  ops::set_num_threads(threads);
  DecodeState state;
  Activations acts;  // the attention pass, when asked for
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    worker_idle_.notify_all();
    work_ready_.wait(lock, [&] { return stopping_ || !windows_.empty(); });
    --idle_;
    if (stopping_) return;
    // Fewer batches than workers leave workers idle: those busy take their cores.
    size_t waiting = 0;
    for (const Window* w : windows_) waiting += w->batches->size() - w->next_job;
    const int busy = static_cast<int>(std::min<size_t>(running_ + waiting, workers_));
    const int want = adapt_threads_ ? std::max(1, cores_ / busy) : threads_per_worker_;
    Window& w = *windows_.front();
    Batch& b = (*w.batches)[w.next_job++];
    Feed feed(*this, w, b, w.next_sentence);
    w.next_sentence = 0;
    if (w.next_job == w.batches->size()) windows_.pop_front();
    ++running_;
    lock.unlock();
    if (want != threads) ops::set_num_threads(threads = want);
    std::exception_ptr error;
    try {
      search(decoder_, feed, opts_, state);
      if (std::find(b.align.begin(), b.align.end(), 1) != b.align.end()) attend(b, acts);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    --running_;
    if (error && !w.error) w.error = error;
    w.done += feed.taken();
    if (w.done == w.sentences) work_done_.notify_all();
  }
}

void Translator::wait_for_idle_worker() const {
  std::unique_lock<std::mutex> lock(mu_);
  worker_idle_.wait(lock, [&] { return stopping_ || (idle_ > 0 && windows_.empty()); });
}

// Cleaned, encoded and truncated lines of a window; empty ones stay empty,
// and so do lines whose prefix or constraints cannot be used.
std::vector<SearchRequest> Translator::encode(const std::vector<TranslationRequest>& requests,
                                              int64_t first_line) const {
  std::vector<SearchRequest> ids(requests.size());
  const int64_t max_src = model_.config.max_positions - model_.config.source_tokens(0);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].skip) continue;
    bool bad = false;
    const std::string clean = io::sanitize_utf8(requests[i].source, &bad);
    const int64_t line_no =
        requests[i].line > 0 ? requests[i].line : first_line + static_cast<int64_t>(i);
    if (bad && warn_)
      warn_("line " + std::to_string(line_no) + ": invalid UTF-8 replaced with U+FFFD");
    if (clean.find_first_not_of(" \t\r") == std::string::npos) continue;  // empty in, empty out
    LanguageFraming lang;
    try {
      lang = language_framing(model_.config, requests[i].source_lang, requests[i].target_lang);
    } catch (const InputError& e) {
      if (warn_)
        warn_("line " + std::to_string(line_no) + ": " + e.option() + e.what() +
              "; an empty line is written instead");
      continue;
    }
    const int64_t room = lang.source_room(max_src);
    std::vector<int32_t>& src = ids[i].src;
    src = model_.src_vocab().encode(clean);
    warn_if_unknown(src, line_no);
    if (static_cast<int64_t>(src.size()) > room) {
      if (warn_)
        warn_("line " + std::to_string(line_no) + ": " + std::to_string(src.size()) +
              " subwords exceed the model's limit of " + std::to_string(room) + "; truncated");
      src.resize(std::max<int64_t>(room, 0));
    }
    lang.wrap_source(src);
    if (encode_extras(requests[i], line_no, ids[i])) {
      ids[i].prefix.insert(ids[i].prefix.begin(), lang.target_given.begin(),
                           lang.target_given.end());
      ids[i].given = static_cast<int32_t>(lang.target_given.size());
    } else {
      ids[i] = SearchRequest();
    }
    ids[i].sample_key = sample_key(line_no, requests[i].source);
  }
  return ids;
}

// Text that is mostly <unk> was not cut as the model expects (raw text into
// a model that reads tokens, another tokeniser's pieces): said once a run,
// at the first such line.
void Translator::warn_if_unknown(const std::vector<int32_t>& src, int64_t line_no) const {
  const int32_t unk = model_.config.source_unk();
  if (unk < 0 || src.size() < 2 || !warn_ || warned_unknown_) return;
  const auto n = std::count(src.begin(), src.end(), unk);
  if (2 * n <= static_cast<int64_t>(src.size()) || warned_unknown_.exchange(true)) return;
  warn_("line " + std::to_string(line_no) + ": " + std::to_string(n) + " of its " +
        std::to_string(src.size()) +
        " tokens are not in the model's vocabulary (read as <unk>); is the text tokenised as "
        "the model expects? (said once)");
}

// The prefix and constraints of one line as tokens; false (with a warning)
// when they cannot be honoured.
bool Translator::encode_extras(const TranslationRequest& rq, int64_t line_no,
                               SearchRequest& out) const {
  auto refuse = [&](const std::string& why) {
    if (warn_)
      warn_("line " + std::to_string(line_no) + ": " + why + "; an empty line is written instead");
    return false;
  };
  const int64_t room = model_.config.max_positions - 2;  // outputs end in </s>
  if (!rq.prefix.empty()) {
    out.prefix = model_.tgt_vocab().encode(io::sanitize_utf8(rq.prefix));
    if (static_cast<int64_t>(out.prefix.size()) > room)
      return refuse("the prefix's " + std::to_string(out.prefix.size()) +
                    " subwords exceed the model's limit of " + std::to_string(room));
  }
  if (rq.constraints.size() > kMaxConstraints)
    return refuse(std::to_string(rq.constraints.size()) + " constraints, more than the " +
                  std::to_string(kMaxConstraints) + " allowed");
  int64_t tokens = static_cast<int64_t>(out.prefix.size());
  for (size_t c = 0; c < rq.constraints.size(); ++c) {
    const std::string text = io::sanitize_utf8(rq.constraints[c]);
    const std::string quoted = "constraint " + std::to_string(c + 1) + " \"" + text + "\"";
    if (text.find_first_not_of(" \t\r") == std::string::npos)
      return refuse("constraint " + std::to_string(c + 1) + " is empty");
    std::vector<int32_t> ids = model_.tgt_vocab().encode(text);
    const int32_t unk = model_.config.unk_id;
    if (unk >= 0 && std::find(ids.begin(), ids.end(), unk) != ids.end())
      return refuse(quoted + " has characters the model's vocabulary lacks (they encode as <unk>)");
    tokens += static_cast<int64_t>(ids.size());
    out.constraints.push_back(std::move(ids));
  }
  if (tokens > room)
    return refuse("the prefix and constraints take " + std::to_string(tokens) +
                  " subwords, more than the model's limit of " + std::to_string(room));
  return true;
}

// The best translations' cross-attention, one sentence at a time so that a
// map never depends on the sentences batched with it.
void Translator::attend(Batch& b, Activations& acts) const {
  b.maps.assign(b.src.size(), AttentionMap());
  for (size_t k = 0; k < b.src.size(); ++k)
    if (b.align[k] && !b.hyps[k].empty())
      b.maps[k] = attention_map(*model_.net, b.src[k].src, b.hyps[k][0].tokens,
                                AttentionKind::Cross, attention_.layer, -1, acts);
}

// Longest first, so each batch's padding is small; a batch costs
// (sentences x beam) rows of its longest sentence, at most batch_tokens.
std::vector<Translator::Batch> Translator::make_batches(std::vector<SearchRequest>& ids) const {
  std::vector<size_t> order;
  for (size_t i = 0; i < ids.size(); ++i)
    if (!ids[i].src.empty()) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ids[a].src.size() > ids[b].src.size(); });
  // A window too small to give every worker a batch (a few lines from a
  // pipe, a server's few requests) is shared out among them all the same:
  // a worker of one thread on a small batch beats two threads on a larger
  // one.
  const int64_t padded =
      order.empty() ? 0
                    : static_cast<int64_t>(order.size()) *
                          (static_cast<int64_t>(ids[order[0]].src.size()) + 1);  // to the longest
  const int64_t budget =
      std::min(batch_tokens_, std::max<int64_t>(1, (padded + workers_ - 1) / workers_));
  std::vector<Batch> batches;
  size_t begin = 0;
  for (size_t end : token_batch_ends(order.size(), budget, [&](size_t k) {
         return static_cast<int64_t>(ids[order[k]].src.size()) + 1;
       })) {
    Batch& b = batches.emplace_back();
    for (size_t k = begin; k < end; ++k) {
      b.src.push_back(std::move(ids[order[k]]));
      b.index.push_back(order[k]);
    }
    begin = end;
  }
  return batches;
}

// Hands the batches to the workers and waits for all of them.
void Translator::run(std::vector<Batch>& batches, bool continuous) {
  Window w;
  w.batches = &batches;
  w.continuous = continuous;
  for (Batch& b : batches) {
    b.hyps.assign(b.src.size(), {});
    w.sentences += b.src.size();
  }
  std::unique_lock<std::mutex> lock(mu_);
  windows_.push_back(&w);
  work_ready_.notify_all();
  work_done_.wait(lock, [&] { return w.done == w.sentences; });
  if (w.error) std::rethrow_exception(w.error);
}

std::vector<TranslationResult> Translator::translate(const std::vector<std::string>& lines,
                                                     int64_t first_line) {
  std::vector<TranslationRequest> requests(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) requests[i].source = lines[i];
  return translate(requests, first_line);
}

std::vector<TranslationResult> Translator::translate(
    const std::vector<TranslationRequest>& requests, int64_t first_line) {
  std::vector<TranslationResult> out(requests.size());
  std::vector<SearchRequest> ids = encode(requests, first_line);
  // A line refused or skipped writes no translation: any constraints it
  // had are unmet.
  for (size_t i = 0; i < requests.size(); ++i)
    out[i].constraints_met = requests[i].constraints.empty();
  std::vector<Batch> batches = make_batches(ids);
  if (batches.empty()) return out;
  // Maps are drawn after a batch's search, from its own sentences: a
  // window that wants one keeps its batches to themselves.
  bool aligns = false;
  for (Batch& b : batches) {
    for (size_t i : b.index)
      b.align.push_back(attention_.alignments || attention_.matrix || requests[i].align);
    aligns = aligns || std::find(b.align.begin(), b.align.end(), 1) != b.align.end();
  }
  run(batches, continuous_ && !aligns);
  for (Batch& b : batches)
    for (size_t k = 0; k < b.src.size(); ++k) {
      TranslationResult& r = out[b.index[k]];
      const auto given = static_cast<std::ptrdiff_t>(b.src[k].given);
      for (const Hypothesis& h : b.hyps[k]) {
        // A target language's token is not part of the translation.
        std::string text = model_.tgt_vocab().decode(std::vector<int32_t>(
            h.tokens.begin() + std::min<std::ptrdiff_t>(given, h.tokens.size()), h.tokens.end()));
        if (r.n_best.empty()) {
          r.text = text;
          r.score = h.score;
          r.logprob = h.logprob;
          r.tokens = static_cast<int64_t>(h.tokens.size()) + 1;
          r.constraints_met = h.constraints_met;
        }
        r.n_best.emplace_back(std::move(text), h.score);
      }
      if (!r.constraints_met && warn_)
        warn_("line " +
              std::to_string(requests[b.index[k]].line > 0
                                 ? requests[b.index[k]].line
                                 : first_line + static_cast<int64_t>(b.index[k])) +
              ": no translation within the length limit meets every constraint; the best one "
              "that does not is written");
      if (b.maps.empty() || !b.align[k] || b.hyps[k].empty()) continue;
      r.src_pieces = model_.src_vocab().pieces(b.src[k].src);
      r.out_pieces = model_.tgt_vocab().pieces(b.hyps[k][0].tokens);
      if (attention_.alignments || requests[b.index[k]].align)
        r.alignment = word_alignment(b.maps[k], r.src_pieces, r.out_pieces);
      if (attention_.matrix) r.attention = std::move(b.maps[k]);
    }
  return out;
}

std::vector<std::string> translate_lines(const LoadedModel& model,
                                         const std::vector<std::string>& src,
                                         const SearchOptions& opts) {
  Translator tr(model, opts, /*batch_tokens=*/0, {}, /*workers=*/0);
  std::vector<std::string> out;
  for (auto& r : tr.translate(src)) out.push_back(std::move(r.text));
  return out;
}

}  // namespace nmt
