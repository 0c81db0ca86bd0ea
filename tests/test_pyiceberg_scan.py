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

import json
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from iceberg_tables import COLUMNS, WORDS, batch, commit_equality_delete, make_lake, predicate, rows
from pyiceberg import expressions as ice

from indexlib.handle import IndexHandle, scan
from indexlib.indexing.build import build_index
from indexlib.query.from_iceberg import from_iceberg
from indexlib.service.filters import RequestFilter


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


def test_equality_delete_files_are_applied_where_pyiceberg_refuses_them(lake) -> None:
    before = lake.scan(row_filter="id >= 100 AND id < 110").to_arrow()
    commit_equality_delete(lake, 105)
    with pytest.raises(ValueError, match="equality deletes"):
        lake.scan(row_filter="id = 105").to_arrow()  # pyiceberg itself cannot apply them
    assert 105 in before.column("id").to_pylist(), "the rule needs rows of the deleted key"
    expected = before.filter(pc.not_equal(before.column("id"), 105))
    got = scan(lake, "id >= 100 AND id < 110")
    assert rows(got.to_arrow()) == rows(expected), "every row whose id equals the delete's is dropped, only those"
    assert got.count() == expected.num_rows, "count() reads the files an equality delete applies to"
    assert rows(scan(lake, "id = 105").to_arrow_batch_reader().read_all()) == Counter(), "the batch stream too"


@st.composite
def iceberg_filter(draw: Any) -> ice.BooleanExpression:
    """A pyiceberg row filter as a user writes one for `table.scan(row_filter=...)`, with pyiceberg's own
    semantics: NOT, `!=`, NOT IN (which keeps NULLs in pyiceberg), prefixes, NaN tests, constants."""
    kind = draw(st.sampled_from(["compare", "in", "null", "prefix", "nan", "const", "not", "and", "or"]))
    column = draw(st.sampled_from(sorted(COLUMNS)))
    if kind == "compare":
        op = draw(st.sampled_from([ice.EqualTo, ice.NotEqualTo, ice.LessThan, ice.GreaterThanOrEqual]))
        return op(column, draw(COLUMNS[column]))
    if kind == "in":
        values = draw(st.lists(COLUMNS[column], min_size=1, max_size=4))
        return (ice.In if draw(st.booleans()) else ice.NotIn)(column, values)
    if kind == "null":
        return (ice.IsNull if draw(st.booleans()) else ice.NotNull)(column)
    if kind == "prefix":
        prefix = draw(st.sampled_from([w for w in WORDS if w is not None]))
        return (ice.StartsWith if draw(st.booleans()) else ice.NotStartsWith)("name", prefix)
    if kind == "nan":
        return (ice.IsNaN if draw(st.booleans()) else ice.NotNaN)("f")
    if kind == "const":
        return draw(st.sampled_from([ice.AlwaysTrue(), ice.AlwaysFalse()]))
    if kind == "not":
        return ice.Not(draw(iceberg_filter()))
    return (ice.And if kind == "and" else ice.Or)(draw(iceberg_filter()), draw(iceberg_filter()))


def test_a_pyiceberg_row_filter_returns_the_rows_of_pyicebergs_own_scan(lake) -> None:
    """Given pyiceberg's own filter, the scan returns `table.scan(row_filter=...)`'s rows: the lookup prunes with a
    predicate TRUE for at least those rows (query/from_iceberg.py), pyiceberg filters them."""
    handle = IndexHandle.for_iceberg(lake)

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(iceberg_filter())
    def check(row_filter: ice.BooleanExpression) -> None:
        indexed = scan(handle, row_filter)
        expected = lake.scan(row_filter=row_filter, snapshot_id=indexed.snapshot_id).to_arrow()
        assert rows(indexed.to_arrow()) == rows(expected), f"{row_filter}: the rows of pyiceberg's own read"
        assert not indexed.result.all_match, f"{row_filter}: no file is proven all-match for pyiceberg's filter"

    check()


def test_the_services_filter_bound_once_prunes_as_bound_by_the_lookup(lake) -> None:
    """The planning service binds its filter's leaves once (filters.Pruning.bound) and the lookup takes that tree as
    it is: the same predicate, so the same files, as the lookup binding the unbound filter itself."""
    handle = IndexHandle.for_iceberg(lake)
    schema = handle.current().source.schema

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(iceberg_filter())
    def check(row_filter: ice.BooleanExpression) -> None:
        raw = json.loads(row_filter.model_dump_json(serialize_as_any=True))
        pruning = RequestFilter.parse(raw).pruning(schema, schema, case_sensitive=True)
        assert pruning.bound is not None, f"{row_filter}: every leaf was bound in the current schema"
        assert str(from_iceberg(pruning.bound, schema)) == str(from_iceberg(pruning.expression, schema)), row_filter
        state = handle.current()
        kept = handle.lookup(pruning.bound, state=state).kept_positions
        assert kept == handle.lookup(pruning.expression, state=state).kept_positions, row_filter

    check()


def test_a_pyiceberg_row_filter_prunes_as_its_sql_does(lake) -> None:
    handle = IndexHandle.for_iceberg(lake)
    cases = [
        (ice.EqualTo("id", 20), "id = 20"),
        (ice.And(ice.GreaterThanOrEqual("id", 100), ice.LessThan("id", 120)), "id >= 100 AND id < 120"),
        (ice.In("id", [20, 300]), "id IN (20, 300)"),
        (ice.StartsWith("name", "zz"), "name LIKE 'zz%'"),
    ]
    for row_filter, where in cases:
        assert handle.lookup(row_filter).files == handle.lookup(where).files, f"{row_filter}: pruned as {where}"
    assert len(handle.lookup(ice.EqualTo("id", 20)).files) < handle.lookup("id >= 0").files_total, "it prunes"


@pytest.mark.parametrize(
    "row_filter",
    [
        ice.NotIn("k", [1]),
        ice.NotEqualTo("k", 1),
        ice.Not(ice.In("k", [1, 2])),
        ice.Not(ice.EqualTo("k", 1)),
        ice.NotStartsWith("name", "a"),
        ice.NotNaN("f"),
        ice.Or(ice.NotIn("k", [1]), ice.EqualTo("id", -1)),
    ],
    ids=str,
)
def test_a_file_of_only_nulls_is_kept_where_pyicebergs_negative_filter_keeps_null_rows(
    config, lake, row_filter
) -> None:
    """pyiceberg's NOT IN keeps NULL rows (`~isin`); a file whose column is all NULL must not be pruned for it."""
    nulls = pa.table(
        {
            "id": pa.array(range(900, 905), pa.int64()),
            "g": pa.array([1] * 5, pa.int32()),
            "k": pa.nulls(5, pa.int64()),
            "f": pa.nulls(5, pa.float64()),
            "name": pa.nulls(5, pa.string()),
        }
    )
    lake.append(nulls)
    build_index(config, "db.t")
    indexed = scan(lake, row_filter)
    expected = lake.scan(row_filter=row_filter, snapshot_id=indexed.snapshot_id).to_arrow()
    assert rows(indexed.to_arrow()) == rows(expected), f"{row_filter}: pyiceberg's rows, the all-NULL file's included"
