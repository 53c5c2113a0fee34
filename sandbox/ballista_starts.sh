#!/usr/bin/env bash
# How often a Ballista executor loses its start to the registration race, on a loaded machine:
# starts and stops the sandbox's cluster (sandbox/ballista.sh) N times while HOGS busy loops
# take the cores, and prints how many starts failed and how many executors had to be started
# again.
#
#   bash sandbox/ballista_starts.sh [N=10] [HOGS=6]
#
# Build the binary first (cargo build -p tidemark-recovery --features ballista-engine). The
# cluster runs on TIDEMARK_BALLISTA_PORT (default 7760, executors the next four), in its own
# sandbox folder, so a test cluster on 7750 is left alone.
set -euo pipefail
n="${1:-10}"
hogs="${2:-6}"
here="$(cd "$(dirname "$0")" && pwd)"
port="${TIDEMARK_BALLISTA_PORT:-7760}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tidemark/target}"
export TIDEMARK_SANDBOX_DIR
TIDEMARK_SANDBOX_DIR="$(mktemp -d /tmp/tidemark-ballista-starts.XXXXXX)"
pids=()
cleanup() {
    [[ ${#pids[@]} -gt 0 ]] && kill "${pids[@]}" 2>/dev/null
    bash "$here/ballista.sh" stop >/dev/null 2>&1 || true
    rm -rf "$TIDEMARK_SANDBOX_DIR"
}
trap cleanup EXIT
for _ in $(seq 1 "$hogs"); do (while :; do :; done) & pids+=($!); done
failed=0 restarts=0
for _ in $(seq 1 "$n"); do
    if ! out="$(bash "$here/ballista.sh" start "$port" 2>&1)"; then
        failed=$((failed + 1))
        echo "ballista_starts.sh: a start failed:" >&2
        echo "$out" >&2
    fi
    restarts=$((restarts + $(grep -c "stopped before it listened" <<<"$out" || true)))
    bash "$here/ballista.sh" stop >/dev/null 2>&1
done
echo "{\"cluster_starts\": $n, \"failed\": $failed, \"executor_starts_repeated\": $restarts, \"busy_loops\": $hogs}"
