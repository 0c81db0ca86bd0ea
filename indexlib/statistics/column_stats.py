"""Per-file column statistics: value, null and NaN counts, and lower/upper bounds of one column.

Bounds are stored in Iceberg's single-value binary serialisation (the format of `lower_bounds` in Iceberg
manifests), tagged with the Iceberg type they were written for, and decoded into one "physical" domain per
type so that the pruning code compares like with like:

    boolean -> bool     int, long, date, time, timestamp[tz] -> int64 (days, micros)     float, double -> float64
    decimal(p, s) -> decimal128(p, s)     string -> large_string (UTF-8 byte order)     binary -> large_binary

Safety: a lower bound is <= every non-null, non-NaN value of the column in the file and an upper bound is >=
every one. Bounds may be looser than the true min/max (long strings are truncated, nanosecond timestamps are
floored/ceiled to microseconds), never tighter. NaN never enters a bound; it is counted in `nan_count`.
A type this module does not know gets counts but no bounds, which the lookup reads as "unknown".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.conversions import from_bytes, to_bytes
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
)
from pyiceberg.utils.decimal import decimal_required_bytes
from pyiceberg.utils.truncate import truncate_upper_bound_binary_string, truncate_upper_bound_text_string

from indexlib.statistics.distinct import sorted_distinct
from indexlib.statistics.temporal import physical_range

if TYPE_CHECKING:
    from decimal import Decimal

# Longer string/binary bounds are truncated (lower: prefix; upper: prefix with its last character incremented).
MAX_BOUND_LENGTH = 256

INTEGRAL_TYPES = (IntegerType, LongType, DateType, TimeType, TimestampType, TimestamptzType)
_FLOATING = (FloatType, DoubleType)
_BOUNDED = (BooleanType, *INTEGRAL_TYPES, *_FLOATING, DecimalType, StringType, BinaryType)


@dataclass(frozen=True)
class ColumnStats:
    field_id: int
    name: str
    type: str  # str(IcebergType) the bounds were serialised for
    value_count: int
    null_count: int
    nan_count: int | None  # None for non-floating columns
    lower: bytes | None
    upper: bytes | None
    distinct_count: int | None = None  # exact, over non-null non-NaN values; None where the type has no keys
    ndv_sketch: bytes | None = None  # HLL sketch of the same values (sketches.py)
    indexes: tuple[dict[str, Any], ...] = ()  # {"kind", "version", "payload"} per index kind built (index_kinds/)
    # the same per Parquet row group of the file (counts, bounds, indexes), when row-group entries are built
    row_groups: tuple[ColumnStats, ...] | None = None
    # the column's distinct key hashes (sorted int64), when it is in the table's global key index (store/key_rows.py)
    key_hashes: np.ndarray | None = field(default=None, compare=False)


def supports_bounds(iceberg_type: IcebergType) -> TypeGuard[PrimitiveType]:
    return isinstance(iceberg_type, _BOUNDED)


def physical_arrow_type(iceberg_type: IcebergType) -> pa.DataType:
    """The Arrow type that bounds of `iceberg_type` are compared in (see module docstring)."""
    if isinstance(iceberg_type, BooleanType):
        return pa.bool_()
    if isinstance(iceberg_type, INTEGRAL_TYPES):
        return pa.int64()
    if isinstance(iceberg_type, _FLOATING):
        return pa.float64()
    if isinstance(iceberg_type, DecimalType):
        return pa.decimal128(iceberg_type.precision, iceberg_type.scale)
    if isinstance(iceberg_type, StringType):
        return pa.large_string()
    if isinstance(iceberg_type, BinaryType):
        return pa.large_binary()
    raise TypeError(f"no bounds for type {iceberg_type}")


def _temporal_min_max(values: pa.Array, iceberg_type: IcebergType) -> tuple[int, int] | None:
    """Min/max of a date/time/timestamp array as days or micros: min floored, max ceiled on unit changes."""
    converted = physical_range(values, iceberg_type)
    if converted is None:
        return None
    floor, ceiling = converted
    return int(floor.min()), int(ceiling.max())


def _truncated_bounds(low: Any, high: Any, iceberg_type: PrimitiveType) -> tuple[bytes | None, bytes | None]:
    if isinstance(iceberg_type, StringType):
        lower = low[:MAX_BOUND_LENGTH]
        upper: str | bytes | None = truncate_upper_bound_text_string(high, MAX_BOUND_LENGTH)
        try:  # incrementing a character can land on a surrogate, which UTF-8 cannot encode: then no bound
            return to_bytes(iceberg_type, lower), to_bytes(iceberg_type, upper) if upper is not None else None
        except UnicodeEncodeError:
            return to_bytes(iceberg_type, lower), None
    upper = truncate_upper_bound_binary_string(high, MAX_BOUND_LENGTH)
    return to_bytes(iceberg_type, low[:MAX_BOUND_LENGTH]), to_bytes(iceberg_type, upper) if upper is not None else None


def _bounds(values: pa.Array, iceberg_type: PrimitiveType) -> tuple[bytes | None, bytes | None]:
    """Serialised bounds over `values`, which hold no nulls and no NaNs and are not empty."""
    if isinstance(iceberg_type, (DateType, TimeType, TimestampType, TimestamptzType)):
        extremes = _temporal_min_max(values, iceberg_type)
        if extremes is None:
            return None, None
        return to_bytes(iceberg_type, extremes[0]), to_bytes(iceberg_type, extremes[1])
    if pa.types.is_string(values.type) or pa.types.is_string_view(values.type):
        values = values.cast(pa.large_string())  # min_max is not implemented for string_view
    elif pa.types.is_binary(values.type) or pa.types.is_binary_view(values.type):
        values = values.cast(pa.large_binary())
    extremes = pc.min_max(values)
    low, high = extremes["min"].as_py(), extremes["max"].as_py()
    if isinstance(iceberg_type, (StringType, BinaryType)):
        return _truncated_bounds(low, high, iceberg_type)
    try:
        return to_bytes(iceberg_type, low), to_bytes(iceberg_type, high)
    except ValueError:  # e.g. a file decimal whose scale is not the table's: no usable bound
        return None, None


class ColumnSummary:
    """One column of a file read batch by batch: its counts, and its distinct values (a NULL and a NaN once each).

    Every other statistic of the column (bounds, distinct keys, sketches, index payloads) is a function of the set
    of its values, so computing them from the distinct values gives what the whole column would: memory grows with
    a batch and the distinct values, not with the file.

    A numeric column whose first batch is mostly distinct values (more than half: ids, measurements, timestamps)
    keeps its later batches as they come, without Arrow's hash-based unique: their values are about as many as
    their distinct ones, and the merge (`_merged_distinct`) sorts them into distinct values anyway. That saves a
    hash table per batch (0.2 s for a 2.5-million-row file's three such columns) for at most twice the memory.
    """

    def __init__(self, arrow_type: pa.DataType) -> None:
        self.arrow_type = _computable(arrow_type)
        self.rows = self.nulls = self.nans = 0
        self._distinct: list[pa.Array] = []
        self._mostly_distinct = False

    def add(self, chunk: pa.Array, iceberg_type: IcebergType) -> None:
        chunk = chunk.cast(self.arrow_type) if chunk.type != self.arrow_type else chunk
        self.rows += len(chunk)
        self.nulls += chunk.null_count
        if isinstance(iceberg_type, _FLOATING):
            self.nans += int(pc.sum(pc.is_nan(chunk.drop_null())).as_py() or 0)
        if self._mostly_distinct:
            self._distinct.append(chunk)
            return
        distinct = pc.unique(chunk)
        self._mostly_distinct = _merged_by_sorting(self.arrow_type) and 2 * len(distinct) > len(chunk)
        self._distinct.append(distinct)

    def absorb(self, part: ColumnSummary) -> None:
        """Add what `part` summarised (the same column of a later row group): the file is the union of its parts."""
        self.rows += part.rows
        self.nulls += part.nulls
        self.nans += part.nans
        self._distinct.append(part.distinct().cast(self.arrow_type))

    def distinct(self) -> pa.Array:
        if len(self._distinct) != 1:  # merged once, then kept merged
            self._distinct = [_merged_distinct(self._distinct, self.arrow_type)]
        return self._distinct[0]

    def statistics(self, field_id: int, name: str, iceberg_type: IcebergType) -> ColumnStats:
        """`compute_column_stats` of the whole column, from its distinct values and the counts."""
        stats = compute_column_stats(field_id, name, iceberg_type, self.distinct())
        nans = self.nans if stats.nan_count is not None else None
        return replace(stats, value_count=self.rows, null_count=self.nulls, nan_count=nans)


def _merged_distinct(parts: list[pa.Array], arrow_type: pa.DataType) -> pa.Array:
    """The distinct values of all `parts`. Numbers merge by sorting in numpy, which needs a few copies of the values;
    Arrow's hash-based unique needs ~10x their bytes (12 million distinct doubles: ~0.3 GB against ~1 GB). They come
    out sorted (floats by bit pattern), not in order of first occurrence as Arrow's unique gives them: nothing
    after depends on the order but the bounds of 0.0 and -0.0 (`_zeros_as_first_seen`)."""
    if not parts:
        return pa.array([], arrow_type)
    if not _merged_by_sorting(arrow_type):
        return pc.unique(pa.concat_arrays(parts))
    has_null = any(part.null_count for part in parts)
    values = np.concatenate([part.drop_null().to_numpy(zero_copy_only=False) for part in parts])
    if pa.types.is_floating(arrow_type):  # by bit pattern, as Arrow does: -0.0 and 0.0 stay two values
        keyed = values.view(np.dtype(f"i{values.dtype.itemsize}"))
        values = _zeros_as_first_seen(keyed, sorted_distinct(keyed)).view(values.dtype)
    else:
        values = sorted_distinct(values)
    merged = pa.array(values, type=arrow_type)
    return pa.concat_arrays([merged, pa.nulls(1, arrow_type)]) if has_null else merged


def _merged_by_sorting(arrow_type: pa.DataType) -> bool:
    """Whether `_merged_distinct` merges values of `arrow_type` by sorting them in numpy (numbers, dates, times)."""
    types = pa.types
    numeric = types.is_integer(arrow_type) or arrow_type in (pa.float32(), pa.float64())
    return numeric or types.is_date(arrow_type) or types.is_timestamp(arrow_type) or types.is_time(arrow_type)


def _zeros_as_first_seen(keyed: np.ndarray, distinct: np.ndarray) -> np.ndarray:
    """`distinct` (sorted bit patterns of floats) with 0.0 and -0.0, when both occur, in the order `keyed` (the
    values as they came) first holds them: min_max of the two returns whichever comes first, so the bounds stay
    the bytes the whole column gives. Every other statistic is a function of the set of values."""
    negative = np.iinfo(keyed.dtype).min  # -0.0's bit pattern: the least, so sorted first
    if not len(distinct) or distinct[0] != negative:
        return distinct
    zero = int(np.searchsorted(distinct, 0))
    if zero == len(distinct) or distinct[zero] != 0:
        return distinct
    if np.argmax(keyed == 0) < np.argmax(keyed == negative):
        distinct = distinct.copy()
        distinct[0], distinct[zero] = 0, negative
    return distinct


def _computable(arrow_type: pa.DataType) -> pa.DataType:
    """View types (e.g. Delta OPTIMIZE output) as their plain large types: few compute kernels take views."""
    if pa.types.is_string_view(arrow_type):
        return pa.large_string()
    if pa.types.is_binary_view(arrow_type):
        return pa.large_binary()
    return arrow_type


def compute_column_stats(
    field_id: int, name: str, iceberg_type: IcebergType, column: pa.ChunkedArray | pa.Array
) -> ColumnStats:
    """Statistics of one column of one file, in the table's type `iceberg_type`."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    null_count = values.null_count
    nan_count: int | None = None
    non_null = values.drop_null()
    if isinstance(iceberg_type, _FLOATING):
        is_nan = pc.is_nan(non_null)
        nan_count = int(pc.sum(is_nan).as_py() or 0)
        non_null = non_null.filter(pc.invert(is_nan))
    lower = upper = None
    if len(non_null) and supports_bounds(iceberg_type):
        lower, upper = _bounds(non_null, iceberg_type)
    return ColumnStats(
        field_id=field_id,
        name=name,
        type=str(iceberg_type),
        value_count=len(values),
        null_count=null_count,
        nan_count=nan_count,
        lower=lower,
        upper=upper,
    )


def parse_type(type_string: str) -> PrimitiveType:
    """The Iceberg type named by `str(iceberg_type)`, as stored with each bound."""
    # pydantic's model_validator wraps the classmethod in a descriptor whose type mypy cannot call
    return IcebergType.handle_primitive_type(type_string, None)  # type: ignore[operator]


_FIXED_WIDTH = {  # Iceberg single-value serialisation of fixed-width types: little-endian
    IntegerType: "<i4",
    DateType: "<i4",
    LongType: "<i8",
    TimeType: "<i8",
    TimestampType: "<i8",
    TimestamptzType: "<i8",
    FloatType: "<f4",
    DoubleType: "<f8",
}


def decode_bounds(stored_type: PrimitiveType, current_type: IcebergType, payloads: pa.Array) -> pa.Array:
    """`decode_bound` over an array of payloads (null where unknown), vectorised for the common types.

    Raises (ValueError, struct.error or pyarrow.ArrowInvalid) when any payload is malformed; the caller decides
    what that means for which file (store/entries.py: that file's bounds are unknown).
    """
    target = physical_arrow_type(current_type)
    if not same_domain(stored_type, current_type):
        return pa.nulls(len(payloads), target)
    width = _FIXED_WIDTH.get(type(stored_type))
    if width is not None:
        present = payloads.is_valid().to_numpy(zero_copy_only=False)
        sizes = pc.binary_length(payloads).to_numpy(zero_copy_only=False)
        if not np.all(sizes[present] == np.dtype(width).itemsize):
            wrong = sorted({int(size) for size in sizes[present]} - {np.dtype(width).itemsize})
            raise ValueError(f"{stored_type} bound of {wrong[0]} bytes (expected {np.dtype(width).itemsize})")
        joined = b"".join(payloads.filter(payloads.is_valid()).to_pylist())
        values = np.zeros(len(payloads), dtype=np.dtype(width).newbyteorder("="))
        values[present] = np.frombuffer(joined, dtype=width)
        return pa.array(values, mask=~present).cast(target)
    if isinstance(stored_type, StringType):
        return payloads.cast(pa.large_binary()).cast(pa.large_string())  # raises ArrowInvalid on invalid UTF-8
    if isinstance(stored_type, BinaryType):
        return payloads.cast(pa.large_binary())
    return pa.array([decode_bound(stored_type, current_type, p) for p in payloads.to_pylist()], type=target)


def same_domain(stored_type: PrimitiveType, current_type: IcebergType) -> bool:
    """Values written for `stored_type` read unchanged as `current_type` (a type promotion such as int -> long,
    float -> double, or decimal precision widening at the same scale)."""
    if not supports_bounds(current_type) or not supports_bounds(stored_type):
        return False
    if isinstance(stored_type, DecimalType) or isinstance(current_type, DecimalType):
        return (
            isinstance(stored_type, DecimalType)
            and isinstance(current_type, DecimalType)
            and stored_type.scale == current_type.scale
        )
    return physical_arrow_type(stored_type) == physical_arrow_type(current_type)


def decode_bound(stored_type: PrimitiveType, current_type: IcebergType, payload: bytes | None) -> Any:
    """A stored bound as a value of `current_type`'s physical domain, or None when it cannot be used.

    Bounds written before a type promotion (int -> long, float -> double, decimal precision widening) stay valid;
    any other type change makes them unknown.

    Raises ValueError (or struct.error) when `payload` is not a value of `stored_type` (the wrong length, not UTF-8,
    a decimal outside its precision).
    """
    if payload is None or not same_domain(stored_type, current_type):
        return None
    if isinstance(stored_type, BooleanType) and payload not in (b"\x00", b"\x01"):
        raise ValueError(f"boolean bound {payload!r} is not 0x00 or 0x01")
    if isinstance(stored_type, DecimalType):
        if not 0 < len(payload) <= decimal_required_bytes(stored_type.precision):
            raise ValueError(f"{stored_type} bound of {len(payload)} bytes")
        # pyiceberg's from_bytes returns a type variable mypy resolves to str; of a DecimalType, it is a Decimal
        value: Decimal = from_bytes(stored_type, payload)  # type: ignore[assignment]
        if len(value.as_tuple().digits) > stored_type.precision:
            raise ValueError(f"{stored_type} bound {value} has more than {stored_type.precision} digits")
        return value
    return from_bytes(stored_type, payload)
