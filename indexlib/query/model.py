"""The predicate model: SQL boolean expressions over columns, NOT pushed away with three-valued logic.

A WHERE clause keeps a row only when its predicate is TRUE; FALSE and NULL (unknown) both drop it. Every
transformation here preserves "which rows are TRUE", including under NOT, which is why NULL literals survive
until `push_not` has removed every NOT: `NOT (a = NULL)` is NULL, not TRUE.

Unbound leaves name a column by string, or a `Transform` of one column (`CAST(ts AS DATE)`, `year(ts)`,
`date_trunc('month', ts)`, `i + 1`) that the binder turns into a range on the column itself. `bind` (in
`query/binding.py`) resolves names against a table schema and converts literals to the column's type.

Literals are typed Python values: bool, int, Decimal, float (DOUBLE; `approximate.Float32` for FLOAT), str, bytes, date,
datetime (naive, or zoned for TIMESTAMP WITH TIME ZONE values), and None for SQL NULL.
"""

from __future__ import annotations

import calendar
import datetime as dt
import operator
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, overload

from pyiceberg.types import DateType, IcebergType, TimestampType, TimestamptzType
from pyiceberg.utils.datetime import days_to_date, micros_to_timestamp, micros_to_timestamptz

COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
COMPARE = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
NEGATED_COMPARISON = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
FLIPPED_COMPARISON = {"=": "=", "!=": "!=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}


class Expr:
    def __and__(self, other: Expr) -> Expr:
        return and_(self, other)

    def __or__(self, other: Expr) -> Expr:
        return or_(self, other)

    def __invert__(self) -> Expr:
        return Not(self)


@dataclass(frozen=True)
class Const(Expr):
    """TRUE, FALSE or NULL (unknown)."""

    value: bool | None

    def __str__(self) -> str:
        return {True: "TRUE", False: "FALSE", None: "NULL"}[self.value]


TRUE, FALSE, NULL = Const(True), Const(False), Const(None)


@dataclass(frozen=True)
class Unusable(Expr):
    """A part of the predicate the index cannot evaluate: it might match any row. `reason` is shown by explain."""

    sql: str
    reason: str

    def __str__(self) -> str:
        return f"<unused: {self.sql}>"


@dataclass(frozen=True)
class Transform:
    """A function of one column that preserves order within known ranges.

    `func` is one of: "date" (CAST AS DATE), "trunc" (date_trunc; `arg` the unit), "year", "month", "day",
    "hour" (fields of the calendar in the engine's session zone), "add" (`column + arg`, `arg` a number or
    `Interval`). NULL in gives NULL out, so every predicate on a transform keeps SQL three-valued logic.
    """

    func: str
    column: str
    arg: Any = None

    def __str__(self) -> str:
        if self.func == "date":
            return f"CAST({self.column} AS DATE)"
        if self.func == "trunc":
            return f"date_trunc('{self.arg}', {self.column})"
        if self.func == "add":
            return f"{self.column} + {_literal_str(self.arg)}"
        return f"{self.func}({self.column})"


class WrittenOffset(dt.tzinfo):
    """The offset written in a `TIMESTAMP '... +05:00'` literal. Spark and Trino read the literal as that instant;
    Postgres and DuckDB drop the offset and read the wall-clock time in the session zone. The binder covers both."""

    def __init__(self, offset: dt.timedelta) -> None:
        self.offset = offset

    def utcoffset(self, _: dt.datetime | None) -> dt.timedelta:
        return self.offset

    def dst(self, _: dt.datetime | None) -> dt.timedelta:
        return dt.timedelta(0)

    def tzname(self, _: dt.datetime | None) -> str:
        return str(dt.timezone(self.offset))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WrittenOffset) and other.offset == self.offset

    def __hash__(self) -> int:
        return hash(self.offset)

    def __repr__(self) -> str:
        return f"WrittenOffset({self.offset!r})"


@dataclass(frozen=True)
class Interval:
    """An INTERVAL literal: calendar months plus an exact number of microseconds."""

    months: int = 0
    micros: int = 0

    def __neg__(self) -> Interval:
        return Interval(-self.months, -self.micros)

    def __str__(self) -> str:
        return f"INTERVAL '{self.months} months {self.micros} microseconds'"


_FRACTION_OF_SECOND = re.compile(r"\d:\d\d[.,](\d+)")


class SubMicrosecond(ValueError):
    """A timestamp literal with non-zero digits below the microsecond."""


def parse_timestamp(text: str) -> dt.datetime:
    """An ISO timestamp literal. Digits below the microsecond are refused unless zero: Python and DuckDB truncate
    them, engines with nanosecond timestamps (Trino) compare them, so no single microsecond value is right."""
    fraction = _FRACTION_OF_SECOND.search(text)
    if fraction and fraction.group(1)[6:].strip("0"):
        raise SubMicrosecond(f"{text!r} has digits below the microsecond")
    return dt.datetime.fromisoformat(text.strip())


def parse_date(text: str) -> dt.date:
    """An ISO date literal (surrounding blanks allowed, as engines cast them)."""
    return dt.date.fromisoformat(text.strip())


def is_number(value: Any) -> bool:
    """A numeric literal (bool is not one, although Python says it is an int)."""
    return isinstance(value, (int, Decimal, Fraction, float)) and not isinstance(value, bool)


def as_datetime(value: dt.date) -> dt.datetime:
    """A date as its midnight (how SQL compares a date with a timestamp); a datetime unchanged."""
    return value if isinstance(value, dt.datetime) else dt.datetime.combine(value, dt.time())


@overload
def add_interval(value: dt.datetime, interval: Interval) -> dt.datetime: ...


@overload
def add_interval(value: dt.date, interval: Interval) -> dt.date: ...


def add_interval(value: dt.date, interval: Interval) -> dt.date:
    """Calendar months first (clamped to the month's end, as Spark and DuckDB do), then exact microseconds.

    A date stays a date when the interval has no sub-day part.
    """
    if interval.months:
        months = value.year * 12 + value.month - 1 + interval.months
        year, month = divmod(months, 12)
        day = min(value.day, calendar.monthrange(year, month + 1)[1])
        try:
            value = value.replace(year=year, month=month + 1, day=day)
        except ValueError:
            raise ValueError(f"{value} + {interval} is out of range") from None
    if interval.micros:
        if not isinstance(value, dt.datetime) and interval.micros % 86_400_000_000:
            value = as_datetime(value)
        try:
            value = value + dt.timedelta(microseconds=interval.micros)
        except OverflowError:
            raise ValueError(f"{value} + {interval} is out of range") from None
    return value


@dataclass(frozen=True)
class Compare(Expr):
    """`column op value`; `value` None is SQL NULL. `column` is a name (unbound) or a bound column."""

    op: str
    column: Any
    value: Any

    def __str__(self) -> str:
        return f"{_column_str(self.column)} {self.op} {_literal_str(self.value)}"


@dataclass(frozen=True)
class In(Expr):
    column: Any
    values: tuple[Any, ...]
    negated: bool = False

    def __str__(self) -> str:
        keyword = "NOT IN" if self.negated else "IN"
        return f"{_column_str(self.column)} {keyword} ({', '.join(_literal_str(v) for v in self.values)})"


@dataclass(frozen=True)
class IsNull(Expr):
    column: Any
    negated: bool = False

    def __str__(self) -> str:
        return f"{_column_str(self.column)} IS {'NOT ' if self.negated else ''}NULL"


@dataclass(frozen=True)
class IsNaN(Expr):
    """`isnan(column)`. Engines disagree on a NULL input (Spark: FALSE, DuckDB: NULL); the evaluator is sound
    under both, so the negation keeps NULL rows as "might match"."""

    column: Any
    negated: bool = False

    def __str__(self) -> str:
        return f"{'NOT ' if self.negated else ''}isnan({_column_str(self.column)})"


@dataclass(frozen=True)
class Pattern(Expr):
    """String matching: `kind` is "like" (SQL LIKE with `%`, `_` and an optional ESCAPE character), "ilike" (ILIKE:
    LIKE of both sides lowered, by the engine's own case tables), "starts_with" (a literal prefix) or "regexp"
    (REGEXP_LIKE / RLIKE: the regex matches somewhere in the value).

    NULL value or NULL pattern gives NULL, so NOT of a pattern is the `negated` pattern (3VL kept).
    """

    kind: str
    column: Any
    pattern: str
    negated: bool = False
    escape: str | None = None

    def __str__(self) -> str:
        column = _column_str(self.column)
        if self.kind == "starts_with":
            text = f"starts_with({column}, {_literal_str(self.pattern)})"
            return f"NOT {text}" if self.negated else text
        keyword = {"like": "LIKE", "ilike": "ILIKE", "regexp": "RLIKE"}[self.kind]
        escape = f" ESCAPE {_literal_str(self.escape)}" if self.escape is not None else ""
        return f"{column} {'NOT ' if self.negated else ''}{keyword} {_literal_str(self.pattern)}{escape}"


@dataclass(frozen=True)
class And(Expr):
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return f"({self.left} AND {self.right})"


@dataclass(frozen=True)
class Or(Expr):
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return f"({self.left} OR {self.right})"


@dataclass(frozen=True)
class Not(Expr):
    child: Expr

    def __str__(self) -> str:
        return f"NOT {self.child}"


def _column_str(column: Any) -> str:
    return column if isinstance(column, str) else str(column) if isinstance(column, Transform) else column.name


def _literal_str(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, Fraction):
        return str(value.numerator) if value.denominator == 1 else f"({value.numerator} / {value.denominator})"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return repr(value) if isinstance(value, bytes) else str(value)


def and_(*operands: Expr) -> Expr:
    """AND with constant folding that is valid in three-valued logic (FALSE absorbs, TRUE vanishes)."""
    parts: list[Expr] = []
    for operand in operands:
        if operand == FALSE:
            return FALSE
        if operand != TRUE:
            parts.append(operand)
    return _balanced(And, parts) if parts else TRUE


def or_(*operands: Expr) -> Expr:
    """OR with constant folding that is valid in three-valued logic (TRUE absorbs, FALSE vanishes)."""
    parts: list[Expr] = []
    for operand in operands:
        if operand == TRUE:
            return TRUE
        if operand != FALSE:
            parts.append(operand)
    return _balanced(Or, parts) if parts else FALSE


def operands(expr: Expr, connective: type[And] | type[Or]) -> list[Expr]:
    """The operands of a chain of one connective (`a OR b OR c`, any shape of tree), left to right, without
    recursion."""
    parts, stack = [], [expr]
    while stack:
        node = stack.pop()
        if type(node) is connective:
            stack.extend((node.right, node.left))
        else:
            parts.append(node)
    return parts


def _balanced(node: type[And] | type[Or], parts: list[Expr]) -> Expr:
    """`parts` joined by one associative connective as a balanced tree, so a chain of n operands nests log2(n)
    deep and every visitor's recursion stays shallow however long a planner's OR chain is."""
    while len(parts) > 1:
        pairs = [node(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


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
    # True where the AND chain holding this leaf is FALSE on every NaN row (query/intervals.py): the leaf is then
    # judged on the non-NaN values alone (`>`, `>=`, `!=`: the comparisons NaN may make TRUE)
    nan_excluded: bool = False

    def __str__(self) -> str:
        return str(Compare(self.op, self.column.name, display_value(self.column.type, self.value)))


@dataclass(frozen=True)
class BoundIn(Expr):
    """`column IN values` (with `negated`, `column NOT IN values`): two or more distinct non-NULL values in the
    column's physical domain, sorted. An IN list stays one leaf, evaluated as a set (a 100,000-value list is one
    vectorised membership test, not 100,000 OR-ed comparisons)."""

    column: BoundColumn
    values: tuple[Any, ...]
    negated: bool = False

    SHOWN = 10  # values spelled out by str(); explain of a 100,000-value list stays readable

    def __str__(self) -> str:
        shown = ", ".join(_literal_str(display_value(self.column.type, v)) for v in self.values[: self.SHOWN])
        more = f", ... {len(self.values):,} values" if len(self.values) > self.SHOWN else ""
        return f"{self.column.name} {'NOT IN' if self.negated else 'IN'} ({shown}{more})"


@dataclass(frozen=True)
class BoundField(Expr):
    """`month(column) op value` (or day / hour): a calendar field, monotone only within the enclosing period."""

    field: str
    op: str
    column: BoundColumn
    value: int

    def __str__(self) -> str:
        return f"{self.field}({self.column.name}) {self.op} {self.value}"


@dataclass(frozen=True)
class Widened(Expr):
    """A superset of the rows the original leaf matches: may prune, never proves "all rows match"."""

    child: Expr

    def __str__(self) -> str:
        return f"widened({self.child})"


def display_value(iceberg_type: IcebergType, value: Any) -> Any:
    """A physical value (days, micros) as the date / timestamp it stands for, for explain."""
    try:
        if isinstance(iceberg_type, DateType):
            return days_to_date(value)
        if isinstance(iceberg_type, TimestampType):
            return micros_to_timestamp(value)
        if isinstance(iceberg_type, TimestamptzType):
            return micros_to_timestamptz(value)
    except OverflowError:
        pass
    return value
