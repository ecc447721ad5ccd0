// Sampling from the model (Edunov et al., 2018: sampled back-translation),
// over the same cached decoder as beam search. Every sentence holds
// n_best rows, one per sample; a sample that has ended keeps its row (fed
// </s>, its outputs unread) until its sentence's last sample ends, so rows
// never move within a sentence and a draw never depends on its neighbours.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/rng.h"
#include "decode/search.h"
#include "ops/ops.h"

namespace nmt {

uint64_t sample_key(int64_t line, const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the text
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return mix_seed(static_cast<uint64_t>(line), h);
}

namespace {

struct Draw {
  std::vector<int32_t> tokens;
  double logprob = 0;
  bool done = false;
};

struct Live {
  int64_t index = 0;    // in the caller's input
  int64_t max_out = 0;  // tokens before </s> at most
  const SearchRequest* req = nullptr;
  uint64_t key = 0;  // the draws' seed
  std::vector<Draw> draws;
};

// Each request framed into its row of batch (B x S) and its live state in
// live; returns the longest output any may take.
int64_t start_requests(const std::vector<SearchRequest>& requests, const ModelConfig& cfg,
                       const SearchOptions& opts, int64_t N, int64_t S,
                       std::vector<int32_t>& batch, std::vector<Live>& live) {
  int64_t longest = 0;
  for (size_t b = 0; b < requests.size(); ++b) {
    const SearchRequest& req = requests[b];
    if (!req.constraints.empty()) throw InputError("constraints need beam search, not {sampling}");
    frame_source(req.src, cfg, batch.data() + static_cast<int64_t>(b) * S);
    Live& s = live[b];
    s.index = static_cast<int64_t>(b);
    s.req = &req;
    uint64_t h = mix_seed(opts.seed, req.sample_key);
    for (int32_t t : req.src) h = mix_seed(h, static_cast<uint64_t>(t));
    s.key = h;
    const double len = std::min<double>(opts.max_len_a * static_cast<double>(req.src.size()) +
                                            opts.max_len_b + static_cast<double>(req.prefix.size()),
                                        static_cast<double>(cfg.max_positions - 1));
    s.max_out = std::max<int64_t>(static_cast<int64_t>(len), 0);
    if (static_cast<int64_t>(req.prefix.size()) > s.max_out)
      throw InputError("a prefix of " + std::to_string(req.prefix.size()) +
                       " tokens exceeds the length limit of " + std::to_string(s.max_out));
    s.draws.assign(N, Draw());
    longest = std::max(longest, s.max_out);
  }
  return longest;
}

// This step's draws of sentence s (rows j * N to j * N + N - 1 of ids and
// lp) added to its samples; whether every sample has ended.
bool add_draws(Live& s, size_t j, int64_t N, const std::vector<int32_t>& ids,
               const std::vector<float>& lp, int32_t eos) {
  bool all_done = true;
  for (int64_t n = 0; n < N; ++n) {
    Draw& d = s.draws[n];
    const size_t i = j * N + n;
    if (!d.done) {
      d.logprob += lp[i];
      if (ids[i] == eos)
        d.done = true;
      else
        d.tokens.push_back(ids[i]);
    }
    all_done &= d.done;
  }
  return all_done;
}

void finish(Live& s, const SearchOptions& opts, std::vector<Hypothesis>& out) {
  for (Draw& d : s.draws) {
    const double score = d.logprob / length_penalty(static_cast<int64_t>(d.tokens.size()) + 1, opts);
    out.push_back({std::move(d.tokens), d.logprob, score, true});
  }
}

}  // namespace

std::vector<std::vector<Hypothesis>> sample(const Decodable& model,
                                            const std::vector<SearchRequest>& requests,
                                            const SearchOptions& opts, DecodeState& st) {
  validate(opts);
  const ModelConfig& cfg = model.config();
  const int64_t B = static_cast<int64_t>(requests.size()), N = std::max(1, opts.n_best);
  std::vector<std::vector<Hypothesis>> results(requests.size());
  if (requests.empty()) return results;
  int64_t S = 0;
  for (const auto& r : requests) S = std::max<int64_t>(S, cfg.source_tokens(r.src.size()));
  if (S > cfg.max_positions)
    throw InputError("source of " + std::to_string(S) + " tokens exceeds max_positions");
  std::vector<int32_t> batch(B * S, kNoToken);
  std::vector<Live> live(requests.size());
  const int64_t longest = start_requests(requests, cfg, opts, N, S, batch, live);
  st.out.vocab.clear();  // samples are drawn from the whole vocabulary
  st.out.own_columns.clear();
  model.start_decoding(batch.data(), B, S, N, longest + 1, st);
  const int32_t eos = cfg.eos_id;
  const std::vector<int32_t> never = cfg.never_output();
  const int64_t top_k = opts.sampling == "topk" ? opts.sampling_k : 0;
  const float top_p = opts.sampling == "topp" ? opts.sampling_p : 1.f;

  std::vector<int32_t> tokens(B, cfg.start_token()), next_tokens, ids, forced;
  std::vector<int64_t> rows, keep, reorder_rows;
  std::vector<double> u;
  std::vector<float> lp;
  std::vector<Live> next;
  for (int64_t t = 0; !live.empty(); ++t) {
    throw_if_stopped(opts.stop);
    const Tensor& logits = model.step(st, tokens.data());
    const int64_t beam = st.beam;  // 1 at the first step, then N
    rows.clear(), u.clear(), forced.clear();
    for (size_t j = 0; j < live.size(); ++j)
      for (int64_t n = 0; n < N; ++n) {
        const Live& s = live[j];
        rows.push_back(static_cast<int64_t>(j) * beam + (beam == 1 ? 0 : n));
        const uint64_t r = mix_seed(mix_seed(s.key, static_cast<uint64_t>(n)), t);
        u.push_back(static_cast<double>(r >> 11) * 0x1.0p-53);
        forced.push_back(t < static_cast<int64_t>(s.req->prefix.size()) ? s.req->prefix[t]
                         : t >= s.max_out || s.draws[n].done            ? eos
                                                                        : -1);
      }
    ops::sample_tokens(logits, rows, opts.temperature, top_k, top_p, u, forced, never, ids, lp);
    for (size_t j = 0; j < live.size(); ++j)  // given tokens are not predicted
      if (t < live[j].req->given)
        for (int64_t n = 0; n < N; ++n) lp[j * N + n] = 0.f;
    next.clear(), keep.clear(), reorder_rows.clear(), next_tokens.clear();
    for (size_t j = 0; j < live.size(); ++j) {
      Live& s = live[j];
      if (add_draws(s, j, N, ids, lp, eos)) {
        finish(s, opts, results[s.index]);
        continue;
      }
      keep.push_back(static_cast<int64_t>(j));
      for (int64_t n = 0; n < N; ++n) {
        reorder_rows.push_back(static_cast<int64_t>(j) * beam + (beam == 1 ? 0 : n));
        next_tokens.push_back(s.draws[n].done ? eos : ids[j * N + n]);
      }
      next.push_back(std::move(s));
    }
    if (next.empty()) break;
    model.reorder(st, keep, reorder_rows, N);
    live.swap(next);
    tokens.swap(next_tokens);
  }
  return results;
}

}  // namespace nmt
