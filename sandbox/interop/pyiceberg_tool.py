"""PyIceberg on tidemark's catalogs, for the interoperability tests (tests/e2e.rs).

Run with the venv of sandbox/pyiceberg.sh ($TIDEMARK_PYTHON). CATALOG_DB is one of:
  - a SQLite file: PyIceberg's SqlCatalog on it, with WAREHOUSE (a folder);
  - `catalog:NAME`: the catalog NAME as PyIceberg defines it (`.pyiceberg.yaml` in
    PYICEBERG_HOME or the home folder, PYICEBERG_CATALOG__NAME__KEY variables), e.g. type rest;
    WAREHOUSE is ignored;
  - `s3tables:NAME`: the S3 Tables catalog NAME defined the same way (PyIceberg has no S3 Tables
    catalog type, so the tool asks S3 Tables itself for the table's metadata location with boto3,
    from the definition's `warehouse` (the table-bucket ARN), `s3tables.endpoint` and
    `s3tables.region`, and reads it as a StaticTable with the definition's `s3.*`); read and
    snapshots only.

  pyiceberg_tool.py read CATALOG_DB WAREHOUSE TABLE
      The table's rows as JSON lines sorted by order_id: decimals as strings ("12.50"),
      timestamps as ISO 8601 in UTC with microseconds ("2026-09-21T13:46:41.000000Z").
  pyiceberg_tool.py create-and-write CATALOG_DB WAREHOUSE TABLE ROWS_JSONL
      Creates the namespace and the table with the orders schema (field ids 1..9, identifier
      field order_id, every field required, format v2, unpartitioned) and appends the rows of
      ROWS_JSONL (one JSON object a line, the columns above; amount a string, event_time RFC 3339).
  pyiceberg_tool.py snapshots CATALOG_DB WAREHOUSE TABLE
      The table's snapshots as a JSON array: snapshot_id, parent_snapshot_id, sequence_number,
      timestamp_ms, operation and summary (the other properties, keys sorted), oldest first.

The catalog is PyIceberg's SqlCatalog named "tidemark" (the name tidemark uses by default).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DecimalType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)

CATALOG_NAME = "tidemark"

SCHEMA = Schema(
    NestedField(1, "order_id", StringType(), required=True),
    NestedField(2, "order_version", LongType(), required=True),
    NestedField(3, "customer_id", StringType(), required=True),
    NestedField(4, "status", StringType(), required=True),
    NestedField(5, "amount", DecimalType(18, 2), required=True),
    NestedField(6, "currency", StringType(), required=True),
    NestedField(7, "is_deleted", BooleanType(), required=True),
    NestedField(8, "event_time", TimestamptzType(), required=True),
    NestedField(9, "journal_position", LongType(), required=True),
    schema_id=0,
    identifier_field_ids=[1],
)

ARROW_SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.string(), nullable=False),
        pa.field("order_version", pa.int64(), nullable=False),
        pa.field("customer_id", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("amount", pa.decimal128(18, 2), nullable=False),
        pa.field("currency", pa.string(), nullable=False),
        pa.field("is_deleted", pa.bool_(), nullable=False),
        pa.field("event_time", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("journal_position", pa.int64(), nullable=False),
    ]
)


def catalog(db: str, warehouse: str) -> SqlCatalog:
    db = os.path.abspath(db)
    warehouse = os.path.abspath(warehouse)
    return SqlCatalog(
        CATALOG_NAME,
        uri=f"sqlite:///{db}",
        warehouse=f"file://{warehouse}",
    )


def load_table(db: str, warehouse: str, ident: str):
    """The table `ident` through the catalog CATALOG_DB names (see the module doc)."""
    if db.startswith("catalog:"):
        from pyiceberg.catalog import load_catalog

        return load_catalog(db[len("catalog:"):]).load_table(ident)
    if db.startswith("s3tables:"):
        return s3tables_table(db[len("s3tables:"):], ident)
    return catalog(db, warehouse).load_table(ident)


def s3tables_table(name: str, ident: str):
    import boto3
    from pyiceberg.table import StaticTable
    from pyiceberg.utils.config import Config

    props = Config().get_catalog_config(name)
    if not props:
        raise SystemExit(f"no catalog {name!r} is defined (.pyiceberg.yaml or PYICEBERG_CATALOG__{name.upper()}__*)")
    arn = props["warehouse"]
    region = props.get("s3tables.region") or arn.split(":")[3]
    client = boto3.client("s3tables", endpoint_url=props.get("s3tables.endpoint"), region_name=region)
    ns, table = split_ident(ident)
    location = client.get_table_metadata_location(tableBucketARN=arn, namespace=ns, name=table)["metadataLocation"]
    io = {k: v for k, v in props.items() if k.startswith("s3.")}
    io.setdefault("s3.region", region)
    return StaticTable.from_metadata(location, properties=io)


def split_ident(ident: str) -> tuple[str, str]:
    ns, _, name = ident.rpartition(".")
    if not ns or not name:
        raise SystemExit(f"table name {ident!r} is not of the form namespace.name")
    return ns, name


def cell(value):
    """A JSON-friendly value: decimals keep their scale, timestamps are ISO in UTC."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise SystemExit(f"timestamp without a zone: {value!r}")
        return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value


def cmd_read(db: str, warehouse: str, ident: str) -> None:
    table = load_table(db, warehouse, ident)
    arrow = table.scan().to_arrow()
    rows = arrow.to_pylist()
    rows.sort(key=lambda r: r["order_id"])
    out = sys.stdout
    for r in rows:
        out.write(json.dumps({k: cell(v) for k, v in r.items()}, sort_keys=False))
        out.write("\n")


def parse_time(text: str) -> dt.datetime:
    t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        raise SystemExit(f"event_time {text!r} has no zone")
    return t.astimezone(dt.timezone.utc)


def cmd_create_and_write(db: str, warehouse: str, ident: str, rows_path: str) -> None:
    cat = catalog(db, warehouse)
    ns, _ = split_ident(ident)
    cat.create_namespace_if_not_exists(ns)
    table = cat.create_table(
        ident,
        schema=SCHEMA,
        partition_spec=UNPARTITIONED_PARTITION_SPEC,
        properties={"format-version": "2", "write.format.default": "parquet"},
    )
    rows = []
    with open(rows_path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            rows.append(
                {
                    "order_id": r["order_id"],
                    "order_version": int(r["order_version"]),
                    "customer_id": r["customer_id"],
                    "status": r["status"],
                    "amount": decimal.Decimal(str(r["amount"])),
                    "currency": r["currency"],
                    "is_deleted": bool(r["is_deleted"]),
                    "event_time": parse_time(r["event_time"]),
                    "journal_position": int(r["journal_position"]),
                }
            )
    data = pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)
    table.append(data)
    table = cat.load_table(ident)
    snap = table.current_snapshot()
    json.dump(
        {
            "table": ident,
            "rows": data.num_rows,
            "snapshot_id": snap.snapshot_id if snap else None,
            "metadata_location": table.metadata_location,
        },
        sys.stdout,
    )
    sys.stdout.write("\n")


def cmd_snapshots(db: str, warehouse: str, ident: str) -> None:
    table = load_table(db, warehouse, ident)
    out = []
    # Oldest first. The metadata's list has no required order (iceberg-rust writes it in hash
    # order), so sort by sequence number, then commit time.
    snapshots = sorted(table.metadata.snapshots, key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
    for s in snapshots:
        summary = s.summary
        operation = summary.operation.value if summary is not None else None
        props = dict(summary.additional_properties) if summary is not None else {}
        out.append(
            {
                "snapshot_id": s.snapshot_id,
                "parent_snapshot_id": s.parent_snapshot_id,
                "sequence_number": s.sequence_number,
                "timestamp_ms": s.timestamp_ms,
                "operation": operation,
                "summary": props,
            }
        )
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


USAGE = """usage:
  pyiceberg_tool.py read CATALOG_DB WAREHOUSE TABLE
  pyiceberg_tool.py create-and-write CATALOG_DB WAREHOUSE TABLE ROWS_JSONL
  pyiceberg_tool.py snapshots CATALOG_DB WAREHOUSE TABLE"""


def main(argv: list[str]) -> int:
    if len(argv) >= 1 and argv[0] == "read" and len(argv) == 4:
        cmd_read(*argv[1:])
    elif len(argv) >= 1 and argv[0] == "create-and-write" and len(argv) == 5:
        cmd_create_and_write(*argv[1:])
    elif len(argv) >= 1 and argv[0] == "snapshots" and len(argv) == 4:
        cmd_snapshots(*argv[1:])
    else:
        print(USAGE, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
