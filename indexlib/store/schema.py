"""The index-table layout, declared once as an Iceberg schema; the Arrow layout of Spark tasks and commits is derived
from it. One row per indexed data file; `columns` holds one element per indexed column. See docs/index-table.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import BinaryType, IntegerType, ListType, LongType, NestedField, StringType, StructType

from indexlib.statistics.column_stats import ColumnStats

# 2: distinct_count, ndv_sketch and indexes per column (optional: version-1 entries read as unknown)
# 3: config_version per entry (optional: older entries have none, so a backfill rebuilds them)
FORMAT_VERSION = 3

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
    NestedField(25, "config_version", StringType(), required=False),
)


def _plain(arrow_type: pa.DataType) -> pa.DataType:
    """The type with 32-bit offsets (pyiceberg maps to large types; Spark's Arrow bridge rejects large_list)."""
    if pa.types.is_large_string(arrow_type):
        return pa.string()
    if pa.types.is_large_binary(arrow_type):
        return pa.binary()
    if pa.types.is_large_list(arrow_type) or pa.types.is_list(arrow_type):
        return pa.list_(_plain_field(arrow_type.value_field))
    if pa.types.is_struct(arrow_type):
        return pa.struct([_plain_field(arrow_type.field(i)) for i in range(arrow_type.num_fields)])
    return arrow_type


def _plain_field(field: pa.Field) -> pa.Field:
    return pa.field(field.name, _plain(field.type), nullable=field.nullable)


# The same layout in Arrow types, derived from INDEX_SCHEMA; used by Spark tasks and commits.
ENTRY_ARROW_SCHEMA = pa.schema(
    [_plain_field(field) for field in schema_to_pyarrow(INDEX_SCHEMA, include_field_ids=False)]
)


def entry_row(
    file_path: str,
    file_size_in_bytes: int,
    record_count: int,
    source_version: int,
    columns: Iterable[ColumnStats],
    config_version: str | None = None,
) -> dict[str, Any]:
    return {
        "file_path": file_path,
        "file_size_in_bytes": file_size_in_bytes,
        "record_count": record_count,
        "source_version": source_version,
        "format_version": FORMAT_VERSION,
        "columns": [{**stats.__dict__, "indexes": list(stats.indexes)} for stats in columns],
        "config_version": config_version,
    }
