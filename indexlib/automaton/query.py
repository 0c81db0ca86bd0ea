"""One stored regex, answering predicate leaves: "might some value match?" and "does every value match?".

The stored language is a superset of the file's values (build.py), so each answer is a fact about the language
that implies the same fact about the values:
- might_match is False only if the language does not intersect the pattern's WIDEST reading;
- all_match is True only if the language is included in the pattern's NARROWEST reading (parse.py);
- accepts / accepts_prefix are False only if no string of the language equals / starts with the literal;
- subset_of is True only if every string of the language is in the list.
Unsupported syntax, a work cap or a recursion error means "cannot decide": might_match answers True and
all_match False. An empty language (no non-null value) might match nothing and vacuously all-matches.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence

from indexlib.automaton.emit import ANY_STRING_REGEX
from indexlib.automaton.limits import (
    MAX_PATTERN_CLOSURE_WORK,
    MAX_PATTERN_NFA_STATES,
    MAX_PRODUCT_WORK,
    MAX_STORED_CLOSURE_WORK,
    MAX_STORED_NFA_STATES,
    STORED_CACHE_SIZE,
    TooComplex,
    Unsupported,
    WorkMeter,
)
from indexlib.automaton.nfa import RangeNfa, compile_nfa, holds_any, included, intersects, only_values, run
from indexlib.automaton.parse import Reading, parse_stored_regex, pattern_language

PATTERN_CACHE_SIZE = 256
"""Compiled patterns kept (one query checks the same pattern against every file)."""


class TagAutomaton:
    """The language of one stored regex. Build with `from_regex`; instances are shared and immutable."""

    __slots__ = ("regex", "_nfa")

    def __init__(self, regex: str, nfa: RangeNfa) -> None:
        self.regex = regex
        self._nfa = nfa

    @classmethod
    def from_regex(cls, regex: str) -> TagAutomaton:
        """A regex this package wrote. Anything else it cannot read means "might hold any value"."""
        return _stored_automaton(regex)

    def __repr__(self) -> str:
        return f"TagAutomaton.from_regex({self.regex!r})"

    def is_empty(self) -> bool:
        return self._nfa.empty

    def accepts(self, value: str) -> bool:
        """`value` is in the language (`col = value`, `col IN (...)`)."""
        nfa = self._nfa
        return any(nfa.accepting[state] for state in run(nfa, value))

    def accepts_any(self, ordered: Sequence[str]) -> bool:
        """Some value of `ordered` (sorted, distinct) is in the language (`col IN (...)` of any length)."""
        return holds_any(self._nfa, ordered)

    def accepts_prefix(self, prefix: str) -> bool:
        """Some string of the language starts with `prefix` (`starts_with`, `LIKE 'prefix%'`)."""
        return bool(run(self._nfa, prefix))

    def subset_of(self, values: Collection[str]) -> bool:
        """Every string of the language is in `values`: then `col NOT IN values` is false on every non-null row,
        and `col IN values` is true on every one."""
        return only_values(self._nfa, values)

    def might_match(self, kind: str, pattern: str, escape: str | None = None) -> bool:
        """False only if it is proven that no string of the language matches. `kind`: "like" (with optional
        ESCAPE character `escape`), "starts_with" or "regexp" (RLIKE: found anywhere, as Java's Matcher.find)."""
        if kind == "starts_with":
            return self.accepts_prefix(pattern)
        pattern_nfa = _pattern_nfa(kind, pattern, escape, Reading.WIDEST)
        if pattern_nfa is None:
            return True
        try:
            return intersects(self._nfa, pattern_nfa, WorkMeter(MAX_PRODUCT_WORK, "intersection"))
        except TooComplex:
            return True

    def all_match(self, kind: str, pattern: str, escape: str | None = None) -> bool:
        """True only if it is proven that every string of the language matches (same arguments as might_match)."""
        pattern_nfa = _pattern_nfa(kind, pattern, escape, Reading.NARROWEST)
        if pattern_nfa is None:
            return False
        try:
            return included(self._nfa, pattern_nfa, WorkMeter(MAX_PRODUCT_WORK, "inclusion"))
        except TooComplex:
            return False


@functools.lru_cache(maxsize=STORED_CACHE_SIZE)
def _stored_automaton(regex: str) -> TagAutomaton:
    try:
        nfa = compile_nfa(parse_stored_regex(regex), MAX_STORED_NFA_STATES, MAX_STORED_CLOSURE_WORK)
    except (Unsupported, TooComplex, RecursionError):
        # Not written by emit.py (corrupt, or from a newer writer): unknown contents might hold any value.
        nfa = compile_nfa(parse_stored_regex(ANY_STRING_REGEX), MAX_STORED_NFA_STATES, MAX_STORED_CLOSURE_WORK)
    return TagAutomaton(regex, nfa)


@functools.lru_cache(maxsize=PATTERN_CACHE_SIZE)
def _pattern_nfa(kind: str, pattern: str, escape: str | None, reading: Reading) -> RangeNfa | None:
    """None: unsupported syntax or over a work cap, so nothing can be proven with this pattern."""
    try:
        return compile_nfa(
            pattern_language(kind, pattern, escape, reading), MAX_PATTERN_NFA_STATES, MAX_PATTERN_CLOSURE_WORK
        )
    except (Unsupported, TooComplex, RecursionError):
        return None
