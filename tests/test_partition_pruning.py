"""Partition stage on real Iceberg tables (SQLite catalog, pyiceberg writes): brute force over each file's rows.

Every table is appended one labelled batch at a time; pyiceberg writes one file per partition, so each label names
the file(s) of one partition. A file "matches" a row filter when one of its rows is TRUE under SQL three-valued logic
(NULL compares as unknown), and "all match" when every row is TRUE.
"""

from __future__ import annotations

import datetime as dt
import math
import operator
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg import expressions as ice
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions.visitors import bind
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from pyiceberg.typedef import Record
from pyiceberg.types import DateType, DoubleType, LongType, NestedField, StringType, TimestampType

from indexlib.indexing.file_rows import unindexed_entries
from indexlib.pruning.partitions import lifted_fields, partition_verdict
from indexlib.sources.base import DataFileRef
from indexlib.sources.iceberg import IcebergSource
from indexlib.store.schema import rows_of

SCHEMA = Schema(
    NestedField(1, "tag", StringType()),
    NestedField(2, "ts", TimestampType()),
    NestedField(3, "d", DateType()),
    NestedField(4, "id", LongType()),
    NestedField(5, "s", StringType()),
    NestedField(6, "n", LongType()),
    NestedField(7, "region", StringType()),
    NestedField(8, "x", DoubleType()),
)
ARROW_TYPES = {
    "tag": pa.string(),
    "ts": pa.timestamp("us"),
    "d": pa.date32(),
    "id": pa.int64(),
    "s": pa.string(),
    "n": pa.int64(),
    "region": pa.string(),
    "x": pa.float64(),
}
SOURCE_ID = {field.name: field.field_id for field in SCHEMA.fields}


def _ts(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None


# Each batch lies inside one hour, hence inside one partition of every time transform; pre1970 has negative values.
TIME_BATCHES = {
    "pre1970": ["1969-12-31T23:10:00", "1969-12-31T23:59:59.999999"],
    "y2023": ["2023-06-15T10:00:00", "2023-06-15T10:15:00"],
    "feb29": ["2024-02-29T23:00:00", "2024-02-29T23:59:59.999999"],
    "mar01": ["2024-03-01T00:00:00", "2024-03-01T00:30:00"],
    "mar31": ["2024-03-31T23:00:00", "2024-03-31T23:59:59"],
    "apr": ["2024-04-01T00:00:00", "2024-04-01T00:45:00"],
    "nulls": [None, None],
}
TS_BATCHES = {label: {"ts": [_ts(v) for v in values]} for label, values in TIME_BATCHES.items()}
DATE_BATCHES = {label: {"d": [_ts(v).date() if v else None for v in values]} for label, values in TIME_BATCHES.items()}


def _bucket_batches(column: str, values: list, buckets: int, iceberg_type) -> dict[str, dict[str, list]]:
    """Group `values` by pyiceberg's own bucket function, one batch per bucket, plus a batch of NULLs."""
    bucket_of = BucketTransform(buckets).transform(iceberg_type)
    batches: dict[str, dict[str, list]] = {}
    for value in values:
        batches.setdefault(f"b{bucket_of(value)}", {column: []})[column].append(value)
    return dict(sorted(batches.items())) | {"nulls": {column: [None, None]}}


# name -> (partition fields as (column, transform, partition name), batches: label -> column values)
TABLES = {
    "identity_region": (
        [("region", IdentityTransform(), "region")],
        {
            "eu": {"region": ["eu", "eu"]},
            "us": {"region": ["us"]},
            "empty": {"region": [""]},
            "nulls": {"region": [None, None]},
        },
    ),
    "identity_x": (
        [("x", IdentityTransform(), "x")],
        # no NaN batch: pyiceberg 0.12 cannot write a NaN identity partition (ZeroDivisionError); see test_nan_*
        {"neg": {"x": [-1.5]}, "zero": {"x": [0.0]}, "big": {"x": [1e300]}},
    ),
    "year_ts": ([("ts", YearTransform(), "ts_year")], TS_BATCHES),
    "month_ts": ([("ts", MonthTransform(), "ts_month")], TS_BATCHES),
    "day_ts": ([("ts", DayTransform(), "ts_day")], TS_BATCHES),
    "hour_ts": ([("ts", HourTransform(), "ts_hour")], TS_BATCHES),
    "year_d": ([("d", YearTransform(), "d_year")], DATE_BATCHES),
    "identity_ts": ([("ts", IdentityTransform(), "ts")], TS_BATCHES),
    "identity_d": ([("d", IdentityTransform(), "d")], DATE_BATCHES),
    "month_d": ([("d", MonthTransform(), "d_month")], DATE_BATCHES),
    "day_d": ([("d", DayTransform(), "d_day")], DATE_BATCHES),
    "bucket_id": ([("id", BucketTransform(4), "id_bucket")], _bucket_batches("id", list(range(-5, 25)), 4, LongType())),
    "bucket_s": (
        [("s", BucketTransform(3), "s_bucket")],
        _bucket_batches("s", ["", "a", "b", "apple", "ñandú", "😀"], 3, StringType()),
    ),
    "truncate_s": (
        [("s", TruncateTransform(3), "s_trunc")],
        {
            "app": {"s": ["app", "apple", "applesauce"]},
            "apr": {"s": ["apricot", "apron"]},
            "ban": {"s": ["banana", "band"]},
            "b": {"s": ["b"]},
            "empty": {"s": [""]},
            "nan": {"s": ["ñandú", "ñandúes"]},
            "emoji": {"s": ["😀ab", "😀abc"]},
            "nulls": {"s": [None]},
        },
    ),
    "truncate_n": (
        [("n", TruncateTransform(10), "n_trunc")],
        {
            "m20": {"n": [-15, -11]},
            "0": {"n": [0, 5, 9]},
            "10": {"n": [10, 12, 19]},
            "20": {"n": [25, 27]},
            "nulls": {"n": [None]},
        },
    ),
    "void_n": ([("n", VoidTransform(), "n_null")], {"low": {"n": [1, 2]}, "high": {"n": [50, 60]}}),
}

FILTERS = {
    "region": [
        ice.EqualTo("region", "eu"),
        ice.NotEqualTo("region", "eu"),
        ice.In("region", {"eu", ""}),
        ice.NotIn("region", {"eu", "us"}),
        ice.IsNull("region"),
        ice.NotNull("region"),
        ice.StartsWith("region", "e"),
        ice.NotStartsWith("region", "e"),
        ice.LessThan("region", "f"),
        ice.Not(ice.EqualTo("region", "us")),
        ice.Or(ice.EqualTo("region", "us"), ice.EqualTo("tag", "eu")),
        ice.And(ice.EqualTo("region", "eu"), ice.EqualTo("tag", "eu")),
    ],
    "x": [
        ice.GreaterThan("x", 0.0),
        ice.LessThanOrEqual("x", 0.0),
        ice.EqualTo("x", 0.0),
        ice.NotEqualTo("x", 0.0),
        ice.IsNaN("x"),
        ice.NotNaN("x"),
        ice.Not(ice.LessThan("x", 1.0)),
    ],
    "ts": [
        ice.GreaterThanOrEqual("ts", "2024-03-01T00:00:00"),
        ice.LessThan("ts", "2024-03-01T00:00:00"),
        ice.LessThanOrEqual("ts", "1969-12-31T23:59:59"),
        ice.LessThan("ts", "1970-01-01T00:00:00"),
        ice.GreaterThan("ts", "2024-03-31T23:59:59.999999"),
        ice.EqualTo("ts", "2024-03-01T00:30:00"),
        ice.In("ts", {"2024-02-29T23:00:00", "2024-04-01T00:45:00"}),
        ice.NotEqualTo("ts", "2023-06-15T10:15:00"),
        ice.NotIn("ts", {"2024-03-01T00:00:00", "2024-03-01T00:30:00"}),
        ice.IsNull("ts"),
        ice.NotNull("ts"),
        ice.And(ice.GreaterThanOrEqual("ts", "2024-03-01T00:00:00"), ice.LessThan("ts", "2024-04-01T00:00:00")),
        ice.Or(ice.LessThan("ts", "1970-01-01T00:00:00"), ice.GreaterThanOrEqual("ts", "2024-04-01T00:00:00")),
        ice.Not(ice.GreaterThanOrEqual("ts", "2024-03-01T00:00:00")),
        ice.And(ice.GreaterThanOrEqual("ts", "2024-01-01T00:00:00"), ice.EqualTo("tag", "apr")),
        ice.Or(ice.EqualTo("ts", "2024-03-01T00:30:00"), ice.EqualTo("tag", "y2023")),
    ],
    "d": [
        ice.EqualTo("d", "2024-02-29"),
        ice.GreaterThanOrEqual("d", "2024-03-01"),
        ice.LessThan("d", "1970-01-01"),
        ice.LessThanOrEqual("d", "2024-03-31"),
        ice.GreaterThan("d", "2024-02-29"),
        ice.In("d", {"2023-06-15", "2024-04-01"}),
        ice.NotEqualTo("d", "2024-03-01"),
        ice.NotIn("d", {"1969-12-31"}),
        ice.IsNull("d"),
        ice.And(ice.GreaterThanOrEqual("d", "2024-03-01"), ice.LessThan("d", "2024-04-01")),
        ice.Not(ice.LessThan("d", "2024-03-01")),
    ],
    "id": [
        ice.EqualTo("id", 0),
        ice.EqualTo("id", 7),
        ice.In("id", {1, 2, 3}),
        ice.NotEqualTo("id", 7),
        ice.NotIn("id", {7, 8}),
        ice.GreaterThan("id", 10),
        ice.IsNull("id"),
        ice.NotNull("id"),
        ice.Not(ice.EqualTo("id", 0)),
    ],
    "s": [
        ice.EqualTo("s", ""),
        ice.EqualTo("s", "banana"),
        ice.EqualTo("s", "ñandú"),
        ice.In("s", {"apple", "b"}),
        ice.StartsWith("s", "apple"),
        ice.StartsWith("s", "ap"),
        ice.StartsWith("s", "ban"),
        ice.StartsWith("s", "😀a"),
        ice.NotStartsWith("s", "app"),
        ice.NotStartsWith("s", "a"),
        ice.NotStartsWith("s", "apple"),
        ice.LessThan("s", "apr"),
        ice.LessThanOrEqual("s", "b"),
        ice.GreaterThan("s", "az"),
        ice.GreaterThanOrEqual("s", "band"),
        ice.NotEqualTo("s", "b"),
        ice.NotIn("s", {"b", ""}),
        ice.IsNull("s"),
    ],
    "n": [
        ice.LessThan("n", 10),
        ice.LessThanOrEqual("n", -11),
        ice.GreaterThanOrEqual("n", 12),
        ice.GreaterThanOrEqual("n", 10),
        ice.GreaterThan("n", 9),
        ice.EqualTo("n", 5),
        ice.In("n", {-15, 27}),
        ice.NotEqualTo("n", 5),
        ice.NotIn("n", {25, 27}),
        ice.And(ice.GreaterThanOrEqual("n", 0), ice.LessThan("n", 20)),
        ice.Or(ice.LessThan("n", 0), ice.GreaterThan("n", 20)),
        ice.IsNull("n"),
    ],
}
FILTERS["ts"].append(ice.AlwaysTrue())


# --- real tables and brute force ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ice_catalog(tmp_path_factory):
    root = tmp_path_factory.mktemp("partition_pruning")
    catalog = SqlCatalog("test", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")
    catalog.create_namespace("db")
    return catalog


def _arrow(label: str, columns: dict[str, list]) -> pa.Table:
    rows = len(next(iter(columns.values())))
    data = {name: columns.get(name, [label] * rows if name == "tag" else [None] * rows) for name in ARROW_TYPES}
    return pa.table({name: pa.array(values, ARROW_TYPES[name]) for name, values in data.items()})


def _append(table, batches: dict[str, dict[str, list]]) -> None:
    for label, columns in batches.items():
        table.append(_arrow(label, columns))


@pytest.fixture(scope="module")
def tables(ice_catalog):
    """Each entry of TABLES, created and filled once on first use."""
    made: dict[str, object] = {}

    def get(name: str):
        if name not in made:
            fields, batches = TABLES[name]
            spec = PartitionSpec(
                *(
                    PartitionField(SOURCE_ID[column], 1000 + i, transform, part_name)
                    for i, (column, transform, part_name) in enumerate(fields)
                )
            )
            table = ice_catalog.create_table(f"db.{name}", schema=SCHEMA, partition_spec=spec)
            _append(table, batches)
            made[name] = ice_catalog.load_table(f"db.{name}")
        return made[name]

    return get


def _live(catalog, name: str) -> list[DataFileRef]:
    return IcebergSource(catalog, f"db.{name}").live_files()


_ROWS: dict[str, list[dict]] = {}


def _rows(path: str) -> list[dict]:
    """A data file's rows, with Iceberg's physical values (timestamps in micros, dates in days)."""
    if path not in _ROWS:
        data = pq.read_table(urlparse(path).path)
        columns = {}
        for name in data.column_names:
            column = data.column(name)
            if pa.types.is_timestamp(column.type):
                column = pc.cast(column, pa.int64())
            elif pa.types.is_date32(column.type):
                column = pc.cast(column, pa.int32())
            columns[name] = column.to_pylist()
        _ROWS[path] = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    return _ROWS[path]


_COMPARE = {
    ice.BoundEqualTo: operator.eq,
    ice.BoundNotEqualTo: operator.ne,
    ice.BoundLessThan: operator.lt,
    ice.BoundLessThanOrEqual: operator.le,
    ice.BoundGreaterThan: operator.gt,
    ice.BoundGreaterThanOrEqual: operator.ge,
}


def sql_eval(expr, row: dict) -> bool | None:
    """SQL three-valued evaluation of a bound pyiceberg expression on one row (None = unknown).

    NaN follows Spark: it equals itself and sorts above every number.
    """
    if isinstance(expr, ice.AlwaysTrue):
        return True
    if isinstance(expr, ice.AlwaysFalse):
        return False
    if isinstance(expr, ice.Not):
        child = sql_eval(expr.child, row)
        return None if child is None else not child
    if isinstance(expr, ice.And):
        left, right = sql_eval(expr.left, row), sql_eval(expr.right, row)
        return False if left is False or right is False else (None if left is None or right is None else True)
    if isinstance(expr, ice.Or):
        left, right = sql_eval(expr.left, row), sql_eval(expr.right, row)
        return True if left is True or right is True else (None if left is None or right is None else False)
    value = row[expr.term.ref().field.name]
    if isinstance(expr, ice.BoundIsNull):
        return value is None
    if isinstance(expr, ice.BoundNotNull):
        return value is not None
    if value is None:
        return None
    if isinstance(expr, ice.BoundIsNaN | ice.BoundNotNaN):
        return math.isnan(value) == isinstance(expr, ice.BoundIsNaN)
    if isinstance(expr, ice.BoundIn | ice.BoundNotIn):
        found = any(_spark_compare(value, lit.value) == 0 for lit in expr.literals)
        return found == isinstance(expr, ice.BoundIn)
    if isinstance(expr, ice.BoundStartsWith | ice.BoundNotStartsWith):
        return value.startswith(expr.literal.value) == isinstance(expr, ice.BoundStartsWith)
    return _COMPARE[type(expr)](_spark_compare(value, expr.literal.value), 0)


def _spark_compare(a, b) -> int:
    if isinstance(a, float) and math.isnan(a):
        return 0 if isinstance(b, float) and math.isnan(b) else 1
    if isinstance(b, float) and math.isnan(b):
        return -1
    return (a > b) - (a < b)


def _truth(table, files: list[DataFileRef], row_filter) -> tuple[np.ndarray, np.ndarray]:
    """(some row matches, every row matches) per file, by brute force."""
    bound = bind(table.schema(), row_filter, case_sensitive=True)
    results = [[sql_eval(bound, row) is True for row in _rows(f.path)] for f in files]
    return np.array([any(r) for r in results]), np.array([all(r) for r in results])


def _labels(files: list[DataFileRef]) -> list[str]:
    return [_rows(f.path)[0]["tag"] for f in files]


def _assert_sound(table, files, row_filter) -> tuple[np.ndarray, np.ndarray]:
    might, every = partition_verdict(table, files, row_filter)
    some_match, all_match = _truth(table, files, row_filter)
    for label, f, m, a, sm, am in zip(_labels(files), files, might, every, some_match, all_match, strict=True):
        assert m or not sm, f"{label} ({f.partition}) holds a row matching {row_filter}: must not skip"
        assert am or not a, f"{label} ({f.partition}) has a row failing {row_filter}: must not claim all match"
    return might, every


def _cases():
    for name, (fields, _) in TABLES.items():
        for column in sorted({column for column, _, _ in fields}):
            for i, row_filter in enumerate(FILTERS[column]):
                yield pytest.param(name, row_filter, id=f"{name}-{i}-{row_filter}"[:120])


@pytest.mark.parametrize(("name", "row_filter"), list(_cases()))
def test_sound_against_brute_force(tables, ice_catalog, name, row_filter):
    table = tables(name)
    _assert_sound(table, _live(ice_catalog, name), row_filter)


# --- what the stage proves: one rule per row --------------------------------------------------------------------

APRIL = ice.And(ice.GreaterThanOrEqual("ts", "2024-04-01T00:00:00"), ice.LessThan("ts", "2024-05-01T00:00:00"))
MARCH = ice.And(ice.GreaterThanOrEqual("ts", "2024-03-01T00:00:00"), ice.LessThan("ts", "2024-04-01T00:00:00"))


def rule(name: str, row_filter, keep: str | None, all_match: str, why: str):
    """One rule: `keep` / `all_match` are space-separated batch labels; keep=None means "exactly the files holding a
    match" (bucket cases, whose labels depend on the hash)."""
    return pytest.param(name, row_filter, keep, all_match, why, id=f"{name}: {why}"[:100])


# fmt: off
RULES = [
    rule("month_ts", APRIL, "apr", "apr", "month(ts) partition 2024-03 cannot hold ts in April: should skip"),
    rule("month_ts", MARCH, "mar01 mar31", "mar01 mar31", "month(ts) = 2024-03 holds only March: all match"),
    rule("day_ts", MARCH, "mar01 mar31", "mar01 mar31", "day(ts) inside March holds only March"),
    rule("hour_ts", ice.EqualTo("ts", "2024-03-01T00:30:00"), "mar01", "", "ts = v only in hour(v); never all"),
    rule("year_ts", ice.GreaterThanOrEqual("ts", "2024-01-01T00:00:00"), "feb29 mar01 mar31 apr",
         "feb29 mar01 mar31 apr", "year(ts) = 2024 holds only ts >= 2024-01-01"),
    rule("year_ts", ice.GreaterThanOrEqual("ts", "2024-03-01T00:00:00"), "feb29 mar01 mar31 apr", "",
         "year(ts) = 2024 may hold ts before March: keep, not all"),
    rule("day_ts", ice.LessThan("ts", "1970-01-01T00:00:00"), "pre1970", "pre1970",
         "day(1969-12-31T23:10) = -1: floor, not truncation towards zero"),
    rule("hour_ts", ice.LessThanOrEqual("ts", "1969-12-31T23:59:59"), "pre1970", "",
         "hour(ts) = -1 may hold 23:59:59.5: keep, not all"),
    rule("month_ts", ice.NotEqualTo("ts", "2023-06-15T10:15:00"), "pre1970 y2023 feb29 mar01 mar31 apr nulls",
         "pre1970 feb29 mar01 mar31 apr",
         "month(ts) != 2023-06 proves ts != v; the NULL partition never matches != (unknown)"),
    rule("month_ts", ice.IsNull("ts"), "nulls", "nulls", "month(ts) is NULL iff ts is NULL"),
    rule("day_d", ice.EqualTo("d", "2024-02-29"), "feb29", "",
         "day(d) = d, but pyiceberg has no strict projection of = for any time transform: not all"),
    rule("month_d", ice.In("d", {"2023-06-15", "2024-04-01"}), "y2023 apr", "",
         "d IN (...) lies in month 2023-06 or 2024-04"),
    rule("year_d", ice.LessThan("d", "1970-01-01"), "pre1970", "pre1970", "year(1969-12-31) = -1: before the epoch"),
    rule("identity_region", ice.EqualTo("region", "eu"), "eu", "eu", "identity: region = 'eu'"),
    rule("identity_region", ice.NotEqualTo("region", "eu"), "us empty nulls", "us empty",
         "identity: region != 'eu' keeps the NULL partition but not as all-match (NULL != 'eu' is unknown)"),
    rule("identity_region", ice.NotIn("region", {"eu", "us"}), "empty nulls", "empty", "identity: NOT IN"),
    rule("identity_region", ice.StartsWith("region", "e"), "eu", "eu", "identity: starts_with"),
    rule("identity_x", ice.GreaterThan("x", 0.0), "big", "big", "identity on double: x > 0"),
    rule("bucket_id", ice.EqualTo("id", 0), None, "", "bucket: id = 0 only in bucket(0), though 0 is falsy"),
    rule("bucket_id", ice.In("id", {1, 2, 3}), None, "", "bucket: id IN (...) only in those values' buckets"),
    rule("bucket_id", ice.GreaterThan("id", 10), "b0 b1 b2 b3 nulls", "", "bucket: a range does not project: keep all"),
    rule("bucket_id", ice.NotNull("id"), "b0 b1 b2 b3", "b0 b1 b2 b3", "bucket is NULL iff id is NULL"),
    rule("bucket_s", ice.EqualTo("s", ""), None, "", "bucket: s = '' only in bucket(''), though '' is falsy"),
    rule("truncate_s", ice.StartsWith("s", "apple"), "app", "",
         "truncate[3]: starts_with('apple') only in 'app'; not all ('app' itself)"),
    rule("truncate_s", ice.StartsWith("s", "ap"), "app apr", "app apr",
         "truncate[3]: a prefix shorter than the width is decided by the partition"),
    rule("truncate_s", ice.StartsWith("s", "😀a"), "emoji", "emoji", "truncate counts code points, not bytes"),
    rule("truncate_s", ice.NotStartsWith("s", "app"), "apr ban b empty nan emoji nulls", "apr ban b empty nan emoji",
         "truncate[3]: NOT starts_with a full-width prefix skips that partition"),
    rule("truncate_s", ice.LessThan("s", "apr"), "app apr empty", "app empty",
         "truncate[3]: s < 'apr' cannot be in partition 'b' or above"),
    rule("truncate_s", ice.EqualTo("s", "banana"), "ban", "", "truncate[3]: s = 'banana' only in 'ban', never all"),
    rule("truncate_n", ice.GreaterThanOrEqual("n", 12), "10 20", "20",
         "truncate[10]: n >= 12 may be in partition 10 (not all), not in 0"),
    rule("truncate_n", ice.LessThan("n", 0), "m20", "m20", "truncate[10] floors: -15 lands in -20"),
    rule("truncate_n", ice.EqualTo("n", 5), "0", "", "truncate[10]: n = 5 only in partition 0"),
    rule("void_n", ice.EqualTo("n", 1), "low high", "", "void proves nothing"),
    rule("void_n", ice.IsNull("n"), "low high", "", "void is NULL in every file, whatever n holds"),
]
# fmt: on


@pytest.mark.parametrize(("name", "row_filter", "keep", "all_match", "why"), RULES)
def test_rule(tables, ice_catalog, name, row_filter, keep, all_match, why):
    table = tables(name)
    files = _live(ice_catalog, name)
    might, every = _assert_sound(table, files, row_filter)
    labels = _labels(files)
    if keep is None:
        some_match, _ = _truth(table, files, row_filter)
        kept = {label for label, match in zip(labels, some_match, strict=True) if match}
        assert kept != set(labels), f"{why}: the case must skip something"
    else:
        kept = set(keep.split())
    skipped = set(labels) - kept
    got_skipped = {label for label, m in zip(labels, might, strict=True) if not m}
    got_all = {label for label, a in zip(labels, every, strict=True) if a}
    assert got_skipped == skipped, f"{why}: should skip {sorted(skipped)}, skipped {sorted(got_skipped)}"
    assert got_all == set(all_match.split()), f"{why}: all-match should be [{all_match}], got {sorted(got_all)}"


# --- spec evolution ---------------------------------------------------------------------------------------------

EVOLVED_BATCHES = [  # (spec the batch is written under, label, ts, id)
    (0, "s0-mar", "2024-03-05T10:00:00", [1, 2]),
    (0, "s0-apr", "2024-04-05T10:00:00", [3]),
    (1, "s1-mar", "2024-03-06T10:00:00", [5]),
    (1, "s1-apr", "2024-04-06T10:00:00", [6]),
    (2, "s2-mar", "2024-03-07T10:00:00", [5]),
    (2, "s2-apr", "2024-04-07T10:00:00", [7]),
]
EVOLVED_FILTERS = [
    ice.EqualTo("id", 5),
    MARCH,
    APRIL,
    ice.And(MARCH, ice.EqualTo("id", 5)),
    ice.Or(APRIL, ice.EqualTo("id", 5)),
    ice.NotEqualTo("id", 5),
    ice.IsNull("ts"),
]


@pytest.fixture(scope="module", params=["1", "2"], ids=["v1", "v2"])
def evolved(request, ice_catalog):
    """month(ts); then + bucket[4](id); then - month(ts) (v1 turns it into void, v2 drops it)."""
    version = request.param
    name = f"db.evolved_v{version}"
    spec = PartitionSpec(PartitionField(SOURCE_ID["ts"], 1000, MonthTransform(), "ts_month"))
    table = ice_catalog.create_table(name, schema=SCHEMA, partition_spec=spec, properties={"format-version": version})
    for spec_step in range(3):
        if spec_step == 1:
            with table.update_spec() as update:
                update.add_field("id", BucketTransform(4), "id_bucket")
        if spec_step == 2:
            with table.update_spec() as update:
                update.remove_field("ts_month")
        for _, label, ts, ids in (b for b in EVOLVED_BATCHES if b[0] == spec_step):
            table.append(_arrow(label, {"ts": [_ts(ts)] * len(ids), "id": ids}))
    return ice_catalog.load_table(name), version


def test_evolved_files_keep_their_spec(evolved, ice_catalog):
    table, version = evolved
    files = IcebergSource(ice_catalog, ".".join(table.name())).live_files()
    by_label = {label: f.spec_id for label, f in zip(_labels(files), files, strict=True)}
    assert by_label == {"s0-mar": 0, "s0-apr": 0, "s1-mar": 1, "s1-apr": 1, "s2-mar": 2, "s2-apr": 2}
    if version == "1":
        assert "void" in str(table.specs()[2].fields[0].transform), "v1 keeps a removed field as void"


@pytest.mark.parametrize("row_filter", EVOLVED_FILTERS, ids=[str(f)[:80] for f in EVOLVED_FILTERS])
def test_evolved_sound(evolved, ice_catalog, row_filter):
    table, _ = evolved
    _assert_sound(table, IcebergSource(ice_catalog, ".".join(table.name())).live_files(), row_filter)


def test_evolved_each_file_under_its_own_spec(evolved, ice_catalog):
    table, _ = evolved
    files = IcebergSource(ice_catalog, ".".join(table.name())).live_files()
    labels = _labels(files)

    def skipped(row_filter) -> set[str]:
        might, _ = _assert_sound(table, files, row_filter)
        return {label for label, m in zip(labels, might, strict=True) if not m}

    bucket = BucketTransform(4).transform(LongType())
    other_buckets = {label for _, label, _, ids in EVOLVED_BATCHES[2:] if bucket(ids[0]) != bucket(5)}
    assert skipped(APRIL) == {"s0-mar", "s1-mar"}, "month(ts) prunes specs 0 and 1; spec 2 has no ts field: keep"
    assert skipped(ice.EqualTo("id", 5)) == other_buckets, "only specs 1 and 2 have bucket(id); spec 0 keeps all"
    assert skipped(ice.And(MARCH, ice.EqualTo("id", 5))) == {"s0-apr", "s1-apr"} | other_buckets


# --- unknown, unpartitioned, explain, source -----------------------------------------------------------------------


def test_unknown_spec_or_missing_partition_is_kept(tables, ice_catalog):
    table = tables("month_ts")
    real = _live(ice_catalog, "month_ts")[0]
    files = [
        DataFileRef(real.path, 1, 1, "PARQUET", spec_id=99, partition=real.partition),
        DataFileRef(real.path, 1, 1, "PARQUET", spec_id=0, partition=None),
        DataFileRef(real.path, 1, 1, "PARQUET"),
    ]
    might, every = partition_verdict(table, files, ice.AlwaysFalse())
    assert might.tolist() == [True] * 3, "unknown spec or partition: keep"
    assert every.tolist() == [False] * 3


def test_nan_partition_value_is_kept(tables, ice_catalog):
    """Spark orders NaN above every number (NaN > 0 is true), Python compares it false: a NaN partition proves nothing."""
    table = tables("identity_x")
    real = _live(ice_catalog, "identity_x")[0]
    nan_file = DataFileRef(real.path, 1, 1, "PARQUET", spec_id=real.spec_id, partition=Record(math.nan))
    for row_filter in (ice.GreaterThan("x", 0.0), ice.NotEqualTo("x", 0.0), ice.IsNaN("x"), ice.LessThan("x", 0.0)):
        might, every = partition_verdict(table, [nan_file], row_filter)
        assert might[0] and not every[0], f"NaN partition with {row_filter}: keep, never all"


def test_unpartitioned_table_proves_nothing(ice_catalog):
    table = ice_catalog.create_table("db.unpartitioned", schema=SCHEMA)
    table.append(_arrow("all", {"n": [1, 2]}))
    files = _live(ice_catalog, "unpartitioned")
    assert files[0].partition is not None and len(files[0].partition) == 0
    for row_filter in (ice.EqualTo("n", 99), ice.AlwaysTrue(), ice.AlwaysFalse()):
        might, every = partition_verdict(table, files, row_filter)
        assert might.all() and not every.any(), f"unpartitioned: {row_filter} is for the statistics stage"


def test_spec_of_a_dropped_column_proves_nothing_else(ice_catalog):
    table = ice_catalog.create_table(
        "db.dropped",
        schema=SCHEMA,
        partition_spec=PartitionSpec(PartitionField(SOURCE_ID["region"], 1000, IdentityTransform(), "region")),
    )
    table.append(_arrow("old", {"region": ["eu"], "n": [1]}))
    with table.update_spec() as update:
        update.remove_field("region")
    with table.update_schema() as update:
        update.delete_column("region")
    table = ice_catalog.load_table("db.dropped")
    files = _live(ice_catalog, "dropped")
    for row_filter in (ice.EqualTo("n", 1), ice.NotEqualTo("n", 1), ice.IsNull("n")):
        might, every = _assert_sound(table, files, row_filter)
        assert might.all() and not every.any(), f"spec on a dropped column says nothing about {row_filter}"


def test_unknown_column_raises(tables, ice_catalog):
    with pytest.raises(ValueError, match="nope"):
        partition_verdict(tables("month_ts"), _live(ice_catalog, "month_ts"), ice.EqualTo("nope", 1))


def test_case_insensitive_by_default(tables, ice_catalog):
    files = _live(ice_catalog, "identity_region")
    might, _ = partition_verdict(tables("identity_region"), files, ice.EqualTo("REGION", "eu"))
    assert sum(might) == 1, "REGION binds to region unless case_sensitive"


def test_source_refs_carry_spec_and_partition(tables, ice_catalog):
    tables("day_d")
    files = _live(ice_catalog, "day_d")
    by_label = {label: f for label, f in zip(_labels(files), files, strict=True)}
    assert by_label["feb29"].spec_id == 0
    assert list(by_label["feb29"].partition) == [(dt.date(2024, 2, 29) - dt.date(1970, 1, 1)).days]
    assert list(by_label["nulls"].partition) == [None]
    assert IcebergSource(ice_catalog, "db.day_d").partition_specs.keys() == {0}


def _as_stored(source: IcebergSource, files: list[DataFileRef]) -> list[tuple[str, int, str]]:
    """The files as a lookup takes them from the index: partition values written to file rows and read back."""
    rows = rows_of(unindexed_entries(files, source, 1))
    return sorted((f.path, f.spec_id, repr(f.partition)) for f in source.refs_of(rows))


@pytest.mark.parametrize("name", sorted(TABLES))
def test_partition_values_stored_in_the_index_read_back_as_the_plan_gives_them(tables, ice_catalog, name):
    tables(name)
    source = IcebergSource(ice_catalog, f"db.{name}")
    files = source.live_files()
    planned = sorted((f.path, f.spec_id, repr(f.partition)) for f in files)
    assert _as_stored(source, files) == planned, "the partition stage sees the same values from the index"


def test_partition_values_of_evolved_specs_read_back_from_the_index(evolved, ice_catalog):
    table, _ = evolved
    source = IcebergSource(ice_catalog, ".".join(table.name()))
    files = source.live_files()
    assert _as_stored(source, files) == sorted((f.path, f.spec_id, repr(f.partition)) for f in files)


def test_lifted_fields(evolved):
    table, _ = evolved
    assert lifted_fields(table, ice.And(MARCH, ice.EqualTo("id", 5))) == [
        "spec 0: ts_month = month(ts)",
        "spec 1: ts_month = month(ts)",
        "spec 1: id_bucket = bucket[4](id)",
        "spec 2: id_bucket = bucket[4](id)",
    ]
    assert lifted_fields(table, ice.GreaterThan("id", 5)) == [], "a range on a bucket source lifts to nothing"
    assert lifted_fields(table, ice.EqualTo("tag", "x")) == []


CALENDAR_CASES = [
    (table, where)
    for table in ("month_ts", "day_ts", "hour_ts", "identity_ts", "year_ts", "month_d", "day_d", "identity_d")
    for where in ("month({c}) = 3", "month({c}) != 2", "day({c}) < 15", "day({c}) = 29", "hour({c}) >= 23")
    if not (where.startswith("hour") and table.endswith("_d"))
]


@pytest.mark.parametrize(("name", "where"), CALENDAR_CASES, ids=[f"{t}:{w}" for t, w in CALENDAR_CASES])
def test_calendar_fields_decided_by_partition_values(tables, ice_catalog, name, where):
    """month/day/hour(c) op N is fixed for every row of a file partitioned by a fine enough transform of c."""
    from indexlib.pruning.partitions import prune_partitions
    from indexlib.query.binding import bound_predicate

    tables(name)
    column = "d" if name.endswith("_d") else "ts"
    where = where.format(c=column)
    predicate = bound_predicate(where, SCHEMA, f"db.{name}")
    source = IcebergSource(ice_catalog, f"db.{name}")
    files = source.live_files()
    pruning = prune_partitions(source, files, predicate)
    might, every = pruning.might, pruning.all_match
    field, op, value = where.replace("(", " ").replace(")", " ").split()[0], where.split()[1], int(where.split()[2])
    compare = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, ">=": pc.greater_equal}[op]
    for i, ref in enumerate(files):
        values = pq.read_table(urlparse(ref.path).path, columns=[column])[column]
        truth = pc.fill_null(compare(getattr(pc, field)(values), value), False)
        matched, total = pc.sum(truth).as_py() or 0, len(values)
        assert might[i] or matched == 0, f"{name}: file {ref.partition} holds {matched} rows matching {where}: keep"
        assert not every[i] or matched == total, f"{name}: file {ref.partition} does not match {where} on every row"
    fine_enough = {"month": ("month", "day", "hour", "identity"), "day": ("day", "hour", "identity")}
    transform = name.split("_")[0]
    if transform in fine_enough.get(field, ("hour", "identity")) and not (field == "hour" and name.endswith("_d")):
        assert not might.all() or every.all(), f"{name}: {where} is decided by the partition values: some file skipped"
    else:
        undecided = [bool(might[i]) for i, ref in enumerate(files) if ref.partition[0] is not None]
        assert all(undecided) and not every.any(), f"{name}: a {transform} partition cannot decide {where}"
    for i, ref in enumerate(files):
        if ref.partition[0] is None:
            assert not might[i], f"{name}: a NULL partition value means {column} is NULL in every row: skip"


# --- the lookup's partition evidence on SQL predicates, against brute force ------------------------------------------

# Literals at the edges of the batches' periods (the last microsecond of a day, month and year, the first of the
# next, before and after 1970) and of the identity values, where an interval one unit too short or too long shows.
EDGE_LEAVES = [
    f"{column} {op} {literal}"
    for column, literals in {
        "ts": [
            "TIMESTAMP '2024-02-29 23:59:59.999999'",
            "TIMESTAMP '2024-03-01 00:00:00'",
            "TIMESTAMP '1969-12-31 23:59:59.999999'",
            "TIMESTAMP '1970-01-01 00:00:00'",
            "TIMESTAMP '2024-03-31 23:59:59'",
            "TIMESTAMP '2024-04-01 00:00:00'",
            "TIMESTAMP '2023-06-15 10:00:00'",
        ],
        "d": ["DATE '2024-02-29'", "DATE '2024-03-01'", "DATE '1969-12-31'", "DATE '1970-01-01'", "DATE '2023-12-31'"],
        "n": ["-11", "-15", "9", "10", "19", "20"],
        "x": ["-1.5", "0.0", "1e300"],
    }.items()
    for literal in literals
    for op in ("=", "!=", "<", "<=", ">", ">=")
] + ["hour(ts) = 23", "day(ts) = 1", "month(d) = 2", "day(d) = 31", "year(ts) = 1969", "year(d) = 1970"]


@pytest.mark.parametrize("name", sorted(TABLES))
def test_partition_evidence_never_skips_a_matching_file_and_never_overclaims(tables, ice_catalog, name):
    """The partition stage of a lookup (`prune_partitions`: intervals for identity and time partitions, pyiceberg's
    projection for bucket and truncate) on SQL predicates: every file with a TRUE row kept, all-match only where every
    row is TRUE, by DuckDB over the files' rows (SQL three-valued logic)."""
    import duckdb
    import sqlglot
    from pruning_snapshot import partition_wheres

    from indexlib.pruning.partitions import prune_partitions
    from indexlib.query.binding import bound_predicate

    tables(name)
    source = IcebergSource(ice_catalog, f"db.{name}")
    files = source.live_files()
    wheres = [*partition_wheres(200), *EDGE_LEAVES]
    rows = pa.concat_tables(
        [
            pq.read_table(urlparse(f.path).path).append_column("file", pa.array([n] * f.record_count, pa.int32()))
            for n, f in enumerate(files)
        ]
    )
    con = duckdb.connect()
    con.register("t", rows)
    counts = ", ".join(f"count(*) FILTER (WHERE {sqlglot.transpile(w, write='duckdb')[0]})" for w in wheres)
    truth = {row[0]: row[1:] for row in con.execute(f"SELECT file, count(*), {counts} FROM t GROUP BY file").fetchall()}
    con.close()
    for k, where in enumerate(wheres):
        pruning = prune_partitions(source, files, bound_predicate(where, SCHEMA, f"db.{name}"))
        for n, label in enumerate(_labels(files)):
            total, *matched = truth[n]
            assert pruning.might[n] or matched[k] == 0, f"{name}: skipped {label} with {matched[k]} rows TRUE: {where}"
            assert not pruning.all_match[n] or matched[k] == total, f"{name}: {label} not all TRUE for {where}"


def test_identity_double_partitions_written_as_floats_keep_their_rows(ice_catalog):
    """pyiceberg 0.12 records identity partition values of a double column as floats (0.1 as 0.10000000149011612,
    1e300 as inf): the partition stage reads each as every double that rounds to it, so no file with a matching
    row is skipped (pyiceberg's own scan skips them)."""
    from indexlib.pruning.partitions import prune_partitions
    from indexlib.query.binding import bound_predicate

    schema = Schema(NestedField(1, "x", DoubleType()))
    spec = PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "x"))
    table = ice_catalog.create_table("db.float_identity", schema=schema, partition_spec=spec)
    values = [0.1, 1e300, -1e300, 0.5, 1.0000000000000002]
    for value in values:
        table.append(pa.table({"x": pa.array([value], pa.float64())}))
    source = IcebergSource(ice_catalog, "db.float_identity")
    files = source.live_files()
    held = [pq.read_table(urlparse(f.path).path).column("x")[0].as_py() for f in files]
    assert sorted(held) == sorted(values)
    for value in values:
        for op, holds in (("=", operator.eq), ("<=", operator.le), (">=", operator.ge), ("!=", operator.ne)):
            where = f"x {op} {value!r}"
            pruning = prune_partitions(source, files, bound_predicate(where, schema, "db.float_identity"))
            for n, row in enumerate(held):
                if holds(row, value):
                    assert pruning.might[n], f"the file holding {row!r} matches {where}: keep it"
                else:
                    assert not pruning.all_match[n], f"the file holding {row!r} does not match {where}"
    pruning = prune_partitions(source, files, bound_predicate("x = 0.25", schema, "db.float_identity"))
    assert not pruning.might.any(), "0.25 is none of the values, nor rounds to any of their floats: every file skipped"
