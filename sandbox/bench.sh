#!/usr/bin/env bash
# The benchmark suite in one command (issue 6; docs/performance.md): installs the peers (DuckDB,
# delta-rs, Polars and PyIceberg, in a virtualenv: sandbox/bench_peers.sh), builds tidemark's
# benchmarks in release mode and runs tidemark beside sha256sum, the peers computing the same final
# state (sandbox/bench/peers.py: DuckDB without and with the conflict check, delta-rs `merge`,
# Polars) and PyIceberg's upsert() on the same generated data, printing a table with the ratios
# to the fastest peer doing the same rules (issue 33) and writing every figure as JSON.
#
#   bash sandbox/bench.sh                      # the three sizes of issue 33 in one run, one JSON:
#                                              # 1M rows + 100k events, 10M + 1M and 100M + 10M
#                                              # (about 30 minutes and 25 GB of disk; the drill
#                                              # sections at 10M)
#   bash sandbox/bench.sh --sizes 1m           # the small size only (a few minutes)
#   bash sandbox/bench.sh --sizes 1m,10m       # without the largest size (about 8 minutes)
#
# Options go to the suite: --sizes LIST (1m, 10m, 100m, 100k or ROWSxEVENTS), --upsert-size SIZE (where
# PyIceberg's upsert runs; default: the largest of --sizes up to 10m), --work DIR (default: a temporary folder), --out FILE
# (default: target/bench-suite.json), --engines LIST (the recovery once per engine on the same
# dataset: local, ballista-standalone, ballista://HOST:PORT of a running cluster, e.g. one from
# `sandbox/ballista.sh start`; the suite is then built with --features tidemark-recovery/ballista-engine).
# PROFILE=dev builds the dev profile instead of release (the Ballista stack's release build is long).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tidemark/target}"
eval "$(bash sandbox/bench_peers.sh)"
args=("$@")
# Without --sizes: the three sizes, and the drill sections (the largest size unless told) at 10M.
if [[ " ${args[*]:-} " != *" --sizes "* ]]; then
    args+=(--sizes 1m,10m,100m)
    [[ " ${args[*]} " == *" --drill-size "* ]] || args+=(--drill-size 10m)
fi
[[ " ${args[*]:-} " == *" --out "* ]] || args+=(--out "$PWD/target/bench-suite.json")
mkdir -p target
features=()
[[ " ${args[*]} " == *" --engines "*ballista* ]] && features=(--workspace --features tidemark-recovery/ballista-engine)
[[ ${#features[@]} -gt 0 ]] || features=(-p tidemark-recovery)
cargo bench --profile "${PROFILE:-bench}" "${features[@]}" --bench suite -- "${args[@]}"
