"""Same-column conjunctions judged as one interval: `x >= 680 AND x <= 700` is one range of x, not two leaves
judged apart.

Judged apart, each leaf of such a conjunction keeps a file for its own reason: `x >= 680` keeps every file that may
hold NaN (NaN is above every number in Spark SQL), `x <= 700` every file whose lower bound is at most 700, so a
file of [1, 100] and a NaN is kept though no row of it lies in [680, 700], and NaN lies outside every bounded range.
`conjoined` rewrites a bound, normalised (NOT-free) predicate, on each AND chain's direct operands that compare one
numeric column with literals (`BoundCompare` with `=`, `<`, `<=`, `>`, `>=`, and `BoundIn`, not negated):

1. Empty range. The tightest lower and upper bounds of the chain's comparisons on x (an `=` is both) leave no value
   between them: no row makes the chain TRUE (a non-NULL, non-NaN x is not in an empty range; NaN makes the upper
   comparison FALSE; NULL makes every comparison NULL), so the chain is FALSE.
2. IN inside the range. An IN keeps only its values within the range: on every row, `x IN S AND range` and
   `x IN S' AND range` agree (a value of S outside the range makes the range comparison FALSE either way; NULL and
   NaN match no literal). No value left: the chain is FALSE. One value left: `=`.
3. NaN outside the range. Where the chain holds a comparison FALSE on every NaN row of x (`<`, `<=`, `=`, IN: in
   Spark SQL NaN is above every number and equals no number; under IEEE every comparison with NaN but `!=` is
   FALSE), the chain is FALSE on every NaN row, so its `>`, `>=` and `!=` on x (the comparisons NaN may make TRUE)
   are judged on the non-NaN values alone (`BoundCompare.nan_excluded`): `a AND u` equals `(a AND NOT isnan(x))
   AND u` on every row when u is FALSE wherever x is NaN.

Only literal comparisons are folded (Python's ordering of the physical values, where -0.0 equals 0.0 as in SQL);
the rules need no statistics, so they hold for every container (files, row groups) and every evidence. Any other
operand (a widened leaf, an OR, a pattern) is left as it came, and its own children are rewritten the same way. The
tree is NOT-free (query/normalize.py), so a chain read as FALSE where it is never TRUE changes no kept container.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from pyiceberg.types import DoubleType, FloatType

from indexlib.query.model import FALSE, And, BoundCompare, BoundIn, Expr, Or, and_, operands, or_

_BELOW = frozenset({"<", "<="})  # FALSE on NaN: bound the range above
_ABOVE = frozenset({">", ">="})
_NAN_TRUE = frozenset({">", ">=", "!="})  # the comparisons NaN may make TRUE (Spark SQL)


def conjoined(expr: Expr) -> Expr:
    """`expr` with every AND chain's same-column comparisons judged as one interval (module docstring); a subtree
    no rule changes is returned as it came (the same object, its shape kept)."""
    if not isinstance(expr, And | Or):
        return expr
    parts = operands(expr, type(expr))
    made = [conjoined(part) for part in parts]
    changed = any(new is not old for new, old in zip(made, parts, strict=True))
    if isinstance(expr, Or):
        return or_(*made) if changed else expr
    chained = _chain(made)
    if chained is not None:
        return chained
    return and_(*made) if changed else expr


def _orderable(leaf: Expr) -> bool:
    """A comparison with literals the rules can order: numbers (ints, floats but NaN, decimals; dates and timestamps
    are ints in the physical domain), never booleans or text."""
    values = (leaf.value,) if isinstance(leaf, BoundCompare) else leaf.values if isinstance(leaf, BoundIn) else ()
    return bool(values) and all(
        isinstance(v, int | float | Decimal)
        and not isinstance(v, bool)
        and not (isinstance(v, float) and math.isnan(v))
        for v in values
    )


def _floating(leaf: BoundCompare) -> bool:
    """A FLOAT or DOUBLE column: the only kind that holds NaN (rule 3 has nothing to say of any other)."""
    return isinstance(leaf.column.type, FloatType | DoubleType)


@dataclass
class _Range:
    """The tightest bounds of a chain's comparisons on one column: (value, inclusive), None where unbounded."""

    lower: tuple[Any, bool] | None = None
    upper: tuple[Any, bool] | None = None
    nan_false: bool = False  # some comparison is FALSE on every NaN row

    def take(self, op: str, value: Any) -> None:
        if op in ("=", ">", ">="):
            bound = (value, op != ">")
            if self.lower is None or (value, not bound[1]) > (self.lower[0], not self.lower[1]):
                self.lower = bound
        if op in ("=", "<", "<="):
            bound = (value, op != "<")
            if self.upper is None or (value, bound[1]) < (self.upper[0], self.upper[1]):
                self.upper = bound
        self.nan_false |= op in _BELOW or op == "="

    def empty(self) -> bool:
        if self.lower is None or self.upper is None:
            return False
        (low, low_in), (high, high_in) = self.lower, self.upper
        return bool(low > high or (low == high and not (low_in and high_in)))

    def holds(self, value: Any) -> bool:
        if self.lower is not None and not (value > self.lower[0] or (self.lower[1] and value == self.lower[0])):
            return False
        return self.upper is None or bool(value < self.upper[0] or (self.upper[1] and value == self.upper[0]))


def _chain(parts: list[Expr]) -> Expr | None:
    """The AND of `parts` with the rules applied, or None where no rule changes any of them."""
    ranges: dict[int, _Range] = {}
    for part in parts:
        if isinstance(part, BoundCompare) and part.op in ("=", *_BELOW, *_ABOVE) and _orderable(part):
            ranges.setdefault(part.column.field_id, _Range()).take(part.op, part.value)
        elif isinstance(part, BoundIn) and not part.negated and _orderable(part):
            ranges.setdefault(part.column.field_id, _Range()).nan_false = True
    if not ranges:
        return None
    if any(found.empty() for found in ranges.values()):
        return FALSE  # rule 1
    rewritten: list[Expr] = []
    for part in parts:
        found = ranges.get(part.column.field_id) if isinstance(part, BoundCompare | BoundIn) else None
        if found is None:
            rewritten.append(part)
        elif isinstance(part, BoundIn) and not part.negated and _orderable(part):
            within = tuple(v for v in part.values if found.holds(v))  # rule 2
            if not within:
                return FALSE
            if len(within) == 1:
                rewritten.append(BoundCompare("=", part.column, within[0]))
            else:
                rewritten.append(part if len(within) == len(part.values) else replace(part, values=within))
        elif isinstance(part, BoundCompare) and part.op in _NAN_TRUE and found.nan_false and _floating(part):
            rewritten.append(replace(part, nan_excluded=True))  # rule 3
        else:
            rewritten.append(part)
    if all(new is old for new, old in zip(rewritten, parts, strict=True)):
        return None
    return and_(*rewritten)
