"""Translate a bound predicate into a pyiceberg row filter, to compare with Iceberg's own planning.

Iceberg's filter is inclusive, so every part we cannot translate exactly becomes AlwaysTrue (a superset).
"""

from __future__ import annotations

from pyiceberg import expressions as ice
from pyiceberg.types import FloatType

from indexlib.binding import BoundCompare, Widened
from indexlib.predicate import And, Const, Expr, IsNull, Or

_LEAF = {
    "=": ice.EqualTo,
    "!=": ice.NotEqualTo,
    "<": ice.LessThan,
    "<=": ice.LessThanOrEqual,
    ">": ice.GreaterThan,
    ">=": ice.GreaterThanOrEqual,
}


def to_iceberg_filter(expr: Expr) -> ice.BooleanExpression:
    if isinstance(expr, Const):
        return ice.AlwaysTrue() if expr.value else ice.AlwaysFalse()
    if isinstance(expr, And):
        return ice.And(to_iceberg_filter(expr.left), to_iceberg_filter(expr.right))
    if isinstance(expr, Or):
        return ice.Or(to_iceberg_filter(expr.left), to_iceberg_filter(expr.right))
    if isinstance(expr, Widened):
        return to_iceberg_filter(expr.child)
    if isinstance(expr, IsNull):
        return (ice.NotNull if expr.negated else ice.IsNull)(expr.column.name)
    if isinstance(expr, BoundCompare) and not isinstance(expr.column.type, FloatType):
        # physical values (days, micros, Decimal, str, bytes, bool, double) bind to pyiceberg literals as they are;
        # float columns would round the double literal: left to AlwaysTrue
        return _LEAF[expr.op](expr.column.name, expr.value)
    return ice.AlwaysTrue()
