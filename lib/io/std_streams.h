// The standard streams as every command uses them. A command that prints
// must fail, with one line and exit 1, when its output cannot be written
// (a full disk, /dev/full, a closed descriptor), and end quietly when the
// reader went away (`nmt info m.nmt | head -1`).
#pragma once

namespace nmt::io {

// Thrown when stdout's reader has gone (EPIPE): the command stops, quietly.
struct StdoutClosed {};

// Opens /dev/null, read-only, on any of descriptors 0, 1 and 2 that is
// closed, so that the first file nmt opens never lands on one of them (and
// gets the output meant for stdout), while writes to a closed stdout still
// fail and are reported.
void protect_standard_descriptors();
// Whether protect_standard_descriptors() found stdin closed (`nmt ... <&-`):
// reading it then is an error, not an empty input.
bool stdin_was_closed();

// Throws Error("cannot write stdout: REASON") or StdoutClosed if a write to
// stdout (printf, std::cout) has failed; with flush, flushes first, so that
// the last buffered bytes are checked too.
void check_stdout(bool flush = false);
// The same for a write to stdout that has just failed with errno err.
[[noreturn]] void stdout_failed(int err);

}  // namespace nmt::io
