"""N-gram Bloom filter per (file, string column): answers LIKE, ILIKE and starts_with by the text a match must hold.

A value matches `LIKE '%time_out%'` only if it holds the fragments "time" and "out" (query/patterns.py
`literal_fragments`: the runs between wildcards, ESCAPE honoured), so it holds every n-gram (n consecutive code
points) of every fragment of n code points or more. The filter holds every n-gram of every distinct non-null value of
the file, case-folded (`fold`: each code point mapped on its own to lower case), and a fragment is looked up as its
folded grams.

Safety: a Bloom filter has no false negatives, so when some required gram is absent from a file's filter no value of
the file holds the fragment, and no row of the file matches. Fragments shorter than n require no gram and prove
nothing (keep). NULL rows never match LIKE and are never added. Nothing is ever proven all-match, and NOT LIKE is
never answered (a filter cannot prove that every value holds a text). Grams are of code points, with no Unicode
normalisation; a file whose strings are not valid UTF-8 gets no filter (keep).

Why folding keeps both answers sound:
* LIKE: `fold` maps each code point on its own (no context), so it maps a concatenation to the concatenation of the
  maps: a value holding a fragment has a folded form holding the fragment's folded form. Distinct cases of a word
  share grams: a few more false positives, fewer distinct grams.
* ILIKE is LIKE of both sides lowered by the engine (Spark: Java's `toLowerCase`; DuckDB: its own tables). Engines'
  tables agree on ASCII and differ elsewhere (Unicode versions, Java's default locale), so ILIKE is answered only for
  a pattern of ASCII characters with an escape character that has no case (`ilike_readable`): every engine then lowers
  the pattern byte by byte, and a match's lowered value holds each lowered fragment, an ASCII text. Such a text is
  held by the folded value too, since every engine's lowering of a code point puts ASCII characters only where `fold`
  puts the same ones: ASCII letters lower as in ASCII, and of all other code points only the Kelvin sign (to k) and
  U+0130 (to i, or i with U+0307 in full case mapping) lower to ASCII in Python's, Arrow's and DuckDB's tables, which
  `fold` maps to k and i; locale lowerings (Java's Turkish and Azeri: U+0130 to i, I with U+0307 to i;
  Lithuanian: U+00CC, U+00CD, U+0128 to i, U+0307 and an accent) are covered by folding U+0307 to nothing and those
  three to i and their accent (`FOLD_EXTRA`). tests/test_ngram_index.py checks this for every code point against
  Python's and DuckDB's lower case.

Payload, version 2 (written now): one byte, n + 0x80 (the grams are folded), then Parquet's split-block Bloom filter
(split_block.py) over XXH64 of each distinct folded gram's UTF-8 bytes (statistics/xxhash64.py), sized from the
file's distinct gram count for `ngram_fpp`. Version 1 (read): one byte, n (1 to 16), then the filter over the grams as
written: it answers LIKE and starts_with as before, and ILIKE never (keep); its entries are stale (the kind's version
is part of the configuration version), so a backfill rebuilds them. The reader takes n from each payload, so a
change of `ngram_size` never misreads an older filter.

Cost: the split-block filter's bits per distinct gram of the file for `ngram_fpp` (6.0 at the default 10 %; distinct
4-grams grow far slower than the text: 33,000 for 440 KiB of English messages, a 25 KB filter). The automatic
choice builds it for free text (`NgramIndex`); `kinds` turns it on or off for a column.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import IcebergType, StringType

from indexlib.index_kinds import split_block
from indexlib.index_kinds.base import BuiltIndex, IndexKind, KindLeaf
from indexlib.index_kinds.bloom import free_text
from indexlib.index_kinds.settings import IndexSettings, Setting, fraction
from indexlib.query.model import Pattern
from indexlib.query.patterns import literal_fragments
from indexlib.statistics.canonical import Keys
from indexlib.statistics.distinct import sorted_distinct
from indexlib.statistics.provider import ColumnStatistics, Payloads
from indexlib.statistics.verdict import Verdict
from indexlib.statistics.xxhash64 import SHORT_BYTES, hash_binary, hash_short

MAX_SIZE = 16
FOLDED = 0x80  # in a payload's first byte: its grams are folded (version 2)


def gram_size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SIZE:
        raise ValueError(f"expected an integer from 1 to {MAX_SIZE}, got {value!r}")
    return value


# Defaults measured on English sentences with a hex request id per message (docs/index-kinds.md "N-gram filters"):
# with 2,000 messages a file, 3-grams saturate (every hex 3-gram is in every file: ids prune nothing, rare words keep
# a median of 3x their files), 4-grams keep a rare word's files alone (median 1x) and an id's one file. The rate: on
# the service log of docs/benchmarks.md ("Substring search on free text") 10 % kept what 3 % kept (rare words: median
# 1.00x both, max 17 against 15 of 200; ids: 1 file) for 27 % fewer bytes, as false files come from real grams held
# in other words more than from collisions.
SIZE = Setting("ngram_size", 4, gram_size, "n-gram filters: code points per gram (shorter fragments prune nothing)")
FPP = Setting("ngram_fpp", 0.1, fraction, "n-gram filters: the false-positive rate each filter is sized for")

GRAMS_PER_PASS = 1 << 18  # grams cut and hashed at a time: bounds a pass's temporaries (~10 MB) whatever the
# values' lengths; a file of a few hundred KB of text takes one pass (4 passes of 2^16 took 1.3x the time)
MAX_PROBED_GRAMS = 64  # grams of one leaf probed: any subset of the required grams is required, so fewer only keep more


def value_gram_hashes(values: pa.Array, n: int) -> np.ndarray:
    """The distinct XXH64 hashes of every n-gram (n code points) of every value (`values`: valid UTF-8 strings or
    binary, no nulls), sorted. A gram is cut from the values' bytes only where its n code points lie in one value
    (code points are found by their first byte, not a continuation byte 10xxxxxx; text of ASCII bytes alone has one
    byte per code point). No Python call per value or gram, and no gram is copied out of the text: a gram of at most
    8 bytes (every 4-gram of ASCII text) is read as the word it makes, the words deduplicated by a sort (numpy sorts
    uint32 and uint64 with SIMD: 0.6 ms for a file's 245,000 words, where Arrow's hash table took 1.2 ms and
    `np.unique` 4 ms) and only the distinct ones hashed (statistics/xxhash64.py `hash_short`); longer grams are cut out,
    deduplicated and hashed as binary values."""
    values = values.cast(pa.large_binary())
    offsets = np.frombuffer(values.buffers()[1], dtype="<i8")[values.offset : values.offset + len(values) + 1]
    buffer = values.buffers()[2]
    data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, np.uint8)
    data = data[offsets[0] : offsets[-1]] if len(offsets) else data[:0]
    offsets = offsets - (offsets[0] if len(offsets) else 0)
    if not len(data) or int(data.max()) < 0x80:  # ASCII: code point i is byte i
        starts, count, ends = None, len(data), offsets[1:]
    elif len(values) > 1 and 0 < (beyond := _beyond_ascii(data, offsets)).sum() < len(values):
        # some values with other characters: the ASCII ones take the ASCII way, the others the code points' way (each
        # part checked again: the ASCII way is taken only where no byte is beyond ASCII)
        parts = [values.filter(pa.array(chosen)) for chosen in (~beyond, beyond)]
        return sorted_distinct(np.concatenate([value_gram_hashes(v, n) for v in parts]))
    else:  # code point i starts at byte starts[i] (starts[count]: the end of the data)
        starts = np.append(np.flatnonzero((data & 0xC0) != 0x80), len(data))
        count, ends = len(starts) - 1, np.searchsorted(starts, offsets[1:])
    padded = np.concatenate([data, np.zeros(SHORT_BYTES, np.uint8)])  # a word read at the end stays in bounds
    words_at = np.lib.stride_tricks.as_strided(
        padded, shape=(len(data) + 1, SHORT_BYTES), strides=(1, 1), writeable=False
    )
    whole = np.ones(max(count - n + 1, 0), dtype=bool)  # gram i (code points i .. i+n-1) lies in one value
    crossing = (ends[:, None] - np.arange(1, n)).ravel()  # a gram starting 1 .. n-1 code points before a value's end
    whole[crossing[(crossing >= 0) & (crossing < len(whole))]] = False
    found = [np.zeros(0, dtype=np.uint64)]
    for first in range(0, len(whole), GRAMS_PER_PASS):
        if starts is None and n <= SHORT_BYTES:  # ASCII: every gram is n bytes, read as a word from its first byte
            words = _byte_words(padded, first, min(first + GRAMS_PER_PASS, len(whole)), n)
            words = words[whole[first : first + GRAMS_PER_PASS]]  # a copy
            if n not in (4, SHORT_BYTES):
                words &= words.dtype.type((1 << (8 * n)) - 1)
            found.append(hash_short(sorted_distinct(words).astype(np.uint64), n))
            continue
        grams = np.flatnonzero(whole[first : first + GRAMS_PER_PASS]) + first
        begin = grams if starts is None else starts[grams]
        lengths = np.full(len(grams), n) if starts is None else starts[grams + n] - begin
        for length in np.flatnonzero(np.bincount(lengths, minlength=SHORT_BYTES + 1)[: SHORT_BYTES + 1]).tolist():
            # the word at each gram's first byte; the bytes past the gram are masked off
            words = words_at[begin[lengths == length]].view("<u8").ravel()
            if length < SHORT_BYTES:
                words &= np.uint64((1 << (8 * length)) - 1)
            found.append(hash_short(sorted_distinct(words), length))
        long = lengths > SHORT_BYTES
        if long.any():
            begin, lengths = begin[long], lengths[long]
            cut = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            at = np.repeat(begin - cut[:-1], lengths) + np.arange(cut[-1])
            texts = pa.LargeBinaryArray.from_buffers(
                pa.large_binary(), len(begin), [None, pa.py_buffer(cut), pa.py_buffer(data[at].tobytes())]
            )
            found.append(hash_binary(pc.unique(texts)))
    return sorted_distinct(np.concatenate(found))


# Code points `fold` maps beyond their simple lower case, so that the lower case of any engine and locale puts ASCII
# characters only where the fold does (module docstring): U+0307 (combining dot above) is dropped, and the three
# letters Java's Lithuanian locale lowers to i, U+0307 and an accent (after lowering: ì, í, ĩ) become i and the accent.
FOLD_EXTRA = (("\u0307", ""), ("\u00ec", "i\u0300"), ("\u00ed", "i\u0301"), ("\u0129", "i\u0303"))


def fold(texts: pa.Array) -> pa.Array:
    """Each text (valid UTF-8, string or binary) with every code point mapped on its own to lower case (Unicode's
    simple case mapping, `pc.utf8_lower`, then `FOLD_EXTRA`), as large_binary. No context is read (not even the
    final sigma), so the fold of a concatenation is the concatenation of the folds. ASCII text is lowered byte by
    byte (A-Z to a-z) in one numpy pass."""
    texts = texts.cast(pa.large_binary())
    data_buffer = texts.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    if not len(data) or int(data.max()) < 0x80:
        upper = (data >= 0x41) & (data <= 0x5A)
        lowered = data | (upper.view(np.uint8) << 5)
        return pa.LargeBinaryArray.from_buffers(
            pa.large_binary(),
            len(texts),
            [texts.buffers()[0], texts.buffers()[1], pa.py_buffer(lowered)],
            texts.null_count,
            texts.offset,
        )
    folded = pc.utf8_lower(texts.cast(pa.large_string()))
    buffer = folded.buffers()[2]
    text = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, np.uint8)
    for code_point, replacement in FOLD_EXTRA:
        first, second = code_point.encode()  # two bytes each: a numpy search costs a tenth of a replacing pass
        if np.any((text[:-1] == first) & (text[1:] == second)):
            folded = pc.replace_substring(folded, code_point, replacement)
    return folded.cast(pa.large_binary())


def fold_text(texts: Sequence[str]) -> list[str]:
    """`fold` of Python strings."""
    return [text.decode() for text in fold(pa.array(texts, pa.large_string())).to_pylist()]


def ilike_readable(pattern: str, escape: str | None) -> bool:
    """Whether every engine lowers an ILIKE pattern as ASCII text, byte by byte: its characters are ASCII, and its
    escape character (Spark lowers the pattern, not the escape) has no case."""
    return pattern.isascii() and (escape is None or (escape.isascii() and escape.lower() == escape.upper()))


def _beyond_ascii(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per value (`offsets` into `data`), whether it holds a byte beyond ASCII."""
    holders = np.searchsorted(offsets, np.flatnonzero(data >= 0x80), side="right") - 1
    beyond = np.zeros(len(offsets) - 1, dtype=bool)
    beyond[holders] = True
    return beyond


def _byte_words(padded: np.ndarray, first: int, stop: int, n: int) -> np.ndarray:
    """For each byte position from `first` to `stop`, the n bytes from it as a little-endian word (uint32 for n up
    to 4, else uint64): a view reading a word at every byte (`padded` holds SHORT_BYTES bytes past `stop`), the bytes
    past the n masked off by the caller's copy."""
    dtype = np.dtype("<u4") if n <= 4 else np.dtype("<u8")
    return np.ndarray(shape=(stop - first,), dtype=dtype, buffer=padded, offset=first, strides=(1,))


def required_grams(fragments: Iterable[str], n: int) -> list[str]:
    """Every distinct n-gram of the fragments of n code points or more (shorter ones require none)."""
    grams = {fragment[i : i + n] for fragment in fragments for i in range(len(fragment) - n + 1)}
    return sorted(grams)


def gram_hashes(grams: Sequence[str]) -> np.ndarray:
    """XXH64 of each gram's UTF-8 bytes: what `value_gram_hashes` hashes for the same text."""
    return hash_binary(pa.array([gram.encode() for gram in grams], pa.large_binary()))


class NgramIndex(IndexKind):
    """The automatic choice for free text: a string column whose values read as prose in the file (bloom.py
    `free_text`: more than 256 distinct values, at least half of a sample holding 3 words and 20 characters; log
    messages, comments, descriptions), the column the value filter leaves at min/max. Identifiers, names, URLs and
    tags are not prose: `LIKE` on them is answered by their automata (tags) or not at all, as before. `kinds` naming
    "ngram" builds it on any string column with a non-null value; `kinds` without it turns it off. Answers LIKE
    and starts_with."""

    name = "ngram"
    version = 2
    settings = (SIZE, FPP)
    lookup_rank = 30  # after the value filters and automata: larger payloads, read for the files they leave
    late = True  # tables that cannot get it explain and version as before it existed

    def can_index(self, iceberg_type: IcebergType) -> bool:
        return isinstance(iceberg_type, StringType)

    def wanted(
        self, settings: IndexSettings, iceberg_type: IcebergType, keys: Keys, rows: int, built: Iterable[BuiltIndex]
    ) -> bool:
        return isinstance(iceberg_type, StringType) and free_text(keys)

    def build(self, keys: Keys, iceberg_type: IcebergType, settings: IndexSettings) -> BuiltIndex | None:
        try:
            keys.blobs.cast(pa.large_string())  # validates UTF-8: code points are only defined on valid text
        except pa.ArrowInvalid:
            return None
        n = settings.value(SIZE)
        hashes = value_gram_hashes(fold(keys.blobs), n)
        bloom = split_block.build(hashes, split_block.optimal_bytes(len(hashes), settings.value(FPP)))
        return BuiltIndex(bytes([FOLDED | n]) + bloom)

    def answers(self, leaf: KindLeaf) -> bool:
        """Positive LIKE, ILIKE (of an ASCII pattern, `ilike_readable`) and starts_with on a string column (NOT LIKE:
        a filter cannot prove every value holds a text; regexes are not read)."""
        return (
            isinstance(leaf, Pattern)
            and (
                leaf.kind in ("like", "starts_with")
                or (leaf.kind == "ilike" and ilike_readable(leaf.pattern, leaf.escape))
            )
            and not leaf.negated
            and isinstance(getattr(leaf.column, "type", None), StringType)
        )

    def _fragments(self, leaf: KindLeaf) -> list[str] | None:
        if not self.answers(leaf):
            return None
        assert isinstance(leaf, Pattern)  # answers() says so
        return literal_fragments(leaf.kind, leaf.pattern, leaf.escape)

    def verdict(self, leaf: KindLeaf, payloads: Sequence[bytes | None], stats: ColumnStatistics) -> Verdict | None:
        fragments = self._fragments(leaf)
        if fragments is None:
            return None
        heads = np.array([0 if p is None else _head(p) for p in payloads], dtype=np.int64)
        if not heads.any():
            return None  # no filter among these files: nothing judged (the stage is not listed, `late`)
        assert isinstance(leaf, Pattern)  # _fragments() says so
        folded = fold_text(fragments)
        might = np.ones(len(payloads), dtype=bool)
        for head in np.unique(heads[heads > 0]).tolist():
            if not head & FOLDED and leaf.kind == "ilike":
                continue  # grams as written (version 1): they cannot tell what another case holds, keep
            grams = required_grams(folded if head & FOLDED else fragments, head & ~FOLDED)[:MAX_PROBED_GRAMS]
            if not grams:
                continue  # every fragment shorter than n: nothing to probe, keep
            positions = np.flatnonzero(heads == head)
            bank, containers = _bank(payloads, positions)
            might[positions] = bank.contains_matrix(containers, gram_hashes(grams)).all(axis=1)
        return Verdict(might, np.zeros(len(payloads), dtype=bool))

    def reads(self, leaf: KindLeaf) -> str | None:
        fragments = self._fragments(leaf)
        if fragments is None:
            return None
        return "n-gram filters (where built): is every n-gram of the pattern's literal fragments (case-folded) present"


def _head(payload: bytes) -> int:
    """A payload's first byte: n, plus FOLDED when its grams are folded."""
    if not payload or not 1 <= payload[0] & ~FOLDED <= MAX_SIZE:
        raise ValueError("n-gram payload without its gram size")
    return payload[0]


class _Filters(Sequence[bytes]):
    """The split-block filters inside n-gram payloads, each cut out (copied) only when a bank asks for it."""

    def __init__(self, payloads: Sequence[bytes | None]) -> None:
        self.payloads = payloads

    def __len__(self) -> int:
        return len(self.payloads)

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...
    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        payload = self.payloads[index]
        if payload is None:
            raise ValueError("no n-gram filter to include")
        return payload[1:]


def _bank(payloads: Sequence[bytes | None], positions: np.ndarray) -> tuple[split_block.FilterBank, np.ndarray]:
    """A bank holding the filters at `positions`, and their containers in it: the provider's own (kept across the
    lookups of one table state), else one for this call. Raises ValueError when one of those filters is damaged."""
    if isinstance(payloads, Payloads) and payloads.decoded is not None:
        bank = payloads.decoded.get("n-gram bank", split_block.FilterBank)
        containers = payloads.containers[positions]
    else:
        bank, containers = split_block.FilterBank(), positions
    bank.include(containers, _Filters(payloads), positions)
    return bank, containers
