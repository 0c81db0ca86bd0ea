"""Partition values as statistics: what a file's partition tuple says about the bounds and counts of a column.

A file's partition value fixes an interval of the source column for every row of the file:
- identity(c) = v: every row holds v (NULL: every row is NULL; NaN: every row is NaN);
- year/month/day/hour(c) = n: every row of c lies in that period, [its first instant, the next period's first
  instant - 1] in c's physical domain (days for dates, microseconds for timestamps); NULL: every row is NULL, as
  these transforms map only NULL to NULL. Periods count from 1970 with floor semantics, as Iceberg specifies and
  current writers do (see pruning/partitions.py for the one assumption about old writers).
Several partition fields on one column (identity and day, say) each hold, so their intervals intersect. The file's
row count is the value count, and the null count is 0 or every row. The min/max rules (pruning/minmax.py) then
decide any leaf on the column from these statistics, exactly as they would from an index entry: ranges, IN lists,
patterns on identity strings, calendar fields (month(c) within a year, ...), IS NULL, isnan.

Unknown, so kept: a file whose row count the source does not give, a column with no such field in the file's spec,
a value that cannot be typed as the column, a period beyond the calendar's range, a transform not listed above
(bucket and truncate are left to pyiceberg's projection, pruning/partitions.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.types import DateType, DoubleType, StringType, TimestampType, TimestamptzType
from pyiceberg.utils.datetime import date_to_days

from indexlib.statistics.column_stats import (
    INTEGRAL_TYPES,
    ColumnStats,
    compute_column_stats,
    decode_bounds,
    parse_type,
    physical_arrow_type,
    supports_bounds,
)
from indexlib.statistics.provider import ColumnRef, ColumnStatistics, StatisticsProvider

TIME_TRANSFORMS = ("year", "month", "day", "hour")
BOUNDING_TRANSFORMS = ("identity", *TIME_TRANSFORMS)  # the transforms whose value is an interval of the column

# A column's partition values in each file: the (transform, partition value) pairs of the file's partition fields on
# that column (None or empty: no such field), asked for by field id when a leaf names the column.
Pairs = Callable[[int], Sequence[Sequence[tuple[str, Any]] | None]]

_MICROS_PER_DAY = 86_400_000_000
_MICROS_PER_HOUR = 3_600_000_000
_UNKNOWN = object()
_ALL_NULL = object()


class PartitionValueStatistics(StatisticsProvider):
    """`pairs(field_id)`: per file, its partition values on that column (see `Pairs`); `record_counts()`: per file,
    its row count, -1 where unknown. Both are asked for only when a leaf names a partitioned column (a lookup over
    100,000 files whose predicate names none never reads the files' partition records)."""

    def __init__(self, num_files: int, pairs: Pairs, record_counts: Callable[[], Sequence[int]]) -> None:
        self.num_files = num_files
        self.pairs = pairs
        self._record_counts = record_counts
        self._columns: dict[int, ColumnStatistics] = {}

    @cached_property
    def record_counts(self) -> np.ndarray:
        return np.asarray(self._record_counts(), dtype=np.int64)

    def column(self, column: ColumnRef) -> ColumnStatistics:
        if column.field_id not in self._columns:
            self._columns[column.field_id] = self._statistics(column)
        return self._columns[column.field_id]

    def _statistics(self, column: ColumnRef) -> ColumnStatistics:
        n = self.num_files
        bounded = supports_bounds(column.type)
        arrow_type = physical_arrow_type(column.type) if bounded else pa.null()
        value_count = np.full(n, -1, dtype=np.int64)
        null_count = np.full(n, -1, dtype=np.int64)
        nan_count = np.full(n, -1, dtype=np.int64)
        lower: list[Any] = [None] * n
        upper: list[Any] = [None] * n
        seen: dict[Any, Any] = {}
        for i, (pairs, records) in enumerate(zip(self.pairs(column.field_id), self.record_counts, strict=True)):
            if records < 0 or not pairs:
                continue
            key = tuple(pairs)  # files share partitions: each distinct one is computed once
            try:
                fact = seen[key]
            except KeyError:
                fact = seen[key] = _interval(column, pairs)
            except TypeError:  # an unhashable value: just compute
                fact = _interval(column, pairs)
            if fact is _UNKNOWN:
                continue
            value_count[i] = records
            if fact is _ALL_NULL:
                null_count[i], nan_count[i] = records, 0
                continue
            low, high, nan = fact
            null_count[i], nan_count[i] = 0, records if nan else 0
            if bounded:
                lower[i], upper[i] = low, high
        return ColumnStatistics(
            lower=pa.array(lower, arrow_type),
            upper=pa.array(upper, arrow_type),
            value_count=value_count,
            null_count=null_count,
            nan_count=nan_count,
        )


def _interval(column: ColumnRef, pairs: Sequence[tuple[str, Any]]) -> Any:
    """(lower, upper, every row NaN) that every row of the file satisfies, `_ALL_NULL`, or `_UNKNOWN`."""
    intervals = []
    for transform, value in pairs:
        if transform not in BOUNDING_TRANSFORMS:
            continue
        if value is None:
            return _ALL_NULL  # identity and the time transforms map only NULL to NULL
        found = _identity(column, value) if transform == "identity" else _period(column, transform, value)
        if found is not None:
            intervals.append(found)
    if not intervals:
        return _UNKNOWN
    if len(intervals) == 1:
        return intervals[0]
    try:  # temporal columns with several fields: every interval holds, so their intersection does
        low = max(found[0] for found in intervals)
        high = min(found[1] for found in intervals)
    except TypeError:
        return intervals[0]
    return (low, high, False) if low <= high else intervals[0]  # an empty intersection: a writer's error, keep


def _identity(column: ColumnRef, value: Any) -> tuple[Any, Any, bool] | None:
    """Bounds of a column holding only `value`: the value itself where it is already physical (an integer of an
    integral, date or timestamp column, a string, a non-NaN double), else computed and decoded by the build's own
    code (the same bounds an index entry of such a file has)."""
    if type(value) is int and isinstance(column.type, INTEGRAL_TYPES):
        return (value, value, False)
    if type(value) is str and isinstance(column.type, StringType):
        return (value, value, False)
    if type(value) is float and isinstance(column.type, DoubleType) and value == value:
        return (*_double_partition(value), False)
    stats = _single_value_stats(column, value)
    if stats is None:
        return None
    nan = bool(stats.nan_count)
    if nan or stats.lower is None or stats.upper is None or not supports_bounds(column.type):
        return (None, None, nan)
    stored = parse_type(stats.type)
    low = decode_bounds(stored, column.type, pa.array([stats.lower], pa.binary()))[0].as_py()
    high = decode_bounds(stored, column.type, pa.array([stats.upper], pa.binary()))[0].as_py()
    return (low, high, False)


def _period(column: ColumnRef, transform: str, value: Any) -> tuple[int, int, bool] | None:
    """The physical interval (days for a date column, microseconds for a timestamp) of period `value`."""
    is_date = isinstance(column.type, DateType)
    if not is_date and not isinstance(column.type, (TimestampType, TimestamptzType)):
        return None
    try:
        if transform == "hour":
            if is_date:
                return None
            return (int(value) * _MICROS_PER_HOUR, (int(value) + 1) * _MICROS_PER_HOUR - 1, False)
        if transform == "day":
            first = date_to_days(value) if isinstance(value, dt.date) else int(value)
            following = first + 1
        else:
            years, months = divmod(int(value), 12) if transform == "month" else (int(value), 0)
            start = dt.date(1970 + years, months + 1, 1)
            end = dt.date(start.year + 1, 1, 1) if transform == "year" or start.month == 12 else None
            end = end or dt.date(start.year, start.month + 1, 1)
            first, following = date_to_days(start), date_to_days(end)
    except (OverflowError, ValueError, TypeError):
        return None
    if is_date:
        return (first, following - 1, False)
    return (first * _MICROS_PER_DAY, following * _MICROS_PER_DAY - 1, False)


def _double_partition(value: float) -> tuple[float, float]:
    """The doubles an identity partition value of a double column may stand for. pyiceberg 0.12 writes these values
    to the manifest as floats (0.1 is recorded as 0.10000000149011612, 1e300 as inf; its own scan then skips the row
    for `x = 0.1`), so a value a float can hold is widened to the doubles that round to it: [the float below, the
    float above] (inf: every double above the largest float). A value no float holds was written as a double."""
    single = np.float32(value)
    if float(single) != value:
        return value, value
    if np.isinf(single):
        largest = float(np.finfo(np.float32).max)
        return (largest, value) if value > 0 else (value, -largest)
    return float(np.nextafter(single, np.float32(-np.inf))), float(np.nextafter(single, np.float32(np.inf)))


def _single_value_stats(column: ColumnRef, value: Any) -> ColumnStats | None:
    """Statistics of a column holding only `value`; None when the value cannot be typed as the column."""
    try:
        values = pa.array([value], schema_to_pyarrow(column.type))
        return compute_column_stats(column.field_id, column.name, column.type, values)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        return None
