"""Which columns of a file go into the table's global key index (store/key_rows.py): the automatic choice, by cost.

A Bloom filter answers `key = v` for one file; a lookup of k keys probes k x N filters, and a filter sized to keep
~0.5 false file per key over N files costs ~1.44 log2(2N) bits per value, so both grow with the table. The key
index stores one 64-bit hash per (distinct value, file) and answers k keys by reading the few row groups whose hash
ranges hold them: O(k), whatever N. It costs more bytes per value than a Bloom filter (~8-12 bytes against 2-4), so
it is chosen only where the probes are what hurts:
- the table has at least `MIN_FILES` live files when the file is indexed (an IN list of 10,000 keys, what a
  planner's semi-join or dynamic filter pushes down, is then 50 million filter probes: the Bloom stage's budget);
- the column holds identifiers: integers (not dates or times), strings, binary, or decimals of scale 0, whose values
  are mostly distinct in the file (at least half of its non-null values), not a dense run of integers (the bounds
  already answer those: at most half the values of [min, max] missing);
- a keyed column gets no Bloom filter in that file (the key index answers `=`, IN and LIKE without wildcards).
`key_index = true` / `false` (per table or column) overrides the choice; `true` keys any column with keys.
"""

from __future__ import annotations

from pyiceberg.types import BinaryType, DecimalType, FixedType, IcebergType, IntegerType, LongType, StringType, UUIDType

from indexlib.index_kinds.settings import IndexSettings
from indexlib.statistics.canonical import Keys, has_keys

MIN_FILES = 5_000
_IDENTIFIER_TYPES = (IntegerType, LongType, StringType, BinaryType, FixedType, UUIDType)


def wants_key_index(
    settings: IndexSettings, iceberg_type: IcebergType, keys: Keys, values: int, table_files: int
) -> bool:
    """Whether this file's column gets key rows: `keys` are its distinct values, `values` its non-null, non-NaN
    values, `table_files` the live files of the table it is indexed for (see the module docstring)."""
    if settings.key_index is not None:
        return settings.key_index and has_keys(iceberg_type) and len(keys) > 0
    identifier = isinstance(iceberg_type, _IDENTIFIER_TYPES) or (
        isinstance(iceberg_type, DecimalType) and iceberg_type.scale == 0
    )
    if table_files < MIN_FILES or not identifier or len(keys) < 2 or 2 * len(keys) < values:
        return False
    span = keys.integer_span()
    return span is None or span > 2 * len(keys)
