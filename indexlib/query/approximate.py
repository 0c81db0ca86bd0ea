"""Exact numbers meeting binary floating point (DOUBLE, FLOAT/REAL) the way the engines compare them.

Spark, DuckDB and Trino compare an exact-typed value (int, long, decimal) with a DOUBLE or FLOAT by converting the
exact value to binary floating point first. Whether a row matches therefore depends on how its value rounds:
2^53 + 1 and 2^63 - 1 convert to 2^53 and 2^63, decimal 1.01 to the double nearest 1.01. Conversion is monotone, so
the exact values whose conversion satisfies `conv(y) op L` form an interval (or the complement of one), computed
here exactly from the rounding interval of L: the exact values that round to L, round-half-even at both edges.

Engines do not all convert the same way (measured): int64 -> double or float is one correctly rounded hardware
conversion everywhere; a decimal with an unscaled value up to 2^53 and a scale up to 22 is correctly rounded too
(DuckDB and Trino divide the exactly converted unscaled value by an exact power of ten; Spark's BigDecimal
conversion is always correct), but DuckDB's conversion of a wide DECIMAL type (HUGEINT storage, over 18 digits) is
off by up to one ulp even for values below 2^63, and its decimal -> FLOAT is a double rounding through DOUBLE.
Where a conversion may be off, `error_ulps` says by how much and the interval is widened by that many steps of the
format: sound under every engine, never "all rows match".
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np

DOUBLE, FLOAT = 64, 32
_INT64_LIMIT = 2**63
_MAX_SCALE = 38
_ULPS_OFF = {DOUBLE: 2, FLOAT: 1}  # measured worst case (1 ulp) with a margin; FLOAT: one double rounding
_EXACT_POWERS_OF_TEN = {DOUBLE: 22, FLOAT: 10}  # 10**s is exact in the format for s up to this
_EXACT_INTEGERS = {DOUBLE: 2**53, FLOAT: 2**24}
_LARGEST = {DOUBLE: float(np.finfo(np.float64).max), FLOAT: float(np.finfo(np.float32).max)}


class Float32(float):
    """A FLOAT / REAL literal (binary32): its value is exactly a float32, held as the equal Python float."""

    def __new__(cls, value: float) -> Float32:
        rounded = float(np.float32(value))
        if rounded != value and math.isfinite(value):
            raise ValueError(f"{value!r} is not a float32 value")
        return super().__new__(cls, rounded)

    def __neg__(self) -> Float32:
        return Float32(-float(self))

    def __repr__(self) -> str:
        return f"CAST({np.float32(self)} AS REAL)"

    __str__ = __repr__


def bits_of(value: float) -> int:
    """The binary format of an approximate literal: FLOAT for `Float32`, else DOUBLE."""
    return FLOAT if isinstance(value, Float32) else DOUBLE


def nearest(x: Fraction, bits: int) -> float:
    """`x` correctly rounded to the format (round-half-even), as the equal Python float."""
    try:
        guess = float(x)  # Python rounds int / int correctly to double
    except OverflowError:
        return math.inf if x > 0 else -math.inf
    if bits == DOUBLE or not math.isfinite(guess):
        return guess
    candidate = float(np.float32(guess))  # may be off by a double rounding: compare the neighbours exactly
    options = [candidate, _adjacent(candidate, FLOAT, -math.inf), _adjacent(candidate, FLOAT, math.inf)]
    finite = [v for v in options if math.isfinite(v)]
    return min(finite, key=lambda v: (abs(Fraction(v) - x), not _even(v, FLOAT)))


def step(value: float, bits: int, count: int) -> float:
    """`count` representable values up (count > 0) or down from `value` in the format, stopping at the largest
    finite ones (no exact column comes near them: DECIMAL(38) stays below 10^38, FLOAT's largest is 3.4 * 10^38)."""
    toward = math.inf if count > 0 else -math.inf
    for _ in range(abs(count)):
        if abs(value) == _LARGEST[bits] and (value > 0) == (count > 0):
            break
        value = _adjacent(value, bits, toward)
    return value


def _adjacent(value: float, bits: int, toward: float) -> float:
    """The next representable value toward `toward` (may be infinite)."""
    if bits == DOUBLE:
        return math.nextafter(value, toward)
    with np.errstate(over="ignore"):
        return float(np.nextafter(np.float32(value), np.float32(toward), dtype=np.float32))


def _even(value: float, bits: int) -> bool:
    """The significand's last bit is 0: round-half-even sends ties to this value."""
    if bits == DOUBLE:
        return struct.unpack("<q", struct.pack("<d", value))[0] & 1 == 0
    return int(np.float32(value).view(np.uint32)) & 1 == 0


@dataclass(frozen=True)
class Edge:
    """One end of a rounding interval: an exact value and whether it belongs to the interval."""

    at: Fraction
    closed: bool


def rounding_interval(value: float, bits: int) -> tuple[Edge, Edge]:
    """The exact values that round to `value` (finite, in the format), round-half-even: the midpoints to both
    neighbours, each included when `value` is the even one. Past the largest finite value the half-ulp is mirrored
    (values beyond it round to infinity)."""
    below, above = _adjacent(value, bits, -math.inf), _adjacent(value, bits, math.inf)
    exact = Fraction(value)
    low = (Fraction(below) + exact) / 2 if math.isfinite(below) else exact - (Fraction(above) - exact) / 2
    high = (exact + Fraction(above)) / 2 if math.isfinite(above) else exact + (exact - Fraction(below)) / 2
    even = _even(value, bits)
    return Edge(low, even), Edge(high, even)


def error_ulps(scale: int, magnitude: Fraction, bits: int, integer_type: bool = False) -> int:
    """How many steps of the format an engine's conversion of an exact value near `magnitude` may be off its correct
    rounding (0: every engine rounds it correctly; see the module docstring). `integer_type`: an INT or BIGINT value
    (one hardware conversion); a DECIMAL, even with scale 0, may take DuckDB's HUGEINT path whatever its value."""
    if integer_type and magnitude < _INT64_LIMIT:
        return 0
    if (
        scale <= _EXACT_POWERS_OF_TEN[bits]
        and magnitude * 10**scale <= _EXACT_INTEGERS[bits] // 2
        and (bits == DOUBLE or scale == 0)
    ):
        return 0
    return _ULPS_OFF[bits]


def scale_of(value: int | Decimal | Fraction) -> int | None:
    """Decimal places of an exact literal (None: not a finite decimal, no engine holds it exactly)."""
    if isinstance(value, int):
        return 0
    if isinstance(value, Decimal):
        return max(0, -int(value.as_tuple().exponent))
    for scale in range(_MAX_SCALE + 1):  # a quotient of exact literals: its decimal places, if it has few
        if (value * 10**scale).denominator == 1:
            return scale
    return None


@dataclass(frozen=True)
class Binary:
    """What the engines make of one literal in a binary format: a value in [low, high] (low == high when they all
    agree)."""

    low: float
    high: float
    bits: int

    @property
    def exact(self) -> bool:
        return self.low == self.high


def as_binary(value: int | Decimal | Fraction | float, bits: int) -> Binary | None:
    """An exact or approximate literal in the format as the engines convert it; None when it is not finite there."""
    if isinstance(value, float):
        if bits == FLOAT and not isinstance(value, Float32):
            raise ValueError("a DOUBLE value is not converted to FLOAT by a comparison")
        return Binary(value, value, bits) if math.isfinite(value) else None
    exact = Fraction(value)
    centre = nearest(exact, bits)
    if not math.isfinite(centre):
        return None
    scale = scale_of(value)
    off = _ULPS_OFF[bits] if scale is None else error_ulps(scale, abs(exact), bits, isinstance(value, int))
    low, high = step(centre, bits, -off), step(centre, bits, off)
    return Binary(low, high, bits) if math.isfinite(low) and math.isfinite(high) else None


def matching_set(op: str, literal: Binary, conversion_ulps: int) -> list[tuple[str, Fraction]] | None:
    """The exact values y with `conv(y) op literal` (conv: conversion to `literal.bits`, off by up to
    `conversion_ulps` steps), as comparisons on y: all must hold for "=", any for "!="; one for an ordering.
    None for "!=" when every non-NULL y might match. A superset whenever `literal` or the conversion is inexact."""
    spread = conversion_ulps
    if op == "!=":
        if spread or not literal.exact:
            return None
        low, high = rounding_interval(literal.low, literal.bits)
        return [("<" if low.closed else "<=", low.at), (">" if high.closed else ">=", high.at)]
    if op in ("=", ">", ">="):
        low, low_high = rounding_interval(step(literal.low, literal.bits, -spread), literal.bits)
    if op in ("=", "<", "<="):
        high_low, high = rounding_interval(step(literal.high, literal.bits, spread), literal.bits)
    if op == "=":
        return [(">=" if low.closed else ">", low.at), ("<=" if high.closed else "<", high.at)]
    if op == "<":  # conv(y) < L: y below the values rounding to L
        return [("<" if high_low.closed else "<=", high_low.at)]
    if op == "<=":
        return [("<=" if high.closed else "<", high.at)]
    if op == ">":
        return [(">" if low_high.closed else ">=", low_high.at)]
    return [(">=" if low.closed else ">", low.at)]  # ">="
