"""One visitor base for every operation over a predicate tree (as pyiceberg's expression visitors).

A visitor has one method per node type. The base method of each raises, naming the visitor and the node, so a visitor
that meets a node it was not written for fails loudly instead of falling through to some default; and a node type
missing from `_METHODS` fails in `visit` itself (the test of this module checks every node type is listed).
Visitors recurse by calling `self.visit` on the children they want, so each decides its own order and context.
"""

from __future__ import annotations

from typing import Generic, NoReturn, TypeVar

from indexlib.query.model import (
    And,
    BoundCompare,
    BoundField,
    BoundIn,
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
    Widened,
)

T = TypeVar("T")

_METHODS: dict[type[Expr], str] = {
    Const: "visit_const",
    Unusable: "visit_unusable",
    And: "visit_and",
    Or: "visit_or",
    Not: "visit_not",
    Compare: "visit_compare",
    In: "visit_in",
    IsNull: "visit_is_null",
    IsNaN: "visit_is_nan",
    Pattern: "visit_pattern",
    BoundCompare: "visit_bound_compare",
    BoundField: "visit_bound_field",
    BoundIn: "visit_bound_in",
    Widened: "visit_widened",
}


class ExprVisitor(Generic[T]):
    def visit(self, expr: Expr) -> T:
        method = _METHODS.get(type(expr))
        if method is None:
            raise TypeError(f"{type(expr).__name__} is not a node of the query language: add it to ExprVisitor")
        return getattr(self, method)(expr)

    def unhandled(self, expr: Expr) -> NoReturn:
        raise TypeError(f"{type(self).__name__} does not handle {type(expr).__name__} nodes: {expr}")

    def visit_const(self, expr: Const) -> T:
        self.unhandled(expr)

    def visit_unusable(self, expr: Unusable) -> T:
        self.unhandled(expr)

    def visit_and(self, expr: And) -> T:
        self.unhandled(expr)

    def visit_or(self, expr: Or) -> T:
        self.unhandled(expr)

    def visit_not(self, expr: Not) -> T:
        self.unhandled(expr)

    def visit_compare(self, expr: Compare) -> T:
        self.unhandled(expr)

    def visit_in(self, expr: In) -> T:
        self.unhandled(expr)

    def visit_is_null(self, expr: IsNull) -> T:
        self.unhandled(expr)

    def visit_is_nan(self, expr: IsNaN) -> T:
        self.unhandled(expr)

    def visit_pattern(self, expr: Pattern) -> T:
        self.unhandled(expr)

    def visit_bound_compare(self, expr: BoundCompare) -> T:
        self.unhandled(expr)

    def visit_bound_field(self, expr: BoundField) -> T:
        self.unhandled(expr)

    def visit_bound_in(self, expr: BoundIn) -> T:
        self.unhandled(expr)

    def visit_widened(self, expr: Widened) -> T:
        self.unhandled(expr)


class LeafVisitor(ExprVisitor[T]):
    """A visitor that treats every node other than AND, OR and NOT alike: `visit_leaf`. For operations that only
    collect or rewrite leaves (which leaves, which are unused)."""

    def visit_leaf(self, expr: Expr) -> T:
        self.unhandled(expr)

    def visit_const(self, expr: Const) -> T:
        return self.visit_leaf(expr)

    def visit_unusable(self, expr: Unusable) -> T:
        return self.visit_leaf(expr)

    def visit_compare(self, expr: Compare) -> T:
        return self.visit_leaf(expr)

    def visit_in(self, expr: In) -> T:
        return self.visit_leaf(expr)

    def visit_is_null(self, expr: IsNull) -> T:
        return self.visit_leaf(expr)

    def visit_is_nan(self, expr: IsNaN) -> T:
        return self.visit_leaf(expr)

    def visit_pattern(self, expr: Pattern) -> T:
        return self.visit_leaf(expr)

    def visit_bound_compare(self, expr: BoundCompare) -> T:
        return self.visit_leaf(expr)

    def visit_bound_field(self, expr: BoundField) -> T:
        return self.visit_leaf(expr)

    def visit_bound_in(self, expr: BoundIn) -> T:
        return self.visit_leaf(expr)

    def visit_widened(self, expr: Widened) -> T:
        return self.visit_leaf(expr)
