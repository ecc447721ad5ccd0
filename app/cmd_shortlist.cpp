// nmt shortlist: a vocabulary shortlist for any model (one that nmt train
// made without it, or an imported one), from parallel text, written with the
// model into a new file.
#include <cstdio>
#include <optional>

#include "commands.h"
#include "decode/shortlist_cost.h"
#include "io/output_file.h"
#include "io/text_file.h"
#include "metrics/tokenizers.h"
#include "model/loaded_model.h"
#include "model/model_file.h"
#include "model/shortlist.h"
#include "ops/ops.h"
#include "train/data.h"

namespace nmt::app {

namespace {

struct Opts {
  std::string model, out, valid_src, valid_tgt, tokenize = "13a";
  std::vector<std::string> src, tgt;
  ShortlistOptions table;
  int beam = 4;
  int threads = 0;
};

// Text whose tokens the model lacks (or none at all) would give a table
// that lets nothing through and a measurement that means nothing: refused
// by file before any work, or warned about with the share of unknown tokens.
void check_tokens(const LoadedModel& m, const std::vector<std::vector<int32_t>>& src,
                  const std::vector<std::vector<int32_t>>& tgt, const std::string& src_file,
                  const std::string& tgt_file) {
  bool pair = false;
  for (size_t i = 0; i < src.size() && !pair; ++i) pair = !src[i].empty() && !tgt[i].empty();
  if (!pair)
    throw InputError(src_file + " and " + tgt_file + ": no line pair has text on both sides (" +
                     std::to_string(src.size()) + " lines, blank or only spaces)");
  const int32_t unk = m.config.unk_id;
  for (const std::string& w : {check_known_tokens(token_coverage(src, unk), "source", src_file),
                               check_known_tokens(token_coverage(tgt, unk), "target", tgt_file)})
    if (!w.empty()) io::warn_on_stderr(w);
}

// The pairs of several corpora, encoded with the model's vocabularies.
void read_encoded(const LoadedModel& m, const std::vector<std::string>& src_files,
                  const std::vector<std::string>& tgt_files, std::vector<std::vector<int32_t>>& src,
                  std::vector<std::vector<int32_t>>& tgt) {
  for (size_t k = 0; k < src_files.size(); ++k) {
    std::vector<std::string> s, t;
    io::TextChecks checks;
    checks.warn = io::warn_on_stderr;
    read_parallel(src_files[k], tgt_files[k], s, t, checks);
    std::vector<std::vector<int32_t>> es(s.size()), et(t.size());
    for (size_t i = 0; i < s.size(); ++i) {
      es[i] = m.src_vocab().encode(s[i]);
      et[i] = m.tgt_vocab().encode(t[i]);
      s[i].clear(), s[i].shrink_to_fit();
    }
    check_tokens(m, es, et, src_files[k], tgt_files[k]);
    src.insert(src.end(), std::make_move_iterator(es.begin()), std::make_move_iterator(es.end()));
    tgt.insert(tgt.end(), std::make_move_iterator(et.begin()), std::make_move_iterator(et.end()));
  }
}

void run(const Opts& o) {
  ops::set_num_threads(o.threads);
  if (o.src.size() != o.tgt.size())
    throw UsageError("--src names " + std::to_string(o.src.size()) + " file(s) and --tgt " +
                     std::to_string(o.tgt.size()) + "; give one target file per source file");
  if (o.valid_src.empty() != o.valid_tgt.empty())
    throw UsageError("--valid-src and --valid-tgt go together");
  io::check_output_path(o.out, "-o");
  std::vector<io::NamedPath> inputs = {{"-m", o.model}};
  for (const auto& f : o.src) inputs.push_back({"--src", f});
  for (const auto& f : o.tgt) inputs.push_back({"--tgt", f});
  if (!o.valid_src.empty()) {
    inputs.push_back({"--valid-src", o.valid_src});
    inputs.push_back({"--valid-tgt", o.valid_tgt});
  }
  io::check_not_an_input({"-o", o.out}, inputs);
  for (const auto& [option, path] : inputs) io::check_input_path(path, option);
  metrics::parse_tokenizer(o.tokenize);  // a bad name fails before any work

  const LoadedModel m = load_model(o.model);
  // The set to measure on first: a blank one (BLEU against empty
  // references) is refused by option before the table is built.
  std::vector<std::string> vs, refs;
  if (!o.valid_src.empty()) {
    io::TextChecks checks;
    checks.warn = io::warn_on_stderr;
    read_parallel(o.valid_src, o.valid_tgt, vs, refs, checks);
    std::vector<std::vector<int32_t>> es, et;
    for (size_t i = 0; i < vs.size(); ++i)
      es.push_back(m.src_vocab().encode(vs[i])), et.push_back(m.tgt_vocab().encode(refs[i]));
    check_tokens(m, es, et, "--valid-src " + o.valid_src, "--valid-tgt " + o.valid_tgt);
  }
  std::vector<std::vector<int32_t>> src, tgt;
  read_encoded(m, o.src, o.tgt, src, tgt);
  std::vector<const std::vector<int32_t>*> sp, tp;
  for (size_t i = 0; i < src.size(); ++i) sp.push_back(&src[i]), tp.push_back(&tgt[i]);
  const Shortlist sl = Shortlist::build(sp, tp, m.config.source_vocab(), m.config.vocab_size, o.table);
  const std::string from = std::to_string(src.size()) + " pairs of " + o.src[0] +
                           (o.src.size() > 1 ? " and " + std::to_string(o.src.size() - 1) + " more" : "");
  const ModelConfig& c = m.config;
  if (!sl.allows_other_than({c.pad_id, c.unk_id, c.bos_id, c.eos_id}))
    throw InputError("the shortlist from " + from +
                     " lets no target piece through but <unk> and the special ones: is the text "
                     "tokenised as the model expects?");
  std::fprintf(stderr, "nmt shortlist: %lld entries from %s\n",
               static_cast<long long>(sl.entries()), from.c_str());
  std::optional<ShortlistCost> cost;
  if (!o.valid_src.empty()) {
    SearchOptions so;
    so.beam = o.beam;
    cost = measure_shortlist(m, sl, vs, refs, so, o.tokenize);
    std::fprintf(stderr,
                 "nmt shortlist: BLEU %.2f with it, %.2f without, on %lld sentences of %s at "
                 "beam %d (%.1f s against %.1f s; %.2f%% of the reference pieces in reach): %s\n",
                 cost->bleu_shortlist, cost->bleu_full, static_cast<long long>(cost->sentences),
                 o.valid_src.c_str(), o.beam, cost->seconds_shortlist, cost->seconds_full,
                 cost->ref_pieces ? 100.0 * double(cost->ref_pieces_covered) / double(cost->ref_pieces)
                                  : 100.0,
                 cost->on_by_default() ? "translation uses it by default"
                                       : "too costly to be on by default; --shortlist on uses it");
  } else {
    std::fprintf(stderr,
                 "nmt shortlist: no --valid-src to measure it on, so translation uses it only "
                 "with --shortlist on\n");
  }
  // Everything the file held, with the shortlist (a new one replaces an old one).
  FileContents f = read_safetensors(o.model);
  std::map<std::string, std::string> meta;
  for (const auto& [k, v] : f.metadata)
    if (k != "format" && k != "format_version" && k != "config" && k != "quantization") meta[k] = v;
  meta["shortlist"] = shortlist_metadata(sl, from, cost ? &*cost : nullptr);
  VocabTensors tensors = vocab_tensors(f);
  tensors[kShortlistTensor] = sl.serialise();
  const bool int8 = f.metadata.count("quantization") && f.metadata.at("quantization") == "int8";
  save_model(o.out, *m.net, tensors, meta, int8);
  std::fprintf(stderr, "nmt shortlist: wrote %s\n", o.out.c_str());
}

}  // namespace

void register_shortlist(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "shortlist",
      "Build a vocabulary shortlist for a model from parallel text and write the model with it: "
      "for each source piece, the target pieces it is translated to (from co-occurrence), plus "
      "the most frequent, so that translation computes only those columns of the output. With "
      "a validation set, its BLEU cost is measured, and translation uses it by default if that "
      "is at most " +
          shortlist_cost_limit() + " BLEU");
  cmd->add_option("-m,--model", o->model, "The model file")->required();
  cmd->add_option("--src", o->src, "Source side of the parallel text (plain or .gz; several: "
                                   "several corpora)")
      ->required();
  cmd->add_option("--tgt", o->tgt, "Target side, one file per --src file")->required();
  cmd->add_option("--valid-src", o->valid_src, "Source side of a set to measure the BLEU cost on");
  cmd->add_option("--valid-tgt", o->valid_tgt, "Its references");
  // As nmt train's: the SentencePiece tokenisers need a model file that
  // only nmt score takes.
  cmd->add_option("--valid-tokenize", o->tokenize,
                  "sacreBLEU tokeniser for that BLEU: 13a, intl, char, zh, ja-mecab, none")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(metrics::kValidationTokenizerNames),
                                                     std::end(metrics::kValidationTokenizerNames))))
      ->capture_default_str();
  cmd->add_option("--beam", o->beam, "Beam size of the measurement")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--per-source", o->table.per_source,
                  "Likeliest target pieces kept per source piece (more are added where a "
                  "training pair would otherwise lose a piece)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd->add_option("--frequent", o->table.frequent,
                  "Most frequent target pieces, allowed for every sentence")
      ->check(CLI::Range(0, 10000000))
      ->default_str("an eighth of the target vocabulary");
  cmd->add_option("-o,--out", o->out, "The model file to write, with the shortlist")->required();
  add_threads_option(cmd, o->threads);
  cmd->callback([o] { run(*o); });
}

}  // namespace nmt::app
