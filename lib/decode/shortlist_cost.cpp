#include "decode/shortlist_cost.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "decode/translator.h"
#include "io/json.h"
#include "metrics/bleu.h"
#include "metrics/tokenizers.h"

namespace nmt {

namespace {

std::vector<std::string> translate_all(const LoadedModel& model,
                                       const std::vector<std::string>& src,
                                       const SearchOptions& opts, double& seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> out = translate_lines(model, src, opts);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace

ShortlistCost measure_shortlist(const LoadedModel& model, const Shortlist& shortlist,
                                const std::vector<std::string>& src,
                                const std::vector<std::string>& refs, SearchOptions opts,
                                const std::string& tokenizer) {
  if (refs.size() != src.size())
    throw Error("measure_shortlist: sources and references differ in number");
  ShortlistCost c;
  c.sentences = static_cast<int64_t>(src.size());
  c.beam = opts.beam;
  c.tokenizer = tokenizer;
  metrics::BleuOptions bo;
  bo.tokenizer = metrics::parse_tokenizer(tokenizer);
  opts.shortlist = nullptr;
  c.bleu_full =
      metrics::corpus_bleu(translate_all(model, src, opts, c.seconds_full), {refs}, bo).score;
  opts.shortlist = &shortlist;
  c.bleu_shortlist =
      metrics::corpus_bleu(translate_all(model, src, opts, c.seconds_shortlist), {refs}, bo).score;
  // How many reference pieces their own sentence's shortlist holds.
  std::vector<uint8_t> allowed(static_cast<size_t>(shortlist.tgt_vocab()), 0);
  for (size_t i = 0; i < src.size(); ++i) {
    shortlist.for_each_allowed(model.src_vocab().encode(src[i]), [&](int32_t t) { allowed[t] = 1; });
    for (int32_t t : model.tgt_vocab().encode(refs[i])) {
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

}  // namespace nmt
