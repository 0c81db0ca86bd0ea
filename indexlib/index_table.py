"""The side index table: one Iceberg table per source table, one row per indexed data file.

Entries and the watermark (the last source version indexed) are committed together in one Iceberg append,
the watermark as a snapshot-summary property, so a reader sees both or neither. See docs/index-table.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError
from pyiceberg.schema import Schema
from pyiceberg.types import BinaryType, IntegerType, ListType, LongType, NestedField, StringType, StructType

from indexlib.column_stats import ColumnStats
from indexlib.errors import UserError

FORMAT_VERSION = 2  # 2: distinct_count, ndv_sketch and indexes per column (optional: version-1 entries read as unknown)
WATERMARK_PROPERTY = "skipindex.source-version"
SOURCE_PROPERTY = "skipindex.source-table"
FORMAT_PROPERTY = "skipindex.format-version"

COLUMN_STATS_TYPE = StructType(
    NestedField(10, "field_id", IntegerType(), required=True),
    NestedField(11, "name", StringType(), required=True),
    NestedField(12, "type", StringType(), required=True),
    NestedField(13, "value_count", LongType(), required=True),
    NestedField(14, "null_count", LongType(), required=True),
    NestedField(15, "nan_count", LongType(), required=False),
    NestedField(16, "lower", BinaryType(), required=False),
    NestedField(17, "upper", BinaryType(), required=False),
    NestedField(18, "distinct_count", LongType(), required=False),
    NestedField(19, "ndv_sketch", BinaryType(), required=False),
    NestedField(
        20,
        "indexes",
        ListType(
            21,
            StructType(
                NestedField(22, "kind", StringType(), required=True),
                NestedField(23, "version", IntegerType(), required=True),
                NestedField(24, "payload", BinaryType(), required=True),
            ),
            element_required=True,
        ),
        required=False,
    ),
)

INDEX_SCHEMA = Schema(
    NestedField(1, "file_path", StringType(), required=True),
    NestedField(2, "file_size_in_bytes", LongType(), required=True),
    NestedField(3, "record_count", LongType(), required=True),
    NestedField(4, "source_version", LongType(), required=True),
    NestedField(5, "format_version", IntegerType(), required=True),
    NestedField(6, "columns", ListType(7, COLUMN_STATS_TYPE, element_required=True), required=True),
)

# The same layout in plain Arrow types (Spark's Arrow bridge rejects large_list); used by Spark tasks and commits.
_COLUMN_STATS_ARROW = pa.struct(
    [
        pa.field("field_id", pa.int32(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("value_count", pa.int64(), nullable=False),
        pa.field("null_count", pa.int64(), nullable=False),
        pa.field("nan_count", pa.int64()),
        pa.field("lower", pa.binary()),
        pa.field("upper", pa.binary()),
        pa.field("distinct_count", pa.int64()),
        pa.field("ndv_sketch", pa.binary()),
        pa.field(
            "indexes",
            pa.list_(
                pa.field(
                    "element",
                    pa.struct(
                        [
                            pa.field("kind", pa.string(), nullable=False),
                            pa.field("version", pa.int32(), nullable=False),
                            pa.field("payload", pa.binary(), nullable=False),
                        ]
                    ),
                    nullable=False,
                )
            ),
        ),
    ]
)
ENTRY_ARROW_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False),
        pa.field("file_size_in_bytes", pa.int64(), nullable=False),
        pa.field("record_count", pa.int64(), nullable=False),
        pa.field("source_version", pa.int64(), nullable=False),
        pa.field("format_version", pa.int32(), nullable=False),
        pa.field("columns", pa.list_(pa.field("element", _COLUMN_STATS_ARROW, nullable=False)), nullable=False),
    ]
)


def index_table_name(source_name: str) -> str:
    """`ns.name` -> `ns__name`: readable; a collision is detected through the source-table property."""
    return source_name.replace(".", "__")


def entry_row(
    file_path: str,
    file_size_in_bytes: int,
    record_count: int,
    source_version: int,
    columns: Iterable[ColumnStats],
) -> dict[str, Any]:
    return {
        "file_path": file_path,
        "file_size_in_bytes": file_size_in_bytes,
        "record_count": record_count,
        "source_version": source_version,
        "format_version": FORMAT_VERSION,
        "columns": [{**stats.__dict__, "indexes": list(stats.indexes)} for stats in columns],
    }


class IndexTable:
    """The index of one source table, in the configured catalog under the index namespace."""

    def __init__(self, catalog: Any, namespace: str, source_name: str) -> None:
        self.catalog = catalog
        self.source_name = source_name
        self.identifier = f"{namespace}.{index_table_name(source_name)}"
        self.namespace = namespace
        self._table: Any = None

    def load(self) -> Any | None:
        """The Iceberg table, or None when this source was never indexed."""
        if self._table is None:
            try:
                self._table = self.catalog.load_table(self.identifier)
            except NoSuchTableError:
                return None
            self._check_owner(self._table)
        return self._table

    def load_or_create(self) -> Any:
        table = self.load()
        if table is not None:
            return table
        self.catalog.create_namespace_if_not_exists(self.namespace)
        try:
            self._table = self.catalog.create_table(
                self.identifier,
                schema=INDEX_SCHEMA,
                properties={SOURCE_PROPERTY: self.source_name, FORMAT_PROPERTY: str(FORMAT_VERSION)},
            )
        except TableAlreadyExistsError:  # another build created it first
            self._table = self.catalog.load_table(self.identifier)
            self._check_owner(self._table)
        return self._table

    def _check_owner(self, table: Any) -> None:
        owner = table.properties.get(SOURCE_PROPERTY)
        if owner != self.source_name:
            raise UserError(
                f"index table {self.identifier} belongs to source table {owner!r}, not {self.source_name!r}"
            )
        version = int(table.properties.get(FORMAT_PROPERTY, FORMAT_VERSION))
        if version > FORMAT_VERSION:
            raise UserError(
                f"index table {self.identifier} has format version {version}; this skipindex reads up to {FORMAT_VERSION}"
            )

    def watermark(self) -> int | None:
        table = self.load()
        snapshot = table.current_snapshot() if table is not None else None
        value = snapshot.summary[WATERMARK_PROPERTY] if snapshot is not None and snapshot.summary else None
        return int(value) if value is not None else None

    def indexed_paths(self) -> set[str]:
        table = self.load()
        if table is None or table.current_snapshot() is None:
            return set()
        return set(table.scan(selected_fields=("file_path",)).to_arrow().column("file_path").to_pylist())

    def entries(self) -> pa.Table:
        """All entries; duplicates of a path (possible only across format changes) are harmless to the lookup."""
        table = self.load()
        if table is None or table.current_snapshot() is None:
            return ENTRY_ARROW_SCHEMA.empty_table()
        return table.scan().to_arrow()

    def _upgrade(self, table: Any) -> Any:
        """Add the fields of newer formats to an older index table (all optional: old entries read as unknown)."""
        if int(table.properties.get(FORMAT_PROPERTY, FORMAT_VERSION)) >= FORMAT_VERSION:
            return table
        with table.transaction() as transaction:
            with transaction.update_schema() as update:
                update.union_by_name(INDEX_SCHEMA)
            transaction.set_properties({FORMAT_PROPERTY: str(FORMAT_VERSION)})
        self._table = self.catalog.load_table(self.identifier)
        return self._table

    def commit(self, entries: pa.Table, source_version: int) -> None:
        """Append `entries` and move the watermark to `source_version`, in one atomic Iceberg commit."""
        table = self._upgrade(self.load_or_create())
        table.append(entries.cast(ENTRY_ARROW_SCHEMA), snapshot_properties={WATERMARK_PROPERTY: str(source_version)})
