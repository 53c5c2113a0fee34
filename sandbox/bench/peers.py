"""The peers of tidemark's benchmark suite: the tools a user would otherwise reach for to rebuild a
table's state from a trusted snapshot and the journal's events, run on the same inputs as
tidemark so that the suite can compare times, memory and, through three figures, results.

Run with the venv of sandbox/bench_peers.sh ($TIDEMARK_BENCH_PYTHON):

  peers.py duckdb-state INPUT OUT_DIR
  peers.py duckdb-checked INPUT OUT_DIR      (duckdb INPUT OUT_DIR: the same)
      DuckDB computes the final state from the Parquet files (read_parquet over INPUT's lists)
      and writes it as Parquet into OUT_DIR (created if missing; it must be empty); checked, it
      also counts the conflicts. Timed ("seconds"): connecting and the queries, at DuckDB's
      defaults (threads = cores, Snappy) but preserve_insertion_order off (the rows' order is no
      part of the answer; a little faster). The queries are in duckdb_queries (below), and the
      JSON's "query" prints them, INPUT's files standing as $SNAPSHOT_FILES and $EVENT_FILES.
      Formulations tried (issue 33, at 1M + 100k and 10M + 1M; docs/performance.md has the
      figures): the rules over the union of snapshot and events, by QUALIFY row_number() OVER
      (PARTITION BY key ORDER BY version DESC, src, position) = 1 or by arg_max(row, (version,
      -src, -position)) GROUP BY key; the union into a temporary table first (this suite's
      peer until issue 33); and the join of the snapshot with the winning event per key (by
      arg_max, by QUALIFY or by DISTINCT ON), kept for being the fastest. For the check:
      count(DISTINCT hash(payload)) > 1 over the union GROUP BY key, version (the issue's) and
      the events' least and greatest hash per (key, version) left-joined with the snapshot,
      kept.
  peers.py polars INPUT OUT_DIR
      Polars: the final state and the conflict check from lazy scans of the same files, the
      state sunk to OUT_DIR/state.parquet (Snappy), both in one collect_all
      (polars_plan; the JSON's "call" is its source). Timed: the plan's building and run.
  peers.py deltalake-merge INPUT OUT_DIR
      delta-rs: the snapshot files' rows written as a Delta table in OUT_DIR/table (one commit;
      "setup_seconds", not part of "seconds"), then timed: the winning event per key with
      Polars and DeltaTable.merge (deltalake_merge; its source is the JSON's "call"). No
      conflict check ("conflict_check": false). Besides the figures it reports the merge's
      "inserted" and "updated" rows.
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
      files), for checking the others on small inputs ("seconds" covers reading and folding).

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
across the snapshot's rows and the events; tidemark stops on one, the checked peers count them
("conflicts") and go on with the rules above. "conflict_check" says whether a peer checked.

Each subcommand prints exactly one JSON object on stdout; progress goes to stderr. The figures
every peer reports: rows (final rows, tombstones included), tombstones (rows whose delete flag
is set) and version_sum (the sum of the version over the final rows), read back from what the
peer wrote after the timing; cpu_seconds is the CPU time (user + system, every thread) of what
"seconds" times, less moved than the wall time by other work on a shared machine; peak_rss_mb
is this process's peak resident memory (getrusage ru_maxrss, KB on Linux) over its whole run
(the setup included).
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


def cpu_seconds() -> float:
    """This process's user + system CPU time so far (all threads): beside the wall time, a figure
    that other work on a shared machine moves less."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


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


def load_merge_input(path: str, peer: str) -> dict:
    """load_input for a peer that merges events into a snapshot (Polars, the delta-rs MERGE):
    both the snapshot files and the event files must be there."""
    spec = load_input(path)
    if not spec["snapshot_files"] or not spec["event_files"]:
        raise SystemExit(f"{peer}: needs snapshot files and event files")
    return spec


def split_ident(ident: str) -> tuple[str, str]:
    ns, _, name = ident.rpartition(".")
    if not ns or not name:
        raise SystemExit(f"table name {ident!r} is not of the form namespace.name")
    return ns, name


# ---------------------------------------------------------------------------------------------
# The table's columns


def table_columns(spec: dict) -> tuple[list[str], list[str]]:
    """The table's columns in the snapshot files' order (the event files carry the same, position
    first), and the payload: every column but key, version and position."""
    import pyarrow.parquet as pq

    snaps, events = spec["snapshot_files"], spec["event_files"]
    names = pq.read_schema(snaps[0] if snaps else events[0]).names
    if not snaps:
        names = names[1:] + names[:1]  # position first in event files; last like a table row
    not_payload = (spec["key"], spec["version"], spec["position"])
    return names, [n for n in names if n not in not_payload]


def prepare_out_dir(out_dir: str) -> str:
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    if os.listdir(out_dir):
        raise SystemExit(f"{out_dir} is not empty")
    return out_dir


def parquet_figures(paths: list[str], spec: dict) -> tuple[int, int, int]:
    """rows, tombstones and version_sum of the final state written as Parquet (not timed)."""
    import duckdb

    con = duckdb.connect()
    delete, version = sql_ident(spec["delete"]), sql_ident(spec["version"])
    rows, tombstones, version_sum = con.execute(
        f"SELECT count(*), count(*) FILTER (WHERE {delete}), coalesce(sum({version}), 0) "
        f"FROM read_parquet({sql_files(paths)})"
    ).fetchone()
    con.close()
    return int(rows), int(tombstones), int(version_sum)


# ---------------------------------------------------------------------------------------------
# DuckDB


def sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sql_files(paths: list[str]) -> str:
    return "[" + ", ".join(sql_str(p) for p in paths) + "]"


# In the queries the peers print, the snapshot's and the events' Parquet files stand as
# $SNAPSHOT_FILES and $EVENT_FILES (INPUT's lists, spelled out as SQL lists when run) and the
# output file as $OUT.
SNAPSHOT_FILES, EVENT_FILES, OUT = "$SNAPSHOT_FILES", "$EVENT_FILES", "$OUT"


def duckdb_queries(spec: dict, names: list[str], payload: list[str], checked: bool) -> list[str]:
    """The statements of the DuckDB peers, with the placeholders above.

    The final state as a join: the snapshot holds one row per key (it is a table with an
    identifier field), so only the events need ranking. Per key the winning event (highest
    version, then lowest position; arg_max over the pair), then the snapshot FULL OUTER JOIN
    those winners on the key, each column taken from the snapshot row when the key has no event
    or the snapshot's version is at least the event's (the snapshot's row wins a tie), from the
    event otherwise. The 10M-row side is scanned once and never sorted or aggregated.

    The conflict check (checked): the events grouped by (key, version) with the least and the
    greatest hash of their payload (more than one payload iff they differ: the same answer as
    count(DISTINCT hash(...)) > 1 without the distinct's hash set), LEFT JOIN the snapshot on
    (key, version), whose row conflicts when its payload's hash is not the events' one. A
    second statement: DuckDB writes a COPY's rows and returns nothing else, so the count is its
    own query; the snapshot's side of it is a hash join probing (key, version) only.
    Hashes are 64 bits: two payloads that collide would hide a conflict, as in the issue's
    formulation.
    """
    key, version, position = (sql_ident(spec[k]) for k in ("key", "version", "position"))
    cols = ", ".join(sql_ident(n) for n in names)
    take_snapshot = f"e.{key} IS NULL OR s.{version} >= e.{version}"
    pick = ", ".join(
        f"CASE WHEN {take_snapshot} THEN s.{sql_ident(n)} ELSE e.{sql_ident(n)} END AS {sql_ident(n)}"
        for n in names
    )
    state = (
        f"COPY (WITH e AS (SELECT unnest(arg_max(struct_pack({cols}), ({version}, -{position}))) "
        f"FROM read_parquet({EVENT_FILES}) GROUP BY {key}) "
        f"SELECT {pick} FROM read_parquet({SNAPSHOT_FILES}) s FULL OUTER JOIN e ON s.{key} = e.{key}) "
        f"TO {OUT} (FORMAT parquet)"
    )
    # The rows' order is no part of the answer: DuckDB may write them as its threads finish.
    setting = "SET preserve_insertion_order = false"
    if not checked:
        return [setting, state]
    hashed = ", ".join(sql_ident(n) for n in payload)
    s_hashed = ", ".join(f"s.{sql_ident(n)}" for n in payload)
    check = (
        f"WITH g AS (SELECT {key}, {version}, min(h) AS lo, max(h) AS hi "
        f"FROM (SELECT {key}, {version}, hash({hashed}) AS h FROM read_parquet({EVENT_FILES})) "
        f"GROUP BY {key}, {version}) "
        f"SELECT count(*) FROM g LEFT JOIN read_parquet({SNAPSHOT_FILES}) s "
        f"ON s.{key} = g.{key} AND s.{version} = g.{version} "
        f"WHERE g.lo <> g.hi OR (s.{key} IS NOT NULL AND hash({s_hashed}) <> g.lo)"
    )
    return [setting, state, check]


def cmd_duckdb(input_path: str, out_dir: str, checked: bool, tool: str) -> None:
    import duckdb

    spec = load_input(input_path)
    out_file = os.path.join(prepare_out_dir(out_dir), "state.parquet")
    names, payload = table_columns(spec)
    queries = duckdb_queries(spec, names, payload, checked)

    def bind(q: str) -> str:
        return (
            q.replace(SNAPSHOT_FILES, sql_files(spec["snapshot_files"]))
            .replace(EVENT_FILES, sql_files(spec["event_files"]))
            .replace(OUT, sql_str(out_file))
        )

    t0, c0 = time.perf_counter(), cpu_seconds()
    con = duckdb.connect()
    results = [con.execute(bind(q)).fetchall() for q in queries]
    con.close()
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0

    rows, tombstones, version_sum = parquet_figures([out_file], spec)
    log(f"{tool}: {rows} rows ({tombstones} tombstones) written to {out_file} in {seconds:.3f} s")
    out = {
        "tool": tool,
        "version": duckdb.__version__,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "rows": rows,
        "tombstones": tombstones,
        "version_sum": version_sum,
        "conflict_check": checked,
        "peak_rss_mb": peak_rss_mb(),
        "query": queries,
    }
    if checked:
        out["conflicts"] = int(results[-1][0][0])
    emit(out)


# ---------------------------------------------------------------------------------------------
# Polars


def polars_plan(pl, snapshot_files, event_files, key, version, position, names, payload, out_file):
    """The Polars peer's plan: two lazy frames run together by pl.collect_all, which shares the
    scans they have in common. The winning event per key (highest version, then lowest
    position: two window filters), the snapshot full-joined with them on the key, each column
    taken as in the DuckDB peer, written with Snappy (DuckDB's default; faster here than Polars'
    zstd); the conflicts: the events' payload hashes per (key, version), least and greatest,
    left-joined with the snapshot's on (key, version)."""
    snapshot = pl.scan_parquet(snapshot_files)
    events = pl.scan_parquet(event_files).select(names)
    winners = events.filter(pl.col(version) == pl.col(version).max().over(key)).filter(
        pl.col(position) == pl.col(position).min().over(key)
    )
    joined = snapshot.join(winners, on=key, how="full", coalesce=True, suffix="_e")
    take_snapshot = pl.col(version + "_e").is_null() | (pl.col(version) >= pl.col(version + "_e"))
    state = joined.select(
        [pl.col(key)]
        + [pl.when(take_snapshot).then(pl.col(n)).otherwise(pl.col(n + "_e")).alias(n) for n in names if n != key]
    )
    h = pl.struct(payload).hash()
    groups = events.group_by(key, version).agg(lo=h.min(), hi=h.max())
    snapshot_hashes = snapshot.select(key, version, hs=h)
    conflicts = groups.join(snapshot_hashes, on=[key, version], how="left").select(
        n=((pl.col("lo") != pl.col("hi")) | (pl.col("hs").is_not_null() & (pl.col("hs") != pl.col("lo")))).sum()
    )
    _, counted = pl.collect_all([state.sink_parquet(out_file, compression="snappy", lazy=True), conflicts])
    return int(counted.item())


def cmd_polars(input_path: str, out_dir: str) -> None:
    import inspect

    import polars as pl

    spec = load_merge_input(input_path, "polars")
    out_file = os.path.join(prepare_out_dir(out_dir), "state.parquet")
    names, payload = table_columns(spec)

    t0, c0 = time.perf_counter(), cpu_seconds()
    conflicts = polars_plan(
        pl,
        spec["snapshot_files"],
        spec["event_files"],
        spec["key"],
        spec["version"],
        spec["position"],
        names,
        payload,
        out_file,
    )
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0

    rows, tombstones, version_sum = parquet_figures([out_file], spec)
    log(f"polars: {rows} rows ({tombstones} tombstones) written to {out_file} in {seconds:.3f} s")
    emit(
        {
            "tool": "polars",
            "version": pl.__version__,
            "seconds": seconds,
            "cpu_seconds": cpu,
            "rows": rows,
            "tombstones": tombstones,
            "version_sum": version_sum,
            "conflict_check": True,
            "conflicts": conflicts,
            "peak_rss_mb": peak_rss_mb(),
            "call": inspect.getsource(polars_plan),
        }
    )


# ---------------------------------------------------------------------------------------------
# delta-rs


def deltalake_merge(pl, DeltaTable, table_uri, event_files, key, version, position, names):
    """The delta-rs peer's timed part: the winning event per key (highest version, then lowest
    position) with Polars, then one MERGE into the Delta table of the snapshot's rows: a newer
    event replaces the row (a tombstone too), an older or equal one changes nothing, a new key
    is inserted. No conflict check: the merge sees one event per key and none of the others."""
    events = pl.scan_parquet(event_files).select(names)
    winners = (
        events.filter(pl.col(version) == pl.col(version).max().over(key))
        .filter(pl.col(position) == pl.col(position).min().over(key))
        .collect()
    )
    return (
        DeltaTable(table_uri)
        .merge(
            source=winners.to_arrow(),
            predicate=f"target.{key} = source.{key}",
            source_alias="source",
            target_alias="target",
        )
        .when_matched_update_all(predicate=f"source.{version} > target.{version}")
        .when_not_matched_insert_all()
        .execute()
    )


def cmd_deltalake_merge(input_path: str, out_dir: str) -> None:
    import inspect

    import deltalake
    import polars as pl
    import pyarrow as pa
    import pyarrow.dataset as ds
    from deltalake import DeltaTable, QueryBuilder, write_deltalake

    spec = load_merge_input(input_path, "deltalake-merge")
    table_uri = os.path.join(prepare_out_dir(out_dir), "table")
    names, _ = table_columns(spec)

    # Setup, not timed: the snapshot's rows as a Delta table (streamed, one commit).
    t0 = time.perf_counter()
    snapshot = ds.dataset(spec["snapshot_files"], format="parquet")
    write_deltalake(table_uri, snapshot.scanner(columns=names).to_reader())
    setup_seconds = time.perf_counter() - t0
    log(f"deltalake-merge: snapshot written as a Delta table in {setup_seconds:.3f} s")

    t0, c0 = time.perf_counter(), cpu_seconds()
    metrics = deltalake_merge(
        pl, DeltaTable, table_uri, spec["event_files"], spec["key"], spec["version"], spec["position"], names
    )
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0

    delete, version = sql_ident(spec["delete"]), sql_ident(spec["version"])
    (fig,) = pa.table(  # arro3's table, through the Arrow C stream interface
        QueryBuilder()
        .register("t", DeltaTable(table_uri))
        .execute(
            f"SELECT count(*) AS n, sum(CASE WHEN {delete} THEN 1 ELSE 0 END) AS d, "
            f"coalesce(sum({version}), 0) AS v FROM t"
        )
        .read_all()
    ).to_pylist()
    rows, tombstones, version_sum = int(fig["n"]), int(fig["d"] or 0), int(fig["v"])
    log(
        f"deltalake-merge: {rows} rows ({tombstones} tombstones), {metrics['num_target_rows_inserted']} "
        f"inserted, {metrics['num_target_rows_updated']} updated in {seconds:.3f} s"
    )
    emit(
        {
            "tool": "deltalake-merge",
            "version": deltalake.__version__,
            "setup_seconds": setup_seconds,
            "seconds": seconds,
            "cpu_seconds": cpu,
            "rows": rows,
            "tombstones": tombstones,
            "version_sum": version_sum,
            "conflict_check": False,
            "inserted": metrics["num_target_rows_inserted"],
            "updated": metrics["num_target_rows_updated"],
            "peak_rss_mb": peak_rss_mb(),
            "call": inspect.getsource(deltalake_merge),
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
  peers.py duckdb-state INPUT OUT_DIR
  peers.py duckdb-checked INPUT OUT_DIR      (duckdb: the same)
  peers.py polars INPUT OUT_DIR
  peers.py deltalake-merge INPUT OUT_DIR
  peers.py pyiceberg-upsert INPUT [--keep]
  peers.py reference INPUT"""


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "duckdb-state":
        cmd_duckdb(argv[1], argv[2], checked=False, tool="duckdb-state")
    elif len(argv) == 3 and argv[0] in ("duckdb-checked", "duckdb"):
        cmd_duckdb(argv[1], argv[2], checked=True, tool="duckdb-checked")
    elif len(argv) == 3 and argv[0] == "polars":
        cmd_polars(argv[1], argv[2])
    elif len(argv) == 3 and argv[0] == "deltalake-merge":
        cmd_deltalake_merge(argv[1], argv[2])
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
