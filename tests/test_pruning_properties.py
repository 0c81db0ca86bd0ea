"""Property: for random typed files (NULLs, NaNs, Unicode, empty strings) and random SQL predicates, the lookup
never skips a file holding a TRUE row, and never claims "all match" for a file with a row that is not TRUE.

Ground truth is DuckDB evaluating the same SQL text over the same rows (SQL three-valued logic, NaN ordered
above every number), so parsing, NOT push-down, literal coercion and the min/max algebra are all under test.
Files are real Parquet files written with Iceberg field ids and indexed by the build's own per-file code.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import duckdb
import pyarrow as pa
from conftest import write_and_index
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    LongType,
    NestedField,
    StringType,
)

from indexlib.lookup import bound_predicate, prune

SCHEMA = Schema(
    NestedField(1, "i", LongType()),
    NestedField(2, "f", DoubleType()),
    NestedField(3, "s", StringType()),
    NestedField(4, "d", DateType()),
    NestedField(5, "dec", DecimalType(6, 2)),
    NestedField(6, "b", BooleanType()),
    NestedField(7, "r", FloatType()),
)
ARROW_SCHEMA = SCHEMA.as_arrow()

ints = st.integers(-5, 5)
doubles = st.sampled_from([-2.5, -1.0, -0.0, 0.0, 0.1, 1.0, 2.5, float("nan"), float("inf")])
strings = st.sampled_from(["", "a", "ab", "b", "é", "z", "Ω", "a%", "0", "\U0001f600"])
dates = st.dates(dt.date(2023, 12, 30), dt.date(2024, 1, 3))
decimals = st.decimals(Decimal("-3"), Decimal("3"), places=2, allow_nan=False, allow_infinity=False)
floats32 = st.sampled_from([-1.5, 0.0, 0.1, 0.25, 1.0, float("nan")])


def nullable(values: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), values, values, values)


rows = st.fixed_dictionaries(
    {
        "i": nullable(ints),
        "f": nullable(doubles),
        "s": nullable(strings),
        "d": nullable(dates),
        "dec": nullable(decimals),
        "b": nullable(st.booleans()),
        "r": nullable(floats32),
    }
)
files = st.lists(st.lists(rows, min_size=0, max_size=6), min_size=1, max_size=4)


def _sql_literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return str(value)


# Literals per column, including cross-type ones whose meaning DuckDB and the binder must agree on.
LITERALS = {
    "i": st.one_of(ints, st.sampled_from([Decimal("1.5"), Decimal("-0.5"), Decimal("2.0"), 10**20, "3"])),
    "f": st.one_of(st.sampled_from([-2.5, 0.0, 0.1, 1.0, 2.5]), ints),
    "s": strings,
    "d": dates,
    "dec": st.one_of(decimals, st.sampled_from([Decimal("1.005"), Decimal("0.5"), 2, Decimal("99999")])),
    "b": st.booleans(),
    "r": st.sampled_from([0.1, 0.25, 1.0, -1.5, 0.3]),
}
COMPARISONS = ["=", "!=", "<>", "<", "<=", ">", ">="]


@st.composite
def leaves(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(list(LITERALS)))
    literal = LITERALS[column]
    maybe_null = st.one_of(literal, literal, literal, st.none())
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "between", "in", "null", "bare"]))
    if kind == "cmp":
        value = draw(maybe_null)
        if draw(st.booleans()):
            return f"{_sql_literal(value)} {draw(st.sampled_from(COMPARISONS))} {column}"
        return f"{column} {draw(st.sampled_from(COMPARISONS))} {_sql_literal(value)}"
    if kind == "between":
        low, high = draw(maybe_null), draw(maybe_null)
        return f"{column} {draw(st.sampled_from(['', 'NOT ']))}BETWEEN {_sql_literal(low)} AND {_sql_literal(high)}"
    if kind == "in":
        values = draw(st.lists(maybe_null, min_size=1, max_size=4))
        negation = draw(st.sampled_from(["", "NOT "]))
        return f"{column} {negation}IN ({', '.join(_sql_literal(v) for v in values)})"
    if kind == "null":
        return f"{column} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    return "b" if column != "b" else "NOT b"


predicates = st.recursive(
    leaves(),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        inner.map(lambda p: f"NOT ({p})"),
    ),
    max_leaves=5,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(file_rows=files, where=predicates)
def test_lookup_never_skips_a_matching_file_and_never_overclaims_all_match(tmp_path_factory, file_rows, where):
    tables = [pa.Table.from_pylist(r, schema=ARROW_SCHEMA) for r in file_rows]
    paths, entries = write_and_index(tmp_path_factory.mktemp("files"), tables, SCHEMA)
    kept, all_match, _ = prune(bound_predicate(where, SCHEMA, "db.t"), paths, entries)

    con = duckdb.connect()
    for n, table in enumerate(tables):
        con.register("t", table)
        matched, total = con.execute(f"SELECT count(*) FILTER (WHERE {where}), count(*) FROM t").fetchall()[0]
        rows_text = table.to_pylist()
        assert kept[n] or matched == 0, f"skipped file {n} with {matched} matching rows for {where!r}: {rows_text}"
        assert not all_match[n] or matched == total, (
            f"file {n} claimed all-match but only {matched}/{total} rows match {where!r}: {rows_text}"
        )
        con.unregister("t")
