#include "service/attention_picture.h"

#include <algorithm>

#include "core/error.h"

namespace nmt {

namespace {

// Pieces as labels: the word-start mark dropped where a piece has more.
std::vector<std::string> labels(std::vector<std::string> pieces) {
  for (auto& p : pieces)
    if (p.compare(0, kWordStart.size(), kWordStart) == 0 && p.size() > kWordStart.size())
      p.erase(0, kWordStart.size());  // a lone mark (a word start split off) stays visible
  return pieces;
}

}  // namespace

AttentionPicture attention_picture(const LoadedModel& model, const AttentionRequest& r) {
  const ModelConfig& cfg = model.config;
  if (!cfg.languages.empty())
    throw UsageError(
        "attention maps are not yet available for multilingual models (their language tokens "
        "would be drawn as words)");
  const AttentionKind kind = r.kind;
  const int layers = kind == AttentionKind::EncoderSelf ? cfg.encoder_layers : cfg.decoder_layers;
  const int layer = r.layer > 0 ? r.layer - 1 : std::max(0, layers - 2);
  std::vector<int32_t> src = model.src_vocab().encode(r.sentence);
  const int64_t max_src = cfg.max_positions - cfg.source_tokens(0);
  if (static_cast<int64_t>(src.size()) > max_src)
    throw InputError("the sentence's " + std::to_string(src.size()) +
                     " subwords exceed the model's limit of " + std::to_string(max_src));
  std::vector<int32_t> out;
  if (!r.target.empty()) {
    out = model.tgt_vocab().encode(r.target);
    if (static_cast<int64_t>(out.size()) > cfg.max_positions - 1)
      throw InputError("{target}'s subwords exceed the model's limit");
  } else {
    DecodeState st;
    auto hyps = search(*model.net, std::vector<std::vector<int32_t>>{src}, r.search, st);
    if (!hyps[0].empty()) out = hyps[0][0].tokens;
  }
  Activations acts;
  const AttentionMap m =
      attention_map(*model.net, src, out, kind, layer, r.head > 0 ? r.head - 1 : -1, acts);
  std::vector<std::string> sp = labels(model.src_vocab().pieces(src)),
                           tp = labels(model.tgt_vocab().pieces(out));
  if (cfg.source_eos) sp.push_back("</s>");
  AttentionPicture picture;
  plot::HeatMap& h = picture.map;
  const std::string which =
      "layer " + std::to_string(layer + 1) + " of " + std::to_string(layers) + ", " +
      (r.head > 0 ? "head " + std::to_string(r.head) + " of " + std::to_string(cfg.heads)
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
  picture.translation = model.tgt_vocab().decode(out);
  return picture;
}

}  // namespace nmt
