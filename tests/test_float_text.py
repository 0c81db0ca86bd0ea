"""The text key of a double is Python's `repr` of it, made for many values at once (statistics/float_text.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import sweep
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from indexlib.statistics.float_text import float_text_array

EDGES = [
    (0.0, "zero is fixed, with its fraction"),
    (100.0, "an integer gets the `.0` Arrow leaves out"),
    (1234567890123456.0, "16 integer digits stay fixed"),
    (np.nextafter(1e16, 0), "the last double below 1e16 is fixed"),
    (1e16, "1e16 is scientific"),
    (1e15, "Arrow's shorter `1e+15` is Python's fixed `1000000000000000.0`"),
    (3e10, "Arrow's `3e+10` is fixed in Python"),
    (1e-4, "the double nearest 1e-4 prints fixed as `0.0001`"),
    (np.nextafter(1e-4, 0), "the double below it is scientific"),
    (0.00012, "Arrow's shorter `1.2e-4` is fixed in Python"),
    (1e-5, "Arrow's fixed `0.00001` is Python's `1e-05`"),
    (1e-7, "a one-digit exponent is padded to two"),
    (-1e-7, "negative values alike"),
    (5e-324, "the smallest subnormal"),
    (1.7976931348623157e308, "the largest double"),
    (float("inf"), "infinity"),
    (float("-inf"), "minus infinity"),
    (2.0**70, "a power of two past 1e16"),
]


@pytest.mark.parametrize(("value", "rule"), EDGES, ids=[rule for _, rule in EDGES])
def test_each_edge_is_written_as_repr_writes_it(value, rule):
    assert float_text_array(np.array([value])).to_pylist() == [repr(float(value))], rule


@settings(max_examples=sweep("SKIPINDEX_FLOAT_TEXT_EXAMPLES", 100, 2_000), deadline=None)
@given(
    values=hnp.arrays(
        np.float64,
        st.integers(0, 200),
        elements=st.floats(allow_nan=False) | st.integers(-(10**17), 10**17).map(float),
    )
)
@example(values=np.array([v for v, _ in EDGES]))
def test_every_double_is_written_as_repr_writes_it(values):
    assert float_text_array(values).to_pylist() == [repr(v) for v in values.tolist()], "the key of a double is its repr"


def test_random_bit_patterns_are_written_as_repr_writes_them():
    numbers = np.frombuffer(np.random.default_rng(7).bytes(8 * 20_000), dtype=np.float64)
    numbers = numbers[~np.isnan(numbers)]
    assert float_text_array(numbers).to_pylist() == [repr(v) for v in numbers.tolist()], "any double's key is its repr"
