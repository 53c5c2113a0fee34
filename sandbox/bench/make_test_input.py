"""A small synthetic INPUT for sandbox/bench/peers.py, so that the peers can be tested end to end
without the Rust suite.

Run with the venv of sandbox/bench_peers.sh ($TIDEMARK_BENCH_PYTHON):

  make_test_input.py OUT_DIR [--snapshot-rows N] [--snapshot-files N] [--events N]
                             [--event-files N] [--conflicts N] [--seed N]

Writes into OUT_DIR (which must not exist or be empty):

  catalog.db          a PyIceberg SqlCatalog named "bench" (SQLite)
  warehouse/          its folder warehouse; the table bench.orders (orders schema: field ids 1..9,
                      every field required, identifier field order_id, format v2, unpartitioned)
                      holds the snapshot, one append per snapshot file, so its data files are
                      the INPUT's snapshot_files
  events/             the journal's event objects, events-00000.parquet ..., journal_position
                      first and then the eight order columns, in position order
  input.json          the INPUT peers.py reads (the format the Rust suite writes)

and prints input.json's path on stdout. Defaults: 20,000 snapshot rows in 2 files (2% of them
tombstones), 5,000 events in 5 files. The events hold updates, deletes (tombstones), re-inserts
after a tombstone, new keys, identical retries of earlier events (also of snapshot rows) and late
events whose version is lower than the key's current one. A payload is a function of (key,
version, deleted), so there is no conflict unless --conflicts N asks for N events that repeat an
earlier (key, version) with another payload. Deterministic for a given --seed.
"""

from __future__ import annotations

import argparse
import decimal
import json
import os
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
import pyiceberg_tool  # noqa: E402

CATALOG_NAME = "bench"
NAMESPACE = "bench"
TABLE = "bench.orders"

# The orders table as the interoperability tool defines it (field ids 1..9, identifier order_id).
SCHEMA, SNAPSHOT_SCHEMA = pyiceberg_tool.SCHEMA, pyiceberg_tool.ARROW_SCHEMA
POSITION_FIELD = SNAPSHOT_SCHEMA.field("journal_position")
EVENT_SCHEMA = pa.schema([POSITION_FIELD] + [f for f in SNAPSHOT_SCHEMA if f.name != "journal_position"])

# 2026-09-21T13:46:40Z in microseconds, as recovery/src/benchdata.rs uses.
BASE_TIME_US = 1_790_000_000_000_000
CURRENCIES = ["EUR", "USD", "GBP"]


def order_id(i: int) -> str:
    return f"o-{i:09}"


def payload(i: int, version: int, deleted: bool, salt: int = 0) -> dict:
    """The columns of key i at a version: a function of (i, version, deleted); salt != 0 gives
    another payload for the same (key, version), i.e. a conflict."""
    if deleted:
        status = "cancelled"
    elif version == 1:
        status = "placed"
    else:
        status = ["paid", "shipped", "delivered"][version % 3]
    return {
        "order_id": order_id(i),
        "order_version": version,
        "customer_id": f"c-{i % 100_000:06}",
        "status": status,
        # decimal(18,2) as its unscaled integer; turned into an Arrow decimal below.
        "amount": (i % 100_000) * 7 + version * 13 + salt,
        "currency": CURRENCIES[(i + version) % len(CURRENCIES)],
        "is_deleted": deleted,
        "event_time": BASE_TIME_US + i * 1_000_000 + version * 1_000,
    }


def to_arrow(rows: list[dict], schema: pa.Schema) -> pa.Table:
    cols = {}
    for f in schema:
        values = [r[f.name] for r in rows]
        if pa.types.is_decimal(f.type):
            cols[f.name] = pa.array([decimal.Decimal(v).scaleb(-2) for v in values], type=f.type)
        elif pa.types.is_timestamp(f.type):
            cols[f.name] = pa.array(values, pa.int64()).cast(f.type)
        else:
            cols[f.name] = pa.array(values, f.type)
    return pa.Table.from_pydict(cols, schema=schema)


def chunks(rows: list, n: int) -> list[list]:
    size = -(-len(rows) // n) if rows else 0
    return [rows[k * size : (k + 1) * size] for k in range(n)]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--snapshot-rows", type=int, default=20_000)
    ap.add_argument("--snapshot-files", type=int, default=2)
    ap.add_argument("--events", type=int, default=5_000)
    ap.add_argument("--event-files", type=int, default=5)
    ap.add_argument("--conflicts", type=int, default=0)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)

    out = os.path.abspath(args.out_dir)
    if os.path.exists(out) and os.listdir(out):
        raise SystemExit(f"{out} exists and is not empty")
    os.makedirs(os.path.join(out, "events"), exist_ok=True)
    os.makedirs(os.path.join(out, "warehouse"), exist_ok=True)
    rng = random.Random(args.seed)

    # The snapshot: keys 0..N-1, versions 1..3, 2% tombstones, positions 1..N.
    n = args.snapshot_rows
    snapshot = []
    current: dict[int, tuple[int, bool]] = {}  # key -> (version, deleted), as the journal goes on
    seen: dict[tuple[int, int], bool] = {}  # (key, version) -> deleted, for every row ever made
    for i in range(n):
        v = rng.randint(1, 3)
        deleted = rng.random() < 0.02
        row = payload(i, v, deleted)
        row["journal_position"] = i + 1
        snapshot.append(row)
        current[i] = (v, deleted)
        seen[(i, v)] = deleted

    # The events, in position order after the snapshot's.
    events: list[dict] = []
    kinds: dict[str, int] = {}
    next_new = n
    position = n
    while len(events) < args.events:
        r = rng.random()
        if r < 0.40 and current:  # update (or re-insert after a tombstone)
            i = rng.randrange(next_new)
            v, deleted = current[i]
            nv = v + rng.choice([1, 1, 1, 2])
            if (i, nv) in seen:
                continue
            row = payload(i, nv, False)
            kind = "reinsert" if deleted else "update"
            current[i] = (nv, False)
            seen[(i, nv)] = False
        elif r < 0.55:  # delete: a tombstone
            i = rng.randrange(next_new)
            v, deleted = current[i]
            if (i, v + 1) in seen:
                continue
            row = payload(i, v + 1, True)
            kind = "delete"
            current[i] = (v + 1, True)
            seen[(i, v + 1)] = True
        elif r < 0.70:  # a new key
            i = next_new
            next_new += 1
            row = payload(i, 1, False)
            kind = "insert"
            current[i] = (1, False)
            seen[(i, 1)] = False
        elif r < 0.85:  # identical retry of an earlier event or of a snapshot row
            if events and rng.random() < 0.7:
                row = {k: v for k, v in rng.choice(events).items() if k != "journal_position"}
            else:
                row = {k: v for k, v in rng.choice(snapshot).items() if k != "journal_position"}
            kind = "retry"
        else:  # late: a version lower than the key's current one, never seen before
            i = rng.randrange(next_new)
            v, _ = current[i]
            free = [lv for lv in range(1, v) if (i, lv) not in seen]
            if not free:
                continue
            lv = rng.choice(free)
            deleted = rng.random() < 0.2
            row = payload(i, lv, deleted)
            kind = "late"
            seen[(i, lv)] = deleted
        position += 1
        row["journal_position"] = position
        events.append(row)
        kinds[kind] = kinds.get(kind, 0) + 1

    # Conflicts on request: an earlier (key, version) again with another payload, appended at the
    # end (each replaces nothing: the tools count them and tidemark would stop).
    conflicted: set[tuple[int, int]] = set()
    c = 0
    while c < args.conflicts:
        base = rng.choice(events if c % 2 == 0 else snapshot)
        i, v = int(base["order_id"][2:]), base["order_version"]
        if (i, v) in conflicted:
            continue
        conflicted.add((i, v))
        c += 1
        row = payload(i, v, base["is_deleted"], salt=c)
        position += 1
        row["journal_position"] = position
        events.append(row)
        kinds["conflict"] = kinds.get("conflict", 0) + 1

    # The snapshot table, one append (one data file) per snapshot file.
    catalog_db = os.path.join(out, "catalog.db")
    warehouse = os.path.join(out, "warehouse")
    cat = SqlCatalog(CATALOG_NAME, uri=f"sqlite:///{catalog_db}", warehouse=f"file://{warehouse}")
    cat.create_namespace_if_not_exists(NAMESPACE)
    table = cat.create_table(
        TABLE,
        schema=SCHEMA,
        partition_spec=UNPARTITIONED_PARTITION_SPEC,
        properties={"format-version": "2", "write.format.default": "parquet"},
    )
    for part in chunks(snapshot, args.snapshot_files):
        if part:
            table.append(to_arrow(part, SNAPSHOT_SCHEMA))
    table = cat.load_table(TABLE)
    snapshot_files = sorted(
        t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()
    )

    event_files = []
    for k, part in enumerate(chunks(events, args.event_files)):
        if not part:
            continue
        path = os.path.join(out, "events", f"events-{k:05}.parquet")
        pq.write_table(to_arrow(part, EVENT_SCHEMA), path)
        event_files.append(path)

    spec = {
        "snapshot_files": snapshot_files,
        "event_files": event_files,
        "catalog_db": catalog_db,
        "warehouse": warehouse,
        "catalog_name": CATALOG_NAME,
        "snapshot_table": TABLE,
        "key": "order_id",
        "version": "order_version",
        "delete": "is_deleted",
        "position": "journal_position",
    }
    input_path = os.path.join(out, "input.json")
    with open(input_path, "w", encoding="utf-8") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")
    print(
        f"make_test_input.py: {len(snapshot)} snapshot rows in {len(snapshot_files)} files, "
        f"{len(events)} events in {len(event_files)} files: "
        + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())),
        file=sys.stderr,
    )
    print(input_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
