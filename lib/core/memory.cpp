#include "core/memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace nmt {

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  uint64_t bytes =
      pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  auto at_most = [&](uint64_t limit) {
    if (limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
  };
  struct rlimit as {};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) at_most(as.rlim_cur);
  // cgroup v2 ("max" when unlimited); v1's limit where v2 is not mounted.
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"})
    if (std::FILE* f = std::fopen(path, "r")) {
      unsigned long long limit = 0;
      if (std::fscanf(f, "%llu", &limit) == 1) at_most(limit);
      std::fclose(f);
      break;
    }
  return bytes;
}

uint64_t peak_resident_bytes() {
  struct rusage u {};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;  // kilobytes on Linux
}

uint64_t anonymous_resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f))
    found = std::sscanf(line, "RssAnon: %llu kB", &kb) == 1;
  std::fclose(f);
  return found ? kb * 1024 : 0;
}

int64_t resident_bytes(const void* p, size_t n) {
  if (n == 0) return 0;
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (page_size <= 0) return -1;
  const auto page = static_cast<uintptr_t>(page_size);
  const auto at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t begin = at / page * page, end = (at + n + page - 1) / page * page;
  std::vector<unsigned char> in((end - begin) / page);
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, in.data()) != 0) return -1;
  int64_t bytes = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!(in[i] & 1)) continue;
    const uintptr_t lo = std::max(at, begin + i * page),
                    hi = std::min(at + n, begin + (i + 1) * page);
    bytes += static_cast<int64_t>(hi - lo);
  }
  return bytes;
}

std::string gigabytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / double(uint64_t{1} << 30));
  return buf;
}

}  // namespace nmt
