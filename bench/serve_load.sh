#!/usr/bin/env bash
# nmt serve under load, beside nmt translate on the same sentences and
# machine. wrk (Debian's) drives POST /translate on loopback, one sentence
# per request, cycling through test_2016_flickr's 1000 sentences, at 1, 8
# and 64 concurrent connections; printed: requests/s (= sentences/s),
# p50/p99 latency, non-2xx answers. Beside it: nmt translate's sentences/s
# on the same file, whole process and without its load (t(1000 lines) -
# t(no lines)), and the latency of one short sentence alone: the server's
# p50 against nmt translate's t(1 line) - t(no lines), medians of ROUNDS.
# Both run with the same options (--split sentences is the server's default).
# The target's ratio (64 clients against nmt translate) is measured
# alternated, ROUNDS pairs of one nmt translate run and SECONDS of 64
# clients, since a shared machine's speed drifts between minutes; printed:
# each pair and the median ratio.
# Last, bench/serve_burst.py: 128 clients connecting at once, five times.
# Usage: bench/serve_load.sh NMT MODEL [SECONDS] [ROUNDS] [extra options...]
set -eu
NMT=$1 MODEL=$2 SECONDS_EACH=${3:-15} ROUNDS=${4:-5}
shift $(( $# < 4 ? $# : 4 ))
command -v wrk >/dev/null || { echo "serve_load: needs wrk (apt-get install wrk)" >&2; exit 1; }
DATA=$(cd "$(dirname "$0")/../../shared/data" && pwd)
W=$(mktemp -d /tmp/nmt-bench-serve.XXXXXX)
PID=""
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$W"' EXIT
gzip -dc "$DATA/multi30k/test_2016_flickr.en.gz" >"$W/all.en"
SHORT="A dog runs."
echo "$SHORT" >"$W/one.en"
: >"$W/none.en"
N=$(wc -l <"$W/all.en")
nproc_=$(nproc)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $nproc_ cores"
echo "model: $MODEL; options: --split sentences $*"

# median SECONDS of a command, ROUNDS runs.
median_time() {
  python3 - "$ROUNDS" "$@" <<'EOF'
import statistics, subprocess, sys, time
rounds, cmd = int(sys.argv[1]), sys.argv[2:]
ts = []
for _ in range(rounds):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ts.append(time.perf_counter() - t)
print(f"{statistics.median(ts):.4f}")
EOF
}
T="translate -m $MODEL --split sentences $*"
t_all=$(median_time "$NMT" $T -i "$W/all.en")
t_one=$(median_time "$NMT" $T -i "$W/one.en")
t_none=$(median_time "$NMT" $T -i "$W/none.en")

"$NMT" serve -m "$MODEL" --port 0 --lang en-de --max-queue 0 --http-threads 128 "$@" \
  2>"$W/serve.err" &
PID=$!
for _ in $(seq 1 300); do
  PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$W/serve.err" | grep -o '[0-9]*$' || true)
  [ -n "$PORT" ] && break
  sleep 0.1
done
[ -n "$PORT" ] || { cat "$W/serve.err"; exit 1; }

# A wrk script: POST /translate, the file's lines in turn (each connection
# from its own offset), one JSON record of figures at the end.
cat >"$W/load.lua" <<'EOF'
local lines = {}
for l in io.lines(os.getenv("SENTENCES")) do
  lines[#lines + 1] = '{"q":' .. string.format("%q", l):gsub("\\\n", "\\n") .. ',"source":"en","target":"de"}'
end
local counter = 0
function setup(thread) counter = counter + 1; thread:set("offset", counter * 37) end
local i = 0
function request()
  i = i + 1
  local body = lines[((i + (offset or 0)) % #lines) + 1]
  return wrk.format("POST", "/translate", {["Content-Type"] = "application/json"}, body)
end
function done(summary, latency, requests)
  io.write(string.format('{"requests": %d, "seconds": %.3f, "non2xx": %d, "errors": %d, ' ..
    '"p50_ms": %.2f, "p99_ms": %.2f}\n', summary.requests, summary.duration / 1e6,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write +
    summary.errors.timeout, latency:percentile(50) / 1e3, latency:percentile(99) / 1e3))
end
EOF
run_wrk() {  # CONNECTIONS SENTENCES_FILE SECONDS
  SENTENCES=$2 wrk -t1 -c"$1" -d"$3"s --timeout 60s -s "$W/load.lua" "http://127.0.0.1:$PORT" |
    tail -1
}
run_wrk 8 "$W/all.en" 3 >/dev/null  # warm up
echo
echo "| clients | requests/s (= sentences/s) | p50 ms | p99 ms | non-2xx | socket errors |"
echo "|---|---|---|---|---|---|"
for c in 1 8 64; do
  run_wrk "$c" "$W/all.en" "$SECONDS_EACH" | python3 -c '
import json, sys
c = sys.argv[1]; r = json.loads(sys.stdin.read())
rate = r["requests"] / r["seconds"]
print("| %s | %.1f | %.1f | %.1f | %d | %d |" % (c, rate, r["p50_ms"], r["p99_ms"], r["non2xx"], r["errors"]))' "$c"
done
one=$(run_wrk 1 "$W/one.en" "$SECONDS_EACH")
echo
echo "alternated, nmt translate on the file then 64 clients for ${SECONDS_EACH} s:"
ratios=""
for r in $(seq 1 "$ROUNDS"); do
  t=$(ROUNDS=1 median_time "$NMT" $T -i "$W/all.en")
  rate=$(run_wrk 64 "$W/all.en" "$SECONDS_EACH" | python3 -c '
import json, sys; r = json.loads(sys.stdin.read()); print("%.1f" % (r["requests"] / r["seconds"]))')
  ratio=$(python3 -c "print('%.3f' % ($rate / ($N / ($t - $t_none))))")
  ratios="$ratios $ratio"
  echo "  round $r: nmt translate $(python3 -c "print('%.1f' % ($N / ($t - $t_none)))") sentences/s" \
    "without its load, 64 clients $rate requests/s: $ratio"
done
echo "  median ratio: $(python3 -c "import statistics, sys; print('%.3f' % statistics.median(map(float, sys.argv[1:])))" $ratios)"
burst=$(python3 "$(dirname "$0")/serve_burst.py" "$PORT" 128 5)
kill -TERM $PID; wait $PID || true; PID=""
echo
echo "$burst"
python3 - "$N" "$t_all" "$t_one" "$t_none" "$one" <<'EOF'
import json, sys
n, t_all, t_one, t_none = int(sys.argv[1]), *map(float, sys.argv[2:5])
one = json.loads(sys.argv[5])
print()
print(f"nmt translate, {n} sentences: {t_all:.3f} s, {n / t_all:.1f} sentences/s whole process, "
      f"{n / (t_all - t_none):.1f} sentences/s without its load ({t_none:.3f} s)")
print(f"one short sentence: nmt translate {1e3 * (t_one - t_none):.1f} ms (t(1 line) "
      f"{1e3 * t_one:.1f} - t(no lines) {1e3 * t_none:.1f}); nmt serve p50 {one['p50_ms']:.1f} ms, "
      f"p99 {one['p99_ms']:.1f} ms over {one['requests']} requests")
EOF
