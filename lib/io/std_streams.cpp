#include "io/std_streams.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/error.h"

namespace nmt::io {

namespace {

int g_failure = 0;  // errno of the first failed write to stdout that nmt saw
bool g_stdin_closed = false;

// Why writes to stdout fail, when the failed write's errno was lost (a flush
// that stdio made on its own, e.g. when std::cerr's tie flushed std::cout):
// asked of the descriptor itself.
int probe_stdout() {
  const int flags = ::fcntl(STDOUT_FILENO, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) return EBADF;
  pollfd p{STDOUT_FILENO, POLLOUT, 0};
  if (::poll(&p, 1, 0) == 1 && (p.revents & POLLERR)) return EPIPE;
  struct stat st;
  struct statvfs vfs;
  if (::fstat(STDOUT_FILENO, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
      minor(st.st_rdev) == 7)
    return ENOSPC;  // /dev/full
  if (::fstatvfs(STDOUT_FILENO, &vfs) == 0 && S_ISREG(st.st_mode) && vfs.f_bavail == 0)
    return ENOSPC;
  return 0;
}

}  // namespace

void protect_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      if (fd == STDIN_FILENO) g_stdin_closed = true;
      const int got = ::open("/dev/null", O_RDONLY);
      if (got >= 0 && got != fd) ::close(got);  // a lower one was free: not ours to fill
    }
}

bool stdin_was_closed() { return g_stdin_closed; }

void check_stdout(bool flush) {
  if (!flush && !std::ferror(stdout)) return;
  // std::cout is synchronised with stdio (nmt never unties them): its bytes
  // are in stdout's buffer already. glibc keeps the bytes a failed write
  // could not place, so this flush tries them again and leaves the reason
  // in errno.
  errno = 0;
  const bool ok = std::fflush(stdout) == 0 && !std::ferror(stdout);
  const int err = errno;
  if (!ok) stdout_failed(err ? err : g_failure ? g_failure : probe_stdout());
}

void stdout_failed(int err) {
  if (!g_failure) g_failure = err;
  if (err == EPIPE) throw StdoutClosed{};
  throw Error("cannot write stdout" + (err ? ": " + std::string(std::strerror(err)) : ""));
}

}  // namespace nmt::io
