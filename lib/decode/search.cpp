#include "decode/search.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "model/shortlist.h"
#include "ops/ops.h"

namespace nmt {

double length_penalty(int64_t length, const SearchOptions& opts) {
  if (opts.length_norm) return static_cast<double>(std::max<int64_t>(length, 1));
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, opts.alpha);
}

namespace {

// The sources framed as the model's are (</s>-terminated), padded to the
// widest, which it returns.
int64_t frame_sources(const std::vector<const SearchRequest*>& reqs, const ModelConfig& cfg,
                      std::vector<int32_t>& out) {
  int64_t S = 0;
  for (const SearchRequest* r : reqs) S = std::max<int64_t>(S, cfg.source_tokens(r->src.size()));
  if (S > cfg.max_positions)
    throw InputError("source of " + std::to_string(S) + " tokens exceeds max_positions");
  out.assign(reqs.size() * static_cast<size_t>(S), kNoToken);
  for (size_t i = 0; i < reqs.size(); ++i) frame_source(reqs[i]->src, cfg, out.data() + i * S);
  return S;
}

// Where a hypothesis stands with its sentence's constraints.
struct Progress {
  uint64_t done = 0;  // bit i: constraint i met
  int32_t cur = -1;   // constraint being followed, -1: none
  int32_t pos = 0;    // its tokens produced so far
  int32_t met = 0;    // constraint tokens met (done ones in full, plus pos): the bank
};

struct Candidate {
  double logprob;
  int32_t parent;  // live hypothesis index within the sentence
  int32_t token;
  Progress prog;  // after the token (constrained sentences only)
};

struct Finished {
  int64_t step;    // step at which </s> was chosen
  int32_t parent;  // live index at step - 1 (ignored at step 0)
  double logprob;
  double score;
  bool met = true;  // every constraint met
};

// Per-sentence search state. Token history is kept as back-pointers so a
// step appends K entries instead of copying every hypothesis.
struct Sentence {
  std::vector<Hypothesis>* out = nullptr;  // where its hypotheses go
  int64_t t0 = 0;       // the batch's step at which it joined
  int64_t max_out = 0;  // longest output, </s> excluded
  const SearchRequest* req = nullptr;
  int32_t constraint_tokens = 0;  // all constraints' tokens: the top bank
  std::vector<int32_t> tok, par;  // (step * K + k)
  std::vector<double> live_lp;
  std::vector<Progress> prog;  // per live hypothesis (constrained sentences)
  std::vector<Finished> fin;

  bool forcing(int64_t t) const { return t < static_cast<int64_t>(req->prefix.size()); }
  bool constrained() const { return constraint_tokens > 0; }
  bool all_met(const Progress& p) const { return p.met == constraint_tokens; }
};

// The constraint state after `token`: it continues the constraint being
// followed, or abandons it (its tokens no longer count) and may start one.
Progress advance_progress(const Sentence& s, Progress p, int32_t token) {
  const auto& cons = s.req->constraints;
  if (p.cur >= 0) {
    const auto& c = cons[p.cur];
    if (token == c[p.pos]) {
      ++p.met;
      if (++p.pos == static_cast<int32_t>(c.size())) p.done |= uint64_t{1} << p.cur, p.cur = -1;
      if (p.cur < 0) p.pos = 0;
      return p;
    }
    p.met -= p.pos, p.cur = -1, p.pos = 0;
  }
  for (size_t i = 0; i < cons.size(); ++i) {
    if ((p.done >> i & 1) || cons[i][0] != token) continue;
    ++p.met;
    if (cons[i].size() == 1)
      p.done |= uint64_t{1} << i;
    else
      p.cur = static_cast<int32_t>(i), p.pos = 1;
    break;
  }
  return p;
}

std::vector<int32_t> backtrack(const Sentence& s, int64_t K, int64_t step, int32_t k) {
  std::vector<int32_t> out(static_cast<size_t>(step));
  for (int64_t t = step - 1; t >= 0; --t) {
    out[static_cast<size_t>(t)] = s.tok[t * K + k];
    k = s.par[t * K + k];
  }
  return out;
}

// One search over a batch: the sentences still live, their back-pointer
// histories, and the buffers every step reuses (a step allocates only when
// a sentence finishes and its hypotheses are copied out).
class BeamSearch {
 public:
  BeamSearch(const Decodable& model, const SearchOptions& opts, DecodeState& st)
      : model_(model),
        opts_(opts),
        st_(st),
        K_(std::max(1, opts.beam)),
        eos_(model.config().eos_id),
        never_(model.config().never_output()) {}

  // t is the batch's step; a sentence's own step is t - t0.
  void run(SearchFeed& feed) {
    reqs_.clear(), outs_.clear();
    feed.first(reqs_, outs_);
    if (reqs_.empty()) return;
    feed_ = &feed;
    start();
    for (int64_t t = 0; !live_.empty(); ++t) {
      throw_if_stopped(opts_.stop);
      candidates_per_row(model_.step(st_, tokens_.data()), t);
      keep_.clear(), rows_.clear(), next_tokens_.clear(), next_live_.clear();
      for (size_t j = 0; j < live_.size(); ++j) advance(live_[j], j, t);
      if (next_live_.empty()) break;
      fill_holes();
      model_.reorder(st_, keep_, rows_, K_);
      live_.swap(next_live_);
      tokens_.swap(next_tokens_);
      if (joining_) join(t + 1);
    }
  }

 private:
  int64_t output_limit(const SearchRequest& req) const;
  Sentence make_sentence(const SearchRequest& req, std::vector<Hypothesis>* out, int64_t t0) const;
  void start();
  void join(int64_t t);
  void set_output_vocab();
  void candidates_per_row(const Tensor& logits, int64_t t);
  void advance(Sentence& s, size_t j, int64_t t);
  void gather(const Sentence& s, size_t j, int64_t t);
  void choose(Sentence& s, int64_t t);
  void choose_by_banks(Sentence& s, int64_t t);
  void finish(Sentence& s);
  void fill_holes();

  const Decodable& model_;
  const SearchOptions& opts_;
  DecodeState& st_;
  const int64_t K_;
  const int32_t eos_;                 // the model's </s>
  const std::vector<int32_t> never_;  // ids the search never outputs
  int64_t k2_ = 0;  // candidates per hypothesis: with at most K of them </s>, K remain
  SearchFeed* feed_ = nullptr;
  std::vector<const SearchRequest*> reqs_;  // sentences being started or joined
  std::vector<std::vector<Hypothesis>*> outs_;
  int64_t S_ = 0;        // the batch's source width
  int64_t longest_ = 0;  // the longest output its caches hold
  int64_t cap_ = 0;      // sentences it keeps live
  bool joining_ = false;
  std::function<bool(const SearchRequest&)> fits_;
  std::vector<int32_t> join_src_;
  std::vector<Sentence> live_, next_live_;
  std::vector<int32_t> tokens_, next_tokens_, banned_, top_idx_;
  std::vector<int64_t> keep_, rows_, slot_of_;
  std::vector<char> placed_;
  std::vector<int64_t> pos_, keep_tmp_, rows_tmp_;
  std::vector<int32_t> tokens_tmp_;
  std::vector<Sentence> live_tmp_;
  std::vector<double> base_, top_val_;
  std::vector<float> col_lp_;  // per row: </s>, then forced or constraint tokens
  std::vector<int32_t> cols_;
  int64_t n_cols_ = 1;
  std::vector<int32_t> column_of_;  // with a shortlist: id -> logits column, -1 if absent
  std::vector<int32_t> banned_cols_, cols_mapped_;
  std::vector<Candidate> cands_, chosen_;
  std::vector<int32_t> avail_, quota_, taken_;
  std::vector<Progress> next_prog_;
};

// The longest output a request may have, </s> excluded: in double and
// clamped before the conversion (validate() bounds a and b, and the model's
// positions bound the result). A prefix and constraints lengthen the limit
// by their tokens.
int64_t BeamSearch::output_limit(const SearchRequest& req) const {
  const ModelConfig& cfg = model_.config();
  double extra = static_cast<double>(req.prefix.size());
  for (const auto& c : req.constraints) extra += static_cast<double>(c.size());
  const double len = std::min<double>(
      opts_.max_len_a * static_cast<double>(req.src.size()) + opts_.max_len_b + extra,
      static_cast<double>(cfg.max_positions - 1));
  int64_t out = static_cast<int64_t>(len);
  return std::max<int64_t>(out, 0);
}

Sentence BeamSearch::make_sentence(const SearchRequest& req, std::vector<Hypothesis>* out,
                                   int64_t t0) const {
  if (req.constraints.size() > kMaxConstraints)
    throw InputError("more than " + std::to_string(kMaxConstraints) + " constraints");
  Sentence s;
  s.out = out;
  s.t0 = t0;
  s.req = &req;
  for (const auto& c : req.constraints) {
    if (c.empty()) throw InputError("an empty constraint");
    s.constraint_tokens += static_cast<int32_t>(c.size());
  }
  s.max_out = output_limit(req);
  if (static_cast<int64_t>(req.prefix.size()) > s.max_out)
    throw InputError("a prefix of " + std::to_string(req.prefix.size()) +
                     " tokens exceeds the length limit of " + std::to_string(s.max_out));
  s.prog.assign(1, Progress());
  s.tok.reserve((s.max_out + 1) * K_);
  s.par.reserve((s.max_out + 1) * K_);
  s.live_lp.assign(1, 0.0);
  return s;
}

void BeamSearch::start() {
  const ModelConfig& cfg = model_.config();
  const int64_t B = static_cast<int64_t>(reqs_.size()), V = cfg.vocab_size;
  if (2 * K_ > V)
    throw InputError("beam size " + std::to_string(K_) + " is too large for the vocabulary");
  std::vector<int32_t> batch;
  const int64_t S = frame_sources(reqs_, cfg, batch);
  live_.clear();
  longest_ = 0;
  for (int64_t b = 0; b < B; ++b) {
    live_.push_back(make_sentence(*reqs_[b], outs_[b], 0));
    longest_ = std::max(longest_, live_.back().max_out);
  }
  if (opts_.shortlist && opts_.shortlist->tgt_vocab() != V)
    throw InputError("the shortlist is for a vocabulary of " +
                     std::to_string(opts_.shortlist->tgt_vocab()) + " pieces, the model's has " +
                     std::to_string(V));
  set_output_vocab();
  // Continuous batching: sentences join as others finish, up to the feed's
  // capacity for this width (or the first batch's size), if they fit the
  // batch's width and its caches.
  S_ = S;
  const int64_t room = model_.can_add_sentences() ? feed_->capacity(S) : 0;
  joining_ = room > 0;
  cap_ = std::max(B, room);
  // Sources at least half the batch's width: the batch holds as many
  // sentences as its widest allows, and much shorter ones run better in a
  // batch of their own, which holds more of them.
  fits_ = [this](const SearchRequest& r) {
    const int64_t width = model_.config().source_tokens(r.src.size());
    return width <= S_ && 2 * width > S_ && output_limit(r) <= longest_;
  };
  model_.start_decoding(batch.data(), B, S, K_, longest_ + 1, st_, cap_);
  tokens_.assign(B, cfg.start_token());
  k2_ = 2 * K_;
  cands_.reserve(2 * K_ * K_);
  chosen_.reserve(K_);
}

// More sentences into the places finished ones left, once a quarter of the
// batch is free: each joins with K rows at its own step 0, of which only
// the first is searched (as a batch's first step searches one row per
// sentence), so its search is the one it would have had from the start.
void BeamSearch::join(int64_t t) {
  const int64_t free = cap_ - static_cast<int64_t>(live_.size());
  if (free < std::max<int64_t>(1, cap_ / 4)) return;
  reqs_.clear(), outs_.clear();
  feed_->more(free, fits_, reqs_, outs_);
  const int64_t n = static_cast<int64_t>(reqs_.size());
  if (n < free) joining_ = false;  // the feed is empty, or its next one does not fit
  if (n == 0) return;
  const ModelConfig& cfg = model_.config();
  const int64_t S = frame_sources(reqs_, cfg, join_src_);
  for (int64_t i = 0; i < n; ++i) {
    Sentence s = make_sentence(*reqs_[i], outs_[i], t);
    s.live_lp.assign(K_, 0.0);
    live_.push_back(std::move(s));
    tokens_.insert(tokens_.end(), K_, cfg.start_token());
  }
  set_output_vocab();
  model_.add_sentences(join_src_.data(), n, S, st_);
}

// With a shortlist, the output columns: the union of the live sentences'
// pieces (or, when it is most of the vocabulary, all of them), and each
// sentence's own pieces among them, whatever else its batch holds.
void BeamSearch::set_output_vocab() {
  st_.out.vocab.clear();
  column_of_.clear();
  st_.out.own_columns.clear();
  if (!opts_.shortlist) return;
  const int64_t B = static_cast<int64_t>(live_.size()), V = model_.config().vocab_size;
  std::vector<const std::vector<int32_t>*> sources;
  std::vector<int32_t> forced{eos_};
  for (const Sentence& s : live_) {
    sources.push_back(&s.req->src);
    forced.insert(forced.end(), s.req->prefix.begin(), s.req->prefix.end());
    for (const auto& c : s.req->constraints) forced.insert(forced.end(), c.begin(), c.end());
  }
  std::vector<uint8_t> mark;
  opts_.shortlist->batch_vocab(sources, forced, 2 * K_, st_.out.vocab, mark);
  if (!st_.out.vocab.empty()) {
    column_of_.assign(V, -1);
    for (size_t c = 0; c < st_.out.vocab.size(); ++c)
      column_of_[st_.out.vocab[c]] = static_cast<int32_t>(c);
  }
  const int64_t W = st_.out.vocab.empty() ? V : static_cast<int64_t>(st_.out.vocab.size());
  ops::ColumnLists& own = st_.out.own_columns;
  std::vector<uint8_t> in(static_cast<size_t>(W));
  for (int64_t b = 0; b < B; ++b) {
    const SearchRequest& req = *live_[b].req;
    std::fill(in.begin(), in.end(), 0);
    const auto allow = [&](int32_t t) { in[column_of_.empty() ? t : column_of_[t]] = 1; };
    opts_.shortlist->for_each_allowed(req.src, allow);
    allow(eos_);
    for (int32_t t : req.prefix) allow(t);
    for (const auto& c : req.constraints)
      for (int32_t t : c) allow(t);
    for (int64_t c = 0; c < W; ++c)
      if (in[c]) own.cols.push_back(static_cast<int32_t>(c));
    own.offsets.push_back(static_cast<int64_t>(own.cols.size()));
  }
}

// The best 2K continuations of every live hypothesis, scored base + log p,
// and every row's </s> log-probability (for sentences at their length limit).
void BeamSearch::candidates_per_row(const Tensor& logits, int64_t t) {
  const int64_t rows = st_.rows(), beam = st_.beam;
  base_.resize(rows);
  for (size_t j = 0; j < live_.size(); ++j)
    for (int64_t k = 0; k < beam; ++k) base_[j * beam + k] = live_[j].live_lp[k];
  banned_.assign(never_.begin(), never_.end());
  // Chosen columns: </s>, then a forced prefix token or the constraint
  // tokens each hypothesis may take next.
  n_cols_ = 1;
  for (const Sentence& s : live_)
    if (s.forcing(t - s.t0))
      n_cols_ = std::max<int64_t>(n_cols_, 2);
    else if (s.constrained())
      n_cols_ = std::max<int64_t>(n_cols_, 1 + static_cast<int64_t>(s.req->constraints.size()));
  cols_.assign(rows * n_cols_, -1);
  for (size_t j = 0; j < live_.size(); ++j) {
    const Sentence& s = live_[j];
    for (int64_t k = 0; k < beam; ++k) {
      int32_t* c = &cols_[(j * beam + k) * n_cols_];
      c[0] = eos_;
      if (s.forcing(t - s.t0)) {
        c[1] = s.req->prefix[t - s.t0];
      } else if (s.constrained() && k < static_cast<int64_t>(s.prog.size())) {
        const Progress& p = s.prog[k];
        const auto& cons = s.req->constraints;
        if (p.cur >= 0) {
          c[1] = cons[p.cur][p.pos];
        } else {
          for (size_t i = 0; i < cons.size(); ++i)
            if (!(p.done >> i & 1)) c[1 + i] = cons[i][0];
        }
      }
    }
  }
  // A shortlist: each sentence's beam searches its own columns alone.
  const ops::ColumnLists* own = st_.out.own_columns.size() > 0 ? &st_.out.own_columns : nullptr;
  if (column_of_.empty())
    return ops::topk_log_softmax(logits, base_, k2_, banned_, cols_, n_cols_, top_val_, top_idx_,
                                 col_lp_, own, beam);
  // Shortlisted: the logits' columns are st_.out.vocab's ids (ascending, so ties
  // still go to the lower id). Every id in cols_ has a column
  // (set_output_vocab put them in the batch's vocabulary); banned ids
  // without one need no ban.
  banned_cols_.clear();
  for (int32_t id : banned_)
    if (column_of_[id] >= 0) banned_cols_.push_back(column_of_[id]);
  cols_mapped_.resize(cols_.size());
  for (size_t i = 0; i < cols_.size(); ++i) cols_mapped_[i] = cols_[i] < 0 ? -1 : column_of_[cols_[i]];
  ops::topk_log_softmax(logits, base_, k2_, banned_cols_, cols_mapped_, n_cols_, top_val_, top_idx_,
                        col_lp_, own, beam);
  for (int32_t& c : top_idx_)
    if (c >= 0) c = st_.out.vocab[c];
}

// Every continuation considered for sentence j at step t, best first.
void BeamSearch::gather(const Sentence& s, size_t j, int64_t t) {
  const int64_t beam = st_.beam;
  // A sentence's first step searches its first row alone (its others, where
  // it joined a running batch, repeat it).
  const int64_t hyps = t == 0 ? 1 : beam;
  cands_.clear();
  for (int64_t k = 0; k < hyps; ++k) {
    const int64_t r = static_cast<int64_t>(j) * beam + k;
    const int32_t parent = static_cast<int32_t>(k);
    const float* lp = &col_lp_[r * n_cols_];
    const int32_t* col = &cols_[r * n_cols_];
    if (s.forcing(t)) {
      cands_.push_back({s.live_lp[k] + (t < s.req->given ? 0.f : lp[1]), parent, col[1], {}});
    } else if (t >= s.max_out) {
      cands_.push_back({s.live_lp[k] + lp[0], parent, eos_, {}});
    } else {
      const int32_t* top = &top_idx_[r * k2_];
      for (int64_t c = 0; c < k2_ && top[c] >= 0; ++c)
        cands_.push_back({top_val_[r * k2_ + c], parent, top[c], {}});
      // Constraint tokens outside the top 2K.
      for (int64_t c = 1; c < n_cols_; ++c)
        if (col[c] >= 0 && std::find(top, top + k2_, col[c]) == top + k2_)
          cands_.push_back({s.live_lp[k] + lp[c], parent, col[c], {}});
    }
  }
  if (s.constrained())
    for (Candidate& c : cands_)
      c.prog = c.token == eos_ ? s.prog[c.parent] : advance_progress(s, s.prog[c.parent], c.token);
  std::stable_sort(cands_.begin(), cands_.end(),
                   [](const Candidate& a, const Candidate& b) { return a.logprob > b.logprob; });
}

// The K best continuations; </s> among them finishes a hypothesis.
void BeamSearch::choose(Sentence& s, int64_t t) {
  chosen_.clear();
  for (const Candidate& c : cands_) {
    if (static_cast<int64_t>(chosen_.size()) == K_) break;
    if (c.token == eos_)
      s.fin.push_back({t, c.parent, c.logprob, c.logprob / length_penalty(t + 1, opts_)});
    else
      chosen_.push_back(c);
  }
}

// How far ahead the stopping test looks. The rule before it waited for K
// finished hypotheses and compared the best live one, at its current
// length, with the K-th. With the Multi30k transformer-small, 4 gives
// byte-identical translations and scores on val and test_2016_flickr
// (2014 lines) at beam 4, and on test_2016_flickr at beam 1 and 8 too,
// while beam 4 runs ~14% faster; 2 changed 1 line of val, and 0 changed
// 104 of the 2014 (BLEU -0.10 and -0.12). Chosen on val.
constexpr int64_t kLookahead = 4;

// Dynamic beam allocation: bank b holds hypotheses with b constraint tokens
// met. The K slots are dealt out one at a time, round after round from the
// top bank down, to banks with candidates left, so the banks share the beam
// evenly, a bank without enough candidates leaves its slots to the others,
// and with fewer slots than banks the banks nearest completion are served.
// Each bank takes its best candidates. </s> counts only from the top bank,
// except at the length limit, where an unmet ending is kept as a fallback.
void BeamSearch::choose_by_banks(Sentence& s, int64_t t) {
  const int32_t top = s.constraint_tokens, banks = top + 1;
  avail_.assign(banks, 0);
  quota_.assign(banks, 0);
  taken_.assign(banks, 0);
  for (const Candidate& c : cands_)
    if (c.token != eos_) ++avail_[c.prog.met];
  for (int64_t dealt = 0, before = -1; dealt < K_ && dealt != before;) {
    before = dealt;
    for (int32_t b = top; b >= 0 && dealt < K_; --b)
      if (quota_[b] < avail_[b]) ++quota_[b], ++dealt;
  }
  chosen_.clear();
  int64_t ahead_in_top = 0;  // non-</s> candidates of the top bank so far
  for (const Candidate& c : cands_) {
    const int32_t b = c.prog.met;
    if (c.token == eos_) {
      const bool met = s.all_met(c.prog);
      if ((met && ahead_in_top < K_) || t >= s.max_out)
        s.fin.push_back({t, c.parent, c.logprob, c.logprob / length_penalty(t + 1, opts_), met});
      continue;
    }
    if (b == top) ++ahead_in_top;
    if (taken_[b] < quota_[b]) ++taken_[b], chosen_.push_back(c);
  }
  std::stable_sort(chosen_.begin(), chosen_.end(),
                   [](const Candidate& a, const Candidate& b) { return a.logprob > b.logprob; });
}

void BeamSearch::advance(Sentence& s, size_t j, int64_t step) {
  const int64_t beam = st_.beam, t = step - s.t0;  // the sentence's own step
  gather(s, j, t);
  if (s.constrained())
    choose_by_banks(s, t);
  else
    choose(s, t);
  // Done once the n_best best finished hypotheses score at least as well as
  // the best live one would if it ended within kLookahead more tokens at no
  // further cost (log-probabilities only fall, but the length penalty grows,
  // so a live hypothesis's score can still rise as it grows).
  bool done = chosen_.empty();
  const int64_t need = std::min<int64_t>(std::max(1, opts_.n_best), K_);
  if (!done && static_cast<int64_t>(s.fin.size()) >= need) {
    std::partial_sort(s.fin.begin(), s.fin.begin() + need, s.fin.end(),
                      [](const Finished& a, const Finished& b) { return a.score > b.score; });
    const int64_t horizon = std::min(t + 1 + kLookahead, s.max_out + 1);
    done = chosen_.front().logprob / length_penalty(horizon, opts_) <= s.fin[need - 1].score;
  }
  if (done) return finish(s);
  // Pad the beam to K (only possible with a tiny vocabulary).
  while (static_cast<int64_t>(chosen_.size()) < K_) {
    Candidate c = chosen_.back();
    c.logprob = -std::numeric_limits<double>::infinity();
    chosen_.push_back(c);
  }
  // Slot k takes the best child of hypothesis k where there is one, so that
  // its cached keys and values stay where they are (the reorder copies only
  // rows that move); the other children fill the free slots in score order.
  // Which slot holds a hypothesis changes nothing else.
  slot_of_.assign(K_, -1);
  placed_.assign(K_, 0);
  for (int64_t c = 0; c < K_; ++c) {
    const int32_t p = chosen_[c].parent;
    if (slot_of_[p] < 0) slot_of_[p] = c, placed_[c] = 1;
  }
  for (int64_t c = 0, free = 0; c < K_; ++c) {
    if (placed_[c]) continue;
    while (slot_of_[free] >= 0) ++free;
    slot_of_[free] = c;
  }
  keep_.push_back(static_cast<int64_t>(j));
  s.live_lp.resize(K_);
  if (s.constrained()) s.prog.resize(K_);
  for (int64_t k = 0; k < K_; ++k) {
    const Candidate& c = chosen_[slot_of_[k]];
    s.tok.push_back(c.token);
    s.par.push_back(c.parent);
    s.live_lp[k] = c.logprob;
    if (s.constrained()) s.prog[k] = c.prog;
    rows_.push_back(static_cast<int64_t>(j) * beam + c.parent);
    next_tokens_.push_back(c.token);
  }
  next_live_.push_back(std::move(s));
}

// Finished sentences leave holes in the batch. Rather than close them up,
// which moves every later sentence's rows (nearly all rows, as some sentence
// finishes at almost every step), the last sentences move into the holes
// and all others stay where their cached rows are.
void BeamSearch::fill_holes() {
  const int64_t n = static_cast<int64_t>(keep_.size());
  pos_.assign(n, -1);  // new position -> index into next_live_ (old order)
  for (int64_t i = 0; i < n; ++i)
    if (keep_[i] < n) pos_[keep_[i]] = i;
  bool identity = true;
  for (int64_t i = 0, q = 0; i < n; ++i) {
    if (keep_[i] < n) continue;
    while (pos_[q] >= 0) ++q;
    pos_[q] = i;
  }
  for (int64_t q = 0; q < n && identity; ++q) identity = pos_[q] == q;
  if (identity) return;
  live_tmp_.clear();
  keep_tmp_.clear(), rows_tmp_.clear(), tokens_tmp_.clear();
  for (int64_t q = 0; q < n; ++q) {
    const int64_t i = pos_[q];
    live_tmp_.push_back(std::move(next_live_[i]));
    keep_tmp_.push_back(keep_[i]);
    rows_tmp_.insert(rows_tmp_.end(), rows_.begin() + i * K_, rows_.begin() + (i + 1) * K_);
    tokens_tmp_.insert(tokens_tmp_.end(), next_tokens_.begin() + i * K_,
                       next_tokens_.begin() + (i + 1) * K_);
  }
  next_live_.swap(live_tmp_);
  keep_.swap(keep_tmp_), rows_.swap(rows_tmp_), next_tokens_.swap(tokens_tmp_);
}

void BeamSearch::finish(Sentence& s) {
  std::stable_sort(s.fin.begin(), s.fin.end(), [](const Finished& a, const Finished& b) {
    return a.met != b.met ? a.met : a.score > b.score;
  });
  const int64_t n_best = std::min<int64_t>(std::max(1, opts_.n_best), K_);
  auto& out = *s.out;
  for (int64_t i = 0; i < n_best && i < static_cast<int64_t>(s.fin.size()); ++i) {
    const Finished& f = s.fin[i];
    out.push_back({backtrack(s, K_, f.step, f.parent), f.logprob, f.score, f.met});
  }
}

// A batch given whole.
class AllAtOnce final : public SearchFeed {
 public:
  AllAtOnce(const std::vector<SearchRequest>& requests, std::vector<std::vector<Hypothesis>>& out)
      : requests_(requests), out_(out) {}
  void first(std::vector<const SearchRequest*>& reqs,
             std::vector<std::vector<Hypothesis>*>& outs) override {
    for (size_t i = 0; i < requests_.size(); ++i) {
      reqs.push_back(&requests_[i]);
      outs.push_back(&out_[i]);
    }
  }

 private:
  const std::vector<SearchRequest>& requests_;
  std::vector<std::vector<Hypothesis>>& out_;
};

}  // namespace

void search(const Decodable& model, SearchFeed& feed, const SearchOptions& opts,
            DecodeState& st) {
  validate(opts);
  if (opts.sampling.empty()) return BeamSearch(model, opts, st).run(feed);
  // Sampling keeps its batch.
  std::vector<const SearchRequest*> reqs;
  std::vector<std::vector<Hypothesis>*> outs;
  feed.first(reqs, outs);
  std::vector<SearchRequest> batch;
  for (const SearchRequest* r : reqs) batch.push_back(*r);
  auto samples = sample(model, batch, opts, st);
  for (size_t i = 0; i < outs.size(); ++i) *outs[i] = std::move(samples[i]);
}

std::vector<std::vector<Hypothesis>> search(const Decodable& model,
                                            const std::vector<SearchRequest>& requests,
                                            const SearchOptions& opts, DecodeState& st) {
  validate(opts);
  if (!opts.sampling.empty()) return sample(model, requests, opts, st);
  std::vector<std::vector<Hypothesis>> out(requests.size());
  AllAtOnce feed(requests, out);
  BeamSearch(model, opts, st).run(feed);
  return out;
}

std::vector<std::vector<Hypothesis>> search(const Decodable& model,
                                            const std::vector<std::vector<int32_t>>& src,
                                            const SearchOptions& opts, DecodeState& st) {
  std::vector<SearchRequest> requests(src.size());
  for (size_t i = 0; i < src.size(); ++i) requests[i].src = src[i];
  return search(model, requests, opts, st);
}

}  // namespace nmt
