"""The DuckDB relation and the Polars LazyFrame through the index (indexlib/scans/duckdb.py, scans/polars.py) return
exactly the rows of the unpruned query at the version the lookup answered for (multiset, NULLs included), for
hypothesis-drawn SQL predicates, on real tables:
- Iceberg (tests/iceberg_tables.py): copy-on-write deletes, merge-on-read position delete files, a partition spec
  change, a renamed column and promoted columns; the unpruned read is pyiceberg's own scan of the whole table at that
  snapshot, filtered by DuckDB with the same SQL (predicates pyiceberg has no row filter for, LIKE '%b%' or a FLOAT
  comparison, included);
- Delta (delta-rs): partitioned by a string and a date column (NULL partitions included), a delete (delta-rs
  rewrites the files: it writes no deletion vectors), a column added later; the unpruned read is
  `DeltaTable.to_pyarrow_table()` filtered by DuckDB;
- Delta with deletion vectors (written as Spark writes them, tests/delta_vectors.py; delta-rs's `to_pyarrow_table()`
  refuses such tables): the unpruned read is brute force, every row of each live data file minus the positions the
  test deleted, checked against delta-rs's own `DeltaTable.scan()`, filtered by DuckDB.

Real SQLite catalog, real Parquet files, the index built by the real build (in the driver: the tables are small).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import sqlglot
from delta_vectors import brute_force, commit_deletion_vectors, day, live_adds
from deltalake import DeltaTable, WriterProperties, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from iceberg_tables import WORDS, batch, commit_equality_delete, commit_equality_deletes, make_lake, predicate, rows

from indexlib.errors import UserError
from indexlib.handle import IndexHandle, open_handle, scan
from indexlib.indexing.build import build_index
from indexlib.query.sql import Clock
from indexlib.scans import duckdb as duckdb_scan
from indexlib.scans.duckdb import relation_of
from indexlib.sources import delta as delta_source

pytestmark = pytest.mark.slow  # about 40 s of hypothesis examples: CI runs them, `make test-fast` does not
EXAMPLES = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def unpruned(table: pa.Table, where: str) -> pa.Table:
    """The query without the index: DuckDB's filter over every row of the table at that version."""
    return duckdb.connect().from_arrow(table).query("t", f"SELECT * FROM t WHERE {where}").to_arrow_table()


def read(where: str, handle: IndexHandle) -> tuple[pa.Table, pa.Table, int]:
    """The relation's rows, the LazyFrame's rows, and the lookup's version."""
    rel = handle.scan(where).to_duckdb()
    frame = handle.scan(where).to_polars().collect().to_arrow()
    return rel.to_arrow_table(), frame, handle.lookup(where).source_version


# Iceberg ----------------------------------------------------------------------------------------------------------


@pytest.fixture(params=["field ids", "field ids and a name mapping", "imported files"])
def lake(request, config, catalog) -> Any:
    """The lake as pyiceberg writes it (DuckDB reads its files by field id), with a name mapping set as well (files
    with field ids are still read by id), and with files imported without field ids (read through the name mapping:
    under the old name before the rename, the new name after)."""
    table = make_lake(config, catalog, imported=request.param == "imported files")
    if request.param == "field ids and a name mapping":
        with table.transaction() as tx:
            tx.set_properties(**{"schema.name-mapping.default": table.schema().name_mapping.model_dump_json()})
    return catalog.load_table("db.t")


@st.composite
def sql_predicate(draw: Any) -> str:
    """The pyiceberg scan's drawn predicates, and leaves only SQL can say (no exact pyiceberg row filter)."""
    text = draw(predicate())[0]
    if draw(st.booleans()):
        extra = draw(
            st.sampled_from(["name LIKE '%b%'", "name NOT LIKE 'a%'", "f > 0.4", "f = 1.25", "k + 1 = 4", "id % 7 = 0"])
        )
        text = f"({text}) {draw(st.sampled_from(['AND', 'OR']))} {extra}"
    return text


def test_the_relation_and_frame_return_the_unpruned_rows_under_every_kind_of_change(lake) -> None:
    handle = IndexHandle.for_iceberg(lake)

    @EXAMPLES
    @given(sql_predicate())
    def check(where: str) -> None:
        got, frame, snapshot = read(where, handle)
        expected = unpruned(lake.scan(snapshot_id=snapshot).to_arrow(), where)
        assert rows(got) == rows(expected), f"{where}: the DuckDB relation returns the unpruned rows"
        assert rows(frame) == rows(expected), f"{where}: the Polars LazyFrame returns the unpruned rows"
        assert got.schema.names == expected.schema.names, f"{where}: the current schema's columns, in order"

    check()


def test_files_proven_all_match_are_read_without_the_filter_and_rows_stay_exact(lake) -> None:
    handle = IndexHandle.for_iceberg(lake)
    for where in ["id >= 0", "id >= 0 AND id < 100", "g >= 0 OR id > 1000"]:
        result = handle.lookup(where)
        assert result.all_match, f"{where}: min/max proves some files all-match (the rule needs such files)"
        got, frame, snapshot = read(where, handle)
        expected = unpruned(lake.scan(snapshot_id=snapshot).to_arrow(), where)
        assert rows(got) == rows(expected) and rows(frame) == rows(expected), f"{where}: all-match files, exact"


def test_an_empty_kept_list_is_an_empty_relation_with_the_tables_columns(lake) -> None:
    handle = IndexHandle.for_iceberg(lake)
    assert handle.lookup("id = 100000").files == [], "no file can hold id 100000"
    empty = handle.scan("id = 100000").to_duckdb()
    some = handle.scan("id = 20").to_duckdb()
    assert empty.to_arrow_table().num_rows == 0, "no rows, no failure"
    assert (empty.columns, empty.types) == (some.columns, some.types), "the table's columns and types"
    assert (
        handle.scan("id = 100000").to_polars().collect().schema == handle.scan("id = 20").to_polars().collect().schema
    )


def test_the_relation_stays_at_the_snapshot_its_lookup_answered_for(lake) -> None:
    rel = scan(lake, "id >= 100 AND id < 500").to_duckdb()
    pinned = IndexHandle.for_iceberg(lake).lookup("id >= 0").source_version
    later = batch(200, 40, 1).rename_columns(["id", "g", "k", "f", "name"])
    lake.append(later.cast(lake.schema().as_arrow()))
    lake.delete("id < 150")
    expected = unpruned(lake.scan(snapshot_id=pinned).to_arrow(), "id >= 100 AND id < 500")
    assert rows(rel.to_arrow_table()) == rows(expected), "the rows of the answered snapshot, not of later ones"


def test_equality_deletes_on_a_double_match_as_icebergs_readers_match_them(config, catalog) -> None:
    """NULL = NULL and NaN = NaN, but -0.0 is not 0.0 (Java's Double.compare, which Iceberg's readers use; DuckDB's
    `=` holds 0.0 = -0.0, so deletes comparing a FLOAT or DOUBLE column are applied after pyiceberg's read)."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("x", pa.float64())])
    table = catalog.create_table("db.doubles", schema=schema)
    xs = [0.0, -0.0, float("nan"), 1.5, None, 0.0]
    table.append(pa.table({"id": pa.array(range(len(xs)), pa.int64()), "x": pa.array(xs, pa.float64())}, schema))
    field = pa.field("x", pa.float64(), metadata={b"PARQUET:field_id": b"2"})  # as Iceberg's writers write it
    deleted = pa.table([pa.array([0.0, float("nan"), None], pa.float64())], schema=pa.schema([field]))
    commit_equality_deletes(table, deleted, [2])
    build_index(config, "db.doubles")
    handle = IndexHandle.for_iceberg(catalog.load_table("db.doubles"))
    for output, got in {
        "duckdb": handle.scan("id >= 0").to_duckdb().to_arrow_table(),
        "arrow": handle.scan("id >= 0").to_arrow(),
    }.items():
        assert sorted(got.column("id").to_pylist()) == [1, 3], f"{output}: -0.0 and 1.5 stay, 0.0, NaN, NULL go"


def test_equality_delete_files_are_applied(lake) -> None:
    before = unpruned(lake.scan().to_arrow(), "id >= 100 AND id < 110")
    commit_equality_delete(lake, 105)
    expected = before.filter(pc.not_equal(before.column("id"), 105))
    assert expected.num_rows < before.num_rows, "the rule needs rows of the deleted key"
    assert rows(scan(lake, "id >= 100 AND id < 110").to_duckdb().to_arrow_table()) == rows(expected), (
        "every row whose id equals the delete's is dropped, only those"
    )


def test_files_imported_without_field_ids_are_read_by_duckdb_itself_through_the_name_mapping(
    config, catalog, monkeypatch
) -> None:
    """The imported lake's files map one to one through the name mapping: DuckDB reads them all (no file goes
    through pyiceberg's reader), old files under the column's old name, and the rows stay exact."""
    table = make_lake(config, catalog, imported=True)

    def through_pyiceberg(*args: Any) -> None:
        raise AssertionError("a file went through pyiceberg though the name mapping maps it one to one")

    monkeypatch.setattr(duckdb_scan, "_through_pyiceberg", through_pyiceberg)
    for where in ["name = 'ab' OR id >= 0", "name = 'ab'", "k > 100 OR f = 1.25"]:
        expected = unpruned(table.scan().to_arrow(), where)
        assert rows(scan(table, where).to_duckdb().to_arrow_table()) == rows(expected), f"{where}: the unpruned rows"


@pytest.mark.parametrize(
    "dialect, where",
    [("spark", "`name` = 'ab' OR `k` <=> NULL"), ("duckdb", "name ILIKE 'A%' OR k IS NULL"), (None, "\"name\" = 'b'")],
)
def test_the_where_is_read_in_the_lookup_dialect(lake, dialect, where) -> None:
    handle = IndexHandle.for_iceberg(lake, dialect=dialect)
    got = handle.scan(where).to_duckdb().to_arrow_table()
    expected = unpruned(lake.scan().to_arrow(), sqlglot.transpile(where, read=dialect, write="duckdb")[0])
    assert rows(got) == rows(expected) and expected.num_rows > 0, f"{dialect}: {where} as the lookup read it"


# Delta ------------------------------------------------------------------------------------------------------------

DAYS = [dt.date(2024, 1, 1), dt.date(2024, 1, 2), None]
PARTS = ["a", "b c", None]
ODD = "x+%é y"  # a partition value spelt differently as a path, a URI and a Spark file path


def delta_batch(start: int, rows_: int, extra: bool = False) -> pa.Table:
    ids = list(range(start, start + rows_))
    columns = {
        "id": pa.array(ids, pa.int64()),
        "s": pa.array([WORDS[i % len(WORDS)] for i in ids], pa.string()),
        "p": pa.array([PARTS[i % 3] for i in ids], pa.string()),
        "d": pa.array([DAYS[(i // 3) % 3] for i in ids], pa.date32()),
    }
    if extra:
        columns["x"] = pa.array([None if i % 4 == 0 else i * 0.5 for i in ids], pa.float64())
    return pa.table(columns)


@pytest.fixture
def delta(config, catalog, tmp_path: Path) -> str:
    """A Delta table partitioned by p and d with NULL partitions, a delete (files rewritten) and a column added
    later; indexed at its last version."""
    path = str(tmp_path / "events")
    for n in range(3):
        write_deltalake(path, delta_batch(100 * n, 30), mode="append", partition_by=["p", "d"])
    DeltaTable(path).delete("id % 5 = 1")
    write_deltalake(path, delta_batch(300, 30, extra=True), mode="append", partition_by=["p", "d"], schema_mode="merge")
    build_index(config, path)
    return path


@st.composite
def delta_predicate(draw: Any) -> str:
    def leaf() -> str:
        return draw(
            st.sampled_from(
                [
                    f"id {draw(st.sampled_from(['=', '<', '>=', '!=']))} {draw(st.integers(-5, 335))}",
                    f"p = '{draw(st.sampled_from(['a', 'b c', 'z', ODD]))}'",
                    "p IS NULL",
                    f"d = DATE '2024-01-0{draw(st.integers(1, 3))}'",
                    "d IS NULL",
                    f"x > {draw(st.integers(0, 170))}",
                    "x IS NULL",
                    "s LIKE '%b%'",
                    f"s IN ('a', '{draw(st.sampled_from(['ab', 'zz', '']))}')",
                ]
            )
        )

    text = leaf()
    for _ in range(draw(st.integers(0, 2))):
        text = f"({text}) {draw(st.sampled_from(['AND', 'OR']))} ({leaf()})"
    return text


def test_delta_rows_are_the_unpruned_rows_with_typed_partition_values(config, delta) -> None:
    handle = open_handle(config, delta)

    @EXAMPLES
    @given(delta_predicate())
    def check(where: str) -> None:
        got, frame, version = read(where, handle)
        table = DeltaTable(delta, version=version).to_pyarrow_table()
        expected = unpruned(table, where)
        assert rows(got) == rows(expected), f"{where}: the DuckDB relation returns delta-rs's rows"
        assert rows(frame) == rows(expected), f"{where}: the Polars LazyFrame returns delta-rs's rows"

    check()
    types = dict(
        zip(*(handle.scan("id > 0").to_duckdb().columns, handle.scan("id > 0").to_duckdb().types), strict=True)
    )
    assert (str(types["p"]), str(types["d"])) == ("VARCHAR", "DATE"), "partition columns keep the table's types"


@pytest.fixture
def delta_vectors(config, catalog, tmp_path: Path) -> str:
    """A Delta table partitioned by p and d with deletion vectors as Spark's DELETE writes them
    (tests/delta_vectors.py), inline, in 'u' and in 'p' files: a vector deleting some rows, one deleting every row
    of its file, one replaced by a second (more rows deleted), one across the row groups of a file with five, a
    file with a vector then rewritten by delta-rs's delete (which applies the vector: rows gone stay gone), one on a
    file written after a column was added; indexed at its last version."""
    path = str(tmp_path / "vectors+dv")
    for n in range(3):
        write_deltalake(
            path,
            delta_batch(100 * n, 30),
            mode="append",
            partition_by=["p", "d"],
            configuration={"delta.enableDeletionVectors": "true"} if n == 0 else None,
        )
    groups = delta_batch(400, 40).set_column(2, "p", pa.array([ODD] * 40)).set_column(3, "d", pa.array([DAYS[1]] * 40))
    write_deltalake(
        path, groups, mode="append", partition_by=["p", "d"], writer_properties=WriterProperties(max_row_group_size=8)
    )
    adds = live_adds(path)
    by_first = {pq.ParquetFile(Path(path) / unquote(f)).read().column("id")[0].as_py(): f for f in adds}
    first = [by_first[i] for i in sorted(by_first)]
    big = by_first[400]
    assert pq.ParquetFile(Path(path) / unquote(big)).num_row_groups == 5, "the file of five row groups"
    commit_deletion_vectors(
        path, {first[0]: {0}, first[1]: set(range(json.loads(adds[first[1]]["stats"])["numRecords"]))}
    )
    commit_deletion_vectors(path, {first[0]: {2}, first[2]: {1}, big: {1, 9, 17, 30, 39}}, storage="u")
    commit_deletion_vectors(path, {first[3]: {0, 1}, first[4]: {1}}, storage="p")
    rewritten = pq.ParquetFile(Path(path) / unquote(first[4])).read().column("id")[0].as_py()
    DeltaTable(path).delete(f"id = {rewritten}")  # rewrites first[4] without its rows 0 (deleted now) and 1 (vector)
    write_deltalake(path, delta_batch(300, 30, extra=True), mode="append", partition_by=["p", "d"], schema_mode="merge")
    later = next(f for f in live_adds(path) if f not in adds)
    commit_deletion_vectors(path, {later: {0}})
    build_index(config, path)
    return path


def vector_rows(path: str) -> pa.Table:
    """The brute-force rows (tests/delta_vectors.py), checked once against delta-rs's own reader of vectors."""
    schema = pa.schema(DeltaTable(path).schema().to_arrow())
    brute = brute_force(path, schema, {"p": str, "d": day})
    own = pa.table(DeltaTable(path).scan().read_all())
    assert rows(own.cast(schema)) == rows(brute), "delta-rs's own scan drops the rows the test deleted"
    return brute


def test_delta_deletion_vectors_are_applied_in_every_storage_type(config, delta_vectors) -> None:
    handle = open_handle(config, delta_vectors)
    table = vector_rows(delta_vectors)
    kept = handle.lookup("id >= 0").kept_files
    vectors = [d for k in kept for d in k.deletes]
    assert len(vectors) >= 6 and all(d.kind == "deletion_vector" for d in vectors), "kept files carry their vectors"
    assert any(k.all_match and k.deletes for k in kept), "a file with a vector proven all-match (read unfiltered)"
    assert any(d.record_count == k.file.record_count for k in kept for d in k.deletes), "a vector deleting every row"

    @EXAMPLES
    @given(delta_predicate())
    def check(where: str) -> None:
        got, frame, _ = read(where, handle)
        expected = unpruned(table, where)
        assert rows(got) == rows(expected), f"{where}: the DuckDB relation drops every deleted row, and only those"
        assert rows(frame) == rows(expected), f"{where}: the Polars LazyFrame drops every deleted row"

    check()
    for where in ["id >= 0", f"p = '{ODD}'", "id = 409", "id = 410", "x IS NULL OR x >= 0"]:
        got, frame, _ = read(where, handle)
        assert rows(got) == rows(frame) == rows(unpruned(table, where)), f"{where}: the unpruned rows"


def test_only_the_kept_files_vectors_are_read_and_none_without_the_feature(config, delta_vectors, delta) -> None:
    handle = open_handle(config, delta_vectors)
    result = handle.lookup(f"p = '{ODD}'")
    assert [len(k.deletes) for k in result.kept_files] == [1], "the one kept file and its vector alone"
    assert result.kept_files[0].deletes[0].positions.tolist() == [1, 9, 17, 30, 39], "the positions it deletes"
    assert all(not k.deletes for k in open_handle(config, delta).lookup("id >= 0").kept_files), "no vectors: none"


def test_a_delta_rs_that_does_not_return_the_vectors_fails_the_lookup_in_one_line_not_hangs(
    config, delta_vectors, monkeypatch
) -> None:
    """delta-rs 1.6.6 was seen hanging in `deletion_vectors()`; a lookup gives up after VECTORS_TIMEOUT_S (here a
    delta-rs slowed down past it: the real call, after a sleep)."""
    real = DeltaTable.deletion_vectors

    def slow(self: DeltaTable) -> Any:
        time.sleep(1.0)
        return real(self)

    monkeypatch.setattr(DeltaTable, "deletion_vectors", slow)
    monkeypatch.setattr(delta_source, "VECTORS_TIMEOUT_S", 0.2)
    with pytest.raises(UserError, match="did not return the table's deletion vectors within 0.2 s") as raised:
        _ = open_handle(config, delta_vectors).lookup("id >= 0").kept_files
    assert "\n" not in str(raised.value), "one line"
    monkeypatch.setattr(delta_source, "VECTORS_TIMEOUT_S", 30.0)
    assert open_handle(config, delta_vectors).lookup("id >= 0").kept_files, "in time, the vectors are read"


def test_the_frame_applies_what_polars_pushes_down_and_the_relation_joins_the_callers_tables(lake) -> None:
    handle = IndexHandle.for_iceberg(lake)
    where = "k IS NULL OR name LIKE '%b%'"
    expected = pl.from_arrow(unpruned(lake.scan().to_arrow(), where))
    frame = handle.scan(where).to_polars()
    pushed = frame.filter(pl.col("id") > 120).select("name", "id").collect()
    assert rows(pushed.to_arrow()) == rows(expected.filter(pl.col("id") > 120).select("name", "id").to_arrow()), (
        "a filter and a projection Polars pushes into the source keep the rows"
    )
    assert frame.filter(pl.col("id") > 120).head(3).collect().height == 3, "a row limit after a pushed filter"
    con = duckdb.connect()
    con.sql("CREATE TABLE wanted AS SELECT * FROM range(100, 200) r(id)")
    joined = handle.scan(where).to_duckdb(con).join(con.table("wanted"), "id").to_arrow_table()
    assert joined.num_rows == expected.filter(pl.col("id").is_between(100, 199)).height > 0, (
        "the relation lives in the caller's connection"
    )


def test_current_date_means_the_instant_the_lookup_pruned_with(config, delta) -> None:
    handle = open_handle(config, delta)
    clock = Clock(now=dt.datetime(2024, 1, 2, 12, tzinfo=dt.UTC), time_zone=dt.UTC)
    where = "(d = CURRENT_DATE OR d > CURRENT_TIMESTAMP) AND id % 2 = 0"  # id % 2: no file is all-match
    got = relation_of(handle.lookup(where, clock), clock=clock).to_arrow_table()
    expected = unpruned(DeltaTable(delta).to_pyarrow_table(), "d = DATE '2024-01-02' AND id % 2 = 0")
    assert rows(got) == rows(expected) and expected.num_rows > 0, "CURRENT_DATE is the lookup clock's date"


def test_an_iceberg_file_that_leaves_out_its_identity_partition_column_reads_it_from_the_partition(
    config, catalog, tmp_path: Path
) -> None:
    """Iceberg lets a writer leave identity-partition columns out of its data files (the partition holds their
    value); a native read would give NULL there, so such a file is read as pyiceberg reads it."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.typedef import Record
    from pyiceberg.types import IntegerType, LongType, NestedField

    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "g", IntegerType()))
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "g"))
    table = catalog.create_table("db.sparse", schema=schema, partition_spec=spec)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "g": pa.array([3, 3], pa.int32())}))
    path = str(tmp_path / "without_g.parquet")
    stored = pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])
    pq.write_table(pa.table({"id": pa.array([5, 6], pa.int64())}, schema=stored), path)
    data_file = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=f"file://{path}",
        file_format=FileFormat.PARQUET,
        partition=Record(7),
        record_count=2,
        file_size_in_bytes=Path(path).stat().st_size,
    )
    data_file.spec_id = spec.spec_id
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(data_file)
    build_index(config, "db.sparse")
    handle = open_handle(config, "db.sparse")
    full = catalog.load_table("db.sparse").scan().to_arrow()
    assert sorted(full.column("g").to_pylist()) == [3, 3, 7, 7], "pyiceberg fills g from the partition"
    for where in ("g = 7", "g = 3", "id > 4", "g IS NULL"):
        got = handle.scan(where).to_duckdb().to_arrow_table()
        assert rows(got) == rows(unpruned(full, where)), f"{where!r}: the partition's value, not NULL"
