"""Value sets: the equality shapes index kinds answer as a whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from indexlib.query.model import And, BoundColumn, BoundCompare, Expr, Or


@dataclass(frozen=True)
class ValueSet:
    """`column IN values` (or `=`), or with `negated` `column NOT IN values` (or `!=`): what index kinds answer
    for equality. Gathered from a disjunction of `=` / conjunction of `!=` on one column, so that NOT IN is judged
    as a whole (a file holding only 'a' and 'b' matches no row of `NOT IN ('a', 'b')`, though it matches `!= 'a'`)."""

    column: BoundColumn
    values: tuple[Any, ...]
    negated: bool = False


def value_set(expr: Expr) -> ValueSet | None:
    """The ValueSet `expr` is exactly (an OR of `=` or an AND of `!=` on one column), if any."""
    first = expr
    while isinstance(first, (And, Or)):
        first = first.left
    if not isinstance(first, BoundCompare) or first.op not in ("=", "!="):
        return None
    joiner = Or if first.op == "=" else And
    values: list[Any] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, joiner):
            stack.extend((node.right, node.left))
        elif isinstance(node, BoundCompare) and node.op == first.op and node.column == first.column:
            values.append(node.value)
        else:
            return None
    return ValueSet(first.column, tuple(values), negated=first.op == "!=")
