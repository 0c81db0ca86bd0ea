"""SQL WHERE text -> unbound predicate, through sqlglot.

Constant sub-expressions are folded here (arithmetic, literal CASTs, INTERVAL arithmetic, CURRENT_DATE /
CURRENT_TIMESTAMP / NOW() read from an injectable `Clock`). A comparison of a column, or of a `Transform` of one
column (`CAST(ts AS DATE)`, `date_trunc('unit', ts)`, `year/month/day/hour(ts)`, `col + const`), with a constant
becomes a leaf; the binder turns transforms into ranges on the raw column once it knows the column's type.
`lower(c) LIKE p` is read as `c ILIKE p` where the two are the same (an ASCII pattern without capitals).
Anything else (other functions, column-to-column comparisons, subqueries) becomes `Unusable` for that
subtree only, with the reason explain prints. Parse errors are the user's: one line, exit code 2.

Arithmetic follows Spark / DuckDB / ANSI SQL: `/` is exact division (not Trino's integer division), `%` takes the
sign of the dividend, division by zero is left unused (engines give NULL, infinity or an error), integer overflow is an error (so `i + 1 < 5` is `i < 4`).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from indexlib.errors import UserError
from indexlib.query.approximate import DOUBLE, FLOAT, Float32, as_binary, bits_of, nearest
from indexlib.query.model import (
    COMPARE,
    FALSE,
    FLIPPED_COMPARISON,
    NULL,
    TRUE,
    And,
    Compare,
    Const,
    Expr,
    In,
    Interval,
    IsNaN,
    IsNull,
    Not,
    Or,
    Pattern,
    SubMicrosecond,
    Transform,
    Unusable,
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

_COMPARISON_NODES: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
_FIELD_FUNCTIONS: dict[type[exp.Expr], str] = {
    exp.Year: "year",
    exp.Month: "month",
    exp.Day: "day",
    exp.DayOfMonth: "day",
    exp.Hour: "hour",
}
TRUNC_UNITS = ("year", "quarter", "month", "week", "day", "hour", "minute", "second")
_INTERVAL_UNITS = {
    "year": (12, 0),
    "quarter": (3, 0),
    "month": (1, 0),
    "week": (0, 7 * 86_400_000_000),
    "day": (0, 86_400_000_000),
    "hour": (0, 3_600_000_000),
    "minute": (0, 60_000_000),
    "second": (0, 1_000_000),
    "millisecond": (0, 1_000),
    "microsecond": (0, 1),
}
_INTEGER_TYPES = {
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
}
_MAX_DECIMAL_DIGITS = 38
_STRING_TYPES = {exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT, exp.DataType.Type.CHAR}
_ZONE_LESS_TIMESTAMP_TYPES = {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.DATETIME, exp.DataType.Type.TIMESTAMPNTZ}
_TIMESTAMP_TYPES = {
    exp.DataType.Type.TIMESTAMP,
    exp.DataType.Type.DATETIME,
    exp.DataType.Type.TIMESTAMPTZ,
    exp.DataType.Type.TIMESTAMPLTZ,
    exp.DataType.Type.TIMESTAMPNTZ,
}


@dataclass(frozen=True)
class Clock:
    """What CURRENT_DATE / CURRENT_TIMESTAMP / NOW() mean: an instant and the session time zone.

    The default is the system clock in the machine's local zone, which is also Spark's default
    `spark.sql.session.timeZone`; planner code passes its own to make lookups reproducible.
    """

    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    time_zone: dt.tzinfo | None = None

    @staticmethod
    def system(time_zone: str | None = None) -> Clock:
        if time_zone is None:
            return Clock()
        try:
            return Clock(time_zone=ZoneInfo(time_zone))
        except (ZoneInfoNotFoundError, ValueError):
            raise UserError(f"unknown time zone {time_zone!r}") from None

    def local_now(self) -> dt.datetime:
        return self.now.astimezone(self.time_zone)  # None: the machine's local zone


class _NotAConstant(Exception):
    pass


def check_dialect(dialect: str | None) -> None:
    """A sqlglot dialect name (e.g. "spark", "trino", "duckdb"), or None for ANSI quoting."""
    if dialect is not None:
        try:
            Dialect.get_or_raise(dialect)
        except ValueError as exc:
            raise UserError(str(exc)) from None


def parse_where(where: str, clock: Clock | None = None, dialect: str | None = None) -> Expr:
    """Parse a SQL boolean expression: ANSI quoting ('string', "identifier") unless a sqlglot `dialect` is given
    (with "spark", "double quotes" are strings and backslashes escape, as in Spark SQL)."""
    if not where or not where.strip():
        raise UserError("empty WHERE expression")
    check_dialect(dialect)
    try:
        tree = sqlglot.parse_one(where, read=dialect)
    except sqlglot.errors.SqlglotError as exc:
        message = _ANSI_ESCAPE.sub("", str(exc)).replace("\n", " ")
        raise UserError(f"cannot parse WHERE {_short(where)!r}: {message}") from None
    except RecursionError:
        raise UserError(f"WHERE {_short(where)!r} {_LIMITS}") from None
    if not isinstance(tree, exp.Condition) or isinstance(tree, exp.Query):
        raise UserError(f"WHERE {_short(where)!r} is not a boolean expression")
    parentheses, logic = _nesting(tree)
    if parentheses > MAX_PARENTHESES or logic > MAX_LOGIC_DEPTH:
        raise UserError(
            f"WHERE {_short(where)!r} nests {parentheses} levels of parentheses and {logic} of AND/OR/NOT: {_LIMITS}"
        )
    return _Converter(clock or Clock()).convert(tree)


# Documented limits (docs/reference/where.md): far beyond hand-written SQL, and within what the parser and every
# tree walk after it handle without hitting Python's recursion limit.
MAX_PARENTHESES = 400
MAX_LOGIC_DEPTH = 100
_LIMITS = (
    f"is nested too deeply: at most {MAX_PARENTHESES} levels of parentheses and {MAX_LOGIC_DEPTH} of AND/OR/NOT "
    "(a chain of one operator is one level; IN lists of any length are one leaf)"
)


def predicate_from_tree(tree: Expr) -> Expr:
    """A predicate planner code built from the model's nodes (`In("k", keys)`, `And(...)`, `Compare(...)`, with
    unbound column names and typed literals, as the SQL front end makes them) instead of SQL text: no parsing, which is
    most of the cost of a 100,000-value IN list. The same nesting limit applies, and chains of one connective are
    rebalanced (a planner's left-deep OR chain would otherwise nest as deep as it is long)."""
    if not isinstance(tree, Expr):
        raise UserError(f"a predicate is SQL text or a query.model expression, not {type(tree).__name__}")
    depth = _tree_depth(tree)
    if depth > MAX_LOGIC_DEPTH:
        raise UserError(f"predicate tree nests {depth} levels of AND/OR/NOT: {_LIMITS}")
    return _rebalanced(tree)


def _tree_depth(tree: Expr) -> int:
    deepest = 0
    stack: list[tuple[Expr, int, type[Expr] | None]] = [(tree, 0, None)]
    while stack:
        node, depth, outer = stack.pop()
        if isinstance(node, (And, Or)):
            depth = depth if type(node) is outer else depth + 1
            stack.extend((child, depth, type(node)) for child in (node.left, node.right))
        elif isinstance(node, Not):
            depth += 1
            stack.append((node.child, depth, Not))
        deepest = max(deepest, depth)
    return deepest


def _rebalanced(tree: Expr) -> Expr:
    """Recursion here is bounded by the checked logical depth: a chain of one connective is gathered iteratively."""
    if isinstance(tree, Not):
        return Not(_rebalanced(tree.child))
    if not isinstance(tree, (And, Or)):
        return tree
    parts = [_rebalanced(part) for part in operands(tree, type(tree))]
    return and_(*parts) if isinstance(tree, And) else or_(*parts)


def _short(where: str, limit: int = 60) -> str:
    """The WHERE text for a one-line error: a 100,000-value IN list is cut."""
    return where if len(where) <= limit else f"{where[:limit]}... ({len(where):,} characters)"


def _nesting(tree: exp.Expr) -> tuple[int, int]:
    """How deep parentheses nest, and how deep AND/OR/NOT nest (a chain of one operator counts once), without
    recursion."""
    deepest_parens = deepest_logic = 0
    stack: list[tuple[exp.Expr, int, int, type | None]] = [(tree, 0, 0, None)]
    while stack:
        node, parens, logic, outer = stack.pop()
        deepest_parens, deepest_logic = max(deepest_parens, parens), max(deepest_logic, logic)
        if isinstance(node, exp.Paren):
            stack.append((node.this, parens + 1, logic, outer))
        elif isinstance(node, (exp.And, exp.Or)):
            depth = logic if type(node) is outer else logic + 1
            stack.extend((child, parens, depth, type(node)) for child in (node.left, node.right))
        elif isinstance(node, exp.Not):
            stack.append((node.this, parens, logic + 1, exp.Not))
        else:
            stack.extend(
                (child, parens, logic, None) for child in node.iter_expressions() if not isinstance(child, exp.Literal)
            )
    return deepest_parens, deepest_logic


def _chain(node: exp.Expr, connective: type[exp.Connector]) -> list[exp.Expr]:
    """The operands of a chain of one connective (`a OR b OR c`, parenthesised or not), left to right, without
    recursion: sqlglot nests a chain of n operands n deep."""
    parts, stack = [], [node]
    while stack:
        current = stack.pop()
        while isinstance(current, exp.Paren):
            current = current.this
        if isinstance(current, connective):
            stack.extend((current.right, current.left))
        else:
            parts.append(current)
    return parts


class _Converter:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def convert(self, node: exp.Expr) -> Expr:
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And):
            return and_(*(self.convert(part) for part in _chain(node, exp.And)))
        if isinstance(node, exp.Or):
            return or_(*(self.convert(part) for part in _chain(node, exp.Or)))
        if isinstance(node, exp.Not):
            return Not(self.convert(node.this))
        if isinstance(node, exp.Boolean):
            return TRUE if node.this else FALSE
        if isinstance(node, exp.Null):
            return NULL
        if isinstance(node, exp.Column):  # a bare boolean column: `WHERE flag`
            return Compare("=", node.name, True)
        if type(node) in _COMPARISON_NODES:
            return self.comparison(_COMPARISON_NODES[type(node)], node.this, node.expression, node)
        if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):
            return self.null_safe_equal(node)
        if isinstance(node, exp.Between):
            if self.mixes_approximate_and_exact(node.args["low"], node.args["high"]):
                return Unusable(
                    node.sql(),
                    "BETWEEN a floating-point and an exact bound: DuckDB compares all three in one floating-point "
                    "type, Spark each side apart",
                )
            low = self.comparison(">=", node.this, node.args["low"], node)
            high = self.comparison("<=", node.this, node.args["high"], node)
            return and_(low, high)
        if isinstance(node, exp.In):
            return self.in_list(node)
        if isinstance(node, exp.Is):
            return self.is_test(node)
        if isinstance(node, exp.IsNan) and isinstance(node.this, exp.Column):
            return IsNaN(node.this.name)
        if isinstance(node, (exp.Like, exp.ILike, exp.Escape)):
            return self.like(node)
        if isinstance(node, exp.StartsWith):
            return self.pattern("starts_with", node.this, node.expression, node)
        if isinstance(node, exp.RegexpLike):
            if node.args.get("flag") is not None:
                return Unusable(node.sql(), "regular expression flags are not supported")
            return self.pattern("regexp", node.this, node.expression, node)
        try:  # a constant boolean expression, e.g. `1 = 1` inside a function
            value = self.constant(node)
        except _NotAConstant:
            return Unusable(node.sql(), f"{type(node).__name__} is not supported by the index")
        if value is None:
            return NULL
        if isinstance(value, bool):
            return TRUE if value else FALSE
        return Unusable(node.sql(), "a non-boolean constant used as a condition")

    # -- leaves -----------------------------------------------------------------------------------------------

    def comparison(self, op: str, left: exp.Expr, right: exp.Expr, node: exp.Expr) -> Expr:
        left_term, right_term = self.term(left), self.term(right)
        if left_term is None and right_term is not None:
            left, right, op = right, left, FLIPPED_COMPARISON[op]
            left_term, right_term = right_term, None
        if right_term is not None:
            return Unusable(node.sql(), "compares two columns")
        try:
            value = self.constant(right)
        except _NotAConstant as exc:
            return Unusable(node.sql(), str(exc))
        if left_term is not None:
            return Compare(op, left_term, value)
        try:
            return _compare_constants(op, self.constant(left), value, node)
        except _NotAConstant:
            return Unusable(node.sql(), f"{left.sql()} is not a column, a function the index unwraps, or a constant")

    def mixes_approximate_and_exact(self, *bounds: exp.Expr) -> bool:
        try:
            values = [self.constant(bound) for bound in bounds]
        except _NotAConstant:
            return False
        numbers = [v for v in values if is_number(v)]
        return any(isinstance(v, float) for v in numbers) and any(not isinstance(v, float) for v in numbers)

    def null_safe_equal(self, node: exp.Expr) -> Expr:
        """`a <=> v` (IS NOT DISTINCT FROM) is never NULL: `a IS NULL` for v NULL, else `a IS NOT NULL AND a = v`.

        Spelled with IS NOT NULL so that NOT of it stays exact in three-valued logic.
        """
        left, right = node.this, node.expression
        if self.term(left) is None:
            left, right = right, left
        column = self.term(left)
        if not isinstance(column, str):
            return Unusable(node.sql(), "IS [NOT] DISTINCT FROM needs a column and a constant")
        try:
            value = self.constant(right)
        except _NotAConstant as exc:
            return Unusable(node.sql(), str(exc))
        same = IsNull(column) if value is None else and_(IsNull(column, negated=True), Compare("=", column, value))
        return same if isinstance(node, exp.NullSafeEQ) else Not(same)

    def is_test(self, node: exp.Is) -> Expr:
        column = self.term(node.this)
        target = node.expression
        if isinstance(target, exp.Null) and column is not None:
            return IsNull(column) if isinstance(column, str) else Unusable(node.sql(), "IS NULL of an expression")
        if isinstance(target, exp.Column) and target.name.upper() == "NAN" and isinstance(column, str):
            return IsNaN(column)
        if isinstance(target, exp.Boolean) and isinstance(column, str):  # `flag IS TRUE`: never NULL
            return and_(IsNull(column, negated=True), Compare("=", column, bool(target.this)))
        return Unusable(node.sql(), "IS test not supported by the index")

    def in_list(self, node: exp.In) -> Expr:
        column = self.term(node.this)
        if column is None or node.args.get("query") or not node.expressions:
            return Unusable(node.sql(), "IN needs a column and a list of constants")
        try:
            values = tuple(self.constant(v) for v in node.expressions)
        except _NotAConstant as exc:
            return Unusable(node.sql(), str(exc))
        return In(column, values)

    def like(self, node: exp.Expr) -> Expr:
        escape = None
        if isinstance(node, exp.Escape):
            try:
                escape = self.constant(node.expression)
            except _NotAConstant as exc:
                return Unusable(node.sql(), str(exc))
            if not isinstance(escape, str) or len(escape) != 1:
                raise UserError(f"ESCAPE must be a single character in {node.sql()!r}")
            node = node.this
        if not isinstance(node, (exp.Like, exp.ILike)):
            return Unusable(node.sql(), f"{type(node).__name__} is not supported by the index")
        kind = "ilike" if isinstance(node, exp.ILike) else "like"
        subject = node.this
        if kind == "like" and isinstance(subject, exp.Lower) and self.lower_case_pattern(node.expression, escape):
            kind, subject = "ilike", subject.this
        leaf = self.pattern(kind, subject, node.expression, node, escape)
        return Not(leaf) if node.args.get("negate") else leaf

    def lower_case_pattern(self, pattern: exp.Expr, escape: str | None) -> bool:
        """Whether `lower(c) LIKE pattern` is `c ILIKE pattern`: ILIKE is LIKE of both sides lowered (Spark:
        `Lower(c) LIKE Lower(p)`; DuckDB alike), and lowering an ASCII pattern without capitals, whose escape
        character has no case, leaves it as it is, so the two are the same predicate, NOT included."""
        try:
            text = self.constant(pattern)
        except _NotAConstant:
            return False
        uncased_escape = escape is None or (escape.isascii() and escape.lower() == escape.upper())
        return isinstance(text, str) and text.isascii() and text == text.lower() and uncased_escape

    def pattern(
        self,
        kind: str,
        subject: exp.Expr,
        pattern: exp.Expr,
        node: exp.Expr,
        escape: str | None = None,
    ) -> Expr:
        if not isinstance(subject, exp.Column):
            return Unusable(node.sql(), "pattern matching needs a column on the left")
        try:
            text = self.constant(pattern)
        except _NotAConstant as exc:
            return Unusable(node.sql(), str(exc))
        if text is None:
            return NULL
        if not isinstance(text, str):
            return Unusable(node.sql(), "the pattern is not a string")
        return Pattern(kind, subject.name, text, escape=escape)

    def term(self, node: exp.Expr) -> str | Transform | None:
        """A column, or an order-preserving function of one column the binder can unwrap; None otherwise."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Column):
            return node.name
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Column):
            if node.to.this == exp.DataType.Type.DATE:
                return Transform("date", node.this.name)
            return None
        if isinstance(node, (exp.DateTrunc, exp.TimestampTrunc)) and isinstance(node.this, exp.Column):
            unit = node.args.get("unit")
            name = (unit.name if isinstance(unit, (exp.Literal, exp.Var)) else "").lower()
            return Transform("trunc", node.this.name, name) if name in TRUNC_UNITS else None
        if type(node) in _FIELD_FUNCTIONS and isinstance(node.this, exp.Column):
            return Transform(_FIELD_FUNCTIONS[type(node)], node.this.name)
        if isinstance(node, (exp.Add, exp.Sub)):
            column, other, sign = node.left, node.right, 1
            if isinstance(node, exp.Sub):
                sign = -1
            elif not isinstance(column, exp.Column):
                column, other = other, column
            if not isinstance(column, exp.Column):
                return None
            try:
                constant = self.constant(other)
            except _NotAConstant:
                return None
            if isinstance(constant, (int, Decimal, Fraction, Interval)) and not isinstance(constant, bool):
                return Transform("add", column.name, constant if sign > 0 else -constant)
        return None

    # -- constants --------------------------------------------------------------------------------------------

    def constant(self, node: exp.Expr) -> Any:
        """Fold a constant expression to a typed Python value (see model.py), or raise _NotAConstant."""
        if isinstance(node, exp.Paren):
            return self.constant(node.this)
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Literal):
            return node.this if node.is_string else _number_literal(node.this)
        if isinstance(node, exp.Neg):
            return _negate(self.constant(node.this), node)
        if isinstance(node, exp.Cast):
            return _cast(self.constant(node.this), node)
        if isinstance(node, exp.Interval):
            return _interval(node, self.constant(node.this) if node.this is not None else None)
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
            return _arithmetic(type(node), self.constant(node.left), self.constant(node.right), node)
        if isinstance(node, exp.CurrentDate):
            return self.clock.local_now().date()
        if isinstance(node, exp.CurrentTimestamp) or (
            isinstance(node, exp.Anonymous) and str(node.this).upper() == "NOW" and not node.expressions
        ):
            return self.clock.local_now()
        if type(node) in _COMPARISON_NODES:
            result = _compare_constants(
                _COMPARISON_NODES[type(node)], self.constant(node.this), self.constant(node.expression), node
            )
            if isinstance(result, Unusable):
                raise _NotAConstant(result.reason)
            return result.value
        raise _NotAConstant(f"{node.sql()} is not a constant")


def _number_literal(text: str) -> int | Decimal | float:
    """A numeric literal's value and type, as Spark, DuckDB, Trino and the SQL standard read it: with an exponent
    (`1.01e0`) it is an approximate DOUBLE; without, an exact integer or DECIMAL, unless it has more digits than a
    DECIMAL holds (38), which makes it a DOUBLE too."""
    if "e" in text.lower():
        return float(text)
    number = int(text) if re.fullmatch(r"\d+", text) else Decimal(text)
    if isinstance(number, Decimal):
        digits = max(len(number.as_tuple().digits), -int(number.as_tuple().exponent))
    else:
        digits = len(text.lstrip("0"))
    return float(text) if digits > _MAX_DECIMAL_DIGITS else number


def _compare_constants(op: str, a: Any, b: Any, node: exp.Expr) -> Const | Unusable:
    if a is None or b is None:
        return NULL
    if is_number(a) and is_number(b) and (isinstance(a, float) or isinstance(b, float)):
        return _compare_approximate_constants(op, a, b, node)
    if isinstance(a, str) != isinstance(b, str):
        return Unusable(node.sql(), "comparison of a string with a non-string constant (engines cast differently)")
    if isinstance(a, dt.datetime) != isinstance(b, dt.datetime):  # a date meets a timestamp as its midnight
        a, b = (as_datetime(v) if isinstance(v, dt.date) else v for v in (a, b))
    try:
        return TRUE if COMPARE[op](a, b) else FALSE
    except TypeError:
        return Unusable(node.sql(), "comparison of constants of different types")


def _compare_approximate_constants(op: str, a: Any, b: Any, node: exp.Expr) -> Const | Unusable:
    """Constants compared in floating point, as the engines do (see approximate.py): `9007199254740993 = 2^53e0` is
    TRUE. A FLOAT meets an exact number in DOUBLE in Spark (ANSI mode; decimals always) and in FLOAT in DuckDB:
    folded only where both readings agree."""
    doubles = any(isinstance(v, float) and bits_of(v) == DOUBLE for v in (a, b))
    only_floats = all(isinstance(v, float) for v in (a, b))
    readings = [DOUBLE] if doubles else [FLOAT] if only_floats else [FLOAT, DOUBLE]
    answers = set()
    for bits in readings:
        left, right = as_binary(a, bits), as_binary(b, bits)
        if left is None or right is None or not (left.exact and right.exact):
            return Unusable(node.sql(), "engines may round this constant to floating point differently")
        answers.add(COMPARE[op](left.low, right.low))
    if len(answers) > 1:
        return Unusable(node.sql(), "engines compare FLOAT with exact numbers in different types")
    return TRUE if answers.pop() else FALSE


def _negate(value: Any, node: exp.Expr) -> Any:
    if value is None:
        return None
    if is_number(value) or isinstance(value, Interval):
        return -value
    raise _NotAConstant(f"{node.sql()} is not a number")


def _arithmetic(kind: type, a: Any, b: Any, node: exp.Expr) -> Any:
    if a is None or b is None:
        return None
    if isinstance(a, dt.date) or isinstance(b, dt.date) or isinstance(a, Interval) or isinstance(b, Interval):
        return _temporal_arithmetic(kind, a, b, node)
    if not (is_number(a) and is_number(b)):
        raise _NotAConstant(f"{node.sql()}: arithmetic on non-numbers")
    if isinstance(a, Float32) or isinstance(b, Float32):
        raise _NotAConstant(f"{node.sql()}: FLOAT arithmetic is not folded (engines pick FLOAT or DOUBLE results)")
    if kind is not exp.Mul and b == 0:
        raise _NotAConstant(f"{node.sql()}: division by zero gives NULL, infinity or an error depending on the engine")
    if isinstance(a, float) or isinstance(b, float):
        return _double_arithmetic(kind, a, b, node)
    if kind is exp.Div:
        return _exact_division(a, b, node)
    if kind is exp.Add:
        result = a + b
    elif kind is exp.Sub:
        result = a - b
    elif kind is exp.Mul:
        result = a * b
    else:
        result = a - b * int(Fraction(a) / Fraction(b))
    if isinstance(result, Decimal) and len(result.as_tuple().digits) > _MAX_DECIMAL_DIGITS:
        raise _NotAConstant(f"{node.sql()}: more than {_MAX_DECIMAL_DIGITS} digits (engines round or fail)")
    return result


def _double_arithmetic(kind: type, a: Any, b: Any, node: exp.Expr) -> float:
    """DOUBLE arithmetic: the exact operand converted to DOUBLE first, then one IEEE operation, as the engines do."""
    doubles = [as_binary(v, DOUBLE) for v in (a, b)]
    if any(v is None or not v.exact for v in doubles):
        raise _NotAConstant(f"{node.sql()}: engines may round an operand to DOUBLE differently")
    x, y = (v.low for v in doubles if v is not None)  # a None raised just above
    if kind is exp.Add:
        return x + y
    if kind is exp.Sub:
        return x - y
    if kind is exp.Mul:
        return x * y
    return x / y if kind is exp.Div else math.fmod(x, y)


def _exact_division(a: int | Decimal, b: int | Decimal, node: exp.Expr) -> float:
    """`/` of exact numbers: Spark and DuckDB divide integers in DOUBLE. A decimal quotient is a DECIMAL rounded to at
    least 6 places in Spark but a DOUBLE in DuckDB; even where the values agree (`1.5 / 3`) the types do not, and the
    type decides how a column is compared with it (converted to DOUBLE or not), so it is not folded."""
    if isinstance(a, int) and isinstance(b, int):
        return _double_arithmetic(exp.Div, a, b, node)
    raise _NotAConstant(f"{node.sql()}: decimal division is DECIMAL in Spark, DOUBLE in DuckDB")


def _temporal_arithmetic(kind: type, a: Any, b: Any, node: exp.Expr) -> Any:
    if kind is exp.Add and isinstance(a, Interval) and isinstance(b, dt.date):
        a, b = b, a
    if kind in (exp.Add, exp.Sub) and isinstance(a, dt.date) and isinstance(b, Interval):
        try:
            return add_interval(a, b if kind is exp.Add else -b)
        except ValueError as exc:
            raise _NotAConstant(str(exc)) from None
    if kind in (exp.Add, exp.Sub) and isinstance(a, Interval) and isinstance(b, Interval):
        b = b if kind is exp.Add else -b
        return Interval(a.months + b.months, a.micros + b.micros)
    if kind is exp.Mul and isinstance(b, Interval) and isinstance(a, int):
        a, b = b, a
    if kind is exp.Mul and isinstance(a, Interval) and isinstance(b, int) and not isinstance(b, bool):
        return Interval(a.months * b, a.micros * b)
    raise _NotAConstant(f"{node.sql()}: unsupported date/time arithmetic")


def _interval(node: exp.Interval, amount: Any) -> Interval:
    """INTERVAL '3' DAY, INTERVAL 3 DAYS, INTERVAL '1 month 2 days'."""
    unit = node.args.get("unit")
    if unit is not None:
        parts = [(amount, unit.name)]
    elif isinstance(amount, str):
        tokens = amount.split()
        if len(tokens) % 2:
            raise _NotAConstant(f"{node.sql()}: cannot read the interval")
        parts = list(zip(tokens[::2], tokens[1::2], strict=True))
    else:
        raise _NotAConstant(f"{node.sql()}: cannot read the interval")
    months = micros = 0
    for count, name in parts:
        key = name.lower().removesuffix("s")
        if key not in _INTERVAL_UNITS:
            raise _NotAConstant(f"{node.sql()}: unknown interval unit {name!r}")
        try:
            number = int(str(count).strip())
        except ValueError:
            raise _NotAConstant(f"{node.sql()}: intervals need a whole number") from None
        unit_months, unit_micros = _INTERVAL_UNITS[key]
        months += number * unit_months
        micros += number * unit_micros
    return Interval(months, micros)


def _cast(value: Any, node: exp.Cast) -> Any:
    """Literal CASTs whose result every engine agrees on; others are not folded."""
    if value is None:
        return None
    target = node.to.this
    text = value.strip() if isinstance(value, str) else None
    try:
        if target == exp.DataType.Type.DATE:
            if text is not None:
                return parse_date(text)
            if isinstance(value, dt.datetime) and value.tzinfo is None:
                return value.date()
            if isinstance(value, dt.date):
                return value
        elif target in _TIMESTAMP_TYPES:
            if text is not None:
                value = parse_timestamp(text)
                if value.tzinfo is not None and target in _ZONE_LESS_TIMESTAMP_TYPES:
                    return value.replace(tzinfo=WrittenOffset(value.utcoffset()))
                return value
            if isinstance(value, dt.date):
                return as_datetime(value)
        elif target in _INTEGER_TYPES:
            number = Decimal(text) if text is not None else value
            if is_number(number) and number == int(number):
                return int(number)
            raise _NotAConstant(f"{node.sql()}: engines round fractional values differently")
        elif target == exp.DataType.Type.DECIMAL:
            number = Decimal(text) if text is not None else value
            if is_number(number):
                scale = int(node.to.expressions[1].name) if len(node.to.expressions) > 1 else 0
                exact = Fraction(number) * 10**scale
                if exact.denominator == 1:
                    return Decimal(int(exact)).scaleb(-scale)
            raise _NotAConstant(f"{node.sql()}: rounding to the decimal scale differs by engine")
        elif target in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT):
            return _cast_to_binary(value, DOUBLE if target == exp.DataType.Type.DOUBLE else FLOAT, node)
        elif target in _STRING_TYPES:
            if isinstance(value, str):
                return value
            if isinstance(value, int) and not isinstance(value, bool):
                return str(value)
        elif target == exp.DataType.Type.BOOLEAN:
            if isinstance(value, bool):
                return value
            if text is not None and text.lower() in ("true", "false"):
                return text.lower() == "true"
    except SubMicrosecond as exc:
        raise _NotAConstant(f"{node.sql()}: {exc}") from None
    except (ValueError, InvalidOperation):
        raise UserError(f"invalid {target.value} literal {value!r} in {node.sql()!r}") from None
    raise _NotAConstant(f"{node.sql()}: this cast is not folded")


def _cast_to_binary(value: Any, bits: int, node: exp.Cast) -> float:
    """CAST to DOUBLE or FLOAT/REAL (SQL FLOAT is 32-bit in Spark, DuckDB and Trino's REAL): a text is parsed with
    correct rounding by every engine; an exact number is folded only where every engine rounds it the same way (see
    approximate.py); a DOUBLE rounds to FLOAT correctly everywhere."""
    if isinstance(value, str):
        number = Decimal(value.strip())
        rounded = nearest(Fraction(number), bits) if number.is_finite() else float(number)
        return Float32(rounded) if bits == FLOAT else rounded
    if not is_number(value):
        raise _NotAConstant(f"{node.sql()}: not a number")
    if isinstance(value, float):
        keep = bits == DOUBLE or isinstance(value, Float32) or not math.isfinite(value)
        rounded = float(value) if keep else nearest(Fraction(value), FLOAT)
        return Float32(rounded) if bits == FLOAT else rounded
    double = as_binary(value, DOUBLE)
    if double is None or not double.exact:
        raise _NotAConstant(f"{node.sql()}: engines may round this value to DOUBLE differently")
    rounded = double.low if bits == DOUBLE else nearest(Fraction(value), FLOAT)
    if bits == FLOAT and nearest(Fraction(double.low), FLOAT) != rounded:
        raise _NotAConstant(f"{node.sql()}: DuckDB rounds decimals to FLOAT through DOUBLE, Spark directly")
    if not math.isfinite(rounded):
        raise _NotAConstant(f"{node.sql()}: outside the range of the floating-point type")
    return Float32(rounded) if bits == FLOAT else rounded
