"""Index one data file: read only the indexed columns, return one entry. Runs inside Spark tasks.

Columns are matched to the table schema by Iceberg field id (or the table's name mapping for files written
without ids), never by name alone, so renamed columns and files from older schemas are read correctly.
A column the file does not hold, or a file we cannot map, gets no statistics: the lookup keeps it.
Beyond min/max, each column gets its exact distinct count, an NDV sketch, and the index kinds index_choice picks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import pyarrow_to_schema
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import parse_mapping_from_json
from pyiceberg.types import PrimitiveType

from indexlib.canonical import distinct_keys
from indexlib.column_stats import ColumnStats, compute_column_stats
from indexlib.index_choice import IndexSettings, wants_automaton, wants_bloom
from indexlib.index_kinds import registry
from indexlib.index_table import ENTRY_ARROW_SCHEMA, entry_row
from indexlib.ndv import sketch_keys

DEFAULT_SETTINGS = IndexSettings()


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


def index_column(
    field_id: int, name: str, iceberg_type: PrimitiveType, column: pa.ChunkedArray, settings: IndexSettings
) -> ColumnStats:
    """Counts and bounds, distinct count, NDV sketch and the chosen index kinds of one column of one file."""
    values = column.combine_chunks()
    stats = compute_column_stats(field_id, name, iceberg_type, values)
    keys = distinct_keys(values, iceberg_type)
    if keys is None:
        return stats
    kinds = registry()
    indexes: list[dict[str, Any]] = []
    exact_automaton = False
    if wants_automaton(settings, iceberg_type, len(keys)):
        built = kinds["automaton"].build(keys, iceberg_type, settings)
        if built is not None:
            exact_automaton = built.exact
            indexes.append({"kind": "automaton", "version": kinds["automaton"].version, "payload": built.payload})
    if wants_bloom(settings, iceberg_type, keys, exact_automaton):
        built = kinds["bloom"].build(keys, iceberg_type, settings)
        if built is not None:
            indexes.append({"kind": "bloom", "version": kinds["bloom"].version, "payload": built.payload})
    return replace(stats, distinct_count=len(keys), ndv_sketch=sketch_keys(keys), indexes=tuple(indexes))


def index_file(
    path: str,
    file_format: str,
    schema: Schema,
    io_properties: dict[str, str],
    name_mapping_json: str | None,
    settings: dict[int, IndexSettings] | None = None,
) -> tuple[int, list[ColumnStats]]:
    """(record count, column statistics) of one data file."""
    if file_format.upper() != "PARQUET":
        raise ValueError(f"cannot index {path}: file format {file_format} is not supported (only Parquet)")
    io = load_file_io(io_properties, location=path)
    with io.new_input(path).open() as stream:
        parquet = pq.ParquetFile(stream)
        by_id = _file_columns_by_field_id(parquet.schema_arrow, name_mapping_json)
        wanted = [(fid, name, ftype) for fid, name, ftype in indexed_fields(schema) if fid in by_id]
        data = parquet.read(columns=[by_id[fid] for fid, _, _ in wanted], use_threads=False)
        record_count = parquet.metadata.num_rows
    settings = settings or {}
    stats = [
        index_column(fid, name, ftype, data.column(by_id[fid]), settings.get(fid, DEFAULT_SETTINGS))
        for fid, name, ftype in wanted
    ]
    return record_count, stats


def settings_json(settings: dict[int, IndexSettings]) -> str:
    """Per-column settings as text for Spark tasks (field id -> settings)."""
    return json.dumps({str(fid): s.to_json() for fid, s in settings.items()})


def settings_from_json(text: str) -> dict[int, IndexSettings]:
    return {int(fid): IndexSettings.from_json(data) for fid, data in json.loads(text).items()}


def index_files_task(
    schema_json: str,
    io_properties: dict[str, str],
    name_mapping_json: str | None,
    source_version: int,
    column_settings_json: str = "{}",
) -> Any:
    """The function Spark's `mapInArrow` runs: batches of (path, format, size) in, entry rows out."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema = Schema.model_validate_json(schema_json)
        settings = settings_from_json(column_settings_json)
        for batch in batches:
            rows = []
            for path, file_format, size in zip(
                batch.column("path").to_pylist(),
                batch.column("file_format").to_pylist(),
                batch.column("file_size_in_bytes").to_pylist(),
                strict=True,
            ):
                try:
                    record_count, stats = index_file(
                        path, file_format, schema, io_properties, name_mapping_json, settings
                    )
                except Exception as exc:  # name the file: the driver turns this into a one-line error
                    raise RuntimeError(f"skipindex: cannot index data file {path}: {exc}") from exc
                rows.append(entry_row(path, size, record_count, source_version, stats))
            yield pa.RecordBatch.from_pylist(rows, schema=ENTRY_ARROW_SCHEMA)

    return run
