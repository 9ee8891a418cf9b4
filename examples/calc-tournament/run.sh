#!/usr/bin/env bash
# A complete arbiter tournament on a throwaway repository:
#   bash examples/calc-tournament/run.sh
# It builds arbiter (release), creates a small Python project whose test fails, and runs four
# candidates of a scripted agent: one fixes the bug, one breaks another test, one does nothing,
# one makes the same fix as the first. arbiter runs the tests itself, picks the fix (two votes),
# applies it and leaves the audit trail in .arbiter/runs/<run-id>/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p arbiter-cli
arbiter="$root/target/release/arbiter"

repo="$(mktemp -d "${TMPDIR:-/tmp}/arbiter-example.XXXXXX")"
cd "$repo"
git init -q -b main
git config user.name "arbiter example"
git config user.email "example@arbiter.invalid"
cat > calc.py <<'PY'
def add(a, b):
    return a - b  # add


def mul(a, b):
    return a * b
PY
cat > test_calc.py <<'PY'
import unittest

from calc import add, mul


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mul(self):
        self.assertEqual(mul(2, 3), 6)


if __name__ == "__main__":
    unittest.main()
PY
cp "$here/agent.sh" ./agent.sh
printf '__pycache__/\n' > .gitignore
git add -A && git commit -q -m "calc with a bug"

"$arbiter" init >/dev/null
set +e
"$arbiter" run \
  --task "Fix the failing test in calc.py" \
  --success-criteria "All tests pass; the diff is minimal" \
  --verify "python3 -m unittest -q" \
  --candidates 4 --runner command --command ./agent.sh \
  --timeout-seconds 120
code=$?
set -e
echo
echo "--- git diff in $repo (the winner, applied to the working tree) ---"
git --no-pager diff
echo "--- arbiter runs list ---"
"$arbiter" runs list
echo
echo "Example repository: $repo  (arbiter exited $code)"
exit "$code"
