"""Bloom filter per (file, column): answers `=` and IN (and LIKE without wildcards).

Safety: every distinct non-null, non-NaN value of the file is added, and a Bloom filter has no false negatives, so a
literal whose hash (or key) is absent is in no row. NaN literals have no key and NULL rows are never added (IS NULL
uses the null counts): both answer "might match". The filter is sized from the file's exact distinct count for the
configured false-positive rate. Hashes never use Python's `hash()`, so a filter built on one machine reads the
same on any.

Payload, version 2 (written now): Parquet's split-block Bloom filter, serialised as a Parquet column chunk stores it
(split_block.py), over XXH64 of each value's bytes (statistics/canonical.py `Keys.hashes`). Built and probed with
numpy, with no Python call per value: 2.5-8x the keys per second of version 1 on TPC-H lineitem (docs/benchmarks.md).

Payload, version 1 (read only): pybloom-live's own serialisation (`BloomFilter.tofile`: a header of error rate, slice
count, bits per slice, capacity, count, then the bit array), over the UTF-8 of the text keys. The lookup probes these
in place (`might_contain_each`) with pybloom-live's own hash functions, cached per filter shape; tested to agree with
`key in BloomFilter.fromfile(...)`. The two versions are told apart by their first byte (a split-block header is
Thrift field 1, 0x15; a pybloom-live header is validated field by field). A payload of neither shape raises
ValueError (the lookup then reads that file's filter as unknown, see pruning/kinds.py).
"""

from __future__ import annotations

import io
import math
import struct
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pybloom_live import BloomFilter
from pybloom_live.pybloom import make_hashfuncs
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
)

from indexlib.index_kinds import split_block
from indexlib.index_kinds.base import BuiltIndex, IndexKind
from indexlib.index_kinds.settings import IndexSettings, Setting, fraction, positive_number
from indexlib.query.model import Pattern
from indexlib.query.value_set import ValueSet, equality_literals
from indexlib.statistics.canonical import Keys, has_keys, literal_hashes, literal_key
from indexlib.statistics.provider import ColumnStatistics, Payloads
from indexlib.statistics.verdict import Verdict

FPP = Setting("bloom_fpp", 0.01, fraction, "the false-positive rate each Bloom filter is sized for, at most")
# Files per absent key a lookup over the whole table may keep through false positives: filters of a table of N files
# are sized for min(bloom_fpp, bloom_false_files / N), so precision does not decay as the table grows.
FALSE_FILES = Setting(
    "bloom_false_files",
    0.5,
    positive_number,
    "files per absent key a lookup over the whole table may keep: filters of a table of N files are sized for "
    "min(bloom_fpp, bloom_false_files / N)",
)

# The automatic choice (BloomIndex docstring; docs/index-kinds.md "The automatic choice"; measured in
# docs/benchmarks.md "Issue 30: the automatic choice by cost"). Part of the configuration version through
# indexing/file_indexer.py AUTOMATIC_CHOICE_VERSION: change that when changing these.
MAX_DENSITY = 0.5  # integral columns: a filter only when distinct values fill at most this share of [min, max]
FREE_TEXT_MIN_VALUES = 256  # string columns with fewer distinct values are never judged free text
FREE_TEXT_SAMPLE = 1_024  # distinct values looked at to judge it, spread evenly over the sorted values
FREE_TEXT_WORDS = 3  # a value reads as prose with at least this many whitespace-separated words ...
FREE_TEXT_CHARS = 20  # ... and at least this many characters (code points)
MOMENTS = (TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType, TimeType)


def free_text(keys: Keys) -> bool:
    """Whether a string column's distinct values read as prose: more than FREE_TEXT_MIN_VALUES of them, and at
    least half of a sample of FREE_TEXT_SAMPLE (spread evenly over the sorted values) hold FREE_TEXT_WORDS words
    and FREE_TEXT_CHARS characters. TPC-H l_comment: 78 % of its values; o_comment 98 %, p_name 100 %; names
    ("Mary B. Chen"), cities, addresses, uuids, e-mail addresses: 0-5 %. Arrow compute over the sample, no Python
    call per value (~0.1 ms); a sample that is not valid UTF-8 is not prose. The Bloom and n-gram kinds both ask
    about the same keys: the last answer is kept for them (`_last_judged`)."""
    global _last_judged
    judged = _last_judged  # one read: another thread may replace it meanwhile
    if judged is not None and judged[0]() is keys:
        return judged[1]
    answer = _free_text(keys)
    _last_judged = (weakref.ref(keys), answer)
    return answer


_last_judged: tuple[weakref.ref[Keys], bool] | None = None  # the keys last judged (held weakly) and the answer


def _free_text(keys: Keys) -> bool:
    blobs = keys.blobs
    if len(blobs) <= FREE_TEXT_MIN_VALUES:
        return False
    if len(blobs) > FREE_TEXT_SAMPLE:
        blobs = blobs.take(np.linspace(0, len(blobs) - 1, FREE_TEXT_SAMPLE).astype(np.int64))
    try:
        texts = blobs.cast(pa.large_string())
    except pa.ArrowInvalid:
        return False
    # trimmed, then split at most FREE_TEXT_WORDS - 1 times: min(words, FREE_TEXT_WORDS) pieces (untrimmed, leading
    # or trailing whitespace made an empty piece), the answer to "at least FREE_TEXT_WORDS words" for a seventh of
    # the time of a whole split (the rest of each value is not scanned)
    trimmed = pc.utf8_trim_whitespace(texts)
    words = pc.list_value_length(pc.utf8_split_whitespace(trimmed, max_splits=FREE_TEXT_WORDS - 1))
    prose = pc.and_(pc.greater_equal(words, FREE_TEXT_WORDS), pc.greater_equal(pc.utf8_length(texts), FREE_TEXT_CHARS))
    return 2 * pc.sum(prose).as_py() >= len(texts)


class BloomIndex(IndexKind):
    """The automatic choice (unless `kinds` says otherwise): a filter for every column with keys, except where it
    cannot pay for its bytes (10.5-47 bits per distinct value, docs/index-kinds.md "The automatic choice"):

    * where it cannot prune more than what is stored anyway: booleans; fewer than 2 distinct values in the file
      (min = max answers `=` exactly); a payload of another kind that is exact (it answers `=` and IN exactly);
    * measures: float and double columns, and decimals with a scale (prices, amounts). Nobody looks a price up by
      equality, and their values are nearly all distinct (TPC-H l_extendedprice: a 30 MB filter);
    * moments: timestamp (with or without zone, micro- or nanoseconds) and time columns. Time is asked for by
      ranges (the last hour, a day), which min/max answers and a filter cannot; a filter answers `ts = <instant>`,
      which is not what people run, and costs as much as an identifier's (microseconds are nearly all distinct:
      a service log's event times took 16 % of its index, docs/benchmarks.md "Substring search on free text");
    * dense integers: integer, long, date and decimal(p, 0) columns whose distinct values fill more than
      `MAX_DENSITY` (1/2) of their [min, max] span. A filter only rules out values absent from the file inside its
      bounds; when more than half of the span is present, a key inside the bounds is in the file more often than
      not, so the filter keeps over half the files min/max keeps, whatever the key (TPC-H l_suppkey: 95 % of the
      span in every file: its 10 MB of filters saved 6 % of the reads of `l_suppkey = k`);
    * free text: string columns of more than `FREE_TEXT_MIN_VALUES` distinct values of which most read as prose
      (`free_text`: at least half of a sample hold 3 words or more and 20 characters or more; TPC-H l_comment).
      Equality on prose is not what people run; LIKE '%x%' is, and a Bloom filter cannot answer it. Identifiers
      without spaces (trace ids, uuids, e-mail addresses, URLs), names and short phrases keep their filters."""

    name = "bloom"
    version = 2
    settings = (FPP, FALSE_FILES)
    lookup_rank = 10
    equality_filter = True

    def sized_for(self, settings: IndexSettings, table_files: int) -> IndexSettings:
        """A 1 % filter per file keeps 1 % of all files per absent key: 1,000 of 100,000. Sized for
        bloom_false_files / N instead, the whole table keeps about bloom_false_files files per absent key, for
        ~1.44 log2(N / bloom_false_files) bits per distinct value instead of ~9.6 (docs/index-kinds.md)."""
        rate = min(settings.value(FPP), settings.value(FALSE_FILES) / max(table_files, 1))
        return settings if rate == settings.value(FPP) else settings.updated(**{FPP.name: rate})

    def outgrown(self, payload: bytes, distinct: int, settings: IndexSettings, table_files: int, slack: float) -> bool:
        """A filter sized for a table of fewer files than now: its false-positive rate for its `distinct` values
        exceeds `slack` times the rate sized for `table_files`, and that rate would take more bytes than it has
        (not so for a filter at the 128 MB cap). One rate computed per filter; old-format filters are never
        outgrown (a new configuration version rebuilds them)."""
        num_bytes = _filter_bytes(payload)
        if num_bytes is None or distinct <= 0:
            return False
        wanted = self.sized_for(settings, table_files).value(FPP)
        rate = split_block.false_positive_rate(distinct, num_bytes // split_block.BLOCK_BYTES)
        return rate > slack * wanted and split_block.optimal_bytes(distinct, wanted) > num_bytes

    def sized_tables(self, payload: bytes, distinct: int, settings: IndexSettings) -> tuple[int, int] | None:
        """By bisection: the filter's size is a non-decreasing function of the table's file count (the sized rate
        min(bloom_fpp, bloom_false_files / N) falls as N grows)."""
        num_bytes = _filter_bytes(payload)
        if num_bytes is None:
            return None

        def size(files: int) -> int:
            return split_block.optimal_bytes(max(distinct, 1), self.sized_for(settings, files).value(FPP))

        def first(fits: Callable[[int], bool]) -> int:
            """The least table size in [1, 2^40] for which `fits` holds (it holds from some size on)."""
            low, high = 1, 1 << 40
            while low < high:
                middle = (low + high) // 2
                low, high = (low, middle) if fits(middle) else (middle + 1, high)
            return low

        least = first(lambda files: size(files) >= num_bytes)
        if size(least) != num_bytes:
            return None
        greatest = first(lambda files: size(files) > num_bytes) - 1
        return least, greatest if size(greatest + 1) > num_bytes else 1 << 40

    def can_index(self, iceberg_type: IcebergType) -> bool:
        return has_keys(iceberg_type)

    def wanted(
        self, settings: IndexSettings, iceberg_type: IcebergType, keys: Keys, rows: int, built: Iterable[BuiltIndex]
    ) -> bool:
        if isinstance(iceberg_type, BooleanType) or len(keys) < 2 or any(index.exact for index in built):
            return False
        if isinstance(iceberg_type, (FloatType, DoubleType)):
            return False  # a measure
        if isinstance(iceberg_type, MOMENTS):
            return False  # a moment: asked for by ranges, which min/max answers
        if isinstance(iceberg_type, DecimalType) and iceberg_type.scale > 0:
            return False  # a measure (an amount, a price)
        if isinstance(iceberg_type, (IntegerType, LongType, DateType, DecimalType)):
            span = keys.integer_span()
            return span is None or len(keys) <= span * MAX_DENSITY  # at most half the span present
        if isinstance(iceberg_type, StringType):
            return not free_text(keys)
        return True

    def build(self, keys: Keys, iceberg_type: IcebergType, settings: IndexSettings) -> BuiltIndex:
        return BuiltIndex(split_block.build(keys.hashes(), split_block.optimal_bytes(len(keys), settings.value(FPP))))

    def _literals(self, leaf: ValueSet | Pattern) -> list[Any] | None:
        """Values one of which a matching row must hold; None when the leaf is not a positive equality, or a
        literal has no key (NaN: cannot be ruled out)."""
        literals = equality_literals(leaf)
        if literals is None or any(literal_key(leaf.column.type, value) is None for value in literals):
            return None
        return literals

    def verdict(  # type: ignore[override]  # asked only about leaves `answers` accepts
        self, leaf: ValueSet | Pattern, payloads: Sequence[bytes | None], stats: ColumnStatistics
    ) -> Verdict | None:
        shapes = _shapes(payloads)
        filters = int(np.count_nonzero(shapes))
        literals = self._literals(leaf) if filters else None  # no filter to probe: no literal is keyed
        if literals is None:
            return None
        if len(literals) * filters > MAX_PROBE_PAIRS:
            return None  # too long a list for too many files: answering would take seconds; unknown keeps them
        column_type = leaf.column.type
        might = np.ones(len(payloads), dtype=bool)
        current = np.flatnonzero(shapes == SPLIT_BLOCK)
        if len(current):
            hashes = literal_hashes(column_type, literals)
            if hashes is not None:
                bank, containers = _bank(payloads, current)
                might[current] = bank.might_contain_each(containers, hashes)
        if (shapes == WRITTEN_BEFORE).any():
            written_before = [p if shape == WRITTEN_BEFORE else None for p, shape in zip(payloads, shapes, strict=True)]
            keys = [literal_key(column_type, value) for value in literals]
            might &= might_contain_each(written_before, keys)  # type: ignore[arg-type]
        return Verdict(might, np.zeros(len(payloads), dtype=bool))

    def values_held(
        self, column_type: IcebergType, values: Sequence[object], payloads: Sequence[bytes | None]
    ) -> np.ndarray | None:
        """The split-block filters probed per (file, value) by the hashes `verdict` probes (so a value this rules out
        is one `verdict` rules out alone: no row holds it); filters of the first format and missing ones hold every
        value (not probed: unknown keeps the value)."""
        held = np.ones((len(payloads), len(values)), dtype=bool)
        current = np.flatnonzero(_shapes(payloads) == SPLIT_BLOCK)
        if not len(current) or not values or len(current) * len(values) > MAX_PROBE_PAIRS:
            return held
        hashes = literal_hashes(column_type, values)
        if hashes is None:
            return held
        bank, containers = _bank(payloads, current)
        held[current] = bank.contains_matrix(containers, hashes)
        return held

    # (as `verdict`, asked only about leaves `answers` accepts)
    def reads(self, leaf: ValueSet | Pattern) -> str | None:  # type: ignore[override]
        if self._literals(leaf) is None:
            return None
        return "Bloom filters (where built): is any literal's hash present"


def _filter_bytes(payload: bytes) -> int | None:
    """The bitset's size of a split-block filter; None for a filter of the first format or a damaged one (verify
    finds the damage; nothing is sized from it)."""
    if not split_block.is_split_block(payload):
        return None
    try:
        return int(split_block.bitset_of(payload).nbytes)
    except ValueError:
        return None


SPLIT_BLOCK, WRITTEN_BEFORE = 1, 2  # a payload's version, by its first byte (0: no payload)


def _shapes(payloads: Sequence[bytes | None]) -> np.ndarray:
    """Per payload: 0 where there is none, SPLIT_BLOCK (version 2) or WRITTEN_BEFORE (version 1), in one pass."""
    return np.array(
        [0 if p is None else SPLIT_BLOCK if split_block.is_split_block(p) else WRITTEN_BEFORE for p in payloads],
        dtype=np.int8,
    )


def _bank(payloads: Sequence[bytes | None], positions: np.ndarray) -> tuple[split_block.FilterBank, np.ndarray]:
    """A bank holding the filters at `positions`, and their containers in it: the provider's own (`Payloads`:
    every earlier lookup of the same table state filled it, so only filters read since are copied), else one for
    this call. Raises ValueError when one of those filters is damaged."""
    if isinstance(payloads, Payloads) and payloads.decoded is not None:
        bank = payloads.decoded.get("split-block bank", split_block.FilterBank)
        containers = payloads.containers[positions]
    else:
        bank, containers = split_block.FilterBank(), positions
    bank.include(containers, payloads, positions)
    return bank, containers


_HEADER = struct.Struct(BloomFilter.FILE_FMT)  # error rate, slices, bits per slice, capacity, items added
_SHAPE_BYTES = _HEADER.size - 8  # filters with the same first four fields share their bit positions


@lru_cache(maxsize=256)
def _hash_function(num_slices: int, bits_per_slice: int) -> Callable[[str], Iterator[int]]:
    return make_hashfuncs(num_slices, bits_per_slice)[0]


@lru_cache(maxsize=65_536)
def _bit_positions(num_slices: int, bits_per_slice: int, key: str) -> tuple[int, ...]:
    hashes = _hash_function(num_slices, bits_per_slice)(key)
    return tuple(slice_number * bits_per_slice + bit for slice_number, bit in enumerate(hashes))


# (filter, key) pairs one lookup may probe for one leaf: ~1 s. Beyond it (an IN list of 10,000 keys over 10,000
# candidate files) the Bloom stage leaves the leaf to the other stages rather than hold the planner for a minute.
MAX_PROBE_PAIRS = 50_000_000
PAIRS_PER_PASS = 1 << 21  # (filter, key) pairs probed at once: bounds the memory of one pass (~100 MB)


def might_contain_each(payloads: Sequence[bytes | None], keys: Sequence[str]) -> np.ndarray:
    """Per payload (None: no filter, True), whether the filter might hold one of `keys`. Filters of one shape share their bit positions, so each group's bit arrays are stacked and its
    (filter, key) pairs probed with numpy, a batch of keys at a time, slice by slice (the pairs whose bit is unset drop
    out), leaving out filters already hit. Raises ValueError when any payload is not a filter pybloom-live wrote
    (a length or header other than pybloom-live's, see `_bit_array_size`)."""
    result = np.ones(len(payloads), dtype=bool)
    groups: dict[bytes, list[int]] = {}
    for i, payload in enumerate(payloads):
        if payload is not None:
            groups.setdefault(payload[:_SHAPE_BYTES], []).append(i)  # the header without its item count
    for shape, members in groups.items():
        try:
            error_rate, num_slices, bits_per_slice, capacity, _ = _HEADER.unpack(shape + bytes(8))
        except struct.error:
            raise ValueError(f"Bloom filter of {len(shape)} bytes has no header") from None
        size = _HEADER.size + _bit_array_size(error_rate, num_slices, bits_per_slice, capacity)
        filters = cast(list[bytes], [payloads[i] for i in members])  # groups: indexes of non-None payloads
        for payload in filters:
            if len(payload) != size:
                raise ValueError(f"Bloom filter of {len(payload)} bytes, its header says {size}")
        bits = np.frombuffer(b"".join(filters), dtype=np.uint8).reshape(len(members), size)
        hit = np.zeros(len(members), dtype=bool)
        start = 0
        while start < len(keys):
            open_rows = np.flatnonzero(~hit)
            if not len(open_rows):
                break
            batch = keys[start : start + max(1, PAIRS_PER_PASS // len(open_rows))]
            start += len(batch)
            positions = np.array(
                [_bit_positions(num_slices, bits_per_slice, key) for key in batch], dtype=np.int64
            )  # (keys, slices)
            # (filter, key) pairs still possible, slice by slice: about half drop out at each, so the work is ~2x
            # the pairs rather than pairs x slices
            pair_rows, pair_keys = np.divmod(np.arange(len(open_rows) * len(positions)), len(positions))
            for slice_number in range(num_slices):
                position = positions[pair_keys, slice_number]
                present = (bits[open_rows[pair_rows], _HEADER.size + (position >> 3)] >> (position & 7)) & 1
                pair_rows, pair_keys = pair_rows[present == 1], pair_keys[present == 1]
                if not len(pair_rows):
                    break
            hit[open_rows[np.unique(pair_rows)]] = True
        result[members] = hit
    return result


@lru_cache(maxsize=256)
def _bit_array_size(error_rate: float, num_slices: int, bits_per_slice: int, capacity: int) -> int:
    """Bytes of the bit array of a filter with this header. Raises ValueError unless the shape is the one
    pybloom-live derives from the error rate and capacity (a damaged header would probe other bits)."""
    if not (2.0**-64 < error_rate < 1 and capacity > 0 and 0 < num_slices < 64):
        raise ValueError(f"Bloom filter header out of range: rate {error_rate}, {num_slices} slices")
    expected = int(math.ceil(math.log(1.0 / error_rate, 2)))
    if num_slices == expected:  # BloomFilter.__init__'s formulas
        expected = int(math.ceil((capacity * abs(math.log(error_rate))) / (num_slices * (math.log(2) ** 2))))
        if bits_per_slice == expected:
            return (num_slices * bits_per_slice + 7) // 8
    raise ValueError(f"Bloom filter header inconsistent: {num_slices} x {bits_per_slice} bits for rate {error_rate}")


def load_filter(payload: bytes) -> BloomFilter | None:
    try:
        return BloomFilter.fromfile(io.BytesIO(payload))
    except Exception:  # a corrupt payload proves nothing: the file is kept
        return None
