#!/usr/bin/env bash
# bench-dashboard.sh — the web dashboard's benchmarks (docs/BENCHMARKS.md, "The dashboard").
#
#   bash scripts/bench-dashboard.sh               # SQLite in a temp data directory
#   STORE=postgres bash scripts/bench-dashboard.sh  # Postgres at $DATABASE_URL (a fresh database)
#
# 1. A plan of $TASKS (1000) tasks (each depending on up to two of the 10 before it, so the
#    graph is deep and wide) imported into a real `arbiter serve`; its page (`/plans/ID`)
#    fetched $LOADS (30) times by a logged-in client. Reported: the server's own time per
#    page (the `ms` its request log records, from the request in to the response out),
#    median and p95, the page's size, and the same for `/healthz` (the floor: a route that
#    does nothing).
# 2. $DASHBOARDS (50) open dashboards: each a login, a page load and the page's event
#    stream (`/ui/stream?plan=ID`) held open; the server's RSS before and after.
#
# Knobs: STORE (sqlite|postgres), TASKS, LOADS, DASHBOARDS, SKIP_BUILD=1, ARBITER_BIN (the binary).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

STORE="${STORE:-sqlite}" TASKS="${TASKS:-1000}" LOADS="${LOADS:-30}" DASHBOARDS="${DASHBOARDS:-50}"
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
[ -n "${SKIP_BUILD:-}" ] || cargo build -q --release -p arbiter-cli
work=$(mktemp -d)
cp "${ARBITER_BIN:-target/release/arbiter}" "$work/arbiter"
arbiter="$work/arbiter"
server_pid="" db="" streams=()
cleanup() {
  for p in "${streams[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  [ -z "$db" ] || psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The tokens of the run, and $repo.
source scripts/bench-common.sh

data="$work/server"
mkdir -p "$data"
if [ "$STORE" = postgres ]; then
  db="arbiter_bench_ui_$$"
  psql -q "$DATABASE_URL" -c "CREATE DATABASE $db" >/dev/null
  export ARBITER_DATABASE_URL="${DATABASE_URL%/*}/$db"
fi
RUST_LOG=info "$arbiter" serve --bind 127.0.0.1:0 --data-dir "$data" --log-format json > "$data/stdout" 2> "$data/log" &
server_pid=$!
for _ in $(seq 100); do
  url=$(sed -n 's/^arbiter serve: listening on //p' "$data/stdout")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "the server did not start" >&2; cat "$data/log" >&2; exit 1; }

python3 - "$repo" "$TASKS" > "$work/plan.json" <<'PY'
import json, random, sys
repo, n = sys.argv[1], int(sys.argv[2])
random.seed(7)
tasks = []
for i in range(n):
    deps = sorted({f"T{j}" for j in random.sample(range(max(0, i - 10), i), min(i, random.randint(0, 2)))})
    tasks.append({"id": f"T{i}", "title": f"Task number {i} of the benchmark", "dependencies": deps})
print(json.dumps({"id": "big", "name": "A plan of %d tasks" % n, "repository": repo,
                  "defaults": {"runners": "command", "command": "true", "no_verify": True}, "tasks": tasks}))
PY
(cd "$repo" && "$arbiter" plan import "$work/plan.json" --server "$url" >/dev/null)

login() { curl -s -o /dev/null -D - --data-urlencode "token=$ARBITER_ADMIN_TOKEN" --data "next=/" "$url/login" \
  | sed -n 's/^set-cookie: \(arbiter_session=[0-9a-f]*\).*/\1/Ip'; }
cookie=$(login)
bytes=$(curl -s -b "$cookie" "$url/plans/big" | wc -c)
for _ in $(seq "$LOADS"); do
  curl -s -o /dev/null -b "$cookie" "$url/plans/big"
  curl -s -o /dev/null "$url/healthz"
done
rss_before=$(awk '/VmRSS/ {print $2}' "/proc/$server_pid/status")
for i in $(seq "$DASHBOARDS"); do
  c=$(login)
  curl -s -o /dev/null -b "$c" "$url/plans/big"
  curl -s -N -o /dev/null -b "$c" "$url/ui/stream?plan=big" &
  streams+=($!)
done
sleep 2
rss_after=$(awk '/VmRSS/ {print $2}' "/proc/$server_pid/status")
python3 - "$data/log" "$TASKS" "$bytes" "$rss_before" "$rss_after" "$DASHBOARDS" "$LOADS" <<'PY'
import json, statistics, sys
log, tasks, size, before, after, n, loads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], int(sys.argv[7])
times = {"/plans/{plan}": [], "/healthz": []}
for line in open(log):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    f = e.get("fields", e)
    if f.get("message") == "request" and f.get("route") in times and f.get("status") == 200:
        times[f["route"]].append(float(f["ms"]))
# The first load measured the size; the loads after the measured ones are the dashboards'.
page, floor = times["/plans/{plan}"][1 : loads + 1], times["/healthz"]
p95 = lambda xs: sorted(xs)[max(0, int(len(xs) * 0.95) - 1)]
print(f"plan page of {tasks} tasks: server time median {statistics.median(page):.1f} ms, p95 {p95(page):.1f} ms "
      f"({len(page)} loads), {size / 1024:.0f} KiB")
print(f"floor (/healthz): median {statistics.median(floor):.3f} ms; ratio page/floor x{statistics.median(page) / statistics.median(floor):.0f}")
print(f"server RSS: {before / 1024:.1f} MiB, then {after / 1024:.1f} MiB with {n} open dashboards "
      f"(+{(after - before) / 1024:.1f} MiB)")
PY
