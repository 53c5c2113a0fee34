#!/usr/bin/env bash
# The cold build of the first drill (issue 14 target 6), measured: the exact build
# `sandbox/drill.sh` runs (`cargo build -p tidemark-recovery --bin tidemark`, dev profile) in a
# fresh, empty target folder, with `--timings` (each crate's time, HTML) and `/usr/bin/time -v`
# (wall, user and system CPU seconds: the CPU figure depends less on the machine's load). Prints
# one line of figures and the package count, then deletes the target folder (several GB).
# The crate sources must be fetched already (`cargo fetch`): downloads are not timed.
#
# `--floor` builds sandbox/coldbuild-floor instead: the smallest stack a drill could run on
# (DataFusion, iceberg with its DataFusion integration and SQLite catalog, Parquet, tokio, clap;
# no S3, REST, S3 Tables, PostgreSQL), with the lock file of the workspace, same profile.
#
# `--profile P` builds with cargo profile P instead of dev (`drill`: what `sandbox/drill.sh`
# builds). Other cargo options (e.g. `--no-default-features`) go after `--`.
#
#   bash sandbox/coldbuild.sh [--floor] [--profile P] [LABEL] [-- CARGO OPTIONS]
#   # figures in ${TIDEMARK_COLDBUILD_OUT:-target/coldbuild}/LABEL.*
set -euo pipefail
cd "$(dirname "$0")/.."
build=(-p tidemark-recovery --bin tidemark)
tree=(-p tidemark-recovery)
extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --floor)
            cp Cargo.lock sandbox/coldbuild-floor/Cargo.lock
            build=(--manifest-path sandbox/coldbuild-floor/Cargo.toml)
            tree=(--manifest-path sandbox/coldbuild-floor/Cargo.toml)
            label="${label:-floor}" ;;
        --profile) extra+=(--profile "$2"); shift ;;
        --) shift; extra+=("$@"); break ;;
        *) label="$1" ;;
    esac
    shift
done
label="${label:-$(git rev-parse --short HEAD 2>/dev/null || echo build)}"
out="${TIDEMARK_COLDBUILD_OUT:-target/coldbuild}"
mkdir -p "$out"
tgt="$(mktemp -d -t tidemark-coldbuild.XXXXXX)"
trap 'rm -rf "$tgt"' EXIT
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
CARGO_TARGET_DIR="$tgt" /usr/bin/time -v -o "$out/$label.time" \
    cargo build -q "${build[@]}" "${extra[@]}" --timings
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
cp "$tgt"/cargo-timings/cargo-timing.html "$out/$label.timings.html"
# The feature options among the cargo options (`--features X`, `--features=X`, `-F X`,
# `--all-features`, `--no-default-features`) select the same packages for the count.
features=()
for ((i = 0; i < ${#extra[@]}; i++)); do
    case "${extra[i]}" in
        --features | -F) features+=("${extra[i]}" "${extra[i + 1]:-}"); i=$((i + 1)) ;;
        --features=* | --all-features | --no-default-features) features+=("${extra[i]}") ;;
    esac
done
packages="$(cargo tree "${tree[@]}" "${features[@]}" -e normal,build --prefix none |
    sed -E 's/ \((\*|proc-macro)\)//g' | sort -u | wc -l)"
wall="$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$out/$label.time")"
user="$(sed -n 's/.*User time (seconds): //p' "$out/$label.time")"
sys="$(sed -n 's/.*System time (seconds): //p' "$out/$label.time")"
echo "$label: wall $wall, CPU ${user}s user + ${sys}s system, $packages packages," \
    "load average $load_before before, $load_after after; $out/$label.timings.html"
