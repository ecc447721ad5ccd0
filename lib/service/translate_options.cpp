// Translation's options, declared once: the search's (decode/search.h) and
// the service's, with their ranges, choices and help. `nmt translate`
// registers its command line from this table, check_options() checks
// ranges with it, and JSON reads and writes through it.
#include <algorithm>

#include "core/error.h"
#include "core/suggest.h"
#include "decode/shortlist_cost.h"
#include "service/translation_service.h"

namespace nmt {

using json = nlohmann::json;

namespace {

using Spec = OptionSpec<TranslateOptions>;

constexpr auto option = &make_option<TranslateOptions>;

template <class M>
Spec output_flag(const char* key, M ResultFormat::*m, std::string help) {
  return option(
      key, OptionInfo::kFlag, std::move(help),
      [m](const TranslateOptions& t) { return json(t.output.*m); },
      [m](TranslateOptions& t, const json& v) { t.output.*m = v.get<M>(); });
}

const char* split_name(SplitMode m) {
  return m == SplitMode::sentences    ? "sentences"
         : m == SplitMode::paragraphs ? "paragraphs"
                                      : "none";
}

const char* shortlist_name(ShortlistUse u) {
  return u == ShortlistUse::on ? "on" : u == ShortlistUse::off ? "off" : "auto";
}

std::vector<Spec> output_options() {
  return {
      output_flag("scores", &ResultFormat::scores,
                  "Print each translation's search score first: its log-probability divided by "
                  "the GNMT length penalty ((5 + tokens) / 6)^alpha, or by tokens with "
                  "{length_norm} (the 'score' column of nmt score -m)"),
      with_choices(option(
                       "format", OptionInfo::kChoice,
                       "text; jsonl (line, translation, score, logprob, tokens); html: the "
                       "input is HTML, translated with its markup kept: block elements end "
                       "sentences, inline elements go around the words their words became, "
                       "script, style, pre, code and translate=\"no\" are left as they are",
                       [](const TranslateOptions& t) { return json(format_name(t.output.format)); },
                       [](TranslateOptions& t, const json& v) {
                         t.output.format = parse_output_format(v.get<std::string>());
                       }),
                   {"text", "jsonl", "html"}),
      with_choices(
          option(
              "input_format", OptionInfo::kChoice,
              "text; tsv: source<TAB>prefix, the translation starts with the prefix; jsonl: "
              "{\"text\": ..., \"constraints\": [...], \"prefix\": ...}, every constraint "
              "(target text) appears in the translation. A line that does not parse gets a "
              "warning and an empty output line",
              [](const TranslateOptions& t) { return json(format_name(t.input_format)); },
              [](TranslateOptions& t, const json& v) {
                t.input_format = parse_input_format(v.get<std::string>());
              }),
          {"text", "tsv", "jsonl"}),
      with_choices(
          option(
              "split", OptionInfo::kChoice,
              "none: a line is one segment; sentences: each line's sentences are translated "
              "each on its own and joined as the line spaced them (one line in, one line "
              "out); paragraphs: the lines between blank lines (wrapped text) are one "
              "paragraph, split into sentences and written as one line, blank lines kept. "
              "Always: a sentence longer than the model takes is cut at clause boundaries "
              "into pieces it can take, with a warning",
              [](const TranslateOptions& t) { return json(split_name(t.split)); },
              [](TranslateOptions& t, const json& v) {
                for (SplitMode m : {SplitMode::none, SplitMode::sentences, SplitMode::paragraphs})
                  if (v == split_name(m)) t.split = m;
              }),
          {"none", "sentences", "paragraphs"}),
      [] {
        Spec o =
            member_option("source_language", OptionInfo::kText, &TranslateOptions::source_language,
                          "The source's language (de, en-GB, zh): its sentence rules and "
                          "abbreviations (\"z. B.\", \"Mr.\") for {split}; default English's");
        o.needs = "split";
        return o;
      }(),
      member_option("source_lang", OptionInfo::kText, &TranslateOptions::source_lang,
                    "A multilingual model's source language, by its code (NLLB: eng_Latn, "
                    "M2M-100: en; nmt info lists them); jsonl lines may set \"source_lang\""),
      member_option("target_lang", OptionInfo::kText, &TranslateOptions::target_lang,
                    "A multilingual model's target language, by its code (NLLB: zho_Hans, "
                    "M2M-100: zh, OPUS-MT: zho); jsonl lines may set \"target_lang\""),
      output_flag("alignments", &ResultFormat::alignments,
                  "Append ' ||| 0-0 1-2 ...' (source word-target word, counted from 0 as in "
                  "Moses and fast_align) from the cross-attention averaged over heads; jsonl: an "
                  "\"alignment\" field"),
      with_range(
          member_option("alignment_layer", OptionInfo::kInt, &TranslateOptions::alignment_layer,
                        "Decoder layer of {alignments} and {attention}, from 1 (0: the "
                        "second-to-last)"),
          0, 1024),
      output_flag("attention", &ResultFormat::attention,
                  "With {format} jsonl: the best translation's cross-attention (target piece x "
                  "source piece, heads averaged) and the pieces, as \"attention\""),
  };
}

std::vector<Spec> batching_options() {
  using T = TranslateOptions;
  return {
      with_range(
          member_option("batch_tokens", OptionInfo::kInt, &T::batch_tokens,
                        "Source tokens per batch (0: " + std::to_string(kBatchTokensOneThread) +
                            " for workers of one thread (" +
                            std::to_string(kBatchTokensOneThreadInt8) + " in int8), " +
                            std::to_string(kBatchTokensThreaded) + " for workers of several)"),
          0, 1 << 24),
      with_choices(option(
                       "batching", OptionInfo::kChoice,
                       "static: each batch runs until its last sentence ends; continuous: as "
                       "sentences finish, the next ones join the running batch (the output is the "
                       "same)",
                       [](const T& t) { return json(t.continuous ? "continuous" : "static"); },
                       [](T& t, const json& v) { t.continuous = v == "continuous"; }),
                   {"continuous", "static"}),
      with_range(member_option("window", OptionInfo::kInt, &T::window,
                               "Lines read ahead and sorted by length"),
                 1, 1 << 20),
      with_range(member_option(
                     "threads", OptionInfo::kInt, &T::threads,
                     "CPU threads of each worker (0: the cores shared out among the workers that "
                     "a window keeps busy)"),
                 0, 1024),
      with_range(member_option(
                     "workers", OptionInfo::kInt, &T::workers,
                     "Translators sharing the one loaded model, each on its own threads; batches "
                     "are shared out among them, and the output is the same for any number (0: "
                     "min(cores, 4))"),
                 0, 256),
      with_choices(
          option(
              "shortlist", OptionInfo::kChoice,
              "Restrict each sentence's output to the model's vocabulary shortlist for its "
              "source: on, off, or auto (on where the model's training run measured it to "
              "cost at most " +
                  shortlist_cost_limit() +
                  " BLEU on its validation set; nmt info shows what it measured)",
              [](const T& t) { return json(shortlist_name(t.shortlist)); },
              [](T& t, const json& v) {
                for (ShortlistUse u :
                     {ShortlistUse::automatic, ShortlistUse::on, ShortlistUse::off})
                  if (v == shortlist_name(u)) t.shortlist = u;
              }),
          {"auto", "on", "off"}),
  };
}

std::vector<Spec> make_table() {
  std::vector<Spec> table, search_tail;
  for (const OptionSpec<SearchOptions>& s : search_options())
    (s.key.rfind("max_length", 0) == 0 ? search_tail : table)
        .push_back(lift(s, &TranslateOptions::search));
  for (auto part : {output_options(), batching_options(), search_tail})
    table.insert(table.end(), part.begin(), part.end());
  return table;
}

}  // namespace

const std::vector<OptionSpec<TranslateOptions>>& translate_options() {
  static const std::vector<Spec> table = make_table();
  return table;
}

void apply_translate_json(const json& j, TranslateOptions& opts) {
  if (!j.is_object())
    throw InputError("translation options: expected a JSON object, got " +
                     std::string(j.type_name()));
  std::vector<std::string> keys;
  for (const Spec& o : translate_options()) keys.push_back(o.key);
  for (auto it = j.begin(); it != j.end(); ++it) {
    const Spec* o = find_option(translate_options(), it.key());
    if (!o)
      throw InputError("unknown translation option \"" + it.key() + "\"" +
                       did_you_mean(it.key(), keys));
    if (const std::string why = o->problem(it.value()); !why.empty())
      throw about_option<InputError>(it.key(), ": " + why);
    o->set(opts, it.value());
    opts.given.insert(it.key());
  }
}

json translate_options_json(const TranslateOptions& opts) {
  json j = json::object();
  for (const Spec& o : translate_options()) j[o.key] = o.get(opts);
  return j;
}

void check_options(TranslateOptions& o) {
  // HTML's runs of text are paragraphs: they are split into sentences
  // unless the user says otherwise.
  if (o.output.format == OutputFormat::html && !o.given.count("split"))
    o.split = SplitMode::sentences;
  for (const Spec& spec : translate_options()) {
    if (spec.type != OptionInfo::kText)
      if (const std::string why = spec.problem(spec.get(o)); !why.empty())
        throw about_option<UsageError>(spec.key, ": " + why);
    const bool splits = spec.needs == "split" && o.split != SplitMode::none;
    if (!spec.needs.empty() && o.given.count(spec.key) && !o.given.count(spec.needs) && !splits)
      throw about_option<UsageError>(spec.key, "means nothing without {" + spec.needs + "}");
  }
  SearchOptions& s = o.search;
  if (!s.sampling.empty()) {
    if (o.given.count("beam") && s.beam > 1)
      throw about_option<UsageError>(
          "sampling", "draws one token at a time: it takes {beam} 1 ({n_best} N draws N samples)");
    if (o.shortlist == ShortlistUse::on)
      throw about_option<UsageError>(
          "shortlist", "on restricts the search; {sampling} draws from the whole vocabulary");
    s.beam = s.n_best;  // the rows a sentence holds: one per sample
  }
  validate(s);
  if (o.models.empty()) throw about_option<UsageError>("model", ": none given");
  if (s.n_best > s.beam)
    throw about_option<UsageError>(
        "n_best", std::to_string(s.n_best) + " exceeds {beam} " + std::to_string(s.beam));
  if (o.output.alignments && s.n_best > 1 && o.output.format == OutputFormat::text)
    throw about_option<UsageError>(
        "alignments", "belongs to the best translation; with {n_best} use {format} jsonl");
  if (o.split == SplitMode::paragraphs && o.input_format != InputFormat::text)
    throw about_option<UsageError>("split", "paragraphs joins lines of text; {input_format} " +
                                                std::string(format_name(o.input_format)) +
                                                " has a request a line");
  if (o.output.attention && o.split != SplitMode::none)
    throw about_option<UsageError>("attention",
                                   "draws one sentence's map; with {split} a line holds several");
  if (o.output.format == OutputFormat::html) {
    // A fragment of HTML is a document, not a line: what is written is the
    // document, and its flows are translated a sentence at a time.
    const char* line_only = o.output.scores                       ? "scores"
                            : o.output.alignments                 ? "alignments"
                            : s.n_best > 1                        ? "n_best"
                            : o.output.attention                  ? "attention"
                            : o.input_format != InputFormat::text ? "input_format"
                            : o.split == SplitMode::paragraphs    ? "split"
                                                                  : nullptr;
    if (line_only)
      throw about_option<UsageError>(line_only,
                                     "belongs to lines of text; {format} html writes the "
                                     "document back as HTML");
  }
  if (o.output.attention && o.output.format != OutputFormat::jsonl)
    throw about_option<UsageError>("attention",
                                   "writes a matrix per line; it needs {format} jsonl");
  o.output.n_best = s.n_best;
}

}  // namespace nmt
