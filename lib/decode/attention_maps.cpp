#include "decode/attention_maps.h"

#include <algorithm>

#include "core/error.h"
#include "ops/ops.h"

namespace nmt {

AttentionMap attention_map(const Transformer& model, const std::vector<int32_t>& src,
                           const std::vector<int32_t>& out, AttentionKind kind, int layer, int head,
                           Activations& acts) {
  const ModelConfig& cfg = model.config();
  const bool enc = kind == AttentionKind::EncoderSelf;
  const int64_t layers = enc ? cfg.encoder_layers : cfg.decoder_layers;
  if (layer < 0 || layer >= layers)
    throw about_option<UsageError>("layer", std::to_string(layer + 1) + ": the " +
                                                (enc ? "encoder" : "decoder") + " has layers 1.." +
                                                std::to_string(layers));
  if (head >= cfg.heads)
    throw about_option<UsageError>("head", std::to_string(head + 1) +
                                               ": the model has heads 1.." +
                                               std::to_string(cfg.heads));
  TokenBatch b = make_batch({&src}, {&out}, cfg);
  acts.keep_attention = true;
  model.forward(b, acts, /*training=*/false, 0);
  const Tensor& probs = enc                            ? acts.encoder.layers[layer].attn.probs
                        : kind == AttentionKind::Cross ? acts.decoder.layers[layer].cross_attn.probs
                                                       : acts.decoder.layers[layer].self_attn.probs;
  std::vector<float> p;
  ops::download(probs, p);  // (1, H, Tq, Tk)
  const int64_t H = probs.dim(1), Tq = probs.dim(2), Tk = probs.dim(3);
  // Source positions from the first piece: a source <s> (source_bos) is
  // left out, so that column s is the source's piece s (and the last, with
  // source_eos, its </s>).
  const int64_t skip = cfg.source_bos ? 1 : 0;
  const int64_t row0 = enc ? skip : 0, col0 = kind == AttentionKind::DecoderSelf ? 0 : skip;
  AttentionMap m;
  m.rows = (enc ? b.S : b.T) - row0;
  m.cols = (kind == AttentionKind::DecoderSelf ? b.T : b.S) - col0;
  m.w.assign(static_cast<size_t>(m.rows * m.cols), 0.f);
  const int64_t h0 = head < 0 ? 0 : head, h1 = head < 0 ? H : head + 1;
  const float share = 1.f / static_cast<float>(h1 - h0);
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t r = 0; r < m.rows && r + row0 < Tq; ++r)
      for (int64_t c = 0; c < m.cols && c + col0 < Tk; ++c)
        m.w[r * m.cols + c] += share * p[(h * Tq + r + row0) * Tk + c + col0];
  return m;
}

std::vector<int> word_of_piece(const std::vector<std::string>& pieces) {
  std::vector<int> word(pieces.size());
  int w = -1;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (w < 0 || pieces[i].compare(0, kWordStart.size(), kWordStart) == 0) ++w;
    word[i] = w;
  }
  return word;
}

std::vector<std::pair<int, int>> word_alignment(const AttentionMap& cross,
                                                const std::vector<std::string>& src_pieces,
                                                const std::vector<std::string>& out_pieces) {
  const std::vector<int> sw = word_of_piece(src_pieces), tw = word_of_piece(out_pieces);
  const int64_t S = std::min<int64_t>(static_cast<int64_t>(sw.size()), cross.cols);
  const int64_t T = std::min<int64_t>(static_cast<int64_t>(tw.size()), cross.rows);
  std::vector<std::pair<int, int>> pairs;
  if (S == 0) return pairs;
  for (int64_t t = 0; t < T; ++t) {
    int64_t best = 0;
    for (int64_t s = 1; s < S; ++s)
      if (cross.at(t, s) > cross.at(t, best)) best = s;
    pairs.emplace_back(sw[best], tw[t]);
  }
  std::sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second < b.second : a.first < b.first;
  });
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

std::string format_alignment(const std::vector<std::pair<int, int>>& pairs) {
  std::string s;
  for (const auto& [i, j] : pairs) {
    if (!s.empty()) s += ' ';
    s += std::to_string(i) + "-" + std::to_string(j);
  }
  return s;
}

}  // namespace nmt
