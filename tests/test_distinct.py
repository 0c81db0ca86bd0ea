"""The build's distinct values by one sort are exactly numpy's `np.unique` (statistics/distinct.py)."""

from __future__ import annotations

import numpy as np
from conftest import sweep
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from indexlib.statistics.distinct import first_occurrences, sorted_distinct

INTEGERS = hnp.arrays(
    dtype=st.sampled_from([np.int64, np.int32, np.int8]),
    shape=st.integers(0, 300),
    elements=st.integers(-3, 3) | st.integers(-(2**7), 2**7 - 1),
)


@settings(max_examples=sweep("SKIPINDEX_DISTINCT_EXAMPLES", 200, 2_000), deadline=None)
@given(values=INTEGERS)
def test_sorted_distinct_is_np_unique(values):
    assert np.array_equal(sorted_distinct(values), np.unique(values)), "the sorted distinct values, each once"


@settings(max_examples=sweep("SKIPINDEX_DISTINCT_EXAMPLES", 200, 2_000), deadline=None)
@given(values=INTEGERS)
def test_first_occurrences_are_np_uniques_indices(values):
    expected = np.unique(values, return_index=True)[1]
    assert np.array_equal(first_occurrences(values), expected), "each distinct value's first position, in value order"


def test_timestamps_and_float_bit_patterns_keep_their_first_occurrences():
    stamps = np.array(["2024-01-02", "2024-01-01", "2024-01-02", "2024-01-01"], dtype="datetime64[us]")
    assert first_occurrences(stamps).tolist() == [1, 0], "the earlier day first, each at its first position"
    floats = np.array([0.0, -0.0, 1.5, 0.0])
    keyed = floats.view(np.int64)  # as the build keys floats: -0.0 and 0.0 are two values
    assert sorted(first_occurrences(keyed).tolist()) == [0, 1, 2], "0.0 and -0.0 kept apart, 1.5 once"
