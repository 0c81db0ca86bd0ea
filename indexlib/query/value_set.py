"""Value sets: the equality shapes index kinds answer as a whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from indexlib.query.model import And, BoundColumn, BoundCompare, BoundIn, Expr, Or


@dataclass(frozen=True)
class ValueSet:
    """`column IN values` (or `=`), or with `negated` `column NOT IN values` (or `!=`): what index kinds answer
    for equality. Gathered from a disjunction of `=` / conjunction of `!=` on one column, so that NOT IN is judged
    as a whole (a file holding only 'a' and 'b' matches no row of `NOT IN ('a', 'b')`, though it matches `!= 'a'`)."""

    column: BoundColumn
    values: tuple[Any, ...]
    negated: bool = False


def value_set(expr: Expr) -> ValueSet | None:
    """The ValueSet `expr` is exactly (an IN list, or an OR of `=` and IN lists / an AND of `!=` and NOT IN lists,
    all on one column), if any."""
    first = expr
    while isinstance(first, (And, Or)):
        first = first.left
    if isinstance(first, BoundIn):
        column, negated = first.column, first.negated
    elif isinstance(first, BoundCompare) and first.op in ("=", "!="):
        column, negated = first.column, first.op == "!="
    else:
        return None
    joiner, op = (And, "!=") if negated else (Or, "=")
    values: list[Any] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, joiner):
            stack.extend((node.right, node.left))
        elif isinstance(node, BoundCompare) and node.op == op and node.column == column:
            values.append(node.value)
        elif isinstance(node, BoundIn) and node.negated == negated and node.column == column:
            values.extend(node.values)
        else:
            return None
    return ValueSet(column, tuple(values), negated)
