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

from datasketches import hll_sketch, hll_union, tgt_hll_type

from indexlib.statistics.canonical import Keys

LG_K = 12


def sketch_keys(keys: Keys) -> bytes:
    """The sketch of the text keys, made a chunk at a time. datasketches takes one value per call: `map` makes the
    calls without a Python loop around each (half the time of a `for` loop: 2.5 million keys in ~0.2 s)."""
    sketch = hll_sketch(LG_K, tgt_hll_type.HLL_4)
    for chunk in keys.text_chunks():
        deque(map(sketch.update, chunk), maxlen=0)
    return sketch.serialize_compact()


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
