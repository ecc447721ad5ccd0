#include "decode/shortlist_cost.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>

#include "core/error.h"
#include "io/json.h"
#include "metrics/bleu.h"
#include "metrics/tokenizers.h"

namespace nmt {

namespace {

// Beam search over src in length-sorted batches of at most kBatchTokens
// source tokens (translate's default for one-thread workers) and kBatch
// sentences; the best hypothesis of each, decoded.
std::vector<std::string> translate_all(const Decodable& model, const Vocab& vocab,
                                       const std::vector<std::vector<int32_t>>& src,
                                       const SearchOptions& opts, double& seconds) {
  constexpr int64_t kBatchTokens = 512, kBatch = 64;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<size_t> order(src.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return src[a].size() < src[b].size(); });
  std::vector<std::string> out(src.size());
  const int64_t max_src = model.config().max_positions - model.config().source_tokens(0);
  DecodeState state;
  for (size_t i = 0; i < order.size();) {
    std::vector<SearchRequest> batch;
    std::vector<size_t> where;
    for (; i < order.size(); ++i) {
      const int64_t width = static_cast<int64_t>(src[order[i]].size()) + 1;
      if (!batch.empty() && (static_cast<int64_t>(batch.size() + 1) * width > kBatchTokens ||
                             static_cast<int64_t>(batch.size()) == kBatch))
        break;
      batch.push_back({src[order[i]], {}, {}, 0});
      auto& ids = batch.back().src;  // truncated, as nmt translate truncates
      if (static_cast<int64_t>(ids.size()) > max_src) ids.resize(static_cast<size_t>(max_src));
      where.push_back(order[i]);
    }
    const auto hyps = search(model, batch, opts, state);
    for (size_t k = 0; k < hyps.size(); ++k)
      out[where[k]] = hyps[k].empty() ? std::string() : vocab.decode(hyps[k][0].tokens);
  }
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace

ShortlistCost measure_shortlist(const Decodable& model, const Shortlist& shortlist,
                                const Vocab& tgt_vocab,
                                const std::vector<std::vector<int32_t>>& src,
                                const std::vector<std::vector<int32_t>>& tgt,
                                const std::vector<std::string>& refs, SearchOptions opts,
                                const std::string& tokenizer) {
  if (refs.size() != src.size() || (!tgt.empty() && tgt.size() != src.size()))
    throw Error("measure_shortlist: sources and references differ in number");
  ShortlistCost c;
  c.sentences = static_cast<int64_t>(src.size());
  c.beam = opts.beam;
  c.tokenizer = tokenizer;
  metrics::BleuOptions bo;
  bo.tokenizer = metrics::parse_tokenizer(tokenizer);
  opts.shortlist = nullptr;
  c.bleu_full = metrics::corpus_bleu(translate_all(model, tgt_vocab, src, opts, c.seconds_full),
                                     {refs}, bo)
                    .score;
  opts.shortlist = &shortlist;
  c.bleu_shortlist =
      metrics::corpus_bleu(translate_all(model, tgt_vocab, src, opts, c.seconds_shortlist), {refs},
                           bo)
          .score;
  std::vector<uint8_t> allowed(static_cast<size_t>(shortlist.tgt_vocab()), 0);
  for (size_t i = 0; i < tgt.size(); ++i) {
    shortlist.for_each_allowed(src[i], [&](int32_t t) { allowed[t] = 1; });
    for (int32_t t : tgt[i]) {
      ++c.ref_pieces;
      c.ref_pieces_covered += t >= 0 && t < shortlist.tgt_vocab() && allowed[t];
    }
    std::fill(allowed.begin(), allowed.end(), 0);
  }
  return c;
}

std::string shortlist_cost_limit() {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", kMaxDefaultShortlistCost);
  return buf;
}

std::string shortlist_metadata(const Shortlist& sl, const std::string& built_from,
                               const ShortlistCost* cost) {
  nlohmann::json j = {{"per_source", sl.options().per_source},
                      {"frequent", sl.options().frequent},
                      {"entries", sl.entries()},
                      {"built_from", built_from}};
  if (cost) {
    j["measured_on"] = {{"sentences", cost->sentences},
                        {"beam", cost->beam},
                        {"tokenize", cost->tokenizer},
                        {"bleu", cost->bleu_full},
                        {"bleu_shortlist", cost->bleu_shortlist}};
    if (cost->ref_pieces)
      j["measured_on"]["reference_coverage"] =
          static_cast<double>(cost->ref_pieces_covered) / static_cast<double>(cost->ref_pieces);
    j["max_cost"] = kMaxDefaultShortlistCost;
  }
  j["default"] = cost && cost->on_by_default();
  return j.dump();
}

bool shortlist_on_by_default(const std::map<std::string, std::string>& metadata) {
  const auto it = metadata.find("shortlist");
  if (it == metadata.end()) return false;
  try {
    const auto j = io::parse_json(it->second, "the shortlist metadata");
    return j.is_object() && j.value("default", false);
  } catch (const std::exception&) {
    return false;  // unreadable: the shortlist is only used when asked for
  }
}

}  // namespace nmt
