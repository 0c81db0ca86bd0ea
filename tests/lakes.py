"""A source table for tests, Iceberg (SQLite catalog) or Delta (delta-rs), with the operations real tables see."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from indexlib.sources.registry import open_source


class Lake:
    """One source table, Iceberg or Delta, with the operations real tables see."""

    def __init__(
        self,
        kind: str,
        catalog,
        tmp_path: Path,
        name: str,
        partitioned: bool = False,
        location: str | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        """Columns id (long), service (string) and, when `partitioned`, part (string, the partition column). A Delta
        table lives under tmp_path, or at `location` (e.g. s3://...) with delta-rs `storage_options`."""
        self.kind = kind
        self.partition_by = ["part"] if partitioned else None
        self.storage_options = storage_options
        if kind == "iceberg":
            fields = [NestedField(1, "id", LongType()), NestedField(2, "service", StringType())]
            fields += [NestedField(3, "part", StringType())] if partitioned else []
            spec = (
                PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "part")) if partitioned else PartitionSpec()
            )
            self.iceberg = catalog.create_table(f"db.{name}", schema=Schema(*fields), partition_spec=spec)
            self.name = f"db.{name}"
        else:
            self.name = location or str(tmp_path / "lake" / name)

    def append(self, table: pa.Table) -> None:
        if self.kind == "iceberg":
            self.iceberg.append(table)
        else:
            write_deltalake(
                self.name, table, mode="append", partition_by=self.partition_by, storage_options=self.storage_options
            )

    def version(self) -> int:
        """The source's current version: the watermark a complete build leaves."""
        if self.kind == "iceberg":
            return self.iceberg.refresh().current_snapshot().snapshot_id
        return DeltaTable(self.name, storage_options=self.storage_options).version()

    def delete(self, where: str) -> None:
        if self.kind == "iceberg":
            self.iceberg.delete(where)
        else:
            DeltaTable(self.name, storage_options=self.storage_options).delete(where)

    def compact(self) -> None:
        """Rewrite every file (Iceberg: an overwrite snapshot with the same rows; Delta: OPTIMIZE compact)."""
        if self.kind == "iceberg":
            self.iceberg.overwrite(self.iceberg.scan().to_arrow())
        else:
            DeltaTable(self.name, storage_options=self.storage_options).optimize.compact()


EVENTS_SCHEMA = pa.schema([("id", pa.int64()), ("service", pa.string()), ("part", pa.string())])
SERVICES = ["auth", "billing", "search", "web", "mail", "queue"]
PARTS = ["a", "b", "c"]
# (predicate, the same as a function of one row; None is SQL NULL, which never matches)
QUERIES = [
    ("service = 'auth'", lambda r: r["service"] == "auth"),
    ("service IN ('mail', 'queue')", lambda r: r["service"] in ("mail", "queue")),
    ("id = 17", lambda r: r["id"] == 17),
    ("id >= 200", lambda r: r["id"] is not None and r["id"] >= 200),
    ("part = 'b' AND service LIKE 'se%'", lambda r: r["part"] == "b" and (r["service"] or "").startswith("se")),
    ("part <> 'a'", lambda r: r["part"] is not None and r["part"] != "a"),
]


def events_batch(rng: random.Random, start: int, rows: int, part: str) -> pa.Table:
    """Rows of one partition whose services cluster (two per batch), so the tag index can prune."""
    services = rng.sample(SERVICES, 2)
    return pa.Table.from_pylist(
        [
            {"id": i, "service": None if rng.random() < 0.1 else rng.choice(services), "part": part}
            for i in range(start, start + rows)
        ],
        schema=EVENTS_SCHEMA,
    )


def partitioned_events(catalog, tmp_path: Path, name: str, seed: int, rows: int = 30) -> Lake:
    """An Iceberg events table partitioned by `part`: one batch of `rows` rows in each of the three partitions."""
    lake = Lake("iceberg", catalog, tmp_path, name, partitioned=True)
    rng = random.Random(seed)
    for n, part in enumerate(PARTS):
        lake.append(events_batch(rng, n * rows, rows, part))
    return lake


def _read_parquet(config, path: str) -> pa.Table:
    """A local file directly; anything else (s3://) through pyiceberg FileIO with the [catalog] properties."""
    if "://" not in path or path.startswith("file://"):
        return pq.read_table(path.removeprefix("file://"))
    from pyiceberg.io import load_file_io

    with load_file_io(config.catalog_properties, path).new_input(path).open() as stream:
        return pq.read_table(stream)


def live_rows(config, name: str) -> dict[str, list[dict]]:
    """Every live file's rows, read from the file (Delta partition values come from the log, as readers do)."""
    source = open_source(config, name)
    rows = {}
    for ref in source.live_files():
        data = _read_parquet(config, ref.path)
        for column, value in ref.partition if isinstance(ref.partition, tuple) else ():
            if column not in data.column_names:
                data = data.append_column(column, pa.array([value] * data.num_rows))
        rows[ref.path] = data.to_pylist()
    return rows


def checked_answers(config, name: str, step: str = "") -> dict[str, list[str]]:
    """The files each of QUERIES keeps, each answer checked against the rows of every live file: every file with
    a matching row is kept (no false negative) and only live files are returned."""
    from indexlib.lookup import lookup
    from indexlib.query.sql import Clock

    rows, clock, answers = live_rows(config, name), Clock(), {}
    for where, matches in QUERIES:
        files = lookup(config, name, where, clock).files
        truth = {path for path, file_rows in rows.items() if any(matches(r) for r in file_rows)}
        assert truth <= set(files), f"{step}{where!r} keeps every file with a matching row"
        assert set(files) <= set(rows), f"{step}{where!r} returns only live files"
        answers[where] = files
    return answers


def write_format_3_index(catalog, namespace: str, source_name: str, files: list[tuple[str, int, int]], version: int):
    """An index table as skipindex wrote format 3 (one nested row per file, no file facts): entries without
    statistics of `files` (path, size, rows), configuration version "old", watermark `version`. Returns its
    IndexTable; the next writer upgrades it."""
    from pyiceberg.schema import Schema as IcebergSchema

    from indexlib.store.schema import ENTRY_SCHEMA
    from indexlib.store.table import FORMAT_PROPERTY, SOURCE_PROPERTY, WATERMARK_PROPERTY, IndexTable

    index = IndexTable(catalog, namespace, source_name)
    catalog.create_namespace_if_not_exists(namespace)
    schema = IcebergSchema(
        *(f for f in ENTRY_SCHEMA.fields if f.name not in ("indexed", "file_format", "spec_id", "partition"))
    )
    old = catalog.create_table(
        index.identifier, schema=schema, properties={SOURCE_PROPERTY: source_name, FORMAT_PROPERTY: "3"}
    )
    entries = [
        {
            "file_path": path,
            "file_size_in_bytes": size,
            "record_count": rows,
            "source_version": version,
            "format_version": 3,
            "columns": [],
            "config_version": "old",
        }
        for path, size, rows in files
    ]
    old.append(
        pa.Table.from_pylist(entries, schema=old.schema().as_arrow()),
        snapshot_properties={WATERMARK_PROPERTY: str(version)},
    )
    return index


def rewrite_as_format_4(catalog, namespace: str, source_name: str):
    """The index table of `source_name` (built now, format 5) rewritten as skipindex wrote format 4: the same rows
    and the same snapshot summary (watermark, live version), in the format-4 layout (INDEX_SCHEMA without
    `row_groups`, the same partitioning, sort order and table properties, `skipindex.format-version` 4). Returns
    its IndexTable; the next writer upgrades it in place."""
    from pyiceberg.schema import Schema as IcebergSchema

    from indexlib.store.schema import INDEX_PARTITION_SPEC, INDEX_SCHEMA, INDEX_SORT_ORDER, INDEX_TABLE_PROPERTIES
    from indexlib.store.table import (
        FORMAT_PROPERTY,
        LIVE_PROPERTY,
        SOURCE_PROPERTY,
        TABLE_PROPERTIES,
        WATERMARK_PROPERTY,
        IndexTable,
        live_version_of,
        watermark_of,
    )

    index = IndexTable(catalog, namespace, source_name)
    built = index.require()
    rows = built.scan().to_arrow().drop_columns(["row_groups"])
    versions = {WATERMARK_PROPERTY: watermark_of(built), LIVE_PROPERTY: live_version_of(built)}
    kept = {key: str(version) for key, version in versions.items() if version is not None}
    catalog.drop_table(index.identifier)
    old = catalog.create_table(
        index.identifier,
        schema=IcebergSchema(*(f for f in INDEX_SCHEMA.fields if f.name != "row_groups")),
        partition_spec=INDEX_PARTITION_SPEC,
        sort_order=INDEX_SORT_ORDER,
        properties={SOURCE_PROPERTY: source_name, FORMAT_PROPERTY: "4", **TABLE_PROPERTIES, **INDEX_TABLE_PROPERTIES},
    )
    old.append(rows.cast(old.schema().as_arrow()), snapshot_properties=kept)
    index.reload()
    return index
