"""Canonical keys: one text form per value of a column's physical domain, shared by the build and the lookup.

Bloom filters and NDV sketches hash values, so a stored value and a query literal must become the same key whatever
type the file or the literal arrived in. Keys are built in the physical domain of column_stats (the binder already
turns `int_col = 5.0` into 5 and `int_col = '5'` into "unused"), one form per domain:

    int, long, date, time, timestamp[tz] -> decimal text of the int64 (days or microseconds; UTC for timestamptz)
    float, double -> repr() of the float64, with -0.0 as 0.0 (SQL: -0.0 = 0.0); NaN has no key (never hashed)
    decimal(p, s) -> decimal text of the unscaled integer at the table's scale (1.5 and 1.50 alike)
    string -> the string itself (code points, no Unicode normalisation: SQL `=` compares code points)
    binary -> lower-case hex            boolean -> "true" / "false"

Hashed keys (Bloom filters, version 2) hash the same values' bytes with XXH64 instead of their text: 8 little-endian
bytes of the int64 (integral, boolean 0/1, and decimal unscaled integers that fit) or of the float64 (-0.0 as 0.0),
and the bytes of strings (UTF-8), binary values and wider decimals (their text). For long, timestamp (micros),
double, string and binary columns that is what Parquet hashes into its own Bloom filters. The choice depends on the
value, never on the declared type, so a filter written before a type promotion (int -> long, decimal widening) still
finds its values.

Nanosecond timestamps that are not whole microseconds get two keys (floor and ceiling), so an engine that truncates
and one that rounds both find theirs. A file whose temporal zone-ness differs from the table, or a decimal that cannot
be cast to the table's scale, gets no keys (no Bloom, no sketch): the lookup keeps it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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
from indexlib.statistics.distinct import sorted_distinct
from indexlib.statistics.float_text import float_text_array
from indexlib.statistics.temporal import physical_range
from indexlib.statistics.xxhash64 import hash_binary, hash_words


def has_keys(iceberg_type: IcebergType) -> bool:
    """Keys exist for exactly the types that have bounds."""
    return supports_bounds(iceberg_type)


@dataclass(frozen=True)
class Keys:
    """The distinct non-null, non-NaN values of one file's column in its physical domain, held as arrays: `numbers`
    (sorted int64 for integral, boolean and decimal columns, the unscaled integer at the table's scale; sorted
    float64 with -0.0 as 0.0 for floating columns) and `blobs` (sorted binary: UTF-8 of strings, raw binary, the
    decimal text of unscaled decimals beyond int64). Hashing them (`hashes`) needs no Python call per value; the
    text keys are made only where a consumer needs text (NDV sketches, automata), a chunk at a time."""

    iceberg_type: IcebergType
    numbers: np.ndarray
    blobs: pa.Array

    def __len__(self) -> int:
        return len(self.numbers) + len(self.blobs)

    def hashes(self) -> np.ndarray:
        """XXH64 of each value: its 8 little-endian bytes for `numbers`, its bytes for `blobs` (literal_hash)."""
        return np.concatenate([hash_words(self.numbers), hash_binary(self.blobs)])

    def integer_span(self) -> int | None:
        """max - min + 1 of integral (and unscaled decimal) values; None for other types or decimals beyond int64."""
        if self.numbers.dtype != np.int64 or len(self.blobs) or not len(self.numbers):
            return None
        return int(self.numbers[-1]) - int(self.numbers[0]) + 1

    def text_chunks(self, size: int = 65_536) -> Iterator[list[str]]:
        """The text keys, `size` at a time (a column of millions of distinct values never becomes one list)."""
        for texts in self.text_arrays(size):
            yield texts.to_pylist()

    def text_arrays(self, size: int = 65_536) -> Iterator[pa.Array]:
        """The text keys as Arrow string arrays, `size` at a time: "true" / "false" for booleans, Python's `repr`
        for doubles, the decimal text of integral values and unscaled decimals, strings as they are, binary in
        lower-case hex. Integers and strings never become Python objects."""
        for start in range(0, len(self.numbers), size):
            numbers = self.numbers[start : start + size]
            if isinstance(self.iceberg_type, BooleanType):
                yield pa.array(np.where(numbers != 0, "true", "false"), pa.string())
            elif numbers.dtype == np.float64:
                yield float_text_array(numbers)
            else:
                yield pa.array(numbers).cast(pa.string())  # the decimal text of the int64, as str()
        for start in range(0, len(self.blobs), size):
            blobs = self.blobs.slice(start, size)
            if isinstance(self.iceberg_type, BinaryType):
                yield pa.array([blob.hex() for blob in blobs.to_pylist()], pa.large_string())
            else:
                yield blobs.cast(pa.large_string())  # strings, and the decimal text of wide decimals

    def texts(self) -> list[str]:
        return [key for chunk in self.text_chunks() for key in chunk]


def distinct_keys(values: pa.Array, iceberg_type: IcebergType) -> Keys | None:
    """The keys of the distinct non-null, non-NaN values; None when the values cannot be keyed."""
    if not has_keys(iceberg_type):
        return None
    values = values.drop_null()
    if isinstance(iceberg_type, INTEGRAL_TYPES):
        integers = _as_int64(values, iceberg_type)
        return None if integers is None else _numeric(iceberg_type, sorted_distinct(integers))
    if isinstance(iceberg_type, (FloatType, DoubleType)):
        floats = values.cast(pa.float64()).to_numpy(zero_copy_only=False)
        return _numeric(iceberg_type, np.unique(floats[~np.isnan(floats)] + 0.0))  # -0.0 + 0.0 == +0.0
    if isinstance(iceberg_type, DecimalType):
        try:
            decimals = values.cast(pa.decimal128(iceberg_type.precision, iceberg_type.scale))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        distinct = pc.unique(decimals)
        if iceberg_type.precision <= 18:  # the unscaled value fits int64
            return _numeric(iceberg_type, sorted_distinct(_unscaled_int64(distinct)))
        unscaled = sorted({int(d.scaleb(iceberg_type.scale)) for d in distinct.to_pylist()})
        small = [v for v in unscaled if _INT64_MIN <= v <= _INT64_MAX]
        wide = [str(v).encode() for v in unscaled if not _INT64_MIN <= v <= _INT64_MAX]
        return Keys(iceberg_type, np.array(small, dtype=np.int64), pa.array(sorted(wide), pa.large_binary()))
    if isinstance(iceberg_type, (StringType, BinaryType)):
        distinct = pc.unique(values.cast(pa.large_binary()))  # strings as their UTF-8: byte order is code point order
        return Keys(iceberg_type, np.zeros(0, np.int64), pc.take(distinct, pc.sort_indices(distinct)))
    return _numeric(iceberg_type, sorted_distinct(values.cast(pa.int64()).to_numpy(zero_copy_only=False)))  # boolean


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _numeric(iceberg_type: IcebergType, numbers: np.ndarray) -> Keys:
    return Keys(iceberg_type, numbers, pa.array([], pa.large_binary()))


def literal_key(iceberg_type: IcebergType, value: Any) -> str | None:
    """The text key of a bound literal (a value of the column's physical domain); None when it has none (NaN)."""
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


def literal_hashes(iceberg_type: IcebergType, values: Iterable[Any]) -> np.ndarray | None:
    """The hashes `Keys.hashes` gives the values equal to these bound literals; None when one has no key (NaN)."""
    values = list(values)
    fast = _plain_hashes(iceberg_type, values)
    if fast is not None:
        return fast
    numbers: list[int | float] = []
    blobs: list[bytes] = []
    for value in values:
        key = literal_key(iceberg_type, value)
        if key is None:
            return None
        if isinstance(iceberg_type, (FloatType, DoubleType)):
            numbers.append(float(value) + 0.0)
        elif isinstance(iceberg_type, StringType):
            blobs.append(key.encode())
        elif isinstance(iceberg_type, BinaryType):
            blobs.append(bytes(value))
        elif isinstance(iceberg_type, BooleanType):
            numbers.append(1 if value else 0)
        elif _INT64_MIN <= int(key) <= _INT64_MAX:  # integral and decimal (the unscaled integer)
            numbers.append(int(key))
        else:
            blobs.append(key.encode())
    floating = isinstance(iceberg_type, (FloatType, DoubleType))
    words = np.array(numbers, dtype=np.float64 if floating else np.int64)
    return np.concatenate([hash_words(words), hash_binary(pa.array(blobs, pa.large_binary()))])


def _plain_hashes(iceberg_type: IcebergType, values: list[Any]) -> np.ndarray | None:
    """`literal_hashes` without a Python step per value, for the lists planners send (100,000s of keys): Python ints
    on an integral column (their int64, as `literal_key` reads them) and str on a string column (their UTF-8);
    None for anything else, which takes the general path."""
    if isinstance(iceberg_type, INTEGRAL_TYPES) and all(type(v) is int for v in values):
        try:
            return hash_words(np.array(values, dtype=np.int64))
        except OverflowError:
            return None
    if isinstance(iceberg_type, StringType) and all(type(v) is str for v in values):
        return hash_binary(pa.array(values, pa.large_string()))
    return None


def _unscaled_int64(decimals: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The unscaled integers of decimal128 values of precision <= 18, read from Arrow's buffer: each value is a
    little-endian two's-complement int128 whose low word is the int64 (the high word only extends its sign). Not via
    text: Arrow writes small values with many decimals in scientific notation ('0E-10', '1.00E-8')."""
    if isinstance(decimals, pa.ChunkedArray):
        decimals = decimals.combine_chunks()
    if decimals.null_count:
        decimals = decimals.drop_null()
    words = np.frombuffer(decimals.buffers()[1], dtype="<i8").reshape(-1, 2)
    return words[decimals.offset : decimals.offset + len(decimals), 0].astype(np.int64)


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
