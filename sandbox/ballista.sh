#!/usr/bin/env bash
# A local Ballista cluster for `tidemark recover --engine ballista://…`: one scheduler and two
# executors, each a separate process on 127.0.0.1, all `tidemark ballista scheduler|executor`
# (the ballista-scheduler / ballista-executor 53.0.0 crates linked into the tidemark binary, so
# the cluster runs the same DataFusion as the client; no second toolchain build).
#
#   sandbox/ballista.sh start [PORT]   start it (scheduler gRPC on PORT, default 7750; the
#                                      executors use PORT+1..PORT+4) and print the export line
#                                      `export TIDEMARK_BALLISTA_URL=ballista://127.0.0.1:PORT`
#   sandbox/ballista.sh stop           stop the processes started from this sandbox folder
#
# The binary is $TIDEMARK_BIN, else target/debug/tidemark under $CARGO_TARGET_DIR (or ./target);
# build it first (`cargo build --workspace`). Executors reach S3 buckets named in
# $TIDEMARK_BALLISTA_S3_BUCKETS (space separated, s3://NAME) with the standard AWS environment
# (what `sandbox/moto.sh start` exports). $TIDEMARK_BALLISTA_EXECUTORS sets how many (default 2).
# State lives in ${TIDEMARK_SANDBOX_DIR:-/tmp/tidemark-sandbox} (ballista-*.pid, *.log).
set -euo pipefail

SANDBOX_DIR="${TIDEMARK_SANDBOX_DIR:-/tmp/tidemark-sandbox}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${TIDEMARK_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/tidemark}"
EXECUTORS="${TIDEMARK_BALLISTA_EXECUTORS:-2}"

say() { echo "ballista.sh: $*" >&2; }

alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

buckets_args() {
    local b out=()
    for b in ${TIDEMARK_BALLISTA_S3_BUCKETS:-}; do out+=(--s3-bucket "$b"); done
    echo "${out[@]:-}"
}

start() {
    local port="${1:-7750}" i
    mkdir -p "$SANDBOX_DIR"
    if alive "$SANDBOX_DIR/ballista-scheduler.pid"; then
        port="$(cat "$SANDBOX_DIR/ballista.port")"
        say "already running (scheduler port $port)"
        echo "export TIDEMARK_BALLISTA_URL=ballista://127.0.0.1:$port"
        return 0
    fi
    [[ -x "$BIN" ]] || { say "no tidemark binary at $BIN: build it (cargo build --workspace) or set TIDEMARK_BIN"; return 1; }
    if listening "$port"; then
        say "port $port is already in use; pass another: ballista.sh start PORT"
        return 1
    fi
    # shellcheck disable=SC2046 # word splitting of the bucket arguments is intended
    setsid "$BIN" ballista scheduler --bind 127.0.0.1 --port "$port" $(buckets_args) \
        >"$SANDBOX_DIR/ballista-scheduler.log" 2>&1 </dev/null &
    echo $! >"$SANDBOX_DIR/ballista-scheduler.pid"
    echo "$port" >"$SANDBOX_DIR/ballista.port"
    for i in $(seq 1 60); do listening "$port" && break; sleep 0.5; done
    listening "$port" || { say "scheduler did not listen on $port; log:"; cat "$SANDBOX_DIR/ballista-scheduler.log" >&2; stop; return 1; }
    for i in $(seq 1 "$EXECUTORS"); do
        start_executor "$port" "$i"
    done
    # An executor registers with the scheduler as it starts, and the scheduler connects back to
    # the executor's gRPC port: if that port does not listen yet, the registration fails and the
    # executor exits. `tidemark ballista executor` starts Ballista on a runtime worker so that the
    # server binds first (cli/ballista.rs); an executor that still lost the race is started
    # again (three tries).
    for i in $(seq 1 "$EXECUTORS"); do
        local flight=$((port + 2 * i - 1)) n try pid
        for try in 1 2 3; do
            pid="$(cat "$SANDBOX_DIR/ballista-executor-$i.pid")"
            for n in $(seq 1 60); do
                listening "$flight" && break
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.5
            done
            listening "$flight" && kill -0 "$pid" 2>/dev/null && break
            [[ $try == 3 ]] && break
            say "executor $i stopped before it listened (try $try); starting it again"
            cp "$SANDBOX_DIR/ballista-executor-$i.log" "$SANDBOX_DIR/ballista-executor-$i.try$try.log"
            start_executor "$port" "$i"
        done
        listening "$flight" || { say "executor $i did not listen on $flight; log:"; cat "$SANDBOX_DIR/ballista-executor-$i.log" >&2; stop; return 1; }
    done
    # Executors register with the scheduler right after they listen; give them that moment.
    sleep 1
    say "started: scheduler 127.0.0.1:$port, $EXECUTORS executors (logs $SANDBOX_DIR/ballista-*.log)"
    echo "export TIDEMARK_BALLISTA_URL=ballista://127.0.0.1:$port"
}

# Starts executor I of the cluster whose scheduler listens on PORT (its pid in the sandbox).
start_executor() {
    local port="$1" i="$2"
    local flight=$((port + 2 * i - 1)) grpc=$((port + 2 * i))
    mkdir -p "$SANDBOX_DIR/ballista-executor-$i"
    # shellcheck disable=SC2046 # word splitting of the bucket arguments is intended
    setsid "$BIN" ballista executor --bind 127.0.0.1 --port "$flight" --grpc-port "$grpc" \
        --scheduler-host 127.0.0.1 --scheduler-port "$port" --concurrent-tasks 1 \
        --work-dir "$SANDBOX_DIR/ballista-executor-$i" $(buckets_args) \
        >"$SANDBOX_DIR/ballista-executor-$i.log" 2>&1 </dev/null &
    echo $! >"$SANDBOX_DIR/ballista-executor-$i.pid"
}

stop() {
    local f pid
    for f in "$SANDBOX_DIR"/ballista-executor-*.pid "$SANDBOX_DIR/ballista-scheduler.pid"; do
        [[ -f "$f" ]] || continue
        pid="$(cat "$f")"
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
            kill -9 "$pid" 2>/dev/null || true
            say "stopped $(basename "$f" .pid) (pid $pid)"
        fi
        rm -f "$f"
    done
    rm -f "$SANDBOX_DIR/ballista.port"
}

case "${1:-}" in
    start) shift; start "$@" ;;
    stop) stop ;;
    *) echo "usage: $0 start [PORT] | stop" >&2; exit 2 ;;
esac
