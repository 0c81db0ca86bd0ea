"""One scan object (indexlib/scans/scan.py): `handle.scan(where)` looks `where` up once, and every output of it
(Arrow, a batch stream, pandas, a DuckDB relation, a Polars LazyFrame, a Spark DataFrame, the count) holds exactly
the rows of the unpruned query at the version that lookup answered for; a new engine is one function registered
under the entry-point group `skipindex.scan_targets`.

Real tables: the Iceberg lake of tests/iceberg_tables.py (deletes of both kinds, a partition spec change, a rename,
promotions) and a partitioned Delta table with a delete and a column added later; the unpruned read is the format's
own read of the whole table at that version, filtered by DuckDB with the same SQL.
"""

from __future__ import annotations

from collections import Counter
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from iceberg_tables import batch, make_lake, rows

from indexlib import plugins
from indexlib.errors import UserError
from indexlib.handle import IndexHandle, open_handle, scan
from indexlib.indexing.build import build_index
from indexlib.scans.scan import BUILT_IN, ENTRY_POINT_GROUP, Scan, targets

WHERES = ["id >= 100 AND id < 250", "id = 7 OR id IN (120, 330, 999)", "id >= 0", "id = 100000"]
# SQL the pyiceberg scan has no exact row filter for, and SQL's NULL meaning: every output still holds SQL's rows
SQL_ONLY = ["s LIKE '%b%'", "s NOT LIKE 'a%' OR k IS NULL", "k NOT IN (1, 2)", "id % 7 = 0 AND k > 3"]


def unpruned(table: pa.Table, where: str) -> pa.Table:
    return duckdb.connect().from_arrow(table).query("t", f"SELECT * FROM t WHERE {where}").to_arrow_table()


def outputs(found: Scan) -> dict[str, Any]:
    """Every output of one scan, as rows (and the count)."""
    return {
        "to_arrow": rows(found.to_arrow()),
        "to_arrow_batch_reader": rows(found.to_arrow_batch_reader().read_all()),
        "to_pandas": rows(pa.Table.from_pandas(found.to_pandas(), preserve_index=False)),
        "to_duckdb": rows(found.to_duckdb().to_arrow_table()),
        "to_polars": rows(found.to_polars().collect().to_arrow()),
    }


@pytest.fixture
def iceberg(config, catalog) -> tuple[IndexHandle, Any]:
    lake = make_lake(config, catalog)
    return IndexHandle.for_iceberg(lake), lambda version: lake.scan(snapshot_id=version).to_arrow()


@pytest.fixture
def delta(config, catalog, tmp_path: Path) -> tuple[IndexHandle, Any]:
    path = str(tmp_path / "events")
    for n in range(3):
        data = batch(100 * n, 40, n % 2).select(["id", "g", "k", "s"])
        write_deltalake(path, data, mode="append", partition_by=["g"])
    DeltaTable(path).delete("id % 5 = 1")
    extra = batch(300, 40, 1).select(["id", "g", "k", "s"]).append_column("x", pa.array([0.5] * 40, pa.float64()))
    write_deltalake(path, extra, mode="append", partition_by=["g"], schema_mode="merge")
    build_index(config, path)
    return open_handle(config, path), lambda version: DeltaTable(path, version=version).to_pyarrow_table()


@pytest.mark.parametrize("table", ["iceberg", "delta"])
@pytest.mark.parametrize("where", WHERES)
def test_every_output_of_one_scan_holds_the_rows_of_the_unpruned_query(request, table, where) -> None:
    handle, read_whole = request.getfixturevalue(table)
    found = handle.scan(where)
    expected = rows(unpruned(read_whole(found.result.source_version), where))
    for output, got in outputs(found).items():
        assert got == expected, f"{table}, {where}: {output} returns the rows of the unpruned query"
    assert found.count() == sum(expected.values()), f"{table}, {where}: count() counts them"
    assert found.plan_files() == found.result.kept_files, "plan_files() are the lookup's kept files"
    assert f"files kept {len(found.plan_files())} of" in found.explain(), "explain() is skipindex explain's text"


@pytest.mark.parametrize("table", ["iceberg", "delta"])
@pytest.mark.parametrize("where", SQL_ONLY)
def test_sql_without_a_pyiceberg_row_filter_keeps_its_sql_meaning_in_every_output(request, table, where) -> None:
    handle, read_whole = request.getfixturevalue(table)
    where = where.replace("s ", "name ") if table == "iceberg" else where  # the lake renamed s to name
    found = handle.scan(where)
    expected = rows(unpruned(read_whole(found.result.source_version), where))
    for output, got in outputs(found).items():
        assert got == expected, f"{table}, {where}: {output} returns the rows SQL returns"
    assert found.count() == sum(expected.values()), f"{table}, {where}: count() counts them"


@pytest.mark.parametrize("table", ["iceberg", "delta"])
def test_the_module_function_scans_as_the_handle_does(request, table) -> None:
    handle, _ = request.getfixturevalue(table)
    where = WHERES[1]
    assert rows(scan(handle, where).to_arrow()) == rows(handle.scan(where).to_arrow()), "scan(handle, where)"


LIMITS = [0, 1, 7, 10_000]


@pytest.mark.parametrize("table", ["iceberg", "delta"])
@pytest.mark.parametrize("where", [*WHERES[:3], SQL_ONLY[0]])
def test_a_limit_returns_that_many_of_the_matching_rows_or_all_of_them(request, table, where) -> None:
    handle, read_whole = request.getfixturevalue(table)
    where = where.replace("s ", "name ") if table == "iceberg" else where  # the lake renamed s to name
    for limit in LIMITS:
        found = handle.scan(where, limit=limit)
        matching = rows(unpruned(read_whole(found.snapshot_id), where))
        wanted = min(limit, sum(matching.values()))
        for output, got in outputs(found).items():
            assert not got - matching, f"{table}, {where}, limit {limit}: {output} returns only matching rows"
            assert sum(got.values()) == wanted, f"{table}, {where}, limit {limit}: {output} returns min(limit, matches)"
        assert found.count() == wanted, f"{table}, {where}, limit {limit}: count() is min(limit, matches)"


@pytest.mark.parametrize("limit", [-1, 1.5, True, "3"])
def test_a_limit_that_is_not_a_row_count_is_refused_when_the_scan_is_made(iceberg, limit) -> None:
    handle, _ = iceberg
    with pytest.raises(UserError, match=r"^table db\.t: limit .* is not a whole number of rows \(0 or more\)$"):
        handle.scan(WHERES[0], limit=limit)


@pytest.mark.parametrize("table", ["iceberg", "delta"])
def test_selected_fields_are_every_outputs_columns_in_the_tables_order(request, table) -> None:
    handle, read_whole = request.getfixturevalue(table)
    where = WHERES[0]
    found = handle.scan(where, selected_fields=("k", "id"))
    expected = unpruned(read_whole(found.result.source_version), where).select(["id", "k"])
    assert expected.num_rows > 0, "the rule needs rows"
    for output, got in outputs(found).items():
        assert got == rows(expected), f"{table}: {output} holds id and k alone, in the table's order"
    assert found.count() == expected.num_rows, "count() is not changed by the columns"


def test_a_column_the_table_lacks_is_refused_when_the_scan_is_made(iceberg) -> None:
    handle, _ = iceberg
    with pytest.raises(UserError, match=r"^table db\.t has no top-level column 'nope' to select$"):
        handle.scan(WHERES[0], selected_fields=("id", "nope"))


def test_scan_of_a_pyiceberg_table_reads_its_index_in_the_same_catalog(config, catalog) -> None:
    lake = make_lake(config, catalog)
    got = scan(lake, "id >= 100 AND id < 250")
    assert rows(got.to_arrow()) == rows(unpruned(lake.scan().to_arrow(), "id >= 100 AND id < 250"))
    assert got.result.has_index, "the index of db.t, found in the table's own catalog"


def test_every_output_reads_the_version_the_scans_lookup_answered_for(config, catalog) -> None:
    lake = make_lake(config, catalog)
    where = "id >= 100 AND id < 500"
    found = IndexHandle.for_iceberg(lake).scan(where)
    pinned = found.result.source_version
    later = batch(200, 40, 1).rename_columns(["id", "g", "k", "f", "name"])
    lake.append(later.cast(lake.schema().as_arrow()))
    lake.delete("id < 150")
    expected = rows(unpruned(lake.scan(snapshot_id=pinned).to_arrow(), where))
    assert expected != rows(unpruned(lake.scan().to_arrow(), where)), "the table's rows did change since"
    for output, got in outputs(found).items():
        assert got == expected, f"{output}: the rows of the snapshot the lookup answered for, not of later ones"
    assert found.count() == sum(expected.values())


def test_a_pyiceberg_row_filter_is_applied_with_pyicebergs_own_meaning(iceberg) -> None:
    from pyiceberg.expressions import NotIn

    handle, read_whole = iceberg
    found = handle.scan(NotIn("k", [1, 2]))  # pyiceberg keeps NULL k here; SQL's NOT IN would not
    whole = read_whole(found.result.source_version)
    expected = unpruned(whole, "k IS NULL OR k NOT IN (1, 2)")
    assert whole.column("k").null_count > 0, "the rule needs NULL k values"
    assert rows(found.to_arrow()) == rows(expected), "the rows of table.scan(row_filter=NotIn('k', [1, 2]))"


# A new scan target: one function and one registration ----------------------------------------------------------


def kept_paths(found: Scan, prefix: str = "") -> list[str]:
    """A toy engine: the kept files' paths."""
    return [prefix + kept.file.path for kept in found.plan_files()]


def _registered(monkeypatch, points: list[EntryPoint]) -> None:
    monkeypatch.setattr(plugins, "entry_points", lambda group: points if group == ENTRY_POINT_GROUP else [])
    targets.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_targets():
    targets.cache_clear()
    yield
    targets.cache_clear()


def test_a_registered_target_is_reached_by_its_name_with_its_options(monkeypatch, iceberg) -> None:
    handle, _ = iceberg
    toy = EntryPoint("paths", f"{__name__}:kept_paths", ENTRY_POINT_GROUP)
    _registered(monkeypatch, [*entry_points(group=ENTRY_POINT_GROUP), toy])
    found = handle.scan(WHERES[1])
    assert found.to("paths", prefix="x:") == ["x:" + k.file.path for k in found.result.kept_files]
    assert rows(found.to_arrow()) == rows(found.to("arrow")), "the built-in targets are still there"


def test_the_built_in_targets_are_registered_and_found_without_package_metadata(monkeypatch) -> None:
    registered = {point.name for point in entry_points(group=ENTRY_POINT_GROUP)}
    assert registered == set(BUILT_IN), "pyproject.toml registers every built-in target (reinstall)"
    _registered(monkeypatch, [])  # a checkout on sys.path, not installed
    assert set(targets()) == set(BUILT_IN)


def test_an_unknown_target_is_one_line_naming_the_table_and_the_registered_ones(iceberg) -> None:
    handle, _ = iceberg
    with pytest.raises(UserError, match=r"^table db\.t: no scan target 'parquet' \(registered: arrow, .*spark\)$"):
        handle.scan(WHERES[1]).to("parquet")


@pytest.mark.spark
def test_to_spark_holds_the_rows_of_the_unpruned_query(spark, iceberg) -> None:
    handle, read_whole = iceberg
    for where in WHERES[:2]:
        found = handle.scan(where)
        frame = found.to_spark(spark, reader="files")
        expected = unpruned(read_whole(found.result.source_version), where)
        got = Counter(tuple(row.asDict().items()) for row in frame.collect())
        assert got == rows(expected), f"{where}: the DataFrame's rows"
        projected = handle.scan(where, selected_fields=("k", "id")).to_spark(spark)
        got = Counter(tuple(row.asDict().items()) for row in projected.collect())
        assert got == rows(expected.select(["id", "k"])), f"{where}: the DataFrame holds id and k alone"
        for limit in (0, 3):
            limited = handle.scan(where, limit=limit).to_spark(spark, reader="files").collect()
            got = Counter(tuple(row.asDict().items()) for row in limited)
            assert not got - rows(expected), f"{where}, limit {limit}: only matching rows"
            assert len(limited) == min(limit, expected.num_rows), f"{where}, limit {limit}: min(limit, matches) rows"
