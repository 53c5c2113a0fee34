# Shared by the sandbox's virtualenv scripts (pyiceberg.sh, bench_peers.sh, servers_venv.sh): a
# virtualenv that holds pinned packages. Source it; it defines functions only. Messages go
# through the caller's `say` (stderr), so that a caller's stdout stays its export line.

# pinned_venv VENV MARKER CHECK SPEC...: makes the virtualenv VENV hold SPEC… (pip specs). It is
# reused when the file VENV/MARKER records the same specs and `VENV/bin/python -c CHECK`
# succeeds; else it is created (with ${PYTHON:-python3}) if missing, SPEC… installed, CHECK run
# (a failure stops the caller under `set -e`) and the marker written. Sets VENV_INSTALLED to 1
# when it installed, 0 when it reused.
pinned_venv() {
    local venv="$1" marker="$1/$2" check="$3"
    shift 3
    local want="$*" py="$venv/bin/python" base="${PYTHON:-python3}"
    VENV_INSTALLED=0
    if [[ -x "$py" && -f "$marker" && "$(cat "$marker")" == "$want" ]] \
        && "$py" -c "$check" >/dev/null 2>&1; then
        say "reusing $venv"
        return 0
    fi
    if [[ ! -x "$py" ]]; then
        say "creating virtualenv $venv with $("$base" --version 2>&1)"
        mkdir -p "$(dirname "$venv")"
        "$base" -m venv "$venv"
    fi
    say "installing $want"
    "$py" -m pip install -q --disable-pip-version-check "$@" >&2
    "$py" -c "$check" >&2
    echo "$want" >"$marker"
    VENV_INSTALLED=1
}
