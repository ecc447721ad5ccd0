#include "train/grad_sync.h"

#include <algorithm>

namespace nmt {

GradSync::GradSync(Comm& comm, Grads& grads) : comm_(comm), grads_(grads) {
  if (comm_.size() > 1) grads_.on_ready([this](int64_t b, int64_t e) { ready(b, e); });
}

void GradSync::arm() {
  armed_ = comm_.size() > 1;
  sent_.clear();
}

void GradSync::ready(int64_t begin, int64_t end) {
  if (!armed_) return;
  comm_.start_sum(grads_.buffer().data() + begin, end - begin);
  sent_.push_back({begin, end});
  comm_.progress();  // MPI moves non-blocking collectives along only inside its calls
}

void GradSync::finish() {
  if (comm_.size() <= 1) return;
  std::sort(sent_.begin(), sent_.end());
  int64_t at = 0;
  const int64_t n = grads_.buffer().numel();
  for (const auto& [b, e] : sent_) {
    if (b > at) comm_.start_sum(grads_.buffer().data() + at, b - at);
    at = std::max(at, e);
  }
  if (at < n) comm_.start_sum(grads_.buffer().data() + at, n - at);
  comm_.wait_all();
  armed_ = false;
}

}  // namespace nmt
