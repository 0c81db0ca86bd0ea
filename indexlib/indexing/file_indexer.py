"""Index one data file: read only the indexed columns, return one entry. Runs inside Spark tasks.

Columns are matched to the table schema by Iceberg field id (or the table's name mapping for files written
without ids), never by name alone, so renamed columns and files from older schemas are read correctly.
A column the file does not hold, or a file we cannot map, gets no statistics: the lookup keeps it.
Beyond min/max, each column gets its exact distinct count, an NDV sketch, and the payloads of the index kinds that
choose it (each kind decides, `IndexKind.chosen`); the indexer names no kind.

Row-group entries (`[index] row_groups`): the file is read one Parquet row group at a time, and each column also
gets, per row group, its counts and bounds and the payloads of the kinds that choose the row group's values (the
same choice as for a file: a file whose integer keys fill their range gets no Bloom filter, but its row groups,
each holding a scattered part of that range, do). Row-group payloads are sized for the row group's distinct values at the
declared settings, not the table-wide sizing of file payloads: they are probed only within files the file-level
stages kept, so a 1 % filter over 8 row groups reads ~0.07 row groups too many per kept file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import pyarrow_to_schema
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import parse_mapping_from_json
from pyiceberg.types import PrimitiveType

from indexlib.index_kinds.base import BuiltIndex
from indexlib.index_kinds.registry import build_order, registry
from indexlib.index_kinds.settings import IndexSettings
from indexlib.indexing.key_index import wants_key_index
from indexlib.statistics.canonical import distinct_keys
from indexlib.statistics.column_stats import ColumnStats, ColumnSummary
from indexlib.statistics.key_hash import key_hashes
from indexlib.statistics.sketches import sketch_keys
from indexlib.store.schema import ENTRY_ARROW_SCHEMA, STATISTICS_VERSION, entry_row

DEFAULT_SETTINGS = IndexSettings()
# The key index answers `=`, IN and LIKE without wildcards exactly (up to hash collisions, which only keep more
# files): kinds that answer only those skip a keyed column, as they skip one another kind describes exactly.
_KEYED = BuiltIndex(b"", exact=True)


def indexed_fields(schema: Schema) -> list[tuple[int, str, PrimitiveType]]:
    """Top-level primitive columns: the ones that get statistics."""
    return [(f.field_id, f.name, f.field_type) for f in schema.fields if isinstance(f.field_type, PrimitiveType)]


def _file_columns_by_field_id(file_schema: pa.Schema, name_mapping_json: str | None) -> dict[int, str]:
    mapping = parse_mapping_from_json(name_mapping_json) if name_mapping_json else None
    try:
        # ns timestamps are read as they are (column_stats and canonical handle the unit); only ids matter here
        iceberg_file_schema = pyarrow_to_schema(file_schema, name_mapping=mapping, downcast_ns_timestamp_to_us=True)
    except ValueError:  # no field ids and no name mapping: Iceberg itself could not read this file
        return {}
    return {field.field_id: field.name for field in iceberg_file_schema.fields}


BATCH_ROWS = 65_536  # rows read at a time: a task's memory is a batch plus each column's distinct values
# `row_groups = "auto"`: row-group entries for files of at least this size with two or more row groups. Below it a
# whole file costs about as much to read as opening it a few times (Spark's open cost is 4 MiB of reading), so
# reading one row group saves little; small files are also where the extra index bytes weigh most.
AUTO_ROW_GROUPS_MIN_BYTES = 32 * 1024 * 1024


def wants_row_groups(mode: str, row_groups: int, file_size: int) -> bool:
    """Whether a file gets row-group entries: `mode` is `[index] row_groups` ("true", "false", "auto"). A file of
    one row group never does: its file entry is that row group's."""
    if row_groups < 2 or mode == "false":
        return False
    return mode == "true" or file_size >= AUTO_ROW_GROUPS_MIN_BYTES


def index_column(
    field_id: int,
    name: str,
    iceberg_type: PrimitiveType,
    column: pa.ChunkedArray,
    settings: IndexSettings,
    table_files: int = 1,
) -> ColumnStats:
    """`index_summary` of a column held in memory."""
    summary = ColumnSummary(column.type)
    for chunk in column.chunks:
        summary.add(chunk, iceberg_type)
    return index_summary(field_id, name, iceberg_type, summary, settings, table_files=table_files)


def index_summary(
    field_id: int,
    name: str,
    iceberg_type: PrimitiveType,
    summary: ColumnSummary,
    settings: IndexSettings,
    sketch: bool = True,
    table_files: int | None = 1,
) -> ColumnStats:
    """Counts and bounds, distinct count, NDV sketch, key hashes (when the column goes into the global key index of
    a table of `table_files` live files, indexing/key_index.py) and the chosen index kinds of one column of one file
    (or, without `sketch` and `table_files`, of one row group: nothing reads a row group's NDV, and the key index
    is per file)."""
    stats = summary.statistics(field_id, name, iceberg_type)
    keys = distinct_keys(summary.distinct(), iceberg_type)
    if keys is None:
        return stats
    rows = summary.rows - summary.nulls - summary.nans  # the values the keys are the distinct ones of
    keyed = table_files is not None and wants_key_index(settings, iceberg_type, keys, rows, table_files)
    built: list[BuiltIndex] = [_KEYED] if keyed else []
    indexes: list[dict[str, Any]] = []
    for kind in build_order():
        if kind.chosen(settings, iceberg_type, keys, rows, built):
            index = kind.build(keys, iceberg_type, settings)
            if index is not None:
                built.append(index)
                indexes.append({"kind": kind.name, "version": kind.version, "payload": index.payload})
    ndv_sketch = sketch_keys(keys) if sketch else None
    hashes = key_hashes(keys.hashes()) if keyed else None
    return replace(stats, distinct_count=len(keys), ndv_sketch=ndv_sketch, indexes=tuple(indexes), key_hashes=hashes)


@dataclass(frozen=True)
class IndexTask:
    """What every task of one build needs, sent to Spark once with the task function: the table's schema and
    name mapping, the file system properties to open its files with, and what to build for each column.
    `row_groups` and `row_group_settings`: `index_file`'s row-group entries; `table_files`: the live files of the
    table, for the key index's automatic choice; `source_version` and `config_version`: stamped on each entry;
    `column_threads`: the columns of one file indexed this many at a time, in threads (1 in Spark, whose tasks have
    a core each; more where this process has cores no other file is using, indexing/local.py)."""

    schema: Schema
    io_properties: dict[str, str]
    name_mapping_json: str | None
    source_version: int
    settings: dict[int, IndexSettings] = field(default_factory=dict)
    config_version: str | None = None
    row_groups: str = "false"
    row_group_settings: dict[int, IndexSettings] = field(default_factory=dict)
    table_files: int = 1
    column_threads: int = 1


def index_file(
    path: str, file_format: str, task: IndexTask, batch_rows: int = BATCH_ROWS
) -> tuple[int, list[ColumnStats]]:
    """(record count, column statistics) of one data file of `task`'s table, read `batch_rows` rows at a time; with
    row-group entries (`task.row_groups`, see `wants_row_groups`) one row group at a time, their payloads built
    with `task.row_group_settings` (default: `task.settings`)."""
    if file_format.upper() != "PARQUET":
        raise ValueError(f"cannot index {path}: file format {file_format} is not supported (only Parquet)")
    io = load_file_io(task.io_properties, location=path)
    input_file = io.new_input(path)
    with input_file.open() as stream:
        parquet = pq.ParquetFile(stream)
        by_id = _file_columns_by_field_id(parquet.schema_arrow, task.name_mapping_json)
        wanted = [(fid, name, ftype) for fid, name, ftype in indexed_fields(task.schema) if fid in by_id]
        columns = [by_id[fid] for fid, _, _ in wanted]

        def summaries_of(groups: list[int] | None) -> dict[int, ColumnSummary]:
            found = {fid: ColumnSummary(parquet.schema_arrow.field(by_id[fid]).type) for fid, _, _ in wanted}
            for batch in parquet.iter_batches(
                batch_size=batch_rows, row_groups=groups, columns=columns, use_threads=False
            ):
                for fid, _, ftype in wanted:
                    found[fid].add(batch.column(by_id[fid]), ftype)
            return found

        group_count = parquet.metadata.num_row_groups
        per_group = wanted and wants_row_groups(task.row_groups, group_count, len(input_file))
        groups = [summaries_of([group]) for group in range(group_count)] if per_group else []
        if groups:
            summaries = {fid: ColumnSummary(parquet.schema_arrow.field(by_id[fid]).type) for fid, _, _ in wanted}
            for group in groups:
                for fid, summary in group.items():
                    summaries[fid].absorb(summary)
        else:
            summaries = summaries_of(None)
        record_count = parquet.metadata.num_rows
    settings = task.settings
    row_group_settings = task.row_group_settings or settings

    def column_stats(column: tuple[int, str, PrimitiveType]) -> ColumnStats:
        fid, name, ftype = column
        stats = index_summary(
            fid, name, ftype, summaries[fid], settings.get(fid, DEFAULT_SETTINGS), table_files=task.table_files
        )
        if not groups:
            return stats
        group_settings = row_group_settings.get(fid, DEFAULT_SETTINGS)
        return replace(
            stats,
            row_groups=tuple(
                index_summary(fid, name, ftype, group[fid], group_settings, sketch=False, table_files=None)
                for group in groups
            ),
        )

    # Each column's summary is its own (the threads share nothing they write); most of the work (sorts, hashes,
    # casts, filter bits) runs outside the interpreter's lock. pool.map keeps the columns' order.
    threads = min(task.column_threads, len(wanted))
    if threads <= 1:
        return record_count, [column_stats(column) for column in wanted]
    with ThreadPoolExecutor(threads) as pool:
        stats = list(pool.map(column_stats, wanted))
    return record_count, stats


def settings_json(settings: dict[int, IndexSettings]) -> str:
    """Per-column settings as text for Spark tasks (field id -> settings)."""
    return json.dumps({str(fid): s.to_json() for fid, s in settings.items()}, sort_keys=True)


# The rule of the automatic choice (each kind's `wanted`, docs/index-kinds.md "The automatic choice"): change it
# whenever a kind's `wanted` chooses differently, so entries built with the previous rule are stale. 1: the rule
# before it was versioned; 2: no Bloom filters for measures, dense integers or free text; automata for tags only,
# trimmed by the symbol-class ladder alone; the global key index's automatic choice; 3: n-gram filters for free text;
# 4: no Bloom filters for timestamps and times (moments, asked for by ranges); free text's words counted without the
# whitespace at a value's ends (it made an empty "word").
AUTOMATIC_CHOICE_VERSION = 4


def uses_automatic_choice(settings: dict[int, IndexSettings]) -> bool:
    """Whether some column's payloads are left to the automatic choice (`kinds` or `key_index` not set; row groups
    follow `kinds` unless `row_group_kinds` is set, so theirs are automatic only when the file's are). An empty
    mapping leaves every column to it (index_file's default)."""
    return not settings or any(s.kinds is None or s.key_index is None for s in settings.values())


def config_version(settings: dict[int, IndexSettings], row_groups: str = "false") -> str:
    """What an entry was built with: the column settings, every kind's payload version, the entry format,
    `[index] row_groups` (left out when "false", so entries built before row-group entries existed stay current)
    and the automatic choice's version (`AUTOMATIC_CHOICE_VERSION`) when some column uses it (a table whose every
    column names its `kinds` keeps its entries when the rule changes; version 1 is left out: the text before the
    rule had a version). An opt-in or late kind (`IndexKind.opt_in`, `IndexKind.late`) counts only where some column
    may get it (`IndexKind.may_build`), so registering one leaves the entries of other tables current.

    An entry whose configuration version differs from the current one is stale: a backfill rebuilds it.
    """
    columns = list(settings.values()) or [IndexSettings()]  # no settings: every column is left to the choice
    kinds = {
        name: kind.version
        for name, kind in sorted(registry().items())
        if any(kind.may_build(column) for column in columns)
    }
    built = {"settings": settings_json(settings), "kinds": kinds, "format": STATISTICS_VERSION}
    if row_groups != "false":
        built["row_groups"] = row_groups
    if AUTOMATIC_CHOICE_VERSION != 1 and uses_automatic_choice(settings):
        built["choice"] = AUTOMATIC_CHOICE_VERSION
    text = json.dumps(built, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Spark task output: an entry, or (with `error` set and no columns) a file that could not be read and was skipped.
TASK_OUTPUT_SCHEMA = ENTRY_ARROW_SCHEMA.append(pa.field("error", pa.string()))


def index_files_task(task: IndexTask) -> Any:
    """The function Spark's `mapInArrow` runs: batches of (path, format, size) in, rows of TASK_OUTPUT_SCHEMA out.

    A file that cannot be read comes back as an error row naming it (no entry): the driver decides whether that
    fails the build or leaves the file unindexed (`[build] on_unreadable_file`), so no failure text crosses Spark.
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:  # one batch of entries per file: a task holds one file's payloads at a time
            for path, file_format, size in zip(
                batch.column("path").to_pylist(),
                batch.column("file_format").to_pylist(),
                batch.column("file_size_in_bytes").to_pylist(),
                strict=True,
            ):
                try:
                    record_count, stats = index_file(path, file_format, task)
                except Exception as exc:  # any failure reading this file: its row says so, the next file goes on
                    reason = f"cannot index data file {path}: {' '.join(str(exc).split()) or type(exc).__name__}"
                    row = {**entry_row(path, size, 0, task.source_version, [], task.config_version), "error": reason}
                else:
                    entry = entry_row(path, size, record_count, task.source_version, stats, task.config_version)
                    row = {**entry, "error": None}
                yield pa.RecordBatch.from_pylist([row], schema=TASK_OUTPUT_SCHEMA)

    return run
