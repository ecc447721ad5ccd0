// Where the model looks: attention weights of a chosen layer, read from the
// teacher-forced pass over a source and a given output (the pass that
// training and `nmt score -m` use), and hard word alignments from them.
//
// Reading them from a second pass, rather than collecting them during the
// search, keeps the search loop free of per-step copies that only these
// outputs need; the weights are the same ones the search saw, up to the
// rounding of a differently shaped product.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/transformer.h"

namespace nmt {

enum class AttentionKind {
  EncoderSelf,  // source x source
  Cross,        // output x source: row i is the query that produced output token i
  DecoderSelf,  // decoder input x decoder input (<s> y1 .. yn)
};

// One matrix, row-major. Rows and columns include the end tokens: the
// source ends in </s>, the output in </s>, the decoder input starts with <s>.
struct AttentionMap {
  int64_t rows = 0, cols = 0;
  std::vector<float> w;
  float at(int64_t r, int64_t c) const { return w[static_cast<size_t>(r * cols + c)]; }
};

// The map of `layer` (0-based, of the encoder for EncoderSelf, else of the
// decoder), averaged over the heads when head < 0, for one source and
// output (ids without </s> or <s>). Source rows and columns are the
// source's pieces, then its </s> where the model ends sources with one (a
// source <s> is left out). Throws InputError for a layer or head the model
// lacks.
AttentionMap attention_map(const Transformer& model, const std::vector<int32_t>& src,
                           const std::vector<int32_t>& out, AttentionKind kind, int layer, int head,
                           Activations& acts);

// Hard word alignment from a cross-attention map (as attention_map(Cross)
// gives it): each output piece is aligned to the source piece it attends to
// most (</s> excluded on both sides), and pieces are merged into words at
// SentencePiece's word-start mark, so indices count the whitespace-separated
// words of the source line and of the translation. Pairs (source word,
// target word), unique, in target then source order, as Moses and
// fast_align write them.
std::vector<std::pair<int, int>> word_alignment(const AttentionMap& cross,
                                                const std::vector<std::string>& src_pieces,
                                                const std::vector<std::string>& out_pieces);
// "0-0 1-2 ..."
std::string format_alignment(const std::vector<std::pair<int, int>>& pairs);

// SentencePiece's word-start mark, U+2581, that begins a word's first piece.
inline constexpr std::string_view kWordStart = "\xE2\x96\x81";

// The word index of each piece (a piece starting with kWordStart starts a word).
std::vector<int> word_of_piece(const std::vector<std::string>& pieces);

}  // namespace nmt
