#include "service/shortlist_service.h"

#include <iterator>
#include <map>
#include <optional>

#include "core/error.h"
#include "core/format.h"
#include "decode/shortlist_cost.h"
#include "io/output_file.h"
#include "io/text_file.h"
#include "metrics/tokenizers.h"
#include "model/loaded_model.h"
#include "model/model_file.h"
#include "train/data.h"

namespace nmt {

namespace {

using Warn = std::function<void(const std::string&)>;

// Text whose tokens the model lacks (or none at all) would give a table
// that lets nothing through and a measurement that means nothing: refused
// by file before any work, or warned about with the share of unknown tokens.
void check_tokens(const LoadedModel& m, const std::vector<std::vector<int32_t>>& src,
                  const std::vector<std::vector<int32_t>>& tgt, const std::string& src_file,
                  const std::string& tgt_file, const Warn& warn) {
  bool pair = false;
  for (size_t i = 0; i < src.size() && !pair; ++i) pair = !src[i].empty() && !tgt[i].empty();
  if (!pair)
    throw InputError(src_file + " and " + tgt_file + ": no line pair has text on both sides (" +
                     std::to_string(src.size()) + " lines, blank or only spaces)");
  const int32_t unk = m.config.unk_id;
  for (const std::string& w : {check_known_tokens(token_coverage(src, unk), "source", src_file),
                               check_known_tokens(token_coverage(tgt, unk), "target", tgt_file)})
    if (!w.empty()) warn(w);
}

// The pairs of several corpora, encoded with the model's vocabularies.
void read_encoded(const LoadedModel& m, const std::vector<std::string>& src_files,
                  const std::vector<std::string>& tgt_files, std::vector<std::vector<int32_t>>& src,
                  std::vector<std::vector<int32_t>>& tgt, const Warn& warn) {
  for (size_t k = 0; k < src_files.size(); ++k) {
    std::vector<std::string> s, t;
    io::TextChecks checks;
    checks.warn = warn;
    read_parallel(src_files[k], tgt_files[k], s, t, checks);
    std::vector<std::vector<int32_t>> es(s.size()), et(t.size());
    for (size_t i = 0; i < s.size(); ++i) {
      es[i] = m.src_vocab().encode(s[i]);
      et[i] = m.tgt_vocab().encode(t[i]);
      s[i].clear(), s[i].shrink_to_fit();
    }
    check_tokens(m, es, et, src_files[k], tgt_files[k], warn);
    src.insert(src.end(), std::make_move_iterator(es.begin()), std::make_move_iterator(es.end()));
    tgt.insert(tgt.end(), std::make_move_iterator(et.begin()), std::make_move_iterator(et.end()));
  }
}

}  // namespace

void add_shortlist(const ShortlistJob& o, const std::function<void(const std::string&)>& log,
                   const Warn& warn) {
  if (o.src.size() != o.tgt.size())
    throw UsageError("{src} names " + std::to_string(o.src.size()) + " file(s) and {tgt} " +
                     std::to_string(o.tgt.size()) + "; give one target file per source file");
  if (o.valid_src.empty() != o.valid_tgt.empty())
    throw UsageError("{valid_src} and {valid_tgt} go together");
  io::check_output_path(o.out, "{out}");
  std::vector<io::NamedPath> inputs = {{"{model}", o.model}};
  for (const auto& f : o.src) inputs.push_back({"{src}", f});
  for (const auto& f : o.tgt) inputs.push_back({"{tgt}", f});
  if (!o.valid_src.empty()) {
    inputs.push_back({"{valid_src}", o.valid_src});
    inputs.push_back({"{valid_tgt}", o.valid_tgt});
  }
  io::check_not_an_input({"{out}", o.out}, inputs);
  for (const auto& [option, path] : inputs) io::check_input_path(path, option);
  metrics::parse_tokenizer(o.valid_tokenize);  // a bad name fails before any work

  const LoadedModel m = load_model(o.model);
  // The set to measure on first: a blank one (BLEU against empty
  // references) is refused by option before the table is built.
  std::vector<std::string> vs, refs;
  if (!o.valid_src.empty()) {
    io::TextChecks checks;
    checks.warn = warn;
    read_parallel(o.valid_src, o.valid_tgt, vs, refs, checks);
    std::vector<std::vector<int32_t>> es, et;
    for (size_t i = 0; i < vs.size(); ++i)
      es.push_back(m.src_vocab().encode(vs[i])), et.push_back(m.tgt_vocab().encode(refs[i]));
    check_tokens(m, es, et, "{valid_src} " + o.valid_src, "{valid_tgt} " + o.valid_tgt, warn);
  }
  std::vector<std::vector<int32_t>> src, tgt;
  read_encoded(m, o.src, o.tgt, src, tgt, warn);
  std::vector<const std::vector<int32_t>*> sp, tp;
  for (size_t i = 0; i < src.size(); ++i) sp.push_back(&src[i]), tp.push_back(&tgt[i]);
  const Shortlist sl =
      Shortlist::build(sp, tp, m.config.source_vocab(), m.config.vocab_size, o.table);
  const std::string from =
      std::to_string(src.size()) + " pairs of " + o.src[0] +
      (o.src.size() > 1 ? " and " + std::to_string(o.src.size() - 1) + " more" : "");
  const ModelConfig& c = m.config;
  if (!sl.allows_other_than({c.pad_id, c.unk_id, c.bos_id, c.eos_id}))
    throw InputError("the shortlist from " + from +
                     " lets no target piece through but <unk> and the special ones: is the text "
                     "tokenised as the model expects?");
  log(std::to_string(sl.entries()) + " entries from " + from);
  std::optional<ShortlistCost> cost;
  if (!o.valid_src.empty()) {
    SearchOptions so;
    so.beam = o.beam;
    cost = measure_shortlist(m, sl, vs, refs, so, o.valid_tokenize);
    const double reach = cost->ref_pieces
                             ? 100.0 * double(cost->ref_pieces_covered) / double(cost->ref_pieces)
                             : 100.0;
    log("BLEU " + format_number("%.2f", cost->bleu_shortlist) + " with it, " +
        format_number("%.2f", cost->bleu_full) + " without, on " + std::to_string(cost->sentences) +
        " sentences of " + o.valid_src + " at beam " + std::to_string(o.beam) + " (" +
        format_number("%.1f", cost->seconds_shortlist) + " s against " +
        format_number("%.1f", cost->seconds_full) + " s; " + format_number("%.2f", reach) +
        "% of the reference pieces in reach): " +
        (cost->on_by_default() ? "translation uses it by default"
                               : "too costly to be on by default; {shortlist} on uses it"));
  } else {
    log("no {valid_src} to measure it on, so translation uses it only with {shortlist} on");
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
  log("wrote " + o.out);
}

}  // namespace nmt
