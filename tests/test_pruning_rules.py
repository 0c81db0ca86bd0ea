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

from indexlib.index_kinds.settings import IndexSettings
from indexlib.pruning.index_evidence import prune
from indexlib.query.binding import bound_predicate
from indexlib.query.sql import Clock

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
    NestedField(11, "code", StringType()),
)

# One file: id in [30, 79], x in [1.5, 9.0] plus a NaN, name in ['apple', 'pear'], one NULL name,
# day in [2024-01-10, 2024-01-20], price in [10.00, 20.50], ts/tstz on 2024-01-15 12:00, flag always true,
# empty all NULL, code in ['svc-a', 'svc-b'] with no NULLs.
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
        "code": ["svc-a", "svc-b"][i % 2],
    }
    for i in range(50)
]


@pytest.fixture(scope="module")
def indexed_file(tmp_path_factory):
    table = pa.Table.from_pylist(ROWS, schema=SCHEMA.as_arrow())
    # min/max rules: the file gets no Bloom filter or automaton (their rules are in test_index_kinds.py)
    paths, entries = write_and_index(tmp_path_factory.mktemp("rules"), [table], SCHEMA, IndexSettings(kinds=()))
    return paths[0], entries


# CURRENT_DATE is 2024-01-21 and CURRENT_TIMESTAMP 2024-01-21 06:00 UTC in every case below.
CLOCK = Clock(now=dt.datetime(2024, 1, 21, 6, 0, tzinfo=dt.UTC), time_zone=dt.UTC)


def verdict(indexed_file, where: str) -> tuple[bool, bool]:
    path, entries = indexed_file
    verdicts = prune(bound_predicate(where, SCHEMA, "db.t", CLOCK), [path], entries)
    kept, all_match = verdicts.kept, verdicts.all_match
    return bool(kept[0]), bool(all_match[0])


SKIP = [
    ("id = 5", "id range [30, 79] is above 5"),
    ("id < 30", "lower bound 30 is not below 30"),
    ("id > 79", "upper bound 79 is not above 79"),
    ("id BETWEEN 80 AND 90", "range [80, 90] misses [30, 79]"),
    ("id > 50 AND id < 40", "the comparisons of one column in an AND are one range, and (50, 40) is empty"),
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
    ("3 + id <= 32", "3 + id <= 32 is id <= 29, below the lower bound"),
    ("id < 60 / 2", "60 / 2 folds to 30: nothing is below the lower bound 30"),
    ("id = CAST('5' AS BIGINT)", "a literal CAST folds to 5, outside [30, 79]"),
    ("id <=> NULL", "null-safe equality with NULL is IS NULL, and id has no NULLs"),
    ("flag IS FALSE", "flag is always TRUE"),
    ("price + 0.5 > 21", "price + 0.5 > 21 is price > 20.50, above the upper bound"),
    ("name LIKE 'z%'", "strings with prefix 'z' sort after the upper bound 'pear'"),
    ("name LIKE 'aa%'", "strings with prefix 'aa' sort before the lower bound 'apple'"),
    ("name LIKE 'pearl'", "LIKE without wildcards is equality: 'pearl' sorts after the upper bound 'pear'"),
    ("starts_with(name, 'q')", "strings with prefix 'q' sort after the upper bound 'pear'"),
    ("name RLIKE '^zz'", "an anchored regex with literal prefix 'zz' matches only after the upper bound"),
    ("code NOT LIKE 'svc-%'", "every code starts with 'svc-' (both bounds do) so NOT LIKE matches none"),
    ("isnan(price)", "a decimal column holds no NaN"),
    ("isnan(id)", "a long column holds no NaN"),
    ("CAST(ts AS DATE) = DATE '2024-01-16'", "every ts lies on 2024-01-15"),
    (
        "CAST(ts AS DATE) < '2024-01-15'",
        "CAST(ts AS DATE) < 2024-01-15 is ts < 2024-01-15 00:00, below the lower bound",
    ),
    ("date_trunc('day', ts) = TIMESTAMP '2024-01-15 06:00:00'", "a value truncated to the day is never 06:00"),
    ("date_trunc('hour', ts) > TIMESTAMP '2024-01-15 12:00:00'", "every ts truncates to 12:00"),
    ("date_trunc('month', ts) < DATE '2024-01-01'", "every ts truncates to 2024-01-01, not before it"),
    ("year(ts) = 2023", "every ts is in 2024"),
    ("year(day) > 2024.5", "year(day) > 2024.5 is year >= 2025: every day is in 2024"),
    ("month(ts) = 2", "bounds lie within January 2024, so month(ts) is 1"),
    ("day(ts) < 15", "bounds lie within January 2024, both on day 15"),
    ("hour(ts) != 12", "bounds lie within one day, both in hour 12"),
    ("day >= CURRENT_DATE", "CURRENT_DATE is 2024-01-21, after the upper bound 2024-01-20"),
    ("day > CURRENT_DATE - INTERVAL '1' DAY", "CURRENT_DATE - 1 day is 2024-01-20, the upper bound itself"),
    ("day + INTERVAL '1' DAY > DATE '2024-01-21'", "day + 1 day > 2024-01-21 is day > 2024-01-20"),
    ("day < TIMESTAMP '2024-01-10 00:00:00'", "a date compared with a timestamp compares its midnight"),
    (
        "ts > CURRENT_TIMESTAMP - INTERVAL '2' DAY",
        "now - 2 days is 2024-01-19 06:00 UTC; even shifted by any session zone (14 h) it is after every ts",
    ),
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
    ("id = 1 OR abs(id) = 3", "an unusable OR branch keeps the file"),
    ("name LIKE 'b%'", "strings with prefix 'b' sort inside ['apple', 'pear']"),
    ("name LIKE '%e'", "no literal prefix: min/max cannot refute"),
    ("name ILIKE 'APPLE'", "ILIKE is no equality: 'APPLE' sorts before the lower bound 'apple', and matches it"),
    ("name ILIKE 'P%'", "ILIKE has no prefix: 'P' sorts before the lower bound 'apple', yet the bound 'pear' matches"),
    ("name LIKE 'p\\%'", "without ESCAPE, engines disagree on backslash: the prefix stops before it"),
    ("name RLIKE 'zz'", "an unanchored regex may match anywhere in the value"),
    ("name RLIKE '^(?i)Z'", "a regex with flags has no usable prefix"),
    ("name NOT LIKE 'apple'", "'pear' rows do not match 'apple'"),
    ("isnan(x)", "x holds a NaN"),
    ("NOT isnan(x)", "x holds values that are not NaN"),
    ("id * 2 = 3", "multiplication on a column is not unwrapped"),
    ("id = 1 / 0", "division by zero differs by engine (NULL, infinity, error): unused"),
    ("x + 1 < 2", "float addition rounds: not unwrapped"),
    ("month(tstz) = 2", "month of a timestamptz depends on the session zone: unused"),
    (
        "CAST(tstz AS DATE) = DATE '2024-01-16'",
        "12:00 UTC may be 2024-01-16 in the session zone (up to +14 h): widened",
    ),
    ("CAST(ts AS DATE) = DATE '2024-01-15'", "every ts lies on 2024-01-15"),
    ("year(ts) = 2024 AND month(ts) = 1", "January 2024"),
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
    ("code LIKE 'svc-%'", "both bounds start with 'svc-' and code has no NULLs"),
    ("starts_with(code, 'svc')", "both bounds start with 'svc' and code has no NULLs"),
    ("code NOT LIKE 'x%'", "no code can start with 'x' and code has no NULLs"),
    ("code LIKE '%'", "'%' matches every non-NULL string and code has no NULLs"),
    ("NOT isnan(id)", "a long column has no NaN and id has no NULLs"),
    ("CAST(ts AS DATE) = DATE '2024-01-15'", "every ts lies within 2024-01-15"),
    ("year(ts) = 2024", "every ts lies within 2024"),
    ("month(ts) = 1", "bounds within one year, both in January"),
    ("date_trunc('hour', ts) = TIMESTAMP '2024-01-15 12:00:00'", "every ts lies within hour 12:00"),
    ("id <=> id + 0 OR id >= 30", "an unusable branch does not stop the other from proving all rows match"),
]
NOT_ALL_MATCH = [
    ("name >= 'a'", "NULL names do not satisfy the comparison"),
    ("x > 0", "NaN > 0 is FALSE under IEEE semantics"),
    ("tstz > TIMESTAMP '2020-01-01 00:00:00'", "a widened literal never proves all-match"),
    ("name LIKE 'a%' OR name LIKE 'p%'", "NULL names match neither pattern"),
    ("code RLIKE '^svc'", "a regex is never proven by its prefix (it may require more)"),
    ("NOT isnan(x)", "x holds a NaN"),
    ("code LIKE 'svc-_x'", "a pattern narrower than its prefix proves nothing"),
]


@pytest.mark.parametrize(("where", "rule"), ALL_MATCH)
def test_proves_all_match(indexed_file, where, rule):
    kept, all_match = verdict(indexed_file, where)
    assert kept and all_match, f"Should prove all rows match: {rule} ({where})"


@pytest.mark.parametrize(("where", "rule"), NOT_ALL_MATCH)
def test_does_not_overclaim_all_match(indexed_file, where, rule):
    _, all_match = verdict(indexed_file, where)
    assert not all_match, f"Must not claim all rows match: {rule} ({where})"
