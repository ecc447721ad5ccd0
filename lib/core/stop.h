// Stopping long work when asked: app/'s signal handler sets a flag, and the
// library's long loops (validation, decoding, building and measuring a
// shortlist) look at it between steps and throw Stopped, so that a stop
// takes effect within a step of whatever is running, not once it is done.
#pragma once

#include <atomic>

#include "core/error.h"

namespace nmt {

// Non-zero: stop (app/ stores the signal's number).
using StopFlag = std::atomic<int>;

// What a loop that saw the flag throws: the work was abandoned, not failed.
class NMT_ERROR_VISIBLE Stopped : public Error {
 public:
  Stopped() : Error("stopped on request") {}
};

inline bool stop_requested(const StopFlag* stop) {
  return stop && stop->load(std::memory_order_relaxed) != 0;
}
inline void throw_if_stopped(const StopFlag* stop) {
  if (stop_requested(stop)) throw Stopped();
}

}  // namespace nmt
