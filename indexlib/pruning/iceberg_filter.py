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

from pyiceberg import expressions as ice
from pyiceberg.types import DoubleType, FloatType

from indexlib.query.model import And, BoundCompare, Const, Expr, IsNaN, IsNull, Or, Pattern, Widened
from indexlib.query.patterns import pattern_shape

_LEAF = {
    "=": ice.EqualTo,
    "!=": ice.NotEqualTo,
    "<": ice.LessThan,
    "<=": ice.LessThanOrEqual,
    ">": ice.GreaterThan,
    ">=": ice.GreaterThanOrEqual,
}


def to_iceberg_filter(expr: Expr) -> ice.BooleanExpression:
    return _translate(expr, strict=False)


def to_strict_iceberg_filter(expr: Expr) -> ice.BooleanExpression:
    return _translate(expr, strict=True)


def _translate(expr: Expr, strict: bool) -> ice.BooleanExpression:
    unknown = ice.AlwaysFalse() if strict else ice.AlwaysTrue()
    if isinstance(expr, Const):
        return ice.AlwaysTrue() if expr.value else ice.AlwaysFalse()
    if isinstance(expr, And):
        return ice.And(_translate(expr.left, strict), _translate(expr.right, strict))
    if isinstance(expr, Or):
        return ice.Or(_translate(expr.left, strict), _translate(expr.right, strict))
    if isinstance(expr, Widened):
        return unknown if strict else _translate(expr.child, strict)
    if isinstance(expr, IsNull):
        return (ice.NotNull if expr.negated else ice.IsNull)(expr.column.name)
    if isinstance(expr, IsNaN):
        if expr.negated:  # NOT isnan of a NULL is TRUE in Spark, NULL in DuckDB: neither reading is exact
            return unknown
        return (
            ice.IsNaN(expr.column.name) if isinstance(expr.column.type, (FloatType, DoubleType)) else ice.AlwaysFalse()
        )
    if isinstance(expr, Pattern) and not expr.negated:
        shape = pattern_shape(expr.kind, expr.pattern, expr.escape)
        if shape.exact == "equal":
            return ice.EqualTo(expr.column.name, shape.prefix)
        if shape.exact == "prefix" or not strict:
            return ice.StartsWith(expr.column.name, shape.prefix) if shape.prefix else ice.NotNull(expr.column.name)
        return unknown
    if isinstance(expr, BoundCompare) and not isinstance(expr.column.type, FloatType):
        # physical values (days, micros, Decimal, str, bytes, bool, double) bind to pyiceberg literals as they are;
        # float columns would round the double literal: not translated
        return _LEAF[expr.op](expr.column.name, expr.value)
    return unknown
