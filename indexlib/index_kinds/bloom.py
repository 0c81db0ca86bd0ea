"""Bloom filter per (file, column), with pybloom-live: answers `=` and IN (and LIKE without wildcards).

Safety: every distinct non-null, non-NaN value of the file is added under its canonical key (canonical.py), and a
Bloom filter has no false negatives, so a literal whose key is absent is in no row. NaN literals have no key and NULL
rows are never added (IS NULL uses the null counts): both answer "might match". The filter is sized from the file's
exact distinct count for the configured false-positive rate. pybloom-live hashes the UTF-8 bytes of the key with
xxh128 or SHA (chosen by filter size), never Python's `hash()`, so a filter built on one machine reads the same on any.

Payload, version 1: pybloom-live's own serialisation (`BloomFilter.tofile`: a header of error rate, slice count,
bits per slice, capacity, count, then the bit array).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
from pybloom_live import BloomFilter
from pyiceberg.types import IcebergType

from indexlib.canonical import literal_key
from indexlib.index_choice import IndexSettings
from indexlib.index_kinds import BuiltIndex, IndexKind
from indexlib.patterns import pattern_shape
from indexlib.predicate import Pattern
from indexlib.pruning import ColumnStatistics, ValueSet, Verdict


class BloomIndex(IndexKind):
    name = "bloom"
    version = 1

    def build(self, keys: list[str], iceberg_type: IcebergType, settings: IndexSettings) -> BuiltIndex:
        bloom = BloomFilter(capacity=max(1, len(keys)), error_rate=settings.bloom_fpp)
        for key in keys:
            bloom.add(key, skip_check=True)
        out = io.BytesIO()
        bloom.tofile(out)
        return BuiltIndex(out.getvalue())

    def _keys(self, leaf: ValueSet | Pattern) -> list[str] | None:
        """Keys one of which a matching value must have; None when the leaf is not a positive equality."""
        if isinstance(leaf, Pattern):
            shape = pattern_shape(leaf.kind, leaf.pattern, leaf.escape)
            return [shape.prefix] if shape.exact == "equal" else None  # LIKE without wildcards
        if leaf.negated:
            return None
        keys = [literal_key(leaf.column.type, value) for value in leaf.values]
        return None if any(key is None for key in keys) else keys  # NaN: no key, cannot rule out

    def verdict(
        self, leaf: ValueSet | Pattern, payloads: Sequence[bytes | None], stats: ColumnStatistics
    ) -> Verdict | None:
        keys = self._keys(leaf)
        if keys is None or (isinstance(leaf, Pattern) and leaf.negated):
            return None
        might = np.ones(len(payloads), dtype=bool)
        for i, payload in enumerate(payloads):
            if payload is not None:
                bloom = load_filter(payload)
                might[i] = bloom is None or any(key in bloom for key in keys)
        return Verdict(might, np.zeros(len(payloads), dtype=bool))

    def reads(self, leaf: ValueSet | Pattern) -> str | None:
        if self._keys(leaf) is None or (isinstance(leaf, Pattern) and leaf.negated):
            return None
        return "Bloom filter: is any value's key present"


def load_filter(payload: bytes) -> BloomFilter | None:
    try:
        return BloomFilter.fromfile(io.BytesIO(payload))
    except Exception:  # a corrupt payload proves nothing: the file is kept
        return None
