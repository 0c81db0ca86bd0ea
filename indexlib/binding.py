"""Bind a normalised predicate to a table schema: resolve columns, coerce literals into the column's domain.

Coercion never changes which rows are TRUE, or, where it cannot be exact, only widens the set and wraps the leaf
in `Widened` (then it may prune but never proves "all rows match"). Literals the binder cannot relate to the
column's values safely make that leaf `Unusable` (kept, and reported by explain), never a wrong answer:

* int/long/decimal columns hold discrete values: `c < 5.5` is exactly `c <= 5`, `c = 5.5` is
  FALSE, `c != 5.5` is `c IS NOT NULL`; a literal beyond the type's range folds the same way.
* float columns: engines disagree on whether `f = 0.1` compares in float or double; the leaf is widened to the
  float neighbours of the literal so both readings are covered.
* a zone-less timestamp literal against a `timestamptz` column (or a zoned one against `timestamp`) depends on
  the session time zone, unknown here: widened by 14 hours either way.
* a string column against a number (or a number column against a non-numeric string) depends on the engine's
  implicit cast: unusable.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import numpy as np
from pyiceberg.schema import Schema
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
    StringType,
    TimestampType,
    TimestamptzType,
)

from indexlib.column_stats import physical_arrow_type, supports_bounds
from indexlib.errors import UserError
from indexlib.predicate import FALSE, And, Compare, Const, Expr, In, IsNull, Or, Unusable, and_, or_

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MAX_ZONE_OFFSET_MICROS = 14 * 3600 * 1_000_000
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class BoundColumn:
    field_id: int
    name: str
    type: IcebergType


@dataclass(frozen=True)
class BoundCompare(Expr):
    """`column op value` with `value` in the column's physical domain (see column_stats)."""

    op: str
    column: BoundColumn
    value: Any

    def __str__(self) -> str:
        return str(Compare(self.op, self.column.name, self.value))


@dataclass(frozen=True)
class Widened(Expr):
    """A superset of the rows the original leaf matches: may prune, never proves "all rows match"."""

    child: Expr

    def __str__(self) -> str:
        return f"widened{self.child}"


def resolve_column(schema: Schema, name: str, table: str) -> BoundColumn:
    """Exact name first, then a unique case-insensitive match (SQL identifiers are case-insensitive)."""
    field = next((f for f in schema.fields if f.name == name), None)
    if field is None:
        matches = [f for f in schema.fields if f.name.lower() == name.lower()]
        if len(matches) != 1:
            raise UserError(f"unknown column {name!r} in table {table}")
        field = matches[0]
    return BoundColumn(field.field_id, field.name, field.field_type)


def bind(expr: Expr, schema: Schema, table: str) -> Expr:
    """Bind a normalised (NOT-free, NULL-free) expression; IN / NOT IN expand into OR / AND of comparisons."""
    if isinstance(expr, And):
        return and_(bind(expr.left, schema, table), bind(expr.right, schema, table))
    if isinstance(expr, Or):
        return or_(bind(expr.left, schema, table), bind(expr.right, schema, table))
    if isinstance(expr, (Const, Unusable)):
        return expr
    if isinstance(expr, IsNull):
        return IsNull(resolve_column(schema, expr.column, table), expr.negated)
    if isinstance(expr, In):
        column = resolve_column(schema, expr.column, table)
        leaves = [_bind_compare("!=" if expr.negated else "=", column, v, expr) for v in expr.values]
        return and_(*leaves) if expr.negated else or_(*leaves)
    if isinstance(expr, Compare):
        return _bind_compare(expr.op, resolve_column(schema, expr.column, table), expr.value, expr)
    raise TypeError(f"cannot bind {expr!r}")


def _bind_compare(op: str, column: BoundColumn, value: Any, source: Expr) -> Expr:
    if not supports_bounds(column.type):
        return Unusable(str(source), f"column {column.name} has type {column.type}, which has no statistics")
    try:
        return _coerce(op, column, value)
    except _CannotCoerce as exc:
        return Unusable(str(source), str(exc))


class _CannotCoerce(Exception):
    pass


def _coerce(op: str, column: BoundColumn, value: Any) -> Expr:
    ctype = column.type
    if isinstance(ctype, BooleanType):
        if not isinstance(value, bool):
            raise _CannotCoerce(f"{column.name} is boolean but the literal is {type(value).__name__}")
        return BoundCompare(op, column, value)
    if isinstance(ctype, StringType):
        if not isinstance(value, str):
            raise _CannotCoerce(
                f"{column.name} is a string column compared with a non-string literal (implicit casts differ by engine)"
            )
        return BoundCompare(op, column, value)
    if isinstance(ctype, BinaryType):
        value = value.encode() if isinstance(value, str) else value
        if not isinstance(value, bytes):
            raise _CannotCoerce(f"{column.name} is binary but the literal is {type(value).__name__}")
        return BoundCompare(op, column, value)
    if isinstance(ctype, DoubleType):  # engines convert the literal to double: that is the comparison
        return BoundCompare(op, column, float(_as_number(value, column)))
    if isinstance(ctype, FloatType):
        return _coerce_float32(op, column, float(_as_number(value, column)))
    if isinstance(ctype, (IntegerType, LongType)):
        return _coerce_discrete(op, column, _as_number(value, column), 0, _INT64)
    if isinstance(ctype, DecimalType):
        largest = Fraction(10**ctype.precision - 1, 10**ctype.scale)
        return _coerce_discrete(op, column, _as_number(value, column), ctype.scale, (-largest, largest))
    if isinstance(ctype, DateType):
        return BoundCompare(op, column, _as_days(value, column))
    if isinstance(ctype, (TimestampType, TimestamptzType)):
        micros, zone_matches = _as_micros(value, column, isinstance(ctype, TimestamptzType))
        if zone_matches:
            return BoundCompare(op, column, micros)
        return _widen(op, column, micros - _MAX_ZONE_OFFSET_MICROS, micros + _MAX_ZONE_OFFSET_MICROS)
    raise _CannotCoerce(f"column {column.name} of type {ctype} is not supported")


def _widen(op: str, column: BoundColumn, low: Any, high: Any) -> Expr:
    """A superset of the rows matching `column op v` for every reading v of the literal in [low, high]."""
    if op == "=":
        return Widened(and_(BoundCompare(">=", column, low), BoundCompare("<=", column, high)))
    if op == "!=":
        return Widened(IsNull(column, negated=True))
    if op in ("<", "<="):
        return Widened(BoundCompare("<=", column, high))
    return Widened(BoundCompare(">=", column, low))


def _as_number(value: Any, column: BoundColumn) -> Fraction:
    """Exact rational value of a numeric literal; NaN and infinities are refused."""
    if isinstance(value, bool):
        raise _CannotCoerce(f"{column.name} is numeric but the literal is boolean")
    if isinstance(value, str):  # engines cast a string literal to the numeric column's type
        try:
            value = Decimal(value.strip())
        except InvalidOperation:
            raise _CannotCoerce(f"{column.name} is numeric but {value!r} is not a number") from None
    if isinstance(value, (float, Decimal)) and not math.isfinite(value):
        raise _CannotCoerce(f"comparison of {column.name} with {value} (NaN/infinity semantics differ by engine)")
    if isinstance(value, (int, float, Decimal)):
        return Fraction(value)
    raise _CannotCoerce(f"{column.name} is numeric but the literal is {type(value).__name__}")


def _coerce_discrete(op: str, column: BoundColumn, value: Fraction, scale: int, value_range: tuple) -> Expr:
    """`column op value` for a column holding multiples of 10**-scale within `value_range`: exact."""
    unit = Fraction(1, 10**scale)

    def physical(f: Fraction) -> Any:
        units = int(f / unit)
        return (
            units if scale == 0 and isinstance(column.type, (IntegerType, LongType)) else Decimal(units).scaleb(-scale)
        )

    low, high = value_range
    not_null = IsNull(column, negated=True)
    if value > high:
        return not_null if op in ("<", "<=", "!=") else FALSE
    if value < low:
        return not_null if op in (">", ">=", "!=") else FALSE
    floor, ceil = math.floor(value / unit) * unit, math.ceil(value / unit) * unit
    if floor == ceil:
        return BoundCompare(op, column, physical(value))
    # strictly between two representable values: no value equals it
    return {
        "=": FALSE,
        "!=": not_null,
        "<": BoundCompare("<=", column, physical(floor)),
        "<=": BoundCompare("<=", column, physical(floor)),
        ">": BoundCompare(">=", column, physical(ceil)),
        ">=": BoundCompare(">=", column, physical(ceil)),
    }[op]


def _coerce_float32(op: str, column: BoundColumn, value: float) -> Expr:
    with np.errstate(over="ignore"):
        rounded = np.float32(value)
    if not np.isfinite(rounded):
        raise _CannotCoerce(f"{value} is outside the range of float column {column.name}")
    if float(rounded) == value:
        return BoundCompare(op, column, value)
    toward = np.nextafter(rounded, np.float32(np.inf if value > rounded else -np.inf), dtype=np.float32)
    low, high = sorted((float(rounded), float(toward)))
    return _widen(op, column, low, high)


def _as_days(value: Any, column: BoundColumn) -> int:
    if isinstance(value, str):
        try:
            value = dt.date.fromisoformat(value.strip())
        except ValueError:
            raise _CannotCoerce(f"{column.name} is a date but {value!r} is not a date literal") from None
    if isinstance(value, dt.datetime):
        raise _CannotCoerce(f"{column.name} is a date compared with a timestamp literal (not supported yet)")
    if isinstance(value, dt.date):
        return (value - _EPOCH_DATE).days
    raise _CannotCoerce(f"{column.name} is a date but the literal is {type(value).__name__}")


def _as_micros(value: Any, column: BoundColumn, column_has_zone: bool) -> tuple[int, bool]:
    """(micros since epoch, whether the literal's zone-ness matches the column's)."""
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise _CannotCoerce(f"{column.name} is a timestamp but {value!r} is not a timestamp literal") from None
    elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    if not isinstance(value, dt.datetime):
        raise _CannotCoerce(f"{column.name} is a timestamp but the literal is {type(value).__name__}")
    has_zone = value.tzinfo is not None
    delta = value - (_EPOCH_TZ if has_zone else _EPOCH)
    return delta // dt.timedelta(microseconds=1), has_zone == column_has_zone


def literal_scalar(leaf: BoundCompare) -> Any:
    """The leaf's value as an Arrow scalar of the column's physical type."""
    import pyarrow as pa

    return pa.scalar(leaf.value, type=physical_arrow_type(leaf.column.type))
