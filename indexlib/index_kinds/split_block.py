"""Parquet's split-block Bloom filter (the `BloomFilter.md` of parquet-format), built and probed with numpy.

A filter is z blocks of eight 32-bit words. A value's XXH64 hash h picks block ((h >> 32) * z) >> 32, and in that
block sets one bit per word: bit ((h & 0xffffffff) * SALT[i]) >> 27 of word i. A value is absent when some of its
eight bits is unset; an inserted value always finds all eight, so there are no false negatives.

Serialised exactly as a Parquet column chunk stores it: the Thrift compact `BloomFilterHeader` (numBytes, BLOCK,
XXHASH, UNCOMPRESSED) followed by the bitset's words, little-endian, so a Parquet reader can probe it. z need not be a
power of two (the spec's multiply-shift block choice works for any z), which keeps filters within a block of their
optimal size.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

SALT = np.array(
    [0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D, 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31], dtype=np.uint32
)
BLOCK_BYTES = 32
MAX_BYTES = 128 * 1024 * 1024  # parquet-format's upper limit for one filter
_UNION_FIELDS = bytes.fromhex("1c1c0000" * 3) + b"\x00"  # algorithm BLOCK, hash XXHASH, compression UNCOMPRESSED, stop


def header(num_bytes: int) -> bytes:
    """Thrift compact encoding of BloomFilterHeader(numBytes, BLOCK, XXHASH, UNCOMPRESSED)."""
    varint, value = bytearray(), num_bytes << 1  # zigzag of a non-negative i32
    while value >= 0x80:
        varint.append(value & 0x7F | 0x80)
        value >>= 7
    varint.append(value)
    return b"\x15" + bytes(varint) + _UNION_FIELDS  # field 1, type i32


def false_positive_rate(distinct: int, num_blocks: int) -> float:
    """The expected rate at which an absent value is found: a block holds Poisson(distinct / blocks) values, and an
    absent value is found when its eight bits, one per word of its block, are all set."""
    load = distinct / num_blocks
    if load == 0:
        return 0.0
    counts = np.arange(int(load + 12 * math.sqrt(load) + 30))
    log_factorial = np.concatenate([[0.0], np.cumsum(np.log(counts[1:]))])
    log_poisson = counts * math.log(load) - load - log_factorial
    return float(np.sum(np.exp(log_poisson) * (1 - (31 / 32) ** counts) ** 8))


@lru_cache(maxsize=4096)  # files of a table share their few (distinct count, rate) pairs
def optimal_bytes(distinct: int, fpp: float) -> int:
    """The fewest whole blocks whose expected false-positive rate for `distinct` values is at most `fpp`.

    parquet-format's closed form (-8 n / ln(1 - fpp^(1/8)) bits) ignores how unevenly values fall into blocks and
    measures ~1.5x its rate here; writers that round up to a power of two hide that. The exact rate is monotone in
    the block count, so the least sufficient count is found by bisection from the closed form."""
    low = max(1, math.ceil(-8 * max(distinct, 1) / math.log(1 - fpp ** (1 / 8)) / 8 / BLOCK_BYTES))
    high = low
    while false_positive_rate(distinct, high) > fpp and high * BLOCK_BYTES < MAX_BYTES:
        low, high = high, high * 2
    while low < high:
        middle = (low + high) // 2
        if false_positive_rate(distinct, middle) > fpp:
            low = middle + 1
        else:
            high = middle
    return min(MAX_BYTES, high * BLOCK_BYTES)


def _blocks_and_masks(hashes: np.ndarray, num_blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """Per hash, its block and the eight words of its mask."""
    blocks = ((hashes >> np.uint64(32)) * np.uint64(num_blocks)) >> np.uint64(32)
    with np.errstate(over="ignore"):
        products = (hashes & np.uint64(0xFFFFFFFF)).astype(np.uint32)[:, None] * SALT[None, :]
    return blocks.astype(np.int64), np.left_shift(np.uint32(1), products >> np.uint32(27))


BUILD_CHUNK = 1 << 18  # hashes set at a time: bounds the (hashes, 8) masks to ~20 MB whatever the file


def build(hashes: np.ndarray, num_bytes: int) -> bytes:
    """A serialised filter of `num_bytes` (a multiple of 32) holding every hash in `hashes` (uint64)."""
    num_blocks = num_bytes // BLOCK_BYTES
    words = np.zeros(num_blocks * 8, dtype=np.uint32)
    for start in range(0, len(hashes), BUILD_CHUNK):
        blocks, masks = _blocks_and_masks(hashes[start : start + BUILD_CHUNK], num_blocks)
        np.bitwise_or.at(words, (blocks[:, None] * 8 + np.arange(8)).ravel(), masks.ravel())
    return header(num_bytes) + words.astype("<u4").tobytes()


def is_split_block(payload: bytes) -> bool:
    """Whether `payload` starts as a serialised split-block filter does (field 1, an i32)."""
    return payload[:1] == b"\x15"


def bitset_of(payload: bytes) -> np.ndarray:
    """The (blocks, 8) words of a serialised filter. Raises ValueError unless `payload` is exactly a header naming
    BLOCK / XXHASH / UNCOMPRESSED and the bitset of the size it states."""
    num_bytes, shift, position = 0, 0, 1
    while position < min(len(payload), 6):
        byte = payload[position]
        num_bytes |= (byte & 0x7F) << shift
        shift += 7
        position += 1
        if not byte & 0x80:
            break
    num_bytes >>= 1
    expected = header(num_bytes)
    if payload[: len(expected)] != expected:
        raise ValueError("split-block Bloom filter header is not BLOCK / XXHASH / UNCOMPRESSED")
    if num_bytes < BLOCK_BYTES or num_bytes % BLOCK_BYTES or len(payload) != len(expected) + num_bytes:
        raise ValueError(f"split-block Bloom filter of {len(payload)} bytes, its header says {num_bytes} + header")
    return np.frombuffer(payload, dtype="<u4", offset=len(expected)).reshape(-1, 8)


def _stacked(payloads: list[bytes], length: int) -> np.ndarray:
    """The (filters, blocks, 8) words of serialised filters of one `length`. The first is checked as `bitset_of`
    checks one; every other must carry the very same header bytes (the header is a function of the length), so
    the rest are checked by comparing bytes, and the bitsets are cut out of one buffer. Raises ValueError as
    `bitset_of` does when any is not such a filter."""
    words = bitset_of(payloads[0])
    prefix = length - words.nbytes
    expected = payloads[0][:prefix]
    if any(payload[:prefix] != expected for payload in payloads):
        raise ValueError("split-block Bloom filter header is not the one of a filter of its size")
    raw = np.frombuffer(b"".join(payloads), dtype=np.uint8).reshape(len(payloads), length)
    return np.ascontiguousarray(raw[:, prefix:]).view("<u4").reshape(len(payloads), -1, 8)


def contains_each(payload: bytes, hashes: np.ndarray) -> np.ndarray:
    """Per hash, whether the serialised filter might hold it."""
    bitset = bitset_of(payload)
    blocks, masks = _blocks_and_masks(hashes, len(bitset))
    return ((bitset[blocks] & masks) == masks).all(axis=1)


def _probed(stacked: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Per (filter of `stacked`, a (filters, blocks, 8) words array, hash): whether the filter might hold the hash,
    i.e. every bit of the hash's mask is set in its block. The eight words are read as four pairs (uint64 views of
    both the words and the masks, so a pair's two words are tested in one operation and line up bit for bit), one
    pair at a time over every (filter, hash): each read is a plain (filters, hashes) gather, which numpy does an
    order of magnitude faster than gathering (filters, hashes, 8) words and reducing the short last axis."""
    blocks, masks = _blocks_and_masks(hashes, stacked.shape[1])
    words = np.ascontiguousarray(stacked, dtype=np.uint32).view(np.uint64)  # (filters, blocks, 4)
    wanted = np.ascontiguousarray(masks).view(np.uint64)  # (hashes, 4)
    held = np.ones((stacked.shape[0], len(hashes)), dtype=bool)
    for pair in range(4):
        mask = wanted[:, pair]
        held &= (words[:, :, pair][:, blocks] & mask) == mask
    return held


def contains_matrix(payloads: list[bytes], hashes: np.ndarray) -> np.ndarray:
    """Per (serialised filter, hash), whether the filter might hold the hash: (filters, hashes) booleans. Filters of
    one size are stacked and probed together, a batch of filters at a time (`PAIRS_PER_PASS` pairs)."""
    result = np.zeros((len(payloads), len(hashes)), dtype=bool)
    by_length: dict[int, list[int]] = {}
    for i, payload in enumerate(payloads):
        by_length.setdefault(len(payload), []).append(i)
    for length, members in by_length.items():
        stacked = _stacked([payloads[i] for i in members], length)  # (filters, blocks, 8)
        step = max(1, PAIRS_PER_PASS // max(len(hashes), 1))
        for start in range(0, len(members), step):
            result[members[start : start + step]] = _probed(stacked[start : start + step], hashes)
    return result


PAIRS_PER_PASS = 1 << 16  # (filter, hash) pairs probed at once: a pass's temporaries (~0.5 MB) stay in cache (passes of
# a million pairs measured 5-8x slower per pair on the 2-core machine: fresh pages and cache misses)


def might_contain_each(payloads: list[bytes], hashes: np.ndarray) -> np.ndarray:
    """Per serialised filter, whether it might hold one of `hashes`. Filters of one size are stacked and probed
    together, a batch of hashes at a time, leaving out the filters already hit."""
    result = np.zeros(len(payloads), dtype=bool)
    by_length: dict[int, list[int]] = {}
    for i, payload in enumerate(payloads):
        by_length.setdefault(len(payload), []).append(i)
    for length, members in by_length.items():
        stacked = _stacked([payloads[i] for i in members], length)  # (filters, blocks, 8)
        hit = np.zeros(len(members), dtype=bool)
        step = max(1, PAIRS_PER_PASS // len(members))
        for start in range(0, len(hashes), step):
            open_rows = np.flatnonzero(~hit)
            if not len(open_rows):
                break
            hit[open_rows] = _probed(stacked[open_rows], hashes[start : start + step]).any(axis=1)
        result[members] = hit
    return result
