"""Iceberg tables with every change a reader must honour, shared by the scan tests (tests/test_pyiceberg_scan.py,
tests/test_duckdb_scan.py): merge-on-read position delete files written as Spark writes them with pyiceberg's own
Parquet and manifest writers, copy-on-write deletes, partition evolution, renamed and promoted columns; and the
hypothesis-drawn predicates the scans are checked with (SQL text and the pyiceberg row filter a user would write)."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st
from pyiceberg import expressions as ice
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
    write_manifest_list,
)
from pyiceberg.schema import Schema
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.typedef import Record
from pyiceberg.types import DoubleType, FloatType, IntegerType, LongType, NestedField, StringType

from indexlib.indexing.build import build_index

PATH_ID, POS_ID = 2147483546, 2147483545
SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "g", IntegerType()),
    NestedField(3, "k", IntegerType()),
    NestedField(4, "f", FloatType()),
    NestedField(5, "s", StringType()),
)
FLOATS = [None, -1.5, 0.0, 0.5, 1.25, 3.0]
WORDS = [None, "", "a", "ab", "b", "zz"]


def batch(start: int, rows: int, g: int) -> pa.Table:
    ids = range(start, start + rows)
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "g": pa.array(
                [g] * rows, pa.int32()
            ),  # never NULL: pyiceberg's own residual evaluator fails on a NULL partition
            "k": pa.array([None if i % 5 == 0 else i % 11 for i in ids], pa.int32()),
            "f": pa.array([FLOATS[i % len(FLOATS)] for i in ids], pa.float32()),
            "s": pa.array([WORDS[i % len(WORDS)] for i in ids], pa.string()),
        }
    )


class DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg's v2 manifest writer, writing a delete manifest (as Spark's merge-on-read commits do)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def commit_delete_files(table: Any, delete_files: list[DataFile]) -> None:
    """A snapshot adding `delete_files` (one delete manifest per spec) to the current one, as Spark commits a
    merge-on-read DELETE."""
    metadata, io = table.metadata, table.io
    parent = table.current_snapshot()
    snapshot_id = uuid.uuid4().int & ((1 << 63) - 1)
    manifests = list(parent.manifests(io))
    for spec_id in sorted({d.spec_id for d in delete_files}):
        path = f"{metadata.location}/metadata/{uuid.uuid4()}-deletes.avro"
        writer = DeleteManifestWriter(
            metadata.specs()[spec_id], metadata.schema(), io.new_output(path), snapshot_id, "null"
        )
        with writer:
            for d in (d for d in delete_files if d.spec_id == spec_id):
                writer.add_entry(
                    ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=d)
                )
        manifests.append(writer.to_manifest_file())
    sequence_number = metadata.next_sequence_number()
    list_path = f"{metadata.location}/metadata/snap-{snapshot_id}-{uuid.uuid4()}.avro"
    with write_manifest_list(
        2, io.new_output(list_path), snapshot_id, parent.snapshot_id, sequence_number, "null"
    ) as w:
        w.add_manifests(manifests)
    before = int(parent.summary.get("total-delete-files", "0"))
    summary = Summary(
        Operation.DELETE,
        **{"added-delete-files": str(len(delete_files)), "total-delete-files": str(before + len(delete_files))},
    )
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id,
        manifest_list=list_path,
        sequence_number=sequence_number,
        summary=summary,
        schema_id=metadata.current_schema_id,
    )
    with table.transaction() as tx:
        tx._apply(
            (
                AddSnapshotUpdate(snapshot=snapshot),
                SetSnapshotRefUpdate(
                    snapshot_id=snapshot_id,
                    parent_snapshot_id=parent.snapshot_id,
                    ref_name="main",
                    type=SnapshotRefType.BRANCH,
                ),
            ),
            (AssertRefSnapshotId(snapshot_id=parent.snapshot_id, ref="main"),),
        )


def position_delete_file(table: Any, data_file: DataFile, positions: list[int], file_scoped: bool) -> DataFile:
    """A position delete file as Spark writes it: (file_path, pos) with Iceberg's reserved field ids; file-scoped
    ones carry the path as both bounds, partition-scoped ones (older Spark) none."""
    path = f"{table.metadata.location}/data/{uuid.uuid4()}-deletes.parquet"
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": str(PATH_ID).encode()}),
            pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": str(POS_ID).encode()}),
        ]
    )
    pq.write_table(pa.table({"file_path": [data_file.file_path] * len(positions), "pos": positions}, schema), path)
    bounds = {PATH_ID: data_file.file_path.encode()} if file_scoped else None
    delete = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=data_file.partition,
        record_count=len(positions),
        file_size_in_bytes=table.io.new_input(path).__len__(),
        lower_bounds=bounds,
        upper_bounds=bounds,
    )
    delete.spec_id = data_file.spec_id
    return delete


def make_lake(config: Any, catalog: Any, imported: bool = False, row_group_rows: int | None = None) -> Any:
    """db.t through its whole history: copy-on-write deletes, a partition spec change, a renamed column, promoted
    columns, merge-on-read position delete files (file- and partition-scoped); returns the table at its last
    snapshot, indexed there. `imported`: the batches before the last are Parquet files without field ids
    registered with `add_files` (the table gets a name mapping; the rename adds the new name to it), as a table
    migrated from Hive is; the last batch and the copy-on-write rewrite are written by pyiceberg, with field ids.
    `row_group_rows`: every file written in Parquet row groups of at most that many rows (default: one each)."""
    limit = {"write.parquet.row-group-limit": str(row_group_rows)} if row_group_rows else {}
    table = catalog.create_table("db.t", SCHEMA, properties={"format-version": "2", **limit})

    def add(data: pa.Table) -> None:
        if not imported:
            table.append(data)
            return
        path = f"{table.metadata.location}/data/imported-{uuid.uuid4()}.parquet"
        with table.io.new_output(path).create() as out:
            pq.write_table(data, out, row_group_size=row_group_rows)  # pyarrow writes no field ids
        table.add_files([path])

    for n in range(3):
        add(batch(100 * n, 40, n % 2))
    table.delete(ice.LessThan("id", 10))  # copy-on-write: rewrites the first file
    with table.update_spec() as spec:
        spec.add_identity("g")  # partition evolution: the files after this are split by g
    for n in range(3, 5):
        add(batch(100 * n, 40, n % 3))
    with table.update_schema() as update:
        update.rename_column("s", "name")
        update.update_column("k", LongType())
        update.update_column("f", DoubleType())
    add(
        pa.table(
            {
                "id": pa.array(range(450, 470), pa.int64()),
                "g": pa.array([1] * 20, pa.int32()),
                "k": pa.array([None if i % 3 else 2**40 + i for i in range(20)], pa.int64()),
                "f": pa.array([FLOATS[i % len(FLOATS)] for i in range(20)], pa.float64()),
                "name": pa.array([WORDS[(i + 1) % len(WORDS)] for i in range(20)], pa.string()),
            }
        )
    )
    table.append(
        pa.table(
            {
                "id": pa.array(range(500, 530), pa.int64()),
                "g": pa.array([i % 2 for i in range(30)], pa.int32()),
                "k": pa.array([10**10 + i for i in range(30)], pa.int64()),
                "f": pa.array([FLOATS[i % len(FLOATS)] for i in range(30)], pa.float64()),
                "name": pa.array([WORDS[i % len(WORDS)] for i in range(30)], pa.string()),
            }
        )
    )
    files = sorted((t.file for t in table.scan().plan_files()), key=lambda f: f.file_path)
    unpartitioned = [f for f in files if f.spec_id == 0]
    partitioned = [f for f in files if f.spec_id == 1 and f.partition[0] is not None]
    commit_delete_files(
        table,
        [
            position_delete_file(table, unpartitioned[0], [0, 3, 4, 20], file_scoped=True),
            position_delete_file(table, partitioned[0], [1, 2], file_scoped=False),
            position_delete_file(table, partitioned[-1], [0], file_scoped=True),
        ],
    )
    build_index(config, "db.t")
    table = catalog.load_table("db.t")
    assert int(table.current_snapshot().summary["total-delete-files"]) == 3, "the table has merge-on-read deletes"
    return table


def commit_equality_delete(table: Any, id_value: int) -> None:
    """An equality delete file (id = `id_value`) in a snapshot of its own, as Flink or Spark would commit one (its
    Parquet file without field ids: read by the column's current name)."""
    commit_equality_deletes(table, pa.table({"id": pa.array([id_value], pa.int64())}), [1])


def commit_equality_deletes(table: Any, rows: pa.Table, equality_ids: list[int]) -> None:
    """One equality delete file of `rows` (the compared columns, in `equality_ids` order; give them Parquet field
    ids in their metadata, as Iceberg's writers do, or not) committed in a snapshot of its own, unpartitioned."""
    path = f"{table.metadata.location}/data/{uuid.uuid4()}-eq-deletes.parquet"
    pq.write_table(rows, path)
    delete = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=rows.num_rows,
        file_size_in_bytes=table.io.new_input(path).__len__(),
        equality_ids=equality_ids,
    )
    delete.spec_id = 0
    commit_delete_files(table, [delete])


def rows(table: pa.Table) -> Counter:
    return Counter(tuple(row.items()) for row in table.to_pylist())


COLUMNS = {
    "id": st.integers(-5, 540),
    "g": st.integers(-1, 3),
    "k": st.integers(-1, 12),
    "f": st.sampled_from(FLOATS[1:]),
}
OPS = {
    "=": ice.EqualTo,
    "!=": ice.NotEqualTo,
    "<": ice.LessThan,
    "<=": ice.LessThanOrEqual,
    ">": ice.GreaterThan,
    ">=": ice.GreaterThanOrEqual,
}


@st.composite
def leaf(draw: Any) -> tuple[str, ice.BooleanExpression]:
    """One predicate leaf as SQL text and as the pyiceberg row filter a user would write (SQL's NULL semantics:
    NOT IN drops NULLs)."""
    kind = draw(st.sampled_from(["compare", "in", "not in", "null", "not null", "name"]))
    column = draw(st.sampled_from(sorted(COLUMNS)))
    if kind == "compare":
        op, value = draw(st.sampled_from(sorted(OPS))), draw(COLUMNS[column])
        return f"{column} {op} {value}", OPS[op](column, value)
    if kind in ("in", "not in"):
        values = sorted(set(draw(st.lists(COLUMNS[column], min_size=1, max_size=4))))
        text = f"{column} {kind.upper()} ({', '.join(map(str, values))})"
        return text, ice.In(column, values) if kind == "in" else ice.And(ice.NotNull(column), ice.NotIn(column, values))
    if kind == "name":
        word = draw(st.sampled_from([w for w in WORDS if w is not None]))
        return f"name = '{word}'", ice.EqualTo("name", word)
    return (
        (f"{column} IS NULL", ice.IsNull(column)) if kind == "null" else (f"{column} IS NOT NULL", ice.NotNull(column))
    )


@st.composite
def predicate(draw: Any) -> tuple[str, ice.BooleanExpression]:
    text, expr = draw(leaf())
    for _ in range(draw(st.integers(0, 2))):
        other_text, other = draw(leaf())
        if draw(st.booleans()):
            text, expr = f"({text}) AND ({other_text})", ice.And(expr, other)
        else:
            text, expr = f"({text}) OR ({other_text})", ice.Or(expr, other)
    return text, expr
