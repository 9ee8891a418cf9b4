#!/usr/bin/env bash
# bench-control-plane.sh — the control plane's benchmarks (docs/BENCHMARKS.md, "The control
# plane").
#
#   bash scripts/bench-control-plane.sh            # Postgres at $DATABASE_URL (a fresh database)
#   STORE=sqlite bash scripts/bench-control-plane.sh
#
# 1. `arbiter bench queue --workers $WORKERS (16) --tasks $TASKS (20000)` against a real
#    `arbiter serve` on loopback: no-op workers claim and report over HTTP until the plan is
#    drained (claim+complete/s, claim latency), then the wake-up latency of imports into an
#    empty plan while every worker waits in a long poll. Median of $RUNS (3) runs, each on a
#    fresh server and database.
# 2. The server's memory with $CONNECTED (100) workers connected: the same benchmark with 100
#    no-op workers, the server's peak RSS (VmHWM) read from /proc.
# 3. An idle `arbiter worker run` (registered, long-polling a server without plans): its RSS
#    after 3 s, and how long it takes to exit after SIGTERM (median of 5).
#
# Knobs: STORE (postgres|sqlite), WORKERS, TASKS, RUNS, CONNECTED, SKIP_BUILD=1, PG_OPTIONS
# (the server's connection options, e.g. sslmode=disable: by default a Postgres that offers
# TLS is spoken to over TLS, loopback included).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

STORE="${STORE:-postgres}" WORKERS="${WORKERS:-16}" TASKS="${TASKS:-20000}" RUNS="${RUNS:-3}"
CONNECTED="${CONNECTED:-100}"
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
[ -n "${SKIP_BUILD:-}" ] || cargo build -q --release -p arbiter-cli
work=$(mktemp -d)
cp target/release/arbiter "$work/arbiter"
arbiter="$work/arbiter"
server_pid=""
db=""
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  [ -z "$db" ] || psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The tokens of the run, and $repo.
source scripts/bench-common.sh

# Starts a server on a fresh store; sets $server_pid and $url.
start_server() {
  local data="$work/server-$1"
  rm -rf "$data" && mkdir -p "$data"
  if [ "$STORE" = postgres ]; then
    [ -z "$db" ] || psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $db" >/dev/null
    db="arbiter_bench_cp_$$_$1"
    psql -q "$DATABASE_URL" -c "CREATE DATABASE $db" >/dev/null
    export ARBITER_DATABASE_URL="${DATABASE_URL%/*}/$db${PG_OPTIONS:+?$PG_OPTIONS}"
  fi
  "$arbiter" serve --bind 127.0.0.1:0 --data-dir "$data" > "$data/stdout" 2> "$data/log" &
  server_pid=$!
  for _ in $(seq 100); do
    url=$(sed -n 's/^arbiter serve: listening on //p' "$data/stdout")
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  echo "the server did not start:" >&2
  cat "$data/log" >&2
  exit 1
}

stop_server() {
  kill "$server_pid" && wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

echo "## the work protocol over HTTP: $WORKERS no-op workers, $TASKS tasks, $STORE, $RUNS runs"
results="$work/results.jsonl"
for r in $(seq 1 "$RUNS"); do
  start_server "q$r"
  (cd "$repo" && "$arbiter" bench queue --server "$url" --workers "$WORKERS" --tasks "$TASKS" --json) \
    | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' | tee -a "$results"
  stop_server
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda f: statistics.median(f(r) for r in rows)
runs = ", ".join("%.0f" % r["claim_complete_per_second"] for r in rows)
print(f"claim+complete/s  median {med(lambda r: r['claim_complete_per_second']):.0f}  (runs: {runs})")
print(f"claim latency     p50 {med(lambda r: r['claim_ms']['p50']):.2f} ms, p99 {med(lambda r: r['claim_ms']['p99']):.2f} ms")
print(f"wake-up           p50 {med(lambda r: r['wakeup_ms']['p50']):.2f} ms, p95 {med(lambda r: r['wakeup_ms']['p95']):.2f} ms")
print(f"import of {rows[0]['tasks']} tasks  {med(lambda r: r['import_seconds']):.2f} s")
PY

echo
echo "## the server with $CONNECTED workers connected ($STORE)"
start_server mem
before=$(awk '/VmRSS/ {print $2}' "/proc/$server_pid/status")
(cd "$repo" && "$arbiter" bench queue --server "$url" --workers "$CONNECTED" --tasks 2000 --wakeups 20 --json) > "$work/mem.json"
peak=$(awk '/VmHWM/ {print $2}' "/proc/$server_pid/status")
python3 -c "import json; r=json.load(open('$work/mem.json')); print(f\"{r['claim_complete_per_second']:.0f} claim+complete/s with $CONNECTED workers\")"
echo "server RSS: $((before / 1024)) MiB idle, peak $((peak / 1024)) MiB with $CONNECTED workers"

echo
echo "## an idle worker"
times=()
for i in $(seq 1 5); do
  wdir="$work/worker-$i"
  mkdir -p "$wdir"
  "$arbiter" worker register --server "$url" --name "idle-$i" --token-file "$wdir/token" >/dev/null
  "$arbiter" worker run --server "$url" --token-file "$wdir/token" --data-dir "$wdir/data" 2> "$wdir/log" &
  wpid=$!
  sleep 3
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$wpid/status")
  start=$(date +%s%N)
  kill -TERM "$wpid"
  wait "$wpid" || true
  end=$(date +%s%N)
  ms=$(( (end - start) / 1000000 ))
  echo "worker $i: RSS $((rss / 1024)) MiB idle, exited $ms ms after SIGTERM"
  times+=("$ms")
done
printf '%s\n' "${times[@]}" | median | xargs -I{} echo "SIGTERM to exit: median {} ms"
stop_server
