"""Files the index has no entry for are judged by the format's own statistics (the lookup's "format statistics"
stage): Iceberg manifest entries, Delta add actions' `stats`.

The rule: a lookup never keeps a file that the format's own planning drops while being right, and keeps every file
holding a matching row, including those that planning drops wrongly (NaN under SQL's ordering, -0.0, bounds cut or
rounded by the writer). Checked three ways:

- the decoding rules, table-driven, on the statistics as the formats record them (what each record promises, and
  what is read as unknown);
- files of real tables written by pyiceberg and delta-rs, each case's kept files against the rows (DuckDB);
- a property over pyiceberg's whole history table (tests/iceberg_tables.py: a renamed column, promoted types,
  partition evolution, deletes) with no index: for drawn predicates, the kept files include every file holding a
  match (pyiceberg's own read of each file's rows, deletes applied) and lie within pyiceberg's own planning, the
  files holding a match, and the files whose entry gives no NaN count for a floating column the predicate names
  (pyiceberg writes none, and a NaN row matches `>` under SQL's ordering).
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from conftest import sweep
from deltalake import write_deltalake
from hypothesis import HealthCheck, example, given, settings
from iceberg_tables import make_lake, predicate
from pyiceberg import expressions as ice
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestampType

from indexlib.handle import IndexHandle
from indexlib.lookup import FORMAT_STAGE, lookup
from indexlib.query.model import BoundColumn
from indexlib.sources.delta_stats import ActionRow, DeltaStatistics
from indexlib.statistics.manifest_stats import ManifestStatistics
from indexlib.store.table import IndexTable

# ---------------------------------------------------------------------------------------------------------------
# What each record promises: the decoding rules.


def _entry(**stats: dict[int, Any]) -> DataFile:
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path="s3://t/f.parquet",
        file_format=FileFormat.PARQUET,
        partition={},
        record_count=10,
        file_size_in_bytes=100,
        value_counts=stats.get("values", {1: 10}),
        null_value_counts=stats.get("nulls", {1: 0}),
        nan_value_counts=stats.get("nans", {}),
        lower_bounds=stats.get("lower", {}),
        upper_bounds=stats.get("upper", {}),
    )


def _i32(v: int) -> bytes:
    return v.to_bytes(4, "little", signed=True)


def _i64(v: int) -> bytes:
    return v.to_bytes(8, "little", signed=True)


NAN64 = b"\x00\x00\x00\x00\x00\x00\xf8\x7f"
ONE64 = b"\x00\x00\x00\x00\x00\x00\xf0\x3f"
ONE32 = b"\x00\x00\x80\x3f"

# (rule, column type now, entry statistics, expected (lower, upper, value count, null count, NaN count))
MANIFEST_RULES = [
    ("a long column's 8-byte bounds are read as written", LongType(),
     {"lower": {1: _i64(-5)}, "upper": {1: _i64(2**40)}}, (-5, 2**40, 10, 0, 0)),
    ("a 4-byte bound of a long column was written for an int before the promotion", LongType(),
     {"lower": {1: _i32(-5)}, "upper": {1: _i32(7)}}, (-5, 7, 10, 0, 0)),
    ("a 4-byte bound of a double column was written for a float before the promotion", DoubleType(),
     {"lower": {1: ONE32}, "upper": {1: ONE64}, "nans": {1: 0}}, (1.0, 1.0, 10, 0, 0)),
    ("a 4-byte bound of a timestamp column (days of a date before a promotion) is unknown, never read as micros",
     TimestampType(), {"lower": {1: _i32(19000)}, "upper": {1: _i64(5)}}, (None, 5, 10, 0, 0)),
    ("a NaN bound is unknown", DoubleType(), {"lower": {1: ONE64}, "upper": {1: NAN64}, "nans": {1: 0}},
     (1.0, None, 10, 0, 0)),
    ("a floating column without a NaN count may hold NaN: its NaN count is unknown", DoubleType(),
     {"lower": {1: ONE64}, "upper": {1: ONE64}}, (1.0, 1.0, 10, 0, -1)),
    ("a column without a null count is unknown in the file", LongType(),
     {"nulls": {}, "lower": {1: _i64(1)}, "upper": {1: _i64(2)}}, (None, None, -1, -1, -1)),
    ("a column without a value count (added after the file was written) is unknown", LongType(),
     {"values": {}, "nulls": {}}, (None, None, -1, -1, -1)),
    ("a string bound that is not UTF-8 is unknown", StringType(),
     {"lower": {1: b"\xff\xfe"}, "upper": {1: b"zz"}}, (None, "zz", 10, 0, 0)),
    ("a cut string bound is a true bound and read as it is", StringType(),
     {"lower": {1: b"abc"}, "upper": {1: b"abd"}}, ("abc", "abd", 10, 0, 0)),
]  # fmt: skip


@pytest.mark.parametrize(("rule", "kind", "stats", "expected"), MANIFEST_RULES, ids=[r[0] for r in MANIFEST_RULES])
def test_manifest_entries_are_read_for_what_they_promise(rule, kind, stats, expected):
    column = BoundColumn(1, "c", kind)
    found = ManifestStatistics([_entry(**stats), None]).column(column)
    got = (
        found.lower[0].as_py(),
        found.upper[0].as_py(),
        int(found.value_count[0]),
        int(found.null_count[0]),
        int(found.nan_count[0]),
    )
    assert got == expected, rule
    assert found.value_count[1] == -1 and not found.lower[1].is_valid, "a file without an entry is unknown"


def test_a_date_bound_under_a_promoted_timestamp_column_is_unknown_without_a_damage_warning(caplog):
    column = BoundColumn(1, "c", TimestampType())
    found = ManifestStatistics([_entry(lower={1: _i32(19000)}, upper={1: _i32(19001)})]).column(column)
    assert found.lower[0].as_py() is None and found.upper[0].as_py() is None, "days are never read as microseconds"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "an expected width is not damage"
    broken = ManifestStatistics([_entry(lower={1: b"\x01\x02\x03"}, upper={1: _i64(5)})]).column(column)
    assert broken.lower[0].as_py() is None and broken.upper[0].as_py() == 5, "a 3-byte bound is unknown"
    assert [r for r in caplog.records if r.levelno >= logging.WARNING], "a width no writer writes is reported"


_MS = dt.datetime(2024, 1, 1, 0, 0, 0, 123000, tzinfo=dt.UTC)
# (rule, column type, the flattened add actions' bounds as delta-rs reads them, expected (lower, upper))
DELTA_RULES = [
    ("a maximum of 32 characters or more may have been cut and tie-broken: unknown; the minimum is a prefix",
     StringType(), pa.string(), ("x" * 32, "x" * 32 + "\x7f"), ("x" * 32, None)),
    ("shorter strings are read as written", StringType(), pa.string(), ("a", "b" * 31), ("a", "b" * 31)),
    ("millisecond timestamps are widened by 999 microseconds on each side", TimestampType(),
     pa.timestamp("us", tz="UTC"), (_MS, _MS),
     (1704067200123000 - 999, 1704067200123000 + 999)),
    ("a NaN bound (delta-spark's maximum of a file holding NaN) is unknown", DoubleType(), pa.float64(),
     (1.0, float("nan")), (1.0, None)),
    ("integers are read as written", LongType(), pa.int64(), (-3, 9), (-3, 9)),
]  # fmt: skip


@pytest.mark.parametrize(("rule", "kind", "arrow", "logged", "expected"), DELTA_RULES, ids=[r[0] for r in DELTA_RULES])
def test_delta_stats_are_read_for_what_they_promise(rule, kind, arrow, logged, expected):
    actions = pa.table(
        {
            "num_records": pa.array([10], pa.int64()),
            "null_count.c": pa.array([1], pa.int64()),
            "min.c": pa.array([logged[0]], arrow),
            "max.c": pa.array([logged[1]], arrow),
        }
    )
    found = DeltaStatistics([ActionRow(actions, 0)], {1: "c"}, ["f"]).column(BoundColumn(1, "c", kind))
    assert (found.lower[0].as_py(), found.upper[0].as_py()) == expected, rule
    floating = isinstance(kind, DoubleType)
    assert (found.value_count[0], found.null_count[0], found.nan_count[0]) == (10, 1, -1 if floating else 0), (
        "counts: numRecords and nullCount; the log keeps no NaN count"
    )


def test_delta_decimals_are_unknown_the_log_writes_them_as_json_numbers():
    actions = pa.table(
        {
            "num_records": pa.array([1], pa.int64()),
            "null_count.d": pa.array([0], pa.int64()),
            "min.d": pa.array([decimal.Decimal("1.00")], pa.decimal128(20, 2)),
            "max.d": pa.array([decimal.Decimal("1.00")], pa.decimal128(20, 2)),
        }
    )
    from pyiceberg.types import DecimalType

    found = DeltaStatistics([ActionRow(actions, 0)], {1: "d"}, ["f"]).column(BoundColumn(1, "d", DecimalType(20, 2)))
    assert found.lower.null_count == 1 and found.upper.null_count == 1, "decimal bounds from the log are unknown"


# ---------------------------------------------------------------------------------------------------------------
# Real tables: kept files against the rows.

NUMBERS = Schema(NestedField(1, "x", DoubleType()), NestedField(2, "s", StringType()))
# file name -> its rows of x (NULL, NaN and -0.0 among them)
NUMBER_FILES = {
    "a": [1.0, 2.0],
    "b": [float("nan"), 1.0],  # pyiceberg's bounds say [1, 1]; its planning drops it for x > 1.5
    "c": [-0.0, -0.0],
    "d": [None, None],
}
# (predicate, files that must be kept, files that must be dropped: the format's statistics rule them out)
NUMBER_CASES = [
    # b holds NaN, above every number under SQL's ordering; c may (pyiceberg writes no NaN count), d cannot (all NULL)
    ("x > 1.5", {"a", "b", "c"}, {"d"}),
    ("x = 0", {"c"}, {"a", "b", "d"}),  # -0.0 = 0 under IEEE, whatever order a writer put the zeros in
    ("x IS NULL", {"d"}, {"a", "b", "c"}),
    ("x < 1.5", {"a", "b", "c"}, {"d"}),
    ("x IS NOT NULL AND x <= -1", set(), {"a", "b", "c", "d"}),
]


def _sql_matches(rows: pa.Table, where: str) -> bool:
    return bool(duckdb.sql(f"SELECT count(*) FROM rows WHERE {where}").fetchall()[0][0])  # noqa: S608


@pytest.fixture
def numbers(config, catalog) -> dict[str, str]:
    """db.numbers, one pyiceberg append per file of NUMBER_FILES, never indexed; returns path -> file name."""
    table = catalog.create_table("db.numbers", NUMBERS)
    names = {}
    for name, values in NUMBER_FILES.items():
        before = {t.file.file_path for t in table.scan().plan_files()}
        table.append(pa.table({"x": pa.array(values, pa.float64()), "s": pa.array([name] * len(values))}))
        (added,) = {t.file.file_path for t in catalog.load_table("db.numbers").scan().plan_files()} - before
        names[added] = name
        table = catalog.load_table("db.numbers")
    return names


@pytest.mark.parametrize(("where", "kept", "dropped"), NUMBER_CASES, ids=[c[0] for c in NUMBER_CASES])
def test_unindexed_iceberg_files_are_judged_by_their_manifest_entries(config, numbers, where, kept, dropped):
    result = lookup(config, "db.numbers", where)
    got = {numbers[path] for path in result.files}
    for name, values in NUMBER_FILES.items():
        if _sql_matches(pa.table({"x": pa.array(values, pa.float64())}), where):
            assert name in got, f"{where}: file {name} holds a matching row and was dropped"
    assert kept <= got, f"{where}: {sorted(kept - got)} must be kept (a match, or NaN its entry cannot rule out)"
    assert not dropped & got, f"{where}: {sorted(dropped & got)} are ruled out by their manifest entries"
    assert [s.name for s in result.stages][:2] == ["partition", FORMAT_STAGE], "a stage of its own, after partition"
    assert result.files_unindexed == len(result.files), "every kept file is unindexed"


def test_explain_names_the_format_statistics_stage(config, numbers):
    text = lookup(config, "db.numbers", "x = 0").explain()
    assert "the format's lower/upper bounds" in text and f"\n{FORMAT_STAGE}" in text, text


_MICROS = dt.datetime(2024, 1, 1, 0, 0, 0, 123456)
DELTA_FILES = [  # one delta-rs write each, two rows
    {"i": [1, 2], "ts": [_MICROS] * 2, "s": ["a" * 40] * 2, "f": [float("nan")] * 2},
    {"i": [10, 11], "ts": [dt.datetime(2024, 6, 1)] * 2, "s": ["b"] * 2, "f": [2.0] * 2},
]
# (predicate, files that must be kept, files that must be dropped), files by their position in DELTA_FILES
DELTA_CASES = [
    ("i = 10", {1}, {0}),
    ("i < 5", {0}, {1}),
    ("ts = TIMESTAMP '2024-01-01 00:00:00.123456'", {0}, {1}),  # the log says ...00.123: widened, kept
    ("s = '" + "a" * 40 + "'", {0}, {1}),
    ("f > 1", {0, 1}, set()),  # file 0 holds only NaN, above every number; the log has no NaN count
    ("f < 1", set(), {1}),
]


@pytest.fixture
def delta_events(tmp_path) -> tuple[str, list[str]]:
    """A Delta table written by delta-rs, one file per DELTA_FILES entry, never indexed; (path, file names in order)."""
    from deltalake import DeltaTable

    path = str(tmp_path / "events")
    names: list[str] = []
    for batch in DELTA_FILES:
        schema = pa.schema([("i", pa.int64()), ("ts", pa.timestamp("us")), ("s", pa.string()), ("f", pa.float64())])
        write_deltalake(path, pa.table(batch, schema=schema), mode="append")
        (added,) = {Path(uri).name for uri in DeltaTable(path).file_uris()} - set(names)
        names.append(added)
    return path, names


@pytest.mark.parametrize(("where", "kept", "dropped"), DELTA_CASES, ids=[c[0] for c in DELTA_CASES])
def test_unindexed_delta_files_are_judged_by_their_add_actions(catalog, delta_events, where, kept, dropped):
    path, names = delta_events
    result = IndexHandle.for_delta(path, index_catalog=catalog).lookup(where)
    got = {names.index(Path(p).name) for p in result.files}
    for position, batch in enumerate(DELTA_FILES):
        if _sql_matches(pa.table(batch), where):
            assert position in got, f"{where}: file {position} holds a matching row and was dropped"
    assert kept <= got, f"{where}: {sorted(kept - got)} must be kept"
    assert not dropped & got, f"{where}: {sorted(dropped & got)} are ruled out by their add actions' stats"


# ---------------------------------------------------------------------------------------------------------------
# The property: never more than pyiceberg's own planning, bar its NaN guesses, and never a match dropped.


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Any, Any]:
    """tests/iceberg_tables.py's history table (renamed and promoted columns, partition evolution, deletes) with its
    index dropped: every file is judged by its manifest entry alone."""
    from indexlib.config import load_config

    root = tmp_path_factory.mktemp("history")
    conf = root / "conf.toml"
    conf.write_text('[catalog]\nname = "t"\ntype = "sql"\nuri = "sqlite:///catalog.db"\nwarehouse = "warehouse"\n')
    config = load_config(conf)
    catalog = config.load_catalog()
    catalog.create_namespace("db")
    table = make_lake(config, catalog)
    catalog.drop_table(IndexTable(catalog, config.index_namespace, "db.t").identifier)
    return config, table


def _files_holding_a_match(table: Any, row_filter: ice.BooleanExpression) -> set[str]:
    scan = ArrowScan(table.metadata, table.io, table.schema(), row_filter)
    return {task.file.file_path for task in table.scan().plan_files() if scan.to_table([task]).num_rows}


def _nan_unknown(table: Any, text: str) -> set[str]:
    """Files whose entry gives no NaN count for a floating column `text` names (only `f` is floating here)."""
    field_id = table.schema().find_field("f").field_id
    if "f " not in f"{text} ":
        return set()
    return {t.file.file_path for t in table.scan().plan_files() if field_id not in (t.file.nan_value_counts or {})}


@settings(
    max_examples=sweep("SKIPINDEX_FORMAT_STATS_EXAMPLES", 25, 300),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(drawn=predicate())
@example(drawn=("k = 3", ice.EqualTo("k", 3)))
@example(drawn=("(id > 230) AND (g = 1)", ice.And(ice.GreaterThan("id", 230), ice.EqualTo("g", 1))))
@example(drawn=("k IS NULL", ice.IsNull("k")))
@example(drawn=("name = 'zz'", ice.EqualTo("name", "zz")))
def test_kept_files_lie_within_pyicebergs_planning_and_hold_every_match(history, drawn):
    config, table = history
    text, row_filter = drawn
    result = lookup(config, "db.t", text)
    kept = set(result.files)
    matching = _files_holding_a_match(table, row_filter)
    planned = {task.file.file_path for task in table.scan(row_filter=row_filter).plan_files()}
    assert matching <= kept, f"{text}: files holding a match were dropped: {sorted(matching - kept)}"
    beyond = kept - planned - matching - _nan_unknown(table, text)
    assert not beyond, f"{text}: kept files pyiceberg's planning rightly drops: {sorted(beyond)}"
    assert result.files_unindexed == len(kept), "no index: every kept file is unindexed"
