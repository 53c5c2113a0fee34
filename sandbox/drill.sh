#!/usr/bin/env bash
# The main job on the embedded default: `tidemark drill` on a scratch folder, nothing else
# running. It rehearses the whole incident (journal, apply, bad delete, DR copy, recovery to H,
# validation, route flip, writer resumes, query through the route) and prints the timed report.
#
#   bash sandbox/drill.sh [FOLDER] [-- extra drill options, e.g. --orders 10000 --events 100000]
#   bash sandbox/drill.sh --s3    # the same against a local S3-protocol server (moto) it starts
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tidemark/target}"
cargo build -q -p tidemark-recovery --bin tidemark
tm="$CARGO_TARGET_DIR/debug/tidemark"
if [[ "${1:-}" == "--s3" ]]; then
    shift
    eval "$(bash sandbox/moto.sh start "${TIDEMARK_MOTO_PORT:-5999}")"
    trap 'bash sandbox/moto.sh stop >/dev/null 2>&1 || true' EXIT
    python3 sandbox/s3_buckets.py
    exec_args=(--store "s3://tidemark/drill-$(date +%s)")
else
    exec_args=()
fi
work="${1:-$(mktemp -d -t tidemark-drill.XXXXXX)}"
[[ $# -gt 0 ]] && shift
[[ "${1:-}" == "--" ]] && shift
"$tm" drill --work "$work" "${exec_args[@]}" "$@"
