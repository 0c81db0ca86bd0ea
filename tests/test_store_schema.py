"""The index-table layout is declared once (an Iceberg schema); the Arrow layout Spark tasks and commits use is derived
from it and must be one Spark's Arrow bridge accepts and the Iceberg table stores unchanged."""

from __future__ import annotations

import pyarrow as pa

from indexlib.statistics.column_stats import ColumnStats
from indexlib.store.schema import ENTRY_ARROW_SCHEMA, INDEX_SCHEMA, entry_row
from indexlib.store.table import IndexTable


def _types(arrow_type: pa.DataType):
    yield arrow_type
    for i in range(arrow_type.num_fields):
        yield from _types(arrow_type.field(i).type)


def test_the_arrow_layout_uses_no_large_types_which_spark_rejects():
    large = [t for f in ENTRY_ARROW_SCHEMA for t in _types(f.type) if "large" in str(t)]
    large += [f.type for f in ENTRY_ARROW_SCHEMA if "large" in str(f.type)]
    assert not large, f"Spark's Arrow bridge rejects {large}"


def test_the_arrow_layout_has_the_iceberg_schemas_fields_and_nullability():
    def shape(arrow_type: pa.DataType):
        if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
            return ("list", shape(arrow_type.value_type))
        if pa.types.is_struct(arrow_type):
            return tuple((f.name, f.nullable, shape(f.type)) for f in arrow_type)
        return None

    iceberg = INDEX_SCHEMA.as_arrow()
    assert [(f.name, f.nullable) for f in ENTRY_ARROW_SCHEMA] == [(f.name, f.nullable) for f in iceberg]
    for mine, theirs in zip(ENTRY_ARROW_SCHEMA, iceberg, strict=True):
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
