#!/usr/bin/env bash
# A Python virtualenv with PyIceberg, for the interoperability tests (tests/e2e.rs, pyiceberg_*):
# another Iceberg implementation reads what tidemark wrote and writes a table tidemark applies
# into. Creates the venv once (idempotent: an existing venv with the pinned versions is reused)
# and prints the export line the tests read:
#
#   eval "$(bash sandbox/pyiceberg.sh)"     # sets TIDEMARK_PYTHON
#
# The venv lives at ${TIDEMARK_VENV:-$HOME/.cache/tidemark/venv}. Everything but the export line
# goes to stderr.
set -euo pipefail

PYICEBERG_SPEC='pyiceberg[sql-sqlite,pyarrow,pyiceberg-core]==0.12.0'
# The pyiceberg-core extra (Rust transforms: bucket, truncate, and the time transforms of
# partitioned writes); PyIceberg 0.12.0 wants >=0.10.1,<0.11.0.
CORE_SPEC='pyiceberg-core==0.10.1'
# PyIceberg 0.12.0 accepts a range of pyarrow versions; pin the one it is tested with here.
PYARROW_SPEC='pyarrow==20.0.0'
# boto3 for S3 Tables (pyiceberg_tool.py asks it for a table's metadata location).
BOTO3_SPEC='boto3==1.44.8'
VENV="${TIDEMARK_VENV:-$HOME/.cache/tidemark/venv}"
# The venv holds these pins; a marker file in it records them, so a changed pin reinstalls.

say() { echo "pyiceberg.sh: $*" >&2; }

# shellcheck source=sandbox/lib/venv.sh
source "$(dirname "$0")/lib/venv.sh"
py="$VENV/bin/python"
pinned_venv "$VENV" .tidemark-pyiceberg \
    'import pyiceberg.catalog.sql, pyiceberg.catalog.rest, pyiceberg_core, pyarrow, boto3' \
    "$PYICEBERG_SPEC" "$CORE_SPEC" "$PYARROW_SPEC" "$BOTO3_SPEC"
if [[ $VENV_INSTALLED == 1 ]]; then
    say "installed $("$py" -c 'import pyiceberg; print("pyiceberg", pyiceberg.__version__)')"
fi
echo "export TIDEMARK_PYTHON=$py"
