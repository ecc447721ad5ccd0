#include "service/scoring_service.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/format.h"
#include "core/memory.h"
#include "decode/ensemble.h"
#include "decode/search.h"
#include "model/languages.h"

namespace nmt {

ScoringService::ScoringService(ScoreOptions opts, std::function<void(const std::string&)> warn)
    : opts_(std::move(opts)), warn_(std::move(warn)) {
  if (opts_.models.empty()) throw about_option<UsageError>("model", ": none given");
  if (opts_.batch_tokens < 1 || opts_.batch_tokens > (int64_t{1} << 24))
    throw about_option<UsageError>("batch_tokens", ": expected a number from 1 to 16777216, got " +
                                                       std::to_string(opts_.batch_tokens));
  if (!(opts_.alpha >= 0 && opts_.alpha <= 10))  // false for NaN
    throw about_option<UsageError>("alpha", ": expected a number from 0 to 10");
  models_.reserve(opts_.models.size());
  for (const auto& path : opts_.models)
    models_.push_back(load_model(path, opts_.compute, nullptr, opts_.device, ShortlistLoad::Skip,
                                 WeightsUse::ProductsOnly));
  if (const std::string why = ensemble_mismatch(models_, opts_.models); !why.empty())
    throw about_option<InputError>("model", why);
  max_len_ = models_[0].config.max_positions - 1;
  lang_ = language_framing(models_[0].config, opts_.source_lang, opts_.target_lang);
}

// Lines are cut while read (a 10 MB line costs a few times the model's
// length, not 1.7 GB), then to the model's limit in subwords.
io::TextChecks ScoringService::text_checks(bool tab_pairs) const {
  io::TextChecks checks;
  checks.max_line_bytes =
      io::kMaxBytesPerSubword * static_cast<std::size_t>(max_len_) * (tab_pairs ? 2 : 1);
  checks.why_limit = "the model takes at most " + std::to_string(max_len_) + " subwords";
  checks.warn = warn_;
  return checks;
}

void ScoringService::split_pairs(const std::vector<std::string>& lines,
                                 std::vector<std::string>& src, std::vector<std::string>& tgt) {
  for (const auto& line : lines) {
    const auto tab = line.find('\t');
    if (tab == std::string::npos)
      throw InputError("line " + std::to_string(src.size() + 1) +
                       ": expected source<TAB>target (or give {src} and {tgt})");
    src.push_back(line.substr(0, tab));
    tgt.push_back(line.substr(tab + 1));
  }
}

// batch_tokens may be far more than the machine holds: a batch is refused
// before any work when it could be as large as the pairs make it (all of
// them, padded, at most) and would not fit.
void ScoringService::check_memory(const std::vector<std::vector<int32_t>>& s,
                                  const std::vector<std::vector<int32_t>>& t) const {
  const uint64_t phys = physical_memory_bytes();
  if (!phys) return;
  const ModelConfig& cfg = models_[0].config;
  int64_t padded = 0;
  for (size_t i = 0; i < s.size(); ++i)
    padded += static_cast<int64_t>(std::max(s[i].size(), t[i].size())) + 1;
  const int64_t tokens = std::min<int64_t>(opts_.batch_tokens, padded);
  const double need = double(models_.size()) * score_batch_memory(cfg, tokens);
  if (need > double(phys))
    throw about_option<UsageError>(
        "batch_tokens",
        std::to_string(opts_.batch_tokens) + ": a batch of " + std::to_string(tokens) +
            " padded tokens would need at least " + gigabytes(need) +
            " for its logits and activations (vocabulary " + std::to_string(cfg.vocab_size) +
            ", d_model " + std::to_string(cfg.d_model) + "), more than this machine's " +
            gigabytes(double(phys)) + "; expected at most " +
            std::to_string(static_cast<int64_t>(double(tokens) * double(phys) / need)));
}

// The columns: the log-probability (natural log, </s> included), its
// token count, their ratio, and the search's normalised score
// logprob / ((5 + tokens) / 6)^alpha, which translate --scores prints.
std::string ScoringService::line_of(size_t i, const ForcedScore& score,
                                    const std::vector<int32_t>& target,
                                    const SearchOptions& penalty) const {
  const auto& lp = score.token_logprobs;
  const int64_t n = static_cast<int64_t>(lp.size());
  const double norm = score.total() / length_penalty(n, penalty);
  std::vector<std::string> pieces;
  if (opts_.word_scores) {
    pieces = models_[0].tgt_vocab().pieces(target);
    pieces.push_back("</s>");
  }
  if (opts_.format == ScoreFormat::jsonl) {
    nlohmann::json j = {{"line", i + 1}, {"logprob", score.total()},
                        {"tokens", n},   {"logprob_per_token", score.mean()},
                        {"score", norm}, {"alpha", opts_.alpha}};
    if (opts_.word_scores) {
      j["pieces"] = pieces;
      j["token_logprobs"] = lp;
    }
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  std::string line = printf_string("%.6f\t%lld\t%.6f\t%.6f", score.total(),
                                   static_cast<long long>(n), score.mean(), norm);
  if (opts_.word_scores) {
    line += "\t";
    for (size_t k = 0; k < lp.size(); ++k)
      line += (k ? " " : "") + pieces[k] + printf_string("=%.4f", lp[k]);
  }
  return line + "\n";
}

ScoringService::Scored ScoringService::score(
    const std::vector<std::string>& src, const std::vector<std::string>& tgt,
    const std::function<void(int64_t done, int64_t total)>& progress) const {
  if (src.size() != tgt.size())
    throw InputError("source has " + std::to_string(src.size()) + " lines but target has " +
                     std::to_string(tgt.size()));
  const LoadedModel& m = models_[0];
  std::vector<std::vector<int32_t>> s(src.size()), t(tgt.size());
  // A source's framing (</s>, and <s> for some imported models) and a
  // multilingual model's language tokens take positions too.
  const int64_t max_src = lang_.source_room(m.config.max_positions - m.config.source_tokens(0)),
                max_tgt = max_len_ - static_cast<int64_t>(lang_.target_given.size());
  for (size_t i = 0; i < src.size(); ++i) {
    s[i] = m.src_vocab().encode(src[i]);
    t[i] = m.tgt_vocab().encode(tgt[i]);
    if (static_cast<int64_t>(s[i].size()) > max_src ||
        static_cast<int64_t>(t[i].size()) > max_tgt) {
      warn_("line " + std::to_string(i + 1) + " is longer than " + std::to_string(max_tgt) +
            " subwords; truncated");
      if (static_cast<int64_t>(s[i].size()) > max_src) s[i].resize(max_src);
      if (static_cast<int64_t>(t[i].size()) > max_tgt) t[i].resize(max_tgt);
    }
    lang_.wrap_source(s[i]);
    t[i].insert(t[i].begin(), lang_.target_given.begin(), lang_.target_given.end());
  }
  check_memory(s, t);
  const int64_t pairs = static_cast<int64_t>(s.size());
  auto on_batch = [&](int64_t done) {
    if (progress) progress(done, pairs);
  };
  const std::vector<const Transformer*> nets = networks(models_);
  Scored out;
  out.scores = nets.size() == 1 ? score_pairs(*m.net, s, t, opts_.batch_tokens, on_batch)
                                : score_pairs(nets, s, t, opts_.batch_tokens, on_batch);
  // A target language's token is given, not scored.
  const auto given = static_cast<std::ptrdiff_t>(lang_.target_given.size());
  for (auto& ids : t) ids.erase(ids.begin(), ids.begin() + given);
  for (ForcedScore& sc : out.scores)
    sc.token_logprobs.erase(sc.token_logprobs.begin(), sc.token_logprobs.begin() + given);
  out.targets = std::move(t);
  return out;
}

void ScoringService::write(const Scored& scored,
                           const std::function<void(const std::string& line)>& write) const {
  const std::vector<ForcedScore>& scores = scored.scores;
  if (opts_.summary) {
    double total = 0;
    int64_t tokens = 0;
    for (const auto& sc : scores) {
      total += sc.total();
      tokens += static_cast<int64_t>(sc.token_logprobs.size());
    }
    const double xent = tokens ? -total / static_cast<double>(tokens) : 0.0;
    write(printf_string(
        "sentences %zu tokens %lld log-prob %.4f cross-entropy %.4f nats perplexity %.4f\n",
        scores.size(), static_cast<long long>(tokens), total, xent, std::exp(xent)));
    return;
  }
  if (opts_.format == ScoreFormat::text && opts_.header)
    write(std::string("logprob\ttokens\tlogprob_per_token\tscore") +
          (opts_.word_scores ? "\tword_scores" : "") + "\n");
  SearchOptions penalty;  // the GNMT length penalty of the "score" column
  penalty.alpha = static_cast<float>(opts_.alpha);
  for (size_t i = 0; i < scores.size(); ++i)
    write(line_of(i, scores[i], scored.targets[i], penalty));
}

}  // namespace nmt
