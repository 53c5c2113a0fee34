#!/usr/bin/env bash
# A Python virtualenv with the peers of the benchmark suite (sandbox/bench/peers.py): DuckDB,
# delta-rs (`deltalake`), Polars and PyIceberg, the tools users would otherwise reach for to
# rebuild a table from a snapshot and a journal. Creates the venv once (idempotent: an existing venv with the pinned versions is reused)
# and prints the export line the suite reads:
#
#   eval "$(bash sandbox/bench_peers.sh)"     # sets TIDEMARK_BENCH_PYTHON
#
# The venv lives at ${TIDEMARK_BENCH_VENV:-$HOME/.cache/tidemark/bench-venv}, apart from the
# interop venv of sandbox/pyiceberg.sh so that DuckDB never changes what the interop tests run
# on. Everything but the export line goes to stderr.
set -euo pipefail

# The peers at their newest releases on the package index (checked 2026-12-01 with
# `pip index versions`): PyIceberg 0.12.0 (which needs pyarrow >= 18) and DuckDB 2.0.1. pyarrow
# stays the one sandbox/pyiceberg.sh tests the interop with. delta-rs (`deltalake`) 1.6.6 and
# Polars 2.1.0 (issue 33; checked 2026-12-02 the same way); deltalake without its pyarrow extra,
# which asks for pyarrow >= 21: it takes pyarrow tables through the Arrow C stream interface and
# the peer needs none of the extra's conversions.
PYICEBERG_SPEC='pyiceberg[sql-sqlite,pyarrow]==0.12.0'
PYARROW_SPEC='pyarrow==20.0.0'
DUCKDB_SPEC='duckdb==2.0.1'
DELTALAKE_SPEC='deltalake==1.6.6'
POLARS_SPEC='polars==2.1.0'
VENV="${TIDEMARK_BENCH_VENV:-$HOME/.cache/tidemark/bench-venv}"
# The venv holds these pins; a marker file in it records them, so a changed pin reinstalls.
CHECK='import pyiceberg.catalog.sql, pyarrow, duckdb, deltalake, polars'

say() { echo "bench_peers.sh: $*" >&2; }

# shellcheck source=sandbox/lib/venv.sh
source "$(dirname "$0")/lib/venv.sh"
py="$VENV/bin/python"
pinned_venv "$VENV" .tidemark-bench-peers "$CHECK" \
    "$PYICEBERG_SPEC" "$PYARROW_SPEC" "$DUCKDB_SPEC" "$DELTALAKE_SPEC" "$POLARS_SPEC"
if [[ $VENV_INSTALLED == 1 ]]; then
    say "installed $("$py" -c 'import pyiceberg, pyarrow, duckdb, deltalake, polars
print("pyiceberg", pyiceberg.__version__, "pyarrow", pyarrow.__version__, "duckdb", duckdb.__version__,
      "deltalake", deltalake.__version__, "polars", polars.__version__)')"
fi
echo "export TIDEMARK_BENCH_PYTHON=$py"
