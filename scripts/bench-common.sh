# bench-common.sh — sourced by the benchmarks that start a throwaway `arbiter serve`
# (bench-control-plane.sh, bench-dashboard.sh), after they set $work (a temporary directory):
# the server's tokens, fresh for the run and only in the environment, and the repository the
# benchmark plans name (they never run an agent in it) at $repo.

random_token() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
ARBITER_BOOTSTRAP_TOKEN=$(random_token)
ARBITER_ADMIN_TOKEN=$(random_token)
export ARBITER_BOOTSTRAP_TOKEN ARBITER_ADMIN_TOKEN ARBITER_TOKEN="$ARBITER_ADMIN_TOKEN"

repo="$work/repo"
mkdir -p "$repo" && git -C "$repo" init -q -b main
git -C "$repo" -c user.name=bench -c user.email=bench@arbiter.invalid commit -q --allow-empty -m init
