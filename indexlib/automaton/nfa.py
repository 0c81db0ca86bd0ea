"""Syntax tree -> trimmed, epsilon-free NFA over code-point ranges, and the checks run on pairs of them.

No backtracking anywhere: emptiness of a product and inclusion by on-the-fly subset construction cost at most
(states x states) pairs and (edges x edges) edge tests, which the callers meter (limits.py). NFAs are trimmed
(every edge leads to a state that can still accept), so "some state is still alive" means "some continuation is
accepted": prefix queries and the inclusion check rely on it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from indexlib.automaton.limits import TooComplex, WorkMeter
from indexlib.automaton.syntax import Chars, Concat, Node, Union

Edge = tuple[int, int, int]  # (low, high, target): any code point in [low, high] leads to target


@dataclass(frozen=True)
class RangeNfa:
    """State 0 is the start."""

    accepting: tuple[bool, ...]
    edges: tuple[tuple[Edge, ...], ...]
    empty: bool
    """The language is empty (the start state cannot reach an accepting state)."""


def compile_nfa(node: Node, max_states: int, max_closure_work: int) -> RangeNfa:
    """Thompson construction, then epsilon removal by closures (both capped: TooComplex), then trimming."""
    epsilon: list[list[int]] = []
    moves: list[list[Edge]] = []

    def new_state() -> int:
        if len(epsilon) >= max_states:
            raise TooComplex(f"NFA over {max_states} states")
        epsilon.append([])
        moves.append([])
        return len(epsilon) - 1

    def fragment(node: Node) -> tuple[int, int]:
        """Fresh states for `node`: (entry, exit)."""
        entry = current = new_state()
        if isinstance(node, Chars):
            exit_ = new_state()
            moves[entry].extend((low, high, exit_) for low, high in node.ranges)
            return entry, exit_
        if isinstance(node, Concat):
            for item in node.items:
                current = then(current, item)
            return entry, current
        if isinstance(node, Union):
            exit_ = new_state()
            for option in node.options:
                start, end = fragment(option)
                epsilon[entry].append(start)
                epsilon[end].append(exit_)
            return entry, exit_
        for _ in range(node.low):
            current = then(current, node.item)
        if node.high is None:  # a loop back to `current`
            start, end = fragment(node.item)
            epsilon[current].append(start)
            epsilon[end].append(current)
            return entry, current
        exit_ = new_state()
        for _ in range(node.high - node.low):
            epsilon[current].append(exit_)
            current = then(current, node.item)
        epsilon[current].append(exit_)
        return entry, exit_

    def then(current: int, node: Node) -> int:
        start, end = fragment(node)
        epsilon[current].append(start)
        return end

    start, final = fragment(node)
    meter = WorkMeter(max_closure_work, "epsilon closure")
    number = {start: 0}
    order = [start]
    accepting: list[bool] = []
    edges: list[set[Edge]] = []
    for state in order:  # grows while we iterate: only targets of character moves become states
        closure = _closure(epsilon, moves, state, meter)
        accepting.append(final in closure)
        out: set[Edge] = set()
        for member in closure:
            for low, high, target in moves[member]:
                if target not in number:
                    number[target] = len(order)
                    order.append(target)
                out.add((low, high, number[target]))
        edges.append(out)
    return _trim(accepting, edges)


def _closure(epsilon: list[list[int]], moves: list[list[Edge]], state: int, meter: WorkMeter) -> set[int]:
    reached, stack = {state}, [state]
    while stack:
        for target in epsilon[stack.pop()]:
            if target not in reached:
                reached.add(target)
                stack.append(target)
    meter.spend(len(reached) + sum(len(moves[member]) for member in reached))
    return reached


def _trim(accepting: list[bool], edges: list[set[Edge]]) -> RangeNfa:
    predecessors: list[list[int]] = [[] for _ in accepting]
    for state, out in enumerate(edges):
        for _, _, target in out:
            predecessors[target].append(state)
    live = {state for state, accepts in enumerate(accepting) if accepts}
    stack = list(live)
    while stack:
        for predecessor in predecessors[stack.pop()]:
            if predecessor not in live:
                live.add(predecessor)
                stack.append(predecessor)
    trimmed = tuple(
        tuple(sorted(edge for edge in out if edge[2] in live)) if state in live else ()
        for state, out in enumerate(edges)
    )
    return RangeNfa(tuple(accepting), trimmed, empty=0 not in live)


def run(nfa: RangeNfa, word: str) -> set[int]:
    """The live states reached after reading `word` (empty: no string of the language starts with it)."""
    current = set() if nfa.empty else {0}
    for char in word:
        code_point = ord(char)
        current = {target for state in current for low, high, target in nfa.edges[state] if low <= code_point <= high}
        if not current:
            break
    return current


def intersects(first: RangeNfa, second: RangeNfa, meter: WorkMeter) -> bool:
    """Some string is in both languages: depth-first search over reachable state pairs."""
    if first.empty or second.empty:
        return False
    seen = {(0, 0)}
    stack = [(0, 0)]
    while stack:
        left, right = stack.pop()
        if first.accepting[left] and second.accepting[right]:
            return True
        right_edges = second.edges[right]
        for low, high, left_target in first.edges[left]:
            meter.spend(len(right_edges))
            for right_low, right_high, right_target in right_edges:
                pair = (left_target, right_target)
                if low <= right_high and right_low <= high and pair not in seen:
                    seen.add(pair)
                    stack.append(pair)
    return False


def included(sub: RangeNfa, sup: RangeNfa, meter: WorkMeter) -> bool:
    """Every string of `sub` is in `sup`. Explores pairs (state of sub, exact set of sup states) reached by a
    common string, determinising `sup` on the fly; a string sub accepts and sup cannot is a counterexample."""
    if sub.empty:
        return True
    start = (0, frozenset((0,)))
    seen = {start}
    stack = [start]
    while stack:
        state, options = stack.pop()
        if sub.accepting[state] and not any(sup.accepting[option] for option in options):
            return False
        sup_edges = [edge for option in options for edge in sup.edges[option]]
        meter.spend(len(sup_edges))
        for low, high, target in sub.edges[state]:
            meter.spend(len(sup_edges))
            # Cut [low, high] where a sup edge starts or ends, so each piece is inside or outside every sup edge.
            cuts = sorted(
                {low, high + 1}
                | {point for edge in sup_edges for point in (edge[0], edge[1] + 1) if low < point <= high}
            )
            for piece_low, next_low in pairwise(cuts):
                meter.spend(len(sup_edges))
                following = frozenset(
                    sup_target
                    for sup_low, sup_high, sup_target in sup_edges
                    if sup_low <= piece_low and next_low <= sup_high + 1
                )
                if not following:
                    return False  # sub is trimmed: `target` still accepts some continuation, sup none
                pair = (target, following)
                if pair not in seen:
                    seen.add(pair)
                    stack.append(pair)
    return True


def holds_any(nfa: RangeNfa, ordered: Sequence[str]) -> bool:
    """Some value of `ordered` (sorted, distinct) is in the language. Reads the values as a trie alongside the NFA:
    the values sharing a prefix are one slice, read once, and a slice is dropped as soon as no string of the
    language starts with its prefix, so a 100,000-value IN list against the regex of a few tags reads a few
    characters per value instead of running the NFA over each value."""
    if nfa.empty or not ordered:
        return False
    stack = [({0}, 0, 0, len(ordered))]  # (states after the prefix, its length, the slice of values with it)
    while stack:
        states, depth, first, stop = stack.pop()
        if len(ordered[first]) == depth:  # the prefix itself is a value: it sorts first in its slice
            if any(nfa.accepting[state] for state in states):
                return True
            first += 1
        while first < stop:
            code_point = ord(ordered[first][depth])
            following = ordered[first][:depth] + chr(code_point + 1) if code_point < 0x10FFFF else None
            end = stop if following is None else bisect_left(ordered, following, first, stop)
            reached = {
                target for state in states for low, high, target in nfa.edges[state] if low <= code_point <= high
            }
            if reached:
                stack.append((reached, depth + 1, first, end))
            first = end
    return False


def only_values(nfa: RangeNfa, values: Iterable[str]) -> bool:
    """Every string of the language is one of `values`. Walks the NFA against the sorted values, where the values
    starting with a prefix form one slice; only the prefixes the NFA can produce are visited."""
    if nfa.empty:
        return True
    ordered = sorted(set(values))
    if not ordered:
        return False
    start = (0, "", 0, len(ordered))  # (state, prefix read, slice of the values starting with the prefix)
    seen = {start[:2]}
    stack = [start]
    while stack:
        state, prefix, first, stop = stack.pop()
        if nfa.accepting[state] and ordered[first] != prefix:  # the prefix itself would sort first
            return False
        for low, high, target in nfa.edges[state]:
            for code_point in range(low, high + 1):
                extended = prefix + chr(code_point)
                begin = bisect_left(ordered, extended, first, stop)
                if begin == stop or not ordered[begin].startswith(extended):
                    return False  # trimmed: strings of the language start with `extended`, no value does
                end = _end_of_prefix(ordered, extended, begin, stop)
                if (target, extended) not in seen:
                    seen.add((target, extended))
                    stack.append((target, extended, begin, end))
    return True


def _end_of_prefix(ordered: list[str], prefix: str, begin: int, stop: int) -> int:
    """The index after the values of ordered[begin:stop] that start with `prefix` (they come first)."""
    return bisect_left(ordered, True, begin, stop, key=lambda value: not value.startswith(prefix))
