#!/usr/bin/env bash
# bench-plans.sh — the plan queue's benchmarks (docs/BENCHMARKS.md, "Plans").
#
#   bash scripts/bench-plans.sh          # everything (Postgres at $DATABASE_URL)
#   SQLITE_ONLY=1 bash scripts/bench-plans.sh
#
# 1. Claim + complete cycles per second through each store with 1, 4 and 16 concurrent
#    claimers, against the floor of the bare claim and complete statements on the same
#    table, and the store-level import of a 10,000-task plan with ~20,000 dependency edges:
#    `cargo bench -p arbiter-store --bench queue` (crates/arbiter-store/benches/queue.rs).
# 2. The same 10,000-task plan through the command line: `arbiter plan import` (reading,
#    checking and storing the file) and `arbiter plan show` (the whole DAG with badges),
#    timed with hyperfine on a throwaway repository.
# 3. A plan end to end: $E2E_TASKS (200) independent tasks, each a full tournament of one
#    candidate — a workspace from the warm pool, the sandboxed agent (an instant shell script
#    writing one file), the baseline and the gate (one verify command each, sandboxed), the
#    patch capture, limits, secret scan, selection, reports and the commit onto the
#    integration branch — run by `arbiter plan run --workers $E2E_WORKERS` (4) on SQLite.
#    Reports tasks per second (median of $E2E_RUNS runs; each run starts from a fresh plan
#    in the same repository, so the pool is warm after the first).
#
# Knobs: SQLITE_ONLY=1 (queue benchmarks on SQLite only), E2E_ONLY=1 (only part 3),
#        E2E_TASKS, E2E_WORKERS, E2E_RUNS (3), ARBITER=/path/to/arbiter (time that binary,
#        an older build say, instead of building this checkout's).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine; }
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"

if [ -n "${ARBITER:-}" ]; then
  arbiter="$(cd "$(dirname "$ARBITER")" && pwd)/$(basename "$ARBITER")"
else
  cargo build -q --release -p arbiter-cli
  arbiter="$PWD/target/release/arbiter"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

e2e() {
  local tasks="${E2E_TASKS:-200}" workers="${E2E_WORKERS:-4}" runs="${E2E_RUNS:-3}"
  local repo="$work/e2e" cache="$work/e2e-cache"
  mkdir -p "$repo" && cd "$repo"
  git init -q -b main
  git config user.name "arbiter bench"
  git config user.email "bench@arbiter.invalid"
  printf '# plan bench\n' > README.md
  cat > agent.sh <<'SH'
#!/bin/sh
task=$(sed -n 's/^(Task \([^ ]*\) of plan.*/\1/p' "$ARBITER_PROMPT_FILE")
echo "$task" > "out-$task.txt"
SH
  chmod +x agent.sh
  git add -A && git commit -q -m init
  "$arbiter" init >/dev/null
  echo
  echo "## a plan end to end: $tasks independent tasks, plan run --workers $workers, SQLite"
  local rates=()
  for r in $(seq 1 "$runs"); do
    python3 - "$repo/plan.json" "$tasks" "$r" <<'PY'
import json, sys
path, n, run = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tasks = [{"id": f"t{i}", "title": f"Task {i}", "description": f"Write out-t{i}.txt holding its id.",
          "acceptance_criteria": [f"out-t{i}.txt exists"], "verify": [f"test -f out-t{i}.txt"]}
         for i in range(n)]
plan = {"id": f"e2e{run}", "name": "plan bench", "defaults": {"candidates": 1, "runners": "command",
        "command": "./agent.sh", "max_attempts": 1}, "tasks": tasks}
json.dump(plan, open(path, "w"))
PY
    ARBITER_CACHE_DIR="$cache" "$arbiter" plan import plan.json >/dev/null
    local t0 t1
    t0=$(date +%s.%N)
    ARBITER_CACHE_DIR="$cache" "$arbiter" plan run "e2e$r" --workers "$workers" > "$work/e2e-$r.out" 2>&1 || {
      cat "$work/e2e-$r.out"; echo "bench-plans: plan run e2e$r failed" >&2; exit 1; }
    t1=$(date +%s.%N)
    local done_
    done_=$(git rev-list --count "arbiter/e2e$r" ^main)
    [ "$done_" = "$tasks" ] || { echo "bench-plans: e2e$r committed $done_ of $tasks tasks" >&2; exit 1; }
    local rate
    rate=$(awk -v n="$tasks" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", n / (b - a) }')
    rates+=("$rate")
    printf 'run %d: %d tasks in %.2f s = %s tasks/s\n' "$r" "$tasks" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$rate"
  done
  printf 'median: %s tasks/s (target >= 50)\n' "$(printf '%s\n' "${rates[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')"
  cd - >/dev/null
}

if [ -n "${E2E_ONLY:-}" ]; then
  e2e
  exit 0
fi

echo "## queue (cargo bench -p arbiter-store --bench queue)"
if [ -n "${SQLITE_ONLY:-}" ]; then
  cargo bench -q -p arbiter-store --bench queue -- --sqlite
else
  cargo bench -q -p arbiter-store --bench queue
fi
python3 - "$work/big.json" <<'PY'
import json, sys
tasks = []
for i in range(10_000):
    deps = [f"t{i - 1}", f"t{i // 2}"] if i >= 2 else []
    tasks.append({"id": f"t{i}", "title": f"task {i}", "description": f"Do step {i} of the big plan.",
                  "acceptance_criteria": [f"step {i} done"], "verify": ["true"], "dependencies": deps})
json.dump({"id": "big", "name": "10k tasks", "tasks": tasks}, open(sys.argv[1], "w"))
edges = sum(len(t["dependencies"]) for t in tasks)
print(f"generated {len(tasks)} tasks with {edges} dependency edges", file=sys.stderr)
PY
cd "$work"
git init -q -b main && git -c user.name=b -c user.email=b@b commit -q --allow-empty -m init
"$arbiter" init >/dev/null

echo
echo "## arbiter plan import / plan show of the 10,000-task plan"
hyperfine --warmup 1 --runs 10 --prepare 'rm -f .arbiter/arbiter.db .arbiter/arbiter.db-wal .arbiter/arbiter.db-shm' \
  --export-markdown import.md "$arbiter plan import big.json"
"$arbiter" plan import big.json >/dev/null
hyperfine --warmup 1 --runs 10 --export-markdown show.md "$arbiter plan show big"
cat import.md show.md

e2e
