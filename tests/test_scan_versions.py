"""A scan of an earlier version (`handle.scan(where, snapshot_id=...)`, indexlib/handle.py `state_at`) returns the
rows of the format's own read of that version: for Iceberg, pyiceberg's `table.scan(row_filter=..., snapshot_id=...)`
(the snapshot's files, its delete files and the schema it was written with), for Delta, delta-rs's read of that table
version filtered by SQL. Every version of one real table is asked, each through every output of the scan.

The Iceberg table is the lake of tests/iceberg_tables.py (appends, a copy-on-write delete, a partition spec change, a
rename and promotions, position delete files), indexed at its last snapshot, then one more append (its live files
come from the index's file rows and that append) and one more delete (planned afresh) after the build; the Delta
table has appends, a delete, and an append that adds a column. The index's entries are facts about data files, so
they prune every version's files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from iceberg_tables import batch, make_lake, rows
from pyiceberg import expressions as ice
from pyiceberg.types import LongType

from indexlib.errors import UserError
from indexlib.handle import IndexHandle, open_handle
from indexlib.indexing.build import build_index
from indexlib.scans.scan import Scan
from indexlib.sources.base import LiveFiles

# (WHERE as SQL, the same as a pyiceberg row filter string): columns every snapshot's schema has under that name
ICEBERG_WHERES = [
    "id >= 100 AND id < 250",
    "id < 10 OR id = 205 OR id >= 520",
    "k IS NULL",
    "g = 1 AND id > 300",
    "k = 3 OR k >= 1000000000",  # k promoted from int to long: the older snapshots' schema reads it as int
    "f > 0.5 AND f < 2",  # f promoted from float to double
]
DELTA_WHERES = ["id >= 100 AND id < 250", "id % 5 = 1 OR id >= 300", "g = 1"]


def outputs(found: Scan) -> dict[str, pa.Table]:
    return {
        "to_arrow": found.to_arrow(),
        "to_arrow_batch_reader": found.to_arrow_batch_reader().read_all(),
        "to_duckdb": found.to_duckdb().to_arrow_table(),
        "to_polars": found.to_polars().collect().to_arrow(),
    }


@pytest.fixture
def lake(config, catalog) -> Any:
    table = make_lake(config, catalog)  # indexed at its last snapshot
    table.append(batch(600, 40, 1).rename_columns(["id", "g", "k", "f", "name"]).cast(table.schema().as_arrow()))
    table.delete(ice.LessThan("id", 120))
    return table


def test_every_iceberg_snapshot_reads_as_pyicebergs_own_read_of_it(lake) -> None:
    handle = IndexHandle.for_iceberg(lake)
    snapshots = [entry.snapshot_id for entry in lake.history()]
    assert len(snapshots) >= 10, "the history holds appends, deletes and schema changes"
    for snapshot_id in snapshots:
        for where in ICEBERG_WHERES:
            found = handle.scan(where, snapshot_id=snapshot_id)
            expected = lake.scan(row_filter=where, snapshot_id=snapshot_id).to_arrow()
            assert found.snapshot_id == snapshot_id, f"{snapshot_id}: the scan reads the snapshot asked for"
            for output, got in outputs(found).items():
                assert rows(got) == rows(expected), f"{snapshot_id}, {where}: {output} holds that snapshot's rows"
                assert got.column_names == expected.column_names, f"{snapshot_id}: the snapshot's schema's columns"
            assert found.count() == expected.num_rows, f"{snapshot_id}, {where}: count() counts them"
    current = handle.scan(ICEBERG_WHERES[0])
    assert current.snapshot_id == lake.current_snapshot().snapshot_id, "without snapshot_id: the current snapshot"


def test_an_append_after_the_build_takes_its_files_from_the_index_rows_and_the_append(config, catalog) -> None:
    table = make_lake(config, catalog)
    built_at = table.current_snapshot().snapshot_id
    table.append(batch(600, 40, 1).rename_columns(["id", "g", "k", "f", "name"]).cast(table.schema().as_arrow()))
    appended = table.current_snapshot().snapshot_id
    table.delete(ice.LessThan("id", 120))
    handle = IndexHandle.for_iceberg(table)
    state = handle.state_at(appended)
    assert isinstance(state.live, LiveFiles), "the live files at the append: the index's file rows and the append's"
    planned = {t.file.file_path for t in table.scan(snapshot_id=appended).plan_files()}
    assert set(state.live_paths) == planned, "the files live at the append: those at the build and the append's"
    assert handle.state_at(built_at).source_version == built_at, "the state names the version it is of"


def test_a_version_the_table_does_not_have_is_one_line(lake) -> None:
    handle = IndexHandle.for_iceberg(lake)
    with pytest.raises(UserError, match=r"^table db\.t has no version 12345 \(.*\)$"):
        handle.scan("id = 1", snapshot_id=12345)


@pytest.fixture
def delta_lake(config, tmp_path: Path) -> str:
    path = str(tmp_path / "events")
    for n in range(3):
        write_deltalake(
            path, batch(100 * n, 40, n % 2).select(["id", "g", "k", "s"]), mode="append", partition_by=["g"]
        )
    build_index(config, path)  # at version 2
    DeltaTable(path).delete("id % 5 = 1")
    extra = batch(300, 40, 1).select(["id", "g", "k", "s"]).append_column("x", pa.array([0.5] * 40, pa.float64()))
    write_deltalake(path, extra, mode="append", partition_by=["g"], schema_mode="merge")
    return path


def test_every_delta_version_reads_as_delta_rss_own_read_of_it(config, delta_lake) -> None:
    handle = open_handle(config, delta_lake)
    versions = range(DeltaTable(delta_lake).version() + 1)
    for version in versions:
        whole = DeltaTable(delta_lake, version=version).to_pyarrow_table()
        for where in DELTA_WHERES:
            found = handle.scan(where, snapshot_id=version)
            expected = duckdb.connect().from_arrow(whole).query("t", f"SELECT * FROM t WHERE {where}").to_arrow_table()
            for output, got in outputs(found).items():
                assert rows(got) == rows(expected), f"version {version}, {where}: {output} holds that version's rows"
            assert found.count() == expected.num_rows, f"version {version}, {where}: count() counts them"
    with pytest.raises(UserError, match=r"has no version 99 "):
        handle.scan("id = 1", snapshot_id=99)


@pytest.mark.spark
@pytest.mark.parametrize("reader", ["files", "connector"])
def test_the_spark_scan_of_an_earlier_snapshot_holds_pyicebergs_rows_of_it(connectors, lake, reader) -> None:
    """Both readers: Iceberg's own finds the snapshot's columns by field id (s, renamed to name since)."""
    handle = IndexHandle.for_iceberg(lake)
    history = [entry.snapshot_id for entry in lake.history()]
    for snapshot_id in (history[0], history[len(history) // 2], history[-2]):
        for where in ICEBERG_WHERES[:2]:
            expected = lake.scan(row_filter=where, snapshot_id=snapshot_id).to_arrow()
            got = handle.scan(where, snapshot_id=snapshot_id).to_spark(connectors, reader=reader)
            assert got.columns == expected.column_names, f"{snapshot_id}, {reader}: the snapshot's schema's columns"
            assert rows(got.toArrow()) == rows(expected), f"{snapshot_id}, {where}, {reader}: that snapshot's rows"


@pytest.mark.spark
def test_a_snapshot_with_a_column_dropped_since_is_read_jar_free_or_refused_by_icebergs_reader(connectors, lake):
    with lake.update_schema() as update:
        update.add_column("x", LongType())
    data = batch(700, 20, 1).rename_columns(["id", "g", "k", "f", "name"])
    lake.append(data.append_column("x", pa.array(range(20), pa.int64())).cast(lake.schema().as_arrow()))
    with_x = lake.current_snapshot().snapshot_id
    with lake.update_schema() as update:
        update.delete_column("x")  # a schema-only commit: with_x stays the current snapshot, read with its schema
    handle = IndexHandle.for_iceberg(lake)
    where = "id >= 690 AND id < 705"
    with pytest.raises(UserError, match=r"^table db\.t: the format's own reader reads the table's current columns, "):
        handle.scan(where, snapshot_id=with_x).to_spark(connectors, reader="connector")
    expected = lake.scan(row_filter=where, snapshot_id=with_x).to_arrow()
    got = handle.scan(where, snapshot_id=with_x).to_spark(connectors)  # "auto": the jar-free reads, x and all
    assert got.columns == expected.column_names and "x" in got.columns, "the snapshot's columns, the dropped one too"
    assert rows(got.toArrow()) == rows(expected), "the rows of pyiceberg's own read of that snapshot"
    arrow = handle.scan(where, snapshot_id=with_x).to_arrow()
    assert arrow.column_names == expected.column_names and rows(arrow) == rows(expected), "to_arrow reads it so too"
    assert "x" not in handle.scan(where).to_arrow().column_names, "without snapshot_id: the current schema"
