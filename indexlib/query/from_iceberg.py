"""A pyiceberg row filter as a predicate the index prunes with: for a scan given pyiceberg's own expression
(`table.scan(row_filter=...)`'s argument), and later for filters that arrive as Iceberg JSON.

The safety argument: the result must be TRUE (under SQL semantics, as the index evaluates it) for every row
pyiceberg's reader keeps with the filter, so no file holding such a row is skipped; it may be TRUE for more rows. The
rows themselves are still filtered by pyiceberg with the original expression. So:
- the filter is bound with pyiceberg (its own literal conversion: a literal out of the column's range becomes
  AlwaysTrue / AlwaysFalse as pyiceberg reads it) and NOT is pushed down with pyiceberg's `rewrite_not`; pyiceberg's
  Arrow filter evaluates each negated leaf as the Kleene complement of its positive leaf, so the rewrite keeps the
  rows, and without NOT, AND / OR only grow when their leaves grow;
- each negative leaf (`!=`, NOT IN, NOT starts_with, NOT NaN) also keeps NULL rows: pyiceberg's NotIn keeps them
  (its Arrow filter is `~isin`), and the others' NULL handling is not a contract of pyiceberg's;
- a leaf whose literal or column the model cannot say exactly is unknown (might match): FLOAT columns (pyiceberg
  compares in float32, a Python float is a double here), NaN literals, time, uuid, fixed-size and nested columns.
"""

from __future__ import annotations

import math
from typing import Any

from pyiceberg import types as it
from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, And, BooleanExpression, BoundPredicate, Not, Or
from pyiceberg.expressions.literals import Literal
from pyiceberg.expressions.visitors import BoundBooleanExpressionVisitor, bind, rewrite_not, visit
from pyiceberg.schema import Schema
from pyiceberg.utils.datetime import days_to_date, micros_to_timestamp, micros_to_timestamptz

from indexlib.query.model import FALSE, TRUE, Compare, Expr, In, IsNaN, IsNull, Pattern, Unusable, and_, or_


def from_iceberg(expression: BooleanExpression, schema: Schema, case_sensitive: bool = True) -> Expr:
    """The pruning predicate for pyiceberg row filter `expression` over `schema` (module docstring: it holds for
    every row pyiceberg's read keeps). An expression whose every leaf is bound already (in `schema`: the caller's
    word, as the planning service binds its filter's leaves once) is taken as it is."""
    bound = expression if _bound(expression, 0) else bind(schema, expression, case_sensitive)
    return visit(rewrite_not(bound), _ToModel(schema))


def _bound(expression: BooleanExpression, depth: int) -> bool:
    """Whether every leaf of `expression` is a bound predicate (TRUE and FALSE are either)."""
    if isinstance(expression, And | Or):
        return _bound(expression.left, depth + 1) and _bound(expression.right, depth + 1)
    if isinstance(expression, Not):
        return _bound(expression.child, depth + 1)
    return isinstance(expression, BoundPredicate) or (isinstance(expression, AlwaysTrue | AlwaysFalse) and depth > 0)


_EXACT: dict[type, Any] = {
    it.BooleanType: bool,
    it.IntegerType: int,
    it.LongType: int,
    it.DoubleType: float,
    it.DecimalType: lambda value: value,
    it.StringType: str,
    it.BinaryType: bytes,
    it.DateType: days_to_date,
    it.TimestampType: micros_to_timestamp,
    it.TimestamptzType: micros_to_timestamptz,
}


class _ToModel(BoundBooleanExpressionVisitor[Expr]):
    def __init__(self, schema: Schema) -> None:
        self._schema = schema

    def _column(self, term: Any) -> str | None:
        """The top-level column the term names; None for a nested field (the model names top-level columns)."""
        field = term.ref().field
        name = self._schema.find_column_name(field.field_id)
        return name if name is not None and self._schema.find_field(name) is field and "." not in name else None

    def _value(self, term: Any, value: Any) -> tuple[bool, Any]:
        """The model's literal for a bound literal's value (days, microseconds and so on as pyiceberg keeps them)."""
        convert = _EXACT.get(type(term.ref().field.field_type))
        if convert is None or (isinstance(value, float) and math.isnan(value)):
            return False, None
        return True, convert(value)

    def _unknown(self, term: Any, what: str) -> Expr:
        return Unusable(f"{term.ref().field.name} {what}", "no exact form of this pyiceberg filter leaf")

    def _compare(self, op: str, term: Any, literal: Literal[Any], keep_nulls: bool = False) -> Expr:
        column = self._column(term)
        exact, value = self._value(term, literal.value)
        if column is None or not exact:
            return self._unknown(term, f"{op} {literal}")
        compare = Compare(op, column, value)
        return or_(compare, IsNull(column)) if keep_nulls else compare

    def _in(self, term: Any, literals: set[Any], negated: bool) -> Expr:
        column = self._column(term)
        values = [self._value(term, value) for value in literals]
        if column is None or not all(exact for exact, _ in values):
            return self._unknown(term, "IN (...)")
        members = In(column, tuple(value for _, value in values), negated)
        return or_(members, IsNull(column)) if negated else members

    def visit_true(self) -> Expr:
        return TRUE

    def visit_false(self) -> Expr:
        return FALSE

    def visit_not(self, child_result: Expr) -> Expr:
        raise AssertionError("rewrite_not leaves no NOT")

    def visit_and(self, left_result: Expr, right_result: Expr) -> Expr:
        return and_(left_result, right_result)

    def visit_or(self, left_result: Expr, right_result: Expr) -> Expr:
        return or_(left_result, right_result)

    def visit_equal(self, term: Any, literal: Literal[Any]) -> Expr:
        return self._compare("=", term, literal)

    def visit_not_equal(self, term: Any, literal: Literal[Any]) -> Expr:
        return self._compare("!=", term, literal, keep_nulls=True)

    def visit_less_than(self, term: Any, literal: Literal[Any]) -> Expr:
        return self._compare("<", term, literal)

    def visit_less_than_or_equal(self, term: Any, literal: Literal[Any]) -> Expr:
        return self._compare("<=", term, literal)

    def visit_greater_than(self, term: Any, literal: Literal[Any]) -> Expr:
        return self._compare(">", term, literal)

    def visit_greater_than_or_equal(self, term: Any, literal: Literal[Any]) -> Expr:
        return self._compare(">=", term, literal)

    def visit_in(self, term: Any, literals: set[Any]) -> Expr:
        return self._in(term, literals, negated=False)

    def visit_not_in(self, term: Any, literals: set[Any]) -> Expr:
        return self._in(term, literals, negated=True)

    def visit_is_null(self, term: Any) -> Expr:
        column = self._column(term)
        return IsNull(column) if column is not None else self._unknown(term, "IS NULL")

    def visit_not_null(self, term: Any) -> Expr:
        column = self._column(term)
        return IsNull(column, negated=True) if column is not None else self._unknown(term, "IS NOT NULL")

    def visit_is_nan(self, term: Any) -> Expr:
        column = self._column(term)
        return IsNaN(column) if column is not None else self._unknown(term, "is NaN")

    def visit_not_nan(self, term: Any) -> Expr:
        column = self._column(term)
        if column is None:
            return self._unknown(term, "is not NaN")
        return or_(IsNaN(column, negated=True), IsNull(column))

    def visit_starts_with(self, term: Any, literal: Literal[Any]) -> Expr:
        column = self._column(term)
        if column is None or not isinstance(literal.value, str):
            return self._unknown(term, f"starts with {literal}")
        return Pattern("starts_with", column, literal.value)

    def visit_not_starts_with(self, term: Any, literal: Literal[Any]) -> Expr:
        column = self._column(term)
        if column is None or not isinstance(literal.value, str):
            return self._unknown(term, f"does not start with {literal}")
        return or_(Pattern("starts_with", column, literal.value, negated=True), IsNull(column))
