"""XXH64 (seed 0) over whole arrays with numpy: the hash Parquet's split-block Bloom filters use.

Vectorised so that a file's distinct values are hashed without a Python call per value: 8-byte values (int64,
float64 bits) in one pass, and variable-length values (Arrow binary) a stripe or lane at a time over all the values
that still have one. Tested against the reference implementation (the `xxhash` package) on random inputs.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from indexlib.statistics.binary_layout import binary_layout

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * _P2, 31) * _P1


def _avalanche(h: np.ndarray) -> np.ndarray:
    h = (h ^ (h >> np.uint64(33))) * _P2
    h = (h ^ (h >> np.uint64(29))) * _P3
    return h ^ (h >> np.uint64(32))


SHORT_BYTES = 8  # inputs `hash_short` takes: at most one lane
CHUNK = 1 << 20  # values hashed at a time: bounds the temporaries whatever the array's length


def hash_words(words: np.ndarray) -> np.ndarray:
    """XXH64 of each value's 8 little-endian bytes (`words`: any 8-byte dtype, viewed as uint64)."""
    lanes = np.ascontiguousarray(words).view("<u8")
    out = np.empty(len(lanes), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for start in range(0, len(lanes), CHUNK):
            chunk = lanes[start : start + CHUNK].astype(np.uint64)
            h = np.full(len(chunk), _P5 + np.uint64(8), dtype=np.uint64)
            h ^= _round(np.zeros_like(chunk), chunk)
            out[start : start + CHUNK] = _avalanche(_rotl(h, 27) * _P1 + _P4)
    return out


def hash_binary(values: pa.Array) -> np.ndarray:
    """XXH64 of each value's bytes (`values`: a binary or string array without nulls)."""
    offsets, raw = binary_layout(values)
    n = len(values)
    data_bytes = np.concatenate([raw, np.zeros(8, np.uint8)])  # a lane read at the end stays in bounds
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    word_offsets = np.arange(8)

    def read(positions: np.ndarray, width: int) -> np.ndarray:
        gathered = np.ascontiguousarray(data_bytes[positions[:, None] + word_offsets[:width]])
        if width == 8:
            return gathered.view("<u8").ravel().astype(np.uint64)
        return gathered.view("<u4").ravel().astype(np.uint64)

    with np.errstate(over="ignore"):
        h = np.full(n, _P5, dtype=np.uint64)
        stripes = lengths // 32
        long_inputs = np.flatnonzero(stripes > 0)
        if len(long_inputs):
            acc = np.zeros((4, len(long_inputs)), dtype=np.uint64)
            acc[0] = _P1 + _P2
            acc[1] = _P2
            acc[3] = np.uint64(0) - _P1
            for stripe in range(int(stripes.max())):
                active = np.flatnonzero(stripes[long_inputs] > stripe)
                base = starts[long_inputs[active]] + 32 * stripe
                for lane in range(4):
                    acc[lane, active] = _round(acc[lane, active], read(base + 8 * lane, 8))
            merged = _rotl(acc[0], 1) + _rotl(acc[1], 7) + _rotl(acc[2], 12) + _rotl(acc[3], 18)
            for lane in range(4):
                merged = (merged ^ _round(np.zeros_like(merged), acc[lane])) * _P1 + _P4
            h[long_inputs] = merged
        h += lengths.astype(np.uint64)
        position = starts + stripes * 32
        rest = lengths & 31
        for lane in range(3):
            active = np.flatnonzero(rest >= 8 * (lane + 1))
            k1 = _round(np.zeros(len(active), np.uint64), read(position[active] + 8 * lane, 8))
            h[active] = _rotl(h[active] ^ k1, 27) * _P1 + _P4
        position = position + (rest // 8) * 8
        rest = rest & 7
        active = np.flatnonzero(rest >= 4)
        h[active] = _rotl(h[active] ^ (read(position[active], 4) * _P1), 23) * _P2 + _P3
        position = position + (rest & 4)
        rest = rest & 3
        for byte in range(3):
            active = np.flatnonzero(rest > byte)
            value = data_bytes[position[active] + byte].astype(np.uint64)
            h[active] = _rotl(h[active] ^ (value * _P5), 11) * _P1
        return _avalanche(h)


def hash_short(words: np.ndarray, length: int) -> np.ndarray:
    """XXH64 of `length` (1 .. 8) bytes held little-endian in each word of `words` (uint64, the bytes above them
    zero): `hash_binary`'s short-input steps (a whole lane for 8 bytes; else 4 bytes, then one at a time), so a
    caller that reads short texts as numbers (to deduplicate them as numbers) hashes them without cutting them out."""
    with np.errstate(over="ignore"):
        h = np.full(len(words), _P5 + np.uint64(length), dtype=np.uint64)
        if length == SHORT_BYTES:
            return _avalanche(_rotl(h ^ _round(np.zeros_like(words), words), 27) * _P1 + _P4)
        shift = 0
        if length >= 4:
            h = _rotl(h ^ ((words & np.uint64(0xFFFFFFFF)) * _P1), 23) * _P2 + _P3
            shift = 32
        for _ in range(length % 4):
            h = _rotl(h ^ (((words >> np.uint64(shift)) & np.uint64(0xFF)) * _P5), 11) * _P1
            shift += 8
        return _avalanche(h)
