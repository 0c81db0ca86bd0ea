"""The one conversion of a file's date/time values into the column's physical unit (days since the epoch for
dates, microseconds for time and timestamps), shared by bounds (column_stats) and keys (canonical): they must agree,
or a Bloom probe would look for a key the bounds place elsewhere.

A value that is not a whole unit (nanoseconds, a date64 that is not midnight) has a floor and a ceiling: bounds take
the floor of the minimum and the ceiling of the maximum (looser, never tighter), keys take both, so an engine that
truncates and one that rounds both find theirs. A timestamp whose zone-ness differs from the table's column
(`timestamp` vs `timestamptz`) is read by the table in another sense: no value is right, so there is none.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyiceberg.types import IcebergType, TimestamptzType

UNIT_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
MILLIS_PER_DAY = 86_400_000
MICROS_PER_DAY = 86_400_000_000


def physical_range(values: pa.Array, iceberg_type: IcebergType) -> tuple[np.ndarray, np.ndarray] | None:
    """(floor, ceiling) of each non-null date/time/timestamp value in the physical unit as int64 arrays (equal where
    the value is a whole unit); None when the values cannot be read as the table's type (see module docstring)."""
    arrow_type = values.type
    if pa.types.is_date32(arrow_type):
        days = values.cast(pa.int32()).cast(pa.int64()).to_numpy(zero_copy_only=False)
        return days, days
    if pa.types.is_date64(arrow_type):
        millis = values.cast(pa.int64()).to_numpy(zero_copy_only=False)
        return millis // MILLIS_PER_DAY, -(-millis // MILLIS_PER_DAY)
    if not (pa.types.is_timestamp(arrow_type) or pa.types.is_time(arrow_type)):
        return None
    if pa.types.is_timestamp(arrow_type) and (arrow_type.tz is not None) != isinstance(iceberg_type, TimestamptzType):
        return None
    raw = values.cast(pa.int64()).to_numpy(zero_copy_only=False)
    per_second = UNIT_PER_SECOND[arrow_type.unit]
    if per_second >= 1_000_000:
        factor = per_second // 1_000_000
        return (raw // factor, -(-raw // factor)) if factor > 1 else (raw, raw)
    micros = raw * (1_000_000 // per_second)
    return micros, micros
