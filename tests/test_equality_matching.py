"""Which rows an Iceberg equality delete deletes (indexlib/scans/equality.py), against brute force: a data row is
deleted when, for some delete row, every compared column holds the same value, NULL equal to NULL and NaN equal to
NaN (Iceberg's equality, as its Java readers apply it: `Double.compare`, so -0.0 is not 0.0), in any number of columns
and types.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexlib.scans.equality import _matched

TYPES = {
    "int": (pa.int64(), st.integers(-3, 3)),
    "float": (pa.float64(), st.sampled_from([0.5, 1.5, -2.0, 0.0, -0.0, math.nan])),
    "str": (pa.string(), st.sampled_from(["a", "b", "", "a%"])),
}


def _same(a: object, b: object) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) and isinstance(b, float):  # Java's Double.compare: NaN = NaN, -0.0 != 0.0
        both_nan = math.isnan(a) and math.isnan(b)
        return both_nan or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return a == b


def _brute_force(data: list[tuple], deletes: list[tuple]) -> list[bool]:
    return [any(all(_same(x, y) for x, y in zip(row, gone, strict=True)) for gone in deletes) for row in data]


@st.composite
def tables(draw) -> tuple[list[str], list[tuple], list[tuple]]:
    kinds = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=3))
    value = st.tuples(*(st.one_of(st.none(), TYPES[k][1]) for k in kinds))
    return kinds, draw(st.lists(value, max_size=12)), draw(st.lists(value, max_size=6))


def _table(kinds: list[str], rows: list[tuple]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in kinds]
    return pa.table(
        [pa.array(list(c), TYPES[k][0]) for k, c in zip(kinds, columns, strict=True)],
        names=[f"c{n}" for n in range(len(kinds))],
    )


@settings(max_examples=300, deadline=None)
@given(tables())
def test_a_row_is_deleted_when_every_compared_column_equals_a_delete_rows_null_and_nan_included(drawn) -> None:
    kinds, data, deletes = drawn
    got = _matched(_table(kinds, data), _table(kinds, deletes)).tolist()
    assert got == _brute_force(data, deletes), "NULL = NULL, NaN = NaN, every column equal"


# a NaN with a sign and a payload (Java may write one)
OTHER_NAN = struct.unpack("<d", bytes.fromhex("010000000000f8ff"))[0]

CASES = [
    ("NULL equals NULL", [(None,), (1,)], [(None,)], [True, False]),
    ("NaN equals NaN", [(math.nan,), (0.5,)], [(math.nan,)], [True, False]),
    ("NaN equals NaN whatever its bits", [(OTHER_NAN,), (0.5,)], [(math.nan,)], [True, False]),
    ("a NULL is not any value", [(None,)], [(1,)], [False]),
    ("-0.0 is not 0.0 (Java's Double.compare)", [(-0.0,), (0.0,)], [(0.0,)], [False, True]),
    ("all columns must equal", [(1, "a"), (1, "b")], [(1, "a")], [True, False]),
    ("a NULL in one column of two", [(1, None), (1, "a")], [(1, None)], [True, False]),
]


@pytest.mark.parametrize(("rule", "data", "deletes", "expected"), CASES)
def test_equality_rules(rule, data, deletes, expected) -> None:
    kinds = ["float" if isinstance(data[0][0], float) else "int", "str"][: len(data[0])]
    got = _matched(_table(kinds, data), _table(kinds, deletes))
    assert np.array_equal(got, expected), rule
