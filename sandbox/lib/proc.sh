# Shared by the sandbox's server launchers (moto.sh, seaweedfs.sh, s3tables.sh, ...): the
# pid-file and readiness skeleton each of them needs. Source it; it defines functions only.
# Every function writes its messages through the caller's `say` (which goes to stderr, so that
# `eval "$(launcher.sh start)"` sees only export lines).

# pid_alive FILE: prints the pid recorded in FILE and succeeds when that process is alive.
pid_alive() {
    [[ -f "$1" ]] || return 1
    local pid
    pid="$(cat "$1")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# port_busy PORT: succeeds when something accepts connections on 127.0.0.1:PORT.
port_busy() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# stop_pid_file FILE [SECONDS]: stops the process recorded in FILE with SIGTERM, waits up to
# SECONDS (default 5) for it to exit, then SIGKILLs it; removes FILE. Prints the pid it stopped
# and fails when nothing was running.
stop_pid_file() {
    local file="$1" quarters=$((${2:-5} * 4)) pid i
    if ! pid="$(pid_alive "$file")"; then
        rm -f "$file"
        return 1
    fi
    kill "$pid" 2>/dev/null || true
    for i in $(seq 1 "$quarters"); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$file"
    echo "$pid"
}

# wait_ready PID LOG SECONDS COMMAND...: runs COMMAND every half second until it succeeds
# (success), the process PID exits (prints LOG, fails) or SECONDS pass (fails).
wait_ready() {
    local pid="$1" log="$2" tries=$(($3 * 2)) i
    shift 3
    for i in $(seq 1 "$tries"); do
        "$@" && return 0
        if ! kill -0 "$pid" 2>/dev/null; then
            say "the server (pid $pid) exited; its log $log:"
            cat "$log" >&2
            return 1
        fi
        sleep 0.5
    done
    say "no answer within $(( tries / 2 )) s (pid $pid, log $log)"
    return 1
}

# http_answers URL: succeeds when anything answers HTTP at URL (any status).
http_answers() {
    curl -s -o /dev/null "$1"
}

# launcher_main ARGS...: a launcher's command line, `start [PORT] | stop`, calling the launcher's
# own `start` and `stop` functions; anything else prints the usage (with `port` naming the start
# argument: PORT unless the launcher sets LAUNCHER_PORT_ARG) and exits 2.
launcher_main() {
    case "${1:-}" in
        start) shift; start "$@" ;;
        stop) stop ;;
        *)
            echo "usage: $0 start [${LAUNCHER_PORT_ARG:-PORT}] | stop" >&2
            exit 2
            ;;
    esac
}
