"""Rules every scan keeps on values, names and paths real data has (issue 38), each on the smallest real table that
breaks it: the pyiceberg scan, the DuckDB relation, the Polars LazyFrame and the Spark DataFrame return exactly the
rows SQL returns over the table's live rows. tests/test_scan_rows.py draws them at random; these are the named cases.

- NaN is greater than every number and equal to itself in SQL: `x > 4`, `NOT (x <= 4)` and `isnan(x)` hold for NaN
  rows, which engines' Parquet readers lose to row-group statistics that leave NaN out, and pyiceberg's IEEE
  comparisons lose too.
- -0.0 equals 0.0 in SQL, which Spark's Parquet reader's dictionary filtering holds apart.
- A negative leaf (`!=`, NOT (=), NOT IN) is unknown, not TRUE, on NULL: also in files written before the column
  was added (pyiceberg reads the column as NULL there and its `NotEqualTo` keeps the row).
- A `timestamptz` column reads through Spark on every path.
- LIKE keeps the meaning of the dialect it was written in (Spark: backslash escapes; ANSI / DuckDB: it does not).
- A Delta table at a path with a space is built, looked up and read: its files by their real paths.
- Columns named like an engine's own columns (`filename`, `file_row_number`, `_metadata`) are ordinary columns.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from types import SimpleNamespace
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_vectors import commit_deletion_vectors, live_adds
from deltalake import WriterProperties, write_deltalake
from iceberg_tables import commit_delete_files, position_delete_file
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestamptzType

from indexlib.config import load_config
from indexlib.errors import UserError
from indexlib.handle import IndexHandle, open_handle
from indexlib.indexing.build import build_index
from indexlib.scans import pyiceberg as pyiceberg_scan
from indexlib.scans.spark import CONNECTOR, FILES, reader_of
from indexlib.scans.spark_connectors import has_runtime
from indexlib.scans.where import where_sql
from indexlib.sources.delta import is_delta_name

NAN = math.nan
# in row groups of 4: [1, NaN, 2, NULL] [3, NaN, 5, 6] [-0.0, NaN, 0.0, -0.0]; the last one's statistics (min -0.0,
# max 0.0) read as `x = 0` to pyarrow, which folds the filter with it
X = [1.0, NAN, 2.0, None, 3.0, NAN, 5.0, 6.0, -0.0, NAN, 0.0, -0.0]


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def sql_ids(table: pa.Table, where: str) -> list[int]:
    """SQL over the rows in memory (DuckDB over Arrow: no Parquet statistics in play)."""
    return ids(duckdb.connect().from_arrow(table).query("t", f"SELECT * FROM t WHERE {where}").to_arrow_table())


def through_every_scan(spark: Any, handle: IndexHandle, where: str) -> dict[str, list[int]]:
    """The ids each scan returns (the pyiceberg scan: Iceberg only; a refusal is its one-line message)."""
    got = {
        "duckdb": ids(handle.scan(where).to_duckdb().to_arrow_table()),
        "polars": ids(handle.scan(where).to_polars().collect().to_arrow()),
        "spark": ids(handle.scan(where).to_spark(spark, FILES).toArrow()),
    }
    if has_runtime(spark, "delta" if is_delta_name(handle.name) else "iceberg"):
        try:
            got["spark connector"] = ids(handle.scan(where).to_spark(spark, CONNECTOR).toArrow())
        except UserError as exc:
            assert "\n" not in str(exc) and "_metadata" in str(exc), f"a refusal is one line: {exc}"
    if not is_delta_name(handle.name):
        try:
            got["pyiceberg"] = ids(handle.scan(where).to_arrow())
        except UserError as exc:
            assert "\n" not in str(exc), "a refusal is one line"
    return got


# NaN -------------------------------------------------------------------------------------------------------------

NAN_RULES = [
    ("x > 4", "NaN is above every number"),
    ("NOT (x <= 4)", "NaN is not at or below 4"),
    ("x >= 6", "NaN is above the largest value of its row group"),
    ("isnan(x)", "a row group's statistics say nothing of NaN"),
    ("x > 1 AND id >= 0", "NaN under AND"),
    ("x < 2", "NaN is not below a number (IEEE and SQL agree)"),
    ("x != 5", "NaN is not equal to 5"),
    ("x <> -0.0", "NaN is not 0, in a row group whose other values are all zeros"),
    ("NOT (x = 0) AND id >= 0", "NaN is not 0, under NOT and AND"),
    ("x IN (0, 5)", "-0.0 is 0 (pyarrow's is_in tells them apart)"),
    ("x NOT IN (0, 5)", "-0.0 is 0, under NOT IN too"),
]


def write_nan_table(fmt: str, catalog: Any, directory: Any) -> tuple[str, pa.Table]:
    """`X` in row groups of 4 rows, as Iceberg `db.t` or a Delta table under `directory`: its name and rows."""
    data = pa.table({"id": pa.array(range(len(X)), pa.int64()), "x": pa.array(X, pa.float64())})
    if fmt == "iceberg":
        schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "x", DoubleType()))
        table = catalog.create_table("db.t", schema, properties={"write.parquet.row-group-limit": "4"})
        table.append(data)
        return "db.t", data
    name = str(directory / "nan")
    write_deltalake(name, data, writer_properties=WriterProperties(max_row_group_size=4))
    return name, data


@pytest.fixture(params=["iceberg", "delta"])
def nan_table(request, config, catalog, tmp_path) -> tuple[str, pa.Table]:
    return write_nan_table(request.param, catalog, tmp_path)


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "not indexed"])
def test_nan_rows_are_returned_by_every_scan(spark, config, nan_table, indexed) -> None:
    name, data = nan_table
    if indexed:
        build_index(config, name)
    handle = open_handle(config, name)
    for where, rule in NAN_RULES:
        truth = sql_ids(data, where)
        answers = through_every_scan(spark, handle, where)
        assert is_delta_name(name) or "pyiceberg" in answers, f"{where} on a DOUBLE has an exact pyiceberg row filter"
        for scan, got in answers.items():
            assert got == truth, f"{scan}: {rule}: {where} holds for rows {truth} ({'' if indexed else 'not '}indexed)"


def test_files_counted_without_nan_are_still_filtered_by_the_engines_reader(config, catalog) -> None:
    """The rule's price is paid only where NaN may be: a file the index counted no NaN in keeps pushdown."""
    from indexlib.scans.pushdown import nan_prone

    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "x", DoubleType()))
    table = catalog.create_table("db.t", schema)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "x": pa.array([1.0, NAN])}))
    table.append(pa.table({"id": pa.array([3, 4], pa.int64()), "x": pa.array([1.0, 9.0])}))
    result = open_handle(config, "db.t").lookup("x > 0")
    assert nan_prone(result, None) == set(result.files), "not indexed: every kept file may hold NaN"
    build_index(config, "db.t")
    handle = open_handle(config, "db.t")
    result = handle.lookup("x > 0")
    with_nan = {path for path in result.files if any(map(math.isnan, pq.read_table(path).column("x").to_pylist()))}
    assert len(result.files) == 2 and len(with_nan) == 1, "both files kept, one holds a NaN"
    assert nan_prone(result, None) == with_nan, "only the file the index counted a NaN in is read unfiltered"
    assert nan_prone(handle.lookup("X > 0 OR id > 0"), None) == with_nan, "any leaf naming x, in any case"
    assert not nan_prone(handle.lookup("id > 0"), None), "a WHERE naming no floating-point column"


# Zero's two signs ------------------------------------------------------------------------------------------------

# in row groups of 4, without NaN (so no file is read unfiltered for NaN): dictionaries holding -0.0 and not 0.0,
# 0.0 and not -0.0, and no zero; parquet-mr (Spark's Parquet reader) decides a pushed `x = 0` against a dictionary by
# Java's Double.equals, which holds -0.0 and 0.0 apart
ZERO_X = [-0.0, -0.0, 1.0, 2.0, 0.0, 0.0, -1.0, 3.0, 5.0, 6.0, 7.0, None]

ZERO_RULES = [
    ("x = 0", "-0.0 is 0, in a row group whose dictionary holds -0.0 alone"),
    ("x >= 0", "-0.0 is at or above 0"),
    ("x <= 0 AND id >= 0", "0.0 is at or below 0, under AND"),
    ("x IN (0, 7)", "-0.0 is 0 in an IN list"),
    ("x = CAST('-0' AS DOUBLE)", "0.0 is -0.0, in a row group whose dictionary holds 0.0 alone"),
    ("NOT (x != 0)", "-0.0 is 0 under NOT"),
]


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "not indexed"])
def test_both_zeros_are_returned_by_every_scan(spark, config, catalog, tmp_path, fmt, indexed) -> None:
    data = pa.table({"id": pa.array(range(len(ZERO_X)), pa.int64()), "x": pa.array(ZERO_X, pa.float64())})
    if fmt == "iceberg":
        schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "x", DoubleType()))
        catalog.create_table("db.z", schema, properties={"write.parquet.row-group-limit": "4"}).append(data)
        name = "db.z"
    else:
        name = str(tmp_path / "zeros")
        write_deltalake(name, data, writer_properties=WriterProperties(max_row_group_size=4))
    if indexed:
        build_index(config, name)
    handle = open_handle(config, name)
    for where, rule in ZERO_RULES:
        truth = sql_ids(data, where)
        assert truth, f"{where}: the rule's rows exist"
        for scan, got in through_every_scan(spark, handle, where).items():
            assert got == truth, f"{scan}: {rule}: {where} holds for rows {truth} ({'' if indexed else 'not '}indexed)"


def test_only_files_that_may_hold_a_zero_lose_dictionary_filtering(config, catalog) -> None:
    """The rule's price is paid only where a zero may be: a file whose bounds exclude 0 keeps it."""
    from indexlib.scans.pushdown import zero_prone

    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "x", DoubleType()))
    table = catalog.create_table("db.t", schema)
    for xs in ([1.0, 2.0], [-1.0, 3.0], [-0.0, -0.0], [-5.0, -2.0], [None, NAN]):
        table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "x": pa.array(xs, pa.float64())}))
    result = open_handle(config, "db.t").lookup("x IS NULL OR x != 9")
    assert zero_prone(result, None) == set(result.files), "not indexed: every kept file may hold a zero"
    build_index(config, "db.t")
    handle = open_handle(config, "db.t")
    result = handle.lookup("x IS NULL OR x != 9")
    xs = {path: pq.read_table(path).column("x").to_pylist() for path in result.files}
    spans = {path for path, values in xs.items() if values in ([-1.0, 3.0], [-0.0, -0.0])}
    assert len(result.files) == 5 and len(spans) == 2, "every file kept, two may hold a zero"
    assert zero_prone(result, None) == spans, "bounds around 0 (either sign) are prone; above, below, or no numbers not"
    assert not zero_prone(handle.lookup("id > 0"), None), "a WHERE naming no floating-point column"


# NULL in a column added later --------------------------------------------------------------------------------------


def test_negative_leaves_drop_null_rows_of_files_written_before_the_column(spark, config, catalog) -> None:
    schema = Schema(NestedField(1, "id", LongType()))
    table = catalog.create_table("db.t", schema)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))  # no column c in this file
    with table.update_schema() as update:
        update.add_column("c", StringType())
    table.append(pa.table({"id": pa.array([3, 4, 5], pa.int64()), "c": pa.array(["x", "y", None])}))
    build_index(config, "db.t")
    handle = open_handle(config, "db.t")
    rows = catalog.load_table("db.t").scan().to_arrow()
    for where in ["c != 'x'", "NOT (c = 'x')", "c NOT IN ('x')", "c <> 'x' OR id = 1", "NOT (c IN ('x', 'z'))"]:
        truth = sql_ids(rows, where)
        for scan, got in through_every_scan(spark, handle, where).items():
            assert got == truth, f"{scan}: {where} is unknown on NULL, also where the file predates c: rows {truth}"


def test_the_pyiceberg_row_filter_guards_negative_leaves_and_orders_nan_high() -> None:
    from pyiceberg import expressions as ice

    rules = [
        (ice.NotEqualTo("c", "x"), ice.And(ice.NotNull("c"), ice.NotEqualTo("c", "x")), "!= is unknown on NULL"),
        (ice.NotIn("c", ["x"]), ice.And(ice.NotNull("c"), ice.NotIn("c", ["x"])), "NOT IN is unknown on NULL"),
        (ice.GreaterThan("x", 4.0), ice.Or(ice.GreaterThan("x", 4.0), ice.IsNaN("x")), "NaN is above 4"),
        (ice.GreaterThanOrEqual("x", 4.0), ice.Or(ice.GreaterThanOrEqual("x", 4.0), ice.IsNaN("x")), "NaN >= 4"),
        (ice.LessThan("x", 4.0), ice.LessThan("x", 4.0), "NaN is not below 4: as pyiceberg reads it"),
        (ice.GreaterThan("id", 4), ice.GreaterThan("id", 4), "an integer column has no NaN"),
        (ice.In("x", [0.0, 4.0]), ice.Or(ice.In("x", [0.0, 4.0]), ice.EqualTo("x", 0.0)), "-0.0 IN (0, 4)"),
        (
            ice.NotIn("x", [-0.0, 4.0]),
            ice.And(ice.NotNull("x"), ice.And(ice.NotIn("x", [-0.0, 4.0]), ice.NotEqualTo("x", 0.0))),
            "-0.0 NOT IN (0, 4) is FALSE",
        ),
    ]
    for given, expected, rule in rules:
        assert pyiceberg_scan.sql_semantics(given, {"x"}) == expected, rule


# timestamptz through Spark -----------------------------------------------------------------------------------------


def test_spark_reads_timestamptz_through_pyiceberg_and_pyarrow(spark, config, conf_path, catalog, tmp_path) -> None:
    """The pyiceberg path (a file with a position delete file) and the Delta row-group path (a file kept in part)."""
    instants = [dt.datetime(2024, 1, 1, h, tzinfo=dt.UTC) for h in range(6)]
    data = pa.table({"id": pa.array(range(6), pa.int64()), "ts": pa.array(instants, pa.timestamp("us", tz="UTC"))})
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestamptzType()))
    table = catalog.create_table("db.t", schema, properties={"format-version": "2"})
    table.append(data)
    data_file = next(iter(table.scan().plan_files())).file
    commit_delete_files(table, [position_delete_file(table, data_file, [0], file_scoped=True)])
    build_index(config, "db.t")
    got = open_handle(config, "db.t").scan("id >= 0").to_spark(spark, FILES).toArrow()
    assert ids(got) == [1, 2, 3, 4, 5], "Iceberg timestamptz through pyiceberg in Spark tasks, deleted row gone"
    assert got.column("ts").to_pylist()[0].astimezone(dt.UTC) in instants, "the instant as written"

    delta = str(tmp_path / "ts")
    write_deltalake(delta, data, writer_properties=WriterProperties(max_row_group_size=2))
    with_row_groups = tmp_path / "row_groups.toml"
    with_row_groups.write_text(conf_path.read_text() + "[index]\nrow_groups = true\n")
    from indexlib.config import load_config

    conf = load_config(with_row_groups)
    build_index(conf, delta)
    handle = open_handle(conf, delta)
    assert handle.lookup("id = 3").kept_files[0].row_groups == (1,), "one row group of three kept"
    assert ids(handle.scan("id = 3").to_spark(spark, FILES).toArrow()) == [3], "Delta timestamp read in part by pyarrow"


# LIKE escapes --------------------------------------------------------------------------------------------------

WORDS = ["u_x", "uvx", "u\\x", "a\\b", "50%", "5%0", "a_b", "\\"]
# (dialect, WHERE, the words it matches in that dialect, the rule)
LIKE_RULES = [
    ("spark", r"s LIKE 'u\\_%'", ["u_x"], "Spark: a backslash escapes _"),
    ("spark", r"s LIKE '%\\%%'", ["50%", "5%0"], "Spark: a backslash escapes %"),
    ("spark", r"s LIKE '%\\\\%'", ["u\\x", "a\\b", "\\"], "Spark: two backslashes are one literal backslash"),
    (None, r"s LIKE 'u\_%'", ["u\\x"], "ANSI: a backslash is a character, _ is any character"),
    (None, r"s LIKE '%\'", ["\\"], "ANSI: a trailing backslash is a character"),
    (None, r"s LIKE 'a\%'", ["a\\b"], "ANSI: backslash then any characters"),
    ("duckdb", r"s LIKE 'u\_%'", ["u\\x"], "DuckDB: a backslash is a character"),
    (None, r"s LIKE 'u!_%' ESCAPE '!'", ["u_x"], "an explicit ESCAPE"),
    ("spark", r"s NOT LIKE '%\\_%'", ["uvx", "u\\x", "a\\b", "50%", "5%0", "\\"], "NOT LIKE keeps its escapes"),
    (None, r"s NOT LIKE '5!%%' ESCAPE '!'", [w for w in WORDS if not w.startswith("5%")], "NOT LIKE with ESCAPE"),
    ("spark", "s LIKE '%b'", ["a\\b", "a_b"], "Spark: a pattern with nothing escaped"),
    (None, "s LIKE 'u_x'", ["u_x", "uvx", "u\\x"], "ANSI: a pattern with nothing escaped, _ any character"),
    ("duckdb", "s NOT LIKE '%\\%'", ["u_x", "uvx", "50%", "5%0", "a_b"], "DuckDB: NOT LIKE of a backslash"),
]


@pytest.fixture
def words(config, catalog) -> str:
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "s", StringType()))
    table = catalog.create_table("db.t", schema)
    table.append(pa.table({"id": pa.array(range(len(WORDS)), pa.int64()), "s": pa.array(WORDS)}))
    build_index(config, "db.t")
    return "db.t"


def test_like_keeps_the_meaning_of_its_dialect_through_every_scan(spark, conf_path, words) -> None:
    from indexlib.config import load_config

    for dialect, where, matched, rule in LIKE_RULES:
        conf = conf_path.parent / f"{dialect}.toml"  # beside conf.toml: the same catalog
        conf.write_text(conf_path.read_text() + (f'[lookup]\ndialect = "{dialect}"\n' if dialect else ""))
        handle = open_handle(load_config(conf), words)
        truth = sorted(WORDS.index(w) for w in matched)
        for scan, got in through_every_scan(spark, handle, where).items():
            assert got == truth, f"{scan}: {rule}: {where} ({dialect or 'ANSI'}) matches {matched}"


def test_a_like_that_spark_rejects_is_refused_in_one_line() -> None:
    for dialect, where in [("spark", r"s LIKE '%\\w'"), ("spark", r"s LIKE 'a\\'"), ("tsql", "s LIKE '[a]%'")]:
        result = SimpleNamespace(bound=object(), where=where, table="db.t")
        with pytest.raises(UserError) as caught:
            where_sql(result, dialect, None, "duckdb")
        assert "\n" not in str(caught.value) and "db.t" in str(caught.value), f"{dialect}: {where} refused, one line"


def test_a_like_with_nothing_to_escape_reaches_the_engine_without_escape() -> None:
    """Without ESCAPE DuckDB reads `LIKE '%x%'` as contains() (`like_escape` is 1.25x slower); the rows are the
    same, since the pattern holds no backslash (the LIKE rules above check the rows)."""
    for dialect, engine, where, written in [
        ("duckdb", "duckdb", "s LIKE '%Tiresias%'", "s LIKE '%Tiresias%'"),
        (None, "spark", "s NOT LIKE 'a_%'", "s NOT LIKE 'a_%'"),
        ("spark", "duckdb", r"s LIKE 'u\\_%'", r"s LIKE 'u\_%' ESCAPE '\'"),
        (None, "duckdb", r"s LIKE 'a\%'", r"s LIKE 'a\\%' ESCAPE '\'"),
    ]:
        result = SimpleNamespace(bound=object(), where=where, table="t")
        got = where_sql(result, dialect, None, engine)
        assert got == written, f"{where} ({dialect or 'ANSI'}) in {engine}: ESCAPE only where a backslash is left"


def test_isnan_of_null_keeps_its_dialect_meaning() -> None:
    for dialect, engine, written in [
        ("spark", "duckdb", "NOT COALESCE(ISNAN(x), FALSE)"),
        ("duckdb", "spark", "NOT CASE WHEN x IS NULL THEN NULL ELSE ISNAN(x) END"),
        ("spark", "spark", "NOT ISNAN(x)"),
    ]:
        result = SimpleNamespace(bound=object(), where="NOT isnan(x)", table="t")
        assert where_sql(result, dialect, None, engine) == written, f"isnan(NULL) as {dialect} reads it, in {engine}"


# Delta at a path with a space, columns named like engines' own -------------------------------------------------------


@pytest.fixture
def odd_delta(tmp_path) -> str:
    """A Delta table at a path with a space, '+', '#' and non-ASCII, partitioned, with columns named `filename`,
    `file_row_number` and `_metadata`, row groups of 2 rows, and a deletion vector."""
    path = str(tmp_path / "my table +#é")
    data = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "filename": ["a", "b", "c", "d", "e", None],
            "file_row_number": pa.array([100, 101, 102, 103, 104, 105], pa.int64()),
            "_metadata": pa.array([1, 2, 3, 4, 5, 6], pa.int32()),
            "p": ["x y", "x y", "x y", "z", "z", "z"],
        }
    )
    write_deltalake(
        path,
        data,
        partition_by=["p"],
        writer_properties=WriterProperties(max_row_group_size=2),
        configuration={"delta.enableDeletionVectors": "true"},
    )
    first = next(p for p, add in sorted(live_adds(path).items()) if add["partitionValues"]["p"] == "x y")
    commit_deletion_vectors(path, {first: {1}})  # id 1
    return path


def test_a_delta_table_at_a_path_with_a_space_is_indexed_and_read(spark, config, odd_delta) -> None:
    build_index(config, odd_delta)
    handle = open_handle(config, odd_delta)
    result = handle.lookup("id >= 0")
    assert result.files and all(os.path.exists(path) for path in result.files), "live files by their real paths"
    assert result.files_unindexed == 0, "every live file was indexed (the build opened them)"
    for where, truth in [("id >= 0", [0, 2, 3, 4, 5]), ("id = 4", [4])]:
        for scan, got in through_every_scan(spark, handle, where).items():
            assert got == truth, f"{scan}: {where} at a path with a space"


VIRTUAL_RULES = [
    ("filename = 'c'", [2], "DuckDB's filename is not the column"),
    ("file_row_number = 104", [4], "DuckDB's file_row_number is not the column"),
    ('"_metadata" >= 3', [2, 3, 4, 5], "Spark's _metadata is not the column"),
    ("filename IS NULL", [5], "a NULL in the column named filename"),
]


def test_columns_named_like_engine_columns_are_ordinary_columns(spark, config, odd_delta) -> None:
    build_index(config, odd_delta)
    handle = open_handle(config, odd_delta)
    for where, truth, rule in VIRTUAL_RULES:
        for scan, got in through_every_scan(spark, handle, where).items():
            assert got == truth, f"{scan}: {rule}: {where}"


def test_duckdb_reads_a_delta_file_whose_columns_hide_its_row_numbers_by_pyarrow(config, odd_delta) -> None:
    """With a column named file_row_number, DuckDB cannot number a file's rows: files with deletion vectors are read
    by pyarrow, the deleted row still gone."""
    build_index(config, odd_delta)
    handle = open_handle(config, odd_delta)
    got = handle.scan("p = 'x y'").to_duckdb().to_arrow_table()
    assert ids(got) == [0, 2], "the row the deletion vector deletes stays deleted"
    assert sorted(got.column("file_row_number").to_pylist()) == [100, 102], "the column's values, not row numbers"


def test_a_file_path_in_the_log_is_decoded_once(odd_delta) -> None:
    from indexlib.sources.delta import DeltaSource

    source = DeltaSource(odd_delta)
    for ref in source.live_files():
        assert ref.path.startswith(odd_delta + "/"), f"{ref.path}: the table's folder as it is named on disk"
        assert os.path.exists(ref.path), f"{ref.path}: a file on disk (its partition folder decoded once)"


# Files imported without field ids, renamed, promoted and added columns ------------------------------------------


def no_ids_file(table: Any, data: pa.Table) -> None:
    """`data` written by pyarrow (no field ids, as a Hive table's files) and registered with `add_files`."""
    path = f"{table.metadata.location}/data/imported-{len(table.inspect.files())}.parquet"
    with table.io.new_output(path).create() as out:
        pq.write_table(data, out, row_group_size=4)
    table.add_files([path])


@pytest.fixture
def imported(config, catalog) -> str:
    """db.t: a file imported without field ids (k INT, f FLOAT, s, x DOUBLE with NaN and NULL); then s renamed to
    `the name`, k promoted to BIGINT, f to DOUBLE, c added; a second imported file (the new names; no NaN), a file
    pyiceberg writes (field ids); indexed."""
    first = pa.table(
        {
            "id": pa.array(range(8), pa.int64()),
            "k": pa.array([1, None, 3, 2**31 - 1, -(2**31), 0, 7, 8], pa.int32()),
            "f": pa.array([1.5, None, NAN, 0.25, -0.0, 3.0, 1e30, 2.5], pa.float32()),
            "s": pa.array(["a", None, "", "b", "é", "a", "B", "b"]),
            "x": pa.array([1.0, NAN, None, 2.0, -0.0, 9.0, NAN, 5.0], pa.float64()),  # NaN beside max 2
        }
    )
    table = catalog.create_table("db.t", first.schema)
    no_ids_file(table, first)
    with table.update_schema() as update:
        update.rename_column("s", "the name")
        update.update_column("k", LongType())
        update.update_column("f", DoubleType())
        update.add_column("c", StringType())
    second = pa.table(
        {
            "id": pa.array(range(8, 14), pa.int64()),
            "k": pa.array([2**40, None, 3, 5, 6, -1], pa.int64()),
            "f": pa.array([1.5, 0.1, None, 4.0, 5.0, -2.0], pa.float64()),
            "the name": pa.array(["b", "a", None, "c", "", "b"]),
            "x": pa.array([1.0, 2.0, None, 4.5, 6.0, 7.0], pa.float64()),
            "c": pa.array(["x", None, "y", "x", "", "z"]),
        }
    )
    no_ids_file(table, second)
    third = second.set_column(0, "id", pa.array(range(14, 20), pa.int64()))
    table.append(third.cast(table.schema().as_arrow()))
    build_index(config, "db.t")
    return "db.t"


IMPORTED_RULES = [
    ("`the name` = 'b'", "a renamed column is read under its old name in files written before the rename"),
    ("`the name` IS NULL OR c IS NULL", "NULL in a renamed column; a column added after the import is NULL there"),
    ("k > 2 OR k = -2147483648", "INT promoted to BIGINT: the file's INT values (extremes too), cast"),
    ("k IS NULL OR f IS NULL", "NULL in promoted columns"),
    ("f = 1.5 OR f > 1e29", "FLOAT promoted to DOUBLE: binary fractions equal after the cast, 1e30 above 1e29"),
    ("isnan(f)", "NaN in a promoted FLOAT"),
    ("c != 'x'", "!= is unknown on the NULL of a column the file predates"),
    ("x > 4", "NaN is above every number, also in an imported file"),
    ("id >= 0", "every row (files proven all-match are read without a filter)"),
]


def test_imported_files_and_evolved_columns_read_exactly_by_every_scan(spark, config, catalog, imported) -> None:
    handle = open_handle(config, imported)
    rows = catalog.load_table(imported).scan().to_arrow()
    for where, rule in IMPORTED_RULES:
        where = where.replace("`", '"')
        truth = sql_ids(rows, where)
        for scan, got in through_every_scan(spark, handle, where).items():
            assert got == truth, f"{scan}: {rule}: {where} holds for rows {truth}"


def test_imported_files_are_read_by_sparks_own_parquet_reader_through_the_name_mapping(config, imported) -> None:
    from indexlib.scans.spark import PARQUET, PYICEBERG, routes

    handle = open_handle(config, imported)
    how = routes(handle.lookup("id >= 0"))
    assert sorted((r.how, r.why) for r in how.values()) == [
        (PARQUET, "by field id"),
        (PARQUET, "by name mapping"),
        (PARQUET, "by name mapping"),
    ], f"every file read whole, without deletes, is read by Spark's Parquet reader: {how}"
    first = next(r for path, r in how.items() if path.endswith("imported-0.parquet"))
    assert [c.stored for c in first.layout] == ["id", "k", "f", "s", "x", None], (
        "the first file's columns under their stored names; c (added later) NULL"
    )
    assert [c.stored_type is not None for c in first.layout] == [False, True, True, False, False, False], (
        "k and f read as INT and FLOAT and cast: they were promoted"
    )
    nan = routes(handle.lookup("x > 4"))
    assert sorted((r.how, r.why) for r in nan.values()) == [(PARQUET, "by field id"), (PYICEBERG, "NaN-prone")] or (
        sorted((r.how, r.why) for r in nan.values())
        == [(PARQUET, "by field id"), (PARQUET, "by name mapping"), (PYICEBERG, "NaN-prone")]
    ), f"the file holding NaN in x gets no pushed filter: {nan}"


def footer(*fields: tuple[str, pa.DataType, int | None]) -> pa.Schema:
    """A Parquet footer as pyarrow reads it: (name, type, field id or None)."""
    return pa.schema(
        [
            pa.field(name, kind, metadata={b"PARQUET:field_id": str(i).encode()} if i is not None else None)
            for name, kind, i in fields
        ]
    )


I64, I32, TEXT = pa.int64(), pa.int32(), pa.string()
# (rule, footer, table has a name mapping, identity-partition source ids, expected: how it maps and each current
# column's file column ("k*": read as stored and cast), or the reason pyiceberg reads it)
LAYOUT_RULES = [
    ("ids, current names and types", footer(("id", I64, 1), ("k", I64, 2), ("the name", TEXT, 3)), True, set(),
     ("by field id", ["id", "k", "the name"])),
    ("ids: renamed, INT promoted", footer(("id", I64, 1), ("kk", I32, 2), ("s", TEXT, 3)), False, set(),
     ("by field id", ["id", "kk*", "s"])),
    ("no ids: the mapping's old name", footer(("id", I64, None), ("k", I32, None), ("s", TEXT, None)), True, set(),
     ("by name mapping", ["id", "k*", "s"])),
    ("a column the file predates is NULL", footer(("id", I64, None), ("k", I64, None)), True, set(),
     ("by name mapping", ["id", "k", None])),
    ("some ids missing: every column by name", footer(("id", I64, 1), ("k", I64, None)), True, set(),
     ("by name mapping", ["id", "k", None])),
    ("no ids, no name mapping", footer(("id", I64, None)), False, set(), "not mapped by field id or name"),
    ("a column the mapping does not name", footer(("id", I64, None), ("q", I64, None)), True, set(), "not mapped"),
    ("two columns for one field", footer(("s", TEXT, None), ("the name", TEXT, None)), True, set(), "two columns"),
    ("names equal but for case", footer(("id", I64, None), ("ID", I64, None)), True, set(), "but for case"),
    ("int16: Spark reads SMALLINT", footer(("k", pa.int16(), None)), True, set(), "k stored as int16"),
    ("ns timestamps: pyiceberg converts", footer(("k", pa.timestamp("ns"), None)), True, set(), "k stored as"),
    ("no promotion from string", footer(("k", TEXT, None)), True, set(), "k stored as string, read as long"),
    ("no promotion from double", footer(("id", pa.float64(), None)), True, set(), "id stored as double"),
    ("identity source left out: pyiceberg fills it", footer(("id", I64, None)), True, {2}, "identity partition"),
]  # fmt: skip


def test_a_file_is_read_by_sparks_parquet_reader_only_where_it_maps_as_pyiceberg_maps_it() -> None:
    from pyiceberg.table.name_mapping import MappedField, NameMapping

    from indexlib.scans.spark import PARQUET, PYICEBERG, layout_of

    current = Schema(
        NestedField(1, "id", LongType()), NestedField(2, "k", LongType()), NestedField(3, "the name", StringType())
    )
    names = [["id"], ["k"], ["s", "the name"]]
    mapping = NameMapping([MappedField(field_id=i + 1, names=n) for i, n in enumerate(names)])
    for rule, stored, mapped, identity, expected in LAYOUT_RULES:
        route = layout_of(stored, current, mapping if mapped else None, identity)
        if isinstance(expected, str):
            assert route.how == PYICEBERG and expected in route.why, f"{rule}: through pyiceberg, not {route}"
            continue
        assert route.how == PARQUET, f"{rule}: Spark's Parquet reader maps it exactly, not {route}"
        columns = [c.stored and c.stored + "*" * (c.stored_type is not None) for c in route.layout]
        assert (route.why, columns) == expected, f"{rule}: {route.why}, {columns}"


# which Spark reader ----------------------------------------------------------------------------------------------

READER_RULES = [  # (format, WHERE, reader asked, reader given, a word of the reason, rule)
    ("iceberg", "x > 4", "auto", "connector", "in the Spark session", "Iceberg's staged scan pushes no filter"),
    ("delta", "id = 3", "auto", "connector", "in the Spark session", "whole files, no NaN where the WHERE looks"),
    ("delta", "x > 4", "auto", "files", "NaN", "Spark's Parquet reader would skip a NaN row's row group"),
    ("delta", "x > 4", "connector", "connector", "asked", "asked for: the filter is kept out of the reader"),
    ("iceberg", "x > 4", "files", "files", "asked", "asked for"),
    ("iceberg", "x = 5", "auto", "files", "in part", "row groups kept in part: only the jar-free reads read them"),
]


@pytest.mark.parametrize("fmt, where, asked, given, why, rule", READER_RULES)
def test_the_formats_own_reader_is_taken_where_it_reads_no_more_and_is_exact(
    connectors, conf_path, catalog, tmp_path, fmt, where, asked, given, why, rule
) -> None:
    name, data = write_nan_table(fmt, catalog, tmp_path)
    if given == "files" and why == "in part":
        conf_path.write_text(conf_path.read_text() + "[index]\nrow_groups = true\n")
    config = load_config(conf_path)
    build_index(config, name)
    handle = open_handle(config, name)
    result = handle.lookup(where)
    chosen = reader_of(connectors, result, handle.dialect, asked)
    assert (chosen.how, why in chosen.why) == (given, True), f"{fmt} {where} reader={asked}: {rule} ({chosen})"
    got = ids(handle.scan(where).to_spark(connectors, asked).toArrow())
    assert got == sql_ids(data, where), f"{fmt} {where} reader={asked}: the rows of SQL over the rows"


def test_a_large_iceberg_table_is_read_by_the_jar_free_reads_unless_asked(connectors, config, catalog, monkeypatch):
    """Handing Iceberg's reader the kept files costs ~1 ms per live file (py4j): over the limit, AUTO reads jar-free."""
    name, _ = write_nan_table("iceberg", catalog, None)
    result = open_handle(config, name).lookup("id = 3")
    monkeypatch.setattr("indexlib.scans.spark.CONNECTOR_MAX_LIVE_FILES", result.files_total - 1)
    assert reader_of(connectors, result).how == FILES, "one live file over the limit: jar-free"
    assert reader_of(connectors, result, reader=CONNECTOR).how == CONNECTOR, "asked for: the connector"
    monkeypatch.setattr("indexlib.scans.spark.CONNECTOR_MAX_LIVE_FILES", result.files_total)
    assert reader_of(connectors, result).how == CONNECTOR, "at the limit: the connector"


def test_an_unknown_reader_is_refused_in_one_line(spark, config, nan_table) -> None:
    name, _ = nan_table
    with pytest.raises(UserError, match=r"^reader 'jvm': one of 'auto', 'connector', 'files'$"):
        open_handle(config, name).scan("id = 1").to_spark(spark, "jvm")
