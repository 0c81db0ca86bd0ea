"""Number of distinct values: exact per file, and a HyperLogLog sketch (Apache DataSketches) that merges across files.

Each entry stores the file's exact distinct count (the build sees every value; it sizes the Bloom filter) and an
HLL sketch of the same canonical keys (canonical.py), so sketches of files written by different jobs, in different
types (int vs long files), merge into one estimate for a partition or the whole table. HLL_4 with lg_k 12 keeps a
sketch under 2.7 KB with about 1.6 % relative error; small sets are stored as exact lists (tens of bytes).
NDV never prunes. The exact count drives the automatic index choice (per file); the sketches serve `skipindex
stats` (report.py), and `skipindex verify` does not compare them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
from datasketches import hll_sketch, hll_union, tgt_hll_type

from indexlib.statistics.canonical import Keys
from indexlib.statistics.murmur3 import murmur3_x64_128

LG_K = 12


# From this many keys the sketch is fed only the keys that set its registers (`_register_keys`); below it every key
# (one call each is cheaper than hashing a small set with numpy). Far above where an HLL sketch of lg_k 12 leaves its
# exact coupon list and set (a few hundred coupons), so every sketch made this way is in HLL mode either way.
SELECTED_MIN_KEYS = 1 << 14
SEED = 9001  # DataSketches' default hash seed: the one `hll_sketch.update` hashes with


def sketch_keys(keys: Keys) -> bytes:
    """The sketch of the text keys. datasketches takes one value per call: below SELECTED_MIN_KEYS every key is
    given (through `map`, without a Python loop around each call); from there, only the keys that set a register
    (`_register_keys`, ~4,100 of 2.5 million): the same registers, for half the time (the keys' text and hash
    are what is left)."""
    if len(keys) < SELECTED_MIN_KEYS:
        sketch = hll_sketch(LG_K, tgt_hll_type.HLL_4)
        for chunk in keys.text_chunks():
            deque(map(sketch.update, chunk), maxlen=0)
        return sketch.serialize_compact()
    chosen = _register_keys(keys)
    # Two sketches of half the keys each, merged: a union of two marks its result out of order, so its estimate is
    # read from the registers alone (the composite estimator), as every merge of files' sketches reads it. One
    # sketch fed only these keys would keep an in-order HIP estimate of its ~4,100 updates, which counts updates,
    # not the keys behind them (it said 13,477 for 70,000 keys; a union of one sketch keeps that estimate).
    halves = [hll_sketch(LG_K, tgt_hll_type.HLL_4) for _ in range(2)]
    for half, some in zip(halves, (chosen[0::2], chosen[1::2]), strict=True):
        deque(map(half.update, some), maxlen=0)
    union = hll_union(LG_K)
    for half in halves:
        union.update(half)
    return union.get_result(tgt_hll_type.HLL_4).serialize_compact()


def _register_keys(keys: Keys) -> list[str]:
    """For every register of the sketch, the keys of highest rank among those falling into it: the registers of an
    HLL sketch (in HLL mode) are, per register, the highest rank of any key given, whatever the order, so a sketch
    given these keys holds the registers of one given every key. A key falls into register h1 mod 2^lg_k of its
    MurmurHash3 x64 128 (seed 9001, over its UTF-8) and ranks min(leading zeros of h2, 62) + 1, as DataSketches'
    HllUtil computes its coupons; tests/test_sketches.py checks the registers against DataSketches' own."""
    slots = np.uint64((1 << LG_K) - 1)
    candidates: list[pa.Array] = []
    ranks: list[np.ndarray] = []
    registers: list[np.ndarray] = []
    for texts in keys.text_arrays():
        h1, h2 = murmur3_x64_128(texts, SEED)
        register = (h1 & slots).astype(np.int64)
        rank = np.minimum(64 - _bit_length(h2), 62) + 1
        best = np.zeros(1 << LG_K, dtype=np.int64)
        np.maximum.at(best, register, rank)
        top = np.flatnonzero(rank == best[register])  # the chunk's own highest per register (ties kept)
        candidates.append(texts.take(pa.array(top)))
        ranks.append(rank[top])
        registers.append(register[top])
    rank, register = np.concatenate(ranks), np.concatenate(registers)
    best = np.zeros(1 << LG_K, dtype=np.int64)
    np.maximum.at(best, register, rank)
    texts = pa.concat_arrays([c.cast(pa.large_string()) for c in candidates])
    chosen: list[str] = texts.filter(pa.array(rank == best[register])).to_pylist()
    return chosen


def _bit_length(words: np.ndarray) -> np.ndarray:
    """The bit length of each uint64 (0 for 0), from its two 32-bit halves: a 32-bit integer is exact in a double,
    whose binary exponent (`np.frexp`) is then its bit length (numpy < 2 has no bit count to do it otherwise)."""
    high = np.frexp((words >> np.uint64(32)).astype(np.float64))[1].astype(np.int64)
    low = np.frexp((words & np.uint64(0xFFFFFFFF)).astype(np.float64))[1].astype(np.int64)
    return np.where(high > 0, high + 32, low)


def merged_estimate(sketches: Iterable[bytes | None]) -> tuple[float, int]:
    """(estimated distinct values over all sketches, number of sketches merged); None sketches are skipped."""
    union = hll_union(LG_K)
    merged = 0
    for payload in sketches:
        if payload is None:
            continue
        try:
            union.update(hll_sketch.deserialize(payload))
        except (RuntimeError, ValueError):  # a corrupt sketch only makes the estimate partial
            continue
        merged += 1
    return (union.get_estimate() if merged else 0.0), merged
