"""NDV sketches made from the keys that set their registers are the sketches of every key.

From `sketches.SELECTED_MIN_KEYS` keys on, a file's sketch is fed only the keys of highest rank per register
(hashed with a vectorised MurmurHash3). Rules: the hash is MurmurHash3 x64 128 as the reference writes it; for every
key type, the registers equal those of a DataSketches sketch given every key one by one, so merges across files
(every estimate `skipindex stats` reads) are the same whichever way each file's sketch was made.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from decimal import Decimal

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from datasketches import hll_sketch, hll_union, tgt_hll_type
from hypothesis import given
from hypothesis import strategies as st
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
)

from indexlib.statistics import sketches
from indexlib.statistics.canonical import distinct_keys
from indexlib.statistics.murmur3 import murmur3_x64_128

ARROW_BINARIES = [pa.binary(), pa.large_binary()]


@given(
    values=st.lists(st.binary(max_size=70), max_size=40),
    large=st.booleans(),
    cut=st.integers(0, 5),
)
def test_vectorised_murmur3_is_the_reference(values, large, cut):
    array = pa.array(values, ARROW_BINARIES[large]).slice(min(cut, len(values)))
    h1, h2 = murmur3_x64_128(array, sketches.SEED)
    expected = [mmh3.hash64(value, sketches.SEED, signed=False) for value in array.to_pylist()]
    assert list(zip(h1.tolist(), h2.tolist(), strict=True)) == expected, "h1, h2 as mmh3 writes them"


def test_strings_hash_as_their_utf8():
    texts = ["", "héllo", "x" * 31, "ключ", "🙂" * 5]
    for arrow_type in (pa.string(), pa.large_string()):
        h1, h2 = murmur3_x64_128(pa.array(texts, arrow_type), sketches.SEED)
        expected = [mmh3.hash64(text.encode(), sketches.SEED, signed=False) for text in texts]
        assert list(zip(h1.tolist(), h2.tolist(), strict=True)) == expected, arrow_type


def _registers(payload: bytes) -> np.ndarray:
    """The 2^lg_k registers of a serialised sketch (through a union's HLL_8 result: one byte per register)."""
    union = hll_union(sketches.LG_K)
    union.update(hll_sketch.deserialize(payload))
    image = union.get_result(tgt_hll_type.HLL_8).serialize_updatable()
    return np.frombuffer(image[-(1 << sketches.LG_K) :], dtype=np.uint8)


def _every_key(texts: list[str]) -> bytes:
    sketch = hll_sketch(sketches.LG_K, tgt_hll_type.HLL_4)
    deque(map(sketch.update, texts), maxlen=0)
    return sketch.serialize_compact()


N = sketches.SELECTED_MIN_KEYS + 1_000
_rng = np.random.default_rng(63)
START = dt.datetime(2026, 1, 1)

# (rule, Iceberg type, values): each set holds at least SELECTED_MIN_KEYS distinct keys
SKETCH_CASES = [
    ("random longs", LongType(), pa.array(_rng.integers(-(2**63), 2**63 - 1, N, dtype=np.int64))),
    ("dense ints (short texts, one per length class)", IntegerType(), pa.array(np.arange(-5, N - 5, dtype=np.int32))),
    ("dates", DateType(), pa.array([dt.date(1970, 1, 1) + dt.timedelta(days=i) for i in range(N)])),
    ("timestamps", TimestampType(), pa.array([START + dt.timedelta(microseconds=7 * i) for i in range(N)])),
    (
        "doubles of every notation: fixed, scientific, integers, signed zeros, infinities",
        DoubleType(),
        pa.array(
            np.concatenate(
                [_rng.normal(size=N // 2), 10.0 ** _rng.uniform(-320, 308, N // 2), [0.0, -0.0, np.inf, -np.inf, 1e16]]
            )
        ),
    ),
    ("decimals with a scale", DecimalType(12, 2), pa.array([Decimal(i) / 100 for i in range(N)], pa.decimal128(12, 2))),
    (
        "wide decimals beyond int64 (decimal text)",
        DecimalType(38, 0),
        pa.array([Decimal(10**20 + 7 * i) for i in range(N)], pa.decimal128(38, 0)),
    ),
    ("unicode strings of many lengths", StringType(), pa.array([f"ключ-{i}-" + "é" * (i % 40) for i in range(N)])),
    ("binary (hex text)", BinaryType(), pa.array([i.to_bytes(6, "little") for i in range(N)], pa.binary())),
]


@pytest.mark.parametrize(("rule", "iceberg_type", "values"), SKETCH_CASES, ids=[c[0] for c in SKETCH_CASES])
def test_a_sketch_of_the_register_keys_has_every_keys_registers(rule, iceberg_type, values):
    keys = distinct_keys(values, iceberg_type)
    assert keys is not None and len(keys) >= sketches.SELECTED_MIN_KEYS, "the case reaches the selected keys"
    selected, every = sketches.sketch_keys(keys), _every_key(keys.texts())
    assert (_registers(selected) == _registers(every)).all(), f"{rule}: the same registers"
    other = _every_key([f"other-{i}" for i in range(30_000)])
    merged = [sketches.merged_estimate([sketch, other]) for sketch in (selected, every)]
    assert merged[0] == merged[1], f"{rule}: merged with another file's sketch, the same estimate"
    alone = sketches.merged_estimate([selected])[0]
    assert abs(alone - len(keys)) / len(keys) < 0.05, f"{rule}: estimated alone from its registers, {alone}"


def test_a_text_array_holds_the_text_keys():
    for rule, iceberg_type, values in SKETCH_CASES:
        keys = distinct_keys(values, iceberg_type)
        arrays = [text for array in keys.text_arrays(size=5_000) for text in array.to_pylist()]
        assert arrays == keys.texts(), f"{rule}: text_arrays and text_chunks give the same keys"
