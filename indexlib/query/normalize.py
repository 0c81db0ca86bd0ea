"""NOT push-down and NULL folding: the NOT-free, NULL-free form the binder and the pruning rules take, and the walks
that list a predicate's leaves."""

from __future__ import annotations

from indexlib.query.model import (
    FALSE,
    NEGATED_COMPARISON,
    NULL,
    TRUE,
    And,
    Compare,
    Const,
    Expr,
    In,
    IsNaN,
    IsNull,
    Not,
    Or,
    Pattern,
    Unusable,
    and_,
    or_,
)
from indexlib.query.visitor import ExprVisitor, LeafVisitor


def push_not(expr: Expr) -> Expr:
    """Remove every NOT. Each rule keeps the set of TRUE rows exact in three-valued logic:

    NOT (a op v) = a op' v (both NULL when a or v is NULL); NOT IN <-> IN; NOT IS NULL <-> IS NOT NULL;
    NOT LIKE / NOT RLIKE / NOT starts_with / NOT isnan flip `negated` (NULL stays NULL); De Morgan for AND/OR;
    NOT NULL = NULL; NOT of an unusable part is still unusable.
    """
    return _KEEP.visit(expr)


class _PushNot(ExprVisitor[Expr]):
    """Rewrites a subtree that sits under an even (`negate` False) or odd number of NOTs."""

    def __init__(self, negate: bool) -> None:
        self.negate = negate

    def visit_not(self, expr: Not) -> Expr:
        return (_KEEP if self.negate else _NEGATE).visit(expr.child)

    def visit_and(self, expr: And) -> Expr:
        return (or_ if self.negate else and_)(self.visit(expr.left), self.visit(expr.right))

    def visit_or(self, expr: Or) -> Expr:
        return (and_ if self.negate else or_)(self.visit(expr.left), self.visit(expr.right))

    def visit_const(self, expr: Const) -> Expr:
        if not self.negate or expr.value is None:
            return expr
        return Const(not expr.value)

    def visit_unusable(self, expr: Unusable) -> Expr:
        return expr

    def visit_compare(self, expr: Compare) -> Expr:
        return Compare(NEGATED_COMPARISON[expr.op], expr.column, expr.value) if self.negate else expr

    def visit_in(self, expr: In) -> Expr:
        return In(expr.column, expr.values, not expr.negated) if self.negate else expr

    def visit_is_null(self, expr: IsNull) -> Expr:
        return IsNull(expr.column, not expr.negated) if self.negate else expr

    def visit_is_nan(self, expr: IsNaN) -> Expr:
        return IsNaN(expr.column, not expr.negated) if self.negate else expr

    def visit_pattern(self, expr: Pattern) -> Expr:
        if not self.negate:
            return expr
        return Pattern(expr.kind, expr.column, expr.pattern, not expr.negated, expr.escape)

    # bound nodes only exist after push_not; under no NOT they are left as they are
    def visit_bound_compare(self, expr: Expr) -> Expr:
        return self.unhandled(expr) if self.negate else expr

    visit_bound_field = visit_widened = visit_bound_in = visit_bound_compare


_KEEP, _NEGATE = _PushNot(False), _PushNot(True)


def resolve_nulls(expr: Expr) -> Expr:
    """After `push_not`: NULL can no longer turn TRUE, so it behaves as FALSE; fold it away.

    `a = NULL` and `a NOT IN (.., NULL)` are never TRUE; NULLs inside IN lists are dropped.
    """
    return _ResolveNulls().visit(expr)


class _ResolveNulls(LeafVisitor[Expr]):
    def visit_and(self, expr: And) -> Expr:
        return and_(self.visit(expr.left), self.visit(expr.right))

    def visit_or(self, expr: Or) -> Expr:
        return or_(self.visit(expr.left), self.visit(expr.right))

    def visit_not(self, expr: Not) -> Expr:
        raise ValueError("resolve_nulls needs a NOT-free expression; call push_not first")

    def visit_const(self, expr: Const) -> Expr:
        return FALSE if expr == NULL else expr

    def visit_compare(self, expr: Compare) -> Expr:
        return FALSE if expr.value is None else expr

    def visit_in(self, expr: In) -> Expr:
        if expr.negated and any(v is None for v in expr.values):
            return FALSE
        values = tuple(v for v in expr.values if v is not None)
        return In(expr.column, values, expr.negated) if values else (TRUE if expr.negated else FALSE)

    def visit_leaf(self, expr: Expr) -> Expr:
        return expr


def normalize(expr: Expr) -> Expr:
    """NOT-free, NULL-free form that the binder and the pruning evaluator take."""
    return resolve_nulls(push_not(expr))


def leaves(expr: Expr) -> list[Expr]:
    """The leaves of an expression, left to right (wrappers such as `Widened` count as leaves; constants do not)."""
    return _Leaves().visit(expr)


class _Leaves(LeafVisitor[list[Expr]]):
    def visit_and(self, expr: And | Or) -> list[Expr]:
        return self.visit(expr.left) + self.visit(expr.right)

    visit_or = visit_and

    def visit_not(self, expr: Not) -> list[Expr]:
        return self.visit(expr.child)

    def visit_const(self, expr: Const) -> list[Expr]:
        return []

    def visit_leaf(self, expr: Expr) -> list[Expr]:
        return [expr]


def unusable_parts(expr: Expr) -> list[Unusable]:
    """The parts of an expression the index cannot evaluate, left to right (for explain)."""
    return [leaf for leaf in leaves(expr) if isinstance(leaf, Unusable)]
