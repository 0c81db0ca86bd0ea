"""Exact-typed columns meeting DOUBLE / FLOAT values, and the audit of every other literal coercion: one rule per
case, the message states the engine rule. Files are real one-row Parquet files indexed by the build's own code."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from conftest import write_and_index
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    TimestampType,
)

from indexlib.pruning.index_evidence import prune
from indexlib.query.approximate import DOUBLE, FLOAT, Binary, Float32, matching_set, nearest, rounding_interval
from indexlib.query.binding import bind, bound_predicate
from indexlib.query.model import COMPARE, Unusable
from indexlib.query.normalize import normalize
from indexlib.query.sql import parse_where

SCHEMA = Schema(
    NestedField(1, "n", IntegerType()),
    NestedField(2, "i", LongType()),
    NestedField(3, "dec", DecimalType(10, 2)),
    NestedField(4, "big", DecimalType(38, 0)),
    NestedField(5, "r", FloatType()),
    NestedField(6, "f", DoubleType()),
    NestedField(7, "six", DecimalType(10, 6)),
    NestedField(8, "ts", TimestampType()),
    NestedField(9, "d", DateType()),
)


def one_row_file(tmp_path, **values):
    row = {field.name: values.get(field.name) for field in SCHEMA.fields}
    table = pa.Table.from_pylist([row], schema=SCHEMA.as_arrow())
    return write_and_index(tmp_path, [table], SCHEMA)


def verdict(tmp_path, where: str, **values) -> tuple[bool, bool]:
    paths, entries = one_row_file(tmp_path, **values)
    result = prune(bound_predicate(where, SCHEMA, "db.t"), paths, entries)
    return bool(result.kept[0]), bool(result.all_match[0])


# (where, row, the row matches in Spark and DuckDB, rule)
MATCHES = [
    # the cases of the report: each kept 0 of 1 matching file before
    ("dec = CAST(1.01 AS DOUBLE)", {"dec": Decimal("1.01")}, True, "decimal 1.01 converts to the double nearest 1.01"),
    ("i = 9.223372036854776e18", {"i": 2**63 - 1}, True, "2^63-1 converts to the double 2^63"),
    ("i = CAST(9223372036854775807 AS DOUBLE)", {"i": 2**63 - 1}, True, "CAST of a long to DOUBLE rounds to 2^63"),
    ("i <= -9.223372036854776e18", {"i": -(2**63)}, True, "the literal is exactly -2^63"),
    ("i = 9007199254740992e0", {"i": 2**53 + 1}, True, "2^53+1 rounds half-even to 2^53"),
    ("NOT (i != 9.223372036854776e18)", {"i": 2**63 - 1}, True, "the same rule through NOT"),
    ("i IN (9007199254740992e0, 1e300)", {"i": 2**53 + 1}, True, "the same rule through IN"),
    # rounding edges, both ways
    ("i = 9007199254740994e0", {"i": 2**53 + 1}, False, "2^53+1 rounds to 2^53 (even), not to 2^53+2"),
    ("i = 9007199254740994e0", {"i": 2**53 + 3}, False, "2^53+3 ties between 2^53+2 (odd) and 2^53+4: to 2^53+4"),
    ("i = 9007199254740996e0", {"i": 2**53 + 3}, True, "... so it matches 2^53+4"),
    ("i > 9007199254740992e0", {"i": 2**53 + 1}, False, "2^53+1 converts to 2^53, which is not > 2^53"),
    ("i < 9007199254740994e0", {"i": 2**53 + 1}, True, "2^53+1 converts to 2^53 < 2^53+2"),
    ("i >= 9.223372036854776e18", {"i": 2**63 - 1}, True, "2^63-1 converts to 2^63 >= 2^63"),
    ("i < 9.223372036854776e18", {"i": 2**63 - 1}, False, "2^63-1 converts to 2^63, not below it"),
    ("i != 9.223372036854776e18", {"i": 2**63 - 1}, False, "2^63-1 converts to 2^63: != is FALSE"),
    ("i != 9.223372036854776e18", {"i": 2**63 - 513}, True, "2^63-513 converts to 2^63-1024"),
    ("dec = 1.01e0", {"dec": Decimal("1.01")}, True, "1.01e0 is a DOUBLE: the decimal converts to the same double"),
    ("dec = 1.0100000000000002e0", {"dec": Decimal("1.01")}, False, "no decimal(10,2) rounds to the next double"),
    ("dec > 1.0099999999999998e0", {"dec": Decimal("1.01")}, True, "the decimal's double is above the one below"),
    ("big = 1e20", {"big": Decimal(10**20 + 1)}, True, "a DECIMAL(38,0) may convert 1 ulp off (DuckDB HUGEINT)"),
    (
        "big = -6.878992987188078e+16",
        {"big": Decimal(-68789929871880789)},
        True,
        "DuckDB converts this DECIMAL(38,0) value to the double 1 ulp above its correct rounding",
    ),
    ("i + 1 = 9.223372036854776e18", {"i": 2**63 - 2}, True, "col + k: the sum converts to DOUBLE"),
    ("dec + 1 = 2.01e0", {"dec": Decimal("1.01")}, True, "col + k: decimal sum 2.01 converts to 2.01e0"),
    ("n = CAST(16777216 AS REAL)", {"n": 16777217}, True, "int meets FLOAT in FLOAT (DuckDB): 2^24+1 is 2^24"),
    ("n > CAST(16777216 AS REAL)", {"n": 16777217}, True, "... and in DOUBLE (Spark ANSI): 2^24+1 > 2^24"),
    ("n < CAST(16777216 AS REAL)", {"n": 16777217}, False, "below 2^24 in neither reading"),
    ("dec > CAST(1.01 AS REAL)", {"dec": Decimal("1.01")}, True, "Spark: decimal vs FLOAT in DOUBLE (1.01 > 1.01f)"),
    ("dec = CAST(1.01 AS REAL)", {"dec": Decimal("1.01")}, True, "DuckDB: decimal vs FLOAT in FLOAT (1.01f = 1.01f)"),
    (
        "f = CAST(0.1 AS REAL)",
        {"f": float(np.float32(0.1))},
        True,
        "FLOAT 0.1 is exactly 0.10000000149011612 as DOUBLE",
    ),
    ("f = CAST(0.1 AS REAL)", {"f": 0.1}, False, "... which is not the double 0.1"),
    ("r = CAST(0.1 AS REAL)", {"r": float(np.float32(0.1))}, True, "FLOAT against FLOAT is exact"),
    ("r < 0.1e0", {"r": float(np.float32(0.1))}, True, "FLOAT vs DOUBLE: DuckDB may compare in FLOAT (0.1f < 0.1f?)"),
    ("i IN (9007199254740993, 1e0)", {"i": 2**53}, True, "IN converts every value to the list's DOUBLE type"),
    ("i < 7 / 2", {"i": 3}, True, "integer division gives the DOUBLE 3.5 (Spark, DuckDB)"),
    ("six = 1.0 / 3", {"six": Decimal("0.333333")}, True, "Spark divides decimals to 6 places: unused, kept"),
    ("n = '5.5'", {"n": 5}, True, "Spark without ANSI truncates '5.5' to 5; DuckDB rounds to 6: unused, kept"),
    ("dec = '1.005'", {"dec": Decimal("1.01")}, True, "engines round '1.005' to the decimal's scale: kept"),
    ("n < 3000000000", {"n": 2**31 - 1}, True, "an int column against a literal beyond int32"),
    ("i < 0.000000000000000000001", {"i": 0}, True, "a decimal literal with 21 places against a long"),
    ("ts = TIMESTAMP '2024-01-01 00:00:00.0000004'", {"ts": dt.datetime(2024, 1, 1)}, True, "sub-microsecond"),
    ("d < TIMESTAMP '2024-01-02 06:00:00'", {"d": dt.date(2024, 1, 2)}, True, "a date is its midnight"),
]


@pytest.mark.parametrize(("where", "row", "matches", "rule"), MATCHES, ids=[case[0] for case in MATCHES])
def test_file_is_kept_when_its_row_matches(tmp_path, where, row, matches, rule):
    kept, all_match = verdict(tmp_path, where, **row)
    if matches:
        assert kept, f"Should keep: {rule} ({where!r} on {row})"
    else:
        assert not kept, f"Should skip: {rule} ({where!r} on {row})"
        assert not all_match, f"Should not claim all-match for a skipped file ({where!r})"


# (where, row, all rows proven to match, rule)
ALL_MATCH = [
    ("i = 9007199254740992e0", {"i": 2**53 + 1}, True, "one correctly rounded reading: exact, so all-match holds"),
    ("n = CAST(16777216 AS REAL)", {"n": 16777216}, False, "FLOAT or DOUBLE reading (Spark ANSI): never all-match"),
    ("i <= -9.223372036854776e18", {"i": -(2**63)}, True, "long -> DOUBLE is correctly rounded everywhere"),
    ("dec = 1.01e0", {"dec": Decimal("1.01")}, True, "short decimals convert correctly rounded everywhere"),
    ("dec > CAST(1.01 AS REAL)", {"dec": Decimal("1.01")}, False, "Spark TRUE, DuckDB FALSE: never all-match"),
    ("big = 1e20", {"big": Decimal(10**20)}, False, "HUGEINT conversion may be 1 ulp off: widened"),
    ("r = 0.1", {"r": float(np.float32(0.1))}, False, "FLOAT vs a non-float literal: widened"),
    ("i < 0.000000000000000000001", {"i": 0}, False, "Spark's DECIMAL(38,21) cannot hold every long: no all-match"),
    ("i < 0.0000000001", {"i": 0}, True, "DECIMAL(30,10) holds every long: exact"),
]


@pytest.mark.parametrize(("where", "row", "proven", "rule"), ALL_MATCH, ids=[case[0] for case in ALL_MATCH])
def test_all_match_only_where_every_engine_agrees(tmp_path, where, row, proven, rule):
    kept, all_match = verdict(tmp_path, where, **row)
    assert kept, f"Should keep: {rule}"
    assert all_match == proven, f"{'Should' if proven else 'Should not'} prove all-match: {rule} ({where!r})"


# (where, what the literal folds to, rule): which literals are approximate
LITERAL_TYPES = [
    ("x = 1.01e0", float, "an exponent makes a DOUBLE (Spark, DuckDB, Trino, SQL standard)"),
    ("x = 1.01", Decimal, "without one it is a DECIMAL"),
    ("x = 12345678901234567890123456789012345678901", float, "more than 38 digits is a DOUBLE"),
    ("x = CAST(1.01 AS DOUBLE)", float, "CAST to DOUBLE"),
    ("x = CAST(1.01 AS REAL)", Float32, "CAST to REAL is a FLOAT"),
    ("x = CAST('1.01' AS FLOAT)", Float32, "SQL FLOAT is 32-bit in Spark and DuckDB"),
    ("x = 7 / 2", float, "integer division is DOUBLE in Spark and DuckDB"),
    ("x = 2e0 * 3", float, "arithmetic with a DOUBLE is DOUBLE"),
]


@pytest.mark.parametrize(("where", "kind", "rule"), LITERAL_TYPES, ids=[case[0] for case in LITERAL_TYPES])
def test_literal_types(where, kind, rule):
    value = parse_where(where).value
    assert type(value) is kind, f"{rule}: {where!r} folded to {value!r}"


def test_spark_double_suffix_is_double():
    assert isinstance(parse_where("x = 1.01D", dialect="spark").value, float), "Spark reads 1.01D as DOUBLE"
    assert isinstance(parse_where("x = 1.01", dialect="spark").value, Decimal), "and 1.01 as DECIMAL"


NOT_FOLDED = [
    ("i = 1.0 / 3", "decimal division: Spark rounds to 6 places, DuckDB divides in DOUBLE"),
    ("big IN (1.5 / 3, 1)", "even 1.5 / 3: DECIMAL in Spark, DOUBLE in DuckDB, which makes the IN list DOUBLE"),
    ("i = CAST(0.1 AS REAL) + 1", "FLOAT arithmetic: engines pick FLOAT or DOUBLE results"),
    ("i = CAST(123456789012345678901234567.5 AS DOUBLE)", "DuckDB converts wide decimals up to 1 ulp off"),
    ("ts = TIMESTAMP '2024-01-01 00:00:00.0000001'", "digits below the microsecond: truncated or compared"),
    ("n = '1.5'", "an off-grid string: rounded (DuckDB), truncated (Spark) or an error (ANSI)"),
    ("dec BETWEEN CAST(0 AS REAL) AND 1", "DuckDB's BETWEEN uses one common type (FLOAT here), Spark's each side"),
    ("year(ts) = CAST('inf' AS DOUBLE)", "an infinite value is not a year"),
    ("i + 1 = CAST('inf' AS DOUBLE)", "nor a sum: inf/NaN semantics differ by engine"),
]


@pytest.mark.parametrize(("where", "rule"), NOT_FOLDED, ids=[case[0] for case in NOT_FOLDED])
def test_literals_engines_disagree_on_are_unused(where, rule):
    bound = bind(normalize(parse_where(where)), SCHEMA, "db.t")
    assert isinstance(bound, Unusable), f"{rule}: {where!r} became {bound}"


def test_infinite_values_inside_a_conjunction_are_unused_not_a_crash():
    bound = bind(
        normalize(parse_where("i + 1 = CAST('inf' AS DOUBLE) AND year(ts) = CAST('NaN' AS DOUBLE)")), SCHEMA, "t"
    )
    assert str(bound).count("<unused") == 2, f"calendar-field grouping must skip non-finite values: {bound}"


def test_constant_comparisons_in_floating_point():
    assert str(parse_where("9007199254740993 = 9007199254740992e0")) == "TRUE", "the integer converts to 2^53"
    assert str(parse_where("16777216 = CAST(16777216 AS REAL)")) == "TRUE", "the same in FLOAT and DOUBLE"
    assert isinstance(parse_where("16777217 = CAST(16777216 AS REAL)"), Unusable), (
        "an int meets FLOAT in FLOAT (DuckDB, Spark legacy) but in DOUBLE (Spark ANSI): they disagree here"
    )


# approximate.py against an independent rounding: Python's int -> float and numpy's int64 -> float32 conversions
# are correctly rounded (round-half-even), as Java's and C++'s are.
edges = st.sampled_from([0, 2**24, 2**53, 2**62, 2**63 - 1, -(2**63), 10**15, 3])
near_edges = st.tuples(edges, st.integers(-3000, 3000), st.sampled_from([1, -1])).map(
    lambda t: max(-(2**63), min(2**63 - 1, t[2] * t[0] + t[1]))
)


def _member(value: Fraction, comparisons, op: str) -> bool:
    if comparisons is None:
        return True
    tests = [COMPARE[cmp](value, at) for cmp, at in comparisons]
    return any(tests) if op == "!=" else all(tests)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(x=near_edges, literal=near_edges, op=st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
def test_matching_set_is_exactly_the_values_whose_double_satisfies_the_comparison(x, literal, op):
    for bits, convert in ((DOUBLE, float), (FLOAT, lambda v: float(np.float32(np.int64(v))))):
        value = convert(literal)
        comparisons = matching_set(op, Binary(value, value, bits), 0)
        expected = COMPARE[op](convert(x), value)
        assert _member(Fraction(x), comparisons, op) == expected, (
            f"{x} {op} {value} in {bits}-bit floating point is {expected}"
        )


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(numerator=st.integers(-(10**20), 10**20), places=st.integers(0, 12), bits=st.sampled_from([DOUBLE, FLOAT]))
def test_rounding_interval_holds_exactly_the_values_that_round_to_it(numerator, places, bits):
    x = Fraction(numerator, 10**places)
    rounded = nearest(x, bits)
    assert rounded == (float(x) if bits == DOUBLE else _float32_reference(x)), f"nearest {x} in {bits} bits"
    low, high = rounding_interval(rounded, bits)
    inside = (low.at < x or (low.closed and low.at == x)) and (x < high.at or (high.closed and high.at == x))
    assert inside, f"{x} rounds to {rounded} so lies in its rounding interval"


def _float32_reference(x: Fraction) -> float:
    """Correct float32 rounding by brute force over the candidates around the double."""
    guess = np.float32(float(x))
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    best = min(
        (float(c) for c in candidates if np.isfinite(c)),
        key=lambda c: (abs(Fraction(c) - x), int(np.float32(c).view(np.uint32)) & 1),
    )
    return best


def test_rounding_interval_ties_go_to_the_even_value():
    low, high = rounding_interval(2.0**53, DOUBLE)
    assert high.at == 2**53 + 1 and high.closed, "2^53+1 is a tie between 2^53 (even) and 2^53+2: it rounds to 2^53"
    low, high = rounding_interval(2.0**53 + 2, DOUBLE)
    assert low.at == 2**53 + 1 and not low.closed, "... so not to 2^53+2 (odd)"
    assert math.isclose(float(high.at), 2**53 + 3) and high.closed is False, "2^53+3 ties to 2^53+4 (even)"
