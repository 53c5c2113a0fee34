#!/usr/bin/env bash
# SeaweedFS for the tests: one `weed mini` process with an S3 gateway (versioning, atomic
# conditional writes, checksums, SigV4) and an Iceberg REST catalog on a second port.
#
#   sandbox/seaweedfs.sh start [BASE_PORT]   start it and print the export lines
#   sandbox/seaweedfs.sh stop                stop it and delete its data
#
# Ports: BASE (default 7710, or $TIDEMARK_SEAWEED_PORT) master, +1 volume, +2 filer, +3 S3,
# +4 Iceberg REST, +5 admin UI; each of them also listens on port+10000 for gRPC. Every
# listener is bound to 127.0.0.1 and telemetry is off: `weed mini` otherwise binds 0.0.0.0 and
# reports to an outside host. The Lance and WebDAV servers are off, and so is the S3 gateway's
# auto-creation of buckets on upload (a write to a missing bucket must fail, as on AWS).
#
# Credentials: the S3 keys are $TIDEMARK_SEAWEED_ACCESS_KEY / $TIDEMARK_SEAWEED_SECRET_KEY
# (default test/test, the sandbox's AWS credentials, so the environment sandbox/moto.sh exports
# reaches both servers); SigV4 is checked. The REST catalog takes the same pair as OAuth2 client
# credentials (`credential` = KEY:SECRET, token endpoint <uri>/v1/oauth/tokens).
#
# Buckets: `tidemark` (versioned) and `tidemark-unversioned` (sandbox/s3_buckets.py), and the
# table bucket `warehouse` of the REST catalog (its tables live under s3://warehouse/<ns>/<t>/).
#
# Exports:
#   TIDEMARK_SEAWEED_S3_ENDPOINT   http://127.0.0.1:<S3 port>
#   TIDEMARK_REST_URI              http://127.0.0.1:<Iceberg port>
#   TIDEMARK_REST_WAREHOUSE        warehouse
#   TIDEMARK_REST_CREDENTIAL       KEY:SECRET
#
# Known server gaps (SeaweedFS 4.48; ../shared/STACK-NOTES.md): `register` answers 200 but the
# table then loads with empty metadata and a new uuid; a drop without purge deletes the table's
# files; /v1/config advertises no S3 endpoint, so clients are given `s3.endpoint` themselves.
#
# State lives in ${TIDEMARK_SANDBOX_DIR:-/tmp/tidemark-sandbox}: data in seaweedfs/, and
# seaweedfs.pid, seaweedfs.port (the base port), seaweedfs.log.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=sandbox/lib/proc.sh
source sandbox/lib/proc.sh

SANDBOX_DIR="${TIDEMARK_SANDBOX_DIR:-/tmp/tidemark-sandbox}"
DATA_DIR="$SANDBOX_DIR/seaweedfs"
PID_FILE="$SANDBOX_DIR/seaweedfs.pid"
PORT_FILE="$SANDBOX_DIR/seaweedfs.port"
LOG_FILE="$SANDBOX_DIR/seaweedfs.log"
DEFAULT_PORT="${TIDEMARK_SEAWEED_PORT:-7710}"
KEY="${TIDEMARK_SEAWEED_ACCESS_KEY:-test}"
SECRET="${TIDEMARK_SEAWEED_SECRET_KEY:-test}"
TABLE_BUCKET=warehouse

say() { echo "seaweedfs.sh: $*" >&2; }

print_exports() {
    local base="$1"
    echo "export TIDEMARK_SEAWEED_S3_ENDPOINT=http://127.0.0.1:$((base + 3))"
    echo "export TIDEMARK_REST_URI=http://127.0.0.1:$((base + 4))"
    echo "export TIDEMARK_REST_WAREHOUSE=$TABLE_BUCKET"
    echo "export TIDEMARK_REST_CREDENTIAL=$KEY:$SECRET"
}

# rest_and_s3_answer BASE: the Iceberg REST catalog serves its config and S3 answers.
rest_and_s3_answer() {
    curl -sf -o /dev/null "http://127.0.0.1:$(($1 + 4))/v1/config" && http_answers "http://127.0.0.1:$(($1 + 3))/"
}

start() {
    local base="${1:-$DEFAULT_PORT}" pid bin p
    mkdir -p "$SANDBOX_DIR"
    if pid="$(pid_alive "$PID_FILE")"; then
        base="$(cat "$PORT_FILE" 2>/dev/null || echo "$base")"
        say "already running (pid $pid, base port $base)"
        print_exports "$base"
        return 0
    fi
    for p in $(seq "$base" $((base + 5))) $(seq $((base + 10000)) $((base + 10005))); do
        if port_busy "$p"; then
            say "port $p is already in use; pass another base port: seaweedfs.sh start PORT"
            return 1
        fi
    done
    bin="$(bash sandbox/servers_venv.sh)"
    rm -rf "$DATA_DIR"
    mkdir -p "$DATA_DIR"
    # setsid: the server must outlive this script and not get the caller's Ctrl-C.
    AWS_ACCESS_KEY_ID="$KEY" AWS_SECRET_ACCESS_KEY="$SECRET" setsid "$bin/weed" mini \
        -dir="$DATA_DIR" -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.telemetry=false \
        -master.port="$base" -volume.port=$((base + 1)) -filer.port=$((base + 2)) \
        -s3.port=$((base + 3)) -s3.port.iceberg=$((base + 4)) -admin.port=$((base + 5)) \
        -s3.port.lance=0 -webdav=false -s3.autoCreateBucket=false \
        -tableBucket="$TABLE_BUCKET" >"$LOG_FILE" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$PID_FILE"
    echo "$base" >"$PORT_FILE"
    if ! wait_ready "$pid" "$LOG_FILE" 60 rest_and_s3_answer "$base"; then
        say "weed did not start; stopping it"
        stop
        return 1
    fi
    # The table bucket is created asynchronously after start; wait until it is listed.
    local i
    for i in $(seq 1 60); do
        if AWS_ENDPOINT_URL="http://127.0.0.1:$((base + 3))" AWS_ACCESS_KEY_ID="$KEY" \
            AWS_SECRET_ACCESS_KEY="$SECRET" "$bin/python" - "$TABLE_BUCKET" <<'EOF' 2>/dev/null; then
import os, sys, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
sys.exit(0 if sys.argv[1] in [b["Name"] for b in s3.list_buckets()["Buckets"]] else 1)
EOF
            break
        fi
        sleep 0.5
    done
    AWS_ENDPOINT_URL="http://127.0.0.1:$((base + 3))" AWS_ACCESS_KEY_ID="$KEY" AWS_SECRET_ACCESS_KEY="$SECRET" \
        AWS_REGION=us-east-1 "$bin/python" sandbox/s3_buckets.py >&2
    say "started (pid $pid, ports $base-$((base + 5)), log $LOG_FILE)"
    print_exports "$base"
}

stop() {
    local pid
    # SIGTERM takes 4-12 s (the volume server's pre-stop wait, then the flush).
    if pid="$(stop_pid_file "$PID_FILE" 20)"; then say "stopped (pid $pid)"; else say "not running"; fi
    rm -f "$PORT_FILE"
    rm -rf "$DATA_DIR"
}

LAUNCHER_PORT_ARG=BASE_PORT
launcher_main "$@"
