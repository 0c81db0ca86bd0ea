"""Iceberg manifest entries as statistics: what a data file's own entry records (value, null and NaN counts, lower
and upper bounds by field id), read in the index's semantics so the min/max rules judge files the index has no entry
for (a lookup's "format statistics" stage).

The bounds are Iceberg's single-value serialisation, the same bytes the index stores (statistics/column_stats.py),
so they decode the same way; what differs is what the entry does not say:

- The type the bounds were written for is not recorded. It is the column's current type, or the type it was
  promoted from: a 4-byte bound of a `long` column was written for an `int`, a 4-byte bound of a `double` for a
  `float`. A bound of any other width for its column (a `date` promoted to `timestamp`, whose days would read as
  microseconds) is unknown, never reinterpreted.
- Counts: a file whose entry lacks the column's value count or null count is unknown for that column (the column
  was added after the file was written, or its metrics mode is `none`). A floating column without a NaN count (every
  file pyiceberg writes) may hold NaN: its NaN count is unknown (0 where every value is NULL), so `>`, `>=` and `!=`
  keep the file, as they must where engines order NaN above every number.
- A NaN bound (writers before NaN counts existed) is unknown. Truncated string and binary bounds are true bounds
  (Iceberg increments a truncated upper bound), looser than the values, which the rules allow.

Deletes only remove rows, so an entry's bounds and counts over every row it was written with hold for its live rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import (
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    PrimitiveType,
    TimestampType,
    TimestamptzType,
)

from indexlib.statistics.column_stats import decode_bounds, physical_arrow_type, supports_bounds
from indexlib.statistics.provider import ColumnRef, ColumnStatistics, StatisticsProvider, isolate_damage

_PROMOTED_FROM = {LongType: (4, IntegerType()), DoubleType: (4, FloatType())}  # width of a bound written before
# Widths of a bound written before a promotion whose values the column's type now cannot read: a date's 4 bytes of
# days under a timestamp column. Unknown, as every unreadable bound, but expected, so not reported as damage.
_WRITTEN_BEFORE_UNREADABLE = {TimestampType: 4, TimestamptzType: 4}


def written_type(current: PrimitiveType, width: int) -> PrimitiveType:
    """The type a bound of `width` bytes of a column now of type `current` was written for."""
    promoted = _PROMOTED_FROM.get(type(current))
    return promoted[1] if promoted is not None and width == promoted[0] else current


class ManifestStatistics(StatisticsProvider):
    """Per file, its manifest entry (a pyiceberg `DataFile`, or None where unknown), decoded per column when asked."""

    def __init__(self, entries: Sequence[Any | None], names: Sequence[str] | None = None) -> None:
        self.entries = list(entries)
        self.names = names
        self.num_files = len(self.entries)
        self._columns: dict[int, ColumnStatistics] = {}

    def column(self, column: ColumnRef) -> ColumnStatistics:
        if column.field_id not in self._columns:
            self._columns[column.field_id] = self._decode(column)
        return self._columns[column.field_id]

    def file_name(self, index: int) -> str:
        return self.names[index] if self.names is not None else super().file_name(index)

    def _decode(self, column: ColumnRef) -> ColumnStatistics:
        n, field_id = self.num_files, column.field_id
        floating = isinstance(column.type, (FloatType, DoubleType))
        value_count = np.full(n, -1, dtype=np.int64)
        null_count = np.full(n, -1, dtype=np.int64)
        nan_count = np.full(n, -1, dtype=np.int64)
        lower: list[bytes | None] = [None] * n
        upper: list[bytes | None] = [None] * n
        for i, entry in enumerate(self.entries):
            if entry is None:
                continue
            values, nulls = (entry.value_counts or {}).get(field_id), (entry.null_value_counts or {}).get(field_id)
            if values is None or nulls is None:
                continue  # counts the entry does not give: the column is unknown in this file
            value_count[i], null_count[i] = values, nulls
            nans = (entry.nan_value_counts or {}).get(field_id) if floating else 0
            nan_count[i] = nans if nans is not None else (0 if values == nulls else -1)  # all NULL: no room for NaN
            lower[i] = (entry.lower_bounds or {}).get(field_id)
            upper[i] = (entry.upper_bounds or {}).get(field_id)
        if not supports_bounds(column.type):
            return ColumnStatistics(pa.nulls(n, pa.null()), pa.nulls(n, pa.null()), value_count, null_count, nan_count)
        return ColumnStatistics(
            self._bounds(column, lower), self._bounds(column, upper), value_count, null_count, nan_count
        )

    def _bounds(self, column: ColumnRef, payloads: list[bytes | None]) -> pa.Array:
        """The bounds as values of the column's physical domain; unknown where absent, of another width than the
        column's types allow, malformed, or NaN."""
        current = column.type
        assert supports_bounds(current)
        arrow_type = physical_arrow_type(current)
        decoded = pa.nulls(len(payloads), arrow_type)
        widths = {len(p) for p in payloads if p is not None}
        for width in sorted(widths - {_WRITTEN_BEFORE_UNREADABLE.get(type(current))}):
            stored = written_type(current, width)
            positions = np.array([i for i, p in enumerate(payloads) if p is not None and len(p) == width])
            part = pa.array([payloads[i] for i in positions], pa.large_binary())
            values = self._decoded(column, stored, current, part, positions)
            mask = np.zeros(len(payloads), dtype=bool)
            mask[positions] = True
            index = np.zeros(len(payloads), dtype=np.int64)
            index[positions] = np.arange(len(positions))
            decoded = pc.if_else(pa.array(mask), values.take(pa.array(index)), decoded)
        if pa.types.is_floating(arrow_type):
            decoded = pc.if_else(pc.fill_null(pc.is_nan(decoded), False), pa.scalar(None, arrow_type), decoded)
        return decoded

    def _decoded(
        self, column: ColumnRef, stored: PrimitiveType, current: IcebergType, payloads: pa.Array, files: np.ndarray
    ) -> pa.Array:
        arrow_type = physical_arrow_type(current)

        def decode(start: int, stop: int) -> pa.Array:
            return decode_bounds(stored, current, payloads.slice(start, stop - start))

        try:
            return decode(0, len(payloads))
        except Exception as error:  # a bound of the wrong width or not UTF-8: that file's bound is unknown
            parts, bad, error = isolate_damage(len(payloads), decode, lambda k: pa.nulls(k, arrow_type), error)
            self.damaged(column, "manifest bounds", files[bad], error)
            return pa.concat_arrays(parts)
