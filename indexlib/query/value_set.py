"""Value sets: the equality shapes index kinds answer as a whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from indexlib.query.model import BoundColumn, BoundCompare, BoundIn, Expr, Pattern
from indexlib.query.patterns import pattern_shape


@dataclass(frozen=True)
class ValueSet:
    """`column IN values` (or `=`), or with `negated` `column NOT IN values` (or `!=`): what index kinds answer
    for equality, with the values sorted and distinct. The binder gathers a disjunction of `=` / conjunction of `!=`
    on one column into one set, so that NOT IN is judged as a whole (a file holding only 'a' and 'b' matches no row
    of `NOT IN ('a', 'b')`, though it matches `!= 'a'`)."""

    column: BoundColumn
    values: tuple[Any, ...]
    negated: bool = False


def value_set(expr: Expr) -> ValueSet | None:
    """The ValueSet a leaf is: an IN list (the binder makes every IN list, and every OR of `=` / AND of `!=` on one
    column, one `BoundIn`), or a single `=` / `!=`."""
    if isinstance(expr, BoundIn):
        return ValueSet(expr.column, expr.values, expr.negated)
    if isinstance(expr, BoundCompare) and expr.op in ("=", "!="):
        return ValueSet(expr.column, (expr.value,), negated=expr.op == "!=")
    return None


def equality_literals(leaf: ValueSet | Pattern | Expr) -> list[Any] | None:
    """Values one of which a matching row must hold (`=`, IN, LIKE without wildcards); None when the leaf is not
    such a positive equality. What filters of a file's values (Bloom filters, the key index) can answer."""
    if isinstance(leaf, Pattern):
        shape = pattern_shape(leaf.kind, leaf.pattern, leaf.escape)
        return [shape.prefix] if shape.exact == "equal" and not leaf.negated else None
    if isinstance(leaf, ValueSet) and not leaf.negated:
        return list(leaf.values)
    return None
