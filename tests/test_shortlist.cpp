// Vocabulary shortlists: the table reaches every target piece of the pairs
// it was built from and ranks a piece's translation first; it survives the
// model file's bytes and refuses malformed ones; a shortlisted search equals
// a full-vocabulary search whose logits are masked by hand to each
// sentence's pieces, does not depend on the rest of its batch, and a model
// trained here translates exactly with it.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "capability.h"
#include "core/error.h"
#include "decode/ensemble.h"
#include "decode/search.h"
#include "model/quantise.h"
#include "model/shortlist.h"
#include "ops/ops.h"
#include "test_helpers.h"

using namespace nmt;
using namespace nmt::test;

namespace {

using Seqs = std::vector<std::vector<int32_t>>;

std::vector<const std::vector<int32_t>*> ptrs(const Seqs& s) {
  std::vector<const std::vector<int32_t>*> p;
  for (const auto& x : s) p.push_back(&x);
  return p;
}

std::set<int32_t> allowed(const Shortlist& sl, const std::vector<int32_t>& src) {
  std::set<int32_t> a;
  sl.for_each_allowed(src, [&](int32_t t) { a.insert(t); });
  return a;
}

// A "translation" corpus: each source piece s has its own target piece
// dict(s), and every target sentence also holds some of a few very frequent
// pieces (articles, punctuation), in a shuffled order.
void dictionary_corpus(int n, int V, uint32_t seed, Seqs& src, Seqs& tgt) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> len(2, 9), sym(4, V - 1), common(4, 7), coin(0, 2);
  src.assign(n, {}), tgt.assign(n, {});
  for (int i = 0; i < n; ++i) {
    for (int k = len(g); k > 0; --k) src[i].push_back(sym(g));
    for (int32_t s : src[i]) {
      tgt[i].push_back(4 + (s - 4 + 17) % (V - 4));  // dict(s)
      if (coin(g) == 0) tgt[i].push_back(common(g));
    }
    std::shuffle(tgt[i].begin(), tgt[i].end(), g);
  }
}

}  // namespace

TEST_CASE("a shortlist reaches every target piece of the pairs it was built from",
          "[shortlist]") {
  // Random pairs: no piece translates another, so the ranked lists alone
  // miss most pieces and the coverage pass must add them.
  const Seqs src = random_sequences(300, 1, 10, 40, 5), tgt = random_sequences(300, 1, 12, 50, 6);
  for (int per_source : {0, 1, 4})
    for (int frequent : {0, 6}) {
      ShortlistOptions o;
      o.per_source = per_source, o.frequent = frequent;
      const Shortlist sl = Shortlist::build(ptrs(src), ptrs(tgt), 40, 50, o);
      int64_t missing = 0;
      for (size_t i = 0; i < src.size(); ++i) {
        const auto a = allowed(sl, src[i]);
        for (int32_t t : tgt[i]) missing += !a.count(t);
      }
      INFO("per_source " << per_source << ", frequent " << frequent);
      CHECK(missing == 0);
      CHECK(sl.frequent().size() == static_cast<size_t>(frequent));
    }
}

TEST_CASE("a shortlist's default frequent pieces are an eighth of the target vocabulary",
          "[shortlist]") {
  const Seqs src = random_sequences(300, 1, 10, 40, 5), tgt = random_sequences(300, 1, 12, 50, 6);
  const Shortlist sl = Shortlist::build(ptrs(src), ptrs(tgt), 40, 50);
  CHECK(sl.options().per_source == 10);
  CHECK(sl.options().frequent == 6);  // 50 / 8, as stored and shown
  CHECK(sl.frequent().size() == 6);
  const Shortlist again = Shortlist::parse(sl.serialise(), 40, 50, "test");
  CHECK(again.options().frequent == 6);
  ShortlistOptions bad;
  bad.frequent = -2;
  CHECK_THROWS_AS(Shortlist::build(ptrs(src), ptrs(tgt), 40, 50, bad), InputError);
}

TEST_CASE("a shortlist ranks each source piece's translation first", "[shortlist]") {
  Seqs src, tgt;
  dictionary_corpus(2000, 120, 3, src, tgt);
  ShortlistOptions o;
  o.per_source = 1, o.frequent = 4;
  const Shortlist sl = Shortlist::build(ptrs(src), ptrs(tgt), 120, 120, o);
  // The frequent pieces are the four common ones.
  auto f = sl.frequent();
  std::sort(f.begin(), f.end());
  CHECK(f == std::vector<int32_t>{4, 5, 6, 7});
  std::map<int32_t, int> count;
  for (const auto& s : src)
    for (int32_t t : std::set<int32_t>(s.begin(), s.end())) ++count[t];
  int common = 0;
  for (const auto& [s, n] : count) {
    const std::vector<int32_t> list(sl.begin(s), sl.end(s));
    const int32_t dict = 4 + (s - 4 + 17) % 116;
    if (dict <= 7) continue;  // a frequent piece: in every batch, on no list
    INFO("source piece " << s << ", in " << n << " pairs");
    CHECK(std::count(list.begin(), list.end(), dict) == 1);
    // Seen often enough for co-occurrence to tell, dict(s) is the one
    // candidate, and the coverage pass had nothing to add.
    if (n >= 5) {
      ++common;
      CHECK(list == std::vector<int32_t>{dict});
    }
  }
  CHECK(common > 100);
}

TEST_CASE("a shortlist's bytes read back, and malformed ones are refused by name",
          "[shortlist]") {
  Seqs src, tgt;
  dictionary_corpus(300, 60, 4, src, tgt);
  const Shortlist sl = Shortlist::build(ptrs(src), ptrs(tgt), 60, 60);
  const std::string bytes = sl.serialise();
  const Shortlist back = Shortlist::parse(bytes, 60, 60, "m.nmt");
  CHECK(back.serialise() == bytes);
  CHECK(back.entries() == sl.entries());
  for (int32_t s = 0; s < 60; ++s)
    CHECK(std::vector<int32_t>(back.begin(s), back.end(s)) ==
          std::vector<int32_t>(sl.begin(s), sl.end(s)));

  auto refused = [&](std::string b, const char* why) {
    INFO(why);
    try {
      Shortlist::parse(b, 60, 60, "m.nmt");
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).rfind("m.nmt: ", 0) == 0);
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  };
  auto set_int = [](std::string b, size_t index, int32_t v) {
    std::memcpy(&b[4 * index], &v, 4);
    return b;
  };
  const size_t header = 8, offsets = header, targets = header + 61;
  refused(bytes.substr(0, bytes.size() - 1), "truncated");
  refused(bytes + std::string(4, '\0'), "trailing bytes");
  refused(set_int(bytes, 0, 7), "magic");
  refused(set_int(bytes, 1, 99), "version");
  refused(set_int(bytes, 3, 61), "target vocabulary size");
  refused(set_int(bytes, 7, static_cast<int32_t>(sl.entries() + 1)), "entry count");
  refused(set_int(bytes, offsets + 1, -1), "offset order");
  refused(set_int(bytes, targets, 60), "target id out of range");
  refused(set_int(bytes, bytes.size() / 4 - 1, 0), "frequency order not a permutation");
  CHECK_THROWS_AS(Shortlist::parse(bytes, 61, 60, "m.nmt"), InputError);
}

TEST_CASE("a table built from text the vocabulary does not know lets nothing through",
          "[shortlist]") {
  // Every token <unk> (1) on both sides: no candidates, and <unk> the one
  // frequent piece. A search restricted to it writes garbage.
  const Seqs unk_src = {{1, 1}, {1}}, unk_tgt = {{1, 1, 1}, {1}};
  const Shortlist none = Shortlist::build(ptrs(unk_src), ptrs(unk_tgt), 40, 40);
  CHECK(none.entries() == 0);
  CHECK(!none.allows_other_than({0, 1, 2, 3}));
  CHECK(none.allows_other_than({0, 2, 3}));
  // A table of frequent pieces alone (no per-source candidates) is a table.
  const Seqs src = {{5, 6}, {7}}, tgt = {{8}, {8}};
  ShortlistOptions o;
  o.per_source = 0;
  o.frequent = 1;
  const Shortlist frequent_only = Shortlist::build(ptrs(src), ptrs(tgt), 40, 40, o);
  CHECK(frequent_only.entries() == 0);
  CHECK(frequent_only.allows_other_than({0, 1, 2, 3}));
}

TEST_CASE("a batch's vocabulary: every sentence's pieces, in a few widths", "[shortlist]") {
  Seqs src, tgt;
  dictionary_corpus(3000, 1000, 8, src, tgt);
  ShortlistOptions o;
  o.per_source = 4, o.frequent = 20;
  const Shortlist sl = Shortlist::build(ptrs(src), ptrs(tgt), 1000, 1000, o);
  std::vector<uint8_t> mark;
  std::vector<int32_t> out;
  std::set<int64_t> widths;
  for (int n : {1, 2, 5, 20, 80}) {
    const Seqs batch(src.begin(), src.begin() + n);
    sl.batch_vocab(ptrs(batch), {3, 999}, 8, out, mark);
    if (out.empty()) {  // wide: the whole vocabulary
      std::set<int32_t> u;
      for (const auto& s : batch) {
        const auto a = allowed(sl, s);
        u.insert(a.begin(), a.end());
      }
      CHECK(static_cast<double>(Shortlist::round_width(static_cast<int64_t>(u.size()) + 2)) >
            Shortlist::kFullShare * 1000);
      continue;
    }
    CHECK(std::is_sorted(out.begin(), out.end()));
    CHECK(std::adjacent_find(out.begin(), out.end()) == out.end());
    CHECK(static_cast<int64_t>(out.size()) == Shortlist::round_width(static_cast<int64_t>(out.size())));
    widths.insert(static_cast<int64_t>(out.size()));
    const std::set<int32_t> got(out.begin(), out.end());
    CHECK(got.count(3));
    CHECK(got.count(999));
    for (const auto& s : batch)
      for (int32_t t : allowed(sl, s)) CHECK(got.count(t));
  }
  CHECK(widths.size() >= 2);
  CHECK(std::all_of(mark.begin(), mark.end(), [](uint8_t m) { return m == 0; }));
  CHECK(Shortlist::round_width(1) == 64);
  CHECK(Shortlist::round_width(65) == 96);
  CHECK(Shortlist::round_width(97) == 128);
  CHECK(Shortlist::round_width(129) == 192);
  CHECK(Shortlist::round_width(4096) == 4096);
  CHECK(Shortlist::round_width(4097) == 6144);
}

namespace {

// The naive reference: the model's full logits with every piece outside a
// sentence's shortlist set to -inf by hand, row by row, following the
// sentences as they leave the batch.
class MaskedByHand : public Decodable {
 public:
  MaskedByHand(const Transformer& m, const Shortlist& sl, const Seqs& src) : m_(m) {
    for (const auto& s : src) {
      auto a = allowed(sl, s);
      a.insert(m.config().eos_id);
      sets_.push_back(std::move(a));
    }
  }
  const ModelConfig& config() const override { return m_.config(); }
  Device device() const override { return m_.device(); }
  void start_decoding(const int32_t* src, int64_t B, int64_t S, int64_t beam, int64_t max_len,
                      DecodeState& st, int64_t max_sentences) const override {
    live_.resize(B);
    for (int64_t b = 0; b < B; ++b) live_[b] = b;
    m_.start_decoding(src, B, S, beam, max_len, st, max_sentences);
  }
  const Tensor& step(DecodeState& st, const int32_t* last) const override {
    Tensor& logits = const_cast<Tensor&>(m_.step(st, last));
    const int64_t V = logits.dim(1);
    for (int64_t r = 0; r < logits.dim(0); ++r) {
      const auto& a = sets_[live_[r / st.beam]];
      for (int64_t v = 0; v < V; ++v)
        if (!a.count(static_cast<int32_t>(v)))
          logits.data()[r * V + v] = -std::numeric_limits<float>::infinity();
    }
    return logits;
  }
  void reorder(DecodeState& st, const std::vector<int64_t>& keep, const std::vector<int64_t>& rows,
               int64_t new_beam) const override {
    std::vector<int64_t> next;
    for (int64_t k : keep) next.push_back(live_[k]);
    live_ = next;
    m_.reorder(st, keep, rows, new_beam);
  }

 private:
  const Transformer& m_;
  std::vector<std::set<int32_t>> sets_;
  mutable std::vector<int64_t> live_;
};

// A random model over a 400-piece vocabulary, frozen for translation, and a
// shortlist whose batches stay well under the whole vocabulary.
struct Fixture {
  Transformer model{tiny_config(400)};
  Shortlist sl;
  Seqs src;
  explicit Fixture(ComputeType ct) {
    model.init(17);
    prepare_for_inference(model.params(), ct);
    Seqs s, t;
    dictionary_corpus(1500, 400, 9, s, t);
    ShortlistOptions o;
    o.per_source = 3, o.frequent = 10;
    sl = Shortlist::build(ptrs(s), ptrs(t), 400, 400, o);
    src = random_sequences(9, 1, 9, 400, 33);
  }
};

}  // namespace

TEST_CASE("a shortlisted search equals full-vocabulary search masked to each sentence's pieces",
          "[shortlist][decode]") {
  for (ComputeType ct : {ComputeType::F32, ComputeType::INT8}) {
    require_compute(Device::CPU, ct);
    Fixture f(ct);
    for (int beam : {1, 4}) {
      SearchOptions opts;
      opts.beam = beam;
      opts.n_best = beam;
      DecodeState a, b;
      const MaskedByHand reference(f.model, f.sl, f.src);
      const auto want = search(reference, f.src, opts, a);
      opts.shortlist = &f.sl;
      const auto got = search(f.model, f.src, opts, b);
      CHECK(!b.out.vocab.empty());  // the narrow path, not the whole vocabulary masked
      CHECK(b.out.vocab.size() < 400 * Shortlist::kFullShare);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        REQUIRE(got[i].size() == want[i].size());
        const auto a_set = allowed(f.sl, f.src[i]);
        for (size_t k = 0; k < got[i].size(); ++k) {
          INFO(compute_type_name(ct) << ", beam " << beam << ", sentence " << i << ", n-best " << k);
          CHECK(got[i][k].tokens == want[i][k].tokens);
          CHECK(got[i][k].score == Approx(want[i][k].score).margin(1e-4));
          for (int32_t t : got[i][k].tokens) CHECK(a_set.count(t));
        }
      }
    }
  }
}

TEST_CASE("a shortlisted sentence's translation does not depend on its batch",
          "[shortlist][decode]") {
  Fixture f(ComputeType::F32);
  for (int beam : {1, 3}) {
    SearchOptions opts;
    opts.beam = beam;
    opts.n_best = beam;
    opts.max_len_a = 1, opts.max_len_b = 1;  // sentences end at different steps
    opts.shortlist = &f.sl;
    DecodeState st;
    const auto together = search(f.model, f.src, opts, st);
    // Alone, each sentence's batch vocabulary is narrower than the batch's.
    for (size_t i = 0; i < f.src.size(); ++i) {
      DecodeState alone_state;
      const auto alone = search(f.model, {f.src[i]}, opts, alone_state);
      REQUIRE(alone[0].size() == together[i].size());
      for (size_t k = 0; k < alone[0].size(); ++k) {
        CHECK(alone[0][k].tokens == together[i][k].tokens);
        CHECK(alone[0][k].score == Approx(together[i][k].score).margin(1e-4));
      }
    }
  }
}

TEST_CASE("prefixes and constraints outside the shortlist are still honoured",
          "[shortlist][decode]") {
  Fixture f(ComputeType::F32);
  // Pieces no sentence's shortlist holds.
  const auto a = allowed(f.sl, f.src[0]);
  std::vector<int32_t> outside;
  for (int32_t t = 4; t < 400 && outside.size() < 3; ++t)
    if (!a.count(t)) outside.push_back(t);
  REQUIRE(outside.size() == 3);
  SearchRequest r;
  r.src = f.src[0];
  r.prefix = {outside[0]};
  r.constraints = {{outside[1], outside[2]}};
  SearchOptions opts;
  opts.beam = 4;
  opts.shortlist = &f.sl;
  DecodeState st;
  const auto out = search(f.model, std::vector<SearchRequest>{r}, opts, st);
  const auto& toks = out[0][0].tokens;
  REQUIRE(!toks.empty());
  CHECK(toks[0] == outside[0]);
  CHECK(out[0][0].constraints_met);
  CHECK(std::search(toks.begin(), toks.end(), r.constraints[0].begin(), r.constraints[0].end()) !=
        toks.end());
}

TEST_CASE("a shortlisted ensemble equals its one member shortlisted", "[shortlist][ensemble]") {
  Fixture f(ComputeType::F32);
  const Ensemble twice({&f.model, &f.model});
  SearchOptions opts;
  opts.beam = 3;
  opts.shortlist = &f.sl;
  DecodeState a, b;
  const auto one = search(f.model, f.src, opts, a);
  const auto two = search(twice, f.src, opts, b);
  for (size_t i = 0; i < one.size(); ++i) {
    CHECK(one[i][0].tokens == two[i][0].tokens);
    CHECK(one[i][0].score == Approx(two[i][0].score).margin(1e-4));
  }
}

TEST_CASE("a model trained here to copy translates exactly with its shortlist, in few columns",
          "[shortlist][decode]") {
  ModelConfig cfg = tiny_config(200);
  cfg.d_model = 32;
  cfg.d_ff = 64;
  cfg.d_k = cfg.d_v = 8;
  Transformer model(cfg);
  model.init(42);
  const double loss = train_copy_task(model, 800);
  INFO("copy-task loss " << loss);
  REQUIRE(loss < 0.1);
  prepare_for_inference(model.params(), ComputeType::F32);
  // The shortlist from copy pairs like those it was trained on.
  const Seqs pairs = random_sequences(3000, 2, 8, 200, 99);
  ShortlistOptions o;
  o.per_source = 2, o.frequent = 5;
  const Shortlist sl = Shortlist::build(ptrs(pairs), ptrs(pairs), 200, 200, o);
  const Seqs src = random_sequences(16, 2, 8, 200, 777);  // unseen
  for (int beam : {1, 4}) {
    SearchOptions opts;
    opts.beam = beam;
    opts.shortlist = &sl;
    DecodeState st;
    const auto hyps = search(model, src, opts, st);
    int exact = 0;
    for (size_t i = 0; i < src.size(); ++i) exact += hyps[i][0].tokens == src[i];
    INFO("beam " << beam);
    CHECK(exact == static_cast<int>(src.size()));
  }
  // One sentence's batch: a fraction of the vocabulary's columns.
  SearchOptions opts;
  opts.shortlist = &sl;
  DecodeState st;
  search(model, {src[0]}, opts, st);
  CHECK(st.out.vocab.size() == 64);
}

// A batch's width and row counts make a primitive the first time they meet
// (a few widths an octave, as many row counts as the full projection has);
// after that, batches of those shapes build none, although each one's
// columns, packed weights and mask are new.
TEST_CASE("a warm shortlisted decoding loop builds no primitives", "[shortlist][decode]") {
  for (ComputeType ct : {ComputeType::F32, ComputeType::INT8}) {
    require_compute(Device::CPU, ct);
    Fixture f(ct);
    SearchOptions opts;
    opts.shortlist = &f.sl;
    opts.max_len_b = 6;
    DecodeState st;
    int64_t before = 0;
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 1) before = ops::primitives_created();
      for (int i = 0; i < 24; ++i) {
        opts.beam = 1 + i % 2;
        search(f.model, random_sequences(1 + (i * 5) % 8, 1, 10, 400, 9000 + i), opts, st);
      }
    }
    INFO(compute_type_name(ct));
    CHECK(ops::primitives_created() == before);
  }
}
