"""The pyiceberg scan through the index (indexlib/scans/pyiceberg.py) returns exactly the rows of pyiceberg's own
unpruned read at the same snapshot (multiset, NULLs included), for hypothesis-drawn predicates, on one real table
that went through every kind of change a reader must honour: copy-on-write deletes (pyiceberg's `table.delete`),
merge-on-read position delete files (file-scoped and partition-scoped, written as Spark writes them, with
pyiceberg's own Parquet and manifest writers), a partition spec change, a renamed column and promoted columns
(int -> long, float -> double): the table of tests/iceberg_tables.py. Equality delete files, which pyiceberg cannot
apply, are refused, never read.

Real SQLite catalog, real Parquet files, the index built by the real build (in the driver: the table is small).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from iceberg_tables import batch, commit_equality_delete, make_lake, predicate, rows
from pyiceberg import expressions as ice

from indexlib.errors import UserError
from indexlib.handle import IndexHandle
from indexlib.scans.pyiceberg import scan


def small_types(schema: pa.Schema) -> pa.Schema:
    """`schema` with pyiceberg's large string and binary types as the plain ones the scan always returns (pyiceberg's
    own read returns the large ones when any batch it read had them, so its types depend on the rows filtered)."""
    plain = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
    return pa.schema([field.with_type(plain.get(field.type, field.type)) for field in schema])


@pytest.fixture
def lake(config, catalog) -> Any:
    return make_lake(config, catalog)


def test_the_scan_returns_the_unpruned_rows_under_every_kind_of_change(lake) -> None:
    handle = IndexHandle.for_iceberg(lake)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(predicate())
    def check(drawn: tuple[str, ice.BooleanExpression]) -> None:
        where, row_filter = drawn
        indexed = scan(handle, where)
        expected = lake.scan(row_filter=row_filter, snapshot_id=indexed.snapshot_id).to_arrow()
        got = indexed.to_arrow()
        assert rows(got) == rows(expected), f"{where}: the rows of pyiceberg's own read at that snapshot"
        assert got.schema == small_types(expected.schema), f"{where}: pyiceberg's schema (renamed, promoted columns)"
        assert indexed.count() == expected.num_rows, f"{where}: count() counts those rows"
        streamed = indexed.to_arrow_batch_reader().read_all()
        assert rows(streamed) == rows(expected), f"{where}: the batch reader returns the same rows"

    check()


def test_kept_files_carry_their_delete_files_and_the_snapshot(lake) -> None:
    result = IndexHandle.for_iceberg(lake).lookup("id >= 0")
    kept = result.kept_files
    with_deletes = [k for k in kept if k.deletes]
    assert result.source_version == lake.current_snapshot().snapshot_id, "the answer names its snapshot"
    planned = {t.file.file_path: {d.file_path for d in t.delete_files} for t in lake.scan().plan_files()}
    assert {k.file.path: {d.path for d in k.deletes} for k in kept} == planned, (
        "each kept file has exactly the delete files pyiceberg's planning attaches"
    )
    assert len(with_deletes) >= 3 and all(d.kind == "position" for k in with_deletes for d in k.deletes), (
        "the three files deleted from (and those sharing a partition-scoped delete file) have position deletes"
    )


def test_a_scan_stays_at_the_snapshot_its_lookup_answered_for(lake) -> None:
    indexed = scan(lake, "id >= 100 AND id < 500")
    pinned = indexed.snapshot_id
    later = batch(200, 40, 1).rename_columns(["id", "g", "k", "f", "name"])
    lake.append(later.cast(lake.schema().as_arrow()))
    lake.delete(ice.LessThan("id", 150))
    expected = lake.scan(row_filter="id >= 100 AND id < 500", snapshot_id=pinned).to_arrow()
    assert lake.current_snapshot().snapshot_id != pinned
    assert rows(indexed.to_arrow()) == rows(expected), (
        "the rows of the snapshot the lookup answered for, not of later ones"
    )


def test_equality_delete_files_are_refused_never_read(lake) -> None:
    commit_equality_delete(lake, 105)
    with pytest.raises(ValueError, match="equality deletes"):
        lake.scan(row_filter="id = 105").to_arrow()  # pyiceberg itself cannot apply them
    with pytest.raises(UserError, match="equality delete file"):
        scan(lake, "id = 105").to_arrow()
