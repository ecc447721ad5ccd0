#include "decode/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace nmt {

double length_penalty(int64_t length, const SearchOptions& opts) {
  if (opts.length_norm) return static_cast<double>(std::max<int64_t>(length, 1));
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, opts.alpha);
}

void validate(const SearchOptions& o) {
  auto in = [](double x, double lo, double hi) { return x >= lo && x <= hi; };  // false for NaN
  auto fail = [](const char* name, const std::string& range, double x) {
    std::ostringstream v;
    v << x;
    throw InputError(std::string(name) + ": expected a number " + range + ", got " + v.str());
  };
  if (!in(o.beam, 1, 1024)) fail("--beam", "from 1 to 1024", o.beam);
  if (!in(o.n_best, 1, 1024)) fail("--n-best", "from 1 to 1024", o.n_best);
  if (!in(o.alpha, 0, 10)) fail("--alpha", "from 0 to 10", o.alpha);
  if (!in(o.max_len_a, 0, 100)) fail("--max-length-a", "from 0 to 100", o.max_len_a);
  if (!in(o.max_len_b, 0, 100000)) fail("--max-length-b", "from 0 to 100000", o.max_len_b);
  if (o.force_length < 0) fail("force_length", ">= 0", o.force_length);
}

namespace {

struct Candidate {
  double logprob;
  int32_t parent;  // live hypothesis index within the sentence
  int32_t token;
};

struct Finished {
  int64_t step;    // step at which </s> was chosen
  int32_t parent;  // live index at step - 1 (ignored at step 0)
  double logprob;
  double score;
};

// Per-sentence search state. Token history is kept as back-pointers so a
// step appends K entries instead of copying every hypothesis.
struct Sentence {
  int64_t index = 0;              // position in the caller's input
  int64_t max_out = 0;            // longest output, </s> excluded
  std::vector<int32_t> tok, par;  // (step * K + k)
  std::vector<double> live_lp;
  std::vector<Finished> fin;
};

std::vector<int32_t> backtrack(const Sentence& s, int64_t K, int64_t step, int32_t k) {
  std::vector<int32_t> out(static_cast<size_t>(step));
  for (int64_t t = step - 1; t >= 0; --t) {
    out[static_cast<size_t>(t)] = s.tok[t * K + k];
    k = s.par[t * K + k];
  }
  return out;
}

}  // namespace

std::vector<std::vector<Hypothesis>> search(Transformer& model,
                                            const std::vector<std::vector<int32_t>>& src,
                                            const SearchOptions& opts, DecodeState& st) {
  validate(opts);
  const int64_t B = static_cast<int64_t>(src.size());
  std::vector<std::vector<Hypothesis>> results(B);
  if (B == 0) return results;
  const ModelConfig& cfg = model.config();
  const int64_t V = cfg.vocab_size;
  const int64_t K = std::max(1, opts.beam);
  if (2 * K > V)
    throw InputError("beam size " + std::to_string(K) + " is too large for the vocabulary");
  const int64_t n_best = std::min<int64_t>(std::max(1, opts.n_best), K);

  // Padded source batch, </s>-terminated.
  int64_t S = 0;
  for (const auto& s : src) S = std::max<int64_t>(S, s.size() + 1);
  if (S > cfg.max_positions)
    throw InputError("source of " + std::to_string(S) + " tokens exceeds max_positions");
  std::vector<int32_t> batch(B * S, kPad);
  std::vector<Sentence> live(B);
  int64_t longest = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::copy(src[b].begin(), src[b].end(), batch.begin() + b * S);
    batch[b * S + src[b].size()] = kEos;
    Sentence& s = live[b];
    s.index = b;
    // In double and clamped before the conversion: validate() bounds a and b,
    // and the model's positions bound the result.
    const double len =
        std::min<double>(opts.max_len_a * static_cast<double>(src[b].size()) + opts.max_len_b,
                         static_cast<double>(cfg.max_positions - 1));
    s.max_out = static_cast<int64_t>(len);
    if (opts.force_length > 0)
      s.max_out = std::min<int64_t>(opts.force_length, cfg.max_positions - 1);
    s.max_out = std::max<int64_t>(s.max_out, 0);
    s.tok.reserve((s.max_out + 1) * K);
    s.par.reserve((s.max_out + 1) * K);
    s.live_lp.assign(1, 0.0);
    longest = std::max(longest, s.max_out);
  }
  model.start_decoding(batch.data(), B, S, K, longest + 1, st);

  std::vector<int32_t> tokens(B, kBos);
  // Buffers reused across steps: the loop allocates only when a sentence
  // finishes (its hypotheses are copied out).
  std::vector<Candidate> cands, chosen;
  cands.reserve(4 * K * K);
  chosen.reserve(K);
  std::vector<int64_t> keep, rows;
  std::vector<int32_t> next_tokens;
  std::vector<Sentence> next_live;
  Tensor logp;
  const double neg_inf = -std::numeric_limits<double>::infinity();

  for (int64_t t = 0; !live.empty(); ++t) {
    model.step(st, tokens.data(), logp);
    const int64_t beam = st.beam;
    keep.clear();
    rows.clear();
    next_tokens.clear();
    next_live.clear();
    for (size_t j = 0; j < live.size(); ++j) {
      Sentence& s = live[j];
      const bool only_eos = t >= s.max_out;
      const bool no_eos = opts.force_length > 0 && t < s.max_out;
      // Top 2K candidates over this sentence's hypotheses: with at most K
      // of them </s>, at least K remain to continue.
      cands.clear();
      for (int64_t k = 0; k < beam; ++k) {
        const float* lp = logp.data() + (j * beam + k) * V;
        const double base = s.live_lp[k];
        if (only_eos) {
          cands.push_back({base + lp[kEos], static_cast<int32_t>(k), kEos});
          continue;
        }
        for (int64_t v = 0; v < V; ++v) {
          if ((no_eos && v == kEos) || v == kPad || v == kBos) continue;
          const double score = base + lp[v];
          if (static_cast<int64_t>(cands.size()) == 2 * K * (k + 1) &&
              score <= cands.back().logprob)
            continue;
          // Insertion into the small sorted list of this hypothesis.
          Candidate c{score, static_cast<int32_t>(k), static_cast<int32_t>(v)};
          auto begin = cands.begin() + 2 * K * k;
          auto pos = std::upper_bound(
              begin, cands.end(), c,
              [](const Candidate& a, const Candidate& b) { return a.logprob > b.logprob; });
          cands.insert(pos, c);
          if (static_cast<int64_t>(cands.size()) > 2 * K * (k + 1)) cands.pop_back();
        }
      }
      std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
        return a.logprob > b.logprob;
      });

      chosen.clear();
      for (const Candidate& c : cands) {
        if (static_cast<int64_t>(chosen.size()) == K) break;
        if (c.token == kEos) {
          s.fin.push_back({t, c.parent, c.logprob, c.logprob / length_penalty(t + 1, opts)});
        } else {
          chosen.push_back(c);
        }
      }
      // Done once K hypotheses have finished and no live one scores better
      // than the worst of the best K finished at its current length.
      bool done = chosen.empty();
      if (!done && static_cast<int64_t>(s.fin.size()) >= K) {
        std::partial_sort(s.fin.begin(), s.fin.begin() + K, s.fin.end(),
                          [](const Finished& a, const Finished& b) { return a.score > b.score; });
        const double worst = s.fin[K - 1].score;
        const double best_live = chosen.front().logprob / length_penalty(t + 1, opts);
        done = best_live <= worst;
      }
      if (done) {
        std::stable_sort(s.fin.begin(), s.fin.end(),
                         [](const Finished& a, const Finished& b) { return a.score > b.score; });
        auto& out = results[s.index];
        for (int64_t i = 0; i < n_best && i < static_cast<int64_t>(s.fin.size()); ++i) {
          const Finished& f = s.fin[i];
          out.push_back({backtrack(s, K, f.step, f.parent), f.logprob, f.score});
        }
        continue;
      }
      // Pad the beam to K (only possible with a tiny vocabulary).
      while (static_cast<int64_t>(chosen.size()) < K) {
        Candidate c = chosen.back();
        c.logprob = neg_inf;
        chosen.push_back(c);
      }
      keep.push_back(static_cast<int64_t>(j));
      s.live_lp.resize(K);
      for (int64_t k = 0; k < K; ++k) {
        s.tok.push_back(chosen[k].token);
        s.par.push_back(chosen[k].parent);
        s.live_lp[k] = chosen[k].logprob;
        rows.push_back(static_cast<int64_t>(j) * beam + chosen[k].parent);
        next_tokens.push_back(chosen[k].token);
      }
      next_live.push_back(std::move(s));
    }
    if (next_live.empty()) break;
    model.reorder(st, keep, rows, K);
    live.swap(next_live);
    tokens.swap(next_tokens);
  }
  return results;
}

}  // namespace nmt
