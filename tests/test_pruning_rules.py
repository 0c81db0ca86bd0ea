"""Pruning rules, one case each, on real Parquet files: the message states the rule being checked."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from conftest import write_and_index
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from indexlib.lookup import bound_predicate, prune

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "x", DoubleType()),
    NestedField(3, "name", StringType()),
    NestedField(4, "day", DateType()),
    NestedField(5, "price", DecimalType(9, 2)),
    NestedField(6, "ts", TimestampType()),
    NestedField(7, "tstz", TimestamptzType()),
    NestedField(8, "flag", BooleanType()),
    NestedField(9, "raw", BinaryType()),
    NestedField(10, "empty", LongType()),
)

# One file: id in [30, 79], x in [1.5, 9.0] plus a NaN, name in ['apple', 'pear'], one NULL name,
# day in [2024-01-10, 2024-01-20], price in [10.00, 20.50], ts/tstz on 2024-01-15, flag always true, empty all NULL.
ROWS = [
    {
        "id": 30 + i,
        "x": [1.5, 9.0, float("nan")][i % 3],
        "name": ["apple", "pear", None][i % 3],
        "day": dt.date(2024, 1, 10 + i % 11),
        "price": Decimal("10.00") + Decimal(i % 2) * Decimal("10.50"),
        "ts": dt.datetime(2024, 1, 15, 12, 0, i % 60),
        "tstz": dt.datetime(2024, 1, 15, 12, 0, i % 60, tzinfo=dt.UTC),
        "flag": True,
        "raw": b"\x01\x02",
        "empty": None,
    }
    for i in range(50)
]


@pytest.fixture(scope="module")
def indexed_file(tmp_path_factory):
    table = pa.Table.from_pylist(ROWS, schema=SCHEMA.as_arrow())
    paths, entries = write_and_index(tmp_path_factory.mktemp("rules"), [table], SCHEMA)
    return paths[0], entries


def verdict(indexed_file, where: str) -> tuple[bool, bool]:
    path, entries = indexed_file
    kept, all_match, _ = prune(bound_predicate(where, SCHEMA, "db.t"), [path], entries)
    return bool(kept[0]), bool(all_match[0])


SKIP = [
    ("id = 5", "id range [30, 79] is above 5"),
    ("id < 30", "lower bound 30 is not below 30"),
    ("id > 79", "upper bound 79 is not above 79"),
    ("id BETWEEN 80 AND 90", "range [80, 90] misses [30, 79]"),
    ("id IN (1, 2, 100)", "no IN value lies in [30, 79]"),
    ("id = 40.5", "an integer column never equals 40.5"),
    ("id < 29.5", "id < 29.5 is id <= 29, below the lower bound"),
    ("id > 79.01", "id > 79.01 is id >= 80, above the upper bound"),
    ("id = 100000000000000000000", "a literal beyond int64 equals no value"),
    ("id = NULL", "a comparison with NULL is never TRUE"),
    ("NOT (id = NULL)", "NOT of unknown is unknown, never TRUE"),
    ("id NOT IN (1, NULL)", "NOT IN with a NULL in the list is never TRUE"),
    ("empty = 1", "an all-NULL column matches no comparison"),
    ("empty IS NOT NULL", "an all-NULL column has no non-NULL value"),
    ("id IS NULL", "null count is 0"),
    ("x < 1.5", "lower bound 1.5 is not below 1.5 and NaN is never below anything"),
    ("name < 'apple'", "nothing sorts below the lower bound 'apple'"),
    ("name > 'pear'", "nothing sorts above the upper bound 'pear'"),
    ("name = 'pêar'", "UTF-8 byte order: 'pê' > 'pear' upper bound"),
    ("day = DATE '2024-01-09'", "2024-01-09 is before the lower bound 2024-01-10"),
    ("day > '2024-01-20'", "a date string is compared as a date: nothing after 2024-01-20"),
    ("price = 10.001", "a decimal(9,2) column never equals 10.001"),
    ("price > 20.50", "upper bound 20.50 is not above 20.50"),
    ("ts < TIMESTAMP '2024-01-15 12:00:00'", "lower bound is 12:00:00"),
    ("flag = FALSE", "flag is always TRUE"),
    ("NOT flag", "NOT flag is flag = FALSE"),
    ("raw > 'zz'", "a string literal on a binary column compares as its UTF-8 bytes, above the upper bound"),
    ("id = 5 OR name > 'pear'", "OR of two refuted leaves"),
    ("id + 1 = 5", "id + 1 = 5 is id = 4, below the lower bound"),
]


@pytest.mark.parametrize(("where", "rule"), SKIP)
def test_should_skip(indexed_file, where, rule):
    kept, _ = verdict(indexed_file, where)
    assert not kept, f"Should skip: {rule} ({where})"


KEEP = [
    ("id = 30", "30 is the lower bound"),
    ("id != 30", "not every id is 30"),
    ("id <= 30", "the lower bound itself matches"),
    ("x > 100", "NaN may sort above every number (Spark, Postgres, DuckDB)"),
    ("x != 1.5", "NaN != 1.5 is TRUE"),
    ("name = 'banana'", "'banana' lies inside ['apple', 'pear']: min/max cannot refute it"),
    ("name IS NULL", "one third of the names are NULL"),
    ("day = '2024-01-15'", "inside the date range"),
    ("price = 10", "the integer 10 equals 10.00"),
    (
        "tstz = TIMESTAMP '2024-01-15 12:00:30'",
        "a zone-less literal on timestamptz may mean any zone: widened",
    ),
    ("id > 50 AND id < 40", "each leaf passes min/max on its own; the conjunction is not refuted"),
    ("id = 1 OR name LIKE 'a%'", "an unusable OR branch keeps the file"),
]


@pytest.mark.parametrize(("where", "rule"), KEEP)
def test_should_keep(indexed_file, where, rule):
    kept, _ = verdict(indexed_file, where)
    assert kept, f"Should keep: {rule} ({where})"


ALL_MATCH = [
    ("id BETWEEN 30 AND 79", "every id lies in [30, 79]"),
    ("id >= 0", "the lower bound 30 is >= 0 and id has no NULLs"),
    ("flag", "flag is TRUE on every row"),
    ("id IS NOT NULL", "id has no NULLs"),
    ("empty IS NULL", "every value of empty is NULL"),
    ("id > 0 OR name = 'zzz'", "one OR branch matches every row"),
    ("id != 5", "5 lies outside [30, 79] and id has no NULLs"),
]
NOT_ALL_MATCH = [
    ("name >= 'a'", "NULL names do not satisfy the comparison"),
    ("x > 0", "NaN > 0 is FALSE under IEEE semantics"),
    ("tstz > TIMESTAMP '2020-01-01 00:00:00'", "a widened literal never proves all-match"),
]


@pytest.mark.parametrize(("where", "rule"), ALL_MATCH)
def test_proves_all_match(indexed_file, where, rule):
    kept, all_match = verdict(indexed_file, where)
    assert kept and all_match, f"Should prove all rows match: {rule} ({where})"


@pytest.mark.parametrize(("where", "rule"), NOT_ALL_MATCH)
def test_does_not_overclaim_all_match(indexed_file, where, rule):
    _, all_match = verdict(indexed_file, where)
    assert not all_match, f"Must not claim all rows match: {rule} ({where})"
