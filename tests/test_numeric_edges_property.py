"""Property: numeric comparisons across types keep every file with a TRUE row and never claim "all match" wrongly,
with values and literals concentrated where binary floating point rounds (2^24, 2^53, 2^63, -2^63, decimals with no
exact binary form, +-0.0, subnormals, the largest finite values, infinities, NaN).

Columns of every numeric type (int, long, decimal(10, 2), decimal(38, 0), decimal(25, 10), float, double) meet
literals of every type: integers, decimals, DOUBLE literals written with an exponent, CAST to DOUBLE / FLOAT / REAL,
integer division, strings; in comparisons, IN / NOT IN lists, BETWEEN, NOT, `col + k`, AND / OR.

Ground truth is DuckDB evaluating the same SQL over the same rows held in memory as Arrow, with its optimizer off
and the predicate inside an aggregate FILTER, so nothing is pruned by statistics (DuckDB's own Parquet row-group
pruning misses NaN rows for `d = 'NaN'`: an oracle that prunes could hide a false negative). Where DuckDB errors
(an overflowing `i + 1`, a FLOAT cast out of range) the engines answer nothing and the case is skipped. Cases where
Spark types a comparison differently from DuckDB are in test_numeric_edges_spark.py.

EXAMPLES x PREDICATES_PER_EXAMPLE cases per run, new ones every run: 1,000 in `make test`, 10,000 in `make test-long`
(SKIPINDEX_NUMERIC_EXAMPLES=N runs N x 10), besides the explicit examples at the edges, which every run checks.
"""

from __future__ import annotations

import math
from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest
import sqlglot
from conftest import sweep, write_and_index
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.types import DecimalType, DoubleType, FloatType, IntegerType, LongType, NestedField

from indexlib.pruning.index_evidence import prune
from indexlib.query.binding import bound_predicate

EXAMPLES = sweep("SKIPINDEX_NUMERIC_EXAMPLES", short=100, long=1000)
PREDICATES_PER_EXAMPLE = 10

SCHEMA = Schema(
    NestedField(1, "n", IntegerType()),
    NestedField(2, "i", LongType()),
    NestedField(3, "dec", DecimalType(10, 2)),
    NestedField(4, "big", DecimalType(38, 0)),
    NestedField(5, "wide", DecimalType(25, 10)),
    NestedField(6, "r", FloatType()),
    NestedField(7, "f", DoubleType()),
)
ARROW_SCHEMA = SCHEMA.as_arrow()


def f32(value: float) -> float:
    return float(np.float32(value))


INTEGER_EDGES = [0, 1, -1, 2**24, 2**24 + 1, 2**31 - 1, -(2**31), 2**53, 2**53 + 1, 2**53 - 1, 2**62 + 1]
INTEGER_EDGES += [2**63 - 1, -(2**63), -(2**63) + 1, 2**63 - 512, 2**63 - 513, 123456789]
DECIMAL_EDGES = ["0", "0.01", "1.01", "0.1", "0.3", "-0.3", "0.5", "2.5", "16777217.01", "99999999.99", "-99999999.99"]
WIDE_EDGES = ["0.1", "1.0000000001", "1234567890.0123456789", "-999999999999999.9999999999", "9007199254.7409930000"]
WIDE_EDGES += ["0.3000000000", "1.0100000000"]
FLOAT_EDGES = [0.0, -0.0, 0.1, 1.01, 16777216.0, 16777218.0, 1.401298464324817e-45, 3.4028234663852886e38, 2.5]
DOUBLE_EDGES = [0.0, -0.0, 0.1, 0.3, 1.01, 5e-324, 2.0**53, 9.223372036854776e18, 1.7976931348623157e308, 2.5]
DOUBLE_EDGES += [f32(0.1), f32(1.01), 9007199254740994.0, -9.223372036854776e18, 16777217.0]
SPECIALS = [float("nan"), float("inf"), float("-inf")]
# DuckDB converts this DECIMAL(38, 0) value to the double one ulp above its correct rounding (-6.878992987188078e16)
HUGEINT_OFF_BY_ONE = [-68789929871880789]
DOUBLE_EDGES += [-6.878992987188078e16]


def _fits(value: int, bits: int) -> bool:
    return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


COLUMN_VALUES = {
    "n": [v for v in INTEGER_EDGES if _fits(v, 32)],
    "i": INTEGER_EDGES,
    "dec": [Decimal(v) for v in DECIMAL_EDGES],
    "big": [Decimal(v) for v in INTEGER_EDGES + HUGEINT_OFF_BY_ONE]
    + [Decimal(10**37 + 1), Decimal(-(10**37) - 3), Decimal(10**38 - 1)],
    "wide": [Decimal(v) for v in WIDE_EDGES],
    "r": [f32(v) for v in FLOAT_EDGES] + [-f32(v) for v in FLOAT_EDGES] + SPECIALS,
    "f": DOUBLE_EDGES + [-v for v in DOUBLE_EDGES] + SPECIALS,
}


def nullable(values: list) -> st.SearchStrategy:
    return st.one_of(st.none(), st.sampled_from(values), st.sampled_from(values), st.sampled_from(values))


rows = st.fixed_dictionaries({name: nullable(values) for name, values in COLUMN_VALUES.items()})
files = st.lists(st.lists(rows, min_size=1, max_size=4), min_size=1, max_size=4)


def _double_text(value: float) -> str:
    """A DOUBLE literal: always with an exponent (`1.01e0`), as every engine reads it."""
    text = repr(value)
    return text if "e" in text else f"{text}e0"


_neighbours = [math.nextafter(v, math.inf) for v in DOUBLE_EDGES] + [math.nextafter(v, -math.inf) for v in DOUBLE_EDGES]
integer_literals = st.sampled_from(INTEGER_EDGES).flatmap(
    lambda edge: st.integers(-2, 2).map(lambda delta: str(edge + delta))
)
decimal_literals = st.sampled_from(DECIMAL_EDGES + WIDE_EDGES + ["9007199254740993.5", "0.30000000000000004"])
double_values = st.sampled_from(
    DOUBLE_EDGES + _neighbours + FLOAT_EDGES + [float(v) for v in INTEGER_EDGES] + [float(d) for d in DECIMAL_EDGES]
)
double_literals = st.one_of(double_values.map(_double_text), double_values.map(lambda v: _double_text(-v)))
LITERALS = st.one_of(
    integer_literals,
    decimal_literals,
    decimal_literals.map(lambda d: f"-({d})"),
    double_literals,
    double_literals,
    st.one_of(integer_literals, decimal_literals).map(lambda v: f"CAST({v} AS DOUBLE)"),
    st.one_of(integer_literals, decimal_literals, double_literals).map(lambda v: f"CAST({v} AS REAL)"),
    st.one_of(integer_literals, decimal_literals).map(lambda v: f"CAST({v} AS FLOAT)"),
    st.one_of(integer_literals, decimal_literals).map(lambda v: f"CAST('{v}' AS DOUBLE)"),
    st.sampled_from(["7 / 2", "9007199254740993 / 1", "1 / 3", "1.5 / 3", "2e0 * 3", "'5'", "'1.01'", "'0.5'"]),
    st.sampled_from(["CAST('inf' AS DOUBLE)", "CAST('-inf' AS DOUBLE)", "CAST('NaN' AS DOUBLE)", "NULL"]),
)
COMPARISONS = ["=", "!=", "<", "<=", ">", ">="]
SHIFTS = {"n": ["1", "-2"], "i": ["1", "-1"], "dec": ["0.5", "1"], "big": ["1"], "wide": ["0.0000000001"]}


@st.composite
def leaves(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(list(COLUMN_VALUES)))
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "flipped", "in", "between", "shift"]))
    op = draw(st.sampled_from(COMPARISONS))
    if kind == "cmp":
        return f"{column} {op} {draw(LITERALS)}"
    if kind == "flipped":
        return f"{draw(LITERALS)} {op} {column}"
    if kind == "in":
        values = ", ".join(draw(st.lists(LITERALS, min_size=1, max_size=3)))
        return f"{column} {draw(st.sampled_from(['', 'NOT ']))}IN ({values})"
    if kind == "between":
        negation = draw(st.sampled_from(["", "NOT "]))
        return f"{column} {negation}BETWEEN {draw(LITERALS)} AND {draw(LITERALS)}"
    if column not in SHIFTS:
        return f"NOT ({column} {op} {draw(LITERALS)})"
    return f"{column} + {draw(st.sampled_from(SHIFTS[column]))} {op} {draw(LITERALS)}"


predicates = st.one_of(
    leaves(),
    leaves(),
    st.tuples(leaves(), st.sampled_from(["AND", "OR"]), leaves()).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
    leaves().map(lambda p: f"NOT ({p})"),
)


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    con.execute("PRAGMA disable_optimizer")
    yield con
    con.close()


def duckdb_truth(duck: duckdb.DuckDBPyConnection, where: str) -> dict[int, tuple[int, int]] | None:
    """Per file: (rows, rows where `where` is TRUE), evaluated on every row; None where DuckDB errors."""
    sql = sqlglot.transpile(where, write="duckdb")[0]
    try:
        result = duck.execute(f"SELECT file, count(*), count(*) FILTER (WHERE {sql}) FROM t GROUP BY file").fetchall()
    except duckdb.Error:
        return None
    return {file: (total, matched) for file, total, matched in result}


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    file_rows=files,
    wheres=st.lists(predicates, min_size=PREDICATES_PER_EXAMPLE, max_size=PREDICATES_PER_EXAMPLE),
)
# integers past 2^53 against the doubles they round to, and the double one ulp off DuckDB's own conversion
@example(
    file_rows=[
        [{"i": 2**53 + 1, "f": 2.0**53}],
        [{"i": 2**53, "big": Decimal(2**53 + 1)}, {"big": Decimal(-68789929871880789)}],
    ],
    wheres=[
        "i = 9007199254740992e0",
        "i > CAST(9007199254740992 AS DOUBLE)",
        "big = 9.007199254740992e15",
        "f = 9007199254740993 / 1",
        "big = -6.878992987188078e16",
    ],
)
# NaN, +-inf and -0.0 in both float widths
@example(
    file_rows=[[{"f": math.nan, "r": math.nan}], [{"f": -0.0, "r": -0.0}], [{"f": math.inf, "r": -math.inf}]],
    wheres=[
        "f = CAST('NaN' AS DOUBLE)",
        "f > 1.7976931348623157e308",
        "r = 0",
        "NOT (f <= CAST('inf' AS DOUBLE))",
        "r IN (CAST('NaN' AS DOUBLE), 0.1e0)",
    ],
)
# FLOAT values against the decimals and doubles they round from; decimals with no exact binary form
@example(
    file_rows=[[{"r": f32(0.1), "dec": Decimal("0.30"), "wide": Decimal("0.3000000000")}, {"r": 16777216.0}]],
    wheres=["r = 0.1", "r = CAST(0.1 AS REAL)", "r > 16777217", "dec = 0.3e0", "wide = 0.30000000000000004"],
)
# the ends of int and long, where `col + k` overflows
@example(
    file_rows=[[{"i": 2**63 - 1, "n": 2**31 - 1}], [{"i": -(2**63), "n": -(2**31)}]],
    wheres=["i = 9.223372036854776e18", "n + 1 > 2147483647", "i < -9223372036854775808e0", "i + 1 > 0"],
)
def test_numeric_comparisons_keep_every_matching_file_and_prove_only_true_all_match(
    tmp_path_factory, duck, file_rows, wheres
):
    tables = [pa.Table.from_pylist(r, schema=ARROW_SCHEMA) for r in file_rows]
    paths, entries = write_and_index(tmp_path_factory.mktemp("files"), tables, SCHEMA)
    rows = pa.concat_tables(
        [t.append_column("file", pa.array([n] * t.num_rows, pa.int32())) for n, t in enumerate(tables)]
    )
    duck.register("t", rows)
    try:
        for where in wheres:
            truth = duckdb_truth(duck, where)
            if truth is None:
                continue
            verdicts = prune(bound_predicate(where, SCHEMA, "db.t"), paths, entries)
            for n, table in enumerate(tables):
                total, matched = truth.get(n, (0, 0))
                assert verdicts.kept[n] or matched == 0, (
                    f"skipped file {n} with {matched} matching rows for {where!r}: {table.to_pylist()}"
                )
                assert not verdicts.all_match[n] or matched == total, (
                    f"file {n} claimed all-match but {matched}/{total} rows match {where!r}: {table.to_pylist()}"
                )
    finally:
        duck.unregister("t")
