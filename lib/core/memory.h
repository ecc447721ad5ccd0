// The machine's memory, for options whose cost grows with their value
// (--beam, --batch-tokens, --update-freq): they are bounded by what the
// machine has, and the refusal names the option.
#pragma once

#include <cstdint>
#include <string>

namespace nmt {

// Physical memory in bytes (sysconf), or 0 if it cannot be told.
uint64_t physical_memory_bytes();

// The most resident memory this process has held so far (getrusage), in
// bytes, or 0 if it cannot be told.
uint64_t peak_resident_bytes();

// "1.5 GiB"
std::string gigabytes(double bytes);

}  // namespace nmt
