"""The file facts of entries: what the index keeps per data file besides its statistics, so that a lookup can take
the live files and their partitions from the index instead of planning the source (docs/index-table.md).

Every file a build learns of gets a file row: its entry when it was indexed, else an entry with `indexed` false and
no columns (a file skipped as unreadable, or older than the first build and waiting for backfill).
"""

from __future__ import annotations

import pyarrow as pa

from indexlib.sources.base import DataFileRef, Source
from indexlib.store.schema import ENTRY_ARROW_SCHEMA, as_entries, entry_row


def with_file_facts(entries: pa.Table, files: list[DataFileRef], source: Source) -> pa.Table:
    """`entries` (computed by Spark tasks, which never see partition records) with each file's format, spec id and
    stored partition values."""
    entries = as_entries(entries)
    by_path = {f.path: f for f in files}
    refs = [by_path[path] for path in entries.column("file_path").to_pylist()]
    facts = {
        "file_format": pa.array([f.file_format for f in refs], pa.string()),
        "spec_id": pa.array([f.spec_id for f in refs], pa.int32()),
        "partition": pa.array([source.stored_partition(f) for f in refs], ENTRY_ARROW_SCHEMA.field("partition").type),
    }
    for name, values in facts.items():
        entries = entries.set_column(entries.schema.get_field_index(name), name, values)
    return entries


def unindexed_entries(files: list[DataFileRef], source: Source, source_version: int) -> pa.Table:
    """File rows for `files`, which the index knows of but holds no statistics for (kept by every lookup)."""
    rows = [
        entry_row(
            f.path,
            f.file_size_in_bytes,
            f.record_count,
            source_version,
            [],
            indexed=False,
            file_format=f.file_format,
            spec_id=f.spec_id,
            partition=source.stored_partition(f),
        )
        for f in files
    ]
    return pa.Table.from_pylist(rows, schema=ENTRY_ARROW_SCHEMA)
