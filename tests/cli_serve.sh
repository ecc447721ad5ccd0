#!/usr/bin/env bash
# nmt serve on a free loopback port, over real HTTP (tests/serve_check.py):
# every endpoint and its errors in LibreTranslate's or DeepL's shape, the
# translations equal to nmt translate's, alone and from 32 concurrent
# clients (batch invariance), API keys, the queue and time limits, bad and
# vanishing clients, CORS, the command's refusals, and SIGTERM finishing
# what is in flight before exiting 0.
# Usage: cli_serve.sh NMT DATA_DIR WORK_DIR
set -u
NMT=$1 DATA=$2 WORK=$3
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; kill_servers; exit 1; }
. "$HERE/cli_common.sh"
PIDS=""
kill_servers() { for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; }
trap kill_servers EXIT

# start NAME ARGS...: a server on a free port in the background; PORT, PID.
start() {
  local name=$1; shift
  "$NMT" serve -m m.nmt --port 0 "$@" >"$name.out" 2>"$name.err" &
  PID=$!
  PIDS="$PIDS $PID"
  for _ in $(seq 1 300); do
    PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$name.err" | grep -o '[0-9]*$')
    [ -n "$PORT" ] && return 0
    kill -0 "$PID" 2>/dev/null || fail "nmt serve $*: $(cat "$name.err")"
    sleep 0.1
  done
  fail "nmt serve $* did not start: $(cat "$name.err")"
}
# stop: SIGTERM, and the server's exit status in STATUS.
stop() {
  kill -TERM "$PID"
  wait "$PID"
  STATUS=$?
}
check() { python3 "$HERE/serve_check.py" "$@" || fail "serve_check.py $1"; }

train_toy_model "$NMT" "$DATA"
# The corpora's names give the pair (train.en, train.de).
"$NMT" info m.nmt | grep -q 'pair *en -> de' || fail "nmt info shows no pair: $("$NMT" info m.nmt)"
T="--threads 1 --beam 2"
gzip -dc "$DATA/multi30k/test_2016_flickr.en.gz" | head -120 >src.en
"$NMT" translate -m m.nmt -i src.en --split sentences $T >ref.de 2>err.txt ||
  fail "nmt translate: $(cat err.txt)"

# 1. Endpoints, shapes, errors, limits of size, bad clients, metrics; then
# the same lines from 32 clients at once.
start main $T --batch-limit 50 --char-limit 2000 --body-limit 100000 --client-timeout 1
check api "$PORT" src.en ref.de
check concurrent "$PORT" src.en ref.de
check cors "$PORT" ""
check burst "$PORT" "$PID"
stop
[ "$STATUS" -eq 0 ] || fail "SIGTERM: exit $STATUS ($(cat main.err))"
grep -q "nmt serve: stopped" main.err || fail "no stop line: $(cat main.err)"

# 2. API keys (a comment and blank lines in the file).
printf '# keys\n\nk3y-one\nsecond-key-2\n' >keys.txt
start keys $T --api-keys keys.txt
check keys "$PORT" second-key-2
stop

# 3. The queue's limit and the time limit.
start limits $T --max-queue 2 --timeout 0.000001
check limits "$PORT"
stop

# 4. CORS when asked; alternatives from --n-best.
start cors --threads 1 --beam 3 --n-best 3 --cors https://example.org
check cors "$PORT" https://example.org
check alternatives "$PORT" 3
stop

# 5. SIGTERM with requests in flight: each is answered, then exit 0.
start inflight $T
python3 "$HERE/serve_check.py" inflight "$PORT" 8 inflight.txt &
CLIENT=$!
# Stop once the first window is being translated.
for _ in $(seq 1 200); do
  curl -s "http://127.0.0.1:$PORT/metrics" | grep -q '^nmt_windows_total [1-9]' && break
  sleep 0.01
done
stop
wait "$CLIENT"
[ "$STATUS" -eq 0 ] || fail "SIGTERM in flight: exit $STATUS ($(cat inflight.err))"
[ "$(cat inflight.txt)" = "200 200 200 200 200 200 200 200" ] ||
  fail "requests in flight at SIGTERM: $(cat inflight.txt)"
curl -s "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && fail "still listening after SIGTERM"

# 6. The command's refusals: one line, non-zero.
expect 2 "give one per -m" "$NMT" serve -m m.nmt --lang en-de --lang en-fr
expect 2 "expected SRC-TGT" "$NMT" serve -m m.nmt --lang english
expect 2 "65535" "$NMT" serve -m m.nmt --port 70000
expect 1 "no keys" "$NMT" serve -m m.nmt --api-keys /dev/null
expect 1 "missing.nmt" "$NMT" serve -m missing.nmt
start busy $T
expect 1 "cannot listen on 127.0.0.1:$PORT" "$NMT" serve -m m.nmt --port "$PORT"
stop
echo "cli_serve: all checks passed"
