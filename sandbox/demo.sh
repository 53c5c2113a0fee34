#!/usr/bin/env bash
# The main job on the embedded default: a scratch folder, nothing else running. Probes the
# folder, creates a journal, appends generated order events, verifies the chain and prints its
# status. Pass a folder to keep the result (default: a new temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."
work="${1:-$(mktemp -d -t tidemark-demo.XXXXXX)}"
mkdir -p "$work"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tidemark/target}"
cargo build -q -p tidemark-recovery --bin tidemark
tm="$CARGO_TARGET_DIR/debug/tidemark"
set -x
"$tm" journal init --journal "$work/journal"
"$tm" store check "$work/journal"
"$tm" gen events --orders 2000 --events 50000 --out "$work/events.ndjson"
"$tm" journal append --journal "$work/journal" --input "$work/events.ndjson" --batch-size 10000
"$tm" journal verify --journal "$work/journal"
"$tm" journal status --journal "$work/journal"
{ set +x; } 2>/dev/null
echo "demo folder: $work"
