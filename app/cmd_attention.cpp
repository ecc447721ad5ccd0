// `nmt attention`: one sentence's attention as a picture. The sentence is
// translated (or --target is taken as its translation), the teacher-forced
// pass over the pair gives every layer's attention, and the chosen matrix is
// drawn with its tokens on both axes (PNG, SVG or PDF by the extension).
#include <iostream>
#include <memory>

#include "commands.h"
#include "core/error.h"
#include "decode/attention_maps.h"
#include "decode/search.h"
#include "io/output_file.h"
#include "io/text_file.h"
#include "model/loaded_model.h"
#include "plot/plot.h"

namespace nmt::app {
namespace {

struct Opts {
  std::string model, sentence, target, output, kind = "cross", compute, device = "cpu";
  int layer = 0;  // 1-based; 0: the second-to-last
  int head = 0;   // 1-based; 0: the mean of the heads
  bool mean = false;
  bool target_given = false;
  SearchOptions search;
};

// Pieces as labels: the word-start mark dropped where a piece has more.
std::vector<std::string> labels(std::vector<std::string> pieces) {
  for (auto& p : pieces)
    if (p.compare(0, kWordStart.size(), kWordStart) == 0 && p.size() > kWordStart.size())
      p.erase(0, kWordStart.size());  // a lone mark (a word start split off) stays visible
  return pieces;
}

void run(Opts& o) {
  // Refused before any work: a wrong extension, a directory, the model.
  io::check_output_path(o.output, "-o");
  plot::format_of(o.output);
  io::check_not_an_input({"-o", o.output}, {{"-m", o.model}});
  io::check_input_path(o.model, "-m");
  const std::string sentence = io::checked_text(o.sentence, "the sentence", io::warn_on_stderr);
  if (sentence.find_first_not_of(" \t\r") == std::string::npos)
    throw UsageError("the sentence is empty");
  if (o.target_given && o.target.find_first_not_of(" \t\r") == std::string::npos)
    throw UsageError("--target is empty: give the translation to draw, or leave --target out");
  LoadedModel model = load_model(o.model, o.compute, nullptr, open_device(o.device),
                                 ShortlistLoad::Skip, WeightsUse::ProductsOnly);
  const ModelConfig& cfg = model.config;
  const AttentionKind kind = o.kind == "self"           ? AttentionKind::EncoderSelf
                             : o.kind == "decoder-self" ? AttentionKind::DecoderSelf
                                                        : AttentionKind::Cross;
  const int layers = kind == AttentionKind::EncoderSelf ? cfg.encoder_layers : cfg.decoder_layers;
  const int layer = o.layer > 0 ? o.layer - 1 : std::max(0, layers - 2);
  std::vector<int32_t> src = model.src_vocab().encode(sentence);
  const int64_t max_src = cfg.max_positions - cfg.source_tokens(0);
  if (static_cast<int64_t>(src.size()) > max_src)
    throw InputError("the sentence's " + std::to_string(src.size()) +
                     " subwords exceed the model's limit of " + std::to_string(max_src));
  std::vector<int32_t> out;
  if (!o.target.empty()) {
    out = model.tgt_vocab().encode(io::checked_text(o.target, "--target", io::warn_on_stderr));
    if (static_cast<int64_t>(out.size()) > cfg.max_positions - 1)
      throw InputError("--target's subwords exceed the model's limit");
  } else {
    DecodeState st;
    auto hyps = search(*model.net, std::vector<std::vector<int32_t>>{src}, o.search, st);
    if (!hyps[0].empty()) out = hyps[0][0].tokens;
  }
  Activations acts;
  const AttentionMap m =
      attention_map(*model.net, src, out, kind, layer, o.head > 0 ? o.head - 1 : -1, acts);
  std::vector<std::string> sp = labels(model.src_vocab().pieces(src)),
                           tp = labels(model.tgt_vocab().pieces(out));
  if (cfg.source_eos) sp.push_back("</s>");
  plot::HeatMap h;
  const std::string which =
      "layer " + std::to_string(layer + 1) + " of " + std::to_string(layers) + ", " +
      (o.head > 0 ? "head " + std::to_string(o.head) + " of " + std::to_string(cfg.heads)
                  : "mean of " + std::to_string(cfg.heads) + " heads");
  if (kind == AttentionKind::EncoderSelf) {
    h.title = "Encoder self-attention, " + which;
    h.row_labels = h.col_labels = sp;
    h.row_axis = "query (source)", h.col_axis = "key (source)";
  } else if (kind == AttentionKind::Cross) {
    tp.push_back("</s>");
    h.title = "Encoder-decoder attention, " + which;
    h.row_labels = tp, h.col_labels = sp;
    h.row_axis = "output token", h.col_axis = "source";
  } else {
    tp.insert(tp.begin(), "<s>");
    h.title = "Decoder self-attention, " + which;
    h.row_labels = h.col_labels = tp;
    h.row_axis = "query (decoder input)", h.col_axis = "key (decoder input)";
  }
  if (static_cast<int64_t>(h.row_labels.size()) != m.rows ||
      static_cast<int64_t>(h.col_labels.size()) != m.cols)
    throw Error("attention map of " + std::to_string(m.rows) + " x " + std::to_string(m.cols) +
                " for " + std::to_string(h.row_labels.size()) + " x " +
                std::to_string(h.col_labels.size()) + " labels");
  h.weights = m.w;
  plot::write(h, o.output);
  std::cout << model.tgt_vocab().decode(out) << "\n";
  std::cerr << "nmt: wrote " << o.output << ": " << h.title << ", " << m.rows << " x " << m.cols
            << "\n";
}

}  // namespace

void register_attention(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "attention",
      "Draw one sentence's attention as a heat map (PNG, SVG or PDF by the extension of -o)");
  cmd->add_option("-m,--model", o->model, "Model file written by nmt train")->required();
  cmd->add_option("sentence", o->sentence, "The source sentence")->required();
  cmd->add_option("-o,--output", o->output, "The picture: .png, .svg or .pdf")->required();
  cmd->add_option("--kind", o->kind,
                  "self (encoder self-attention), cross (encoder-decoder) or decoder-self")
      ->check(CLI::IsMember({"self", "cross", "decoder-self"}));
  cmd->add_option("--layer", o->layer, "Layer, from 1 (0: the second-to-last)")
      ->check(CLI::Range(0, 1024));
  auto* head = cmd->add_option("--head", o->head, "One head, from 1 (default: their mean)")
                   ->check(CLI::Range(1, 1024));
  cmd->add_flag("--mean", o->mean, "The mean of the heads (the default)")->excludes(head);
  cmd->add_option("--target", o->target,
                  "Draw the attention for this translation instead of the model's own")
      ->each([o](const std::string&) { o->target_given = true; });
  cmd->add_option("--beam", o->search.beam, "Beam size of the translation (1: greedy)")
      ->check(CLI::Range(1, 1024));
  add_compute_type_option(cmd, o->compute, "f32, bf16 or int8; default: the model's");
  add_device_option(cmd, o->device);
  cmd->callback([o] { run(*o); });
}

}  // namespace nmt::app
