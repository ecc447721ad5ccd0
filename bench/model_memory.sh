#!/usr/bin/env bash
# What a model costs to open and to hold, f32 against its int8 copy (nmt
# quantize), side by side on this machine: load time (nmt translate of an
# empty input: open, map and check the file, weights into place, vocabulary;
# the best of REPEAT runs), what the model itself holds once loaded (nmt
# info's measure: how much loading it grew the process's anonymous resident
# memory, before any product packs a copy of its weights), the process's
# peak resident memory once loaded (the program and its libraries included)
# and translating TEXT at beam 4, with the int8/f32 ratios.
#
#   bench/model_memory.sh MODEL.nmt [TEXT]   # TEXT: default test_2016_flickr.en
# Environment: NMT (the binary: another build to compare), REPEAT (default 5).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
MODEL=${1:?usage: bench/model_memory.sh MODEL.nmt [TEXT]}
NMT=${NMT:-$root/build/nmt}
REPEAT=${REPEAT:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${2:-}" ]; then
  cp "$2" "$tmp/text"
else
  zcat "${DATA:-$root/../shared/data}/multi30k/test_2016_flickr.en.gz" >"$tmp/text"
fi
[ -x /usr/bin/time ] || { echo "model_memory.sh: needs /usr/bin/time (Debian: time)" >&2; exit 1; }
"$NMT" info "$MODEL" | grep -q 'f32 weights' ||
  { echo "model_memory.sh: $MODEL is not an f32 model (give the one nmt quantize reads)" >&2; exit 1; }
"$NMT" quantize "$MODEL" -o "$tmp/int8.nmt" 2>/dev/null
: >"$tmp/empty"

# "seconds KiB" of one run of nmt translate.
run() {
  /usr/bin/time -f "%e %M" -o "$tmp/t" "$NMT" translate -m "$1" -i "$2" -o /dev/null --beam 4 2>/dev/null
  cat "$tmp/t"
}

echo "$NMT on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores;" \
  "text: $(wc -l <"$tmp/text") lines, beam 4"
printf "%-5s %9s %9s %11s %13s %16s\n" type "file MB" "load s" "model MiB" "loaded MiB" \
  "translating MiB"
declare -A load mem_model mem_loaded mem_text
for t in f32 int8; do
  m=$MODEL
  [ "$t" = int8 ] && m=$tmp/int8.nmt
  best=999 peak=0
  for ((i = 0; i < REPEAT; ++i)); do
    read -r s kb < <(run "$m" "$tmp/empty")
    best=$(awk -v a="$best" -v b="$s" 'BEGIN { print (b < a ? b : a) }')
    peak=$kb
  done
  read -r _ text_kb < <(run "$m" "$tmp/text")
  model_b=$("$NMT" info --format json "$m" | grep -o '"loaded_bytes": *[0-9]*' | grep -o '[0-9]*$')
  load[$t]=$best mem_model[$t]=${model_b:-0} mem_loaded[$t]=$peak mem_text[$t]=$text_kb
  printf "%-5s %9.1f %9.2f %11s %13.0f %16.0f\n" "$t" \
    "$(stat -c %s "$m" | awk '{ print $1 / 1e6 }')" "$best" \
    "$(awk -v b="${mem_model[$t]}" 'BEGIN { if (b > 0) printf "%.1f", b / 1048576; else print "-" }')" \
    "$(awk -v k="$peak" 'BEGIN { print k / 1024 }')" \
    "$(awk -v k="$text_kb" 'BEGIN { print k / 1024 }')"
done
printf "int8/f32 %16s %11s %13.2f %16.2f\n" "" \
  "$(awk -v a="${mem_model[int8]}" -v b="${mem_model[f32]}" \
    'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }')" \
  "$(awk -v a="${mem_loaded[int8]}" -v b="${mem_loaded[f32]}" 'BEGIN { print a / b }')" \
  "$(awk -v a="${mem_text[int8]}" -v b="${mem_text[f32]}" 'BEGIN { print a / b }')"
