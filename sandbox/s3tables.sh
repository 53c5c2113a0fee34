#!/usr/bin/env bash
# An AWS S3 Tables control plane for the tests: moto 5.2.5 in server mode (S3 Tables and the S3
# buckets that hold each table's warehouse), behind sandbox/s3tables_proxy.py, which fixes the
# one reply of moto's that aws-sdk-s3tables cannot parse (UpdateTableMetadataLocation; see the
# proxy's doc). Clients talk to the proxy only, for the control plane and for S3.
#
#   sandbox/s3tables.sh start [PORT]   start it (proxy on PORT, default 7740 or
#                                      $TIDEMARK_S3TABLES_PORT; moto on PORT+1, the lossy
#                                      proxy on PORT+2) and print the
#                                      export lines
#   sandbox/s3tables.sh stop           stop both
#
# moto does not check signatures (any credentials work; the sandbox uses test/test and region
# us-east-1) and keeps everything in memory. It emulates CreateTableBucket, namespaces,
# CreateTable, GetTable (version token, warehouse location), ListTables and
# UpdateTableMetadataLocation (409 ConflictException on a stale version token). Each table's
# warehouse is an S3 bucket `s3://<uuid>--table-s3` on the same server (Put/Get/Head work; List
# and Delete answer MethodNotAllowed).
#
# Exports:
#   TIDEMARK_S3TABLES_ENDPOINT   http://127.0.0.1:PORT (S3 Tables API and S3)
#   TIDEMARK_S3TABLES_ARN        the ARN of the table bucket `tidemark`
#   TIDEMARK_S3TABLES_LOSSY_ENDPOINT  http://127.0.0.1:PORT+2, a second proxy that leaves moto's
#                                UpdateTableMetadataLocation reply unparseable: the tests use it
#                                as a real lost reply (the pointer moved, the client cannot tell)
#
# State lives in ${TIDEMARK_SANDBOX_DIR:-/tmp/tidemark-sandbox}: s3tables.pid (moto),
# s3tables-proxy.pid, s3tables.port, s3tables.log, s3tables-proxy.log.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=sandbox/lib/proc.sh
source sandbox/lib/proc.sh

SANDBOX_DIR="${TIDEMARK_SANDBOX_DIR:-/tmp/tidemark-sandbox}"
PID_FILE="$SANDBOX_DIR/s3tables.pid"
PROXY_PID_FILE="$SANDBOX_DIR/s3tables-proxy.pid"
LOSSY_PID_FILE="$SANDBOX_DIR/s3tables-lossy.pid"
PORT_FILE="$SANDBOX_DIR/s3tables.port"
LOG_FILE="$SANDBOX_DIR/s3tables.log"
PROXY_LOG_FILE="$SANDBOX_DIR/s3tables-proxy.log"
DEFAULT_PORT="${TIDEMARK_S3TABLES_PORT:-7740}"
TABLE_BUCKET=tidemark
REGION=us-east-1
ACCOUNT=123456789012

say() { echo "s3tables.sh: $*" >&2; }

arn() { echo "arn:aws:s3tables:$REGION:$ACCOUNT:bucket/$TABLE_BUCKET"; }

print_exports() {
    echo "export TIDEMARK_S3TABLES_ENDPOINT=http://127.0.0.1:$1"
    echo "export TIDEMARK_S3TABLES_ARN=$(arn)"
    echo "export TIDEMARK_S3TABLES_LOSSY_ENDPOINT=http://127.0.0.1:$(($1 + 2))"
}

# wait_http PORT PID LOG: moto's API answers on PORT (directly or through a proxy).
wait_http() {
    wait_ready "$2" "$3" 30 http_answers "http://127.0.0.1:$1/moto-api/"
}

start() {
    local port="${1:-$DEFAULT_PORT}" pid ppid bin
    mkdir -p "$SANDBOX_DIR"
    if pid="$(pid_alive "$PID_FILE")" && ppid="$(pid_alive "$PROXY_PID_FILE")"; then
        port="$(cat "$PORT_FILE" 2>/dev/null || echo "$port")"
        say "already running (moto pid $pid, proxy pid $ppid, port $port)"
        print_exports "$port"
        return 0
    fi
    stop >/dev/null 2>&1 || true
    for p in "$port" $((port + 1)) $((port + 2)); do
        if curl -s -o /dev/null "http://127.0.0.1:$p/"; then
            say "port $p is already in use; pass another: s3tables.sh start PORT"
            return 1
        fi
    done
    bin="$(bash sandbox/servers_venv.sh)"
    # setsid: the servers must outlive this script and not get the caller's Ctrl-C.
    env -u INITIAL_NO_AUTH_ACTION_COUNT setsid "$bin/moto_server" -H 127.0.0.1 -p $((port + 1)) \
        >"$LOG_FILE" 2>&1 </dev/null &
    echo $! >"$PID_FILE"
    setsid "$bin/python" sandbox/s3tables_proxy.py "$port" $((port + 1)) >"$PROXY_LOG_FILE" 2>&1 </dev/null &
    echo $! >"$PROXY_PID_FILE"
    setsid "$bin/python" sandbox/s3tables_proxy.py $((port + 2)) $((port + 1)) lossy >>"$PROXY_LOG_FILE" 2>&1 </dev/null &
    echo $! >"$LOSSY_PID_FILE"
    echo "$port" >"$PORT_FILE"
    if ! wait_http $((port + 1)) "$(cat "$PID_FILE")" "$LOG_FILE" \
        || ! wait_http "$port" "$(cat "$PROXY_PID_FILE")" "$PROXY_LOG_FILE" \
        || ! wait_http $((port + 2)) "$(cat "$LOSSY_PID_FILE")" "$PROXY_LOG_FILE"; then
        stop
        return 1
    fi
    AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test "$bin/python" - "http://127.0.0.1:$port" "$TABLE_BUCKET" \
        "$REGION" "$(arn)" <<'EOF' >&2
import sys, boto3
endpoint, name, region, want = sys.argv[1:]
c = boto3.client("s3tables", endpoint_url=endpoint, region_name=region)
have = [b["arn"] for b in c.list_table_buckets()["tableBuckets"]]
if want not in have:
    arn = c.create_table_bucket(name=name)["arn"]
    assert arn == want, (arn, want)
print(f"table bucket {want}")
EOF
    say "started (moto pid $(cat "$PID_FILE") on port $((port + 1)), proxy pid $(cat "$PROXY_PID_FILE") on port $port)"
    print_exports "$port"
}

stop() {
    local f pid stopped=""
    for f in "$LOSSY_PID_FILE" "$PROXY_PID_FILE" "$PID_FILE"; do
        if pid="$(stop_pid_file "$f")"; then stopped="$stopped $pid"; fi
    done
    rm -f "$PORT_FILE"
    if [[ -n "$stopped" ]]; then say "stopped (pids$stopped)"; else say "not running"; fi
}

launcher_main "$@"
