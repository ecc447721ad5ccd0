// The one rule of batching by tokens, shared by training, translation and
// scoring: items are taken in the order given; a batch costs its items
// times its widest item (its padded tokens); the next item begins a new
// batch where it would take the batch past the budget. An item wider than
// the budget gets a batch of its own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace nmt {

// width(k): the k-th item's width in tokens. Returns each batch's end (one
// past its last item), in order; none for no items.
template <class Width>
std::vector<size_t> token_batch_ends(size_t n, int64_t budget, Width&& width) {
  std::vector<size_t> ends;
  int64_t widest = 0;
  size_t count = 0;
  for (size_t k = 0; k < n; ++k) {
    const int64_t w = width(k);
    if (count > 0 && std::max(widest, w) * static_cast<int64_t>(count + 1) > budget) {
      ends.push_back(k);
      widest = 0;
      count = 0;
    }
    widest = std::max(widest, w);
    ++count;
  }
  if (count > 0) ends.push_back(n);
  return ends;
}

}  // namespace nmt
