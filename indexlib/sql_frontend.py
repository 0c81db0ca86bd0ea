"""SQL WHERE text -> unbound predicate, through sqlglot.

What the index can use becomes a leaf (comparison, BETWEEN, IN, IS NULL, boolean column); anything else
(functions, arithmetic, column-to-column comparisons, LIKE, ...) becomes `Unusable` for that subtree only,
with the reason explain prints. Parse errors are the user's: one line, exit code 2.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp

from indexlib.errors import UserError
from indexlib.predicate import (
    FALSE,
    FLIPPED_COMPARISON,
    NULL,
    TRUE,
    Compare,
    Expr,
    In,
    IsNull,
    Not,
    Unusable,
    and_,
    or_,
)

_COMPARISON_NODES = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


class _NotALiteral(Exception):
    pass


def parse_where(where: str) -> Expr:
    """Parse a SQL boolean expression (ANSI quoting: 'string', "identifier")."""
    if not where or not where.strip():
        raise UserError("empty WHERE expression")
    try:
        tree = sqlglot.parse_one(where)
    except sqlglot.errors.SqlglotError as exc:
        message = _ANSI_ESCAPE.sub("", str(exc)).replace("\n", " ")
        raise UserError(f"cannot parse WHERE {where!r}: {message}") from None
    if not isinstance(tree, exp.Condition) or isinstance(tree, exp.Query):
        raise UserError(f"WHERE {where!r} is not a boolean expression")
    return _convert(tree)


def _convert(node: exp.Expression) -> Expr:
    if isinstance(node, exp.Paren):
        return _convert(node.this)
    if isinstance(node, exp.And):
        return and_(_convert(node.left), _convert(node.right))
    if isinstance(node, exp.Or):
        return or_(_convert(node.left), _convert(node.right))
    if isinstance(node, exp.Not):
        return Not(_convert(node.this))
    if isinstance(node, exp.Boolean):
        return TRUE if node.this else FALSE
    if isinstance(node, exp.Null):
        return NULL
    if isinstance(node, exp.Column):  # a bare boolean column: `WHERE flag`
        return Compare("=", node.name, True)
    if type(node) in _COMPARISON_NODES:
        return _comparison(_COMPARISON_NODES[type(node)], node.this, node.expression, node)
    if isinstance(node, exp.Between):
        low = _comparison(">=", node.this, node.args["low"], node)
        high = _comparison("<=", node.this, node.args["high"], node)
        return and_(low, high)
    if isinstance(node, exp.In):
        return _in_list(node)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null) and isinstance(node.this, exp.Column):
        return IsNull(node.this.name)
    return Unusable(node.sql(), f"{type(node).__name__} is not supported by the index")


def _comparison(op: str, left: exp.Expression, right: exp.Expression, node: exp.Expression) -> Expr:
    if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
        left, right, op = right, left, FLIPPED_COMPARISON[op]
    try:
        if isinstance(left, exp.Column):
            return Compare(op, left.name, _literal(right))
        a, b = _literal(left), _literal(right)
    except _NotALiteral as exc:
        return Unusable(node.sql(), str(exc))
    return _compare_literals(op, a, b, node)


def _compare_literals(op: str, a: Any, b: Any, node: exp.Expression) -> Expr:
    if a is None or b is None:
        return NULL
    try:
        result = {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    except TypeError:
        return Unusable(node.sql(), "comparison of literals of different types")
    return TRUE if result else FALSE


def _in_list(node: exp.In) -> Expr:
    if not isinstance(node.this, exp.Column) or node.args.get("query") or not node.expressions:
        return Unusable(node.sql(), "IN needs a column and a list of literals")
    try:
        values = tuple(_literal(v) for v in node.expressions)
    except _NotALiteral as exc:
        return Unusable(node.sql(), str(exc))
    return In(node.this.name, values)


def _literal(node: exp.Expression) -> Any:
    """The Python value of a literal: int, Decimal, str, bool, None, date, datetime, bytes."""
    if isinstance(node, exp.Paren):
        return _literal(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg):
        value = _literal(node.this)
        if isinstance(value, (int, Decimal)) and not isinstance(value, bool):
            return -value
        raise _NotALiteral(f"{node.sql()} is not a number")
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return int(text) if re.fullmatch(r"\d+", text) else Decimal(text)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        return _typed_literal(node)
    raise _NotALiteral(f"{node.sql()} is not a literal")


def _typed_literal(node: exp.Cast) -> Any:
    text = node.this.this.strip()
    target = node.to.this
    try:
        if target == exp.DataType.Type.DATE:
            return dt.date.fromisoformat(text)
        if target in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.DATETIME, exp.DataType.Type.TIMESTAMPTZ):
            return dt.datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"invalid {target.value} literal {text!r}") from None
    raise _NotALiteral(f"{node.sql()}: casts to {target.value} are not supported")
