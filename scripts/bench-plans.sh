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
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine; }
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"

echo "## queue (cargo bench -p arbiter-store --bench queue)"
if [ -n "${SQLITE_ONLY:-}" ]; then
  cargo bench -q -p arbiter-store --bench queue -- --sqlite
else
  cargo bench -q -p arbiter-store --bench queue
fi

cargo build -q --release -p arbiter-cli
arbiter="$PWD/target/release/arbiter"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
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
