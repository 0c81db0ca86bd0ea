"""Identity partition values as statistics: a file partitioned by `c = v` holds only v in c (NULL: every row NULL).

Each file's value is its column's lower and upper bound, with the file's row count as value count and as null count
when the value is NULL, so the min/max rules decide a predicate on partition columns exactly as they would on an
index entry. Bounds are computed by the same code as the build's (column_stats), once per distinct value. Unknown,
so kept: a file whose row count the source does not give, a column the file has no value for, a value that cannot
be typed as the column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow

from indexlib.statistics.column_stats import (
    ColumnStats,
    compute_column_stats,
    decode_bounds,
    parse_type,
    physical_arrow_type,
    supports_bounds,
)
from indexlib.statistics.provider import ColumnRef, ColumnStatistics, StatisticsProvider


class PartitionValueStatistics(StatisticsProvider):
    """`values[i]` maps column names to file i's partition value; `record_counts[i]` is -1 where unknown."""

    def __init__(self, values: Sequence[Mapping[str, Any]], record_counts: Sequence[int]) -> None:
        self.values = values
        self.record_counts = np.asarray(record_counts, dtype=np.int64)
        self.num_files = len(values)
        self._columns: dict[int, ColumnStatistics] = {}

    def column(self, column: ColumnRef) -> ColumnStatistics:
        if column.field_id not in self._columns:
            self._columns[column.field_id] = self._statistics(column)
        return self._columns[column.field_id]

    def _statistics(self, column: ColumnRef) -> ColumnStatistics:
        n = self.num_files
        arrow_type = physical_arrow_type(column.type) if supports_bounds(column.type) else pa.null()
        value_count = np.full(n, -1, dtype=np.int64)
        null_count = np.full(n, -1, dtype=np.int64)
        nan_count = np.full(n, -1, dtype=np.int64)
        lower: list[Any] = [None] * n
        upper: list[Any] = [None] * n
        of_value: dict[Any, ColumnStats | None] = {}
        for i, (values, records) in enumerate(zip(self.values, self.record_counts, strict=True)):
            if records < 0 or column.name not in values:
                continue
            value = values[column.name]
            if value not in of_value:
                of_value[value] = _single_value_stats(column, value)
            stats = of_value[value]
            if stats is None:
                continue
            value_count[i] = records
            null_count[i] = records if value is None else 0
            nan_count[i] = stats.nan_count or 0
            if stats.lower is not None and stats.upper is not None and supports_bounds(column.type):
                stored = parse_type(stats.type)
                lower[i] = decode_bounds(stored, column.type, pa.array([stats.lower], pa.binary()))[0].as_py()
                upper[i] = decode_bounds(stored, column.type, pa.array([stats.upper], pa.binary()))[0].as_py()
        return ColumnStatistics(
            lower=pa.array(lower, arrow_type),
            upper=pa.array(upper, arrow_type),
            value_count=value_count,
            null_count=null_count,
            nan_count=nan_count,
        )


def _single_value_stats(column: ColumnRef, value: Any) -> ColumnStats | None:
    """Statistics of a column holding only `value`; None when the value cannot be typed as the column."""
    try:
        values = pa.array([value], schema_to_pyarrow(column.type))
        return compute_column_stats(column.field_id, column.name, column.type, values)
    except (pa.ArrowException, ValueError, TypeError):
        return None
