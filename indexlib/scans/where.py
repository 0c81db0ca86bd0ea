"""The lookup's WHERE as an engine's SQL, with the current date and time fixed to the clock the lookup pruned with.

A scan filters the kept files' rows with the user's WHERE. If the engine evaluated CURRENT_DATE with its own clock
(a query crossing midnight, another session time zone), the filter could ask for rows of files the lookup skipped
for the other date; fixed to the lookup's instant, the rows are those of the query at that instant.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from indexlib.errors import UserError
from indexlib.lookup import LookupResult
from indexlib.query.sql import Clock


def where_sql(result: LookupResult, dialect: str | None, clock: Clock | None, engine: str) -> str:
    """`result.where` (read in `dialect`, as the lookup read it) written in sqlglot dialect `engine`, CURRENT_DATE,
    CURRENT_TIMESTAMP and NOW() replaced by `clock`'s local date and instant (default: the system clock now)."""
    if result.bound is None or not isinstance(result.where, str) or not result.where:
        raise UserError(
            f"table {result.table}: reading rows through {engine} needs the WHERE as SQL text, not a predicate tree"
        )
    try:
        tree = sqlglot.parse_one(result.where, read=dialect)
    except SqlglotError as exc:
        raise UserError(f"table {result.table}: cannot read {result.where!r}: {str(exc).splitlines()[0]}") from None
    now = (clock or Clock.system()).local_now()

    def fixed(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.CurrentDate):
            return exp.cast(exp.Literal.string(now.date().isoformat()), "DATE")
        if isinstance(node, exp.CurrentTimestamp) or (
            isinstance(node, exp.Anonymous) and str(node.this).upper() == "NOW" and not node.expressions
        ):
            return exp.cast(exp.Literal.string(now.isoformat()), "TIMESTAMPTZ")
        return node

    try:
        return tree.transform(fixed).sql(dialect=engine)
    except SqlglotError as exc:
        raise UserError(f"table {result.table}: cannot write {result.where!r} for {engine}: {exc}") from None
