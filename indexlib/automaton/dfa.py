"""Minimal acyclic DFA of a sorted word list (Daciuk et al., 2000), over symbol keys, with early abort.

Words arrive sorted, so a state is complete as soon as the next word leaves its subtree; it is then replaced by an
equivalent registered state or registered itself. Registered states are never revisited, so the register size is
the state count, and the build stops as soon as it passes the budget: an exact attempt on 10,000 UUIDs fails after
a handful of words instead of after building 300,000 states.

The caller generalises through the words it passes; each option only grows the language:
- keys: each character maps to a key (itself, or its class such as "a digit"); an edge carries one key and is
  labelled with the real characters seen on it, so `a1x`, `a2x` become `a[12]x`;
- merge: states with the same key structure are merged and their labels united;
- truncation: a word may end in Accept.ANY_SUFFIX, a state that accepts any continuation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from indexlib.automaton.limits import TooComplex
from indexlib.automaton.ranges import Ranges, contains, from_code_points


class Accept(IntEnum):
    NO = 0
    YES = 1
    ANY_SUFFIX = 2
    """Accepts the word so far followed by anything: the end of a truncated word."""


@dataclass(frozen=True)
class Dfa:
    """State 0 is the start; `edges[state]` maps each target to the characters leading there."""

    accept: tuple[Accept, ...]
    edges: tuple[dict[int, Ranges], ...]

    @property
    def num_states(self) -> int:
        return len(self.accept)

    def accepts(self, word: str) -> bool:
        state = 0
        for char in word:
            if self.accept[state] == Accept.ANY_SUFFIX:
                return True
            code_point = ord(char)
            next_state = next(
                (target for target, chars in self.edges[state].items() if contains(chars, code_point)), None
            )
            if next_state is None:
                return False
            state = next_state
        return self.accept[state] != Accept.NO


def build_dfa(words: Iterable[tuple[str, str, Accept]], max_states: int, merge: bool) -> Dfa:
    """`words`: (keys, text, accept) sorted by keys, where keys[i] is the key of text[i] and keys may be cut short
    (then accept is ANY_SUFFIX). Raises TooComplex as soon as the DFA needs more than `max_states` states."""
    children: list[dict[str, int]] = [{}]
    labels: list[dict[str, set[int]]] = [{}]
    accept: list[Accept] = [Accept.NO]
    register: dict[tuple[object, ...], int] = {}
    path = [0]  # states along the previous word: path[i + 1] is the child of path[i] on previous_keys[i]
    previous_keys = ""

    def signature(state: int) -> tuple[object, ...]:
        keys = sorted(children[state])
        if merge:
            return accept[state], tuple((key, children[state][key]) for key in keys)
        return accept[state], tuple((key, children[state][key], frozenset(labels[state][key])) for key in keys)

    def replace_or_register(depth: int) -> None:
        state = path[depth]
        twin = register.setdefault(signature(state), state)
        if twin != state:
            children[path[depth - 1]][previous_keys[depth - 1]] = twin
            if merge:
                for key, chars in labels[state].items():
                    labels[twin][key] |= chars
        elif len(register) >= max_states:  # the start state is never registered
            raise TooComplex(f"minimal DFA over {max_states} states")

    for keys, text, word_accept in words:
        common = 0
        shorter = min(len(previous_keys), len(keys))
        while common < shorter and previous_keys[common] == keys[common]:
            labels[path[common]][keys[common]].add(ord(text[common]))
            common += 1
        if accept[path[common]] == Accept.ANY_SUFFIX:
            continue  # a truncated word already accepts this one
        for depth in range(len(path) - 1, common, -1):
            replace_or_register(depth)
        del path[common + 1 :]
        for position in range(common, len(keys)):
            children.append({})
            labels.append({})
            accept.append(Accept.NO)
            child = len(accept) - 1
            children[path[-1]][keys[position]] = child
            labels[path[-1]][keys[position]] = {ord(text[position])}
            path.append(child)
        accept[path[-1]] = max(accept[path[-1]], word_accept)
        previous_keys = keys
    for depth in range(len(path) - 1, 0, -1):
        replace_or_register(depth)
    return _renumber(children, labels, accept)


def _renumber(children: list[dict[str, int]], labels: list[dict[str, set[int]]], accept: list[Accept]) -> Dfa:
    """Keep the states reachable from the start, numbered in breadth-first order; group edges by target."""
    order, number = [0], {0: 0}
    for state in order:
        for child in children[state].values():
            if child not in number:
                number[child] = len(order)
                order.append(child)
    edges: list[dict[int, Ranges]] = []
    for state in order:
        by_target: dict[int, set[int]] = {}
        for key, child in children[state].items():
            by_target.setdefault(number[child], set()).update(labels[state][key])
        edges.append({target: from_code_points(chars) for target, chars in by_target.items()})
    return Dfa(tuple(accept[state] for state in order), tuple(edges))
