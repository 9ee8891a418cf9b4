#!/usr/bin/env bash
# The README's test command: every test of the workspace (`cargo test --workspace`, extra
# arguments passed on), then the tests that could not run on this machine and why.
#
# Needs a running PostgreSQL (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres).
# The tests of the real agent CLIs and test frameworks run where `.ci/run` installed them
# (it does, then runs this); elsewhere they say "skipped", and the summary below lists them.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export ARBITER_SKIPS="${ARBITER_SKIPS:-$PWD/target/test-skips.txt}"
mkdir -p "$(dirname "$ARBITER_SKIPS")"
: > "$ARBITER_SKIPS"
cargo test --workspace "$@"
rc=$?
echo
if [ -s "$ARBITER_SKIPS" ]; then
  echo "skipped: $(sort -u "$ARBITER_SKIPS" | wc -l) test(s) could not run on this machine (they checked nothing):"
  sort -u "$ARBITER_SKIPS" | sed 's/^/  /'
  echo "  bash .ci/run installs what they need (the agent CLIs, pytest, Jest, Vitest, Go) and runs every test"
else
  echo "skipped: none"
fi
exit $rc
