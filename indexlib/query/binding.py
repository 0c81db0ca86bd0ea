"""Bind a normalised predicate to a table schema: resolve columns, coerce literals into the column's domain.

Coercion never changes which rows are TRUE, or, where it cannot be exact, only widens the set and wraps the leaf
in `Widened` (then it may prune but never proves "all rows match"). Literals the binder cannot relate to the
column's values safely make that leaf `Unusable` (kept, and reported by explain), never a wrong answer:

* int/long/decimal columns hold discrete values: `c < 5.5` is exactly `c <= 5`, `c = 5.5` is
  FALSE, `c != 5.5` is `c IS NOT NULL`; a literal beyond the type's range folds the same way.
* against a DOUBLE or FLOAT value the engines convert the column value to floating point first: the bound leaf is
  the interval of column values whose conversion satisfies the comparison (`_exact_against_approximate`,
  approximate.py), so `i = 9007199254740992e0` holds for 2^53 + 1.
* float columns: engines disagree on whether `f = 0.1` compares in float or double; the leaf is widened to the
  float neighbours of the literal so both readings are covered.
* a zone-less timestamp literal against a `timestamptz` column (or a zoned one against `timestamp`) depends on
  the session time zone, unknown here: widened by 14 hours either way. A `TIMESTAMP '... +05:00'` literal is an
  instant in Spark and Trino but a wall-clock time in Postgres and DuckDB: against `timestamptz` it is widened
  like a zone-less one, which covers both.
* a string column against a number (or a number column against a non-numeric string) depends on the engine's
  implicit cast: unusable.
* a date column against a timestamp compares the date's midnight: `d < TIMESTAMP '2024-01-02 06:00'` is `d <= 2024-01-02`.

Transforms become ranges on the raw column (the rewrites Trino does for date/time columns):
`CAST(ts AS DATE) op d` and `date_trunc(u, ts) op c` use the unit's floor and ceiling of c (`date_trunc('month', ts)
= c` is FALSE when c is not a month start); `year(ts) op N` is `date_trunc('year', ts) op N-01-01`; `col + k op c` is
`col op c - k` for exact types (integers, decimals, date/timestamp + day-time interval; ANSI overflow errors).
`month/day/hour(ts)` are not monotone over a year and stay `BoundField` leaves, evaluated on files whose range
lies within one year / month / day. On timestamptz columns calendar functions depend on the session zone, so the
ranges are widened like zone-less literals, and month/day/hour are unusable.
"""

from __future__ import annotations

import datetime as dt
import math
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
from pyiceberg.utils.datetime import date_to_days, datetime_to_micros, micros_to_timestamp

from indexlib.errors import UserError
from indexlib.query.approximate import DOUBLE, FLOAT, Binary, as_binary, bits_of, error_ulps, matching_set, scale_of
from indexlib.query.intervals import conjoined
from indexlib.query.model import (
    FALSE,
    TRUE,
    And,
    BoundColumn,
    BoundCompare,
    BoundField,
    BoundIn,
    Compare,
    Const,
    Expr,
    In,
    Interval,
    IsNaN,
    IsNull,
    Or,
    Pattern,
    Transform,
    Unusable,
    Widened,
    WrittenOffset,
    add_interval,
    and_,
    as_datetime,
    is_number,
    operands,
    or_,
    parse_date,
    parse_timestamp,
)
from indexlib.query.normalize import normalize
from indexlib.query.sql import Clock, parse_where
from indexlib.query.visitor import ExprVisitor
from indexlib.statistics.column_stats import supports_bounds

_MAX_ZONE_OFFSET_MICROS = 14 * 3600 * 1_000_000
_INT64 = (-(2**63), 2**63 - 1)
_INT32 = (-(2**31), 2**31 - 1)
_MAX_DECIMAL_DIGITS = 38
# integer digits engines give an int / long when they widen it to a decimal for a comparison (Spark: DECIMAL(10, 0),
# DECIMAL(20, 0))
_INTEGER_DIGITS: dict[type[IcebergType], int] = {IntegerType: 10, LongType: 20}
_DAYS = (-(2**31), 2**31 - 1)
_MICROS_PER_DAY = 86_400_000_000
_MONTH_UNITS = {"year": 12, "quarter": 3, "month": 1}
_FIXED_UNITS = {"week": 7 * _MICROS_PER_DAY, "day": _MICROS_PER_DAY, "hour": 3_600_000_000, "minute": 60_000_000}
_FIXED_UNITS["second"] = 1_000_000


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
    """Bind a normalised (NOT-free, NULL-free) expression; IN / NOT IN expand into OR / AND of comparisons, and each
    AND chain's comparisons of one column are judged as one interval (query/intervals.py)."""
    return conjoined(_Binder(schema, table).visit(expr))


class _Binder(ExprVisitor[Expr]):
    """Unbound nodes to bound ones (bound nodes and NOT are not expected: the input is normalised and unbound)."""

    def __init__(self, schema: Schema, table: str) -> None:
        self.schema, self.table = schema, table

    def column(self, name: str) -> BoundColumn:
        return resolve_column(self.schema, name, self.table)

    def visit_and(self, expr: And) -> Expr:
        return _as_sets([self.visit(part) for part in combine_calendar_fields(operands(expr, And))], "!=", True)

    def visit_or(self, expr: Or) -> Expr:
        return _as_sets([self.visit(part) for part in operands(expr, Or)], "=", False)

    def visit_const(self, expr: Const) -> Expr:
        return expr

    def visit_unusable(self, expr: Unusable) -> Expr:
        return expr

    def visit_is_null(self, expr: IsNull) -> Expr:
        return IsNull(self.column(expr.column), expr.negated)

    def visit_is_nan(self, expr: IsNaN) -> Expr:
        column = self.column(expr.column)
        if not isinstance(column.type, (FloatType, DoubleType, IntegerType, LongType, DecimalType)):
            return Unusable(str(expr), f"isnan of {column.type} column {column.name} depends on engine casts")
        return IsNaN(column, expr.negated)

    def visit_pattern(self, expr: Pattern) -> Expr:
        column = self.column(expr.column)
        if not isinstance(column.type, StringType):
            return Unusable(str(expr), f"pattern matching on {column.type} column {column.name} is not supported")
        return Pattern(expr.kind, column, expr.pattern, expr.negated, expr.escape)

    def visit_in(self, expr: In) -> Expr:
        op = "!=" if expr.negated else "="
        try:
            values = in_list_values(expr.values)
        except _CannotCoerce as exc:
            return Unusable(str(expr), str(exc))
        plain, others = _split_plain(expr.column, values, self.schema, self.table)
        leaves = [_bind_leaf(op, expr.column, v, self.schema, self.table) for v in others]
        if plain and plain[1]:  # one set leaf for them at once (gathered with the others by `_as_sets`)
            leaves.append(BoundIn(plain[0], tuple(plain[1]), expr.negated))
        return _as_sets(leaves, op, expr.negated)

    def visit_compare(self, expr: Compare) -> Expr:
        return _bind_leaf(expr.op, expr.column, expr.value, self.schema, self.table)


_PLAIN_INTEGERS: dict[type[IcebergType], tuple[int, int]] = {
    IntegerType: (-(2**31), 2**31 - 1),
    LongType: (-(2**63), 2**63 - 1),
}


def _split_plain(
    term: str | Transform, values: tuple[Any, ...], schema: Schema, table: str
) -> tuple[tuple[BoundColumn, list[Any]] | None, list[Any]]:
    """The values of an IN list that bind to themselves (str on a string column, an int within range on an int or
    long column: what `_bind_leaf` returns for them unchanged, which a test checks), and the others, which take the
    general path. Planners send IN lists of 100,000 keys; the general path costs ~50 us per value."""
    if not isinstance(term, str):
        return None, list(values)
    column = resolve_column(schema, term, table)
    if isinstance(column.type, StringType):
        plain = [v for v in values if isinstance(v, str)]
        others = [v for v in values if not isinstance(v, str)]
    elif type(column.type) in _PLAIN_INTEGERS:
        low, high = _PLAIN_INTEGERS[type(column.type)]
        fits = [type(v) is int and low <= v <= high for v in values]
        plain = [v for v, ok in zip(values, fits, strict=True) if ok]
        others = [v for v, ok in zip(values, fits, strict=True) if not ok]
    else:
        return None, list(values)
    return (column, plain), others


def _as_sets(parts: list[Expr], op: str, negated: bool) -> Expr:
    """Operands of an OR (`op` "=") or of an AND (`op` "!=", `negated`): the plain equalities (inequalities) and set
    leaves on one column become one `BoundIn` of their distinct values, per column; everything else stays beside it.
    An IN list, and a planner's `k = 1 OR k = 2 OR ...`, are then one set leaf, evaluated as a set by every stage."""
    by_column: dict[BoundColumn, list[Any]] = {}
    rest: list[Expr] = []
    for part in parts:
        if isinstance(part, BoundCompare) and part.op == op:
            by_column.setdefault(part.column, []).append(part.value)
        elif isinstance(part, BoundIn) and part.negated == negated:
            by_column.setdefault(part.column, []).extend(part.values)
        else:
            rest.append(part)
    for column, found in by_column.items():
        values = sorted(set(found))
        rest.append(BoundIn(column, tuple(values), negated) if len(values) > 1 else BoundCompare(op, column, values[0]))
    return and_(*rest) if negated else or_(*rest)


def combine_calendar_fields(conjuncts: list[Expr]) -> list[Expr]:
    """`year(c) = Y AND month(c) = M [AND day(c) = D]` is one month (day): `date_trunc('month', c) = Y-M-01`.

    month/day alone are not ranges on the column; together with the year they are, and then every stage (partition
    projection included) can use them. Conjuncts that do not combine are returned unchanged.
    """
    fields: dict[tuple[str, str], tuple[int, Expr]] = {}
    for part in conjuncts:
        if isinstance(part, Compare) and part.op == "=" and isinstance(part.column, Transform):
            value = part.value
            if is_number(value) and _finite(value) and Fraction(value).denominator == 1:
                fields.setdefault((part.column.column, part.column.func), (int(value), part))
    combined: list[Expr] = []
    used: set[int] = set()
    for (column, func), (year, year_part) in fields.items():
        if func != "year" or (column, "month") not in fields:
            continue
        month, month_part = fields[(column, "month")]
        day, day_part = fields.get((column, "day"), (None, None))
        try:
            start = dt.datetime(year, month, day or 1)
        except ValueError:  # no such month or day: the field leaves fold to FALSE on their own
            continue
        unit = "month" if day is None else "day"
        combined.append(Compare("=", Transform("trunc", column, unit), start))
        used |= {id(year_part), id(month_part)} | ({id(day_part)} if day_part is not None else set())
    return [part for part in conjuncts if id(part) not in used] + combined


def _bind_leaf(op: str, term: str | Transform, value: Any, schema: Schema, table: str) -> Expr:
    source = Compare(op, term, value)
    if isinstance(term, str):
        return _bind_compare(op, resolve_column(schema, term, table), value, source)
    column = resolve_column(schema, term.column, table)
    try:
        return _unwrap(op, term, column, value, source)
    except _CannotCoerce as exc:
        return Unusable(str(source), str(exc))


def _unwrap(op: str, term: Transform, column: BoundColumn, value: Any, source: Expr) -> Expr:
    """A transform compared with a constant, as a range on the column itself (see module docstring)."""
    ctype = column.type
    temporal = isinstance(ctype, (DateType, TimestampType, TimestamptzType))
    if term.func == "add":
        if _is_approximate(value) and not isinstance(term.arg, Interval) and _is_exact_numeric(ctype):
            return _bind_compare(op, column, value, source, shift=term.arg)
        return _bind_compare(op, column, _subtract(value, term.arg, column), source)
    if not temporal:
        raise _CannotCoerce(f"{term} needs a date or timestamp column; {column.name} is {ctype}")
    if term.func == "date" and isinstance(ctype, DateType):
        return _bind_compare(op, column, value, source)
    if term.func in ("date", "trunc"):
        unit = "day" if term.func == "date" else term.arg
        if isinstance(value, str):
            value = _parse_temporal(value, column, date_only=term.func == "date")
        if isinstance(value, dt.date):
            value = as_datetime(value)
        if not isinstance(value, dt.datetime):
            raise _CannotCoerce(f"{term} is compared with a {type(value).__name__}, not a date or timestamp")
        if value.tzinfo is not None:
            raise _CannotCoerce(f"{term} against a zoned literal depends on the session time zone")
        return _truncated_range(op, column, unit, value, source)
    # year / month / day / hour: integer fields
    if isinstance(value, str) or not is_number(value) or not _finite(value):
        raise _CannotCoerce(f"{term} is compared with a non-number or a non-finite one")
    if term.func == "hour" and isinstance(ctype, DateType):
        raise _CannotCoerce(f"hour() of date column {column.name} is not supported")
    if term.func != "year" and isinstance(ctype, TimestamptzType):
        raise _CannotCoerce(f"{term} of a timestamptz column depends on the session time zone")
    integer = _integer_comparison(op, Fraction(value))
    if isinstance(integer, Expr):
        return and_(integer, IsNull(column, negated=True)) if integer == TRUE else integer
    op, number = integer
    if term.func != "year":
        return BoundField(term.func, op, column, number)
    if not 1 <= number <= 9999:
        raise _CannotCoerce(f"year {number} is outside the supported calendar")
    return _truncated_range(op, column, "year", dt.datetime(number, 1, 1), source)


def _finite(value: Any) -> bool:
    """Not NaN or an infinity (which only floats and Decimals can be)."""
    if isinstance(value, Decimal):
        return value.is_finite()
    return math.isfinite(value) if isinstance(value, float) else True


def _integer_comparison(op: str, value: Fraction) -> tuple[str, int] | Expr:
    """`n op value` over integers n, as `n op' k` for an integer k (or TRUE / FALSE when no integer is special)."""
    if value.denominator == 1:
        return op, int(value)
    floor, ceil = math.floor(value), math.ceil(value)
    cases: dict[str, tuple[str, int] | Expr] = {
        "=": FALSE,
        "!=": TRUE,
        "<": ("<=", floor),
        "<=": ("<=", floor),
        ">": (">=", ceil),
        ">=": (">=", ceil),
    }
    return cases[op]


def _truncated_range(op: str, column: BoundColumn, unit: str, value: dt.datetime, source: Expr) -> Expr:
    """`date_trunc(unit, column) op value` as comparisons on the column (exact: truncation is a floor)."""
    try:
        floor = _truncate(value, unit)
        aligned = floor == value
        following = _next_unit(floor, unit)
        ceil = floor if aligned else following
    except (OverflowError, ValueError):
        raise _CannotCoerce(f"{value} is outside the supported calendar") from None

    def cmp(comparison: str, at: dt.datetime) -> Expr:
        return _bind_compare(comparison, column, at, source)

    if op == "=":
        return and_(cmp(">=", value), cmp("<", following)) if aligned else FALSE
    if op == "!=":
        return or_(cmp("<", value), cmp(">=", following)) if aligned else IsNull(column, negated=True)
    if op == "<":
        return cmp("<", ceil)
    if op == "<=":
        return cmp("<", following)
    if op == ">":
        return cmp(">=", following)
    return cmp(">=", ceil)


def _truncate(value: dt.datetime, unit: str) -> dt.datetime:
    if unit in _MONTH_UNITS:
        month = (value.month - 1) // _MONTH_UNITS[unit] * _MONTH_UNITS[unit] + 1
        return dt.datetime(value.year, month, 1)
    if unit == "week":  # ISO weeks start on Monday
        day = as_datetime(value.date())
        return day - dt.timedelta(days=day.weekday())
    micros = datetime_to_micros(value)
    return micros_to_timestamp(micros - micros % _FIXED_UNITS[unit])


def _next_unit(value: dt.datetime, unit: str) -> dt.datetime:
    if unit in _MONTH_UNITS:
        return add_interval(value, Interval(months=_MONTH_UNITS[unit]))
    return value + dt.timedelta(microseconds=_FIXED_UNITS[unit])


def _subtract(value: Any, addend: Any, column: BoundColumn) -> Any:
    """`value - addend`, for `column + addend op value`: exact, or refused."""
    if value is None:
        return None
    ctype = column.type
    if isinstance(addend, Interval):
        if not isinstance(ctype, (DateType, TimestampType)):
            raise _CannotCoerce(f"interval arithmetic on {ctype} column {column.name} is not unwrapped")
        if addend.months:
            raise _CannotCoerce("adding months is not invertible (month ends are clamped)")
        if isinstance(value, str):
            value = _parse_temporal(value, column, date_only=False)
        if not isinstance(value, dt.date) or (isinstance(value, dt.datetime) and value.tzinfo is not None):
            raise _CannotCoerce(f"{column.name} + interval is compared with {value!r}")
        try:
            return as_datetime(value) - dt.timedelta(microseconds=addend.micros)
        except OverflowError:
            raise _CannotCoerce(f"{value} - {addend} is outside the supported calendar") from None
    if not _is_exact_numeric(ctype):
        raise _CannotCoerce(f"{column.name} + {addend}: only integer and decimal columns add exactly")
    return _as_number(value, column, on_grid=True) - Fraction(addend)


def _parse_temporal(text: str, column: BoundColumn, date_only: bool) -> dt.date:
    try:
        return parse_date(text) if date_only else parse_timestamp(text)
    except ValueError:
        raise _CannotCoerce(f"{text!r} is not a date/timestamp literal for {column.name}") from None


def _bind_compare(op: str, column: BoundColumn, value: Any, source: Expr, shift: Any = 0) -> Expr:
    """`column + shift op value` (shift only with an approximate value; exact ones are shifted by `_subtract`)."""
    if not supports_bounds(column.type):
        return Unusable(str(source), f"column {column.name} has type {column.type}, which has no statistics")
    try:
        if shift:
            return _exact_against_approximate(op, column, _binary(value), shift)
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
    if isinstance(ctype, (DoubleType, FloatType)):
        return _approximate_column(op, column, _literal_binary(value, column))
    if _is_exact_numeric(ctype):
        if _is_approximate(value):
            return _exact_against_approximate(op, column, _binary(value), 0)
        number = _as_number(value, column, on_grid=True)
        return _decimal_widening_guard(column, value, _on_grid(op, column, number))
    if isinstance(ctype, DateType):
        if isinstance(value, dt.datetime) and value.tzinfo is not None:  # the date's midnight in which zone?
            micros = datetime_to_micros(value)  # the instant, in UTC
            low = math.floor(Fraction(micros - _MAX_ZONE_OFFSET_MICROS, _MICROS_PER_DAY))
            high = math.ceil(Fraction(micros + _MAX_ZONE_OFFSET_MICROS, _MICROS_PER_DAY))
            return _widen(op, column, low, high)
        return _coerce_discrete(op, column, _as_days(value, column), 0, _DAYS)
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


def _as_number(value: Any, column: BoundColumn, on_grid: bool = False) -> Fraction:
    """Exact rational value of a numeric literal; NaN and infinities are refused.

    A string literal is cast to the column's type by the engines: with `on_grid` (exact columns) it must be a value
    of that type, for engines round ('1.5' -> 2: DuckDB), truncate (-> 1: Spark without ANSI) or fail otherwise.
    """
    if isinstance(value, bool):
        raise _CannotCoerce(f"{column.name} is numeric but the literal is boolean")
    if isinstance(value, str):
        text = value
        try:
            value = Decimal(value.strip())
        except InvalidOperation:
            raise _CannotCoerce(f"{column.name} is numeric but {text!r} is not a number") from None
        if on_grid and value.is_finite() and not _holds(column.type, Fraction(value)):
            raise _CannotCoerce(
                f"{text!r} is not a {column.type} value: engines round, truncate or fail when casting it"
            )
    if isinstance(value, (float, Decimal)) and not math.isfinite(value):
        raise _CannotCoerce(f"comparison of {column.name} with {value} (NaN/infinity semantics differ by engine)")
    if isinstance(value, (int, float, Decimal, Fraction)):
        return Fraction(value)
    raise _CannotCoerce(f"{column.name} is numeric but the literal is {type(value).__name__}")


def _coerce_discrete(
    op: str, column: BoundColumn, value: Fraction, scale: int, value_range: tuple[Fraction | int, Fraction | int]
) -> Expr:
    """`column op value` for a column holding multiples of 10**-scale within `value_range`: exact."""
    unit = Fraction(1, 10**scale)

    def physical(f: Fraction) -> Any:
        units = int(f / unit)
        if scale == 0 and isinstance(column.type, (IntegerType, LongType, DateType)):
            return units
        return Decimal(units).scaleb(-scale)

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


def _is_exact_numeric(ctype: IcebergType) -> bool:
    return isinstance(ctype, (IntegerType, LongType, DecimalType))


def _is_approximate(value: Any) -> bool:
    """A DOUBLE or FLOAT value: a Python float (`Float32` for FLOAT), or a `Binary` made of an exact one."""
    return isinstance(value, (float, Binary))


def _binary(value: float | Binary) -> Binary:
    if isinstance(value, Binary):
        return value
    if not math.isfinite(value):
        raise _CannotCoerce(f"comparison with {value} (NaN/infinity semantics differ by engine)")
    return Binary(value, value, bits_of(value))


def in_list_values(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """IN compares the column with every value in one common type (Spark, DuckDB): with a DOUBLE among the values,
    the exact ones are converted to DOUBLE too (`i IN (9007199254740993, 1e0)` holds for i = 2^53), with only FLOATs
    to FLOAT (FLOATs mixed with exact values are refused: Spark's ANSI mode makes their common type DOUBLE, DuckDB
    FLOAT). The converted values are `Binary`; the others are returned unchanged."""
    approximate = [v for v in values if isinstance(v, float)]
    if not approximate:
        return values
    bits = FLOAT if all(bits_of(v) == FLOAT for v in approximate) else DOUBLE
    common: list[Any] = []
    for value in values:
        if isinstance(value, float):
            common.append(_binary(value) if bits == FLOAT else _binary(float(value)))
        elif is_number(value):
            if bits == FLOAT:
                raise _CannotCoerce(
                    "an IN list of FLOAT and exact values is compared in DOUBLE by Spark, FLOAT by DuckDB"
                )
            converted = as_binary(value, bits)
            if converted is None:
                raise _CannotCoerce(f"{value} is outside the range of the IN list's floating-point type")
            common.append(converted)
        else:
            common.append(value)
    return tuple(common)


def _literal_binary(value: Any, column: BoundColumn) -> Binary:
    """The DOUBLE value(s) the engines compare a floating-point column with (see approximate.py)."""
    if _is_approximate(value):
        return _binary(value)
    if isinstance(value, str):  # a cast from text: a correctly rounded parse in every engine
        parsed = _as_number(value, column)
        return _binary(float(parsed))
    _as_number(value, column)  # refuses booleans, NaN and infinities
    converted = as_binary(value, DOUBLE)
    if converted is None:
        raise _CannotCoerce(f"{value} is outside the range of DOUBLE")
    return converted


def _approximate_column(op: str, column: BoundColumn, literal: Binary) -> Expr:
    """A DOUBLE or FLOAT column against a value the engines hold as a DOUBLE in [low, high] (or a FLOAT).

    DOUBLE columns: exact when the value is (a FLOAT converts to DOUBLE exactly). FLOAT columns: engines disagree on
    whether `f = 0.1` compares in FLOAT or DOUBLE, so a value that is not a float32 widens the leaf to its float32
    neighbours, which covers both readings.
    """
    low, high = literal.low, literal.high
    if isinstance(column.type, FloatType):
        low, high = _float32_toward(low, -math.inf), _float32_toward(high, math.inf)
        if not (math.isfinite(low) and math.isfinite(high)):
            raise _CannotCoerce(f"{literal.low} is outside the range of float column {column.name}")
    if low == high == literal.low == literal.high:
        return BoundCompare(op, column, float(low))
    return _widen(op, column, low, high)


def _float32_toward(value: float, direction: float) -> float:
    """The float32 nearest `value` on the side of `direction` (value itself when it is a float32)."""
    with np.errstate(over="ignore"):
        rounded = np.float32(value)
    if float(rounded) == value or not np.isfinite(rounded):
        return float(rounded)
    if (float(rounded) < value) == (direction > 0):
        rounded = np.nextafter(rounded, np.float32(direction), dtype=np.float32)
    return float(rounded)


def _exact_against_approximate(op: str, column: BoundColumn, literal: Binary, shift: Any) -> Expr:
    """`column + shift op literal` for an int, long or decimal column and a DOUBLE or FLOAT literal: the column
    values whose conversion to binary floating point satisfies the comparison (approximate.py), on the column's
    grid. A FLOAT literal is met in FLOAT by DuckDB, Trino and Spark without ANSI mode, but in DOUBLE by Spark for a
    decimal, and for an int or long too in ANSI mode (its least common type skips FLOAT), so both readings are kept.
    Exact (may prove "all rows match") only with one reading and correctly rounded conversions; otherwise
    `Widened`."""
    ctype = column.type
    shift_scale = None if isinstance(shift, float) else scale_of(shift)
    if shift_scale is None:
        raise _CannotCoerce(f"{column.name} + {shift} is not exact decimal arithmetic")
    integral = isinstance(ctype, (IntegerType, LongType)) and isinstance(shift, int)
    scale = max(ctype.scale if isinstance(ctype, DecimalType) else 0, shift_scale)
    readings = [literal]
    if literal.bits == FLOAT:
        readings.append(Binary(literal.low, literal.high, DOUBLE))
    magnitude = 2 * Fraction(max(abs(literal.low), abs(literal.high)))
    errors = [0 if integral else error_ulps(scale, magnitude, reading.bits) for reading in readings]
    sets = [matching_set(op, reading, error) for reading, error in zip(readings, errors, strict=True)]
    exact = len(readings) == 1 and literal.exact and not any(errors)
    if any(part is None for part in sets):
        result: Expr = IsNull(column, negated=True)
    else:
        found = [part for part in sets if part is not None]  # all of them: none is None here
        loosest = [_loosest([part[k] for part in found]) for k in range(len(found[0]))]
        result = _on_column_grid(op, column, [(cmp, at - Fraction(shift)) for cmp, at in loosest])
    return result if exact or isinstance(result, Const) else Widened(result)


def _loosest(comparisons: list[tuple[str, Fraction]]) -> tuple[str, Fraction]:
    """The comparison among `comparisons` (all below-bounds or all above-bounds) that admits the most values."""
    if comparisons[0][0] in ("<", "<="):
        return max(comparisons, key=lambda c: (c[1], c[0] == "<="))
    return min(comparisons, key=lambda c: (c[1], c[0] != ">="))


def _on_column_grid(op: str, column: BoundColumn, bounds: list[tuple[str, Fraction]]) -> Expr:
    """The column values satisfying `bounds` (both of a range for "=", either for "!=", else the one), as
    comparisons with values of the column's type: a range holding one value is `=`, one excluding one is `!=`."""
    scale, (low, high) = _grid(column.type)
    unit = Fraction(1, 10**scale)

    def first_at_or_above(cmp: str, at: Fraction) -> Fraction:
        value = math.ceil(at / unit) * unit
        return value + unit if cmp == ">" and value == at else value

    def last_at_or_below(cmp: str, at: Fraction) -> Fraction:
        value = math.floor(at / unit) * unit
        return value - unit if cmp == "<" and value == at else value

    def compare(cmp: str, value: Fraction) -> Expr:
        return _coerce_discrete(cmp, column, value, scale, (low, high))

    if op == "=":
        first, last = first_at_or_above(*bounds[0]), last_at_or_below(*bounds[1])
        first, last = max(first, low), min(last, high)
        if first > last:
            return FALSE
        if first == last:
            return compare("=", first)
        return and_(*(part for part in (compare(">=", first), compare("<=", last)) if not _is_not_null(part)))
    if op == "!=":
        below, above = last_at_or_below(*bounds[0]), first_at_or_above(*bounds[1])
        if above - below <= unit:
            return IsNull(column, negated=True)
        if above - below == 2 * unit:
            return compare("!=", below + unit)
        return or_(compare("<=", below), compare(">=", above))
    cmp, at = bounds[0]
    if cmp in ("<", "<="):
        return compare("<=", last_at_or_below(cmp, at))
    return compare(">=", first_at_or_above(cmp, at))


def _is_not_null(expr: Expr) -> bool:
    return isinstance(expr, IsNull) and expr.negated


def _grid(ctype: IcebergType) -> tuple[int, tuple[Fraction, Fraction]]:
    """Decimal places and range of an exact numeric type's values."""
    if isinstance(ctype, DecimalType):
        largest = Fraction(10**ctype.precision - 1, 10**ctype.scale)
        return ctype.scale, (-largest, largest)
    low, high = _INT32 if isinstance(ctype, IntegerType) else _INT64
    return 0, (Fraction(low), Fraction(high))


def _holds(ctype: IcebergType, value: Fraction) -> bool:
    """`value` is a value of the exact numeric type."""
    scale, (low, high) = _grid(ctype)
    return (value * 10**scale).denominator == 1 and low <= value <= high


def _on_grid(op: str, column: BoundColumn, value: Fraction) -> Expr:
    scale, value_range = _grid(column.type)
    return _coerce_discrete(op, column, value, scale, value_range)


def _decimal_widening_guard(column: BoundColumn, literal: Any, bound: Expr) -> Expr:
    """Spark compares an exact column with a decimal literal in their wider DECIMAL type, capped at 38 digits
    (int and long count as DECIMAL(10, 0) and DECIMAL(20, 0)). When the literal's scale leaves too few integer
    digits, large column values overflow the cast (NULL without ANSI mode, an error with it): the rows that match
    are still among those found here, but "all rows match" cannot be proven."""
    ctype = column.type
    if isinstance(literal, str) or isinstance(bound, Const):
        return bound
    scale = scale_of(literal) if isinstance(literal, (int, Decimal, Fraction)) else None
    if isinstance(ctype, DecimalType):
        digits, column_scale = ctype.precision - ctype.scale, ctype.scale
    else:
        digits, column_scale = _INTEGER_DIGITS[type(ctype)], 0
    if scale is not None and digits + max(column_scale, scale) <= _MAX_DECIMAL_DIGITS:
        return bound
    return Widened(bound)


def _as_days(value: Any, column: BoundColumn) -> Fraction:
    """Days since the epoch; a (zone-less) timestamp is a fraction of a day, compared with the date's midnight."""
    if isinstance(value, str):
        try:
            value = parse_date(value)
        except ValueError:
            raise _CannotCoerce(f"{column.name} is a date but {value!r} is not a date literal") from None
    if isinstance(value, dt.datetime):
        return Fraction(datetime_to_micros(value), _MICROS_PER_DAY)
    if isinstance(value, dt.date):
        return Fraction(date_to_days(value))
    raise _CannotCoerce(f"{column.name} is a date but the literal is {type(value).__name__}")


def _as_micros(value: Any, column: BoundColumn, column_has_zone: bool) -> tuple[int, bool]:
    """(micros since epoch, whether the literal's zone-ness matches the column's)."""
    if isinstance(value, str):
        try:
            value = parse_timestamp(value)
        except ValueError:
            raise _CannotCoerce(f"{column.name} is a timestamp but {value!r} is not a timestamp literal") from None
    elif isinstance(value, dt.date):
        value = as_datetime(value)
    if not isinstance(value, dt.datetime):
        raise _CannotCoerce(f"{column.name} is a timestamp but the literal is {type(value).__name__}")
    if isinstance(value.tzinfo, WrittenOffset) and column_has_zone:
        # instant (Spark, Trino) or wall clock in the session zone (Postgres, DuckDB): both lie within 14 hours
        # of the wall clock read as UTC, which is what a zone-less literal gets
        value = value.replace(tzinfo=None)
    return datetime_to_micros(value), (value.tzinfo is not None) == column_has_zone


def bound_predicate(
    where: str, schema: Schema, table: str, clock: Clock | None = None, dialect: str | None = None
) -> Expr:
    """A SQL WHERE clause parsed (in `dialect`), normalised and bound to `schema`: what every stage evaluates."""
    return bind(normalize(parse_where(where, clock, dialect)), schema, table)
