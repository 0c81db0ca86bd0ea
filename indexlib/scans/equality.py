"""Iceberg equality deletes applied to the rows read of a data file (sources/iceberg_deletes.py matched them to it).

An equality delete file holds values of some columns, its equality field ids; a data row is deleted when, for one of
its rows, every one of those columns holds the same value. Equality here is Iceberg's, as its own readers apply it
(Java's `Double.compare` and `equals` over the values): NULL equals NULL and NaN equals NaN. The columns are found
by field id, so a column renamed or promoted since the delete was written is still the one it names; a delete file
without Parquet field ids (not one an Iceberg writer makes) is read by the columns' current names.

The match is exact and vectorised: the delete rows are grouped by which of their columns are NULL or NaN, and for
each group the data rows with the same NULL/NaN columns are semi-joined (pyarrow's hash join) to them on the other
columns; a group whose every column is NULL or NaN deletes every data row in the same state. A delete file's rows
are read once per process (an LRU bounded by rows held).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFileContent
from pyiceberg.schema import Schema

from indexlib.errors import UnsupportedFeature

_VALUE, _NULL, _NAN = 0, 1, 2
_ROW = "__skipindex_row"
_CACHE: OrderedDict[str, pa.Table] = OrderedDict()
_CACHE_LOCK = threading.Lock()
CACHED_ROWS = 5_000_000  # delete rows held across reads


def is_equality(delete_file: Any) -> bool:
    """A pyiceberg DataFile of equality deletes."""
    return bool(delete_file.content == DataFileContent.EQUALITY_DELETES)


class EqualityDeletes:
    """The equality delete files (pyiceberg DataFiles) that apply to one data file, read against `schema` (the
    table's current schema)."""

    def __init__(self, io: Any, schema: Schema, delete_files: Sequence[Any], table: str = "") -> None:
        self._io, self._schema, self._files = io, schema, list(delete_files)
        top = {field.field_id for field in schema.fields}
        for delete_file in self._files:
            nested = [i for i in delete_file.equality_ids if i not in top]
            if nested:
                raise UnsupportedFeature(
                    f"table {table}: equality delete file {delete_file.file_path} compares field ids {nested}, which "
                    "are not top-level columns of the current schema (nested or dropped columns are not applied)"
                )

    @property
    def field_ids(self) -> list[int]:
        """Every column the deletes compare: a read must hold them."""
        return list(dict.fromkeys(i for d in self._files for i in d.equality_ids))

    def drop(self, batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
        """`batch` (columns under their current names, `field_ids` among them) without the deleted rows."""
        deleted = np.zeros(batch.num_rows, dtype=bool)
        if not batch.num_rows:
            return batch
        data = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        for delete_file in self._files:
            names = [self._schema.find_column_name(i) for i in delete_file.equality_ids]
            rows = _rows_of(self._io, delete_file, names, self._schema)
            deleted |= _matched(data.select(names), rows.rename_columns(names))
        return batch.filter(pa.array(~deleted)) if deleted.any() else batch


def _rows_of(io: Any, delete_file: Any, names: list[str | None], schema: Schema) -> pa.Table:
    """The delete file's rows of its equality columns, in `equality_ids` order (cached per process)."""
    path = delete_file.file_path
    with _CACHE_LOCK:
        if path in _CACHE:
            _CACHE.move_to_end(path)
            return _CACHE[path]
    with io.new_input(path).open() as stream:
        parquet = pq.ParquetFile(stream)
        stored = parquet.schema_arrow
        by_id = {
            int(field.metadata[b"PARQUET:field_id"]): field.name
            for field in stored
            if field.metadata and b"PARQUET:field_id" in field.metadata
        }
        columns = []
        for field_id, name in zip(delete_file.equality_ids, names, strict=True):
            column = by_id.get(field_id) if by_id else name
            if column is None or column not in stored.names:
                raise UnsupportedFeature(
                    f"equality delete file {path} has no column for field id {field_id} ({name}), which it compares"
                )
            columns.append(column)
        table = parquet.read(columns=list(dict.fromkeys(columns)))
    rows = pa.table([table.column(c) for c in columns], names=[str(i) for i in delete_file.equality_ids])
    with _CACHE_LOCK:
        _CACHE[path] = rows
        while sum(t.num_rows for t in _CACHE.values()) > CACHED_ROWS and len(_CACHE) > 1:
            _CACHE.popitem(last=False)
    return rows


def _states(table: pa.Table) -> np.ndarray:
    """Per row and column: _VALUE, _NULL or _NAN (rows x columns)."""
    states = np.zeros((table.num_rows, table.num_columns), dtype=np.int8)
    for n, column in enumerate(table.columns):
        nulls = column.is_null().to_numpy(zero_copy_only=False)
        states[nulls, n] = _NULL
        if pa.types.is_floating(column.type):
            nans = pc.fill_null(pc.is_nan(column), False).to_numpy(zero_copy_only=False)
            states[nans, n] = _NAN
    return states


def _matched(data: pa.Table, deletes: pa.Table) -> np.ndarray:
    """Which rows of `data` equal some row of `deletes` (same columns, in order), NULL = NULL and NaN = NaN."""
    found = np.zeros(data.num_rows, dtype=bool)
    if not deletes.num_rows:
        return found
    deletes = pa.table(
        [d.cast(c.type) for d, c in zip(deletes.columns, data.columns, strict=True)], names=data.column_names
    )
    data_states, delete_states = _states(data), _states(deletes)
    for pattern in np.unique(delete_states, axis=0):
        here = np.flatnonzero((data_states == pattern).all(axis=1))
        if not len(here):
            continue
        valued = [name for name, state in zip(data.column_names, pattern, strict=True) if state == _VALUE]
        if not valued:  # every compared column NULL or NaN in both
            found[here] = True
            continue
        wanted = deletes.filter(pa.array((delete_states == pattern).all(axis=1))).select(valued)
        left = data.take(pa.array(here)).select(valued).append_column(_ROW, pa.array(here, pa.int64()))
        hits = left.join(wanted.group_by(valued).aggregate([]), valued, join_type="left semi")
        found[hits.column(_ROW).to_numpy()] = True
    return found
