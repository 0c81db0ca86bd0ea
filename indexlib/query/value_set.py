"""Value sets: the equality shapes index kinds answer as a whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from indexlib.query.model import BoundColumn, BoundCompare, BoundIn, Expr


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
