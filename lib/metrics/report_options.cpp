// The options of sacreBLEU's report, declared once (core/option_spec.h):
// their keys, ranges, choices and help. `nmt score` registers its metric
// options from this table, and check_report_options() refuses what
// sacreBLEU refuses.
#include <algorithm>

#include "core/error.h"
#include "metrics/report.h"
#include "metrics/tokenizers.h"

namespace nmt::metrics {

using json = nlohmann::json;

namespace {

using Spec = OptionSpec<ReportOptions>;

constexpr auto option = &make_option<ReportOptions>;

// A member of ReportOptions, or of one of its metrics' options.
template <class Part, class M>
Spec member(const char* key, OptionInfo::Type type, Part ReportOptions::*part, M Part::*m,
            std::string help) {
  return option(
      key, type, std::move(help), [part, m](const ReportOptions& o) { return json(o.*part.*m); },
      [part, m](ReportOptions& o, const json& v) { o.*part.*m = v.get<M>(); });
}

std::vector<Spec> bleu_options() {
  using R = ReportOptions;
  return {
      [] {
        Spec o = with_choices(
            member_option("metrics", OptionInfo::kChoice, &R::metrics,
                          "Metrics: any of bleu, chrf, ter (sacrebleu's -m; {model} is the "
                          "model in nmt)"),
            {"bleu", "chrf", "ter"});
        o.list = true;
        return o;
      }(),
      with_choices(
          option(
              "tokenize", OptionInfo::kChoice,
              std::string("BLEU tokeniser (-tok): 13a, intl, none, char, zh, ja-mecab, "
                          "flores101, flores200, spm (= flores101), spBLEU-1K; ko-mecab is "
                          "refused (mecab-ko is not in Debian). ja-mecab is MeCab -Owakati "
                          "with Debian's IPA dictionary (") +
                  kMecabIpadicDir +
                  ", 392,127 entries): sacreBLEU's numbers as it tokenises with that "
                  "dictionary, though sacreBLEU's own size check accepts only pip's "
                  "392,126. The SentencePiece ones need {spm_model}",
              [](const R& o) { return json(tokenizer_name(o.bleu.tokenizer)); },
              [](R& o, const json& v) {
                o.bleu.tokenizer = parse_tokenizer(v.get<std::string>());
              }),
          std::vector<std::string>(std::begin(kTokenizerNames), std::end(kTokenizerNames))),
      [] {
        Spec o =
            member("spm_model", OptionInfo::kText, &R::bleu, &BleuOptions::spm_model,
                   "SentencePiece model for -tok flores101, flores200, spm, spBLEU-1K (sacreBLEU "
                   "downloads it: FLORES-101 sacrebleu_tokenizer_spm.model, FLORES-200 "
                   "flores200sacrebleuspm, spBLEU-1K spbleu-1k_tokenizer_spm.model; nmt takes the "
                   "file)");
        o.path = true;
        return o;
      }(),
      member("lowercase", OptionInfo::kFlag, &R::bleu, &BleuOptions::lowercase,
             "Case-insensitive BLEU (-lc)"),
      with_choices(
          option(
              "smooth_method", OptionInfo::kChoice, "BLEU smoothing: exp, floor, add-k or none",
              [](const R& o) { return json(smoothing_name(o.bleu.smooth)); },
              [](R& o, const json& v) { o.bleu.smooth = parse_smoothing(v.get<std::string>()); }),
          {"exp", "floor", "add-k", "none"}),
      with_range(
          option(
              "smooth_value", OptionInfo::kNumber,
              "Value for floor (0.1 if not given) or add-k (1) smoothing (-sv)",
              [](const R& o) { return o.bleu.smooth_value ? json(*o.bleu.smooth_value) : json(); },
              [](R& o, const json& v) {
                if (v.is_null())
                  o.bleu.smooth_value.reset();
                else
                  o.bleu.smooth_value = v.get<double>();
              }),
          0, 1e6),
      member_option("sentence_level", OptionInfo::kFlag, &R::sentence_level,
                    "One score per line (BLEU with effective order, as sentence_bleu) (-sl)"),
  };
}

std::vector<Spec> chrf_ter_options() {
  using R = ReportOptions;
  using C = ChrfOptions;
  using T = TerOptions;
  constexpr auto kFlag = OptionInfo::kFlag;
  return {
      with_range(member("chrf_char_order", OptionInfo::kInt, &R::chrf, &C::char_order,
                        "chrF character n-gram order (-cc)"),
                 1, 100),
      with_range(member("chrf_word_order", OptionInfo::kInt, &R::chrf, &C::word_order,
                        "chrF word n-gram order, 2 = chrF++ (-cw)"),
                 0, 100),
      with_range(member("chrf_beta", OptionInfo::kInt, &R::chrf, &C::beta, "chrF beta"), 1, 100),
      member("chrf_whitespace", kFlag, &R::chrf, &C::whitespace,
             "Keep whitespace in chrF character n-grams"),
      member("chrf_lowercase", kFlag, &R::chrf, &C::lowercase, "Case-insensitive chrF"),
      member("ter_case_sensitive", kFlag, &R::ter, &T::case_sensitive,
             "Case-sensitive TER (TER lowercases by default)"),
      member("ter_asian_support", kFlag, &R::ter, &T::asian_support,
             "TER: split CJK characters (with {ter_normalized}) and remove CJK punctuation (with "
             "{ter_no_punct})"),
      member("ter_no_punct", kFlag, &R::ter, &T::no_punct, "TER: remove punctuation"),
      member("ter_normalized", kFlag, &R::ter, &T::normalized,
             "TER: tercom's normalisation and punctuation tokenisation"),
  };
}

std::vector<Spec> output_options() {
  using R = ReportOptions;
  return {
      with_choices(
          option(
              "format", OptionInfo::kChoice,
              "text: sacrebleu's one-line result; json: its JSON (sacrebleu's default)",
              [](const R& o) { return json(o.format == ReportFormat::json ? "json" : "text"); },
              [](R& o, const json& v) {
                o.format = v == "json" ? ReportFormat::json : ReportFormat::text;
              }),
          {"text", "json"}),
      with_range(member_option("width", OptionInfo::kInt, &R::width,
                               "Decimals of the score (sacrebleu's default is 1)"),
                 0, 10),
      member_option("signature", OptionInfo::kFlag, &R::signature,
                    "Put the sacreBLEU signature in the text line"),
      member_option("score_only", OptionInfo::kFlag, &R::score_only, "Print only the score"),
  };
}

// A paired test as a flag of its own: naming it chooses it.
Spec test_flag(const char* key, ReportTest test, const char* help) {
  return option(
      key, OptionInfo::kFlag, help,
      [test](const ReportOptions& o) { return json(o.paired == test); },
      [test](ReportOptions& o, const json& v) {
        if (v.get<bool>())
          o.paired = test;
        else if (o.paired == test)
          o.paired = ReportTest::none;
      });
}

std::vector<Spec> test_options() {
  using R = ReportOptions;
  return {
      test_flag("paired_bs", ReportTest::bootstrap,
                "Paired bootstrap resampling test of each {input} system against the first "
                "(-pbs); SACREBLEU_SEED seeds it (default 12345, none)"),
      test_flag("paired_ar", ReportTest::randomization,
                "Paired approximate randomization test against the first {input} system (-par)"),
      member_option("paired_bs_n", OptionInfo::kInt, &R::paired_bs_n,
                    "Bootstrap resamples of {paired_bs}; 0 or less: 1000 (-pbsn)"),
      member_option("paired_ar_n", OptionInfo::kInt, &R::paired_ar_n,
                    "Trials of {paired_ar}; 0 or less: 10000 (-parn)"),
      member_option("confidence", OptionInfo::kFlag, &R::confidence,
                    "Bootstrap 95% confidence interval of one system (-ci)"),
      member_option("confidence_n", OptionInfo::kInt, &R::confidence_n,
                    "Bootstrap resamples of {confidence}; 1 or less: no interval (-cin)"),
  };
}

std::vector<Spec> make_table() {
  std::vector<Spec> table;
  for (auto part : {bleu_options(), chrf_ter_options(), output_options(), test_options()})
    table.insert(table.end(), part.begin(), part.end());
  return table;
}

}  // namespace

const std::vector<OptionSpec<ReportOptions>>& report_options() {
  static const std::vector<Spec> table = make_table();
  return table;
}

void apply_report_json(const json& j, ReportOptions& o) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const Spec* spec = find_option(report_options(), it.key());
    if (!spec) throw InputError("unknown scoring option \"" + it.key() + "\"");
    if (const std::string why = spec->problem(it.value()); !why.empty())
      throw about_option<UsageError>(it.key(), ": " + why);
    spec->set(o, it.value());
    o.given.insert(it.key());
  }
}

void check_report_options(const ReportOptions& o) {
  std::vector<std::string> seen;
  for (const std::string& m : o.metrics) {
    if (std::find(seen.begin(), seen.end(), m) != seen.end())
      throw UsageError("score: {metrics} names " + m + " twice");
    seen.push_back(m);
  }
  if (o.sentence_level && o.metrics.size() > 1)
    throw UsageError("score: only one metric can be used with {sentence_level}");
  const bool has_bleu = std::find(seen.begin(), seen.end(), "bleu") != seen.end();
  if (o.given.count("lowercase") && !has_bleu)
    throw UsageError(
        "score: {lowercase} applies to BLEU, as in sacreBLEU; for chrF use {chrf_lowercase} "
        "(TER is case-insensitive unless {ter_case_sensitive})");
  const TokenizerKind kind = o.bleu.tokenizer;
  const bool spm = tokenizer_needs_spm_model(kind);
  const std::string tok = tokenizer_name(kind);
  if (!o.bleu.spm_model.empty() && !spm)
    throw UsageError(
        "score: {spm_model} applies to -tok flores101, flores200, spm and spBLEU-1K, not -tok " +
        tok);
  if (!has_bleu || !spm || !o.bleu.spm_model.empty()) return;
  // What sacreBLEU's SPM_MODELS downloads, and where it keeps it.
  const char* what = "FLORES-101";
  const char* file = "sacrebleu_tokenizer_spm.model";
  const char* url =
      "https://dl.fbaipublicfiles.com/fairseq/models/flores/sacrebleu_tokenizer_spm.model";
  if (kind == TokenizerKind::kFlores200) {
    what = "FLORES-200";
    file = "flores200sacrebleuspm";
    url = "https://tinyurl.com/flores200sacrebleuspm";
  } else if (kind == TokenizerKind::kSpBleu1K) {
    what = "spBLEU-1K";
    file = "spbleu-1k_tokenizer_spm.model";
    url = "https://www.dlnlp.ai/spBLEU-1K/spbleu-1k_tokenizer_spm.model";
  }
  throw UsageError("score: -tok " + tok + " needs {spm_model} FILE: the " + what +
                   " SentencePiece model (sacreBLEU downloads it as ~/.sacrebleu/models/" + file +
                   " from " + url + ")");
}

}  // namespace nmt::metrics
