#!/usr/bin/env bash
# bench-overhead.sh — arbiter's orchestration overhead against the bare git work it wraps.
#
#   bash scripts/bench-overhead.sh                 # the full benchmark (docs/BENCHMARKS.md)
#   FILES=2000 RUNS=3 bash scripts/bench-overhead.sh   # a quick smoke run
#
# What is compared, on one generated repository of $FILES small committed text files:
#
#   floor    $BENCH_DIR/floor.sh: the git work a 4-candidate run cannot avoid, done directly
#            and sequentially: 4 x (git worktree add --detach, git add -A,
#            git diff --cached --binary HEAD, git worktree remove --force).
#   arbiter-cold  arbiter run --task noop --candidates 4 --runner command --command true
#            --apply none   (agents do nothing, no verify commands, nothing applied), with
#            the repository's workspace pool removed before each run: every candidate's
#            workspace is a full checkout, like the floor's worktrees.
#   arbiter-warm  the same run a second time in the same repository: the pool is warm, and
#            each workspace is reset to the base (only what changed is rewritten).
#   Every candidate runs in the sandbox (--sandbox auto).
#
# Then, unless SANDBOX=0, the sandbox's own cost: starting `true` through the sandbox's
# supervisor and init (Landlock rules for a realistic policy, user, PID and mount namespaces)
# against starting it directly, with hyperfine; the difference is the sandbox overhead per
# sandboxed process (a candidate starts one for its agent and one per gate).
#
# All are timed with hyperfine and the script prints the medians, min-max and the ratios
# to the floor (targets: cold <= 1.5x, warm <= 0.2x).
#
# Fairness. The root filesystem here is ext4 (no journal, mounted with `discard`): deleting
# tens of thousands of files — which every run of either command does when it removes its
# worktrees — slows file creation down for a while afterwards. hyperfine's normal order
# (all runs of A, then all runs of B) would hand that penalty mostly to whichever command
# runs second. So the runs are interleaved in rounds, in ABBA order: round 1 runs
# floor then arbiter, round 2 arbiter then floor, and so on, one hyperfine call per
# round with `--runs 1` per command; each command first gets $WARMUP untimed warmup runs
# (also alternated), and `sync` runs before every timed run (hyperfine --prepare) so that
# one run's dirty pages are not written back on the next run's clock. The per-round JSON
# files are merged into one hyperfine-style JSON ($BENCH_DIR/results.json).
#
# Knobs (environment):
#   FILES=20000       files in the generated repository (cached per value of FILES)
#   RUNS=8            timed runs of each command (rounds), at most
#   BUDGET=420        seconds for the timed rounds: no new round starts when one more round
#                     as long as the last would overrun it (but at least MIN_RUNS=3 rounds).
#                     On a fast filesystem all RUNS rounds fit; on this machine's ext4 a
#                     round of the 20,000-file benchmark takes ~2-3 minutes (see the docs).
#   WARMUP=1          untimed warmup runs of each command
#   CANDIDATES=4      candidates (arbiter) and worktrees (floor)
#   BENCH_DIR=target/bench   where the repository, floor.sh and the JSON results go
#   EXTRA=1           also time `arbiter run ... --parallel 1` (sequential candidates, like
#                     the floor, warm pool) — useful when analysing where arbiter's time goes
#   SANDBOX=1         measure the sandbox's start-up overhead (0 to skip, `only` for nothing
#                     else)
#   QUIET_WAIT=120    before starting, wait up to this many seconds for the machine to be
#                     idle; CPU used by other processes during each round is reported anyway
#   SKIP_BUILD=1      do not run cargo build (use the existing target/release/arbiter)
#   ARBITER=PATH      time this arbiter binary instead (no build)
#
# Needs: cargo, git, hyperfine (installed with apt-get when missing), jq.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

FILES="${FILES:-20000}"
RUNS="${RUNS:-8}"
MIN_RUNS="${MIN_RUNS:-3}"
BUDGET="${BUDGET:-420}"
QUIET_WAIT="${QUIET_WAIT:-120}"
WARMUP="${WARMUP:-1}"
CANDIDATES="${CANDIDATES:-4}"
EXTRA="${EXTRA:-0}"
SANDBOX="${SANDBOX:-1}"
BENCH_DIR="${BENCH_DIR:-$root/target/bench}"
mkdir -p "$BENCH_DIR"
BENCH_DIR="$(cd "$BENCH_DIR" && pwd)"

log() { printf '==> %s\n' "$*" >&2; }

# --- tools -------------------------------------------------------------------------------
if ! command -v hyperfine >/dev/null 2>&1; then
  log "hyperfine is missing; installing it with apt-get"
  sudo_=""; [ "$(id -u)" -ne 0 ] && sudo_="sudo"
  $sudo_ apt-get install -y hyperfine >/dev/null 2>&1 || { $sudo_ apt-get update >/dev/null && $sudo_ apt-get install -y hyperfine >/dev/null; }
fi
for t in git jq hyperfine; do
  command -v "$t" >/dev/null 2>&1 || { echo "bench-overhead: '$t' is required" >&2; exit 1; }
done

# --- arbiter (release) ---------------------------------------------------------------------
if [ -n "${ARBITER:-}" ]; then
  arbiter="$ARBITER"
else
  if [ "${SKIP_BUILD:-0}" != 1 ]; then
    log "cargo build --release -p arbiter-cli"
    cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p arbiter-cli
  fi
  arbiter="$root/target/release/arbiter"
fi
[ -x "$arbiter" ] || { echo "bench-overhead: $arbiter not found (build it or drop SKIP_BUILD)" >&2; exit 1; }
# Copied so that a rebuild during the benchmark cannot swap the binary between runs.
[ "$arbiter" -ef "$BENCH_DIR/arbiter" ] || cp "$arbiter" "$BENCH_DIR/arbiter"
arbiter="$BENCH_DIR/arbiter"
head_="$(GIT_OPTIONAL_LOCKS=0 git -C "$root" describe --always --dirty 2>/dev/null || echo '?')"
if [ -n "${ARBITER:-}" ]; then origin="binary $ARBITER"
elif [ "${SKIP_BUILD:-0}" = 1 ]; then origin="existing target/release/arbiter; workspace at $head_"
else origin="built from $head_"; fi
version="$("$arbiter" --version) ($origin, sha256 $(sha256sum "$arbiter" | cut -c1-12))"

# --- the repository (generated once per FILES, then reused) --------------------------------
# Layout: src/m<NN>/p<N>/file<i>.txt — 100 files per leaf folder, 10 leaves per module,
# i.e. 20 modules x 10 folders x 100 files for FILES=20000. Each file is ~60 bytes of text.
repo="$BENCH_DIR/repo-$FILES"
ready="$repo/.git/bench-ready"
if [ ! -f "$ready" ]; then
  log "generating $repo ($FILES files)"
  rm -rf "$repo"
  mkdir -p "$repo"
  (
    cd "$repo"
    git init -q -b main
    git config user.name "arbiter bench"
    git config user.email "bench@arbiter.invalid"
    git config gc.auto 0
    i=0
    while [ "$i" -lt "$FILES" ]; do
      d="src/m$(printf %02d $((i / 1000)))/p$(((i / 100) % 10))"
      mkdir -p "$d"
      end=$((i + 100)); [ "$end" -gt "$FILES" ] && end="$FILES"
      while [ "$i" -lt "$end" ]; do
        printf 'file %d\nsome small text in %s\nline three\n' "$i" "$d" > "$d/file$i.txt"
        i=$((i + 1))
      done
    done
    printf '# bench repository: %d files\n' "$FILES" > README.md
    git add -A
    git commit -q -m "bench: $FILES files"
    "$arbiter" init >/dev/null
  )
  touch "$ready"
fi
[ -z "$(git -C "$repo" status --porcelain)" ] || { echo "bench-overhead: $repo is not clean" >&2; exit 1; }

# The filesystem matters more than anything else here (docs/BENCHMARKS.md): say which it is.
fstype="$(df --output=fstype "$repo" | tail -1 | tr -d ' ')"
dev="$(basename "$(df --output=source "$repo" | tail -1 | tr -d ' ')")"
if [ "$fstype" = ext4 ] && [ "$(cat "/sys/fs/ext4/$dev/journal_task" 2>/dev/null)" = "<none>" ]; then
  log "note: $repo is on ext4 without a journal: file creation is much slower for a minute or"
  log "      more after mass deletions, and both commands delete ${FILES}x${CANDIDATES} files per run;"
  log "      expect long, noisy runs (BENCH_DIR=/dev/shm/arbiter-bench measures on tmpfs)"
fi

# --- the sandbox's own cost ----------------------------------------------------------------
# `true` through the supervisor and init, against `true` directly. The policy is the one
# arbiter gives a candidate whose workspace pool is in $BENCH_DIR: Landlock rules hiding the
# repository, arbiter's directories and the home's credential stores, user and PID
# namespaces, and — with an arbiter whose probe knows them (`mounts`) — the candidate's view
# (a fresh /proc, a private /tmp) and every user's arbiter directories from /etc/passwd; it
# then also times the same policy without the view (`sandboxed-no-view`).
sandbox_cost() {
  echo
  local probe sb home hidden c view true_bin names
  probe="$("$arbiter" __sandbox probe)" || true
  echo "$probe" >&2
  sb="$BENCH_DIR/sandbox"; rm -rf "$sb"; mkdir -p "$sb/tree" "$sb/home" "$sb/tmp" "$sb/input"
  home="${HOME:-/root}"
  hidden=("$repo/.git" "$repo/.arbiter" "$cache_warm" "$home/.config/arbiter")
  for c in .ssh .gnupg .aws .azure .config/gcloud .kube .docker .netrc .git-credentials .config/gh .npmrc .pypirc; do
    hidden+=("$home/$c")
  done
  view=false
  if jq -e 'has("mounts")' <<<"$probe" >/dev/null 2>&1; then
    view=true
    # Every user's: all three in a home its user owns, those that exist in any other.
    while IFS=: read -r _ _ uid _ _ h _; do
      case "$h" in /*) ;; *) continue ;; esac
      [ -d "$h" ] || continue
      for c in .cache/arbiter .config/arbiter .local/share/arbiter; do
        if [ "$(stat -c %u "$h")" = "$uid" ] || [ -e "$h/$c" ]; then hidden+=("$h/$c"); fi
      done
    done < /etc/passwd
  fi
  # policy VIEW: the candidate's policy, with the view (a private /tmp) or without.
  policy() {
    jq -cn --arg t "$sb/tree" --arg h "$sb/home" --arg m "$sb/tmp" --arg i "$sb/input" \
      --arg o "$repo/.git/objects" --arg r "$sb/registry" --argjson view "$1" --argjson known "$view" \
      '$ARGS.positional as $hidden | {hidden: $hidden, revealed: [$o, $i], landlock: true, namespaces: true, registry: $r} +
      if $known then {writable: [$t, $h], tmp: $m, mounts: $view} else {writable: [$t, $h, $m]} end' \
      --args "${hidden[@]}"
  }
  true_bin="$(command -v true)"
  names=(-n direct "$true_bin" -n sandboxed "$arbiter __sandbox run --policy '$(policy "$view")' -- $true_bin")
  if [ "$view" = true ]; then
    names+=(-n sandboxed-no-view "$arbiter __sandbox run --policy '$(policy false)' -- $true_bin")
  fi
  ( cd "$sb/tree" && hyperfine --shell=none --style basic --warmup 20 --runs 300 --export-json "$sb/sandbox.json" \
      "${names[@]}" >&2 )
  printf 'Subject: %s; %s hidden paths\n' "$version" "${#hidden[@]}"
  jq -r '(.results[] | select(.command == "direct") | .median) as $d | .results[] |
    "\(.command): median \((.median * 1000 * 100 | round) / 100) ms (min \((.min * 1000 * 100 | round) / 100) ms)" +
    (if .command != "direct" then " -> overhead \(((.median - $d) * 1000 * 100 | round) / 100) ms per sandboxed process (target < 20 ms)" else "" end)' \
    "$sb/sandbox.json"
}

cache_warm="$BENCH_DIR/cache-warm"
if [ "$SANDBOX" = only ]; then
  sandbox_cost
  exit 0
fi

# --- the floor -----------------------------------------------------------------------------
floor="$BENCH_DIR/floor.sh"
cat > "$floor" <<'SH'
#!/usr/bin/env bash
# The floor: the git work of an N-candidate run, done directly and sequentially.
#   bash floor.sh REPO [N]
set -euo pipefail
repo="$1"; n="${2:-4}"
wt="$repo/.arbiter/floor-worktrees/$$"
mkdir -p "$wt"
for i in $(seq 1 "$n"); do
  git -C "$repo" worktree add --detach --quiet "$wt/c$i" HEAD
  git -C "$wt/c$i" add -A
  git -C "$wt/c$i" diff --cached --binary HEAD > "$wt/c$i.diff"
  git -C "$repo" worktree remove --force "$wt/c$i"
done
rm -rf "$wt"
SH
chmod +x "$floor"

# --- timing --------------------------------------------------------------------------------
# Each arbiter command has a cache of its own. The cold one starts by renaming its pool out
# of the way (a rename: no time), and the removal of what it renamed happens in the --prepare
# before every timed run, off the clock.
cache_cold="$BENCH_DIR/cache-cold"
cold="$BENCH_DIR/cold.sh"
cat > "$cold" <<'SH'
#!/bin/sh
# cold.sh CACHE ARBITER ARGS...: run arbiter with an empty workspace pool in CACHE.
cache="$1"; shift
[ -d "$cache/workspaces" ] && mv "$cache/workspaces" "$cache/workspaces.trash.$$"
ARBITER_CACHE_DIR="$cache" exec "$@"
SH
chmod +x "$cold"
prepare="$BENCH_DIR/prepare.sh"
printf '#!/bin/sh
rm -rf %s/workspaces.trash.*
sync
' "$cache_cold" > "$prepare"
chmod +x "$prepare"
cmd_floor="bash $floor $repo $CANDIDATES"
run_args="--repo $repo run --task noop --candidates $CANDIDATES --runner command --command true --apply none"
cmd_cold="$cold $cache_cold $arbiter $run_args"
cmd_warm="env ARBITER_CACHE_DIR=$cache_warm $arbiter $run_args"
cmd_seq="$cmd_warm --parallel 1"
names=(floor arbiter-cold arbiter-warm); cmds=("$cmd_floor" "$cmd_cold" "$cmd_warm")
if [ "$EXTRA" = 1 ]; then names+=(arbiter-parallel-1); cmds+=("$cmd_seq"); fi

# arbiter exits non-zero when no candidate wins, which is the expected outcome of a no-op
# task without verify commands; what is measured is the time, so failures are ignored
# (each run's success is checked below from its state.json instead).
hf() { hyperfine --shell=none --ignore-failure --style basic --prepare "$prepare" "$@" >&2; }

order_for_round() { # ABBA over the command indices
  local r="$1" n="${#names[@]}" i
  if [ $((r % 2)) -eq 1 ]; then for ((i = 0; i < n; i++)); do echo "$i"; done
  else for ((i = n - 1; i >= 0; i--)); do echo "$i"; done; fi
}

raw="$BENCH_DIR/raw"; rm -rf "$raw"; mkdir -p "$raw"
# Worktrees of an interrupted floor run (arbiter prunes its own leftovers itself).
if [ -d "$repo/.arbiter/floor-worktrees" ]; then
  rm -rf "$repo/.arbiter/floor-worktrees"
  git -C "$repo" worktree prune
fi

# CPU used by other processes during a round = all busy CPU time (/proc/stat) minus the
# user+system time hyperfine measured for our commands. On a shared machine (a compiler
# running next to the benchmark) this is what makes numbers unreliable, so it is reported.
busy_ticks() { awk '/^cpu /{ print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
hz="$(getconf CLK_TCK)"
# Wait (up to QUIET_WAIT seconds) until the machine is idle: < 20% of one core busy over 5 s.
waited=0
while [ "$waited" -lt "$QUIET_WAIT" ]; do
  b0="$(busy_ticks)"; sleep 5; b1="$(busy_ticks)"
  [ $(((b1 - b0) * 100 / hz / 5)) -lt 20 ] && break
  [ "$waited" -eq 0 ] && log "the machine is busy ($(((b1 - b0) * 100 / hz / 5))% of a core); waiting up to ${QUIET_WAIT}s for it to be idle"
  waited=$((waited + 5))
done
runs_before="$(ls "$repo/.arbiter/runs" 2>/dev/null | wc -l)"
if [ "$WARMUP" -gt 0 ]; then
  log "warmup: $WARMUP run(s) of each command"
  for ((w = 1; w <= WARMUP; w++)); do
    for i in $(order_for_round "$w"); do
      hf --runs 1 -n "warmup ${names[$i]}" "${cmds[$i]}" >/dev/null 2>&1
    done
  done
fi
: > "$raw/foreign.tsv"
started="$(date +%s)"; done_runs=0
for ((r = 1; r <= RUNS; r++)); do
  args=()
  for i in $(order_for_round "$r"); do args+=(-n "${names[$i]}" "${cmds[$i]}"); done
  log "round $r/$RUNS: $(for i in $(order_for_round "$r"); do printf '%s ' "${names[$i]}"; done)"
  t0="$(date +%s)"; b0="$(busy_ticks)"
  hf --runs 1 --export-json "$raw/round-$r.json" "${args[@]}" 2>/dev/null
  b1="$(busy_ticks)"; now="$(date +%s)"; done_runs="$r"
  ours="$(jq '[.results[] | .user + .system] | add' "$raw/round-$r.json")"
  foreign="$(awk -v b=$((b1 - b0)) -v hz="$hz" -v o="$ours" 'BEGIN { f = b / hz - o; printf "%.1f", (f < 0 ? 0 : f) }')"
  printf '%s\t%s\t%s\n' "$r" "$((now - t0))" "$foreign" >> "$raw/foreign.tsv"
  awk -v f="$foreign" -v w=$((now - t0)) 'BEGIN { exit !(f > 0.1 * w) }' &&
    log "warning: other processes used ${foreign} CPU-seconds during this $((now - t0))s round; the machine is not quiet"
  # The time budget: stop when another round like the last one would overrun it.
  if [ "$r" -lt "$RUNS" ] && [ "$r" -ge "$MIN_RUNS" ] && [ $((now - started + now - t0)) -gt "$BUDGET" ]; then
    log "time budget of ${BUDGET}s reached after $r rounds (a round takes $((now - t0))s); stopping"
    break
  fi
done

# Every timed arbiter run must have gone through all candidates (a run that stopped early
# would look fast): check the state.json of each new run.
bad=0
for s in $(ls -d "$repo"/.arbiter/runs/*/ | sort | tail -n +"$((runs_before + 1))"); do
  n_done="$(jq '[.candidates[] | select(.status == "finished")] | length' "$s/state.json")"
  [ "$n_done" = "$CANDIDATES" ] || { echo "bench-overhead: run $s finished only $n_done candidates" >&2; bad=1; }
done
[ "$(git -C "$repo" worktree list | wc -l)" -eq 1 ] || { echo "bench-overhead: worktrees were left behind" >&2; bad=1; }

# --- merge and report ----------------------------------------------------------------------
results="$BENCH_DIR/results.json"
jq -s --argjson files "$FILES" --argjson candidates "$CANDIDATES" '
  def median: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def mean: add / length;
  def stddev: (mean) as $m | if length > 1 then (map(. - $m | . * .) | add / (length - 1) | sqrt) else 0 end;
  [.[].results[]] | group_by(.command) | map({
      command: .[0].command,
      times: [.[].times[]],
      user: [.[].user] | mean,
      system: [.[].system] | mean
    } | . + {mean: (.times | mean), stddev: (.times | stddev), median: (.times | median),
             min: (.times | min), max: (.times | max)})
  | {files: $files, candidates: $candidates, results: .}' "$raw"/round-*.json > "$results"

echo
printf 'Repository: %s files in %s (%s), %s candidates, %s timed runs each (+%s warmup), interleaved ABBA\n' \
  "$FILES" "$repo" "$fstype" "$CANDIDATES" "$done_runs" "$WARMUP"
printf 'Subject: %s\n' "$version"
jq -r '
  (.results[] | select(.command == "floor") | .median) as $f
  | ["command", "median (s)", "min (s)", "max (s)", "mean ± sd (s)", "median / floor"],
    (.results | sort_by(.median)[] | [.command, (.median * 1000 | round / 1000 | tostring),
      (.min * 1000 | round / 1000 | tostring), (.max * 1000 | round / 1000 | tostring),
      ((.mean * 1000 | round / 1000 | tostring) + " ± " + (.stddev * 1000 | round / 1000 | tostring)),
      ((.median / $f * 100 | round / 100 | tostring) + "x")])
  | @tsv' "$results" | column -t -s $'\t'
echo
ratio_of() { jq -r --arg c "$1" '(.results[] | select(.command == "floor") | .median) as $f | .results[] | select(.command == $c) | .median / $f' "$results"; }
verdict_of() { if awk -v r="$1" -v t="$2" 'BEGIN { exit !(r <= t) }'; then echo met; else echo "NOT met"; fi; }
cold="$(ratio_of arbiter-cold)"; warm="$(ratio_of arbiter-warm)"
printf 'arbiter-cold / floor (medians) = %.2f  -> target <= 1.5x %s\n' "$cold" "$(verdict_of "$cold" 1.5)"
printf 'arbiter-warm / floor (medians) = %.2f  -> target <= 0.2x %s\n' "$warm" "$(verdict_of "$warm" 0.2)"
awk -F'\t' '{ w += $2; f += $3 } END { printf "Other processes used %.1f CPU-seconds during %d s of timed rounds (%.0f%% of one core)\n", f, w, (w ? 100 * f / w : 0) }' "$raw/foreign.tsv"
echo "JSON: $results (per-round hyperfine exports in $raw/)"

if [ "$SANDBOX" = 1 ]; then
  sandbox_cost
fi
exit "$bad"
