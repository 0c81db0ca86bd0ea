"""From one file's distinct values to the regex stored in the index: exact when it fits, else a superset.

The budget is a state cap (query CPU) and a byte cap (index size). When the exact minimal DFA is over either, we
only take steps that grow the language, so the regex always accepts every value:
- a ladder of symbol classes, finest first: exact, digits as one class, then the same with states of equal
  structure merged, letters, alphanumerics, everything but ASCII punctuation, any character. An edge keeps the
  characters really seen on it, so digits become `[0-3]` rather than `[0-9]`;
- prefix truncation: the deepest prefix length that fits, after which anything may follow.
The first rung that fits whole competes with the deepest truncation at each finer rung that truncates well; the
winner accepts the fewest of PROBES near-miss strings (the file's own values recombined, or with one character
substituted within its class), drawn with a fixed seed, so the same values always give the same regex.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from indexlib.automaton.dfa import Accept, Dfa, build_dfa
from indexlib.automaton.emit import ANY_STRING_REGEX, EMPTY_LANGUAGE_REGEX, emit_regex
from indexlib.automaton.limits import TooComplex

PROBES = 200
PROBE_SEED = 0


@dataclass(frozen=True)
class TagRegex:
    """`regex` is anchored (`^...$`, full match) and reads the same in Python `re` and Java `Pattern`; its
    language holds every value. `exact`: the language is exactly the distinct values. `states`: states of the
    minimal DFA that was emitted."""

    regex: str
    exact: bool
    states: int


def build_tag_regex(
    values: Iterable[str], max_states: int = 256, max_bytes: int = 2048, trim: bool | str = True
) -> TagRegex:
    r"""Distinct non-null strings of one file's column -> a regex whose language is a superset of them (exactly
    them when that fits), with at most `max_states` DFA states and `max_bytes` bytes of UTF-8. Deterministic: the
    same set of values, in any order and with duplicates, gives the same regex. `trim`: True, the whole search
    (the ladder, prefix truncations, the ranking by probes: 20-70 ms for up to 256 values); "classes", the ladder
    alone, the first rung that fits whole (at most 7 attempts, each abandoned at `max_states`: a few ms); False,
    only the exact regex (a set that does not fit gives `^[\s\S]*$` at once; well under a millisecond)."""
    if max_states < 1 or max_bytes < len(ANY_STRING_REGEX):
        raise ValueError(f"budget too small: max_states={max_states}, max_bytes={max_bytes}")
    distinct = sorted(set(values))
    if not distinct:
        return TagRegex(EMPTY_LANGUAGE_REGEX, exact=True, states=1)
    if any(0xD800 <= ord(char) <= 0xDFFF for value in distinct for char in value):
        # Lone surrogates cannot come from UTF-8 data, and Java and Python read them differently: give up.
        return TagRegex(ANY_STRING_REGEX, exact=False, states=1)
    return _Search(distinct, max_states, max_bytes).run(trim)


@dataclass(frozen=True)
class _Rung:
    keys: Callable[[str], str]
    """Maps a value to its symbol keys, one per character (a class is keyed by one of its members)."""
    merge: bool
    truncate: bool
    """Also tried with prefix truncation when a coarser rung is the first to fit whole (the last rung: when no
    rung fits whole)."""


_ASCII_PUNCTUATION = " !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
_DIGITS = str.maketrans("0123456789", "0" * 10)
_LETTERS = str.maketrans(
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0" * 10 + "a" * 26 + "A" * 26
)
_ALPHANUMERICS = str.maketrans("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0" * 62)
_NOT_PUNCTUATION = re.compile("[^" + re.escape(_ASCII_PUNCTUATION) + "]")


def _exact_keys(value: str) -> str:
    return value


def _digit_keys(value: str) -> str:
    return value.translate(_DIGITS)


def _letter_keys(value: str) -> str:
    return value.translate(_LETTERS)


def _alphanumeric_keys(value: str) -> str:
    return value.translate(_ALPHANUMERICS)


def _punctuation_keys(value: str) -> str:
    return _NOT_PUNCTUATION.sub("\0", value)


def _any_char_keys(value: str) -> str:
    return "\0" * len(value)


LADDER = (  # finest first
    _Rung(_exact_keys, merge=False, truncate=True),
    _Rung(_digit_keys, merge=False, truncate=False),
    _Rung(_digit_keys, merge=True, truncate=True),
    _Rung(_letter_keys, merge=True, truncate=True),
    _Rung(_alphanumeric_keys, merge=True, truncate=False),
    _Rung(_punctuation_keys, merge=True, truncate=False),
    _Rung(_any_char_keys, merge=True, truncate=True),
)


@dataclass(frozen=True)
class _Candidate:
    regex: str
    dfa: Dfa


class _Search:
    def __init__(self, values: list[str], max_states: int, max_bytes: int) -> None:
        self.values = values
        self.max_states = max_states
        self.max_bytes = max_bytes
        self.longest = max(map(len, values))
        self._sorted_words: dict[Callable[[str], str], list[tuple[str, str]]] = {}

    def run(self, trim: bool | str = True) -> TagRegex:
        candidates: list[_Candidate] = []
        first_fit = len(LADDER)
        for position, rung in enumerate(LADDER if trim else LADDER[:1]):
            whole = self._attempt(rung, depth=None)
            if whole is not None:
                if position == 0:
                    return TagRegex(whole.regex, exact=True, states=whole.dfa.num_states)
                candidates.append(whole)
                first_fit = position
                break
        if not trim or (trim == "classes" and not candidates):
            return TagRegex(ANY_STRING_REGEX, exact=False, states=1)
        if trim == "classes":
            return TagRegex(candidates[0].regex, exact=False, states=candidates[0].dfa.num_states)
        for rung in LADDER[:first_fit]:
            if rung.truncate and (truncated := self._deepest_truncation(rung)) is not None:
                candidates.append(truncated)
        # Not empty: the exact rung truncated to depth 0 is `^[\s\S]*$`, which fits any valid budget.
        best = candidates[0] if len(candidates) == 1 else self._rank(candidates)
        return TagRegex(best.regex, exact=False, states=best.dfa.num_states)

    def _deepest_truncation(self, rung: _Rung) -> _Candidate | None:
        """Binary search on the prefix length: fewer kept characters rarely need more states or bytes."""
        low, high, best = 0, self.longest - 1, None
        while low <= high:
            middle = (low + high) // 2
            candidate = self._attempt(rung, depth=middle)
            if candidate is None:
                high = middle - 1
            else:
                best, low = candidate, middle + 1
        return best

    def _attempt(self, rung: _Rung, depth: int | None) -> _Candidate | None:
        if depth is None:
            sequence = [(keys, text, Accept.YES) for keys, text in self._words(rung)]
        else:  # cut words share prefixes: deduplicate, then restore the order by keys
            sequence = sorted(
                {
                    (keys, text, Accept.YES) if len(keys) <= depth else (keys[:depth], text[:depth], Accept.ANY_SUFFIX)
                    for keys, text in self._words(rung)
                }
            )
        try:
            dfa = build_dfa(sequence, self.max_states, rung.merge)
            regex = emit_regex(dfa)
        except TooComplex:
            return None
        return _Candidate(regex, dfa) if len(regex.encode()) <= self.max_bytes else None

    def _words(self, rung: _Rung) -> list[tuple[str, str]]:
        if rung.keys not in self._sorted_words:
            self._sorted_words[rung.keys] = sorted((rung.keys(value), value) for value in self.values)
        return self._sorted_words[rung.keys]

    def _rank(self, candidates: list[_Candidate]) -> _Candidate:
        probes = near_misses(self.values, PROBES, PROBE_SEED)

        def score(position: int) -> tuple[int, int, int]:
            candidate = candidates[position]
            false_positives = sum(candidate.dfa.accepts(probe) for probe in probes)
            return false_positives, len(candidate.regex.encode()), position

        return candidates[min(range(len(candidates)), key=score)]


_SEPARATORS = re.compile(r"([-._/:@ ]+)")
_SUBSTITUTION_CLASSES = ("0123456789", "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def near_misses(values: list[str], count: int, seed: int) -> list[str]:
    """Up to `count` plausible other values of the same column, none of them in `values` (sorted, distinct):
    segments between separators recombined across values with as many segments (70%), or one character replaced
    by another of its class (digit, lower-case, upper-case letter)."""
    rng = random.Random(seed)
    known = set(values)
    segmented = [_SEPARATORS.split(value) for value in values]
    by_shape: dict[int, list[list[str]]] = {}
    for segments in segmented:
        by_shape.setdefault(len(segments), []).append(segments)
    found: set[str] = set()
    for _ in range(4 * count):
        index = rng.randrange(len(values))
        value = values[index]
        if rng.random() < 0.7:
            shape = by_shape[len(segmented[index])]
            probe = "".join(rng.choice(shape)[position] for position in range(len(segmented[index])))
        elif value:
            position = rng.randrange(len(value))
            pool = next((chars for chars in _SUBSTITUTION_CLASSES if value[position] in chars), value)
            probe = value[:position] + rng.choice(pool) + value[position + 1 :]
        else:
            continue
        if probe not in known:
            found.add(probe)
            if len(found) >= count:
                break
    return sorted(found)
