"""Work caps, and the two exceptions that mean "this module cannot decide here".

Patterns come from users, and a few characters can stand for a huge automaton (`(.{0,30}){30}q`), while a product
of two automata costs (states x states) edge tests. So every step whose cost can grow is metered, and going over a
cap raises TooComplex; like Unsupported syntax, the caller then answers "might match" (or "not proven to all
match"): a cap costs precision, never correctness. Nesting is capped up front rather than by catching
RecursionError, so the recursive parser, compiler and emitter stay far below Python's recursion limit.
"""

from __future__ import annotations

MAX_PATTERN_CHARS = 1_000
"""Longest LIKE / RLIKE / starts_with pattern that is analysed at all."""

MAX_NESTING = 64
"""Deepest group nesting the parser accepts, and deepest syntax tree the emitter writes (so stored regexes always
parse back)."""

MAX_PATTERN_NFA_STATES = 2_000
"""Thompson NFA states for one pattern (`(a?){1000}` needs 4,000)."""

MAX_PATTERN_CLOSURE_WORK = 20_000
"""States and edges visited while removing a pattern's epsilon transitions."""

MAX_PRODUCT_WORK = 30_000
"""Edge pairs tested by one intersection or inclusion check (stored automaton x pattern automaton)."""

STORED_CACHE_SIZE = 256
"""Parsed stored regexes kept (files of one table often share a regex; parsing one costs 0.2-7 ms). Here, not in
query.py, so the automaton index kind can size its cache without importing the automaton machinery."""

MAX_STORED_NFA_STATES = 100_000
MAX_STORED_CLOSURE_WORK = 10_000_000
"""Stored regexes are our own output, bounded by the build's byte budget: their caps only guard against corrupt
or foreign input."""


class Unsupported(Exception):
    """Pattern syntax outside the subset that Java, Python `re` and RE2 read the same way."""


class TooComplex(Exception):
    """A work cap was reached."""


class WorkMeter:
    """Counts work against a cap. Callers spend before each step, so the work done exceeds the cap by at most one
    step (in the products: one pass over a pattern state's edges)."""

    __slots__ = ("cap", "used", "what")

    def __init__(self, cap: int, what: str) -> None:
        self.cap = cap
        self.used = 0
        self.what = what

    def spend(self, amount: int) -> None:
        self.used += amount
        if self.used > self.cap:
            raise TooComplex(f"{self.what}: more than {self.cap} steps")
