// `nmt attention`: one sentence's attention as a picture. The sentence is
// translated (or --target is taken as its translation), the teacher-forced
// pass over the pair gives every layer's attention, and the chosen matrix is
// drawn with its tokens on both axes (PNG, SVG or PDF by the extension).
#include <iostream>
#include <memory>

#include "commands.h"
#include "core/error.h"
#include "io/output_file.h"
#include "io/text_file.h"
#include "service/attention_picture.h"

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

void run(Opts& o) {
  // Refused before any work: a wrong extension, a directory, the model.
  io::check_output_path(o.output, "-o");
  plot::format_of(o.output);
  io::check_not_an_input({"-o", o.output}, {{"-m", o.model}});
  io::check_input_path(o.model, "-m");
  AttentionRequest r;
  r.sentence = io::checked_text(o.sentence, "the sentence", io::warn_on_stderr);
  if (r.sentence.find_first_not_of(" \t\r") == std::string::npos)
    throw UsageError("the sentence is empty");
  if (o.target_given && o.target.find_first_not_of(" \t\r") == std::string::npos)
    throw UsageError("--target is empty: give the translation to draw, or leave --target out");
  if (!o.target.empty()) r.target = io::checked_text(o.target, "--target", io::warn_on_stderr);
  r.kind = o.kind == "self"           ? AttentionKind::EncoderSelf
           : o.kind == "decoder-self" ? AttentionKind::DecoderSelf
                                      : AttentionKind::Cross;
  r.layer = o.layer, r.head = o.head;
  r.search = o.search;
  LoadedModel model = load_model(o.model, o.compute, nullptr, open_device(o.device),
                                 ShortlistLoad::Skip, WeightsUse::ProductsOnly);
  const AttentionPicture p = attention_picture(model, r);
  plot::write(p.map, o.output);
  std::cout << p.translation << "\n";
  std::cerr << "nmt: wrote " << o.output << ": " << p.map.title << ", " << p.map.row_labels.size()
            << " x " << p.map.col_labels.size() << "\n";
}

}  // namespace

void register_attention(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "attention",
      "Draw one sentence's attention as a heat map (PNG, SVG or PDF by the extension of -o)");
  cmd->add_option("-m,--model", o->model, "Model file written by nmt train")
      ->type_name("FILE")
      ->required();
  cmd->add_option("sentence", o->sentence, "The source sentence")->required();
  cmd->add_option("-o,--output", o->output, "The picture: .png, .svg or .pdf")
      ->type_name("FILE")
      ->required();
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
