"""Husky-style trimmed-automaton tag index (design: docs/design/trimmed-automaton.md).

At build time, `build_tag_regex` turns the distinct values of one file's column into an anchored regex whose
language holds every value (exactly the values when the budget allows). At query time, `TagAutomaton.from_regex`
reads it back and answers predicate leaves (=, IN, NOT IN, starts_with, LIKE, RLIKE) by automaton products,
never by backtracking. The one rule: "cannot match" and "all match" are only answered when proven; anything
unsupported or too costly answers "might match".

Modules, in pipeline order: ranges (code-point sets), dfa (minimal acyclic DFA), build (budget and
generalisation), emit (DFA -> regex text), syntax (regex trees), parse (patterns and their safe readings),
nfa (range NFAs and products), query (TagAutomaton), limits (work caps).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from indexlib.automaton.build import TagRegex, build_tag_regex
    from indexlib.automaton.limits import TooComplex, Unsupported
    from indexlib.automaton.query import TagAutomaton

# imported on first use: the index kind's module imports `limits` (its cache size) on every start, and a lookup
# that reads no automaton never needs the rest
_LAZY = {
    "TagAutomaton": "indexlib.automaton.query",
    "TagRegex": "indexlib.automaton.build",
    "TooComplex": "indexlib.automaton.limits",
    "Unsupported": "indexlib.automaton.limits",
    "build_tag_regex": "indexlib.automaton.build",
}
__all__ = ["TagAutomaton", "TagRegex", "TooComplex", "Unsupported", "build_tag_regex"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'indexlib.automaton' has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)
