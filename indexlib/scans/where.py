"""The lookup's WHERE as an engine's SQL: the same rows in the engine's dialect as in the dialect it was written in,
with the current date and time fixed to the clock the lookup pruned with.

A scan filters the kept files' rows with the user's WHERE, transpiled by sqlglot from the lookup's dialect
(`[lookup] dialect`) into the engine's. sqlglot rewrites syntax, not meaning, so what the dialects read differently
is rewritten here to mean in the engine what it meant where it was written:

- LIKE / ILIKE without ESCAPE: a backslash escapes `%`, `_` and itself in Spark, Hive, Databricks, PostgreSQL,
  Redshift, MySQL and BigQuery, and is an ordinary character in ANSI SQL, DuckDB, Trino, Presto, Athena,
  Snowflake, SQLite and Oracle (`DEFAULT_LIKE_ESCAPE`). Every LIKE with a constant pattern is written with the
  pattern re-escaped and an explicit `ESCAPE '\\'`, which DuckDB and Spark read alike (left out where the
  re-escaped pattern holds no backslash: both engines then read it alike without); a pattern Spark itself
  rejects (its escape before another character, or at the end) is refused with one line, as is a pattern with a
  backslash or `[` in a dialect whose LIKE this table does not know (T-SQL's `[...]` is a character class).
- `isnan(NULL)` is FALSE in Spark and NULL in DuckDB: `NOT isnan(c)` keeps NULL rows in one and not the other, so
  it is written to give the source dialect's answer (`COALESCE(isnan(c), FALSE)` from Spark, `CASE WHEN c IS NULL
  THEN NULL ELSE isnan(c) END` into Spark).
- CURRENT_DATE, CURRENT_TIMESTAMP and NOW(): if the engine evaluated them with its own clock (a query crossing
  midnight, another session time zone), the filter could ask for rows of files the lookup skipped for the other
  date; fixed to the lookup's instant, the rows are those of the query at that instant.

NaN is ordered above every number and equal to itself in both engines' SQL (Spark, DuckDB), which is the meaning
the scans give `x > 4` (true for NaN); where an engine's Parquet reader would lose NaN rows by row-group statistics,
the scan does not push the filter into it (scans/pushdown.py).
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from indexlib.errors import UserError
from indexlib.lookup import LookupResult
from indexlib.query.sql import Clock

BACKSLASH = "\\"
_BACKSLASH_ESCAPES = ("spark", "spark2", "databricks", "hive", "postgres", "redshift", "mysql", "bigquery")
_NO_ESCAPE = (None, "duckdb", "trino", "presto", "athena", "snowflake", "sqlite", "oracle")
# The escape character of a LIKE without ESCAPE, per sqlglot dialect (None: ANSI quoting, as `parse_where`)
DEFAULT_LIKE_ESCAPE: dict[str | None, str | None] = {
    **{dialect: BACKSLASH for dialect in _BACKSLASH_ESCAPES},
    **{dialect: None for dialect in _NO_ESCAPE},
}
_SPARK_FAMILY = {"spark", "spark2", "databricks", "hive"}  # isnan(NULL) is FALSE; escapes only % _ and itself


def where_sql(result: LookupResult, dialect: str | None, clock: Clock | None, engine: str) -> str:
    """`result.where` (read in `dialect`, as the lookup read it) written in sqlglot dialect `engine` with the same
    meaning (see the module docstring), CURRENT_DATE, CURRENT_TIMESTAMP and NOW() replaced by `clock`'s local date
    and instant (default: the system clock now)."""
    if result.bound is None or not isinstance(result.where, str) or not result.where:
        raise UserError(
            f"table {result.table}: reading rows through {engine} needs the WHERE as SQL text, not a predicate tree"
        )
    try:
        tree, timed = parsed_where(result.where, dialect)
    except SqlglotError as exc:
        raise UserError(f"table {result.table}: cannot read {result.where!r}: {str(exc).splitlines()[0]}") from None
    now = (clock or Clock.system()).local_now().isoformat() if timed else None  # the tree has no clock to fix
    return _written(result.table, result.where, dialect, engine, now)


_CLOCKED = (exp.CurrentDate, exp.CurrentTimestamp, exp.Anonymous)


@lru_cache(maxsize=1024)
def parsed_where(where: str, dialect: str | None) -> tuple[exp.Expr, bool]:
    """`where` read in `dialect` (shared: only ever copied), and whether it may name the current date or time. A
    planner asks the same WHERE texts again and again; sqlglot takes milliseconds to read and write one."""
    tree = sqlglot.parse_one(where, read=dialect)
    return tree, any(True for _ in tree.find_all(*_CLOCKED))


@lru_cache(maxsize=1024)
def _written(table: str, where: str, dialect: str | None, engine: str, now_text: str | None) -> str:
    """`where_sql`'s answer for the lookup's instant `now_text` (None: the WHERE names no clock)."""
    tree, _ = parsed_where(where, dialect)
    now = dt.datetime.fromisoformat(now_text) if now_text is not None else None
    source_spark, engine_spark = _family(dialect) in _SPARK_FAMILY, _family(engine) in _SPARK_FAMILY

    def rewritten(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.CurrentDate) and now is not None:
            return exp.cast(exp.Literal.string(now.date().isoformat()), "DATE")
        if now is not None and (
            isinstance(node, exp.CurrentTimestamp)
            or (isinstance(node, exp.Anonymous) and str(node.this).upper() == "NOW" and not node.expressions)
        ):
            return exp.cast(exp.Literal.string(now.isoformat()), "TIMESTAMPTZ")
        if isinstance(node, exp.IsNan) and source_spark != engine_spark:
            return _isnan_as(node, source_spark)
        if isinstance(node, exp.Escape) and isinstance(node.this, (exp.Like, exp.ILike)):
            escape = node.expression
            if not (isinstance(escape, exp.Literal) and escape.is_string and len(escape.this) == 1):
                raise UserError(f"table {table}: ESCAPE must be one character in {node.sql(dialect=dialect)!r}")
            return _explicit_escape(table, node.this, escape.this, dialect, node)
        if isinstance(node, (exp.Like, exp.ILike)) and not isinstance(node.parent, exp.Escape):
            return _explicit_escape(table, node, _default_escape(table, node, dialect), dialect, node)
        return node

    try:
        return tree.transform(rewritten, copy=True).sql(dialect=engine)
    except SqlglotError as exc:
        raise UserError(f"table {table}: cannot write {where!r} for {engine}: {exc}") from None


def _family(dialect: str | None) -> str | None:
    return None if dialect is None else dialect.lower()


def _isnan_as(node: exp.IsNan, source_spark: bool) -> exp.Expr:
    """`isnan(c)` with the source dialect's answer for NULL: FALSE (Spark) or NULL (DuckDB, ANSI)."""
    test = exp.IsNan(this=node.this.copy())
    if source_spark:
        return exp.Coalesce(this=test, expressions=[exp.false()])
    return exp.case().when(exp.Is(this=node.this.copy(), expression=exp.null()), exp.null()).else_(test)


def _default_escape(table: str, node: exp.Expr, dialect: str | None) -> str | None:
    family = _family(dialect)
    if family in DEFAULT_LIKE_ESCAPE:
        return DEFAULT_LIKE_ESCAPE[family]
    pattern = node.expression
    if isinstance(pattern, exp.Literal) and pattern.is_string and not set(pattern.this) & {BACKSLASH, "["}:
        return None  # no character whose meaning differs between dialects
    raise UserError(
        f"table {table}: {node.sql(dialect=dialect)!r}: what a backslash or '[' means in a LIKE pattern of dialect "
        f"{dialect!r} is not known here; write the pattern with an ESCAPE clause"
    )


def _explicit_escape(table: str, like: exp.Expr, escape: str | None, dialect: str | None, shown: exp.Expr) -> exp.Expr:
    """`like` (its pattern read with `escape`, None: no escape character) as the same match written with
    `ESCAPE '\\'`, which every engine reads alike."""
    pattern = like.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        if escape is None:
            return like  # a computed pattern, read with no escape character: nothing dialect-specific to rewrite
        raise UserError(
            f"table {table}: {shown.sql(dialect=dialect)!r}: a LIKE pattern that is not a constant string is read "
            "with an escape character that differs between engines; write it as a constant"
        )
    canonical = _reescaped(table, pattern.this, escape, dialect, shown)
    rebuilt = like.copy()  # NOT LIKE is a LIKE with `negate` set
    rebuilt.set("expression", exp.Literal.string(canonical))
    if BACKSLASH not in canonical:
        # nothing escaped: the same match with no escape character (DuckDB) or backslash's (Spark), and without
        # ESCAPE DuckDB reads `LIKE '%x%'` as contains() and `'x%'` as starts_with() (1.25x faster over lineitem)
        return rebuilt
    return exp.Escape(this=rebuilt, expression=exp.Literal.string(BACKSLASH))


def _reescaped(table: str, pattern: str, escape: str | None, dialect: str | None, shown: exp.Expr) -> str:
    """`pattern` read with `escape` (a literal character after it; Spark accepts only `%`, `_` and the escape
    itself there) written with backslash as its escape: literal `%`, `_` and `\\` escaped, wildcards as they are."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if escape is not None and char == escape:
            if i + 1 == len(pattern):
                raise UserError(f"table {table}: {shown.sql(dialect=dialect)!r}: the LIKE pattern ends with its escape")
            literal = pattern[i + 1]
            if _family(dialect) in _SPARK_FAMILY and literal not in ("%", "_", escape):
                raise UserError(
                    f"table {table}: {shown.sql(dialect=dialect)!r}: Spark does not allow the escape character "
                    f"before {literal!r}"
                )
            out.append(BACKSLASH + literal if literal in ("%", "_", BACKSLASH) else literal)
            i += 2
            continue
        out.append(BACKSLASH + char if char == BACKSLASH else char)
        i += 1
    return "".join(out)
