#include "decode/translator.h"

#include <algorithm>
#include <numeric>

#include "io/text_file.h"

namespace nmt {

Translator::Translator(const LoadedModel& model, SearchOptions opts, int64_t batch_tokens,
                       std::function<void(const std::string&)> warn)
    : model_(model),
      opts_(opts),
      batch_tokens_(std::max<int64_t>(batch_tokens, 1)),
      warn_(std::move(warn)) {}

std::vector<TranslationResult> Translator::translate(const std::vector<std::string>& lines,
                                                     int64_t first_line) {
  const size_t n = lines.size();
  std::vector<TranslationResult> out(n);
  std::vector<std::vector<int32_t>> ids(n);
  const int64_t max_src = model_.config.max_positions - 1;
  for (size_t i = 0; i < n; ++i) {
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
  // Longest first within the window, so each batch's padding is small.
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i)
    if (!ids[i].empty()) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ids[a].size() > ids[b].size(); });
  std::vector<std::vector<int32_t>> batch;
  std::vector<size_t> index;
  auto flush = [&] {
    if (batch.empty()) return;
    auto hyps = search(*model_.net, batch, opts_, state_);
    for (size_t b = 0; b < batch.size(); ++b) {
      TranslationResult& r = out[index[b]];
      for (const Hypothesis& h : hyps[b]) {
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
    batch.clear();
    index.clear();
  };
  int64_t longest = 0;
  for (size_t i : order) {
    const int64_t len = static_cast<int64_t>(ids[i].size()) + 1;
    // The batch costs (sentences x beam) rows of the longest sentence.
    if (!batch.empty() &&
        std::max(longest, len) * static_cast<int64_t>(batch.size() + 1) > batch_tokens_) {
      flush();
      longest = 0;
    }
    longest = std::max(longest, len);
    batch.push_back(std::move(ids[i]));
    index.push_back(i);
  }
  flush();
  return out;
}

}  // namespace nmt
