"""The index-table layout (format 5), declared once as Iceberg schemas; the Arrow layouts of Spark tasks and commits
are derived from them. See docs/index-table.md.

Two shapes of the same facts:
- An *entry* (`ENTRY_SCHEMA`): one row per data file, `columns` holding one element per indexed column. Spark tasks
  produce entries, `IndexTable.entries()` returns them, and format 3 stored them as they are.
- Stored *rows* (`INDEX_SCHEMA`, format 4): one file row per data file (`field_id` 0) and one row per (file, indexed
  column). The table is partitioned by `field_id` and sorted by (`field_id`, `file_path`), so a lookup reads only the
  columns its predicate names, and the payloads of only the files the cheaper stages kept.
`rows_of` and `entries_of` turn one into the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
)

from indexlib.statistics.column_stats import ColumnStats

# 2: distinct_count, ndv_sketch and indexes per column (optional: version-1 entries read as unknown)
# 3: config_version per entry (optional: older entries have none, so a backfill rebuilds them)
# 4: one row per (file, column), partitioned by column; a file row for every file live at the live version (and no
#    other), indexed or not, with its partition values (docs/index-table.md, "What the file rows mean")
# 5: `row_groups` per column row: the same counts, bounds and payloads per Parquet row group, for files built with
#    `[index] row_groups` (an optional field added in place: format-4 rows read as files without row-group entries)
# 6: the global key index (store/key_rows.py): `keyed` on column rows, and key rows (`field_id` -c for column c, one
#    per distinct key hash of the column in the file, `key_hash`); optional fields added in place, as for format 5
FORMAT_VERSION = 6
ROWS_FORMAT = 4  # the first format storing rows per (file, column); older ones stored entries as they are
# What an entry's statistics are (part of its configuration version); format 4 changed how entries are stored, not
# what they hold, so upgraded entries are not outdated.
STATISTICS_VERSION = 3
FILE_ROW = 0  # the field_id of file rows (Iceberg field ids start at 1)


def key_rows_id(field_id: int) -> int:
    """The `field_id` of the key rows of column `field_id` (their own partition of the index table)."""
    return -field_id


def _indexes(list_id: int, first_id: int) -> ListType:
    """The list of (kind, version, payload) of the index kinds built, its element and fields numbered from the ids
    given (a file's and a row group's lists are two fields of one schema)."""
    element = StructType(
        NestedField(first_id, "kind", StringType(), required=True),
        NestedField(first_id + 1, "version", IntegerType(), required=True),
        NestedField(first_id + 2, "payload", BinaryType(), required=True),
    )
    return ListType(list_id, element, element_required=True)


# Per row group of a file (format 5): what a column row holds of the whole file, for one row group.
ROW_GROUP_STATS_TYPE = StructType(
    NestedField(33, "value_count", LongType(), required=True),
    NestedField(34, "null_count", LongType(), required=True),
    NestedField(35, "nan_count", LongType(), required=False),
    NestedField(36, "lower", BinaryType(), required=False),
    NestedField(37, "upper", BinaryType(), required=False),
    NestedField(38, "indexes", _indexes(39, 40), required=False),
)

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
    NestedField(20, "indexes", _indexes(21, 22), required=False),
    # one element per Parquet row group of the file, in footer order; null: no row-group entries (format 5)
    NestedField(31, "row_groups", ListType(32, ROW_GROUP_STATS_TYPE, element_required=True), required=False),
    # format 6: the distinct key hashes of a column in the global key index (stored as key rows, not in the row)
    NestedField(41, "key_hashes", ListType(42, LongType(), element_required=True), required=False),
)

# The per-file facts an entry and a file row share (the file's own, not a column's).
_FILE_FIELDS = (
    NestedField(2, "file_size_in_bytes", LongType(), required=True),
    NestedField(3, "record_count", LongType(), required=True),
    NestedField(4, "source_version", LongType(), required=True),
    NestedField(5, "format_version", IntegerType(), required=True),
)
_FILE_FACTS = (
    NestedField(25, "config_version", StringType(), required=False),
    # format 4: false for a live file the index holds no statistics of (skipped as unreadable, or older than the
    # first build and waiting for backfill); the Iceberg partition record of the file, for the partition stage
    NestedField(26, "indexed", BooleanType(), required=False),
    NestedField(27, "file_format", StringType(), required=False),
    NestedField(28, "spec_id", IntegerType(), required=False),
    NestedField(29, "partition", ListType(30, BinaryType(), element_required=False), required=False),
)

ENTRY_SCHEMA = Schema(
    NestedField(1, "file_path", StringType(), required=True),
    *_FILE_FIELDS,
    NestedField(6, "columns", ListType(7, COLUMN_STATS_TYPE, element_required=True), required=True),
    *_FILE_FACTS,
)


def _optional(field: NestedField) -> NestedField:
    return NestedField(field.field_id, field.name, field.field_type, required=False)


# Stored rows: the entry's file fields (set on file rows only) and the column struct's fields (column rows only).
INDEX_SCHEMA = Schema(
    NestedField(1, "file_path", StringType(), required=True),
    NestedField(10, "field_id", IntegerType(), required=True),
    *(_optional(f) for f in _FILE_FIELDS),
    *_FILE_FACTS,
    *(_optional(f) for f in COLUMN_STATS_TYPE.fields if f.name not in ("field_id", "key_hashes")),
    # format 6: on a column row, whether the file's column has key rows; on a key row, one distinct key hash
    NestedField(43, "keyed", BooleanType(), required=False),
    NestedField(44, "key_hash", LongType(), required=False),
)
INDEX_PARTITION_SPEC = PartitionSpec(
    PartitionField(source_id=10, field_id=1000, transform=IdentityTransform(), name="field_id")
)
INDEX_SORT_ORDER = SortOrder(SortField(source_id=10), SortField(source_id=1))
# Small row groups: a read of a few files' payloads skips the other groups by their file_path min/max; full
# file_path metrics let Iceberg skip whole data files the same way.
INDEX_TABLE_PROPERTIES = {
    "write.parquet.row-group-limit": "2048",
    "write.metadata.metrics.column.file_path": "full",
}


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


def plain_arrow(schema: Schema) -> pa.Schema:
    return pa.schema([_plain_field(field) for field in schema_to_pyarrow(schema, include_field_ids=False)])


# The same layouts in Arrow types: entries (Spark tasks, `IndexTable.entries()`), and stored rows.
ENTRY_ARROW_SCHEMA = plain_arrow(ENTRY_SCHEMA)
ROW_ARROW_SCHEMA = plain_arrow(INDEX_SCHEMA)


def entry_row(
    file_path: str,
    file_size_in_bytes: int,
    record_count: int,
    source_version: int,
    columns: Iterable[ColumnStats],
    config_version: str | None = None,
    *,
    indexed: bool = True,
    file_format: str | None = None,
    spec_id: int | None = None,
    partition: list[bytes | None] | None = None,
) -> dict[str, Any]:
    return {
        "file_path": file_path,
        "file_size_in_bytes": file_size_in_bytes,
        "record_count": record_count,
        "source_version": source_version,
        "format_version": FORMAT_VERSION,
        "columns": [
            {
                **stats.__dict__,
                "indexes": list(stats.indexes),
                "row_groups": None if stats.row_groups is None else [_row_group(group) for group in stats.row_groups],
                "key_hashes": None if stats.key_hashes is None else stats.key_hashes.tolist(),
            }
            for stats in columns
        ],
        "config_version": config_version,
        "indexed": indexed,
        "file_format": file_format,
        "spec_id": spec_id,
        "partition": partition,
    }


def _row_group(stats: ColumnStats) -> dict[str, Any]:
    """One row group's statistics of a column, as `ROW_GROUP_STATS_TYPE` stores them."""
    return {name: getattr(stats, name) for name in ROW_GROUP_FIELDS if name != "indexes"} | {
        "indexes": list(stats.indexes)
    }


ROW_GROUP_FIELDS = tuple(field.name for field in ROW_GROUP_STATS_TYPE.fields)


def as_entries(table: pa.Table) -> pa.Table:
    """Entries in the current entry layout; fields an older layout lacks (format 3 entries) read as null, and
    `indexed` as true (format 3 held entries of indexed files only)."""
    columns = []
    for field in ENTRY_ARROW_SCHEMA:
        if field.name in table.column_names:
            columns.append(table.column(field.name).cast(field.type))
        elif field.name == "indexed":
            columns.append(pa.array(np.ones(table.num_rows, dtype=bool)))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=ENTRY_ARROW_SCHEMA)


def rows_of(entries: pa.Table) -> pa.Table:
    """Entries as stored rows: one file row each, one row per (entry, column), and one key row per distinct key hash
    of each column in the global key index; sorted by (field_id, key_hash, path), so each column's key rows are
    written in hash order (store/key_rows.py reads them by their row groups' hash ranges)."""
    entries = as_entries(entries)
    n = entries.num_rows
    files = {name: entries.column(name) for name in ENTRY_ARROW_SCHEMA.names if name != "columns"}
    files["field_id"] = pa.array(np.full(n, FILE_ROW, dtype=np.int32))
    listed = entries.column("columns").combine_chunks()
    flat = pa.Table.from_struct_array(pc.list_flatten(listed)) if n else None
    parents = pc.list_parent_indices(listed) if n else pa.array([], pa.int64())
    columns = {} if flat is None else {name: flat.column(name) for name in flat.column_names}
    columns["file_path"] = entries.column("file_path").take(parents)
    sources = [files, columns]
    if flat is not None:
        hashes = flat.column("key_hashes")
        columns["keyed"] = pc.is_valid(hashes)
        of_column = pc.list_parent_indices(hashes).to_numpy()
        key_hash = pc.list_flatten(hashes).to_numpy()
        field_id = -flat.column("field_id").to_numpy()[of_column]  # key_rows_id
        # millions of rows on a large build: sorted by numbers before the table is made, never by path strings
        order = np.lexsort((key_hash, field_id))
        of_file = parents.to_numpy()[of_column[order]]
        sources.append(
            {
                "file_path": entries.column("file_path").take(pa.array(of_file)),
                "field_id": pa.array(field_id[order]),
                "key_hash": pa.array(key_hash[order]),
            }
        )
    stacked = [
        pa.table({f.name: _column(source, f, len(source["file_path"])) for f in ROW_ARROW_SCHEMA}, ROW_ARROW_SCHEMA)
        for source in sources
    ]
    rows = pa.concat_tables(stacked[:2]).sort_by([("field_id", "ascending"), ("file_path", "ascending")])
    return pa.concat_tables([*stacked[2:], rows])  # key rows first: their field ids are negative


def _column(source: dict[str, Any], field: pa.Field, n: int) -> pa.Array | pa.ChunkedArray:
    if field.name in source:
        return source[field.name].cast(field.type)
    return pa.nulls(n, field.type)


def entries_of(rows: pa.Table) -> pa.Table:
    """Stored rows as entries, one per file row, ordered by path (column and key rows without a file row are left
    out); a keyed column row gets its key rows' hashes back as `key_hashes`."""
    field_ids = rows.column("field_id")
    is_file = pc.equal(field_ids, FILE_ROW)
    files = rows.filter(is_file).sort_by("file_path")
    paths = files.column("file_path").combine_chunks()
    columns = rows.filter(pc.greater(field_ids, FILE_ROW))
    columns = columns.filter(pc.is_in(columns.column("file_path"), value_set=paths))
    columns = columns.sort_by([("file_path", "ascending"), ("field_id", "ascending")])
    sorted_paths = paths.to_numpy(zero_copy_only=False)
    file_of_row = np.searchsorted(sorted_paths, columns.column("file_path").to_numpy(zero_copy_only=False))
    offsets = np.searchsorted(file_of_row, np.arange(files.num_rows + 1), side="left").astype(np.int32)
    struct_type = ENTRY_ARROW_SCHEMA.field("columns").type.value_type
    stored = {f.name: _stored(columns, f).cast(f.type) for f in struct_type if f.name != "key_hashes"}
    stored["key_hashes"] = _key_hashes(rows, columns, file_of_row, sorted_paths)
    elements = pa.StructArray.from_arrays([stored[f.name] for f in struct_type], fields=list(struct_type))
    listed = pa.ListArray.from_arrays(pa.array(offsets), elements, type=ENTRY_ARROW_SCHEMA.field("columns").type)
    arrays = [listed if f.name == "columns" else files.column(f.name).cast(f.type) for f in ENTRY_ARROW_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=ENTRY_ARROW_SCHEMA)


def _key_hashes(rows: pa.Table, columns: pa.Table, file_of_row: np.ndarray, sorted_paths: np.ndarray) -> pa.Array:
    """Per column row (of file `file_of_row`), the hashes of its key rows; null where the row is not keyed."""
    list_type = ENTRY_ARROW_SCHEMA.field("columns").type.value_type.field("key_hashes").type
    keyed = pc.fill_null(_stored(columns, pa.field("keyed", pa.bool_())), False).to_numpy(zero_copy_only=False)
    if not keyed.any():
        return pa.nulls(columns.num_rows, list_type)
    keys = rows.filter(pc.less(rows.column("field_id"), FILE_ROW))
    key_paths = keys.column("file_path").to_numpy(zero_copy_only=False)
    key_file = np.searchsorted(sorted_paths, key_paths)
    present = (key_file < len(sorted_paths)) & (sorted_paths[np.minimum(key_file, len(sorted_paths) - 1)] == key_paths)
    # one int64 per (file, column): rows and key rows of the same pair get the same code
    key_code = key_file[present] * (1 << 32) - keys.column("field_id").to_numpy()[present]
    hashes = keys.column("key_hash").to_numpy()[present]
    order = np.lexsort((hashes, key_code))
    key_code, hashes = key_code[order], hashes[order]
    row_code = file_of_row * (1 << 32) + columns.column("field_id").to_numpy()
    starts = np.searchsorted(key_code, row_code, side="left")
    stops = np.where(keyed, np.searchsorted(key_code, row_code, side="right"), starts)
    offsets = np.concatenate([[0], np.cumsum(stops - starts)]).astype(np.int32)
    taken = hashes[np.isin(key_code, row_code[keyed])]  # both in (file, column) order: the rows' lists, concatenated
    return pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(taken, pa.int64()), mask=pa.array(~keyed), type=list_type
    )


def _stored(rows: pa.Table, field: pa.Field) -> pa.Array:
    """A field of stored rows; null when the rows were read from an older format that lacks it (format 4 and
    `row_groups`)."""
    if field.name not in rows.column_names:
        return pa.nulls(rows.num_rows, field.type)
    stored = rows.column(field.name).combine_chunks()
    if field.name == "row_groups":  # pyiceberg reads a null list as empty: both mean no row-group entries
        empty = pc.equal(pc.fill_null(pc.list_value_length(stored), 0), 0)
        stored = pc.if_else(empty, pa.nulls(len(stored), stored.type), stored)
    return stored


def one_entry_per_path(entries: pa.Table) -> pa.Table:
    """One entry per data file path, the one of the newest source version, ordered by path.

    Duplicates of a path exist only in index tables written before format 3 (or while a compaction is pending); they
    describe the same immutable file, so any one is valid: the newest is the one every reader picks.
    """
    if entries.num_rows == 0:
        return entries
    order = pc.sort_indices(entries, sort_keys=[("file_path", "ascending"), ("source_version", "descending")])
    entries = entries.take(order)
    _, first = np.unique(entries.column("file_path").to_numpy(zero_copy_only=False), return_index=True)
    return entries.take(pa.array(first, pa.int64()))
