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
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFileContent
from pyiceberg.schema import Schema

from indexlib.errors import UnsupportedFeature

_VALUE, _NULL, _NAN = 0, 1, 2
_ROW = "__skipindex_row"
_CACHE: OrderedDict[str, _Prepared] = OrderedDict()
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

    def drop(self, table: pa.Table) -> pa.Table:
        """`table` (columns under their current names, `field_ids` among them) without the deleted rows."""
        if not table.num_rows:
            return table
        deleted = np.zeros(table.num_rows, dtype=bool)
        for delete_file in self._files:
            names = [cast(str, self._schema.find_column_name(i)) for i in delete_file.equality_ids]
            deleted |= _prepared(self._io, delete_file, names).matched(table.select(names))
        return table.filter(pa.array(~deleted)) if deleted.any() else table


class _Prepared:
    """A delete file's rows made ready to match: per NULL/NaN pattern of its columns (`_codes`), the distinct rows
    of that pattern in the columns that hold values (the hash side of the join; a pattern whose every column is NULL
    or NaN has none)."""

    def __init__(self, rows: pa.Table) -> None:
        self.width = rows.num_columns
        self.rows = rows.num_rows
        codes = _codes(rows)
        self.patterns: list[tuple[int, list[int], pa.Table | None]] = []
        for code in np.unique(codes).tolist():
            valued = [n for n, state in enumerate(_decode(code, self.width)) if state == _VALUE]
            if not valued:
                self.patterns.append((code, valued, None))
                continue
            chosen = rows.filter(pa.array(codes == code)).select(valued)
            keys = [f"c{n}" for n in valued]
            self.patterns.append((code, valued, chosen.rename_columns(keys).group_by(keys).aggregate([])))

    def matched(self, data: pa.Table) -> np.ndarray:
        """Which rows of `data` (the compared columns, in order) equal one of the delete rows."""
        found = np.zeros(data.num_rows, dtype=bool)
        codes = _codes(data)
        for code, valued, distinct in self.patterns:
            here = codes == code
            if not here.any():
                continue
            if distinct is None:  # every compared column NULL or NaN in both
                found |= here
                continue
            keys = [f"c{n}" for n in valued]
            left = pa.table(
                [data.column(n) for n in valued] + [pa.array(np.arange(data.num_rows), pa.int64())],
                names=[*keys, _ROW],
            )
            left = left if here.all() else left.filter(pa.array(here))
            right = pa.table([distinct.column(k).cast(left.column(k).type) for k in keys], names=keys)
            hits = left.join(right, keys, join_type="left semi")
            found[hits.column(_ROW).to_numpy()] = True
        return found


def _prepared(io: Any, delete_file: Any, names: list[str]) -> _Prepared:
    """The delete file's rows of its equality columns, prepared (cached per process, by path)."""
    path = delete_file.file_path
    with _CACHE_LOCK:
        if path in _CACHE:
            _CACHE.move_to_end(path)
            return _CACHE[path]
    prepared = _Prepared(_rows_of(io, delete_file, names))
    with _CACHE_LOCK:
        _CACHE[path] = prepared
        while sum(p.rows for p in _CACHE.values()) > CACHED_ROWS and len(_CACHE) > 1:
            _CACHE.popitem(last=False)
    return prepared


def _rows_of(io: Any, delete_file: Any, names: list[str]) -> pa.Table:
    """The delete file's rows of its equality columns, in `equality_ids` order: by Parquet field id, or by the
    columns' current `names` in a file without field ids."""
    path = delete_file.file_path
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
    return pa.table([table.column(c) for c in columns], names=[str(i) for i in delete_file.equality_ids])


def _codes(table: pa.Table) -> np.ndarray:
    """Per row, which of its columns are NULL or NaN, as one number: the sum over columns n of 3**n times the
    column's state (_VALUE, _NULL or _NAN)."""
    codes = np.zeros(table.num_rows, dtype=np.int64)
    for n, column in enumerate(table.columns):
        states = np.where(column.is_null().to_numpy(zero_copy_only=False), _NULL, _VALUE)
        if pa.types.is_floating(column.type):
            states = np.where(pc.fill_null(pc.is_nan(column), False).to_numpy(zero_copy_only=False), _NAN, states)
        codes += states * 3**n
    return codes


def _decode(code: int, width: int) -> list[int]:
    return [(code // 3**n) % 3 for n in range(width)]


def _matched(data: pa.Table, deletes: pa.Table) -> np.ndarray:
    """Which rows of `data` equal some row of `deletes` (the same columns, in order), NULL = NULL and NaN = NaN."""
    return _Prepared(deletes).matched(data)
