# Sourced by bench/peers.sh and bench/hf_peers.sh, after they set tmp,
# TEXT, THREADS, ROUNDS and NAME (for messages) and wrote the sentences to
# $tmp/in.txt: the runs they add by name, measured ROUNDS times turn about
# (whole process: seconds and peak memory), and the table of them against
# the run named "nmt f32".

# quiet COMMAND...: a setup step, which prints what went wrong, and only then.
quiet() { "$@" >"$tmp/err" 2>&1 || { cat "$tmp/err" >&2; echo "$NAME: failed: $*" >&2; exit 1; }; }

declare -A cmd best peak
order=()
# add NAME COMMAND: a run; COMMAND is a string that bash -c splits at
# spaces, reading the sentences on stdin and writing translations on stdout.
add() { order+=("$1"); cmd[$1]=$2; }

# Every run, ROUNDS times in turn; each keeps its best seconds and its
# largest peak.
run_rounds() {
  local r name f s kb
  for r in $(seq "$ROUNDS"); do
    for name in "${order[@]}"; do
      f=$tmp/${name//[^a-z0-9]/_}
      /usr/bin/time -f "%e %M" -o "$f.time" bash -c "${cmd[$name]} <$tmp/in.txt >$f.out" 2>"$f.err" ||
        { cat "$f.err" >&2; echo "$NAME: $name failed" >&2; exit 1; }
      read -r s kb <"$f.time"
      if [ -z "${best[$name]:-}" ] || awk -v a="$s" -v b="${best[$name]}" 'BEGIN{exit !(a<b)}'; then best[$name]=$s; fi
      if [ $((kb / 1024)) -gt "${peak[$name]:-0}" ]; then peak[$name]=$((kb / 1024)); fi
    done
  done
}

# The table: each run's best seconds, sentences/s, peak MiB and how many
# lines equal nmt f32's.
print_table() {
  local n name f same ref=$tmp/nmt_f32.out
  n=$(wc -l <"$tmp/in.txt")
  echo "$n sentences ($TEXT), beam 4, $THREADS threads, best of $ROUNDS alternated rounds; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  printf "%-26s %9s %9s %10s %s\n" run seconds "sent/s" "peak MiB" "same output as nmt f32"
  for name in "${order[@]}"; do
    f=$tmp/${name//[^a-z0-9]/_}
    same=$(paste -d'\t' "$f.out" "$ref" | awk -F'\t' '$1==$2' | wc -l)
    printf "%-26s %9.2f %9.1f %10d %d/%d\n" "$name" "${best[$name]}" "$(echo "$n / ${best[$name]}" | bc -l)" "${peak[$name]}" "$same" "$n"
  done
}
