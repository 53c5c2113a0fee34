#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests of the Iceberg SQL catalog on PostgreSQL.
#
#   sandbox/postgres.sh start [PORT]   start it (default port 5433, or $TIDEMARK_PG_PORT) and
#                                      print `export TIDEMARK_TEST_PG_URI=postgres://…`
#   sandbox/postgres.sh stop           stop it and delete its cluster
#
# `start` installs the Debian server (`apt-get install -y postgresql`) if no PostgreSQL binaries
# are found under /usr/lib/postgresql/<version>/bin, creates a cluster with initdb (as the
# `postgres` user when run as root: initdb and pg_ctl refuse root), starts it on 127.0.0.1 only,
# and creates the database `tidemark` owned by the password user `tidemark` (password
# `tidemark`). The server's superuser logs in only through the cluster's own Unix socket (peer
# authentication); TCP logins need a password (scram-sha-256). The cluster runs with fsync off:
# it is for tests, and `stop` deletes it.
#
# Typical use:  eval "$(sandbox/postgres.sh start)"
# State lives in ${TIDEMARK_SANDBOX_DIR:-/tmp/tidemark-sandbox}: the cluster in pg/ (its socket
# too), and pg.port, pg.log.
set -euo pipefail

SANDBOX_DIR="${TIDEMARK_SANDBOX_DIR:-/tmp/tidemark-sandbox}"
PGDATA_DIR="$SANDBOX_DIR/pg"
PORT_FILE="$SANDBOX_DIR/pg.port"
LOG_FILE="$SANDBOX_DIR/pg.log"
DEFAULT_PORT="${TIDEMARK_PG_PORT:-5433}"
DB_NAME=tidemark
DB_USER=tidemark
DB_PASS=tidemark
# A second user and database whose password appears nowhere else, so that a test can grep every
# output for it (no secret in routes, reports, messages).
SECRET_USER=tm_secret
SECRET_PASS=pw-Never-Shown-7c1e

# Everything but the export lines goes to stderr, so that `eval "$(postgres.sh start)"` works.
say() { echo "postgres.sh: $*" >&2; }
# shellcheck source=sandbox/lib/proc.sh
source "$(dirname "$0")/lib/proc.sh"

# The newest installed server's bin folder, or nothing.
find_bindir() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [[ -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]]; then
            echo "$d"
            return 0
        fi
    done
    return 1
}

ensure_server_installed() {
    if BINDIR="$(find_bindir)"; then
        return 0
    fi
    if [[ "$(id -u)" != 0 ]]; then
        say "no PostgreSQL server under /usr/lib/postgresql; install it: apt-get install -y postgresql"
        return 1
    fi
    say "no PostgreSQL server under /usr/lib/postgresql; installing the Debian package postgresql"
    # The package's own cluster would start on port 5432 through the service scripts; there are
    # none in a container, and the sandbox never uses it.
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2; then
        apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2
    fi
    BINDIR="$(find_bindir)" || {
        say "the postgresql package installed no server under /usr/lib/postgresql/*/bin"
        return 1
    }
}

# The OS user that owns and runs the cluster: `postgres` when run as root, else the caller.
setup_runner() {
    if [[ "$(id -u)" == 0 ]]; then
        RUN_AS=postgres
        if ! id "$RUN_AS" >/dev/null 2>&1; then
            say "user $RUN_AS is missing (the postgresql package creates it); reinstall postgresql"
            return 1
        fi
    else
        RUN_AS="$(id -un)"
    fi
}

# as_pg CMD...: runs CMD as the cluster's owner (its output goes to stderr unless redirected).
as_pg() {
    if [[ "$(id -u)" == 0 ]]; then
        runuser -u "$RUN_AS" -- "$@"
    else
        "$@"
    fi
}

running() {
    [[ -f "$PGDATA_DIR/postmaster.pid" ]] || return 1
    as_pg "$BINDIR/pg_ctl" status -D "$PGDATA_DIR" >/dev/null 2>&1
}

# psql as the superuser through the cluster's socket.
super_psql() {
    local port="$1"
    shift
    as_pg "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$PGDATA_DIR" -p "$port" -U "$RUN_AS" -d postgres "$@"
}

# Creates the password user and its database if missing.
ensure_database() {
    local port="$1"
    if [[ -z "$(super_psql "$port" -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$DB_USER'")" ]]; then
        super_psql "$port" -c "CREATE ROLE $DB_USER LOGIN PASSWORD '$DB_PASS'" >&2
    fi
    if [[ -z "$(super_psql "$port" -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'")" ]]; then
        super_psql "$port" -c "CREATE DATABASE $DB_NAME OWNER $DB_USER" >&2
    fi
    if [[ -z "$(super_psql "$port" -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$SECRET_USER'")" ]]; then
        super_psql "$port" -c "CREATE ROLE $SECRET_USER LOGIN PASSWORD '$SECRET_PASS'" >&2
    fi
    if [[ -z "$(super_psql "$port" -tAc "SELECT 1 FROM pg_database WHERE datname = '$SECRET_USER'")" ]]; then
        super_psql "$port" -c "CREATE DATABASE $SECRET_USER OWNER $SECRET_USER" >&2
    fi
}

# Waits until the password user can log in over TCP and run a query.
wait_answers() {
    local port="$1" i
    for i in $(seq 1 60); do
        if PGPASSWORD="$DB_PASS" PGCONNECT_TIMEOUT=2 "$BINDIR/psql" -X -q -h 127.0.0.1 -p "$port" \
            -U "$DB_USER" -d "$DB_NAME" -tAc 'SELECT 1' >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    return 1
}

print_exports() {
    echo "export TIDEMARK_TEST_PG_URI=postgres://$DB_USER:$DB_PASS@127.0.0.1:$1/$DB_NAME"
    echo "export TIDEMARK_TEST_PG_SECRET_URI=postgres://$SECRET_USER:$SECRET_PASS@127.0.0.1:$1/$SECRET_USER"
}

port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
    local port="${1:-$DEFAULT_PORT}"
    ensure_server_installed
    setup_runner
    mkdir -p "$SANDBOX_DIR"
    if running; then
        # Reusing the server keeps `start` idempotent; its databases are still there.
        port="$(cat "$PORT_FILE" 2>/dev/null || echo "$port")"
        say "already running (port $port, cluster $PGDATA_DIR)"
        ensure_database "$port"
        print_exports "$port"
        return 0
    fi
    if port_in_use "$port"; then
        say "port $port is already in use by another process; pass another: postgres.sh start PORT"
        return 1
    fi
    if [[ ! -f "$PGDATA_DIR/PG_VERSION" ]]; then
        rm -rf "$PGDATA_DIR"
        mkdir -p "$PGDATA_DIR"
        chmod 700 "$PGDATA_DIR"
        if [[ "$(id -u)" == 0 ]]; then
            chown "$RUN_AS:" "$PGDATA_DIR"
        fi
        if ! as_pg test -w "$PGDATA_DIR"; then
            say "user $RUN_AS cannot write $PGDATA_DIR (a parent folder is closed to it); set TIDEMARK_SANDBOX_DIR"
            return 1
        fi
        say "creating a cluster in $PGDATA_DIR ($BINDIR)"
        as_pg "$BINDIR/initdb" -D "$PGDATA_DIR" -U "$RUN_AS" --auth-local=peer --auth-host=scram-sha-256 \
            -E UTF8 --locale=C.UTF-8 >"$LOG_FILE.initdb" 2>&1 || {
            say "initdb failed; its output:"
            cat "$LOG_FILE.initdb" >&2
            return 1
        }
    fi
    # Readable by the cluster's owner, which writes the server log.
    touch "$LOG_FILE"
    if [[ "$(id -u)" == 0 ]]; then
        chown "$RUN_AS:" "$LOG_FILE"
    fi
    # setsid: the server must outlive this script and not get the caller's Ctrl-C.
    local opts="-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories='$PGDATA_DIR'"
    opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    if ! as_pg setsid -w "$BINDIR/pg_ctl" start -D "$PGDATA_DIR" -l "$LOG_FILE" -w -t 60 -o "$opts" >&2; then
        say "the server did not start; its log ($LOG_FILE):"
        tail -n 30 "$LOG_FILE" >&2
        return 1
    fi
    echo "$port" >"$PORT_FILE"
    ensure_database "$port"
    if ! wait_answers "$port"; then
        say "the server does not answer $DB_USER on 127.0.0.1:$port within 30 s; stopping it (log $LOG_FILE)"
        stop
        return 1
    fi
    say "started (port $port, cluster $PGDATA_DIR, log $LOG_FILE)"
    print_exports "$port"
}

stop() {
    # Without a server or its user nothing can be running.
    if setup_runner 2>/dev/null && BINDIR="$(find_bindir)" && running; then
        as_pg "$BINDIR/pg_ctl" stop -D "$PGDATA_DIR" -m fast -w -t 60 >&2
        say "stopped"
    else
        say "not running"
    fi
    # The cluster is throwaway: the next start creates a fresh one.
    rm -rf "$PGDATA_DIR" "$LOG_FILE.initdb"
    rm -f "$PORT_FILE"
}

launcher_main "$@"
