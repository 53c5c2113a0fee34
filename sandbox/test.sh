#!/usr/bin/env bash
# README's test command. Starts a real S3-protocol server (moto, server mode) on 127.0.0.1,
# exports the endpoint and credentials the S3 tests use, plus a second, authenticating moto
# instance that refuses those credentials (TIDEMARK_S3_AUTH_ENDPOINT, for the tests of refused
# credentials), SeaweedFS (S3 and an Iceberg REST catalog; sandbox/seaweedfs.sh), moto's S3
# Tables control plane (sandbox/s3tables.sh), PyIceberg and PostgreSQL, runs every test of the
# workspace (with the distributed engine's feature, and a Ballista cluster: sandbox/ballista.sh;
# TIDEMARK_BALLISTA=0 leaves the cluster out; headless Chromium, installed when missing, for the
# drill trend page's test), tests the embedded build of the drill (sandbox/embedded.sh), and
# stops the servers. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
port="${TIDEMARK_MOTO_PORT:-5999}"
auth_port="${TIDEMARK_MOTO_AUTH_PORT:-5998}"
stop_all() {
    local s
    for s in "moto.sh stop" "moto.sh stop-auth" "postgres.sh stop" "seaweedfs.sh stop" "s3tables.sh stop" "ballista.sh stop"; do
        # shellcheck disable=SC2086 # script and subcommand
        bash sandbox/$s >/dev/null 2>&1 || true
    done
}
trap stop_all EXIT
# Runs a server script and takes the export lines it prints; a server that does not start (a
# port in use, a missing tool) stops the run here, naming it, instead of failing its tests later.
start() {
    local out
    out="$(bash "$@")" || { echo "test.sh: \`bash $*\` failed: its server is needed by the tests" >&2; exit 1; }
    eval "$out"
}
start sandbox/moto.sh start "$port"
start sandbox/moto.sh start-auth "$auth_port"
python3 sandbox/s3_buckets.py
# SeaweedFS: S3 (TIDEMARK_SEAWEED_S3_ENDPOINT) and its Iceberg REST catalog (TIDEMARK_REST_URI,
# TIDEMARK_REST_WAREHOUSE, TIDEMARK_REST_CREDENTIAL); base port TIDEMARK_SEAWEED_PORT.
start sandbox/seaweedfs.sh start
# moto's S3 Tables (TIDEMARK_S3TABLES_ENDPOINT, TIDEMARK_S3TABLES_ARN); port TIDEMARK_S3TABLES_PORT.
start sandbox/s3tables.sh start
# PyIceberg for the interoperability tests (exports TIDEMARK_PYTHON).
start sandbox/pyiceberg.sh
# A throwaway PostgreSQL server for the catalog tests on PostgreSQL (exports TIDEMARK_TEST_PG_URI).
start sandbox/postgres.sh start
# Headless Chromium for the test of the drill trend page (recovery/src/rehearse/trend_tests.rs:
# the page is rendered, its screenshot and net log checked). A missing Chromium fails that test;
# TIDEMARK_SKIP_CHROMIUM=1 skips it, TIDEMARK_CHROMIUM names another binary. Installed from
# Debian's packages (as root) when missing.
ensure_chromium() {
    if [[ "${TIDEMARK_SKIP_CHROMIUM:-0}" == 1 || -n "${TIDEMARK_CHROMIUM:-}" ]] \
        || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
        return 0
    fi
    if [[ "$(id -u)" != 0 ]]; then
        echo "test.sh: chromium is missing; install it (apt-get install -y chromium) or set TIDEMARK_SKIP_CHROMIUM=1" >&2
        exit 1
    fi
    echo "test.sh: chromium is missing; installing the Debian package chromium" >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2; then
        apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2
    fi
}
ensure_chromium
# The distributed recovery engine (issue 15) is built and tested too: the cargo feature
# tidemark-recovery/ballista-engine (off by default in the crate, so that a plain build and the
# embedded drill stay light; no protoc needed). Its standalone tests (scheduler and executor in
# the test process) always run; the cluster scenario runs against a real Ballista cluster
# (scheduler and two executors, separate processes on 127.0.0.1; sandbox/ballista.sh, scheduler
# port TIDEMARK_BALLISTA_PORT, default 7750, executors the next four; exports
# TIDEMARK_BALLISTA_URL) unless TIDEMARK_BALLISTA=0. The test build also makes the tidemark
# binary the cluster runs (target/debug/tidemark), so it is built first.
features=(--features tidemark-recovery/ballista-engine)
if [[ "${TIDEMARK_BALLISTA:-1}" != 0 ]]; then
    cargo test --workspace "${features[@]}" --no-run
    # The cluster's scheduler and executors get an S3 store for the test bucket (moto, above).
    export TIDEMARK_BALLISTA_S3_BUCKETS="${TIDEMARK_BALLISTA_S3_BUCKETS:-s3://tidemark}"
    start sandbox/ballista.sh start "${TIDEMARK_BALLISTA_PORT:-7750}"
fi
cargo test --workspace "${features[@]}" "$@"
# The embedded build of the drill (no `remote` feature; sandbox/embedded.sh): its drill and its
# refusals. A run given test filters or cargo options leaves it out.
if [[ $# -eq 0 ]]; then
    bash sandbox/embedded.sh
fi
