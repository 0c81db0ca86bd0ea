"""Canonical keys: one text form per value of a column's physical domain, shared by the build and the lookup.

Bloom filters and NDV sketches hash values, so a stored value and a query literal must become the same key whatever
type the file or the literal arrived in. Keys are built in the physical domain of column_stats (the binder already
turns `int_col = 5.0` into 5 and `int_col = '5'` into "unused"), one form per domain:

    int, long, date, time, timestamp[tz] -> decimal text of the int64 (days or microseconds; UTC for timestamptz)
    float, double -> repr() of the float64, with -0.0 as 0.0 (SQL: -0.0 = 0.0); NaN has no key (never hashed)
    decimal(p, s) -> decimal text of the unscaled integer at the table's scale (1.5 and 1.50 alike)
    string -> the string itself (code points, no Unicode normalisation: SQL `=` compares code points)
    binary -> lower-case hex            boolean -> "true" / "false"

Nanosecond timestamps that are not whole microseconds get two keys (floor and ceiling), so an engine that truncates
and one that rounds both find theirs. A file whose temporal zone-ness differs from the table, or a decimal that cannot
be cast to the table's scale, gets no keys (no Bloom, no sketch): the lookup keeps it.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    StringType,
)

from indexlib.statistics.column_stats import INTEGRAL_TYPES, supports_bounds
from indexlib.statistics.temporal import physical_range


def has_keys(iceberg_type: IcebergType) -> bool:
    """Keys exist for exactly the types that have bounds."""
    return supports_bounds(iceberg_type)


def distinct_keys(values: pa.Array, iceberg_type: IcebergType) -> list[str] | None:
    """Sorted canonical keys of the distinct non-null, non-NaN values; None when the values cannot be keyed."""
    if not has_keys(iceberg_type):
        return None
    values = values.drop_null()
    if isinstance(iceberg_type, INTEGRAL_TYPES):
        integers = _as_int64(values, iceberg_type)
        if integers is None:
            return None
        return [str(v) for v in np.unique(integers).tolist()]
    if isinstance(iceberg_type, (FloatType, DoubleType)):
        floats = values.cast(pa.float64()).to_numpy(zero_copy_only=False)
        floats = floats[~np.isnan(floats)] + 0.0  # -0.0 + 0.0 == +0.0
        return [repr(v) for v in np.unique(floats).tolist()]
    if isinstance(iceberg_type, DecimalType):
        try:
            decimals = values.cast(pa.decimal128(iceberg_type.precision, iceberg_type.scale))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        distinct = pc.unique(decimals)
        if iceberg_type.precision <= 18:  # the unscaled value fits int64: drop the point and parse, vectorised
            digits = pc.replace_substring(distinct.cast(pa.string()), pattern=".", replacement="")
            return sorted(str(v) for v in digits.cast(pa.int64()).to_pylist())
        return sorted({str(int(d.scaleb(iceberg_type.scale))) for d in distinct.to_pylist()})
    if isinstance(iceberg_type, StringType):
        return sorted(pc.unique(values.cast(pa.large_string())).to_pylist())
    if isinstance(iceberg_type, BinaryType):
        return sorted(b.hex() for b in pc.unique(values.cast(pa.large_binary())).to_pylist())
    return sorted({"true" if v else "false" for v in pc.unique(values).to_pylist()})  # boolean


def literal_key(iceberg_type: IcebergType, value: Any) -> str | None:
    """The key of a bound literal (a value of the column's physical domain); None when it has none (NaN)."""
    if isinstance(iceberg_type, BooleanType):
        return "true" if value else "false"
    if isinstance(iceberg_type, INTEGRAL_TYPES):
        return str(int(value))
    if isinstance(iceberg_type, (FloatType, DoubleType)):
        number = float(value)
        return None if math.isnan(number) else repr(number + 0.0)
    if isinstance(iceberg_type, DecimalType):
        return _unscaled(Decimal(value), iceberg_type.scale)  # None when it has more digits than the scale
    if isinstance(iceberg_type, StringType):
        return str(value)
    if isinstance(iceberg_type, BinaryType):
        return bytes(value).hex()
    return None


def _unscaled(value: Decimal, scale: int) -> str | None:
    """1.5 at scale 2 -> "150". The binder already makes `= 1.005` on a scale-2 column FALSE; None keeps it safe."""
    unscaled = value.scaleb(scale)
    return str(int(unscaled)) if unscaled == unscaled.to_integral_value() else None


def _as_int64(values: pa.Array, iceberg_type: IcebergType) -> np.ndarray | None:
    """Plain integers as int64; days / microseconds of temporal values, both neighbours where a value is not a whole
    unit (temporal.py)."""
    if pa.types.is_integer(values.type):
        return values.cast(pa.int64()).to_numpy(zero_copy_only=False)
    converted = physical_range(values, iceberg_type)
    if converted is None:
        return None
    floor, ceiling = converted
    return floor if np.array_equal(floor, ceiling) else np.concatenate([floor, ceiling])
