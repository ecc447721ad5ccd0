#!/usr/bin/env bash
# A portable binary stays portable: only the code compiled for an
# instruction-set class (the namespaces avx2:: and avx512:: of lib/cpu, see
# cpu/isa.h) touches that class's registers. Anything else holding ymm or
# zmm registers would run on every CPU, and stop one without them with
# SIGILL: an inline function or template that a class's copy of loops.cpp
# compiled with its flags and the linker kept for the whole program, say.
# A function of local binding is its object file's own, so one that a
# class's copy compiled (the kernels tier's functions are static there,
# core/host_device.h's NMT_KERNEL) is that class's, whatever its name.
# Usage: isa_check.sh BINARY...
set -euo pipefail
for bin in "$@"; do
  local_fns=$(nm --defined-only "$bin" | awk '$2 == "t" { print $1 }' | tr '\n' ' ')
  bad=$(objdump -d --no-show-raw-insn -C "$bin" | awk -v local_fns="$local_fns" '
    BEGIN { n = split(local_fns, a, " "); for (i = 1; i <= n; ++i) own[a[i]] = 1 }
    /^[0-9a-f]+ <.*>:$/ { name = $0; told = own[$1]; next }
    told { next }
    /%zmm/ && name !~ /avx512::/ { print "zmm: " name; told = 1 }
    /%ymm/ && name !~ /avx2::|avx512::/ { print "ymm: " name; told = 1 }
  ' | sort -u)
  if [ -n "$bad" ]; then
    echo "FAIL: $bin has wide registers outside the per-class kernels:" >&2
    echo "$bad" | head -20 >&2
    exit 1
  fi
  n=$(objdump -d --no-show-raw-insn -C "$bin" | grep -c '^[0-9a-f]* <nmt::cpu::avx\(2\|512\)::' || true)
  echo "isa check: $(basename "$bin"): wide registers only in its $n per-class functions"
done
