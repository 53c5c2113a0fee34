"""The peers of tidemark's benchmark suite: the tools a user would otherwise reach for to rebuild a
table's state from a trusted snapshot and the journal's events, run on the same inputs as
tidemark so that the suite can compare times, memory and, through three figures, results.

Run with the venv of sandbox/bench_peers.sh ($TIDEMARK_BENCH_PYTHON):

  peers.py duckdb INPUT OUT_DIR
      DuckDB computes the final state from the Parquet files (read_parquet over INPUT's lists)
      and writes it as Parquet into OUT_DIR (created if missing; it must be empty).
      Timed ("seconds"): connecting, reading the snapshot and event files into one DuckDB
      table, counting conflicts, computing the winning row per key and writing the Parquet
      output, all at DuckDB's defaults (threads = cores). Not timed: reading INPUT and the
      figures, which are read back from the written files afterwards.
  peers.py pyiceberg-upsert INPUT [--keep]
      PyIceberg: creates <namespace>.upsert_<name>_<random hex> in INPUT's catalog with the
      snapshot table's schema (identifier field included), partition spec and format version,
      and appends the snapshot files' rows ("seed_seconds": reading them and the append). Then
      the replay ("seconds"): reads the event files, reduces them to the winning event per key
      (highest version, then lowest position) with pyarrow, scans the table's current versions,
      keeps the winners that are newer than the table's row (or whose key is not in the table)
      and calls table.upsert(df, join_cols=[key]). The filtering is needed: upsert knows no
      versions and would let a late event overwrite a newer row, and it refuses a frame with a
      key twice. Not timed: loading the catalog, creating the table, and the figures, which are
      read back from the table after the upsert. Besides the figures it reports what upsert
      said it did ("updated", "inserted") and the table's name ("table", null unless --keep).
      The table is purged at the end (its files removed too) unless --keep is given.
  peers.py reference INPUT
      A slow but plainly correct fold in Python dicts over the rows (pyarrow only reads the
      files), for checking the other two on small inputs ("seconds" covers reading and folding).

INPUT is the JSON file the Rust suite writes: snapshot_files and event_files (absolute paths of
Parquet files; events in position order), catalog_db (SQLite file of a PyIceberg SqlCatalog),
warehouse (a folder), catalog_name, snapshot_table ("namespace.name"), and the column names key,
version, delete and position. Snapshot files hold the table's columns, position among them;
event files hold the position first, then the same columns.

The merge rules, as tidemark applies the whole range as one unit (recovery/src/recover/reference.rs):
per key the row with the highest version wins; a snapshot row wins over events of its own
version, and among events of one version the lowest position (an identical retry changes
nothing); a delete is a tombstone row (delete flag set), never a removed row; the final row
keeps the position of the event (or snapshot row) that produced it. A conflict is a (key,
version) pair that carries more than one payload (every column but key, version and position)
across the snapshot's rows and the events; tidemark stops on one, the peers count them
("conflicts") and go on with the rules above.

Each subcommand prints exactly one JSON object on stdout; progress goes to stderr. The figures
every peer reports: rows (final rows, tombstones included), tombstones (rows whose delete flag
is set) and version_sum (the sum of the version over the final rows); peak_rss_mb is this
process's peak resident memory (getrusage ru_maxrss, KB on Linux) over its whole run.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import uuid


def log(msg: str) -> None:
    print(f"peers.py: {msg}", file=sys.stderr, flush=True)


def emit(obj: dict) -> None:
    json.dump(obj, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def load_input(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    for field in (
        "snapshot_files",
        "event_files",
        "catalog_db",
        "warehouse",
        "catalog_name",
        "snapshot_table",
        "key",
        "version",
        "delete",
        "position",
    ):
        if field not in spec:
            raise SystemExit(f"{path}: no {field!r}")
    if not spec["snapshot_files"] and not spec["event_files"]:
        raise SystemExit(f"{path}: no snapshot files and no event files")
    return spec


def split_ident(ident: str) -> tuple[str, str]:
    ns, _, name = ident.rpartition(".")
    if not ns or not name:
        raise SystemExit(f"table name {ident!r} is not of the form namespace.name")
    return ns, name


# ---------------------------------------------------------------------------------------------
# DuckDB


def sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sql_files(paths: list[str]) -> str:
    return "[" + ", ".join(sql_str(p) for p in paths) + "]"


def cmd_duckdb(input_path: str, out_dir: str) -> None:
    import duckdb

    spec = load_input(input_path)
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    if os.listdir(out_dir):
        raise SystemExit(f"{out_dir} is not empty")
    out_file = os.path.join(out_dir, "state.parquet")
    key, version, delete, position = (sql_ident(spec[k]) for k in ("key", "version", "delete", "position"))
    snaps, events = spec["snapshot_files"], spec["event_files"]

    t0 = time.perf_counter()
    con = duckdb.connect()
    # The table's columns in the snapshot files' order (the events carry the same, position first).
    probe = snaps if snaps else events
    described = con.execute(f"DESCRIBE SELECT * FROM read_parquet({sql_files(probe[:1])})").fetchall()
    names = [r[0] for r in described]
    if not snaps:
        names = names[1:] + names[:1]  # position first in event files; last like a table row
    cols = ", ".join(sql_ident(n) for n in names)
    not_payload = (spec["key"], spec["version"], spec["position"])
    payload = ", ".join(f"{sql_ident(n)} := {sql_ident(n)}" for n in names if n not in not_payload)
    parts = []
    if snaps:
        parts.append(f"SELECT 0 AS _src, {cols} FROM read_parquet({sql_files(snaps)})")
    if events:
        parts.append(f"SELECT 1 AS _src, {cols} FROM read_parquet({sql_files(events)})")
    con.execute("CREATE TEMP TABLE src AS " + " UNION ALL ".join(parts))
    # A (key, version) with more than one payload among snapshot rows and events.
    (conflicts,) = con.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM src GROUP BY {key}, {version} "
        f"HAVING count(DISTINCT struct_pack({payload})) > 1)"
    ).fetchone()
    # Per key: highest version; at one version the snapshot row, then the lowest position.
    con.execute(
        f"COPY (SELECT {cols} FROM src "
        f"QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY {version} DESC, _src, {position}) = 1) "
        f"TO {sql_str(out_file)} (FORMAT parquet)"
    )
    con.close()
    seconds = time.perf_counter() - t0

    check = duckdb.connect()
    rows, tombstones, version_sum = check.execute(
        f"SELECT count(*), count(*) FILTER (WHERE {delete}), coalesce(sum({version}), 0) "
        f"FROM read_parquet({sql_str(out_file)})"
    ).fetchone()
    check.close()
    log(f"duckdb: {rows} rows ({tombstones} tombstones) written to {out_file} in {seconds:.3f} s")
    emit(
        {
            "tool": "duckdb",
            "version": duckdb.__version__,
            "seconds": seconds,
            "rows": int(rows),
            "tombstones": int(tombstones),
            "version_sum": int(version_sum),
            "conflicts": int(conflicts),
            "peak_rss_mb": peak_rss_mb(),
        }
    )


# ---------------------------------------------------------------------------------------------
# PyIceberg


def read_parquet_files(paths: list[str]):
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(p) for p in paths]
    return pa.concat_tables(tables) if tables else None


def conform(data, arrow_schema):
    """The columns of arrow_schema, in its order and types (required fields not null)."""
    return data.select(arrow_schema.names).cast(arrow_schema)


def figures(data, spec: dict) -> tuple[int, int, int]:
    import pyarrow.compute as pc

    rows = data.num_rows
    tombstones = pc.sum(pc.cast(data[spec["delete"]], "int64")).as_py() or 0
    version_sum = pc.sum(data[spec["version"]]).as_py() or 0
    return rows, int(tombstones), int(version_sum)


def remove_empty_dirs(location: str) -> None:
    """PyIceberg's purge removes the table's files but leaves its folders."""
    if not location.startswith("file://"):
        return
    root = location.removeprefix("file://")
    if not os.path.isdir(root):
        return
    for dirpath, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
        try:
            os.rmdir(dirpath)
        except OSError:
            pass  # not empty: leave it


def cmd_pyiceberg_upsert(input_path: str, keep: bool) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyiceberg
    from pyiceberg.catalog.sql import SqlCatalog

    spec = load_input(input_path)
    key, version, position = spec["key"], spec["version"], spec["position"]
    cat = SqlCatalog(
        spec["catalog_name"],
        uri="sqlite:///" + os.path.abspath(spec["catalog_db"]),
        warehouse="file://" + os.path.abspath(spec["warehouse"]),
    )
    source = cat.load_table(spec["snapshot_table"])
    ns, name = split_ident(spec["snapshot_table"])
    ident = f"{ns}.upsert_{name}_{uuid.uuid4().hex[:12]}"
    table = cat.create_table(
        ident,
        schema=source.schema(),
        partition_spec=source.spec(),
        properties={"format-version": str(source.format_version)},
    )
    log(f"pyiceberg-upsert: created {ident}")
    try:
        target_schema = table.schema().as_arrow()

        # Seed: the snapshot's rows.
        t0 = time.perf_counter()
        snapshot = read_parquet_files(spec["snapshot_files"])
        if snapshot is not None:
            table.append(conform(snapshot, target_schema))
        seed_seconds = time.perf_counter() - t0
        del snapshot
        log(f"pyiceberg-upsert: seeded in {seed_seconds:.3f} s")

        # The replay.
        t0 = time.perf_counter()
        events = read_parquet_files(spec["event_files"])
        if events is not None and events.num_rows:
            # The winning event per key: sort by key, highest version, lowest position; keep the
            # first row of each key.
            ordered = events.sort_by([(key, "ascending"), (version, "descending"), (position, "ascending")])
            keys = ordered[key].combine_chunks()
            first = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1))
            first = pa.concat_arrays([pa.array([True]), first])
            winners = ordered.filter(first)
            # Only those newer than the table's row (or of a key the table does not hold).
            # (PyIceberg reads strings as large_string; the join wants one type on both sides.)
            current = table.scan(selected_fields=(key, version)).to_arrow()
            current = pa.table(
                {
                    key: current[key].cast(winners.schema.field(key).type),
                    "__current_version": current[version],
                }
            )
            joined = winners.join(current, keys=key, join_type="left outer")
            cur = joined["__current_version"]
            newer = joined.filter(pc.or_kleene(pc.is_null(cur), pc.greater(joined[version], cur)))
            df = conform(newer, target_schema)
            result = table.upsert(df, join_cols=[key])
            updated, inserted = result.rows_updated, result.rows_inserted
            n_events, n_winners, n_newer = events.num_rows, winners.num_rows, df.num_rows
        else:
            updated = inserted = n_events = n_winners = n_newer = 0
        seconds = time.perf_counter() - t0
        log(
            f"pyiceberg-upsert: {n_events} events, {n_winners} winning, {n_newer} newer than the table: "
            f"{updated} updated, {inserted} inserted in {seconds:.3f} s"
        )

        final = cat.load_table(ident).scan(selected_fields=(version, spec["delete"])).to_arrow()
        rows, tombstones, version_sum = figures(final, spec)
    finally:
        if keep:
            log(f"pyiceberg-upsert: kept {ident}")
        else:
            location = table.location()
            cat.purge_table(ident)
            remove_empty_dirs(location)
            log(f"pyiceberg-upsert: purged {ident}")
    emit(
        {
            "tool": "pyiceberg-upsert",
            "version": pyiceberg.__version__,
            "seed_seconds": seed_seconds,
            "seconds": seconds,
            "rows": rows,
            "tombstones": tombstones,
            "version_sum": version_sum,
            "updated": updated,
            "inserted": inserted,
            "table": ident if keep else None,
            "peak_rss_mb": peak_rss_mb(),
        }
    )


# ---------------------------------------------------------------------------------------------
# Reference


def cmd_reference(input_path: str) -> None:
    import pyarrow.parquet as pq

    spec = load_input(input_path)
    key, version, delete, position = spec["key"], spec["version"], spec["delete"], spec["position"]
    t0 = time.perf_counter()

    def payload(row: dict) -> tuple:
        return tuple(sorted((k, v) for k, v in row.items() if k not in (key, version, position)))

    # The snapshot: one row per key.
    state: dict = {}
    for path in spec["snapshot_files"]:
        for row in pq.read_table(path).to_pylist():
            if row[key] in state:
                raise SystemExit(f"snapshot holds key {row[key]!r} twice")
            state[row[key]] = row

    # 1. One event per (key, version): the lowest position; another payload is a conflict.
    events = []
    for path in spec["event_files"]:
        events.extend(pq.read_table(path).to_pylist())
    events.sort(key=lambda e: e[position])
    unique: dict = {}
    conflicted: set = set()
    for e in events:
        kv = (e[key], e[version])
        first = unique.get(kv)
        if first is None:
            unique[kv] = e
        elif payload(first) != payload(e):
            conflicted.add(kv)
    # 3 (checked against the state before anything changes): an equal version, another payload.
    for kv, e in unique.items():
        cur = state.get(kv[0])
        if cur is not None and cur[version] == kv[1] and payload(cur) != payload(e):
            conflicted.add(kv)
    # 2. The highest version per key.
    best: dict = {}
    for (k, v), e in unique.items():
        b = best.get(k)
        if b is None or v > b[version]:
            best[k] = e
    # 3. Newer replaces (a tombstone too); older or equal changes nothing; new keys are inserted.
    for k, e in best.items():
        cur = state.get(k)
        if cur is None or e[version] > cur[version]:
            state[k] = e
    seconds = time.perf_counter() - t0

    rows = len(state)
    tombstones = sum(1 for r in state.values() if r[delete])
    version_sum = sum(r[version] for r in state.values())
    log(f"reference: {rows} rows ({tombstones} tombstones) in {seconds:.3f} s")
    emit(
        {
            "tool": "reference",
            "seconds": seconds,
            "rows": rows,
            "tombstones": tombstones,
            "version_sum": version_sum,
            "conflicts": len(conflicted),
            "peak_rss_mb": peak_rss_mb(),
        }
    )


USAGE = """usage:
  peers.py duckdb INPUT OUT_DIR
  peers.py pyiceberg-upsert INPUT [--keep]
  peers.py reference INPUT"""


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "duckdb":
        cmd_duckdb(argv[1], argv[2])
    elif len(argv) in (2, 3) and argv[0] == "pyiceberg-upsert" and (len(argv) == 2 or argv[2] == "--keep"):
        cmd_pyiceberg_upsert(argv[1], keep=len(argv) == 3)
    elif len(argv) == 2 and argv[0] == "reference":
        cmd_reference(argv[1])
    else:
        print(USAGE, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
