"""Index one data file: read only the indexed columns, return one entry. Runs inside Spark tasks.

Columns are matched to the table schema by Iceberg field id (or the table's name mapping for files written
without ids), never by name alone, so renamed columns and files from older schemas are read correctly.
A column the file does not hold, or a file we cannot map, gets no statistics: the lookup keeps it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import pyarrow_to_schema
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import parse_mapping_from_json
from pyiceberg.types import PrimitiveType

from indexlib.column_stats import ColumnStats, compute_column_stats
from indexlib.index_table import ENTRY_ARROW_SCHEMA, entry_row


def indexed_fields(schema: Schema) -> list[tuple[int, str, PrimitiveType]]:
    """Top-level primitive columns: the ones that get statistics."""
    return [(f.field_id, f.name, f.field_type) for f in schema.fields if isinstance(f.field_type, PrimitiveType)]


def _file_columns_by_field_id(file_schema: pa.Schema, name_mapping_json: str | None) -> dict[int, str]:
    mapping = parse_mapping_from_json(name_mapping_json) if name_mapping_json else None
    try:
        iceberg_file_schema = pyarrow_to_schema(file_schema, name_mapping=mapping)
    except ValueError:  # no field ids and no name mapping: Iceberg itself could not read this file
        return {}
    return {field.field_id: field.name for field in iceberg_file_schema.fields}


def index_file(
    path: str,
    file_format: str,
    schema: Schema,
    io_properties: dict[str, str],
    name_mapping_json: str | None,
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
    stats = [compute_column_stats(fid, name, ftype, data.column(by_id[fid])) for fid, name, ftype in wanted]
    return record_count, stats


def index_files_task(
    schema_json: str, io_properties: dict[str, str], name_mapping_json: str | None, source_version: int
) -> Any:
    """The function Spark's `mapInArrow` runs: batches of (path, format, size) in, entry rows out."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema = Schema.model_validate_json(schema_json)
        for batch in batches:
            rows = []
            for path, file_format, size in zip(
                batch.column("path").to_pylist(),
                batch.column("file_format").to_pylist(),
                batch.column("file_size_in_bytes").to_pylist(),
                strict=True,
            ):
                try:
                    record_count, stats = index_file(path, file_format, schema, io_properties, name_mapping_json)
                except Exception as exc:  # name the file: the driver turns this into a one-line error
                    raise RuntimeError(f"skipindex: cannot index data file {path}: {exc}") from exc
                rows.append(entry_row(path, size, record_count, source_version, stats))
            yield pa.RecordBatch.from_pylist(rows, schema=ENTRY_ARROW_SCHEMA)

    return run
