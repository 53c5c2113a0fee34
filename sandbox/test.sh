#!/usr/bin/env bash
# README's test command. Starts a real S3-protocol server (moto, server mode) on 127.0.0.1,
# exports the endpoint and credentials the S3 tests use, plus a second, authenticating moto
# instance that refuses those credentials (TIDEMARK_S3_AUTH_ENDPOINT, for the tests of refused
# credentials), runs every test of the workspace, and stops both servers. Extra arguments go to
# `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
port="${TIDEMARK_MOTO_PORT:-5999}"
auth_port="${TIDEMARK_MOTO_AUTH_PORT:-5998}"
trap 'bash sandbox/moto.sh stop >/dev/null 2>&1 || true; bash sandbox/moto.sh stop-auth >/dev/null 2>&1 || true; bash sandbox/postgres.sh stop >/dev/null 2>&1 || true' EXIT
eval "$(bash sandbox/moto.sh start "$port")"
eval "$(bash sandbox/moto.sh start-auth "$auth_port")"
python3 sandbox/s3_buckets.py
# PyIceberg for the interoperability tests (exports TIDEMARK_PYTHON).
eval "$(bash sandbox/pyiceberg.sh)"
# A throwaway PostgreSQL server for the catalog tests on PostgreSQL (exports TIDEMARK_TEST_PG_URI).
eval "$(bash sandbox/postgres.sh start)"
cargo test --workspace "$@"
