"""Delta add actions' `stats` as statistics: what the log records of each data file (`numRecords`, per column
`nullCount`, `minValues`, `maxValues`), read in the index's semantics so the min/max rules judge files the index has
no entry for (a lookup's "format statistics" stage). delta-rs parses them (`get_add_actions(flatten=True)`: columns
`num_records`, `null_count.<name>`, `min.<name>`, `max.<name>`, under each column's physical name, typed as the
table types the column).

What the log does not promise, read as unknown or widened:

- Strings: writers cut long values to a prefix (delta-spark: 32 characters) and make the maximum an upper bound with
  a tie-breaking character of their own choosing, which delta-rs does not always read back as written. A minimum cut
  to a prefix is still a lower bound; a maximum of 32 characters or more is unknown.
- Timestamps are written in milliseconds (the sub-millisecond digits dropped, by delta-spark and delta-rs alike):
  both bounds are widened by 999 microseconds.
- Floating columns: the log keeps no NaN count (delta-spark's maximum is NaN when a file holds one, delta-rs leaves
  NaN out of its bounds), so the NaN count is unknown and a NaN bound is unknown.
- Decimals are written as JSON numbers, which may be rounded either way: unknown. Binary columns have no bounds.
- Only top-level columns are read; a nested field is unknown. A file without stats, or a column the writer left out
  (`delta.dataSkippingNumIndexedCols`), is unknown.

Deletion vectors only remove rows, so statistics over every row a file was written with (`tightBounds` false: the
bounds are wide) hold for its live rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import (
    BinaryType,
    DecimalType,
    DoubleType,
    FloatType,
    TimestampType,
    TimestamptzType,
)

from indexlib.statistics.column_stats import physical_arrow_type, supports_bounds
from indexlib.statistics.provider import ColumnRef, ColumnStatistics, StatisticsProvider

STRING_PREFIX = 32  # a maximum this many characters long or longer may have been cut (and tie-broken)
TIMESTAMP_SLACK_US = 999  # the microseconds a millisecond bound may be off by


@dataclass(frozen=True)
class ActionRow:
    """A data file's add action: row `row` of a version's flattened add actions."""

    actions: pa.Table
    row: int


class DeltaStatistics(StatisticsProvider):
    """Per file, its add action (or None where unknown); `columns`: each top-level column's physical name, by field
    id."""

    def __init__(self, rows: Sequence[ActionRow | None], columns: Mapping[int, str], names: Sequence[str]) -> None:
        self.rows = list(rows)
        self.columns = columns
        self.names = names
        self.num_files = len(self.rows)
        self._decoded: dict[int, ColumnStatistics] = {}

    def file_name(self, index: int) -> str:
        return self.names[index]

    def column(self, column: ColumnRef) -> ColumnStatistics:
        if column.field_id not in self._decoded:
            self._decoded[column.field_id] = self._read(column)
        return self._decoded[column.field_id]

    def _read(self, column: ColumnRef) -> ColumnStatistics:
        n = self.num_files
        arrow_type = physical_arrow_type(column.type) if supports_bounds(column.type) else pa.null()
        found = ColumnStatistics.unknown(n, arrow_type)
        name = self.columns.get(column.field_id)
        if name is None:
            return found
        value_count, null_count, nan_count = found.value_count.copy(), found.null_count.copy(), found.nan_count.copy()
        lower, upper = found.lower, found.upper
        floating = isinstance(column.type, (FloatType, DoubleType))
        for actions, files, rows in self._by_table():
            names = actions.column_names
            if "num_records" not in names or f"null_count.{name}" not in names:
                continue
            records = actions.column("num_records").take(rows)
            nulls = actions.column(f"null_count.{name}").take(rows)
            both = pc.and_(pc.is_valid(records), pc.is_valid(nulls)).to_numpy(zero_copy_only=False)
            known = files[both]
            value_count[known] = records.to_numpy(zero_copy_only=False)[both]
            null_count[known] = nulls.to_numpy(zero_copy_only=False)[both]
            # the log keeps no NaN count: unknown for a floating column, unless every value is NULL
            nan_count[known] = np.where(value_count[known] == null_count[known], 0, -1) if floating else 0
            for side, bounds in (("min", lower), ("max", upper)):
                if f"{side}.{name}" not in names or arrow_type == pa.null():
                    continue
                values = _bounds(actions.column(f"{side}.{name}").take(rows), column, side, arrow_type)
                placed = np.full(n, -1, dtype=np.int64)
                placed[files] = np.arange(len(files))
                taken = values.take(pa.array(np.where(placed >= 0, placed, 0), pa.int64()))
                merged = pc.if_else(pa.array(placed >= 0), taken, bounds)
                lower, upper = (merged, upper) if side == "min" else (lower, merged)
        return ColumnStatistics(lower, upper, value_count, null_count, nan_count)

    def _by_table(self) -> list[tuple[pa.Table, np.ndarray, pa.Array]]:
        """The files grouped by the actions table they were listed from (one, unless versions were mixed): the
        table, the files' positions, and their rows in it."""
        groups: dict[int, tuple[pa.Table, list[int], list[int]]] = {}
        for i, found in enumerate(self.rows):
            if found is not None:
                group = groups.setdefault(id(found.actions), (found.actions, [], []))
                group[1].append(i)
                group[2].append(found.row)
        return [
            (actions, np.array(files, dtype=np.int64), pa.array(rows, pa.int64()))
            for actions, files, rows in groups.values()
        ]


def _bounds(values: pa.ChunkedArray | pa.Array, column: ColumnRef, side: str, arrow_type: pa.DataType) -> pa.Array:
    """One side's logged bounds as true bounds of the column's physical domain (see the module docstring)."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    unknown = pa.nulls(len(values), arrow_type)
    kind = column.type
    if isinstance(kind, (DecimalType, BinaryType)):
        return unknown
    try:
        if isinstance(kind, (TimestampType, TimestamptzType)):
            micros = values.cast(pa.timestamp("us")).cast(pa.int64()) if pa.types.is_timestamp(values.type) else None
            if micros is None:
                return unknown
            slack = pa.scalar(-TIMESTAMP_SLACK_US if side == "min" else TIMESTAMP_SLACK_US, pa.int64())
            return pc.add_checked(micros, slack)
        if pa.types.is_date(values.type):
            return values.cast(pa.date32()).cast(pa.int32()).cast(arrow_type)
        cast = values.cast(arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return unknown
    if pa.types.is_floating(arrow_type):
        return pc.if_else(pc.fill_null(pc.is_nan(cast), False), pa.scalar(None, arrow_type), cast)
    if pa.types.is_large_string(arrow_type) and side == "max":
        cut = pc.greater_equal(pc.utf8_length(cast), pa.scalar(STRING_PREFIX, pa.int64()))
        return pc.if_else(pc.fill_null(cut, False), pa.scalar(None, arrow_type), cast)
    return cast
