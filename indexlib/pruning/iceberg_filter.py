"""Translate a bound predicate into a pyiceberg row filter, for partition pruning and for comparing with Iceberg's
own planning.

Two readings, because pyiceberg's projections need different guarantees:

* inclusive (`to_iceberg_filter`): a superset of the rows that match. Parts we cannot translate exactly become
  AlwaysTrue. Used with inclusive projection ("might a file in this partition match?").
* strict (`to_strict_iceberg_filter`): exact where we can, AlwaysFalse elsewhere. Used with strict projection
  ("does every row in this partition match?"); pyiceberg evaluates `null != v` as true where SQL says unknown, so
  `partition_pruning` guards every negative leaf with `IS NOT NULL` before projecting.
"""

from __future__ import annotations

from collections.abc import Collection

# mypy takes the pydantic fields of pyiceberg's predicates for their constructor, so it rejects the positional calls
# pyiceberg documents (apache/iceberg-python#3101): those calls carry a `type: ignore` naming the issue.
from pyiceberg import expressions as ice
from pyiceberg.types import DoubleType, FloatType

from indexlib.query.model import (
    And,
    BoundCompare,
    BoundField,
    BoundIn,
    Const,
    Expr,
    IsNaN,
    IsNull,
    Or,
    Pattern,
    Unusable,
    Widened,
)
from indexlib.query.patterns import pattern_shape
from indexlib.query.visitor import ExprVisitor

MAX_TRANSLATED_VALUES = 1_000  # IN lists up to this length are projected as sets, longer ones as their range

_LEAF = {
    "=": ice.EqualTo,
    "!=": ice.NotEqualTo,
    "<": ice.LessThan,
    "<=": ice.LessThanOrEqual,
    ">": ice.GreaterThan,
    ">=": ice.GreaterThanOrEqual,
}


def to_iceberg_filter(expr: Expr, columns: Collection[int] | None = None) -> ice.BooleanExpression:
    """The inclusive reading; with `columns` (field ids), leaves on other columns are AlwaysTrue, which is what
    their inclusive projection onto partitions of those columns is anyway (and skips translating, say, a
    100,000-value IN list on a column no partition is derived from)."""
    return _ToIceberg(strict=False, columns=columns).visit(expr)


def to_strict_iceberg_filter(expr: Expr, columns: Collection[int] | None = None) -> ice.BooleanExpression:
    """The strict reading; with `columns`, leaves on other columns are AlwaysFalse (their strict projection)."""
    return _ToIceberg(strict=True, columns=columns).visit(expr)


class _ToIceberg(ExprVisitor[ice.BooleanExpression]):
    """A bound predicate as a pyiceberg row filter; what cannot be translated exactly is `unknown` (AlwaysTrue for
    the inclusive reading, AlwaysFalse for the strict one)."""

    def __init__(self, strict: bool, columns: Collection[int] | None = None) -> None:
        self.strict = strict
        self.columns = None if columns is None else frozenset(columns)
        self.unknown: ice.BooleanExpression = ice.AlwaysFalse() if strict else ice.AlwaysTrue()

    def visit(self, expr: Expr) -> ice.BooleanExpression:
        column = getattr(expr, "column", None)
        if self.columns is not None and column is not None and column.field_id not in self.columns:
            return self.unknown
        return super().visit(expr)

    def visit_const(self, expr: Const) -> ice.BooleanExpression:
        return ice.AlwaysTrue() if expr.value else ice.AlwaysFalse()

    def visit_and(self, expr: And) -> ice.BooleanExpression:
        return ice.And(self.visit(expr.left), self.visit(expr.right))

    def visit_or(self, expr: Or) -> ice.BooleanExpression:
        return ice.Or(self.visit(expr.left), self.visit(expr.right))

    def visit_widened(self, expr: Widened) -> ice.BooleanExpression:
        return self.unknown if self.strict else self.visit(expr.child)

    def visit_is_null(self, expr: IsNull) -> ice.BooleanExpression:
        return (ice.NotNull if expr.negated else ice.IsNull)(expr.column.name)  # type: ignore[call-arg]  # pyiceberg#3101

    def visit_is_nan(self, expr: IsNaN) -> ice.BooleanExpression:
        if expr.negated:  # NOT isnan of a NULL is TRUE in Spark, NULL in DuckDB: neither reading is exact
            return self.unknown
        if isinstance(expr.column.type, (FloatType, DoubleType)):
            return ice.IsNaN(expr.column.name)  # type: ignore[call-arg]  # pyiceberg#3101
        return ice.AlwaysFalse()

    def visit_pattern(self, expr: Pattern) -> ice.BooleanExpression:
        if expr.negated:
            return self.unknown
        shape = pattern_shape(expr.kind, expr.pattern, expr.escape)
        # the `type: ignore`s below: pyiceberg#3101 (see the imports)
        if shape.exact == "equal":
            return ice.EqualTo(expr.column.name, shape.prefix)  # type: ignore[call-arg, arg-type]
        if shape.exact == "prefix" or not self.strict:
            return (
                ice.StartsWith(expr.column.name, shape.prefix)  # type: ignore[call-arg, arg-type]
                if shape.prefix
                else ice.NotNull(expr.column.name)  # type: ignore[call-arg]
            )
        return self.unknown

    def visit_bound_compare(self, expr: BoundCompare) -> ice.BooleanExpression:
        if isinstance(expr.column.type, FloatType):
            return self.unknown  # the double literal would be rounded to a float by pyiceberg: not translated
        # physical values (days, micros, Decimal, str, bytes, bool, double) bind to pyiceberg literals as they are
        return _LEAF[expr.op](expr.column.name, expr.value)

    def visit_bound_in(self, expr: BoundIn) -> ice.BooleanExpression:
        if isinstance(expr.column.type, FloatType):
            return self.unknown  # as for one comparison: pyiceberg would round the double literals to floats
        if len(expr.values) > MAX_TRANSLATED_VALUES:
            # pyiceberg binds a set's literals one by one, again for every projection (~10 s for 100,000 values).
            # A longer list is lifted as its range (a superset: inclusive only); the min/max stage then tests the
            # set itself, which decides identity partitions (min = max) exactly.
            if expr.negated or self.strict:
                return self.unknown
            low, high = expr.values[0], expr.values[-1]
            # the `type: ignore`s below: pyiceberg#3101 (see the imports)
            return ice.And(
                ice.GreaterThanOrEqual(expr.column.name, low),  # type: ignore[call-arg, arg-type]
                ice.LessThanOrEqual(expr.column.name, high),  # type: ignore[call-arg, arg-type]
            )
        members = ice.NotIn if expr.negated else ice.In
        return members(expr.column.name, expr.values)  # type: ignore[call-arg, arg-type]  # pyiceberg#3101

    def visit_bound_field(self, expr: BoundField) -> ice.BooleanExpression:
        return self.unknown  # month/day/hour of a column: no pyiceberg term (partition intervals decide it: statistics/partition_values.py)

    def visit_unusable(self, expr: Unusable) -> ice.BooleanExpression:
        return self.unknown
