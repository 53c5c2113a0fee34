#!/usr/bin/env bash
# README's test command. Starts a real S3-protocol server (moto, server mode) on 127.0.0.1,
# exports the endpoint and credentials the S3 tests use, runs every test of the workspace, and
# stops the server. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
port="${TIDEMARK_MOTO_PORT:-5999}"
eval "$(bash sandbox/moto.sh start "$port")"
trap 'bash sandbox/moto.sh stop >/dev/null 2>&1 || true' EXIT
python3 sandbox/s3_buckets.py
cargo test --workspace "$@"
