// The machine's memory, for options whose cost grows with their value
// (--beam, --batch-tokens, --update-freq): they are bounded by what the
// machine has, and the refusal names the option.
#pragma once

#include <cstdint>
#include <string>

namespace nmt {

// The memory this process may use, in bytes: the machine's physical memory
// (sysconf), or less where a limit says so (a cgroup's memory.max, as a
// container sets it; RLIMIT_AS, as `ulimit -v` sets it); 0 if none of these
// can be told. Every option that multiplies memory is bounded by it.
uint64_t physical_memory_bytes();

// The most resident memory this process has held so far (getrusage), in
// bytes, or 0 if it cannot be told.
uint64_t peak_resident_bytes();

// The anonymous memory this process holds resident now (RssAnon in
// /proc/self/status: its heap and mappings of no file, not the program's
// and libraries' pages), in bytes, or 0 if it cannot be told.
uint64_t anonymous_resident_bytes();

// How many of the bytes [p, p + n) lie in resident pages (mincore), or -1
// if it cannot be told.
int64_t resident_bytes(const void* p, size_t n);

// "1.5 GiB"
std::string gigabytes(double bytes);

}  // namespace nmt
