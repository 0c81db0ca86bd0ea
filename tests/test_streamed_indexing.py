"""A data file is indexed a batch at a time (indexing/file_indexer.py): what a task holds is a batch plus each
column's distinct values, and the entry is the one the whole column would give. Checked against statistics computed
over the whole column at once, on real Parquet files of several row groups read in batches of a few rows."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
)

from indexlib.index_kinds.registry import build_order
from indexlib.index_kinds.settings import IndexSettings
from indexlib.indexing.file_indexer import IndexTask, index_file
from indexlib.statistics.canonical import distinct_keys
from indexlib.statistics.column_stats import compute_column_stats

COLUMNS = [
    (NestedField(1, "n", LongType()), pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    (
        NestedField(2, "x", DoubleType()),
        pa.float64(),
        st.sampled_from([0.0, -0.0, 1.5, -2.25, float("nan"), float("inf"), float("-inf")]),
    ),
    (NestedField(3, "s", StringType()), pa.string(), st.text(alphabet="ab\u00e9\U0001f600 ", max_size=4)),
    (NestedField(4, "d", DateType()), pa.date32(), st.dates(dt.date(1900, 1, 1), dt.date(2100, 1, 1))),
    (
        NestedField(5, "m", DecimalType(9, 2)),
        pa.decimal128(9, 2),
        st.decimals(-9_999_999, 9_999_999, places=2, allow_nan=False).map(lambda d: Decimal(d)),
    ),
    (NestedField(6, "b", BooleanType()), pa.bool_(), st.booleans()),
]
SCHEMA = Schema(*(field for field, _, _ in COLUMNS))


@st.composite
def files(draw):
    rows = draw(st.integers(0, 60))
    data = {}
    for field, arrow_type, values in COLUMNS:
        column = draw(st.lists(st.one_of(st.none(), values), min_size=rows, max_size=rows))
        data[field.name] = pa.array(column, arrow_type)
    return pa.table(data), draw(st.integers(1, 25)), draw(st.integers(1, 7))


@settings(max_examples=60, deadline=None)
@given(files())
def test_an_entry_read_in_batches_is_the_entry_of_the_whole_column(tmp_path_factory, file):
    table, row_group_rows, batch_rows = file
    path = tmp_path_factory.mktemp("streamed") / "data.parquet"
    schema = pa.schema(
        [
            f.with_metadata({b"PARQUET:field_id": str(c.field_id).encode()})
            for f, (c, _, _) in zip(table.schema, COLUMNS, strict=True)
        ]
    )
    pq.write_table(table.cast(schema), path, row_group_size=row_group_rows)
    everything = IndexSettings(kinds=("bloom", "automaton"))
    per_column = {field.field_id: everything for field, _, _ in COLUMNS}
    count, streamed = index_file(
        str(path), "PARQUET", IndexTask(SCHEMA, {}, None, 1, per_column), batch_rows=batch_rows
    )
    assert count == table.num_rows
    for (field, _, _), stats in zip(COLUMNS, streamed, strict=True):
        whole = table.column(field.name).combine_chunks()
        expected = compute_column_stats(field.field_id, field.name, field.field_type, whole)
        rule = f"{field.name}: batches of {batch_rows} rows in row groups of {row_group_rows} give the whole column's"
        assert (stats.value_count, stats.null_count, stats.nan_count) == (
            expected.value_count,
            expected.null_count,
            expected.nan_count,
        ), rule + " counts"
        assert (stats.lower, stats.upper) == (expected.lower, expected.upper), rule + " bounds"
        keys = distinct_keys(whole, field.field_type)
        if keys is None:
            continue
        assert stats.distinct_count == len(keys), rule + " distinct count"
        rows = expected.value_count - expected.null_count - (expected.nan_count or 0)  # non-null, non-NaN
        payloads, built = {}, []
        for kind in build_order():
            if kind.chosen(everything, field.field_type, keys, rows, built):
                index = kind.build(keys, field.field_type, everything)
                if index is not None:
                    built.append(index)
                    payloads[kind.name] = index.payload
        assert {i["kind"]: i["payload"] for i in stats.indexes} == payloads, rule + " index payloads"


SIGNED_ZERO_CASES = [
    ("0.0 then -0.0 in two batches", [[None, 0.0], [-0.0]]),
    ("-0.0 then 0.0 in two batches", [[-0.0], [0.0, None]]),
    ("both zeros around a NaN", [[0.0], [float("nan")], [-0.0, 1.5]]),
]


@pytest.mark.parametrize(("rule", "batches"), SIGNED_ZERO_CASES, ids=[c[0] for c in SIGNED_ZERO_CASES])
def test_batches_holding_both_zeros_give_the_whole_columns_bounds(rule, batches):
    """-0.0 = 0.0, so min_max answers whichever comes first: the merged distinct values keep the file's order."""
    from indexlib.statistics.column_stats import ColumnSummary

    summary = ColumnSummary(pa.float64())
    for batch in batches:
        summary.add(pa.array(batch, pa.float64()), DoubleType())
    whole = compute_column_stats(1, "x", DoubleType(), pa.array(sum(batches, []), pa.float64()))
    streamed = summary.statistics(1, "x", DoubleType())
    assert (streamed.lower, streamed.upper) == (whole.lower, whole.upper), rule
