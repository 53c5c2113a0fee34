#!/usr/bin/env bash
# The embedded build tested (issue 14, target 6): what `sandbox/drill.sh` builds and runs —
# tidemark-recovery without its `remote` feature, profile `drill` — builds, passes the drill
# (exit 0; a failed check is exit 4), and refuses what it lacks by name with exit 6 (an S3 store,
# a PostgreSQL, Iceberg REST or S3 Tables catalog, an S3 warehouse, a table file on S3) before
# touching anything.
# `sandbox/test.sh` runs it after the workspace's tests; nothing here needs a server.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tidemark/target}"
work="$(mktemp -d -t tidemark-embedded.XXXXXX)"
trap 'rm -rf "$work"' EXIT
if ! bash sandbox/drill.sh "$work/drill" >"$work/drill.out" 2>&1; then
    cat "$work/drill.out" >&2
    echo "embedded.sh: the drill of the embedded build failed" >&2
    exit 1
fi
echo "embedded.sh: the drill of the embedded build passed ($(grep -c '| ok |' "$work/drill.out") checks ok)"
tm="$CARGO_TARGET_DIR/drill/tidemark"
failed=0
# refused TEXT ARGS…: the command exits 6 and its message names TEXT.
refused() {
    local text="$1" rc=0 out
    shift
    out="$("$tm" "$@" 2>&1)" || rc=$?
    if [[ "$rc" != 6 || "$out" != *"$text"* ]]; then
        echo "embedded.sh: \`tidemark $*\` should exit 6 naming \"$text\"; exit $rc: $out" >&2
        failed=1
    else
        echo "embedded.sh: refused, exit 6: tidemark $*"
    fi
}
no_s3="this tidemark was built without S3"
no_servers="this tidemark was built without the catalogs and stores on servers"
refused "s3://bucket/prefix: $no_s3" store check s3://bucket/prefix
refused "s3://bucket/journal: $no_s3" journal verify --journal s3://bucket/journal
refused "the PostgreSQL catalog postgres://u@127.0.0.1:1/db: $no_servers" \
    history record --catalog postgres://u@127.0.0.1:1/db --warehouse "$work/w" --out "$work/h.json"
refused "the Iceberg REST catalog http://127.0.0.1:1/: $no_servers" \
    history record --catalog rest+http://127.0.0.1:1/ --out "$work/h.json"
refused "the S3 Tables catalog arn:aws:s3tables:us-east-1:123456789012:bucket/b: $no_servers" \
    history record --catalog arn:aws:s3tables:us-east-1:123456789012:bucket/b --out "$work/h.json"
refused "s3://bucket/warehouse: $no_s3" \
    catalog rebuild --catalog "$work/c.db" --warehouse s3://bucket/warehouse
refused "s3://bucket/t/metadata/v1.metadata.json: $no_s3" \
    table rewrite-paths --metadata s3://bucket/t/metadata/v1.metadata.json --from-prefix s3://bucket \
    --to-prefix "$work/x"
# Nothing was made where the refused commands pointed (the SQLite file of the last one aside).
if [[ -e "$work/h.json" || -e "$work/w" || -e "$work/x" ]]; then
    echo "embedded.sh: a refused command wrote $(ls -d "$work"/h.json "$work"/w "$work"/x 2>/dev/null)" >&2
    failed=1
fi
exit "$failed"
