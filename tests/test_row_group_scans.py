"""Every scan reads only the Parquet row groups a lookup kept of each file (`KeptFile.row_groups`) and returns exactly
the rows of the whole-file read with the filter: the pyiceberg scan, the DuckDB relation, the Polars LazyFrame and
the Spark DataFrame, on Iceberg tables (position delete files on multi-row-group files, files imported without field
ids, row groups of one row) and on a Delta table with deletion vectors.

The kept row groups come from a real lookup whose `kept_files` are given `row_groups` here (`with_row_groups`):
- the honest ones, computed by brute force: the row groups (read raw with pyarrow) holding the id of a row of the
  unpruned read; the scan must return the unpruned rows;
- fewer than those: a part of the matching row groups alone. The rows must be exactly the unpruned rows of those row
  groups: matching rows of a row group left out are not returned (so it was not read), and deleted positions,
  whole-file row numbers, still delete the right rows of the row groups read.
Every table has a unique `id` per row, which ties a row of the unpruned read to its file and row group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from delta_vectors import brute_force, commit_deletion_vectors, deleted_positions, live_adds
from deltalake import DeltaTable, WriterProperties, write_deltalake
from iceberg_tables import make_lake, rows
from pyarrow.fs import LocalFileSystem
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from indexlib.handle import IndexHandle, open_handle
from indexlib.indexing.build import build_index
from indexlib.lookup import LookupResult
from indexlib.query.sql import Clock
from indexlib.scans.duckdb import relation_of
from indexlib.scans.polars import of_relation
from indexlib.scans.row_groups import shift_positions
from indexlib.scans.scan import Scan
from indexlib.scans.spark import FILES, PARQUET, PYICEBERG, from_lookup, plan
from indexlib.sources.base import KeptFile

Choice = Callable[[KeptFile, list[set[int]], set[int]], tuple[int, ...] | None]


def local(path: str) -> str:
    return unquote(path.removeprefix("file://")) if path.startswith("file:") else path


def group_ids(path: str) -> list[set[int]]:
    """The ids in each row group of a Parquet file, read raw (deleted rows included)."""
    parquet = pq.ParquetFile(local(path))
    return [
        set(parquet.read_row_group(i, columns=["id"]).column("id").to_pylist()) for i in range(parquet.num_row_groups)
    ]


def with_row_groups(result: LookupResult, choose: Choice, matching: set[int]) -> LookupResult:
    """The lookup with each kept file's `row_groups` set to `choose(kept, ids per row group, matching ids)`; a file
    given no row group is left out, as a lookup leaves out a file none of whose row groups can match."""
    kept = []
    for k in result.kept_files:
        groups = choose(k, group_ids(k.file.path), matching)
        if groups != ():
            kept.append(dataclasses.replace(k, parts={} if groups is None else {"row_groups": groups}))
    copy = dataclasses.replace(result)
    copy.__dict__["kept_files"] = kept  # kept_files is a cached_property: what the scans read
    return copy


def honest(k: KeptFile, ids: list[set[int]], matching: set[int]) -> tuple[int, ...]:
    """The row groups holding a matching row."""
    return tuple(g for g, group in enumerate(ids) if group & matching)


def every_other(k: KeptFile, ids: list[set[int]], matching: set[int]) -> tuple[int, ...]:
    """Half of the matching row groups (the first, third, ...); all-match files are given them too."""
    return honest(k, ids, matching)[::2]


def read_ids(result: LookupResult) -> set[int]:
    """The ids a scan may return: those in the row groups each kept file was given (all of an all-match file)."""
    ids: set[int] = set()
    for k in result.kept_files:
        groups = group_ids(k.file.path)
        chosen = range(len(groups)) if k.all_match or k.row_groups is None else k.row_groups
        ids |= {i for g in chosen for i in groups[g]}
    return ids


def only_ids(table: pa.Table, ids: set[int]) -> pa.Table:
    return table.filter(pa.array([i in ids for i in table.column("id").to_pylist()]))


def unpruned(table: pa.Table, where: str) -> pa.Table:
    return duckdb.connect().from_arrow(table).query("t", f"SELECT * FROM t WHERE {where}").to_arrow_table()


def pyiceberg_rows(result: LookupResult) -> pa.Table:
    return Scan(result, None, Clock.system(None)).to_arrow()


def duckdb_rows(result: LookupResult) -> pa.Table:
    return relation_of(result).to_arrow_table()


def polars_rows(result: LookupResult) -> pa.Table:
    return of_relation(relation_of(result)).collect().to_arrow()


ICEBERG_SCANS = {"pyiceberg": pyiceberg_rows, "duckdb": duckdb_rows, "polars": polars_rows}


def check(scans: dict[str, Callable[[LookupResult], pa.Table]], result: LookupResult, expected: pa.Table, where: str):
    """Each scan of the lookup given the honest row groups returns `expected`; given half of them, `expected`'s
    rows in those row groups alone. Returns how many matching rows the halves left out."""
    matching = set(expected.column("id").to_pylist())
    whole = with_row_groups(result, honest, matching)
    half = with_row_groups(result, every_other, matching)
    fewer = only_ids(expected, read_ids(half))
    for name, scan in scans.items():
        assert rows(scan(whole)) == rows(expected), f"{name}, {where}: the matching row groups give the unpruned rows"
        assert rows(scan(half)) == rows(fewer), f"{name}, {where}: half of them give their unpruned rows alone"
    return expected.num_rows - fewer.num_rows


# Iceberg ----------------------------------------------------------------------------------------------------------

WHERES = [
    "id >= 100 AND id < 125",
    "k = 3",
    "name = 'ab' OR id > 515",
    "k IS NULL",
    "id IN (0, 3, 4, 5, 12, 20, 21, 23, 301, 401, 459)",
    "id < 40",
]


@pytest.fixture(params=[("field ids", 4), ("imported", 4), ("field ids", 1)], ids=lambda p: f"{p[0]}, {p[1]} rows")
def lake(request, config, catalog) -> Any:
    """The lake of tests/iceberg_tables.py (position deletes, a renamed and promoted columns, partition evolution)
    written in row groups of 4 rows or of 1 row, its older files imported without field ids or not."""
    imported, per_group = request.param[0] == "imported", request.param[1]
    return make_lake(config, catalog, imported=imported, row_group_rows=per_group)


def test_iceberg_scans_read_only_the_kept_row_groups(lake) -> None:
    handle = IndexHandle.for_iceberg(lake)
    assert any(len(group_ids(k.file.path)) > 4 for k in handle.lookup("id >= 0").kept_files), "multi-row-group files"
    left_out = 0
    for where in WHERES:
        result = handle.lookup(where)
        expected = unpruned(lake.scan(snapshot_id=result.source_version).to_arrow(), where)
        left_out += check(ICEBERG_SCANS, result, expected, where)
    assert left_out > 0, "the halves left matching rows out (and the scans did not return them)"


@pytest.fixture
def indexed_by_row_group(conf_path, catalog) -> tuple[Any, Any]:
    """The same lake, written in row groups of 4 rows and indexed with row-group entries (`[index] row_groups`)."""
    conf_path.write_text(conf_path.read_text() + "[index]\nrow_groups = true\n")
    from indexlib.config import load_config

    config = load_config(conf_path)
    return config, make_lake(config, catalog, row_group_rows=4)


def test_a_row_group_lookup_makes_every_scan_read_fewer_row_groups_and_the_unpruned_rows(indexed_by_row_group) -> None:
    """End to end: the build's row-group entries, the lookup's row-group stages, and the scans reading only the row
    groups it names return the rows of the unpruned scan; point and IN queries name fewer row groups than the
    files hold."""
    _, lake = indexed_by_row_group
    handle = IndexHandle.for_iceberg(lake)
    narrowed = 0
    for where in [*WHERES, "id = 105", "id IN (101, 207, 459)", "k = 3 AND id < 200"]:
        result = handle.lookup(where)
        expected = unpruned(lake.scan(snapshot_id=result.source_version).to_arrow(), where)
        for kept in result.kept_files:
            if kept.row_groups is not None:
                narrowed += len(group_ids(kept.file.path)) - len(kept.row_groups)
                truth = {g for g, ids in enumerate(group_ids(kept.file.path)) if ids & set(expected["id"].to_pylist())}
                assert truth <= set(kept.row_groups), f"{where}: every row group holding a match is kept"
        for name, scan in ICEBERG_SCANS.items():
            assert rows(scan(result)) == rows(expected), f"{name}, {where}: the rows of the unpruned scan"
    assert narrowed > 0, "the row-group stages left row groups out, and the scans did not need them"


def delete_positions(kept: KeptFile) -> set[int]:
    """The positions a kept file's position delete files delete from it."""
    out = set()
    for d in kept.deletes:
        table = pq.read_table(local(d.path))
        out |= {
            p
            for f, p in zip(table["file_path"].to_pylist(), table["pos"].to_pylist(), strict=True)
            if f == kept.file.path
        }
    return out


def test_position_deletes_apply_to_the_right_rows_of_the_row_groups_read(lake) -> None:
    """make_lake deletes positions 0, 3, 4 and 20 of one file. Rows 4-7 and 20-23 match; of their row groups, those
    of 20-23 alone are read: positions in the row groups skipped (0, 3, 4) must delete nothing there, position 20
    must delete the row of id at position 20 (first of the rows read), and no other."""
    handle = IndexHandle.for_iceberg(lake)
    target = next(k for k in handle.lookup("id >= 0").kept_files if delete_positions(k) == {0, 3, 4, 20})
    ids = pq.read_table(local(target.file.path), columns=["id"]).column("id").to_pylist()
    where = f"id IN ({', '.join(str(ids[p]) for p in [*range(4, 8), *range(20, 24)])})"
    result = handle.lookup(where)
    expected = unpruned(lake.scan(snapshot_id=result.source_version).to_arrow(), where)
    assert sorted(expected.column("id").to_pylist()) == sorted(ids[p] for p in [5, 6, 7, 21, 22, 23]), "4, 20 deleted"
    groups = group_ids(target.file.path)
    late = tuple(g for g, group in enumerate(groups) if group & {ids[p] for p in range(20, 24)})

    def only_late(k: KeptFile, ids_: list[set[int]], matching: set[int]) -> tuple[int, ...]:
        return late if k.file.path == target.file.path else ()

    assert 0 not in late and len(late) < len(groups), "rows 20-23 lie in later row groups than the deletes 0, 3, 4"
    late_only = with_row_groups(result, only_late, set())
    for name, scan in ICEBERG_SCANS.items():
        assert sorted(scan(late_only).column("id").to_pylist()) == sorted(ids[p] for p in [21, 22, 23]), (
            f"{name}: the rows of 20-23 but the deleted 20"
        )
    check(ICEBERG_SCANS, result, expected, where)


def test_position_deletes_follow_the_order_pyarrow_reads_row_groups_in(config, catalog) -> None:
    """pyarrow reads a fragment's row groups in the order of a Python set of them, not ascending: the row groups 0,
    3, 6 and 8 (of rows 0, 9, 20 and 24 in 3-row groups; deleted: 0 and 20) are read as 0, 8, 3, 6, and the deletes
    still hit their rows."""
    lake = make_lake(config, catalog, row_group_rows=3)
    handle = IndexHandle.for_iceberg(lake)
    target = next(k for k in handle.lookup("id >= 0").kept_files if delete_positions(k) == {0, 3, 4, 20})
    ids = pq.read_table(local(target.file.path), columns=["id"]).column("id").to_pylist()
    groups = group_ids(target.file.path)
    chosen = tuple(sorted({g for g, group in enumerate(groups) for p in (0, 9, 20, 24) if ids[p] in group}))
    fragment = ds.ParquetFileFormat().make_fragment(local(target.file.path), LocalFileSystem(), row_groups=list(chosen))
    assert [rg.id for rg in fragment.row_groups] != list(chosen), "pyarrow reads these row groups out of order"
    where = f"id IN ({', '.join(map(str, ids))})"
    result = handle.lookup(where)
    expected = unpruned(lake.scan(snapshot_id=result.source_version).to_arrow(), where)

    def these(k: KeptFile, ids_: list[set[int]], matching: set[int]) -> tuple[int, ...]:
        return chosen if k.file.path == target.file.path else ()

    chosen_only = with_row_groups(result, these, set())
    for name, scan in ICEBERG_SCANS.items():
        assert rows(scan(chosen_only)) == rows(only_ids(expected, read_ids(chosen_only))), (
            f"{name}: the rows of those row groups but the deleted 0 and 20"
        )


def test_an_all_match_file_is_read_whole_whatever_row_groups_it_is_given(lake) -> None:
    """Every row of an all-match file matches: it is read whole (its `row_groups`, if any, are all of them)."""
    result = IndexHandle.for_iceberg(lake).lookup("id >= 0")
    assert any(k.all_match and len(group_ids(k.file.path)) > 1 for k in result.kept_files), "all-match files"
    first_only = with_row_groups(result, lambda k, ids, matching: (0,), set())
    expected = only_ids(lake.scan(snapshot_id=result.source_version).to_arrow(), read_ids(first_only))
    for name, scan in ICEBERG_SCANS.items():
        assert rows(scan(first_only)) == rows(expected), f"{name}: all-match files whole, the others' first group"


def test_deleted_positions_become_positions_among_the_rows_read_in_the_order_read() -> None:
    import numpy as np

    rows_per_group = [4, 4, 2, 4]  # rows 0-3, 4-7, 8-9, 10-13
    shifted = shift_positions(np.array([13, 0, 5, 8, 9, 3]), rows_per_group, [3, 1])
    assert shifted.tolist() == [3, 5], "group 3 read first (13 is its 4th row), then group 1 (5 is the 6th row read)"


# Delta ------------------------------------------------------------------------------------------------------------


@pytest.fixture
def delta_vectors(config, catalog, tmp_path: Path) -> str:
    """A Delta table partitioned by p, written in row groups of 4 rows, with deletion vectors (as Spark writes them)
    deleting positions 0, 3, 4 and 20 of one file and 1 of another; indexed at its last version."""
    path = str(tmp_path / "vectors")
    for n, part in enumerate(["a", "b"]):
        data = pa.table(
            {
                "id": pa.array(range(100 * n, 100 * n + 30), pa.int64()),
                "s": [f"s{i % 7}" for i in range(30)],
                "p": [part] * 30,
            }
        )
        write_deltalake(
            path,
            data,
            mode="append",
            partition_by=["p"],
            writer_properties=WriterProperties(max_row_group_size=4),
            configuration={"delta.enableDeletionVectors": "true"} if n == 0 else None,
        )
    first, second = sorted(live_adds(path))
    commit_deletion_vectors(path, {first: {0, 3, 4, 20}, second: {1}})
    build_index(config, path)
    return path


def delta_rows(path: str) -> pa.Table:
    schema = pa.schema(DeltaTable(path).schema().to_arrow())
    return brute_force(path, schema, {"p": str})


def test_delta_scans_read_only_the_kept_row_groups_and_apply_deletion_vectors_by_file_position(
    config, delta_vectors
) -> None:
    handle = open_handle(config, delta_vectors)
    table = delta_rows(delta_vectors)
    adds = live_adds(delta_vectors)
    assert sum(len(deleted_positions(delta_vectors, a)) for a in adds.values()) == 5, "the vectors are committed"
    left_out = 0
    for where in ["id >= 4 AND id < 24", "s = 's3'", "id IN (0, 1, 3, 4, 5, 20, 21, 101, 102)", "p = 'b' AND id > 110"]:
        result = handle.lookup(where)
        expected = unpruned(table, where)
        left_out += check({"duckdb": duckdb_rows, "polars": polars_rows}, result, expected, where)
    assert left_out > 0, "the halves left matching rows out"


def test_a_column_named_like_duckdbs_row_group_number_does_not_pick_the_row_groups(config, catalog) -> None:
    """A table column `file_row_group_number` would hide DuckDB's own: such files are read through pyiceberg, which
    limits its fragment to the kept row groups; the column's values (here 0 everywhere) select nothing."""
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "file_row_group_number", LongType()))
    table = catalog.create_table("db.shadow", schema, properties={"write.parquet.row-group-limit": "3"})
    table.append(
        pa.table({"id": pa.array(range(20), pa.int64()), "file_row_group_number": pa.array([0] * 20, pa.int64())})
    )
    build_index(config, "db.shadow")
    where = "id IN (1, 4, 7, 10, 13)"
    result = IndexHandle.for_iceberg(table).lookup(where)
    expected = unpruned(table.scan().to_arrow(), where)
    assert check(ICEBERG_SCANS, result, expected, where) > 0, "half of the row groups leave matching rows out"


# Spark ------------------------------------------------------------------------------------------------------------


def spark_scan(spark: Any) -> Callable[[LookupResult], pa.Table]:
    return lambda result: from_lookup(spark, result, reader=FILES).toArrow()


def test_the_spark_dataframe_reads_only_the_kept_row_groups(spark, config, catalog, tmp_path) -> None:
    """Iceberg files through pyiceberg in Spark tasks (position deletes shifted as in the pyiceberg scan), Delta
    files through pyarrow in Spark tasks (deletion vectors dropped by whole-file position); files given no row
    groups stay on their path (plain Parquet)."""
    lake = make_lake(config, catalog, imported=True, row_group_rows=3)
    handle = IndexHandle.for_iceberg(lake)
    left_out = 0
    for where in ["id >= 100 AND id < 125", "id IN (0, 3, 4, 5, 12, 20, 21, 23, 301, 401, 459)", "k IS NULL"]:
        result = handle.lookup(where)
        expected = unpruned(lake.scan(snapshot_id=result.source_version).to_arrow(), where)
        left_out += check({"spark": spark_scan(spark)}, result, expected, where)
    assert left_out > 0, "the halves left matching rows out"
    result = handle.lookup("id >= 500 AND id % 3 = 0")
    expected = unpruned(lake.scan(snapshot_id=result.source_version).to_arrow(), "id >= 500 AND id % 3 = 0")
    plain = {k.file.path for read in plan(result) if read.how == PARQUET for k in read.files}
    assert plain, "files without row groups (None) are read as plain Parquet, as before"
    some = with_row_groups(result, honest, set(expected.column("id").to_pylist()))
    assert {read.how for read in plan(some) for k in read.files if k.file.path in plain} == {PYICEBERG}, (
        "the same files given row groups: through pyiceberg, which reads those alone"
    )


def test_the_spark_dataframe_reads_only_the_kept_row_groups_of_delta_files(spark, config, delta_vectors) -> None:
    handle = open_handle(config, delta_vectors)
    table = delta_rows(delta_vectors)
    left_out = 0
    for where in ["id >= 4 AND id < 24", "id IN (0, 1, 3, 4, 5, 20, 21, 101, 102)", "p = 'b' AND id > 110"]:
        result = handle.lookup(where)
        left_out += check({"spark": spark_scan(spark)}, result, unpruned(table, where), where)
    assert left_out > 0, "the halves left matching rows out"
