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
# The embedded drill builds what it runs on and no more (issue 14, target 6: a first drill soon
# after `git clone`): no S3, REST, S3 Tables or PostgreSQL (`--no-default-features`), the
# dependencies unoptimised (profile `drill`, Cargo.toml). `--s3` needs the S3 store: the dev build.
if [[ "${1:-}" == "--s3" ]]; then
    shift
    cargo build -q -p tidemark-recovery --bin tidemark
    tm="$CARGO_TARGET_DIR/debug/tidemark"
    eval "$(bash sandbox/moto.sh start "${TIDEMARK_MOTO_PORT:-5999}")"
    trap 'bash sandbox/moto.sh stop >/dev/null 2>&1 || true' EXIT
    python3 sandbox/s3_buckets.py
    exec_args=(--store "s3://tidemark/drill-$(date +%s)")
else
    echo "building tidemark for the drill (a first build compiles its stack: about 3 minutes on 2 cores)" >&2
    cargo build -q -p tidemark-recovery --bin tidemark --profile drill --no-default-features
    tm="$CARGO_TARGET_DIR/drill/tidemark"
    exec_args=()
fi
work="${1:-$(mktemp -d -t tidemark-drill.XXXXXX)}"
[[ $# -gt 0 ]] && shift
[[ "${1:-}" == "--" ]] && shift
"$tm" drill --work "$work" "${exec_args[@]}" "$@"
