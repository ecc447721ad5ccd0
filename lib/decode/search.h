// Greedy and beam search over the Transformer's incremental decoder, and
// sampling (decode/sampling.cpp) through the same interface.
//
// The encoder runs once per batch; each step feeds one token per live
// hypothesis and reuses the cached self-attention keys/values and the
// cross-attention K/V computed once per source batch. Finished sentences
// leave the batch: a sentence is done once its n_best best finished
// hypotheses score at least as well as its best live one could if it ended
// within 4 more tokens. Scores use the GNMT length penalty the paper
// applied, lp(Y) = ((5 + |Y|) / 6)^alpha, or plain length normalisation.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/option_spec.h"
#include "core/stop.h"
#include "model/transformer.h"

namespace nmt {

class Shortlist;

struct SearchOptions {
  int beam = 4;              // 1: greedy
  float alpha = 0.6f;        // length penalty exponent
  bool length_norm = false;  // score / |Y| instead of the GNMT penalty
  int n_best = 1;            // hypotheses returned per sentence (<= beam)
  float max_len_a = 1.f;     // max output length = a * source length + b
  int max_len_b = 50;
  // Sampling instead of search: "topk" (the sampling_k most probable
  // tokens), "topp" (nucleus: the fewest reaching sampling_p of the
  // probability), "full"; empty: search. n_best is then the number of
  // independent samples per sentence, and beam is not used. Draws depend
  // only on the seed, the request's sample_key and the request itself.
  std::string sampling;
  int sampling_k = 0;
  float sampling_p = 1.f;
  float temperature = 1.f;
  uint64_t seed = 0;
  // Search only (sampling draws from the whole vocabulary): each batch's
  // output is restricted to the shortlist's pieces for its sources, plus
  // </s> and the requests' prefix and constraint tokens; log-probabilities
  // are normalised over those. Null: the whole vocabulary.
  const Shortlist* shortlist = nullptr;
  // Once this is non-zero, search and sampling throw Stopped at their next
  // step (a stop signal during a long validation or measurement).
  const StopFlag* stop = nullptr;
};

// The search's options that a user sets, in the order --help lists them:
// beam, alpha, length_norm, n_best, sampling (as "topk:K", "topp:P" or
// "full"), sampling_temperature, seed, max_length_a, max_length_b.
const std::vector<OptionSpec<SearchOptions>>& search_options();

// Throws UsageError naming the option unless every value is in
// search_options()'s range (NaN never is), and the sampling's K in
// 1..1000000, its P in (0, 1].
void validate(const SearchOptions& opts);

// A sampling as one string, "topk:K", "topp:P" or "full", into opts'
// sampling fields; anything else is a UsageError about the option sampling.
void parse_sampling(const std::string& spec, SearchOptions& opts);
// opts' sampling as that string; empty: search.
std::string sampling_spec(const SearchOptions& opts);

struct Hypothesis {
  std::vector<int32_t> tokens;  // without </s>
  double logprob = 0;           // sum of token log-probabilities, </s> included
  double score = 0;             // logprob / length penalty
  bool constraints_met = true;  // false only when no output within the length limit met them
};

// What one sentence asks of the search beyond its source.
//  - prefix: the output starts with these tokens (forced, scored as decoded);
//    the search continues from them.
//  - constraints: token sequences that must each appear in the output.
//    Lexically constrained beam search with dynamic beam allocation (Post &
//    Vilar, 2018): every step also proposes, from each hypothesis, the next
//    token of the constraint it is inside, or else the first token of each
//    constraint it has not met; the beam is shared out among banks of
//    hypotheses by the number of constraint tokens met, so those that
//    honour more constraints are not crowded out by more probable ones that
//    honour fewer. The beam is never widened: --beam caps it, and with fewer
//    slots than banks the banks nearest completion are served first. </s> is
//    allowed only once every constraint is met; the length limit grows by the
//    constraints' tokens, and if no hypothesis meets them all within it the
//    best unconstrained ending is returned with constraints_met = false.
struct SearchRequest {
  std::vector<int32_t> src;  // without </s>
  std::vector<int32_t> prefix;
  // The prefix's first `given` tokens are given, not predicted (a target
  // language's token): forced with log-probability 0, as Transformers
  // forces its first token; they count in the length penalty's length.
  int32_t given = 0;
  std::vector<std::vector<int32_t>> constraints;  // at most kMaxConstraints, none empty
  uint64_t sample_key = 0;  // sampling: with the seed, what this sentence's draws follow
};
constexpr size_t kMaxConstraints = 64;

// Where a search takes its sentences from and puts its results. The first
// batch starts the search; with continuous batching, whenever sentences
// finish and free a quarter of the batch's places, more join the running
// batch, so that a batch keeps its rows busy instead of shrinking to its
// last long sentence. A sentence's result never depends on when it joined
// or what it ran beside.
class SearchFeed {
 public:
  virtual ~SearchFeed() = default;
  // The batch the search starts with: requests, and where each one's
  // hypotheses go.
  virtual void first(std::vector<const SearchRequest*>& reqs,
                     std::vector<std::vector<Hypothesis>*>& outs) = 0;
  // Up to n more, in order, appended as first() appends them, stopping
  // before the first that fits() refuses (a source wider than the batch's,
  // or an output longer than its caches).
  virtual void more(int64_t n, const std::function<bool(const SearchRequest&)>& fits,
                    std::vector<const SearchRequest*>& reqs,
                    std::vector<std::vector<Hypothesis>*>& outs) {
    (void)n, (void)fits, (void)reqs, (void)outs;
  }
  // How many sentences a batch of sources S tokens wide keeps live; no more
  // join than the first batch holds when this is not above its size.
  virtual int64_t capacity(int64_t S) const {
    (void)S;
    return 0;
  }
};

// Searches every sentence the feed gives.
void search(const Decodable& model, SearchFeed& feed, const SearchOptions& opts,
            DecodeState& state);

// Translates one batch of id sequences (without </s>); returns, per input
// and in input order, up to n_best hypotheses sorted best first.
// `state` is reused across calls so that buffers are not reallocated.
std::vector<std::vector<Hypothesis>> search(const Decodable& model,
                                            const std::vector<std::vector<int32_t>>& src,
                                            const SearchOptions& opts, DecodeState& state);
std::vector<std::vector<Hypothesis>> search(const Decodable& model,
                                            const std::vector<SearchRequest>& requests,
                                            const SearchOptions& opts, DecodeState& state);

double length_penalty(int64_t length, const SearchOptions& opts);

// Sampling (opts.sampling set; search() calls it): per request, n_best
// samples in draw order, each ended by </s> or the length limit, scored as
// search scores its hypotheses. A prefix is forced as in search;
// constraints are refused. Sample n of a request draws its token at step t
// with the uniform of (seed, sample_key, source, n, t) alone, so batches,
// workers and threads never change it.
std::vector<std::vector<Hypothesis>> sample(const Decodable& model,
                                            const std::vector<SearchRequest>& requests,
                                            const SearchOptions& opts, DecodeState& state);
// The key of a request: its line number and its text, as the translator
// sets sample_key.
uint64_t sample_key(int64_t line, const std::string& text);

}  // namespace nmt
