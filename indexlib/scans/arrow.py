"""The Arrow scan targets (`scans/scan.py`): a scan's rows as an Arrow table or a stream of record batches, and their
count.

An Iceberg table whose WHERE has an exact pyiceberg row filter (`scans/pyiceberg.py` `row_filter`), or that was
scanned with a pyiceberg row filter, is read by pyiceberg's own `ArrowScan` over pyiceberg `FileScanTask`s made from
the lookup's kept files (each with its delete files), so field-id schema mapping (renamed and promoted columns),
identity partition values and position deletes / deletion vectors are applied by pyiceberg itself, and the rows are
those of `table.scan(row_filter=...)` at the scan's snapshot, without planning; of a file the lookup kept some row
groups of (`KeptFile.row_groups`), only those are read (`scans/row_groups.py`, deletes shifted to match). Files the
lookup proved all-match are read without the filter. `ArrowScan` and `FileScanTask` are half-internal pyiceberg
API: tests/test_pyiceberg_scan.py pins the behaviour against pyiceberg's own unpruned read.

A WHERE without an exact pyiceberg filter (a LIKE that is not a prefix, a FLOAT comparison, `month(ts) = 3`: the
pyiceberg scan would refuse it) and a table of another format (Delta), which pyiceberg cannot read, are read by the
DuckDB relation (`scans/duckdb.py`), which applies the WHERE with its SQL meaning, fetched into Arrow.

A scan's `limit` stops each read once it has that many rows: the rows are some of the matching rows, as many as
match up to the limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

import pyarrow as pa
from pyiceberg import expressions as ice
from pyiceberg.expressions.visitors import bind, extract_field_ids
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.table import FileScanTask
from pyiceberg.types import DoubleType, FloatType

from indexlib.errors import UnsupportedFeature
from indexlib.query.model import BoundColumn
from indexlib.scans.pushdown import files_with_nan
from indexlib.scans.pyiceberg import row_filter
from indexlib.scans.row_groups import RowGroupScan, task_of
from indexlib.sources.base import FileReads, IcebergFiles

if TYPE_CHECKING:
    import duckdb
    from pyiceberg.schema import Schema

    from indexlib.scans.scan import Scan


def to_arrow(scan: Scan) -> pa.Table:
    read = _PyicebergRead.of(scan)
    if read is not None:
        return read.rows(read.tasks())
    return _relation(scan).to_arrow_table()


def to_arrow_batch_reader(scan: Scan) -> pa.RecordBatchReader:
    read = _PyicebergRead.of(scan)
    if read is not None:
        return read.batches()
    from indexlib.scans.duckdb import record_batches

    return record_batches(_relation(scan), 100_000)


def count(scan: Scan) -> int:
    read = _PyicebergRead.of(scan)
    if read is not None:
        return read.count()
    return len(_relation(scan))  # DuckDB counts the relation's rows (the limit applied to it)


def _relation(scan: Scan) -> duckdb.DuckDBPyRelation:
    from indexlib.scans.duckdb import to_duckdb

    return to_duckdb(scan)


_PLAIN = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}


class _PyicebergRead:
    """pyiceberg's reader of one scan's kept files (module docstring)."""

    def __init__(self, scan: Scan, table_filter: ice.BooleanExpression) -> None:
        self.scan = scan
        self.table = cast(IcebergFiles, scan.result.source).table  # the metadata the lookup loaded: its snapshot
        self.row_filter = table_filter
        self.nan_files = files_with_nan(scan.result, self._floating_columns())

    @staticmethod
    def of(scan: Scan) -> _PyicebergRead | None:
        """The reader of `scan`, for an Iceberg table whose filter pyiceberg applies exactly (None: DuckDB reads)."""
        source = scan.result.source
        if source is None or source.reads is not FileReads.ICEBERG:
            return None
        if scan.row_filter is not None:  # a pyiceberg filter, applied with pyiceberg's semantics as given
            return _PyicebergRead(scan, scan.row_filter)
        try:
            return _PyicebergRead(scan, row_filter(scan.result))
        except UnsupportedFeature:  # SQL text with no exact pyiceberg row filter
            return None

    def _floating_columns(self) -> list[BoundColumn]:
        """The FLOAT and DOUBLE columns the row filter names: kept files that may hold NaN in one are filtered in
        memory, not by pyarrow's Parquet read (scans/row_groups.py)."""
        schema = self.table.metadata.schema()
        named = extract_field_ids(bind(schema, self.row_filter, case_sensitive=True))
        # (a field id of the filter bound to `schema` has a name in it)
        return [
            BoundColumn(field_id, cast(str, schema.find_column_name(field_id)), schema.find_type(field_id))
            for field_id in sorted(named)
            if isinstance(schema.find_type(field_id), (FloatType, DoubleType))
        ]

    def _projection(self) -> Schema:
        schema = self.table.metadata.schema()
        columns = self.scan.columns()
        return schema if columns is None else schema.select(*columns)

    def tasks(self) -> list[FileScanTask]:
        """One task per kept file, reading only its kept row groups (`scans.row_groups`)."""
        return [
            task_of(kept, ice.AlwaysTrue() if kept.all_match else self.row_filter, kept.file.path in self.nan_files)
            for kept in self.scan.result.kept_files
        ]

    def _reads(self, tasks: list[FileScanTask]) -> list[tuple[RowGroupScan, list[FileScanTask]]]:
        """Two pyiceberg reads: the all-match files without the filter, the others with it (ArrowScan applies one
        filter to every task it reads)."""
        reads = []
        for matched in (False, True):
            group = [t for t in tasks if (t.residual == ice.AlwaysTrue()) is matched]
            if group:
                row_filter = ice.AlwaysTrue() if matched else self.row_filter
                reads.append((RowGroupScan(self.table.metadata, self.table.io, self._projection(), row_filter), group))
        return reads

    def _schema(self) -> pa.Schema:
        """The projection with plain string and binary types, as pyiceberg reads them from Parquet files (its
        `schema_to_pyarrow` says large ones; its reads mix both, depending on which files held rows), so the type
        is one whichever files the filter left rows in."""
        schema = schema_to_pyarrow(self._projection(), include_field_ids=False)
        return pa.schema([field.with_type(_PLAIN.get(field.type, field.type)) for field in schema])

    def _stream(self, tasks: list[FileScanTask], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """The rows of `tasks` as batches of `schema`, stopped at the scan's limit."""
        left = self.scan.limit
        for arrow_scan, group in self._reads(tasks):
            for batch in arrow_scan.to_record_batches(group):
                if left is not None:
                    batch = batch.slice(0, left)
                    left -= batch.num_rows
                if batch.num_rows:
                    yield batch.cast(schema) if batch.schema != schema else batch
                if left == 0:
                    return

    def rows(self, tasks: list[FileScanTask]) -> pa.Table:
        schema = self._schema()
        if self.scan.limit is None:
            tables = [arrow_scan.to_table(group) for arrow_scan, group in self._reads(tasks)]
            if not tables:
                return schema.empty_table()
            table = pa.concat_tables(tables, promote_options="permissive")
            return table if table.schema == schema else table.cast(schema)
        return pa.Table.from_batches(list(self._stream(tasks, schema)), schema)

    def batches(self) -> pa.RecordBatchReader:
        schema = self._schema()
        return pa.RecordBatchReader.from_batches(schema, self._stream(self.tasks(), schema))

    def count(self) -> int:
        """Rows of all-match files without deletes are counted from metadata, as pyiceberg's `count` does."""
        limit = self.scan.limit
        total = 0
        reads = []
        for task in self.tasks():
            if task.residual == ice.AlwaysTrue() and not task.delete_files:
                total += task.file.record_count
            else:
                reads.append(task)
        if limit is not None and total >= limit:
            return limit
        if reads:
            total += sum(batch.num_rows for batch in self._stream(reads, self._schema()))
        return total if limit is None else min(total, limit)
