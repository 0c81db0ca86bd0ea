"""The index-table layouts are declared once (Iceberg schemas); the Arrow layouts Spark tasks and commits use are
derived from them and must be ones Spark's Arrow bridge accepts and the Iceberg table stores unchanged. Entries (one
row per file) and stored rows (one per file and column) are the same facts: each turns into the other unchanged."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexlib.statistics.column_stats import ColumnStats
from indexlib.store.schema import (
    ENTRY_ARROW_SCHEMA,
    ENTRY_SCHEMA,
    INDEX_SCHEMA,
    ROW_ARROW_SCHEMA,
    entries_of,
    entry_row,
    rows_of,
)
from indexlib.store.table import IndexTable

LAYOUTS = [(ENTRY_SCHEMA, ENTRY_ARROW_SCHEMA), (INDEX_SCHEMA, ROW_ARROW_SCHEMA)]


def _types(arrow_type: pa.DataType):
    yield arrow_type
    for i in range(arrow_type.num_fields):
        yield from _types(arrow_type.field(i).type)


@pytest.mark.parametrize("iceberg_schema, arrow_schema", LAYOUTS)
def test_the_arrow_layout_uses_no_large_types_which_spark_rejects(iceberg_schema, arrow_schema):
    large = [t for f in arrow_schema for t in _types(f.type) if "large" in str(t)]
    large += [f.type for f in arrow_schema if "large" in str(f.type)]
    assert not large, f"Spark's Arrow bridge rejects {large}"


@pytest.mark.parametrize("iceberg_schema, arrow_schema", LAYOUTS)
def test_the_arrow_layout_has_the_iceberg_schemas_fields_and_nullability(iceberg_schema, arrow_schema):
    def shape(arrow_type: pa.DataType):
        if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
            return ("list", shape(arrow_type.value_type))
        if pa.types.is_struct(arrow_type):
            return tuple((f.name, f.nullable, shape(f.type)) for f in arrow_type)
        return None

    iceberg = iceberg_schema.as_arrow()
    assert [(f.name, f.nullable) for f in arrow_schema] == [(f.name, f.nullable) for f in iceberg]
    for mine, theirs in zip(arrow_schema, iceberg, strict=True):
        assert shape(mine.type) == shape(theirs.type), f"{mine.name} differs from the Iceberg schema"


def test_an_entry_round_trips_through_a_real_index_table(catalog):
    stats = ColumnStats(1, "a", "long", 3, 1, None, b"\x01" + bytes(7), b"\x05" + bytes(7), 2, b"sketch")
    stats = ColumnStats(**{**stats.__dict__, "indexes": ({"kind": "bloom", "version": 1, "payload": b"p"},)})
    row = entry_row("s3://b/f.parquet", 10, 3, 7, [stats], "cfg")
    entries = pa.Table.from_pylist([row], schema=ENTRY_ARROW_SCHEMA)
    index = IndexTable(catalog, "skipindex", "db.t")
    index.load_or_create()
    index.commit(entries, watermark=7)
    stored = index.entries()
    assert stored.to_pylist() == [row], "what is committed is read back unchanged"
    table = index.reload()
    assert [f.name for f in table.spec().fields] == ["field_id"], "the index table is partitioned by column"
    files = table.inspect.files().num_rows
    assert files == 2, "a file row and one column: each in its own partition, so its own data file"


def _stats(field_id: int, payload: bytes | None) -> ColumnStats:
    stats = ColumnStats(field_id, f"c{field_id}", "long", 3, 1, None, b"\x01" + bytes(7), None, 2, None)
    indexes = ({"kind": "bloom", "version": 1, "payload": payload},) if payload is not None else ()
    return ColumnStats(**{**stats.__dict__, "indexes": indexes})


entries_strategy = st.dictionaries(
    st.text("abc/", min_size=1, max_size=6),
    st.tuples(
        st.booleans(),
        st.dictionaries(st.integers(1, 5), st.one_of(st.none(), st.binary(max_size=4)), max_size=4),
        st.one_of(st.none(), st.lists(st.one_of(st.none(), st.binary(max_size=3)), max_size=3)),
    ),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(entries_strategy)
def test_entries_and_stored_rows_turn_into_each_other_unchanged(files):
    rows = [
        entry_row(
            path,
            10,
            3,
            7,
            [_stats(fid, payload) for fid, payload in sorted(columns.items())] if indexed else [],
            "cfg" if indexed else None,
            indexed=indexed,
            spec_id=1,
            partition=partition,
        )
        for path, (indexed, columns, partition) in sorted(files.items())
    ]
    entries = pa.Table.from_pylist(rows, schema=ENTRY_ARROW_SCHEMA)
    stored = rows_of(entries)
    assert stored.num_rows == len(rows) + sum(len(r["columns"]) for r in rows), "one file row, one row per column"
    keys = list(zip(stored.column("field_id").to_pylist(), stored.column("file_path").to_pylist(), strict=True))
    assert keys == sorted(keys), "rows are sorted by (field_id, file_path), the index table's sort order"
    assert entries_of(stored).to_pylist() == rows, "entries come back from their rows unchanged"
