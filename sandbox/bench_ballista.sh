#!/usr/bin/env bash
# The distributed recovery beside the local one (issue 15; docs/performance.md "Ballista"): the
# recovery benchmark (recovery/benches/recover.rs) at one size on four engines — local,
# ballista-standalone, and the sandbox cluster (sandbox/ballista.sh) with one and with two
# executors — printing each run's step table.
#
#   bash sandbox/bench_ballista.sh [ROWS EVENTS]        # default 1000000 100000
#
# PROFILE=dev runs the dev profile (no release build of the whole stack; the figures then compare
# engines with each other, not with the release figures elsewhere in docs/performance.md).
# The cluster's scheduler port is TIDEMARK_BALLISTA_PORT (default 7750, executors the next four).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tidemark/target}"
rows="${1:-1000000}"
events="${2:-100000}"
profile="${PROFILE:-bench}"
port="${TIDEMARK_BALLISTA_PORT:-7750}"
dir=release
[[ "$profile" == dev ]] && dir=debug
cargo build --workspace --features tidemark-recovery/ballista-engine --profile "$profile" --bins
export TIDEMARK_BIN="$CARGO_TARGET_DIR/$dir/tidemark"
trap 'bash sandbox/ballista.sh stop >/dev/null 2>&1 || true' EXIT
bench() { cargo bench --profile "$profile" --workspace --features tidemark-recovery/ballista-engine --bench recover -- "$rows" "$events" "$1"; }
bench local
bench ballista-standalone
for n in 1 2; do
    TIDEMARK_BALLISTA_EXECUTORS="$n" bash sandbox/ballista.sh start "$port" >/dev/null
    echo "cluster: $n executor(s)"
    bench "ballista://127.0.0.1:$port"
    bash sandbox/ballista.sh stop
done
