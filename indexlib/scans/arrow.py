"""The Arrow scan targets (`scans/scan.py`): a scan's rows as an Arrow table or a stream of record batches, and their
count. An Iceberg table is read by pyiceberg's own reader (`scans/pyiceberg.py`: field-id mapping, deletes and
deletion vectors applied by pyiceberg), so the rows are those of `table.scan(row_filter=...)`, where the WHERE has an
exact pyiceberg row filter; a WHERE without one (a LIKE that is not a prefix, a FLOAT comparison, `month(ts) = 3`:
the pyiceberg scan refuses it) and a table of another format (Delta), which pyiceberg cannot read, by the DuckDB relation
(`scans/duckdb.py`), which applies the WHERE with its SQL meaning, fetched into Arrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from indexlib.errors import UnsupportedFeature
from indexlib.scans.pyiceberg import IndexedScan
from indexlib.sources.base import FileReads

if TYPE_CHECKING:
    import duckdb

    from indexlib.scans.scan import Scan


def _pyiceberg(scan: Scan) -> IndexedScan | None:
    """pyiceberg's reader of the scan, for an Iceberg table whose WHERE it can apply exactly (None: read by DuckDB)."""
    source = scan.result.source
    if source is None or source.reads is not FileReads.ICEBERG:
        return None
    try:
        return IndexedScan(scan.result, scan.selected_fields, pyiceberg_filter=scan.row_filter)
    except UnsupportedFeature:  # SQL text with no exact pyiceberg row filter (a given pyiceberg filter never is)
        return None


def _relation(scan: Scan) -> duckdb.DuckDBPyRelation:
    from indexlib.scans.duckdb import to_duckdb

    return to_duckdb(scan)


def to_arrow(scan: Scan) -> pa.Table:
    read = _pyiceberg(scan)
    return read.to_arrow() if read is not None else _relation(scan).to_arrow_table()


def to_arrow_batch_reader(scan: Scan) -> pa.RecordBatchReader:
    read = _pyiceberg(scan)
    if read is not None:
        return read.to_arrow_batch_reader()
    from indexlib.scans.duckdb import record_batches

    return record_batches(_relation(scan), 100_000)


def count(scan: Scan) -> int:
    read = _pyiceberg(scan)
    if read is not None:
        return read.count()
    return len(_relation(scan))  # DuckDB counts the relation's rows
