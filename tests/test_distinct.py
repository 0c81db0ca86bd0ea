"""The build's distinct values by one sort are exactly numpy's `np.unique` (statistics/distinct.py)."""

from __future__ import annotations

import numpy as np
from conftest import sweep
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from indexlib.statistics.distinct import sorted_distinct

INTEGERS = hnp.arrays(
    dtype=st.sampled_from([np.int64, np.int32, np.int8]),
    shape=st.integers(0, 300),
    elements=st.integers(-3, 3) | st.integers(-(2**7), 2**7 - 1),
)


@settings(max_examples=sweep("SKIPINDEX_DISTINCT_EXAMPLES", 200, 2_000), deadline=None)
@given(values=INTEGERS)
def test_sorted_distinct_is_np_unique(values):
    assert np.array_equal(sorted_distinct(values), np.unique(values)), "the sorted distinct values, each once"
