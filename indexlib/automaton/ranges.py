"""Sets of Unicode code points, as sorted tuples of disjoint, non-adjacent, inclusive (low, high) ranges.

Automaton edges carry such sets rather than single characters: the alphabet is all of Unicode, and "any
character" or "anything but a line terminator" must stay one edge.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

MAX_CODE_POINT = 0x10FFFF

Ranges = tuple[tuple[int, int], ...]

ANY_CHAR: Ranges = ((0, MAX_CODE_POINT),)


def normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    merged: list[list[int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    return tuple((low, high) for low, high in merged)


def from_code_points(code_points: Iterable[int]) -> Ranges:
    return normalize((code_point, code_point) for code_point in code_points)


def from_text(text: str) -> Ranges:
    return from_code_points(map(ord, text))


def union(*sets: Ranges) -> Ranges:
    return normalize(pair for ranges in sets for pair in ranges)


def complement(ranges: Ranges) -> Ranges:
    gaps: list[tuple[int, int]] = []
    next_low = 0
    for low, high in ranges:
        if low > next_low:
            gaps.append((next_low, low - 1))
        next_low = high + 1
    if next_low <= MAX_CODE_POINT:
        gaps.append((next_low, MAX_CODE_POINT))
    return tuple(gaps)


def intersection(*sets: Ranges) -> Ranges:
    return complement(union(*(complement(ranges) for ranges in sets)))


def contains(ranges: Ranges, code_point: int) -> bool:
    position = bisect_right(ranges, (code_point, MAX_CODE_POINT))
    return position > 0 and ranges[position - 1][1] >= code_point
