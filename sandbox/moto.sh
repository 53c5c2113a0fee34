#!/usr/bin/env bash
# A local S3 endpoint for tests and demos: moto's server mode (in-memory, versioning and
# conditional writes; it does not check signatures, so any credentials work).
#
#   sandbox/moto.sh start [PORT]   start it (default port 5999) and print the export lines
#   sandbox/moto.sh stop           stop the one started from this sandbox folder
#
# Typical use:  eval "$(sandbox/moto.sh start)"
# State lives in ${TIDEMARK_SANDBOX_DIR:-/tmp/tidemark-sandbox} (pid file and server log).
set -euo pipefail

MOTO_SPEC='moto[s3]==5.2.5'
SANDBOX_DIR="${TIDEMARK_SANDBOX_DIR:-/tmp/tidemark-sandbox}"
PID_FILE="$SANDBOX_DIR/moto.pid"
PORT_FILE="$SANDBOX_DIR/moto.port"
LOG_FILE="$SANDBOX_DIR/moto.log"

# Everything but the export lines goes to stderr, so that `eval "$(moto.sh start)"` works.
say() { echo "moto.sh: $*" >&2; }

running_pid() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid
    pid="$(cat "$PID_FILE")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

print_exports() {
    local port="$1"
    echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$port"
    echo "export AWS_ACCESS_KEY_ID=test"
    echo "export AWS_SECRET_ACCESS_KEY=test"
    echo "export AWS_REGION=us-east-1"
}

start() {
    local port="${1:-5999}" pid
    mkdir -p "$SANDBOX_DIR"
    if pid="$(running_pid)"; then
        # Reusing the server keeps `start` idempotent; its buckets are still there.
        port="$(cat "$PORT_FILE" 2>/dev/null || echo "$port")"
        say "already running (pid $pid, port $port)"
        print_exports "$port"
        return 0
    fi
    if ! command -v moto_server >/dev/null 2>&1; then
        say "moto_server not found; installing $MOTO_SPEC"
        python3 -m pip install -q "$MOTO_SPEC" flask flask-cors >&2
        hash -r
    fi
    if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
        say "port $port is already in use by another process; pass another: moto.sh start PORT"
        return 1
    fi
    # setsid: the server must outlive this script and not get the caller's Ctrl-C.
    setsid moto_server -H 127.0.0.1 -p "$port" >"$LOG_FILE" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$PID_FILE"
    echo "$port" >"$PORT_FILE"
    local i
    for i in $(seq 1 60); do
        if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
            say "started (pid $pid, port $port, log $LOG_FILE)"
            print_exports "$port"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            say "moto_server exited; its log:"
            cat "$LOG_FILE" >&2
            rm -f "$PID_FILE" "$PORT_FILE"
            return 1
        fi
        sleep 0.5
    done
    say "moto_server did not answer on port $port within 30 s; stopping it (log $LOG_FILE)"
    kill "$pid" 2>/dev/null || true
    rm -f "$PID_FILE" "$PORT_FILE"
    return 1
}

stop() {
    local pid
    if ! pid="$(running_pid)"; then
        say "not running"
        rm -f "$PID_FILE" "$PORT_FILE"
        return 0
    fi
    kill "$pid"
    local i
    for i in $(seq 1 20); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$PID_FILE" "$PORT_FILE"
    say "stopped (pid $pid)"
}

case "${1:-}" in
    start) shift; start "$@" ;;
    stop) stop ;;
    *)
        echo "usage: $0 start [PORT] | stop" >&2
        exit 2
        ;;
esac
