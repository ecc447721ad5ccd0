// Data-parallel gradient summation, overlapped with the backward pass (as
// PyTorch DDP does): each layer's slice of the flat gradient buffer is sent
// to a non-blocking sum across the processes as soon as the backward pass
// has finished that layer; whatever no layer announced (embeddings, final
// norms) is summed at the end. With one process it does nothing.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/comm.h"
#include "model/params.h"

namespace nmt {

class GradSync {
 public:
  GradSync(Comm& comm, Grads& grads);
  // Call before the last backward pass of an update: from then on, ready
  // layers are summed across processes at once.
  void arm();
  // After that backward pass: sums the rest and waits for everything.
  void finish();

 private:
  void ready(int64_t begin, int64_t end);

  Comm& comm_;
  Grads& grads_;
  bool armed_ = false;
  std::vector<std::pair<int64_t, int64_t>> sent_;
};

}  // namespace nmt
