"""The hashes the global key index stores and looks up: a column value's canonical XXH64 (canonical.py, the hash its
Bloom filter uses), as a signed 64-bit integer (an Iceberg `long`).

Safety: the build stores the hash of every distinct non-null, non-NaN value of a keyed column, and a lookup probes
the hashes of its literals computed by the same function, so a file holding a literal's value always holds a row of
that hash. Two values with one hash (a collision) make a lookup keep the files of both: never drop one.
`HASH_BITS` exists for tests, which shorten the hashes so that collisions happen on every lookup.
"""

from __future__ import annotations

import numpy as np

from indexlib.statistics.distinct import sorted_distinct

HASH_BITS = 64  # tests only: fewer bits force collisions (build and lookup must run in one process)


def stored_hashes(hashes: np.ndarray) -> np.ndarray:
    """The stored form of each of these XXH64 hashes (uint64 or int64), in their order: int64."""
    stored = np.asarray(hashes).view(np.int64) if np.asarray(hashes).dtype == np.uint64 else np.asarray(hashes)
    if HASH_BITS < 64:
        stored = stored & np.int64((1 << HASH_BITS) - 1)
    return stored.astype(np.int64)


def key_hashes(hashes: np.ndarray) -> np.ndarray:
    """The stored form of XXH64 hashes (uint64 or int64): int64, sorted, each once."""
    return sorted_distinct(stored_hashes(hashes))
