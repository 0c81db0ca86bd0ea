"""Rules of the visitor base: every node type has a method, and a visitor meeting a node it does not handle fails
loudly instead of answering something."""

from __future__ import annotations

import inspect

import pytest

from indexlib.query import model
from indexlib.query.model import And, Compare, Const, Expr, IsNull
from indexlib.query.normalize import leaves, push_not
from indexlib.query.visitor import _METHODS, ExprVisitor


def test_every_node_type_of_the_model_has_a_visit_method():
    nodes = {cls for _, cls in inspect.getmembers(model, inspect.isclass) if issubclass(cls, Expr) and cls is not Expr}
    assert nodes == set(_METHODS), f"node types without a visit method: {nodes - set(_METHODS)}"
    for node, method in _METHODS.items():
        assert hasattr(ExprVisitor, method), f"ExprVisitor has no {method} for {node.__name__}"


def test_a_visitor_fails_loudly_on_a_node_it_does_not_handle():
    class OnlyConstants(ExprVisitor[bool]):
        def visit_const(self, expr: Const) -> bool:
            return bool(expr.value)

    assert OnlyConstants().visit(Const(True)) is True
    with pytest.raises(TypeError, match="OnlyConstants does not handle IsNull"):
        OnlyConstants().visit(IsNull("a"))


def test_a_node_type_unknown_to_the_base_fails_in_visit():
    class Xor(Expr):
        pass

    with pytest.raises(TypeError, match="Xor is not a node of the query language"):
        leaves(Xor())


def test_push_not_refuses_a_negated_bound_node_rather_than_passing_it_through():
    from pyiceberg.types import LongType

    from indexlib.query.model import BoundColumn, BoundCompare, Not

    bound = BoundCompare("=", BoundColumn(1, "a", LongType()), 1)
    assert push_not(And(bound, Compare("=", "b", 2))) == And(bound, Compare("=", "b", 2)), "no NOT: unchanged"
    with pytest.raises(TypeError):
        push_not(Not(bound))
