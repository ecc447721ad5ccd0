// The training recipe (train/recipe.h) on synthetic corpus sizes and
// budgets, the schedules it chooses between, and the corpus filters.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/vocab.h"
#include "train/data.h"
#include "train/optimizer.h"
#include "train/recipe.h"

using namespace nmt;

namespace {

ModelConfig shipped(const std::string& name) { return load_config(find_config(name)); }

struct Planned {
  TrainOptions opts;
  ModelConfig cfg;
  Recipe recipe;
  DataRecipe data;
  int64_t updates = 0;
};

// Both stages for a corpus of `pairs` pairs of `tokens_per_pair` target
// tokens, trained at `seconds_per_4096` per update of 4096 tokens.
Planned plan(int64_t pairs, TrainOptions o, double seconds_per_4096 = 0.5, double cjk = 0,
             const std::string& bf16_why_not = "", double kana = 0,
             const std::string& mecab_why_not = "") {
  Planned p;
  p.opts = std::move(o);
  p.opts.recipe = true;
  CorpusFacts f;
  f.pairs = pairs;
  f.tgt_cjk = cjk;
  f.tgt_kana = kana;
  p.cfg = p.opts.given.count("config") ? shipped("transformer-tiny")
                                       : shipped(recipe_config_name(pairs));
  p.data = recipe_for_data(f, p.cfg, p.opts, bf16_why_not, p.recipe, mecab_why_not);
  BudgetFacts b;
  b.pairs = pairs;
  b.target_tokens = pairs * 15;
  b.widest_pair = 60;
  b.probe_seconds = seconds_per_4096;
  b.probe_batch_tokens = 4096;
  b.fill = 0.8;
  b.has_valid = true;
  p.updates = recipe_for_budget(b, p.cfg, p.opts, p.recipe);
  return p;
}

TrainOptions minutes(double m) {
  TrainOptions o;
  o.max_minutes = m;
  return o;
}

}  // namespace

TEST_CASE("recipe: the model, vocabulary and regularisation grow with the corpus", "[recipe]") {
  const Planned small = plan(5000, minutes(60));
  const Planned mid = plan(29000, minutes(60));
  const Planned large = plan(2000000, minutes(600));
  CHECK(recipe_config_name(5000) == "transformer-small");
  CHECK(recipe_config_name(2000000) == "transformer-base");
  CHECK(small.cfg.name == "transformer-small");
  CHECK(large.cfg.name == "transformer-base");
  CHECK(small.data.vocab_size == 4000);
  CHECK(mid.data.vocab_size == 8000);
  CHECK(large.data.vocab_size == 32000);
  CHECK(small.opts.vocab_size == 4000);
  // Many epochs of a small corpus: the most dropout; a big corpus the least.
  CHECK(small.cfg.dropout == Approx(0.3));
  CHECK(large.cfg.dropout == Approx(0.1));
  CHECK(small.opts.batch_tokens <= 4096);
  CHECK(large.opts.batch_tokens > small.opts.batch_tokens);
  // Every choice has a reason, and none is marked given.
  for (const Planned* p : {&small, &mid, &large})
    for (const RecipeChoice& c : p->recipe.choices()) {
      INFO(c.key);
      CHECK(!c.reason.empty());
      CHECK_FALSE(c.given);
    }
  REQUIRE(small.recipe.find("dropout"));
  CHECK(small.recipe.find("dropout")->value.get<double>() == Approx(0.3));
}

TEST_CASE("recipe: a budget of few epochs takes less dropout", "[recipe]") {
  // 29k pairs: 1 minute is well under 3 epochs, an hour many.
  TrainOptions o;
  o.max_steps = 100;
  const Planned brief = plan(29000, o);
  const Planned hour = plan(29000, minutes(60), 0.3);
  CHECK(brief.cfg.dropout == Approx(0.1));
  CHECK(hour.cfg.dropout == Approx(0.3));
}

TEST_CASE("recipe: character coverage below 1 for Chinese and Japanese text", "[recipe]") {
  CHECK(plan(26000, minutes(10), 0.5, 0.9).data.character_coverage == Approx(0.9995));
  CHECK(plan(26000, minutes(10), 0.5, 0.0).data.character_coverage == 1.0);
  const std::vector<std::string> en = {"A man is riding a bike.", "Two dogs play in the snow."};
  const std::vector<std::string> zh = {"我们今天去公园。", "他喜欢喝茶，不喜欢咖啡。"};
  const std::vector<std::string> ja = {"私 は 学生 です 。", "これ は ペン です か 。"};
  const CorpusFacts ez = corpus_facts(en, zh);
  CHECK(ez.src_cjk == 0.0);
  CHECK(ez.tgt_cjk > 0.9);
  CHECK(corpus_facts(en, ja).tgt_cjk > 0.9);
  const std::vector<std::string> de = {"Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee."};
  CHECK(corpus_facts(en, de).tgt_cjk == 0.0);
}

TEST_CASE("recipe: validation BLEU tokenised as the target language is scored", "[recipe]") {
  CHECK(plan(26000, minutes(10), 0.5, 0.0).opts.valid_tokenize == metrics::TokenizerKind::k13a);
  CHECK(plan(26000, minutes(10), 0.5, 0.95).opts.valid_tokenize == metrics::TokenizerKind::kZh);
  CHECK(plan(50000, minutes(10), 0.5, 0.6, "", 0.4).opts.valid_tokenize ==
        metrics::TokenizerKind::kJaMecab);
  const Planned nomecab = plan(50000, minutes(10), 0.5, 0.6, "", 0.4, "no dictionary");
  CHECK(nomecab.opts.valid_tokenize == metrics::TokenizerKind::kChar);
  CHECK(nomecab.recipe.find("valid_tokenize")->reason.find("no dictionary") != std::string::npos);
  const std::vector<std::string> en = {"I am a student ."};
  const std::vector<std::string> ja = {"私 は 学生 です 。", "これ は ペン です か 。"};
  const std::vector<std::string> zh = {"我们今天去公园。"};
  CHECK(corpus_facts(en, ja).tgt_kana > 0.3);
  CHECK(corpus_facts(en, zh).tgt_kana == 0.0);
}

TEST_CASE("a vocabulary below full character coverage spells rare characters in bytes",
          "[recipe]") {
  // 2000 lines of common characters and one line with a character that
  // occurs once: below SentencePiece's 0.9995 coverage.
  std::vector<std::string> lines;
  const std::vector<std::string> common = {"我", "们", "今", "天", "去", "公", "园", "他", "喜",
                                           "欢", "喝", "茶", "不", "咖", "啡", "。"};
  for (int i = 0; i < 2000; ++i) {
    std::string l;
    for (int k = 0; k < 12; ++k) l += common[(i * 7 + k * 3) % common.size()];
    lines.push_back(l);
  }
  lines.push_back("我们去龘。");
  std::vector<const std::string*> ptrs;
  for (const auto& l : lines) ptrs.push_back(&l);
  const Vocab partial = Vocab::train(ptrs, 400, 0.9995);  // 256 byte pieces among them
  const std::vector<int32_t> ids = partial.encode("龘");
  CHECK(std::find(ids.begin(), ids.end(), 1) == ids.end());  // no <unk>
  CHECK(ids.size() >= 3);                                    // its three UTF-8 bytes
  CHECK(partial.decode(partial.encode("我们去龘。")) == "我们去龘。");
  // Full coverage gives the character its own piece.
  const Vocab full = Vocab::train(ptrs, 100, 1.0);
  CHECK(full.decode(full.encode("我们去龘。")) == "我们去龘。");
}

TEST_CASE("recipe: bf16 where the CPU has it, else f32 with the reason", "[recipe]") {
  const Planned with = plan(29000, minutes(10), 0.5, 0, "");
  const Planned without = plan(29000, minutes(10), 0.5, 0, "--compute-type bf16: no AVX512-BF16");
  CHECK(with.opts.compute_type == ComputeType::BF16);
  CHECK(without.opts.compute_type == ComputeType::F32);
  CHECK(without.recipe.find("compute_type")->reason.find("no AVX512-BF16") != std::string::npos);
}

TEST_CASE("recipe: bf16 only where an update measures faster in it", "[recipe]") {
  // A CPU with AVX512-BF16 but no AMX measured 1.6x slower in bf16: f32.
  Planned slow = plan(29000, minutes(10), 0.5, 0, "");
  REQUIRE(slow.opts.compute_type == ComputeType::BF16);
  CHECK(recipe_compute_by_speed(0.80, 0.50, 4096, slow.opts, slow.recipe));
  CHECK(slow.opts.compute_type == ComputeType::F32);
  const RecipeChoice* c = slow.recipe.find("compute_type");
  REQUIRE(c);
  CHECK(c->value == "f32");
  CHECK(c->reason.find("0.800 s in bf16, 0.500 s in f32") != std::string::npos);
  // Revised, not listed twice, and logged last (with the measurement).
  CHECK(std::count_if(slow.recipe.choices().begin(), slow.recipe.choices().end(),
                      [](const RecipeChoice& x) { return x.key == "compute_type"; }) == 1);
  CHECK(slow.recipe.choices().back().key == "compute_type");
  // Within 5%: f32, the exact one.
  Planned even = plan(29000, minutes(10), 0.5, 0, "");
  CHECK(recipe_compute_by_speed(0.49, 0.50, 4096, even.opts, even.recipe));
  CHECK(even.opts.compute_type == ComputeType::F32);
  // Faster in bf16 (AMX, or a Zen 4): kept, with the times as its reason.
  Planned fast = plan(29000, minutes(10), 0.5, 0, "");
  CHECK_FALSE(recipe_compute_by_speed(0.30, 0.50, 4096, fast.opts, fast.recipe));
  CHECK(fast.opts.compute_type == ComputeType::BF16);
  CHECK(fast.recipe.find("compute_type")->reason.find("0.300 s in bf16") != std::string::npos);
  // Given, or f32 already: untouched.
  TrainOptions g = minutes(10);
  g.compute_type = ComputeType::BF16;
  g.given = {"compute_type"};
  Planned given = plan(29000, g, 0.5, 0, "");
  CHECK_FALSE(recipe_compute_by_speed(0.80, 0.50, 4096, given.opts, given.recipe));
  CHECK(given.opts.compute_type == ComputeType::BF16);
  Planned none = plan(29000, minutes(10), 0.5, 0, "--compute-type bf16: no AVX512-BF16");
  CHECK_FALSE(recipe_compute_by_speed(0.30, 0.50, 4096, none.opts, none.recipe));
  CHECK(none.opts.compute_type == ComputeType::F32);
}

TEST_CASE("recipe: a time budget plans its updates from the measured speed", "[recipe]") {
  // 0.5 s per 4096 tokens, 10 minutes less 30 s for the end: about 4.7M
  // padded tokens, so batches for ~2000 updates (whole 256s), and a linear
  // schedule that ends with the budget.
  const Planned p = plan(29000, minutes(10), 0.5);
  const int64_t batch = int64_t(570 / (0.5 / 4096) / 2000) / 256 * 256;
  CHECK(batch == 2304);
  CHECK(p.opts.batch_tokens == batch);
  CHECK(p.opts.lr_schedule == LrShape::Linear);
  const int64_t expect = updates_in_time(600, 0.5 * double(batch) / 4096, 30);
  CHECK(p.updates == expect);
  CHECK(p.opts.warmup_steps == expect / 10);
  CHECK(p.opts.valid_every > 0);
  CHECK(p.opts.valid_every * 8 == Approx(expect).epsilon(0.05));
  CHECK(p.opts.checkpoint_every * 20 == Approx(expect).epsilon(0.05));
  CHECK(p.opts.average_last == 4);
  CHECK(p.opts.early_stop == 5);
  CHECK(p.opts.valid_sentences == 200);  // a short budget validates on fewer
  // Twice as slow a machine: batches at their floor of 2048, and the
  // updates that those allow.
  const Planned slow = plan(29000, minutes(10), 1.0);
  CHECK(slow.opts.batch_tokens == 2048);
  CHECK(slow.updates == updates_in_time(600, 1.0 * 2048 / 4096, 30));
  // The peak learning rate: 1.5e-3 at width 256, times sqrt(batch / 4096).
  const auto peak = [](const Planned& x) {
    return noam_lr(x.opts.warmup_steps, x.cfg.d_model, x.opts.warmup_steps, x.opts.lr_scale);
  };
  CHECK(peak(p) == Approx(1.5e-3 * std::sqrt(2304.0 / 4096.0)).epsilon(1e-3));
  CHECK(peak(slow) == Approx(1.5e-3 * std::sqrt(2048.0 / 4096.0)).epsilon(1e-3));
  // An hour validates on more sentences.
  CHECK(plan(29000, minutes(60), 0.5).opts.valid_sentences == 500);
}

TEST_CASE("recipe: step and epoch budgets, and no budget", "[recipe]") {
  TrainOptions steps;
  steps.max_steps = 20;
  const Planned s = plan(1000, steps, 0);
  CHECK(s.updates == 20);
  CHECK(s.opts.warmup_steps == 5);  // a quarter of a short run
  CHECK(s.opts.lr_schedule == LrShape::Linear);
  TrainOptions epochs;
  epochs.max_epochs = 3;
  const Planned e = plan(29000, epochs, 0);
  // 29k x 15 tokens, 0.8 of each batch real, 3 epochs
  CHECK(e.updates == int64_t(std::ceil(3.0 * 29000 * 15 / (0.8 * double(e.opts.batch_tokens)))));
  const Planned none = plan(29000, TrainOptions{}, 0);
  CHECK(none.updates == 0);
  CHECK(none.opts.lr_schedule == LrShape::InverseSqrt);
  CHECK(none.opts.warmup_steps == 4000);
  CHECK(none.opts.lr_scale == Approx(1.0));  // the paper's schedule, as it is
}

TEST_CASE("recipe: every option given stays as given", "[recipe]") {
  TrainOptions o = minutes(10);
  o.batch_tokens = 1234;
  o.warmup_steps = 77;
  o.lr_scale = 0.7;
  o.lr_schedule = LrShape::Cosine;
  o.compute_type = ComputeType::F32;
  o.valid_every = 33;
  o.average_last = 2;
  o.dropout = 0.25;
  o.given = {"batch_tokens", "warmup_steps", "lr_scale", "lr_schedule", "compute_type",
             "valid_every",  "average_last", "dropout",  "config"};
  Planned p = plan(29000, o, 0.5, 0, "");
  CHECK(p.opts.batch_tokens == 1234);
  CHECK(p.opts.warmup_steps == 77);
  CHECK(p.opts.lr_scale == 0.7);
  CHECK(p.opts.lr_schedule == LrShape::Cosine);
  CHECK(p.opts.compute_type == ComputeType::F32);
  CHECK(p.opts.valid_every == 33);
  CHECK(p.opts.average_last == 2);
  CHECK(p.cfg.name == "transformer-tiny");  // the given config, with its own vocabulary
  CHECK(p.data.vocab_size == p.cfg.vocab_size);
  for (const char* k : {"batch_tokens", "warmup_steps", "lr_scale", "lr_schedule", "compute_type",
                        "valid_every", "average_last", "config", "vocab_size", "dropout"}) {
    INFO(k);
    REQUIRE(p.recipe.find(k));
    CHECK(p.recipe.find(k)->given);
  }
  // Not given: still chosen.
  CHECK_FALSE(p.recipe.find("checkpoint_every")->given);
  // The recipe survives its JSON form (model metadata, checkpoints).
  const Recipe back = Recipe::from_json(p.recipe.to_json());
  CHECK(back.lines() == p.recipe.lines());
}

TEST_CASE("learning-rate shapes share the peak and end with the budget", "[recipe][train]") {
  const int64_t d = 256, w = 100, total = 1000;
  const double peak = noam_lr(w, d, w, 2.0);
  for (LrShape s : {LrShape::InverseSqrt, LrShape::Linear, LrShape::Cosine}) {
    INFO(lr_shape_name(s));
    // Named in the config and on the command line as lr_shape_name says.
    TrainOptions o;
    apply_training_json({{"lr_schedule", lr_shape_name(s)}}, o, "x");
    CHECK(o.lr_schedule == s);
    for (int64_t step : {1, 50, 99, 100})  // warmup is the paper's for every shape
      CHECK(schedule_lr(s, step, d, w, 2.0, total) == Approx(noam_lr(step, d, w, 2.0)));
    for (int64_t step = w + 1; step < total; step += 37)
      CHECK(schedule_lr(s, step, d, w, 2.0, total) < schedule_lr(s, step - 1, d, w, 2.0, total));
  }
  CHECK(schedule_lr(LrShape::Linear, 550, d, w, 2.0, total) == Approx(peak / 2));
  CHECK(schedule_lr(LrShape::Cosine, 550, d, w, 2.0, total) == Approx(peak / 2));
  CHECK(schedule_lr(LrShape::Cosine, 325, d, w, 2.0, total) ==
        Approx(peak * 0.5 * (1 + std::cos(M_PI * 0.25))));
  CHECK(schedule_lr(LrShape::Linear, total, d, w, 2.0, total) == 0.0);
  CHECK(schedule_lr(LrShape::Linear, total + 10, d, w, 2.0, total) == 0.0);
  // Without a known end, the decaying shapes fall back to the paper's.
  CHECK(schedule_lr(LrShape::Linear, 500, d, w, 2.0, 0) == noam_lr(500, d, w, 2.0));
  CHECK(schedule_lr(LrShape::InverseSqrt, 500, d, w, 2.0, total) == noam_lr(500, d, w, 2.0));
  TrainOptions o;
  CHECK_THROWS_WITH(apply_training_json({{"lr_schedule", "step"}}, o, "x", /*cli=*/true),
                    "{lr_schedule}: expected \"inverse-sqrt\", \"linear\" or \"cosine\", "
                    "got \"step\"");
}

TEST_CASE("exact duplicate pairs are dropped, near ones kept", "[recipe][data]") {
  std::vector<std::string> src = {"a b", "c d", "a b", "a b", "a b ", "c d", "", "", "e"};
  std::vector<std::string> tgt = {"x y", "z", "x y", "x Y", "x y", "z", "q", "q", "f"};
  std::vector<int64_t> line = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  CHECK(drop_duplicate_pairs(src, tgt, line) == 2);  // lines 2 and 5
  CHECK(src == std::vector<std::string>{"a b", "c d", "a b", "a b ", "", "", "e"});
  CHECK(tgt == std::vector<std::string>{"x y", "z", "x Y", "x y", "q", "q", "f"});
  CHECK(line == std::vector<int64_t>{0, 1, 3, 4, 6, 7, 8});
  // A corpus of one pair repeated leaves one.
  std::vector<std::string> s(1000, "same"), t(1000, "gleich");
  std::vector<int64_t> l(1000);
  CHECK(drop_duplicate_pairs(s, t, l) == 999);
  CHECK(s.size() == 1);
}

TEST_CASE("pairs of implausible length ratio are dropped by the corpus median", "[recipe][data]") {
  std::vector<std::vector<int32_t>> s, t;
  auto add = [&](size_t ls, size_t lt) {
    s.emplace_back(ls, 5);
    t.emplace_back(lt, 6);
  };
  for (int i = 0; i < 50; ++i) add(20, 24);  // the median ratio: 25/21, kept within 0.40-3.57
  add(20, 80);   // 81/21 = 3.86 > 3.57: dropped
  add(30, 8);    // 9/31 = 0.29 < 0.40: dropped
  add(1, 8);     // 9/2 = 4.5, but 8+1 subwords on the longer side: too short to judge, kept
  add(20, 76);   // 77/21 = 3.67 > 3.57: dropped
  add(20, 60);   // 61/21 = 2.9: kept
  ParallelCorpus c = make_corpus(s, t, 200);
  const RatioFilter f = filter_length_ratio(c, 3.0, 10);
  CHECK(f.median == Approx(25.0 / 21));
  CHECK(f.lo == Approx(25.0 / 21 / 3));
  CHECK(f.hi == Approx(25.0 / 21 * 3));
  CHECK(f.dropped == 3);
  CHECK(c.size() == 52);
  CHECK(c.line.back() == 54);
  CHECK(c.line[50] == 52);
}

namespace {

// Stage 1 for 29k pairs, then plan_budget with a probe that records what it
// was asked and answers `per_token` seconds per batch token in each type.
struct Probed {
  Planned p;
  BudgetPlan budget;
  std::vector<std::pair<int64_t, ComputeType>> asked;
};

Probed probed(TrainOptions o, double f32_per_token, double bf16_per_token,
              const std::string& bf16_why_not = "", int64_t widest = 60) {
  Probed r;
  r.p.opts = std::move(o);
  r.p.opts.recipe = true;
  CorpusFacts c;
  c.pairs = 29000;
  r.p.cfg = shipped(recipe_config_name(c.pairs));
  r.p.data = recipe_for_data(c, r.p.cfg, r.p.opts, bf16_why_not, r.p.recipe);
  BudgetFacts b;
  b.pairs = c.pairs;
  b.target_tokens = c.pairs * 15;
  b.widest_pair = widest;
  b.has_valid = true;
  r.budget = plan_budget(b, r.p.cfg, r.p.opts, r.p.recipe, [&](int64_t batch, ComputeType t) {
    r.asked.emplace_back(batch, t);
    ProbeTiming timing;
    timing.seconds = double(batch) * (t == ComputeType::BF16 ? bf16_per_token : f32_per_token);
    timing.fill = 0.8;
    return timing;
  });
  return r;
}

}  // namespace

TEST_CASE("recipe: plan_budget times only a budget of time, on the batch it plans", "[recipe]") {
  // A budget of steps or epochs trains the same model on every run: no clock.
  TrainOptions steps;
  steps.max_steps = 500;
  const Probed s = probed(steps, 1e-4, 1e-4);
  CHECK(s.asked.empty());
  CHECK(s.budget.updates == 500);
  CHECK(s.budget.seconds_per_update == 0);

  // A time budget on an f32 machine: the first batch (4096 below 100k
  // pairs), then the batch the plan chose, which the plan is made again with.
  const Probed t = probed(minutes(10), 1e-4, 1e-4, "no AVX512-BF16");
  REQUIRE(t.asked.size() == 2);
  CHECK(t.asked[0] == std::make_pair(int64_t{4096}, ComputeType::F32));
  CHECK(t.asked[1] == std::make_pair(t.p.opts.batch_tokens, ComputeType::F32));
  CHECK(t.p.opts.batch_tokens != 4096);
  CHECK_FALSE(t.budget.compute_revised);
  // What recipe_for_budget makes of the last measurement, and its time per
  // update at the chosen batch.
  Planned again;
  again.opts = minutes(10);
  again.opts.recipe = true;
  CorpusFacts c;
  c.pairs = 29000;
  again.cfg = shipped(recipe_config_name(c.pairs));
  recipe_for_data(c, again.cfg, again.opts, "no AVX512-BF16", again.recipe);
  BudgetFacts b;
  b.pairs = c.pairs;
  b.target_tokens = c.pairs * 15;
  b.widest_pair = 60;
  b.has_valid = true;
  b.probe_batch_tokens = t.p.opts.batch_tokens;
  b.probe_seconds = 1e-4 * double(b.probe_batch_tokens);
  b.fill = 0.8;
  CHECK(recipe_for_budget(b, again.cfg, again.opts, again.recipe) == t.budget.updates);
  CHECK(t.budget.seconds_per_update == Approx(1e-4 * double(t.p.opts.batch_tokens)));

  // A given batch is timed once, and never below the widest pair.
  TrainOptions given = minutes(10);
  given.batch_tokens = 512;
  given.given = {"batch_tokens"};
  const Probed w = probed(given, 1e-4, 1e-4, "no AVX512-BF16", /*widest=*/700);
  REQUIRE(w.asked.size() == 1);
  CHECK(w.asked[0].first == 700);
}

TEST_CASE("recipe: plan_budget keeps bf16 only where the probe finds it faster", "[recipe]") {
  // Stage 1 chose bf16 (the CPU has it): both types timed on the same
  // batch, the faster kept, then the chosen batch timed in that type.
  const Probed slow = probed(minutes(10), 1e-4, 1.6e-4);
  REQUIRE(slow.asked.size() >= 2);
  CHECK(slow.asked[0] == std::make_pair(int64_t{4096}, ComputeType::BF16));
  CHECK(slow.asked[1] == std::make_pair(int64_t{4096}, ComputeType::F32));
  CHECK(slow.p.opts.compute_type == ComputeType::F32);
  CHECK(slow.budget.compute_revised);
  for (size_t i = 2; i < slow.asked.size(); ++i) CHECK(slow.asked[i].second == ComputeType::F32);

  const Probed fast = probed(minutes(10), 1e-4, 0.6e-4);
  CHECK(fast.p.opts.compute_type == ComputeType::BF16);
  CHECK(fast.budget.compute_revised);
  for (size_t i = 2; i < fast.asked.size(); ++i) CHECK(fast.asked[i].second == ComputeType::BF16);
  // Faster, so more updates in the same ten minutes.
  CHECK(fast.budget.updates > slow.budget.updates);

  // Given bf16: not compared, timed in it.
  TrainOptions g = minutes(10);
  g.compute_type = ComputeType::BF16;
  g.given = {"compute_type"};
  const Probed given = probed(g, 1e-4, 1.6e-4);
  CHECK(given.p.opts.compute_type == ComputeType::BF16);
  CHECK_FALSE(given.budget.compute_revised);
  CHECK(given.asked[0].second == ComputeType::BF16);
}

TEST_CASE("recipe: --optimize speed leaves the decoder two layers, student one", "[recipe]") {
  for (const char* name : {"transformer-small", "transformer-base", "transformer-big"}) {
    INFO(name);
    const ModelConfig shipped_cfg = shipped(name);
    REQUIRE(shipped_cfg.decoder_layers > 2);
    TrainOptions quality;
    ModelConfig q = shipped_cfg;
    Recipe rq;
    recipe_layers(q, quality, rq);
    // quality: the config as shipped.
    CHECK(q.encoder_layers == shipped_cfg.encoder_layers);
    CHECK(q.decoder_layers == shipped_cfg.decoder_layers);
    CHECK(q.name == shipped_cfg.name);
    REQUIRE(rq.find("layers"));
    CHECK(rq.find("layers")->reason.find("{optimize} quality") == 0);
    // speed and student: the encoder kept, fewer decoder layers.
    for (auto [goal, decoder] : {std::pair{Optimize::Speed, 2}, std::pair{Optimize::Student, 1}}) {
      INFO(optimize_name(goal));
      TrainOptions o;
      o.optimize = goal;
      ModelConfig s = shipped_cfg;
      Recipe rs;
      recipe_layers(s, o, rs);
      CHECK(s.decoder_layers == decoder);
      CHECK(s.encoder_layers == shipped_cfg.encoder_layers);
      CHECK(s.d_model == shipped_cfg.d_model);
      CHECK(s.d_ff == shipped_cfg.d_ff);
      CHECK(s.name == std::string(name) + "-" + std::to_string(s.encoder_layers) + "x" +
                          std::to_string(decoder));
      REQUIRE(rs.find("layers"));
      CHECK(rs.find("layers")->value ==
            std::to_string(s.encoder_layers) + "+" + std::to_string(decoder));
      CHECK(rs.find("layers")->reason.find("{optimize} " + std::string(optimize_name(goal))) == 0);
      CHECK_FALSE(rs.find("layers")->given);
    }
  }
  // A given config keeps its layers, whatever the goal; a decoder as
  // shallow already is left as it is.
  TrainOptions given;
  given.optimize = Optimize::Speed;
  given.given.insert("config");
  ModelConfig g = shipped("transformer-small");
  Recipe rg;
  recipe_layers(g, given, rg);
  CHECK(g.encoder_layers == 3);
  CHECK(g.decoder_layers == 3);
  REQUIRE(rg.find("layers"));
  CHECK(rg.find("layers")->given);
  TrainOptions speed;
  speed.optimize = Optimize::Speed;
  ModelConfig one = shipped("transformer-small");
  one.encoder_layers = 12, one.decoder_layers = 1;
  Recipe r1;
  recipe_layers(one, speed, r1);
  CHECK(one.encoder_layers == 12);
  CHECK(one.decoder_layers == 1);
  CHECK(r1.find("layers")->reason.find("has one layer already") != std::string::npos);
  ModelConfig tiny = shipped("transformer-tiny");  // 2+2
  Recipe rt;
  recipe_layers(tiny, speed, rt);
  CHECK(tiny.decoder_layers == 2);
  CHECK(tiny.name == "transformer-tiny");
}

TEST_CASE("recipe: --optimize is a training option with its choices", "[recipe]") {
  const TrainingOption* o = find_training_option("optimize");
  REQUIRE(o);
  CHECK(o->choices == std::vector<std::string>{"quality", "speed", "student"});
  TrainOptions t;
  apply_training_json({{"optimize", "speed"}}, t, "test");
  CHECK(t.optimize == Optimize::Speed);
  apply_training_json({{"optimize", "student"}}, t, "test");
  CHECK(t.optimize == Optimize::Student);
  CHECK_THROWS_AS(apply_training_json({{"optimize", "fast"}}, t, "test"), InputError);
  // Without the recipe, only a config says what speed would mean.
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string src = dir + "/nmt_optimize_test.src", tgt = dir + "/nmt_optimize_test.tgt";
  std::ofstream(src) << "a\n";
  std::ofstream(tgt) << "b\n";
  TrainOptions bare;
  bare.optimize = Optimize::Speed;
  bare.train_src = {src}, bare.train_tgt = {tgt}, bare.out = dir + "/nmt_optimize_test.nmt";
  CHECK_THROWS_WITH(validate_options(bare), Catch::Contains("the recipe is off"));
  bare.recipe = true;
  CHECK_NOTHROW(validate_options(bare));
  std::filesystem::remove(src);
  std::filesystem::remove(tgt);
}
