"""The Spark scan through the index (indexlib/scans/spark.py) returns exactly the rows of the unpruned read at the
version the lookup answered for (multiset, NULLs included), for hypothesis-drawn predicates: on the Iceberg table of
tests/iceberg_tables.py (copy-on-write deletes, merge-on-read position delete files, partition evolution, a renamed and
promoted columns) against pyiceberg's own `table.scan(row_filter).to_arrow()`, and on a partitioned Delta table with
deletes against delta-rs's `to_pyarrow_table()` filtered by the same WHERE (in DuckDB), and on one with deletion
vectors (tests/delta_vectors.py) against brute-force rows (each live file's rows minus the positions the test deleted,
checked against delta-rs's own `DeltaTable.scan()`). Spark is slow: few examples.

Real shared SparkSession, real SQLite catalog, real Parquet files, the index built by the real build.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import sweep
from delta_vectors import brute_force, commit_deletion_vectors, live_adds
from deltalake import DeltaTable, WriterProperties, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from iceberg_tables import batch, make_lake, predicate, rows
from lakes import EVENTS_SCHEMA, PARTS, SERVICES, Lake, events_batch
from pyiceberg import expressions as ice
from pyiceberg.table import FileScanTask

from indexlib.handle import IndexHandle, open_handle
from indexlib.indexing.build import build_index
from indexlib.query.sql import Clock
from indexlib.scans.spark import FILES, PARQUET, PYICEBERG, _groups, from_lookup, plan, routes
from indexlib.sources.base import DataFileRef
from indexlib.sources.iceberg_deletes import data_file_of

EXAMPLES = settings(
    max_examples=sweep("SKIPINDEX_SPARK_SCAN_EXAMPLES", short=8, long=40),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture
def lake(config, catalog) -> Any:
    """The table of tests/iceberg_tables.py and, in a partition of its own, a file written under the current schema
    without delete files (read as plain Parquet)."""
    table = make_lake(config, catalog)
    table.append(batch(600, 30, 7).rename_columns(["id", "g", "k", "f", "name"]).cast(table.schema().as_arrow()))
    build_index(config, "db.t")
    return catalog.load_table("db.t")


def test_the_dataframe_holds_the_unpruned_iceberg_rows_under_every_kind_of_change(spark, lake) -> None:
    handle = IndexHandle.for_iceberg(lake)

    @EXAMPLES
    @given(predicate())
    def check(drawn: tuple[str, Any]) -> None:
        where, row_filter = drawn
        result = handle.lookup(where)
        expected = lake.scan(row_filter=row_filter, snapshot_id=result.source_version).to_arrow()
        got = handle.scan(where).to_spark(spark, FILES)
        assert got.columns == expected.column_names, f"{where}: the current schema's columns (renamed ones too)"
        assert rows(got.toArrow()) == rows(expected), f"{where}: the rows of pyiceberg's own read at that snapshot"

    check()


@pytest.mark.parametrize("imported", [False, True], ids=["field ids", "imported without field ids"])
def test_sparks_parquet_reader_reads_every_file_without_deletes_read_whole(config, catalog, imported) -> None:
    """Renamed and promoted columns, files imported without field ids: Spark's reader maps them as pyiceberg does
    (`layout_of`); only files with delete files go through pyiceberg."""
    lake = make_lake(config, catalog, imported=imported)
    result = IndexHandle.for_iceberg(lake).lookup("id >= 0")
    how = {k.file.path: read.how for read in plan(result) for k in read.files}
    assert sorted(how) == sorted(k.file.path for k in result.kept_files), "every kept file is read exactly once"
    found = routes(result)
    for kept in result.kept_files:
        expected = PYICEBERG if kept.deletes else PARQUET
        assert how[kept.file.path] == expected == found[kept.file.path].how, (
            f"{kept.file.path} (deletes: {len(kept.deletes)}, {found[kept.file.path].why}): Spark's Parquet reader "
            "for every file without delete files read whole; pyiceberg for files with delete files"
        )
    stored = {pq.read_schema(path.removeprefix("file://")).field("k").type for path in how}
    assert stored == {pa.int32(), pa.int64()}, "the table has files from before and after k's promotion"


def test_an_empty_lookup_gives_an_empty_dataframe_with_the_table_schema(spark, lake) -> None:
    handle = IndexHandle.for_iceberg(lake)
    assert handle.lookup("id = -100").kept_files == [], "the index keeps no file for an absent key"
    got = handle.scan("id = -100").to_spark(spark, FILES)
    expected = lake.scan(row_filter="id = -100").to_arrow()
    assert got.columns == expected.column_names and got.count() == 0, "no rows, the table's columns"
    assert [f.dataType.simpleString() for f in got.schema.fields] == ["bigint", "int", "bigint", "double", "string"], (
        "the table's current types (promoted k and f)"
    )


def test_a_dataframe_stays_at_the_snapshot_its_lookup_answered_for(spark, lake) -> None:
    where = "id >= 100 AND id < 620"
    got = IndexHandle.for_iceberg(lake).scan(where).to_spark(spark, FILES)
    pinned = lake.current_snapshot().snapshot_id
    lake.delete(ice.LessThan("id", 150))  # copy-on-write: rewrites files the DataFrame reads, after it was made
    expected = lake.scan(row_filter=where, snapshot_id=pinned).to_arrow()
    assert lake.current_snapshot().snapshot_id != pinned
    assert rows(got.toArrow()) == rows(expected), "the rows of the snapshot the lookup answered for, not of later ones"


@pytest.fixture
def delta_lake(config, catalog, tmp_path) -> str:
    """A Delta table partitioned by `part`, with appends and two copy-on-write deletes (delta-rs writes no
    deletion vectors), indexed at its last version."""
    lake = Lake("delta", catalog, tmp_path, "events", partitioned=True)
    rng = random.Random(7)
    for n in range(6):
        lake.append(events_batch(rng, 100 * n, 40, PARTS[n % len(PARTS)]))
    lake.delete("id < 20")
    lake.delete("service = 'auth' AND part = 'b'")
    build_index(config, lake.name)
    return lake.name


@st.composite
def events_predicate(draw: Any, max_id: int = 620, parts: tuple[str, ...] = tuple(PARTS)) -> str:
    """Up to three leaves over the events columns (ids up to `max_id`, partitions `parts`), joined by AND / OR."""
    leaves = [
        st.integers(-5, max_id).map(lambda v: f"id >= {v}"),
        st.integers(-5, max_id).map(lambda v: f"id = {v}"),
        st.sampled_from(SERVICES).map(lambda s: f"service = '{s}'"),
        st.sampled_from(parts).map(lambda p: f"part = '{p}'"),
        st.sampled_from(parts).map(lambda p: f"part <> '{p}'"),
        st.just("service IS NULL"),
    ]
    text = draw(st.one_of(leaves))
    for _ in range(draw(st.integers(0, 2))):
        text = f"({text}) {draw(st.sampled_from(['AND', 'OR']))} ({draw(st.one_of(leaves))})"
    return text


def test_the_dataframe_holds_the_unpruned_delta_rows_with_partition_values(spark, config, delta_lake) -> None:
    handle = open_handle(config, delta_lake)

    @EXAMPLES
    @given(events_predicate())
    def check(where: str) -> None:
        result = handle.lookup(where)
        unpruned = DeltaTable(delta_lake, version=result.source_version).to_pyarrow_table()
        with duckdb.connect() as con:
            con.register("unpruned", unpruned)
            expected = con.sql(f"SELECT * FROM unpruned WHERE {where}").to_arrow_table()
        got = IndexHandle.for_table(config, delta_lake).scan(where).to_spark(spark, FILES)
        assert got.columns == expected.column_names, f"{where}: the table's columns, partition column included"
        assert rows(got.toArrow()) == rows(expected), f"{where}: the rows of delta-rs's own read, filtered"

    check()


ODD = "x+%é y"  # a partition value spelt differently as a path, a URI and Spark's `_metadata.file_path`


@pytest.fixture
def delta_vectors(config, catalog, tmp_path) -> str:
    """A Delta table partitioned by `part` with deletion vectors as Spark's DELETE writes them
    (tests/delta_vectors.py): inline, 'u' and 'p' storage, a vector deleting every row of its file, one replaced by
    a second, one across the row groups of a file with five (in partition ODD, a directory delta-rs percent-encodes),
    a file with a vector rewritten by delta-rs's delete; indexed at its last version."""
    # a '+' in the path: Spark leaves it as is in `_metadata.file_path`, URL decoding would read it as a space
    lake = Lake("delta", catalog, tmp_path, "vectors", partitioned=True, location=str(tmp_path / "vectors+dv"))
    rng = random.Random(11)
    for n, part in enumerate([*PARTS, *PARTS]):
        write_deltalake(
            lake.name,
            events_batch(rng, 100 * n, 12, part),
            mode="append",
            partition_by=["part"],
            configuration={"delta.enableDeletionVectors": "true"} if n == 0 else None,
        )
    write_deltalake(
        lake.name,
        events_batch(rng, 700, 40, ODD),
        mode="append",
        partition_by=["part"],
        writer_properties=WriterProperties(max_row_group_size=8),
    )
    adds = live_adds(lake.name)
    by_first = {pq.ParquetFile(Path(lake.name) / unquote(f)).read().column("id")[0].as_py(): f for f in adds}
    first = [by_first[i] for i in sorted(by_first)]
    assert pq.ParquetFile(Path(lake.name) / unquote(by_first[700])).num_row_groups == 5
    commit_deletion_vectors(lake.name, {first[0]: {0, 5}, first[1]: set(range(12))})
    commit_deletion_vectors(lake.name, {first[0]: {11}, first[2]: {3}, by_first[700]: {0, 9, 17, 31, 39}}, "u")
    commit_deletion_vectors(lake.name, {first[3]: {1, 2}, first[4]: {0}}, "p")
    lake.delete("id = 401")  # rewrites first[4] without its row 0 (vector) and row 1
    build_index(config, lake.name)
    return lake.name


def test_the_dataframe_drops_the_rows_delta_deletion_vectors_delete(spark, config, delta_vectors) -> None:
    handle = open_handle(config, delta_vectors)
    table = brute_force(delta_vectors, EVENTS_SCHEMA, {"part": str})
    assert rows(pa.table(DeltaTable(delta_vectors).scan().read_all()).cast(EVENTS_SCHEMA)) == rows(table), (
        "delta-rs's own scan drops the rows the test deleted"
    )
    kept = handle.lookup("id >= 0").kept_files
    assert sum(len(k.deletes) for k in kept) == 5 and any(k.all_match and k.deletes for k in kept)

    @EXAMPLES
    @given(events_predicate(745, (*PARTS, ODD)))
    def check(where: str) -> None:
        with duckdb.connect() as con:
            con.register("unpruned", table)
            expected = con.sql(f"SELECT * FROM unpruned WHERE {where}").to_arrow_table()
        got = handle.scan(where).to_spark(spark, FILES)
        assert rows(got.toArrow()) == rows(expected), f"{where}: every deleted row dropped, and only those"

    check()
    for where in ["id >= 0", f"part = '{ODD}'", "id = 731 OR id = 730"]:
        expected = duckdb.connect().from_arrow(table).query("t", f"SELECT * FROM t WHERE {where}").to_arrow_table()
        assert rows(handle.scan(where).to_spark(spark, FILES).toArrow()) == rows(expected), f"{where}: exact"


@pytest.mark.parametrize(
    "sizes, slots",
    [([10] * 35, 4), ([100, 1, 1, 1, 1], 4), ([5], 4), ([3, 3, 3], 8), (list(range(1, 50)), 3)],
)
def test_pyiceberg_reads_group_files_into_at_most_the_slots_by_bytes(sizes: list[int], slots: int) -> None:
    tasks = [
        FileScanTask(data_file_of(DataFileRef(f"/f{i}.parquet", 1, size, "PARQUET")), set(), ice.AlwaysTrue())
        for i, size in enumerate(sizes)
    ]
    groups = _groups(tasks, slots)
    assert sorted(i for g in groups for i in g) == list(range(len(sizes))), "every file in exactly one group"
    assert len(groups) == min(slots, len(sizes)), "as many groups as slots, never more, never an empty one"
    loads = [sum(sizes[i] for i in g) for g in groups]
    assert max(loads) - min(loads) <= max(sizes), f"{sizes}: groups balanced by bytes within one file"


def test_current_date_in_the_filter_is_the_date_the_lookup_pruned_for(spark, config, tmp_path) -> None:
    """Spark's own CURRENT_DATE (another day, another session zone) could ask for rows of files the lookup skipped:
    the filter uses the lookup's clock."""
    path = str(tmp_path / "dated")
    days = [dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)]
    table = pa.table({"id": pa.array(range(30), pa.int64()), "d": pa.array([days[i % 3] for i in range(30)])})
    write_deltalake(path, table, partition_by=["d"])
    build_index(config, path)
    clock = Clock(now=dt.datetime(2024, 1, 2, 12, tzinfo=dt.UTC), time_zone=dt.UTC)
    result = open_handle(config, path).lookup("d = CURRENT_DATE AND id % 2 = 0", clock)
    got = from_lookup(spark, result, clock=clock, reader=FILES).toArrow()
    expected = [i for i in range(30) if days[i % 3] == dt.date(2024, 1, 2) and i % 2 == 0]
    assert sorted(got.column("id").to_pylist()) == expected, "CURRENT_DATE is the lookup clock's date, not Spark's"
