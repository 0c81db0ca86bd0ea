"""The SQL predicate of a lookup as an exact pyiceberg row filter, for the Arrow scan target (scans/arrow.py), which
reads Iceberg tables with pyiceberg's own reader, and the Spark scan's pyiceberg reads (scans/spark.py).

The filter has SQL's meaning (`sql_semantics`: negative leaves unknown on NULL, NaN above every number); a predicate
that has no exact translation (a LIKE that is not a prefix, month(ts) = 3, a FLOAT column, ...) is refused with one
line rather than read wrongly (the Arrow target then reads through DuckDB). A pyiceberg row filter a scan was asked
with is applied as given, so the rows are those of `table.scan(row_filter=...)`; the lookup prunes with a predicate
that holds for at least those rows (query/from_iceberg.py) and proves no file all-match.
"""

from __future__ import annotations

from typing import cast

from pyiceberg import expressions as ice
from pyiceberg.types import DoubleType, FloatType

from indexlib.errors import UnsupportedFeature, UserError
from indexlib.lookup import LookupResult
from indexlib.pruning.iceberg_filter import to_iceberg_filter, to_strict_iceberg_filter
from indexlib.query.model import Expr


def row_filter(result: LookupResult) -> ice.BooleanExpression:
    """The lookup's predicate as an exact pyiceberg row filter, with the SQL meaning the other scans give it
    (`sql_semantics`)."""
    bound = result.bound
    if bound is None:
        raise UserError(f"table {result.table}: the lookup has no bound predicate to filter rows with")
    strict, inclusive = to_strict_iceberg_filter(bound), to_iceberg_filter(bound)
    if strict != inclusive:
        raise UnsupportedFeature(
            f"table {result.table}: {result.where!r} has no exact pyiceberg row filter "
            f"(pyiceberg would read it as {inclusive}); filter the rows of the kept files yourself"
        )
    floating = {
        leaf.column.name  # type: ignore[attr-defined]  # a leaf the condition below found a `column` on
        for leaf in _leaves(bound)
        if isinstance(getattr(getattr(leaf, "column", None), "type", None), (FloatType, DoubleType))
    }
    return sql_semantics(strict, floating)


def _leaves(expr: Expr) -> list[Expr]:
    children = [getattr(expr, name) for name in ("left", "right", "child") if hasattr(expr, name)]
    return [leaf for child in children for leaf in _leaves(child)] if children else [expr]


_NEGATIVE = (ice.NotEqualTo, ice.NotIn, ice.NotStartsWith, ice.NotNaN)
_ABOVE = (ice.GreaterThan, ice.GreaterThanOrEqual)


def sql_semantics(expr: ice.BooleanExpression, floating: set[str]) -> ice.BooleanExpression:
    """A pyiceberg filter of NOT-free SQL leaves (the binder pushed NOT into them), read as SQL reads the WHERE:

    - A row is kept where the WHERE is TRUE; a leaf over NULL is unknown. With NOT pushed into the leaves, AND and
      OR keep a row exactly when they do with every unknown leaf read as FALSE (Kleene logic is monotone), so each
      leaf must be FALSE on NULL. pyiceberg reads a negative leaf (`!=`, NOT IN, NOT STARTS WITH, NOT isnan) as TRUE
      on NULL, and on a file without the column (added since) as TRUE for every row: each gets `IS NOT NULL`.
    - NaN is greater than every number and equal to itself in SQL (Spark, DuckDB), and unordered in pyiceberg's
      comparisons (IEEE): `c > v` and `c >= v` on a FLOAT / DOUBLE column also hold for NaN. `<`, `<=`, `=` and `!=`
      agree on NaN already (the binder refuses NaN literals).
    - -0.0 equals 0.0 in SQL and in pyarrow's comparisons, but not in pyarrow's `is_in`, which pyiceberg's IN and
      NOT IN use (it hashes the bits): a set holding zero also matches the other zero by an `=` (`!=` for NOT IN)."""
    if isinstance(expr, ice.And):
        return ice.And(sql_semantics(expr.left, floating), sql_semantics(expr.right, floating))
    if isinstance(expr, ice.Or):
        return ice.Or(sql_semantics(expr.left, floating), sql_semantics(expr.right, floating))
    zero = isinstance(expr, ice.SetPredicate) and _name(expr) in floating and any(v.value == 0 for v in expr.literals)
    # mypy reads pyiceberg's predicates' constructors as pydantic's keyword-only ones, not as their own __init__
    # (term, literal), apache/iceberg-python#3101: the type: ignores below
    if isinstance(expr, ice.In) and zero:
        return ice.Or(expr, ice.EqualTo(_name(expr), 0.0))  # type: ignore[call-arg, arg-type]
    if isinstance(expr, _NEGATIVE):
        leaf = (
            ice.And(expr, ice.NotEqualTo(_name(expr), 0.0))  # type: ignore[call-arg, arg-type]
            if zero
            else expr
        )
        return ice.And(ice.NotNull(_name(expr)), leaf)  # type: ignore[call-arg, arg-type]
    if isinstance(expr, _ABOVE) and _name(expr) in floating:
        return ice.Or(expr, ice.IsNaN(_name(expr)))  # type: ignore[call-arg, arg-type]
    return expr


def _name(predicate: ice.UnboundPredicate) -> str:
    # pyiceberg types a predicate's term as any `UnboundTerm`; its one kind of unbound term is a `Reference`
    return cast(ice.Reference, predicate.term).name
