#!/usr/bin/env bash
# A local S3 endpoint for tests and demos: moto's server mode (in-memory, versioning and
# conditional writes; it does not check signatures, so any credentials work).
#
#   sandbox/moto.sh start [PORT]        start it (default port 5999) and print the export lines
#   sandbox/moto.sh stop                stop the one started from this sandbox folder
#   sandbox/moto.sh start-auth [PORT]   start a second, authenticating instance (default port
#                                       5998) and print `export TIDEMARK_S3_AUTH_ENDPOINT=...`
#   sandbox/moto.sh stop-auth           stop the authenticating instance
#
# The authenticating instance runs with INITIAL_NO_AUTH_ACTION_COUNT=0: moto then checks every
# request's signature against its (empty) IAM backend, so any access key, including the
# sandbox's `test`, is refused with 403 InvalidAccessKeyId. It is there for the tests of
# refused credentials; it has no buckets and nothing can create any.
#
# Typical use:  eval "$(sandbox/moto.sh start)"
# State lives in ${TIDEMARK_SANDBOX_DIR:-/tmp/tidemark-sandbox} (pid, port and log files:
# moto.* for the plain instance, moto-auth.* for the authenticating one).
set -euo pipefail
# shellcheck source=sandbox/lib/proc.sh
source "$(dirname "$0")/lib/proc.sh"

# moto itself comes from sandbox/servers_venv.sh (pinned there, with the S3 Tables control plane).
SANDBOX_DIR="${TIDEMARK_SANDBOX_DIR:-/tmp/tidemark-sandbox}"

# Everything but the export lines goes to stderr, so that `eval "$(moto.sh start)"` works.
say() { echo "moto.sh: $*" >&2; }

# use_instance plain|auth: points the globals below at that instance's files and settings.
use_instance() {
    KIND="$1"
    case "$KIND" in
        plain)
            NAME=moto
            DEFAULT_PORT=5999
            START_CMD=start
            # What answers once the server is up (any HTTP answer will do).
            PROBE_PATH=/
            ;;
        auth)
            NAME=moto-auth
            DEFAULT_PORT=5998
            START_CMD=start-auth
            # `/` would be an S3 ListBuckets without a signature, which the authenticating
            # server answers with a 500 and a traceback in its log; moto's own API is not checked.
            PROBE_PATH=/moto-api/
            ;;
    esac
    PID_FILE="$SANDBOX_DIR/$NAME.pid"
    PORT_FILE="$SANDBOX_DIR/$NAME.port"
    LOG_FILE="$SANDBOX_DIR/$NAME.log"
}

print_exports() {
    local port="$1"
    if [[ "$KIND" == auth ]]; then
        echo "export TIDEMARK_S3_AUTH_ENDPOINT=http://127.0.0.1:$port"
        return 0
    fi
    echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$port"
    echo "export AWS_ACCESS_KEY_ID=test"
    echo "export AWS_SECRET_ACCESS_KEY=test"
    echo "export AWS_REGION=us-east-1"
}

start() {
    local port="${1:-$DEFAULT_PORT}" pid
    mkdir -p "$SANDBOX_DIR"
    if pid="$(pid_alive "$PID_FILE")"; then
        # Reusing the server keeps `start` idempotent; its buckets are still there.
        port="$(cat "$PORT_FILE" 2>/dev/null || echo "$port")"
        say "already running (pid $pid, port $port)"
        print_exports "$port"
        return 0
    fi
    # The pinned moto of the servers' venv (sandbox/servers_venv.sh), never whatever moto_server
    # is on PATH: an older moto answers pyarrow's multipart uploads with an error in a 200 OK.
    local bin
    bin="$(bash "$(dirname "${BASH_SOURCE[0]}")/servers_venv.sh")"
    if curl -s -o /dev/null "http://127.0.0.1:$port$PROBE_PATH"; then
        say "port $port is already in use by another process; pass another: moto.sh $START_CMD PORT"
        return 1
    fi
    # setsid: the server must outlive this script and not get the caller's Ctrl-C.
    # The plain instance must not check signatures even if the caller's environment asks for it.
    if [[ "$KIND" == auth ]]; then
        INITIAL_NO_AUTH_ACTION_COUNT=0 setsid "$bin/moto_server" -H 127.0.0.1 -p "$port" >"$LOG_FILE" 2>&1 </dev/null &
    else
        env -u INITIAL_NO_AUTH_ACTION_COUNT setsid "$bin/moto_server" -H 127.0.0.1 -p "$port" >"$LOG_FILE" 2>&1 </dev/null &
    fi
    pid=$!
    echo "$pid" >"$PID_FILE"
    echo "$port" >"$PORT_FILE"
    if wait_ready "$pid" "$LOG_FILE" 30 http_answers "http://127.0.0.1:$port$PROBE_PATH"; then
        say "started (pid $pid, port $port, log $LOG_FILE)"
        print_exports "$port"
        return 0
    fi
    say "moto_server did not start on port $port; stopping it"
    stop_pid_file "$PID_FILE" >/dev/null || true
    rm -f "$PORT_FILE"
    return 1
}

stop() {
    local pid
    if pid="$(stop_pid_file "$PID_FILE")"; then say "stopped (pid $pid)"; else say "not running"; fi
    rm -f "$PORT_FILE"
}

case "${1:-}" in
    start) shift; use_instance plain; start "$@" ;;
    stop) use_instance plain; stop ;;
    start-auth) shift; use_instance auth; start "$@" ;;
    stop-auth) use_instance auth; stop ;;
    *)
        echo "usage: $0 start [PORT] | stop | start-auth [PORT] | stop-auth" >&2
        exit 2
        ;;
esac
