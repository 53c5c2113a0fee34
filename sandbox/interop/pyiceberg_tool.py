"""PyIceberg on tidemark's catalogs, for the interoperability tests (tests/e2e.rs).

Run with the venv of sandbox/pyiceberg.sh ($TIDEMARK_PYTHON). CATALOG_DB is one of:
  - a SQLite file: PyIceberg's SqlCatalog on it, with WAREHOUSE (a folder);
  - `catalog:NAME`: the catalog NAME as PyIceberg defines it (`.pyiceberg.yaml` in
    PYICEBERG_HOME or the home folder, PYICEBERG_CATALOG__NAME__KEY variables), e.g. type rest;
    WAREHOUSE is ignored;
  - `s3tables:NAME`: the S3 Tables catalog NAME defined the same way (PyIceberg has no S3 Tables
    catalog type, so the tool asks S3 Tables itself for the table's metadata location with boto3,
    from the definition's `warehouse` (the table-bucket ARN), `s3tables.endpoint` and
    `s3tables.region`, and commits by moving that pointer with UpdateTableMetadataLocation
    under the version token it read); tables and namespaces are not created through it.
  - a SQLite file with WAREHOUSE `s3://bucket/prefix`: the S3 server and keys of the
    environment (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, …).

  pyiceberg_tool.py read CATALOG_DB WAREHOUSE TABLE
      The table's rows as JSON lines sorted by order_id: decimals as strings ("12.50"),
      timestamps as ISO 8601 in UTC with microseconds ("2026-09-21T13:46:41.000000Z").
  pyiceberg_tool.py create-and-write CATALOG_DB WAREHOUSE TABLE ROWS_JSONL [PARTITION]
      Creates the namespace and the table with the orders schema (field ids 1..9, identifier
      field order_id, every field required, format v2, unpartitioned or partitioned by PARTITION,
      `column:transform,…` with identity, year, month, day, hour, bucket[N], truncate[W]) and
      appends the rows of ROWS_JSONL (one JSON object a line, the columns above; amount a
      string, event_time RFC 3339).
  pyiceberg_tool.py snapshots CATALOG_DB WAREHOUSE TABLE
      The table's snapshots as a JSON array: snapshot_id, parent_snapshot_id, sequence_number,
      timestamp_ms, operation and summary (the other properties, keys sorted), oldest first.
  pyiceberg_tool.py append CATALOG_DB WAREHOUSE TABLE ROWS_JSONL
      Appends rows to an existing table by its current schema (JSON keys are the current column
      names; decimals as strings, timestamps RFC 3339; a column left out is null).
  pyiceberg_tool.py overwrite CATALOG_DB WAREHOUSE TABLE ROWS_JSONL
      Replaces the rows with the keys of ROWS_JSONL by those rows (PyIceberg's copy-on-write
      overwrite filtered on the key column, one commit).
  pyiceberg_tool.py position-delete CATALOG_DB WAREHOUSE TABLE ORDER_ID...
  pyiceberg_tool.py equality-delete CATALOG_DB WAREHOUSE TABLE ORDER_ID...
      Deletes rows by merge-on-read, as Spark or Flink do: a position delete file (file_path,
      pos; the rows' positions in their data files) or an equality delete file on order_id,
      written with pyarrow and committed in a delete manifest of its own through PyIceberg's
      snapshot producer and catalog commit (PyIceberg itself only deletes copy-on-write).
      Position deletes: one file per data file, with its spec and partition. Equality deletes:
      one global file (of an unpartitioned spec of the table). Prints {"delete_file": PATH,
      "rows": N} (position deletes also "delete_files": [PATH, ...]).
  pyiceberg_tool.py rename CATALOG_DB WAREHOUSE TABLE OLD NEW
  pyiceberg_tool.py add-column CATALOG_DB WAREHOUSE TABLE NAME
  pyiceberg_tool.py drop-column CATALOG_DB WAREHOUSE TABLE NAME
      Schema changes through PyIceberg's update_schema (on any catalog, `catalog:NAME` too) (an added column is an optional string;
      a dropped column's field id is not reused, which leaves a gap).
  pyiceberg_tool.py add-partition CATALOG_DB WAREHOUSE TABLE COLUMN:TRANSFORM[,...]
      Partition spec evolution through PyIceberg's update_spec (the fields added to the current
      spec; files written before keep their spec). Prints {"spec_id": N}.
  pyiceberg_tool.py files CATALOG_DB WAREHOUSE TABLE
      The current snapshot's data files as a JSON array: path, partition (values), records.
  pyiceberg_tool.py set-property CATALOG_DB WAREHOUSE TABLE KEY VALUE
  pyiceberg_tool.py drop CATALOG_DB WAREHOUSE TABLE
      Drops the table from the catalog (PyIceberg's drop_table, no purge; on `s3tables:NAME`
      S3 Tables' DeleteTable with boto3). Prints {"dropped": TABLE}.
  pyiceberg_tool.py describe CATALOG_DB WAREHOUSE TABLE
      The current schema (fields with id, name, type, required) and its schema_id,
      last_column_id, the partition spec (fields with source_id, field_id), spec_id and
      last_partition_id, sort order and sort_order_id, properties and format version as JSON.
  pyiceberg_tool.py read-raw CATALOG_DB WAREHOUSE TABLE
      As read, without PyIceberg's scan: the manifests through PyIceberg's metadata reader, the
      files through pyarrow, position and equality deletes applied by the tool itself (PyIceberg
      0.12 cannot read a table with equality deletes): an independent reader for those tables.
  pyiceberg_tool.py live-files CATALOG_DB WAREHOUSE TABLE
      Every live file of the current snapshot (data and delete files) as a JSON array: content,
      path, size, records, sequence_number, spec_id, codec (of the first column chunk).
  pyiceberg_tool.py manifests CATALOG_DB WAREHOUSE TABLE
      Every snapshot's manifest list and manifests as a JSON array, oldest first: snapshot_id,
      operation, tidemark (whether the summary has tidemark's keys), list {path, codec, size}
      and manifests [{path, codec, size, manifest_length}]: codec is the `avro.codec` of the
      file's Avro header (`null` when it has none), size the object's real size, and
      manifest_length what the manifest list says it is.
  pyiceberg_tool.py objects CATALOG_DB WAREHOUSE TABLE [s3://BUCKET/PREFIX ...]
      What "exactly as it was" means on S3, read with boto3: {"metadata_location", "location",
      "objects": {"s3://bucket/key": [[version_id, etag], ...]}} for every version of every
      object under the table's location and under each PREFIX given (a prefix in the table
      location's bucket is listed with the catalog's `s3.endpoint`, any other with
      AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL; a bucket that does not exist holds nothing).

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
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
)
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import Record
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
    if warehouse.startswith("s3://"):
        # The S3 server and keys of the environment (AWS_ENDPOINT_URL, as tidemark reads them).
        props = {
            "warehouse": warehouse,
            "s3.endpoint": os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
            "s3.access-key-id": os.environ.get("AWS_ACCESS_KEY_ID"),
            "s3.secret-access-key": os.environ.get("AWS_SECRET_ACCESS_KEY"),
            "s3.region": os.environ.get("AWS_REGION", "us-east-1"),
        }
        props = {k: v for k, v in props.items() if v}
    else:
        props = {"warehouse": f"file://{os.path.abspath(warehouse)}"}
    return SqlCatalog(CATALOG_NAME, uri=f"sqlite:///{db}", **props)


def load_table(db: str, warehouse: str, ident: str):
    """The table `ident` through the catalog CATALOG_DB names (see the module doc)."""
    if db.startswith("catalog:"):
        from pyiceberg.catalog import load_catalog

        return load_catalog(db[len("catalog:"):]).load_table(ident)
    if db.startswith("s3tables:"):
        return s3tables_catalog(db[len("s3tables:"):]).load_table(ident)
    return catalog(db, warehouse).load_table(ident)


def s3tables_catalog_class():
    """PyIceberg 0.12 has no S3 Tables catalog type: a catalog that loads a table from S3 Tables'
    GetTableMetadataLocation and commits by writing the next metadata file and moving the
    pointer with UpdateTableMetadataLocation under the version token it read (the API's
    compare-and-swap, as AWS's own catalogs commit). Loading and committing only."""
    from pyiceberg.catalog import MetastoreCatalog
    from pyiceberg.io import load_file_io
    from pyiceberg.serializers import FromInputFile
    from pyiceberg.table import CommitTableResponse, Table
    from pyiceberg.utils.config import Config

    class S3TablesCommits(MetastoreCatalog):
        def __init__(self, name: str) -> None:
            import boto3

            props = Config().get_catalog_config(name)
            if not props:
                raise SystemExit(
                    f"no catalog {name!r} is defined (.pyiceberg.yaml or PYICEBERG_CATALOG__{name.upper()}__*)"
                )
            self.arn = props["warehouse"]
            region = props.get("s3tables.region") or self.arn.split(":")[3]
            props.setdefault("s3.region", region)
            super().__init__(name, **props)
            self.client = boto3.client("s3tables", endpoint_url=props.get("s3tables.endpoint"), region_name=region)

        def _pointer(self, ident: str) -> tuple[str, str]:
            ns, name = split_ident(ident)
            r = self.client.get_table_metadata_location(tableBucketARN=self.arn, namespace=ns, name=name)
            return r["metadataLocation"], r["versionToken"]

        def load_table(self, identifier):
            ident = identifier if isinstance(identifier, str) else ".".join(identifier)
            location, _ = self._pointer(ident)
            io = load_file_io({k: v for k, v in self.properties.items() if k.startswith("s3.")}, location)
            metadata = FromInputFile.table_metadata(io.new_input(location))
            return Table(tuple(ident.split(".")), metadata, location, io, self)

        def commit_table(self, table, requirements, updates):
            ident = ".".join(table.name())
            current = self.load_table(ident)
            _, token = self._pointer(ident)
            staged = self._update_and_stage_table(current, table.name(), requirements, updates)
            if staged.metadata == current.metadata:
                return CommitTableResponse(metadata=current.metadata, metadata_location=current.metadata_location)
            if current.metadata_location != table.metadata_location:
                from pyiceberg.exceptions import CommitFailedException

                raise CommitFailedException(f"{ident} moved to {current.metadata_location}")
            self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
            ns, name = split_ident(ident)
            self.client.update_table_metadata_location(
                tableBucketARN=self.arn,
                namespace=ns,
                name=name,
                versionToken=token,
                metadataLocation=staged.metadata_location,
            )
            return CommitTableResponse(metadata=staged.metadata, metadata_location=staged.metadata_location)

        def _write_metadata(self, metadata, io, metadata_path):
            from pyiceberg.serializers import ToOutputFile

            # overwrite=True: no existence check first, which pyarrow makes with a ListObjectsV2
            # that a table bucket's storage refuses (405); the name is new (a UUID).
            ToOutputFile.table_metadata(metadata, io.new_output(metadata_path), overwrite=True)

    # The rest of the Catalog interface (creating, listing, dropping) is not needed here.
    S3TablesCommits.__abstractmethods__ = frozenset()
    return S3TablesCommits


def s3tables_catalog(name: str):
    return s3tables_catalog_class()(name)


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
    key = table.schema().find_field(1).name
    rows.sort(key=lambda r: r[key])
    out = sys.stdout
    for r in rows:
        out.write(json.dumps({k: cell(v) for k, v in r.items()}, sort_keys=False))
        out.write("\n")


def parse_time(text: str) -> dt.datetime:
    t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        raise SystemExit(f"event_time {text!r} has no zone")
    return t.astimezone(dt.timezone.utc)


def partition_spec(text: str):
    """`column:transform,…` (identity, year, month, day, hour, bucket[N], truncate[W]) on SCHEMA."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import parse_transform

    fields = []
    for n, part in enumerate(text.split(",")):
        column, _, transform = part.partition(":")
        source = SCHEMA.find_field(column)
        t = parse_transform(transform)
        name = column if transform == "identity" else f"{column}_{transform.split('[')[0]}"
        fields.append(PartitionField(source_id=source.field_id, field_id=1000 + n, transform=t, name=name))
    return PartitionSpec(*fields)


def cmd_create_and_write(db: str, warehouse: str, ident: str, rows_path: str, partition: str = "") -> None:
    cat = catalog(db, warehouse)
    ns, _ = split_ident(ident)
    cat.create_namespace_if_not_exists(ns)
    table = cat.create_table(
        ident,
        schema=SCHEMA,
        partition_spec=partition_spec(partition) if partition else UNPARTITIONED_PARTITION_SPEC,
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



def value_of(field_type, text):
    """A JSON value as PyIceberg's pyarrow conversion wants it for an Iceberg type."""
    if text is None:
        return None
    if isinstance(field_type, DecimalType):
        return decimal.Decimal(str(text))
    if isinstance(field_type, TimestamptzType):
        return parse_time(text)
    if isinstance(field_type, LongType):
        return int(text)
    if isinstance(field_type, BooleanType):
        return bool(text)
    return text


def rows_of(schema, rows_path: str) -> pa.Table:
    """The rows of a JSON-lines file by the table's current schema (see `append`)."""
    rows = []
    with open(rows_path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                rows.append({fld.name: value_of(fld.field_type, r.get(fld.name)) for fld in schema.fields})
    return pa.Table.from_pylist(rows, schema=schema.as_arrow())


def cmd_append(db: str, warehouse: str, ident: str, rows_path: str) -> None:
    table = load_table(db, warehouse, ident)
    data = rows_of(table.schema(), rows_path)
    table.append(data)
    json.dump({"table": ident, "rows": data.num_rows}, sys.stdout)
    sys.stdout.write("\n")


def cmd_overwrite(db: str, warehouse: str, ident: str, rows_path: str) -> None:
    """Replaces the rows with the keys of ROWS_JSONL by those rows (PyIceberg's copy-on-write
    overwrite with a filter on the key, one commit)."""
    from pyiceberg.expressions import In

    table = load_table(db, warehouse, ident)
    data = rows_of(table.schema(), rows_path)
    key = table.schema().find_field(1).name
    table.overwrite(data, overwrite_filter=In(key, data.column(key).to_pylist()))
    json.dump({"table": ident, "rows": data.num_rows}, sys.stdout)
    sys.stdout.write("\n")


class _DeleteManifestWriter(ManifestWriterV2):
    """A v2 manifest of delete files (PyIceberg 0.12 writes data manifests only)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _RowDelta(_FastAppendFiles):
    """PyIceberg's snapshot producer, adding delete files in a delete manifest of their own."""

    def __init__(self, delete_files: list[DataFile], **kwargs) -> None:
        super().__init__(**kwargs)
        self._delete_files = delete_files

    def _manifests(self):
        manifests = super()._manifests()
        meta = self._transaction.table_metadata
        # One delete manifest per partition spec: each file keeps its data file's spec and
        # partition, as Spark and Flink write them after a spec change.
        for spec_id in sorted({f.spec_id for f in self._delete_files}):
            writer = _DeleteManifestWriter(
                spec=meta.specs()[spec_id],
                schema=self.schema(),
                output_file=self.new_manifest_output(),
                snapshot_id=self._snapshot_id,
                avro_compression=self._compression,
            )
            with writer:
                for f in self._delete_files:
                    if f.spec_id != spec_id:
                        continue
                    writer.add(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=f,
                        )
                    )
            manifests.append(writer.to_manifest_file())
        return manifests

    def _summary(self, snapshot_properties=None):
        from pyiceberg.table.snapshots import SnapshotSummaryCollector, Summary, update_snapshot_summaries

        meta = self._transaction.table_metadata
        ssc = SnapshotSummaryCollector()
        for f in self._delete_files:
            ssc.add_file(data_file=f, partition_spec=meta.specs()[f.spec_id], schema=meta.schema())
        previous = meta.snapshot_by_id(self._parent_snapshot_id) if self._parent_snapshot_id is not None else None
        return update_snapshot_summaries(
            summary=Summary(operation=self._operation, **ssc.build(), **(snapshot_properties or {})),
            previous_summary=previous.summary if previous is not None else None,
        )


def commit_delete_files(table, delete_files: list[DataFile]) -> None:
    with table.transaction() as tx:
        producer = _RowDelta(
            delete_files,
            operation=Operation.DELETE,
            transaction=tx,
            io=table.io,
        )
        producer.commit()


def write_delete_parquet(table, arrow: pa.Table, kind: str) -> tuple[str, int]:
    import uuid as uuid_mod

    import pyarrow.parquet as pq

    path = f"{table.location()}/data/{kind}-delete-{uuid_mod.uuid4()}.parquet"
    # overwrite=True: no existence check (a ListObjectsV2, refused on an S3 Tables table bucket's
    # storage) for a new UUID name.
    with table.io.new_output(path).create(overwrite=True) as f:
        pq.write_table(arrow, f, compression="zstd")
    return path, len(table.io.new_input(path))


def cmd_position_delete(db: str, warehouse: str, ident: str, *keys: str) -> None:
    table = load_table(db, warehouse, ident)
    key_name = table.schema().find_field(1).name
    wanted = set(keys)
    hits = {}
    for task in table.scan().plan_files():
        # ParquetFile, not read_table: a dataset would take `currency=EUR/` in a partitioned
        # path for a Hive partition column of its own.
        data = read_parquet(table, task.file.file_path)
        # By field id 1 (the key): the file's column of that id, whatever its name now.
        column = None
        for i, f in enumerate(data.schema):
            if f.metadata and f.metadata.get(b"PARQUET:field_id") == b"1":
                column = data.column(i)
        if column is None:
            column = data.column(key_name)
        for pos, value in enumerate(column.to_pylist()):
            if value in wanted:
                hits.setdefault(task.file.file_path, (task.file, []))[1].append(pos)
    found = sum(len(p) for _, p in hits.values())
    if found != len(wanted):
        raise SystemExit(f"found {found} of the keys {sorted(wanted)} in the live data files")
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": "2147483546"}),
            pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": "2147483545"}),
        ]
    )
    # One delete file per data file, with that file's spec and partition (PyIceberg matches a
    # delete to a data file by partition, or by path when its path bounds are equal).
    path_type = StringType()
    delete_files, paths = [], []
    for data_path, (data_file, positions) in sorted(hits.items()):
        arrow = pa.Table.from_pylist([{"file_path": data_path, "pos": n} for n in sorted(positions)], schema=schema)
        path, size = write_delete_parquet(table, arrow, "pos")
        paths.append(path)
        delete_file = DataFile.from_args(
            content=DataFileContent.POSITION_DELETES,
            file_path=path,
            file_format=FileFormat.PARQUET,
            partition=data_file.partition,
            record_count=len(positions),
            file_size_in_bytes=size,
            lower_bounds={2147483546: to_bytes(path_type, data_path)},
            upper_bounds={2147483546: to_bytes(path_type, data_path)},
            sort_order_id=None,
            equality_ids=None,
            key_metadata=None,
        )
        # Not a field of the file's manifest entry (from_args ignores it): the manifest's spec.
        delete_file.spec_id = data_file.spec_id
        delete_files.append(delete_file)
    commit_delete_files(table, delete_files)
    json.dump({"delete_file": paths[0], "delete_files": paths, "rows": found}, sys.stdout)
    sys.stdout.write("\n")


def cmd_equality_delete(db: str, warehouse: str, ident: str, *keys: str) -> None:
    table = load_table(db, warehouse, ident)
    key_field = table.schema().find_field(1)
    schema = pa.schema(
        [pa.field(key_field.name, pa.string(), nullable=False, metadata={"PARQUET:field_id": "1"})]
    )
    # A global delete (an unpartitioned spec: it applies to every older data file).
    unpartitioned = next((p for p in table.metadata.partition_specs if p.is_unpartitioned()), None)
    if unpartitioned is None:
        raise SystemExit(f"{ident} has no unpartitioned spec for a global equality delete")
    arrow = pa.Table.from_pylist([{key_field.name: k} for k in keys], schema=schema)
    path, size = write_delete_parquet(table, arrow, "eq")
    delete_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=len(keys),
        file_size_in_bytes=size,
        sort_order_id=None,
        equality_ids=[1],
        key_metadata=None,
    )
    delete_file.spec_id = unpartitioned.spec_id
    commit_delete_files(table, [delete_file])
    json.dump({"delete_file": path, "rows": len(keys)}, sys.stdout)
    sys.stdout.write("\n")


def cmd_delete(db: str, warehouse: str, ident: str, *keys: str) -> None:
    """PyIceberg's own `Table.delete` of the rows with these keys (copy-on-write)."""
    from pyiceberg.expressions import In

    table = load_table(db, warehouse, ident)
    key = table.schema().find_field(1).name
    table.delete(delete_filter=In(key, list(keys)))
    print(json.dumps({"deleted": list(keys)}))


def cmd_rewrite_same(db: str, warehouse: str, ident: str) -> None:
    """Overwrites the whole table with its own rows (a same-rows rewrite, one commit)."""
    table = load_table(db, warehouse, ident)
    data = table.scan().to_arrow()
    table.overwrite(data)
    print(json.dumps({"rewritten": data.num_rows}))


def cmd_fill_column(db: str, warehouse: str, ident: str, name: str, value: str) -> None:
    """Rewrites the whole table with VALUE in column NAME (a column outside the journal's spec)."""
    table = load_table(db, warehouse, ident)
    data = table.scan().to_arrow()
    i = data.schema.get_field_index(name)
    data = data.set_column(i, data.schema.field(i), pa.array([value] * data.num_rows, type=data.schema.field(i).type))
    table.overwrite(data)
    print(json.dumps({"filled": name, "rows": data.num_rows}))


def cmd_tag(db: str, warehouse: str, ident: str, name: str) -> None:
    table = load_table(db, warehouse, ident)
    table.manage_snapshots().create_tag(table.current_snapshot().snapshot_id, name).commit()
    print(json.dumps({"tag": name}))


def cmd_expire_oldest(db: str, warehouse: str, ident: str, count: str) -> None:
    """Expires the COUNT oldest snapshots of main's ancestry (their files stay when still used)."""
    table = load_table(db, warehouse, ident)
    ids = [s.snapshot_id for s in sorted(table.snapshots(), key=lambda s: s.sequence_number)][: int(count)]
    table.maintenance.expire_snapshots().by_ids(ids).commit()
    print(json.dumps({"expired": ids}))


def cmd_applier_append(db: str, warehouse: str, ident: str, rows_path: str, properties: str) -> None:
    """Appends rows with snapshot properties (a JSON object): another engine's applier that
    follows tidemark's documented protocol (schemas/json/applier-summary.schema.json)."""
    table = load_table(db, warehouse, ident)
    data = rows_of(table.schema(), rows_path)
    table.append(data, snapshot_properties=json.loads(properties))
    print(json.dumps({"table": ident, "rows": data.num_rows}))


def cmd_applier_overwrite(db: str, warehouse: str, ident: str, rows_path: str, properties: str) -> None:
    """`overwrite` (by key) with snapshot properties: an applier's upsert under the protocol."""
    from pyiceberg.expressions import In

    table = load_table(db, warehouse, ident)
    data = rows_of(table.schema(), rows_path)
    key = table.schema().find_field(1).name
    table.overwrite(data, overwrite_filter=In(key, data.column(key).to_pylist()), snapshot_properties=json.loads(properties))
    print(json.dumps({"table": ident, "rows": data.num_rows}))


def cmd_rename(db: str, warehouse: str, ident: str, old: str, new: str) -> None:
    table = load_table(db, warehouse, ident)
    with table.update_schema() as update:
        update.rename_column(old, new)
    print(json.dumps({"renamed": old, "to": new}))


def cmd_add_column(db: str, warehouse: str, ident: str, name: str) -> None:
    table = load_table(db, warehouse, ident)
    with table.update_schema() as update:
        update.add_column(name, StringType())
    print(json.dumps({"added": name}))


def cmd_files(db: str, warehouse: str, ident: str) -> None:
    """The data files of the current snapshot: path, partition (as a list of values), records."""
    table = load_table(db, warehouse, ident)
    out = [
        {
            "path": task.file.file_path,
            "partition": [cell(v) for v in task.file.partition],
            "records": task.file.record_count,
        }
        for task in table.scan().plan_files()
    ]
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


def cmd_drop_column(db: str, warehouse: str, ident: str, name: str) -> None:
    table = load_table(db, warehouse, ident)
    with table.update_schema() as update:
        update.delete_column(name)
    print(json.dumps({"dropped": name}))


def cmd_add_partition(db: str, warehouse: str, ident: str, spec: str) -> None:
    """Evolves the partition spec: adds the fields of SPEC (`column:transform,...`, as for
    create-and-write) to the current spec."""
    from pyiceberg.transforms import parse_transform

    table = load_table(db, warehouse, ident)
    with table.update_spec() as update:
        for part in spec.split(","):
            column, _, transform = part.partition(":")
            name = column if transform == "identity" else f"{column}_{transform.split('[')[0]}"
            update.add_field(column, parse_transform(transform), name)
    print(json.dumps({"spec_id": load_table(db, warehouse, ident).spec().spec_id}))


def cmd_set_property(db: str, warehouse: str, ident: str, key: str, value: str) -> None:
    table = load_table(db, warehouse, ident)
    with table.transaction() as tx:
        tx.set_properties({key: value})
    print(json.dumps({"set": key}))


def cmd_drop(db: str, warehouse: str, ident: str) -> None:
    if db.startswith("s3tables:"):
        import boto3
        from pyiceberg.utils.config import Config

        props = Config().get_catalog_config(db[len("s3tables:"):])
        arn = props["warehouse"]
        region = props.get("s3tables.region") or arn.split(":")[3]
        client = boto3.client("s3tables", endpoint_url=props.get("s3tables.endpoint"), region_name=region)
        ns, table = split_ident(ident)
        client.delete_table(tableBucketARN=arn, namespace=ns, name=table)
    elif db.startswith("catalog:"):
        from pyiceberg.catalog import load_catalog

        load_catalog(db[len("catalog:"):]).drop_table(ident)
    else:
        catalog(db, warehouse).drop_table(ident)
    print(json.dumps({"dropped": ident}))


def cmd_describe(db: str, warehouse: str, ident: str) -> None:
    table = load_table(db, warehouse, ident)
    meta = table.metadata
    out = {
        "format_version": meta.format_version,
        "schema_id": table.schema().schema_id,
        "last_column_id": meta.last_column_id,
        "spec_id": table.spec().spec_id,
        "last_partition_id": meta.last_partition_id,
        "sort_order_id": table.sort_order().order_id,
        "fields": [
            {"id": f.field_id, "name": f.name, "type": str(f.field_type), "required": f.required}
            for f in table.schema().fields
        ],
        "identifier_field_ids": sorted(table.schema().identifier_field_ids),
        "partition_spec": [
            {"source_id": f.source_id, "field_id": f.field_id, "name": f.name, "transform": str(f.transform)}
            for f in table.spec().fields
        ],
        "sort_order": [
            {"source_id": f.source_id, "transform": str(f.transform), "direction": str(f.direction)}
            for f in table.sort_order().fields
        ],
        "properties": dict(sorted(meta.properties.items())),
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")



def live_entries(table) -> list:
    """The live manifest entries (data and delete files) of the current snapshot, with the
    sequence numbers and spec ids they inherit from their manifests."""
    snap = table.current_snapshot()
    if snap is None:
        return []
    return [e for m in snap.manifests(table.io) for e in m.fetch_manifest_entry(table.io, discard_deleted=True)]


def read_parquet(table, path: str):
    import pyarrow.parquet as pq

    # One thread: with pyarrow's pool, about one run in 30 aborted at exit on a loaded machine
    # ("terminate called without an active exception").
    with table.io.new_input(path).open() as f:
        return pq.ParquetFile(pa.BufferReader(f.read())).read(use_threads=False)


def columns_by_id(data) -> dict:
    """A Parquet file's columns by their `PARQUET:field_id`."""
    out = {}
    for i, f in enumerate(data.schema):
        if f.metadata and b"PARQUET:field_id" in f.metadata:
            out[int(f.metadata[b"PARQUET:field_id"])] = data.column(i).to_pylist()
    return out


def cmd_read_raw(db: str, warehouse: str, ident: str) -> None:
    """As `read`, but without PyIceberg's scan: the current snapshot's manifests (PyIceberg's
    metadata reader) and pyarrow, with the Iceberg v2 delete rules applied here, equality
    deletes included (PyIceberg 0.12's scan refuses them): a position delete removes row `pos`
    of `file_path` when its data sequence number is >= the data file's; an equality delete
    removes the rows whose `equality_ids` columns equal one of its rows, in data files with a
    lower data sequence number (of its spec and partition, unless its spec is unpartitioned).
    Columns are matched by field id; a column a file lacks reads as null."""
    table = load_table(db, warehouse, ident)
    schema = table.schema()
    specs = table.metadata.specs()
    entries = live_entries(table)
    positions: dict[str, list[tuple[int, set]]] = {}
    equality = []
    for e in entries:
        f = e.data_file
        if f.content == DataFileContent.POSITION_DELETES:
            cols = columns_by_id(read_parquet(table, f.file_path))
            for path, pos in zip(cols[2147483546], cols[2147483545]):
                positions.setdefault(path, []).append((e.sequence_number, pos))
        elif f.content == DataFileContent.EQUALITY_DELETES:
            ids = list(f.equality_ids)
            cols = columns_by_id(read_parquet(table, f.file_path))
            keys = set(zip(*(cols[i] for i in ids)))
            scoped = not specs[f.spec_id].is_unpartitioned()
            equality.append((e.sequence_number, f.spec_id if scoped else None, f.partition, ids, keys))
    rows = []
    for e in entries:
        f = e.data_file
        if f.content != DataFileContent.DATA:
            continue
        seq = e.sequence_number
        cols = columns_by_id(read_parquet(table, f.file_path))
        n = f.record_count
        gone = {p for s, p in positions.get(f.file_path, []) if s >= seq}
        absent = [None] * n
        applying = [
            ([cols.get(i, absent) for i in ids], keys)
            for s, spec_id, partition, ids, keys in equality
            if s > seq and (spec_id is None or (spec_id == f.spec_id and partition == f.partition))
        ]
        for r in range(n):
            if r in gone:
                continue
            if any(tuple(c[r] for c in eq_cols) in keys for eq_cols, keys in applying):
                continue
            rows.append({fld.name: cols[fld.field_id][r] if fld.field_id in cols else None for fld in schema.fields})
    key = schema.find_field(1).name
    rows.sort(key=lambda r: r[key])
    for r in rows:
        sys.stdout.write(json.dumps({k: cell(v) for k, v in r.items()}))
        sys.stdout.write("\n")


def codec(table, data_file) -> str | None:
    """The compression codec of a Parquet file's first column chunk (ZSTD, SNAPPY, ...)."""
    import pyarrow.parquet as pq

    with table.io.new_input(data_file.file_path).open() as f:
        meta = pq.ParquetFile(pa.BufferReader(f.read())).metadata
    return meta.row_group(0).column(0).compression if meta.num_row_groups else None


def cmd_live_files(db: str, warehouse: str, ident: str) -> None:
    """Every live file of the current snapshot, data and delete files, from its manifests:
    content (data, position-deletes, equality-deletes), path, size, records, sequence_number,
    spec_id, codec (of the first column chunk)."""
    table = load_table(db, warehouse, ident)
    names = {
        DataFileContent.DATA: "data",
        DataFileContent.POSITION_DELETES: "position-deletes",
        DataFileContent.EQUALITY_DELETES: "equality-deletes",
    }
    out = [
        {
            "content": names[e.data_file.content],
            "path": e.data_file.file_path,
            "size": e.data_file.file_size_in_bytes,
            "records": e.data_file.record_count,
            "sequence_number": e.sequence_number,
            "spec_id": e.data_file.spec_id,
            "codec": codec(table, e.data_file),
        }
        for e in live_entries(table)
    ]
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


def avro_codec(data: bytes) -> str:
    """The `avro.codec` of an Avro object container file's header ("null" when it has none)."""
    if data[:4] != b"Obj\x01":
        raise SystemExit("not an Avro object container file")
    pos = 4

    def long() -> int:
        nonlocal pos
        shift = value = 0
        while True:
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return (value >> 1) ^ -(value & 1)

    meta = {}
    while (count := long()) != 0:
        if count < 0:
            count = -count
            long()
        for _ in range(count):
            n = long()
            key = data[pos:pos + n].decode()
            pos += n
            n = long()
            meta[key] = data[pos:pos + n]
            pos += n
    return meta.get("avro.codec", b"null").decode()


def cmd_manifests(db: str, warehouse: str, ident: str) -> None:
    table = load_table(db, warehouse, ident)

    def read(path: str) -> bytes:
        with table.io.new_input(path).open() as f:
            return f.read()

    out = []
    for snap in sorted(table.metadata.snapshots, key=lambda s: s.sequence_number):
        data = read(snap.manifest_list)
        summary = snap.summary.additional_properties if snap.summary else {}
        manifests = []
        for m in snap.manifests(table.io):
            body = read(m.manifest_path)
            manifests.append(
                {"path": m.manifest_path, "codec": avro_codec(body), "size": len(body), "manifest_length": m.manifest_length}
            )
        out.append(
            {
                "snapshot_id": snap.snapshot_id,
                "operation": str(snap.summary.operation.value) if snap.summary else None,
                "tidemark": any(k.startswith("tidemark.") for k in summary),
                "list": {"path": snap.manifest_list, "codec": avro_codec(data), "size": len(data)},
                "manifests": manifests,
            }
        )
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


USAGE = """usage:
  pyiceberg_tool.py read CATALOG_DB WAREHOUSE TABLE
  pyiceberg_tool.py create-and-write CATALOG_DB WAREHOUSE TABLE ROWS_JSONL [PARTITION]
  pyiceberg_tool.py snapshots CATALOG_DB WAREHOUSE TABLE
  pyiceberg_tool.py append|overwrite CATALOG_DB WAREHOUSE TABLE ROWS_JSONL
  pyiceberg_tool.py position-delete|equality-delete CATALOG_DB WAREHOUSE TABLE ORDER_ID...
  pyiceberg_tool.py rename CATALOG_DB WAREHOUSE TABLE OLD NEW
  pyiceberg_tool.py add-column CATALOG_DB WAREHOUSE TABLE NAME
  pyiceberg_tool.py files CATALOG_DB WAREHOUSE TABLE
  pyiceberg_tool.py drop-column CATALOG_DB WAREHOUSE TABLE NAME
  pyiceberg_tool.py add-partition CATALOG_DB WAREHOUSE TABLE COLUMN:TRANSFORM[,...]
  pyiceberg_tool.py set-property CATALOG_DB WAREHOUSE TABLE KEY VALUE
  pyiceberg_tool.py drop|describe CATALOG_DB WAREHOUSE TABLE
  pyiceberg_tool.py read-raw|live-files|manifests CATALOG_DB WAREHOUSE TABLE
  pyiceberg_tool.py delete CATALOG_DB WAREHOUSE TABLE ORDER_ID...
  pyiceberg_tool.py rewrite-same CATALOG_DB WAREHOUSE TABLE
  pyiceberg_tool.py fill-column CATALOG_DB WAREHOUSE TABLE NAME VALUE
  pyiceberg_tool.py tag CATALOG_DB WAREHOUSE TABLE NAME
  pyiceberg_tool.py expire-oldest CATALOG_DB WAREHOUSE TABLE COUNT
  pyiceberg_tool.py applier-append|applier-overwrite CATALOG_DB WAREHOUSE TABLE ROWS_JSONL PROPERTIES_JSON"""

def s3_versions(url: str, endpoint: str | None) -> dict:
    import boto3

    bucket, _, prefix = url[len("s3://"):].partition("/")
    client = boto3.client("s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION", "us-east-1"))
    out: dict = {}
    try:
        for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
            for v in page.get("Versions", []):
                out.setdefault(f"s3://{bucket}/{v['Key']}", []).append([v["VersionId"], v["ETag"]])
            for m in page.get("DeleteMarkers", []):
                out.setdefault(f"s3://{bucket}/{m['Key']}", []).append([m["VersionId"], "delete-marker"])
    except client.exceptions.NoSuchBucket:
        pass  # nothing there (S3 Tables removes a purged table's own bucket)
    return out


def cmd_objects(db: str, warehouse: str, ident: str, *prefixes: str) -> None:
    table = load_table(db, warehouse, ident)
    location = table.location().rstrip("/") + "/"
    table_endpoint = table.io.properties.get("s3.endpoint")
    env_endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    table_bucket = location[len("s3://"):].split("/", 1)[0]
    objects = s3_versions(location, table_endpoint) if location.startswith("s3://") else {}
    for p in prefixes:
        bucket = p[len("s3://"):].split("/", 1)[0]
        objects.update(s3_versions(p, table_endpoint if bucket == table_bucket else env_endpoint))
    print(json.dumps({"metadata_location": table.metadata_location, "location": location, "objects": objects}))


COMMANDS = {
    # name: (function, number of arguments after TABLE, or None for one or more)
    "read": (cmd_read, 0),
    "create-and-write": (cmd_create_and_write, None),
    "snapshots": (cmd_snapshots, 0),
    "append": (cmd_append, 1),
    "overwrite": (cmd_overwrite, 1),
    "position-delete": (cmd_position_delete, None),
    "equality-delete": (cmd_equality_delete, None),
    "rename": (cmd_rename, 2),
    "add-column": (cmd_add_column, 1),
    "files": (cmd_files, 0),
    "drop-column": (cmd_drop_column, 1),
    "add-partition": (cmd_add_partition, 1),
    "set-property": (cmd_set_property, 2),
    "drop": (cmd_drop, 0),
    "describe": (cmd_describe, 0),
    "read-raw": (cmd_read_raw, 0),
    "live-files": (cmd_live_files, 0),
    "manifests": (cmd_manifests, 0),
    "delete": (cmd_delete, None),
    "rewrite-same": (cmd_rewrite_same, 0),
    "fill-column": (cmd_fill_column, 2),
    "tag": (cmd_tag, 1),
    "expire-oldest": (cmd_expire_oldest, 1),
    "applier-append": (cmd_applier_append, 2),
    "applier-overwrite": (cmd_applier_overwrite, 2),
    "objects": (cmd_objects, None),
}


def main(argv: list[str]) -> int:
    command = COMMANDS.get(argv[0]) if argv else None
    if command is not None:
        func, extra = command
        rest = len(argv) - 4
        if (extra is None and rest >= 1) or rest == extra:
            func(*argv[1:])
            return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
